"""Offline ISA report for AMD GPUs: compile a generated HIP source with the
real AMDGPU back end of clang (no GPU, no ROCm needed) and read what the
compiler says about it."""

from concurrent.futures import ThreadPoolExecutor
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile

from gimmik import cache
from gimmik.errors import RuntimeUnavailable
from gimmik.validate import GFX_ARCH as _ARCH, add_dtype_argument

# Arches the report is made for by default (MI250X, MI300X)
DEFAULT_ARCHES = ('gfx90a', 'gfx942')


# Environment variable naming the clang to use (a path or a command name)
CLANG_ENV = 'GIMMIK_CLANG'

# Tried in this order on PATH when CLANG_ENV is not set
CLANG_NAMES = ('clang-19', 'clang-20', 'clang-18', 'clang')

CLANG_FLAGS = ('-x', 'hip', '--cuda-device-only', '-nogpulib', '-nogpuinc',
               '-O3', '-S', '-w')

# What hiprtc predefines and the kernels use; __syncthreads() keeps HIP's
# fences, as a bare s_barrier would lose the LDS wait before it
PRELUDE = '''\
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __launch_bounds__(n) __attribute__((amdgpu_flat_work_group_size(1, n)))
struct gimmik_isa_dim3 { unsigned x, y, z; };
#define threadIdx (gimmik_isa_dim3{__builtin_amdgcn_workitem_id_x(), \\
    __builtin_amdgcn_workitem_id_y(), __builtin_amdgcn_workitem_id_z()})
#define blockIdx (gimmik_isa_dim3{__builtin_amdgcn_workgroup_id_x(), \\
    __builtin_amdgcn_workgroup_id_y(), __builtin_amdgcn_workgroup_id_z()})
#define blockDim (gimmik_isa_dim3{__builtin_amdgcn_workgroup_size_x(), \\
    __builtin_amdgcn_workgroup_size_y(), __builtin_amdgcn_workgroup_size_z()})
#define gridDim (gimmik_isa_dim3{ \
    __builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x(), \
    __builtin_amdgcn_grid_size_y() / __builtin_amdgcn_workgroup_size_y(), \
    __builtin_amdgcn_grid_size_z() / __builtin_amdgcn_workgroup_size_z()})
#define warpSize 64
__device__ inline void __syncthreads()
{
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
#line 1 "gimmik_kernel.hip"
'''

# The report's keys, in table order; every arch gives all of them.
KEYS = ('vgprs', 'agprs', 'sgprs', 'scratch_bytes', 'lds_bytes', 'occupancy',
        'mfma', 'global_loads', 'nt_loads', 'vmcnt0', 'lgkmcnt0',
        'instructions')

# Bytes moved by each vector-memory load/store suffix
_WIDTH = {'byte': 1, 'ubyte': 1, 'sbyte': 1, 'short': 2, 'ushort': 2,
          'sshort': 2, 'dword': 4, 'dwordx2': 8, 'dwordx3': 12,
          'dwordx4': 16, 'b32': 4, 'b64': 8, 'b96': 12, 'b128': 16}

_MEMOP = re.compile(r'(global|buffer|flat)_(load|store)_([a-z0-9]+)\b')
# Non-temporal: `nt` on gfx94x, `slc` on gfx90a and older
_NT = re.compile(r'\b(nt|slc)\b')
_COMMENT_INT = re.compile(r';\s*(\w+):\s*(\d+)')


class IsaError(RuntimeError):
    """clang rejected a source; the message holds its diagnostics."""


# -- finding and running clang ---------------------------------------------
_clang = {}


