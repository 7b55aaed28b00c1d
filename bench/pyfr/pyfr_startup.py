"""What PyFR 3.1's CUDA backend compiles at start-up with an empty kernel
cache, for this package and upstream GiMMiK 4.0, measured without a GPU.

For each operator an Euler case uses (M0, M132, M3 of an element type and
order; beta = 1 for M3) the script builds the generator as PyFR does
(`CUDAMatMul(A, beta=, aligne=16, n=, ldb=n, ldc=n)`, `kernels(float64,
kname, compute_capability=(9, 0))`), takes the first `gimmik-nkerns` = 8
candidates (no feedback: an upper bound on what a walk compiles, since
feedback only prunes) and compiles each with NVRTC exactly as PyFR does
(`extern "C" { src }`, `--gpu-architecture=sm_90 --ftz=true --fmad=true`).
PyFR's cache is keyed on the source, so a source equal to an earlier one
of the same walk costs nothing and is counted once.

Operators PyFR's dense filter sends to cuBLAS (more than 28 distinct
|values| and more than 15 % non-zeros) are listed with `sends=False`: they
cost nothing as shipped and everything with the filter off (`-relax`).

NVRTC's CPU seconds (the process's, one compile at a time in it, so other
load on the machine does not count) are the start-up cost PyFR pays for
each candidate on the host; the library comes from --nvrtc or
$GIMMIK_NVRTC_LIB (e.g. the nvidia-cuda-nvrtc wheel's libnvrtc.so.*, its
folder on LD_LIBRARY_PATH for libnvrtc-builtins).

--cuts emulates what-if offers of ours (bench/pyfr/cuts.py: the
generator's start-up cut with its constants set otherwise).

    PYTHONPATH=. python3 bench/pyfr/pyfr_startup.py \\
        --up .whl/pyfr/gimmik-4.0-py3-none-any.whl \\
        --nvrtc PATH/libnvrtc.so.13 --out startup.csv
    PYTHONPATH=. python3 bench/pyfr/pyfr_startup.py --summary startup.csv
"""

import argparse
import concurrent.futures as cf
import csv
import ctypes
import hashlib
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench import OPERATORS  # noqa: E402
from bench.pyfr.cuts import ARCH, CUTS, offered  # noqa: E402
from bench.pyfr.walk_replay import (PYFR_CUDA, PYFR_FLAGS,  # noqa: E402
                                    kname_of, pyfr_aligne)
from gimmik.pyfr import euler_nvars, panel  # noqa: E402

PYFR_NKERNS = PYFR_CUDA.nkerns

# The operators of an Euler case, with PyFR's beta for each
EULER_MATS = (('m0', 0.0), ('m132', 0.0), ('m3', 1.0))

# Elements of the pyfr-client's box cases (ETYPE:N -> N^3 cubes split)
CASE_ELEMENTS = {'hex': 28**3, 'pri': 2*22**3, 'tet': 6*18**3,
                 'pyr': 6*16**3}

NVRTC_ENV = 'GIMMIK_NVRTC_LIB'

# H100 machine seconds of NVRTC per CPU second measured here, by family:
# the relaxed order-4 walks of bench/results/pyfr-e2e-h100-inprocess.csv
# (cold minus warm walk seconds: tet 6.36 s, pyr 4.92 s) over this script
# at that commit (pyfr-startup-cpu-dbe0a2e.csv: pyr's 15 mma-gemm
# compiles 2.30 s; tet's 12 mma-gemm 1.51 s and 3 unrolled 2.00 s)
DEVICE_PER_CPU = {'mma-gemm': 2.14, None: 1.56}

FIELDS = ['pkg', 'cut', 'op', 'etype', 'order', 'mat', 'm', 'k', 'nnz', 'beta',
          'n', 'sends', 'rank', 'variant', 'gen_s', 'src_bytes', 'src_sha',
          'dup_of', 'cpu_s', 'wall_s', 'cubin_bytes', 'error']


# -- pure parts --------------------------------------------------------------
def startup_operators(ops, orders, etypes):
    """[(name, A, beta, n, sends)] of the Euler operators of each (order,
    element type), n the pyfr-client case's panel width."""
    out = []
    for p in orders:
        for e in etypes:
            _, n = panel(euler_nvars(e)*CASE_ELEMENTS[e], euler_nvars(e))
            for mat, beta in EULER_MATS:
                name = f'p{p}-{e}-{mat}'
                A = np.asarray(ops[name], dtype=np.float64)
                out.append((name, A, beta, n, PYFR_CUDA.sends(A)))
    return out


def mark_duplicates(cands):
    """For each candidate dict (with 'src_sha', in offer order) set
    'dup_of' to the rank of the first equal source of the walk, or ''."""
    first = {}
    for c in cands:
        c['dup_of'] = first.get(c['src_sha'], '')
        first.setdefault(c['src_sha'], c['rank'])
    return cands


def label(row):
    """'up', or 'ours' with the cut emulated ('ours' for as-is)."""
    cut = row.get('cut') or 'as-is'
    return row['pkg'] if row['pkg'] != 'ours' or cut == 'as-is' \
        else f'ours:{cut}'


def summarise(rows):
    """{(etype, order, pkg, 'shipped'|'relaxed'): dict(cpu_s, ncomp, src_kb,
    gen_s, device_s)}: NVRTC seconds, compiles and source KiB of the
    distinct sources compiled, the seconds generating every candidate, and
    the NVRTC seconds estimated for the H100 machine (DEVICE_PER_CPU);
    'shipped' counts the operators PyFR sends with its filter on,
    'relaxed' all of them."""
    out = {}
    for r in rows:
        if r['error']:
            continue
        modes = ('shipped', 'relaxed') if r['sends'] in (True, 'True') \
            else ('relaxed',)
        for mode in modes:
            key = (r['etype'], int(r['order']), label(r), mode)
            s = out.setdefault(key, dict.fromkeys(
                ('cpu_s', 'ncomp', 'src_kb', 'gen_s', 'device_s'), 0))
            s['gen_s'] += float(r['gen_s'])
            if r['dup_of'] == '':
                s['cpu_s'] += float(r['cpu_s'])
                family = r['variant'].split('/')[0]
                per = DEVICE_PER_CPU.get(family, DEVICE_PER_CPU[None])
                s['device_s'] += float(r['cpu_s'])*per
                s['ncomp'] += 1
                s['src_kb'] += int(r['src_bytes'])/1024
    return out