def find_clang():
    """(path, version line) of the clang that compiles for AMDGPU."""
    if 'path' in _clang:
        return _clang['path'], _clang['version']
    named = os.environ.get(CLANG_ENV)
    if named:
        path = shutil.which(named)
        if path is None:
            raise RuntimeUnavailable(f'{CLANG_ENV}={named!r} is not an '
                                     f'executable clang')
    else:
        path = next(filter(None, map(shutil.which, CLANG_NAMES)), None)
        if path is None:
            raise RuntimeUnavailable(
                f'no clang found (tried {", ".join(CLANG_NAMES)} on PATH); '
                f'install clang-19 (AMDGPU back end) or set {CLANG_ENV}')
    try:
        out = subprocess.run([path, '--version'], capture_output=True,
                             text=True, timeout=60)
    except OSError as e:
        raise RuntimeUnavailable(f'cannot run {path}: {e}') from e
    version = out.stdout.splitlines()[0] if out.stdout else '?'
    _clang.update(path=path, version=version)
    return path, version


def check_arch(arch, arg='arch'):
    if not isinstance(arch, str):
        raise TypeError(f'{arg} must be a str, not {type(arch).__name__}')
    if not _ARCH.match(arch):
        raise ValueError(f'{arg} {arch!r} is not a gfx arch name')
    return arch


def _check_src(src):
    if not isinstance(src, str):
        raise TypeError(f'src must be a str, not {type(src).__name__}')
    if '\0' in src:
        raise ValueError('src contains a NUL character')
    return src


def assemble(src, arch):
    """The AMDGPU assembly (.s text) clang makes of a generated source."""
    src, arch = _check_src(src), check_arch(arch)
    clang, _ = find_clang()
    with tempfile.TemporaryDirectory(prefix='gimmik-isa-') as tmp:
        hip, asm = os.path.join(tmp, 'k.hip'), os.path.join(tmp, 'k.s')
        with open(hip, 'w') as f:
            f.write(PRELUDE + src)
        cmd = [clang, *CLANG_FLAGS, f'--offload-arch={arch}', '-o', asm, hip]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise IsaError(f'clang failed for {arch} (exit {res.returncode}):'
                           f'\n{res.stderr.strip()}')
        with open(asm) as f:
            return f.read()


# -- reading the assembly ----------------------------------------------------
def _kernel_body(asm, kname):
    """Instruction lines of kernel kname (label to .Lfunc_end)."""
    m = re.search(rf'^{re.escape(kname)}:.*?$(.*?)^\.Lfunc_end\d+:', asm,
                  re.M | re.S)
    if not m:
        raise IsaError(f'kernel {kname} not found in the assembly')
    body = []
    for line in m.group(1).splitlines():
        line = line.split(';', 1)[0].strip()
        if line and not line.startswith('.') and not line.endswith(':'):
            body.append(line)
    return body


def _kernel_info(asm, kname):
    """The `; Key: value` comments after kernel kname's code."""
    start = asm.find(f'.size\t{kname}, ')
    if start < 0:
        start = asm.find(f'.size {kname}, ')
    stop = asm.find('; Kernel info:', start)
    end = asm.find('\t.text', stop + 1)
    if start < 0 or stop < 0:
        raise IsaError(f'no kernel info for {kname} in the assembly')
    return {k: int(v) for k, v in
            _COMMENT_INT.findall(asm[stop:end if end > 0 else None])}


def _metadata(asm, kname):
    """Scalar entries of kernel kname's amdhsa.kernels metadata record."""
    meta = asm[asm.find('amdhsa.kernels:'):]
    for rec in re.split(r'\n  - ', meta)[1:]:
        fields = dict(re.findall(r'^\s*\.([a-z_]+):\s+(\S+)\s*$', rec, re.M))
        if fields.get('name') == kname:
            return fields
    raise IsaError(f'no metadata for kernel {kname}')


def kernel_names(asm):
    return re.findall(r'^\s*\.amdhsa_kernel\s+(\S+)', asm, re.M)


_REG = re.compile(r'\b([va])(?:\[(\d+):(\d+)\]|(\d+))')


def _regs(operands):
    """The VGPRs and AGPRs named in an operand string, e.g. 'v[2:3], a4'."""
    out = set()
    for kind, lo, hi, one in _REG.findall(operands):
        lo, hi = (int(one), int(one)) if one else (int(lo), int(hi))
        out.update(f'{kind}{r}' for r in range(lo, hi + 1))
    return out