# -- NVRTC -------------------------------------------------------------------
class NVRTC:
    """libnvrtc through ctypes, as PyFR calls it."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p

    def _check(self, err, what):
        if err:
            raise RuntimeError(f'{what}: '
                               f'{self.lib.nvrtcGetErrorString(err)}')

    def compile(self, src, flags):
        """(cubin bytes, CPU seconds of the process, wall seconds)."""
        lib, prog = self.lib, ctypes.c_void_p()
        self._check(lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(),
                                           b'kernel.cu', 0, None, None),
                    'nvrtcCreateProgram')
        try:
            opts = (ctypes.c_char_p*len(flags))(*(f.encode() for f in flags))
            c0, w0 = time.process_time(), time.perf_counter()
            err = lib.nvrtcCompileProgram(prog, len(flags), opts)
            cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            if err:
                size = ctypes.c_size_t()
                lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
                log = ctypes.create_string_buffer(size.value)
                lib.nvrtcGetProgramLog(prog, log)
                raise RuntimeError(log.value.decode()[-1500:])
            size = ctypes.c_size_t()
            self._check(lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)),
                        'nvrtcGetCUBINSize')
            return size.value, cpu, wall
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))


_nvrtc = {}


def _compile(lib, src):
    if lib not in _nvrtc:
        _nvrtc[lib] = NVRTC(lib)
    flags = [f'--gpu-architecture=sm_{ARCH[0]}{ARCH[1]}', *PYFR_FLAGS]
    try:
        size, cpu, wall = _nvrtc[lib].compile(f'extern "C"\n{{\n{src}\n}}',
                                              flags)
        return {'cubin_bytes': size, 'cpu_s': f'{cpu:.3f}',
                'wall_s': f'{wall:.3f}', 'error': ''}
    except RuntimeError as e:
        return {'cubin_bytes': '', 'cpu_s': '', 'wall_s': '',
                'error': str(e).replace('\n', ' ')[:300]}


def first_candidates(mm, A, nkerns=PYFR_NKERNS):
    """The first nkerns (src, meta, CPU seconds to generate it) a PyFR walk
    is offered, no feedback."""
    gen = mm.kernels(np.float64, kname=kname_of(A), compute_capability=ARCH)
    out, c0 = [], time.process_time()
    for src, meta in gen:
        c1 = time.process_time()
        out.append((src, meta, c1 - c0))
        if len(out) == nkerns:
            gen.close()
            break
        c0 = time.process_time()
    return out


def ours_candidates(mm, A, cut):
    """(src, meta, CPU seconds) of what a walk is offered under `cut`."""
    out, c0 = [], time.process_time()
    for cand in offered(mm, cut, PYFR_NKERNS):
        src, meta = mm.render(cand, np.float64, kname_of(A))
        c1 = time.process_time()
        out.append((src, meta, c1 - c0))
        c0 = c1
    return out


def walk_rows(pkg, cut, up_path, lib, name, A, beta, n, sends):
    """One operator's first candidates for `pkg` ('ours', under `cut`, or
    'up'), compiled; a list of CSV rows."""
    if pkg == 'ours':
        from gimmik.cuda import CUDAMatMul
    else:
        from bench.upstream import load_upstream
        CUDAMatMul = load_upstream(up_path).CUDAMatMul
    mm = CUDAMatMul(A, beta=beta, aligne=pyfr_aligne(), n=n, ldb=n, ldc=n)
    p, etype, mat = name.split('-')
    # as-is: what kernels() offers (the way any version of either
    # package is asked)
    cands = (ours_candidates(mm, A, cut) if pkg == 'ours' and cut != 'as-is'
             else first_candidates(mm, A))
    rows = []
    for rank, (src, meta, gen_s) in enumerate(cands):
        rows.append({
            'pkg': pkg, 'cut': cut if pkg == 'ours' else '', 'op': name,
            'etype': etype, 'order': p[1:], 'mat': mat, 'm': A.shape[0],
            'k': A.shape[1],
            'nnz': int(np.count_nonzero(A)), 'beta': beta, 'n': n,
            'sends': sends, 'rank': rank,
            'variant': meta.get('variant', meta.get('tplname', '')),
            'src_bytes': len(src.encode()),
            'src_sha': hashlib.sha1(src.encode()).hexdigest()[:12],
            'gen_s': f'{gen_s:.3f}', '_src': src})
    mark_duplicates(rows)
    for r in rows:
        src = r.pop('_src')
        r.update(_compile(lib, src) if r['dup_of'] == '' else
                 {'cubin_bytes': '', 'cpu_s': '0', 'wall_s': '0',
                  'error': ''})
    return rows


def read_times(paths, n=None):
    """{op: {variant: seconds}} of this package's candidates in
    bench/pyfr/pyfr_walk.py candidate CSVs (at panel width n when given); an
    operator's times all come from the first file that has it, so that
    times of one run are compared."""
    out = {}
    for path in paths:
        got = {}
        with open(path) as f:
            for r in csv.DictReader(f):
                if r['kind'] != 'ours' or not r['time_s'] or \
                        (n and int(r['n']) != n):
                    continue
                got.setdefault(r['op'], {})[r['variant']] = \
                    float(r['time_s'])
        for op, t in got.items():
            out.setdefault(op, t)
    return out


def recorded(times, variant):
    """A variant's recorded time; a tile held to fewer registers by its
    launch bound ('blocks' parameter) falls back to its uncapped twin's."""
    if variant in times:
        return times[variant]
    twin = '/'.join(p for p in variant.split('/')
                    if not p.startswith('blocks'))
    return times.get(twin)


def offer_quality(rows, times):
    """{(op, label): best recorded time of the candidates offered over the
    best recorded of all, or None where none offered was recorded}."""
    offered = {}
    for r in rows:
        offered.setdefault((r['op'], label(r)), []).append(r['variant'])
    out = {}
    for (op, lab), variants in offered.items():
        t = times.get(op)
        got = [x for x in (recorded(t, v) for v in variants) if x] \
            if t else []
        out[(op, lab)] = min(got)/min(t.values()) if got else None
    return out


def print_summary(rows):
    """NVRTC CPU seconds + generation seconds of each (case, mode), every
    label (ours under each cut, up) beside upstream's."""
    s = summarise(rows)
    labels = sorted({lab for _, _, lab, _ in s},
                    key=lambda x: (x == 'up', x))
    print('case / mode, then per label: NVRTC s + generation s (compiles, '
          'source KiB) ~NVRTC s estimated on the H100 machine; last: ours '
          'as-is minus up')
    for e, o, mode in sorted({(e, o, mode) for e, o, _, mode in s}):
        line, tot = f'{e:4} p{o} {mode:8}', {}
        for lab in labels:
            a = s.get((e, o, lab, mode))
            if a is None:
                continue
            tot[lab] = a['cpu_s'] + a['gen_s']
            line += (f' | {lab} {tot[lab]:5.2f} ({a["ncomp"]}, '
                     f'{a["src_kb"]:.0f}) ~{a["device_s"]:.1f}')
        if 'ours' in tot:
            line += f' | {tot["ours"] - tot.get("up", 0):+.2f}'
        print(line)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--ops', default=os.path.join(OPERATORS,
                                                  'pyfr-ops.npz'))
    ap.add_argument('--orders', type=int, nargs='+', default=[3, 4])
    ap.add_argument('--etypes', nargs='+',
                    default=['hex', 'pri', 'tet', 'pyr'])
    ap.add_argument('--pkgs', nargs='+', default=['ours', 'up'])
    ap.add_argument('--cuts', nargs='+', default=['as-is'],
                    choices=['as-is'] + sorted(CUTS),
                    help="cuts emulated on ours' candidates (as-is: "
                    "kernels() asked, no cut emulated)")
    ap.add_argument('--up', help='upstream GiMMiK 4.0 wheel or folder')
    ap.add_argument('--nvrtc', default=os.environ.get(NVRTC_ENV))
    ap.add_argument('--jobs', type=int, default=2)
    ap.add_argument('--out', help='CSV of every candidate')
    ap.add_argument('--summary', help='print the summary of a CSV')
    ap.add_argument('--times', nargs='+', default=[],
                    help='with --summary: pyfr_walk candidate CSVs; prints '
                    'the best offered over the best recorded, per operator')
    ap.add_argument('--times-n', type=int, default=110080)
    args = ap.parse_args(argv)

    if args.summary:
        with open(args.summary) as f:
            rows = list(csv.DictReader(f))
        print_summary(rows)
        if args.times:
            q = offer_quality(rows, read_times(args.times, args.times_n))
            for op in sorted({op for op, _ in q}):
                print(f'{op:12}', '  '.join(
                    f'{lab} {"-" if v is None else f"{v:.3f}"}'
                    for (o, lab), v in sorted(q.items()) if o == op))
        return 0
    if not args.nvrtc or not args.out:
        ap.error('--nvrtc (or $GIMMIK_NVRTC_LIB) and --out are needed')
    if 'up' in args.pkgs and not args.up:
        ap.error('--up names upstream GiMMiK 4.0 (wheel or folder)')
    ops = np.load(args.ops)
    todo = [(pkg, cut, op) for op in startup_operators(ops, args.orders,
                                                       args.etypes)
            for pkg in args.pkgs
            for cut in (args.cuts if pkg == 'ours' else [''])]
    rows = []
    with cf.ProcessPoolExecutor(args.jobs) as pool:
        futs = {pool.submit(walk_rows, pkg, cut, args.up, args.nvrtc, *op):
                (pkg, cut, op[0]) for pkg, cut, op in todo}
        pkg_op = futs.get
        for fut in futs:
            got = fut.result()
            rows += got
            print(pkg_op(fut), len(got), 'candidates',
                  f'{sum(float(r["cpu_s"] or 0) for r in got):.2f} s',
                  flush=True)
    with open(args.out, 'w', newline='') as f:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        w.writerows(rows)
    print_summary(rows)
    return 0


if __name__ == '__main__':
    sys.exit(main())