def early_waits(body):
    """Waits on vector memory that hold MFMAs back for loads they do not read:
    an `s_waitcnt vmcnt(N)` followed by v_mfma before the next load, which
    forces a load none of whose registers those MFMAs read: it undoes the
    next tile's pipelining."""
    pending, count = [], 0      # destination registers of outstanding ops
    for idx, ins in enumerate(body):
        op, _, operands = ins.partition(' ')
        mem = _MEMOP.match(op)
        if mem and mem.group(1) != 'flat':
            dest = operands.split(',', 1)[0]
            pending.append(_regs(dest) if mem.group(2) == 'load' else set())
            continue
        if op != 's_waitcnt' or 'vmcnt(' not in operands:
            continue
        keep = int(re.search(r'vmcnt\((\d+)\)', operands).group(1))
        forced, pending = pending[:max(0, len(pending) - keep)], \
            pending[max(0, len(pending) - keep):]
        read, mfma = set(), False
        for nxt in body[idx + 1:]:
            nop, _, nops = nxt.partition(' ')
            m = _MEMOP.match(nop)
            if m and m.group(2) == 'load':
                break
            if nop.startswith('v_mfma'):
                mfma = True
                read |= _regs(nops.split(',', 1)[1] if ',' in nops else '')
        if mfma and any(regs and not regs & read for regs in forced):
            count += 1
    return count


def parse(asm, kname=None):
    """The report dict of one kernel in a clang .s file."""
    names = kernel_names(asm)
    if kname is None:
        if len(names) != 1:
            raise IsaError(f'expected one kernel in the assembly, found '
                           f'{len(names)}: give kname')
        kname = names[0]
    body = _kernel_body(asm, kname)
    info = _kernel_info(asm, kname)
    meta = _metadata(asm, kname)

    loads, stores, mfma_kinds = {}, {}, {}
    nt_loads = nt_stores = flat = vm0 = lgkm0 = 0
    for ins in body:
        op, _, operands = ins.partition(' ')
        if op.startswith('v_mfma'):
            mfma_kinds[op] = mfma_kinds.get(op, 0) + 1
        elif op == 's_waitcnt':
            vm0 += 'vmcnt(0)' in operands
            lgkm0 += 'lgkmcnt(0)' in operands
        mem = _MEMOP.match(op)
        if mem:
            space, kind, suffix = mem.groups()
            if space == 'flat':
                flat += 1
                continue
            width = _WIDTH.get(suffix.split('_')[0], 0)
            nt = bool(_NT.search(operands))
            if kind == 'load':
                loads[width] = loads.get(width, 0) + 1
                nt_loads += nt
            else:
                stores[width] = stores.get(width, 0) + 1
                nt_stores += nt

    return {
        'kernel': kname,
        'vgprs': info['NumVgprs'],
        'agprs': info.get('NumAgprs', 0),
        'total_vgprs': info.get('TotalNumVgprs', info['NumVgprs']),
        'sgprs': info['NumSgprs'],
        'scratch_bytes': info['ScratchSize'],
        'vgpr_spills': int(meta.get('vgpr_spill_count', 0)),
        'sgpr_spills': int(meta.get('sgpr_spill_count', 0)),
        'lds_bytes': int(meta.get('group_segment_fixed_size',
                                  info.get('LDSByteSize', 0))),
        'occupancy': info['Occupancy'],
        'mfma': sum(mfma_kinds.values()),
        'mfma_kinds': mfma_kinds,
        'global_loads': dict(sorted(loads.items())),
        'nt_loads': nt_loads,
        'global_stores': dict(sorted(stores.items())),
        'nt_stores': nt_stores,
        'flat_ops': flat,
        'vmcnt0': vm0,
        'lgkmcnt0': lgkm0,
        'early_waits': early_waits(body),
        'instructions': len(body),
        'code_bytes': info.get('codeLenInByte', 0),
    }


# -- the cached entry point --------------------------------------------------
# Bumped whenever parse() changes what it reports, so old cache entries are
# not read back
REPORT_VERSION = 2

_memo = {}


def inspect(src, arch, kname=None):
    """Compile src for arch with clang and return its report: a dict with the
    keys of KEYS (and a few more: total_vgprs, spills, stores, mfma_kinds,
    early_waits, code_bytes), cached on disk."""
    src, arch = _check_src(src), check_arch(arch)
    clang, version = find_clang()
    key = hashlib.sha256('\0'.join(
        [str(REPORT_VERSION), version, clang, *CLANG_FLAGS, PRELUDE, arch,
         kname or '', src])
        .encode()).hexdigest()[:32]
    if key in _memo:
        return dict(_memo[key])

    # a cache entry of another shape is made again
    rep = cache.load_json('isa', key)
    try:
        rep['global_loads'] = {int(k): v for k, v in
                               rep['global_loads'].items()}
        rep['global_stores'] = {int(k): v for k, v in
                                rep['global_stores'].items()}
        if rep.get('arch') != arch or not all(
                isinstance(rep.get(k), (int, float, dict)) for k in KEYS):
            raise ValueError('incomplete entry')
    except (TypeError, KeyError, AttributeError, ValueError):
        rep = parse(assemble(src, arch), kname)
        rep['arch'] = arch
        cache.store_json('isa', key, rep)
    _memo[key] = rep
    return dict(rep)


def inspect_many(jobs, workers=None):
    """inspect() over [(src, arch)] in parallel clang processes; returns the
    reports in order (an IsaError in place of a report that failed)."""
    def one(job):
        try:
            return inspect(*job)
        except IsaError as e:
            return e
    workers = workers or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, jobs))


# -- loads batched: the waits a report may have ------------------------------
# Waits for all loads (vmcnt(0)) more often hide no latency
# (docs/hip-bounded-families.md)
LOADS_PER_VM0 = 8

# Families whose waves each run their own case of a switch on the wave index
WAVE_CASES = ('bstream-msplit', 'cstream-ksplit', 'mfma-dense')


def vm0_ok(rep, paths=1, waves=1):
    """Whether a report waits for all vector memory operations at most once per
    LOADS_PER_VM0 global loads, one wait a path allowed whatever its loads."""
    loads = sum(rep['global_loads'].values())
    return rep['vmcnt0'] <= max(paths*waves, loads / LOADS_PER_VM0)


def wave_paths(meta):
    """The waves of a block that run their own case of a candidate's kernel
    (1 for a family whose waves all run the same code)."""
    return meta['block'][1] if meta['tplname'] in WAVE_CASES else 1


# -- the `gimmik isa` sub-command ---------------------------------------------
COLUMNS = [
    # header     width  cell
    ('variant', 44, lambda r: r['variant']),
    ('arch', 7, lambda r: r['arch']),
    ('vgpr', 5, lambda r: r['vgprs']),
    ('agpr', 5, lambda r: r['agprs']),
    ('sgpr', 5, lambda r: r['sgprs']),
    ('scratch', 8, lambda r: r['scratch_bytes']),
    ('lds', 6, lambda r: r['lds_bytes']),
    ('occ', 4, lambda r: r['occupancy']),
    ('mfma', 5, lambda r: r['mfma']),
    ('loads', 16, lambda r: ' '.join(f'{w}B:{c}' for w, c
                                     in r['global_loads'].items()) or '-'),
    ('nt', 5, lambda r: r['nt_loads']),
    ('vm0', 5, lambda r: r['vmcnt0']),
    ('lgkm0', 6, lambda r: r['lgkmcnt0']),
    ('early', 6, lambda r: r['early_waits']),
    ('instr', 7, lambda r: r['instructions']),
    # gimmik.cost's estimate for the report's n columns
    ('est_us', 9, lambda r: r.get('est_us', '-')),
    ('est_copy', 9, lambda r: r.get('est_copy_frac', '-')),
]


def table(rows):
    """Plain-text table of report rows (each with 'variant' and 'arch')."""
    out = [' '.join(f'{h:<{w}}' if i < 2 else f'{h:>{w}}'
                    for i, (h, w, _) in enumerate(COLUMNS))]
    for r in rows:
        if 'error' in r:
            out.append(f'{r["variant"]:<44} {r["arch"]:<7} error: '
                       f'{r["error"].splitlines()[0]}')
            continue
        out.append(' '.join(f'{str(c(r)):<{w}}' if i < 2 else
                            f'{str(c(r)):>{w}}'
                            for i, (_, w, c) in enumerate(COLUMNS)))
    return '\n'.join(out)


def add_arguments(p):
    p.add_argument('operator', help='a MatrixMarket .mtx file or FILE.npz:KEY')
    p.add_argument('--arch', action='append', default=None,
                   help='gfx arch to compile for; repeat for several '
                        f'(default: {" ".join(DEFAULT_ARCHES)})')
    add_dtype_argument(p)
    p.add_argument('--beta', type=float, default=0.0,
                   help='beta of C = A*B + beta*C (default 0)')
    p.add_argument('--aligne', type=int, default=4,
                   help='row strides are a multiple of this many elements '
                        '(default 4; odd values disable the width-2 kernels)')
    p.add_argument('--n', type=int, default=None,
                   help='bake this n into the kernels (with ldb = ldc = n); '
                        'also the columns of the estimate (default '
                        'gimmik.cost.DEFAULT_N)')
    p.add_argument('--family', action='append', default=None,
                   help='only the candidates of this family (repeatable)')
    p.add_argument('--jobs', type=int, default=None,
                   help='parallel clang processes (default: CPU count)')
    p.add_argument('--json', action='store_true',
                   help='print the reports as JSON instead of a table')


def candidate_sources(A, arches, dtype='float64', beta=0.0, aligne=None,
                      n=None, families=None):
    """[(variant, arch, src)] for every HIP candidate of A on each arch
    (only those of `families` when given)."""
    from gimmik.hip import HIPMatMul
    sizes = dict(n=n, ldb=n, ldc=n) if n is not None else {}
    mm = HIPMatMul(A, beta=beta, aligne=aligne, **sizes)
    return [(meta['variant'], arch, src) for arch in arches
            for src, meta in mm.kernels(dtype, gcn_arch=arch)
            if not families or meta['tplname'] in families]


def _add_estimates(A, rows, args):
    """gimmik.cost's estimate of each row (est_us, est_copy_frac)."""
    from gimmik import cost
    from gimmik.hip import HIPMatMul
    sizes = dict(n=args.n, ldb=args.n, ldc=args.n) if args.n else {}
    mm = HIPMatMul(A, beta=args.beta, aligne=args.aligne, **sizes)
    cost.add_isa_estimates(mm, rows, args.dtype, args.n)


def run(args):
    from gimmik.operators import load_operator

    arches = [check_arch(a, '--arch') for a in (args.arch or DEFAULT_ARCHES)]
    if args.jobs is not None and args.jobs < 1:
        raise ValueError(f'--jobs must be at least 1, not {args.jobs}')
    name, A = load_operator(args.operator)
    if args.family:
        from gimmik.hip import CANDIDATES
        known = {row.family.name for row in CANDIDATES}
        for f in args.family:
            if f not in known:
                raise ValueError(f'--family {f!r} is not one of '
                                 f'{", ".join(sorted(known))}')
    cands = candidate_sources(A, arches, args.dtype, args.beta, args.aligne,
                              args.n, args.family)
    reps = inspect_many([(src, arch) for _, arch, src in cands], args.jobs)
    rows = []
    for (variant, arch, _), rep in zip(cands, reps):
        if isinstance(rep, Exception):
            rows.append({'variant': variant, 'arch': arch,
                         'error': str(rep)})
        else:
            rows.append({'variant': variant, **rep, 'arch': arch})
    _add_estimates(A, rows, args)

    if args.json:
        print(json.dumps({'operator': name, 'shape': list(A.shape),
                          'compiler': find_clang()[1], 'rows': rows},
                         indent=1))
    else:
        print(f'{name}: {A.shape[0]}x{A.shape[1]}, {args.dtype}, '
              f'beta={args.beta:g}; {find_clang()[1]}')
        print(table(rows))
    return 1 if any('error' in r for r in rows) else 0
