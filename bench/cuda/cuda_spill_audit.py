"""Audit: does any offered CUDA candidate spill to local memory?

Every candidate `CUDAMatMul(A, beta, **sizes).kernels(dtype,
compute_capability=cc)` offers (f64, and f32 with --dtypes) is compiled
with `nvcc -cubin -arch=sm_XY -O3 -Xptxas -v` for its own architecture
(cc (9, 0) -> sm_90, (8, 0) -> sm_80), and ptxas's registers, stack
frame and spill bytes are recorded beside the generator's register
estimate and launch bound.

Operators: the PyFR suites (bench/operators/*.npz, --ops globs) and, with
--thinned, each of them with its smallest entries dropped until it falls
just below the gates the candidate table tests (density 0.5, 8192 and
16384 non-zeros): operators of the same shape on other point sets land
there, and there the streaming families meet big operators.

Sizes (--sizes): rt4 (n at run time, aligne 4), rt2 (aligne 2), rt (no
alignment), baked (n = ldb = ldc = 110080, aligne 4: PyFR's panel).

Compiling is slow (tens of seconds for a big unrolled candidate), so
results are cached by source hash and architecture under --cache (an
ignored folder), nvcc runs under `nice`, a few sources per run.

    PYTHONPATH=. python3 bench/cuda/cuda_spill_audit.py [--ops GLOBS]
        [--thinned] [--sizes rt4,baked] [--archs sm_90,sm_80] [--jobs 2]
        [--max-nnz N] [--budget S]

Writes bench/results/cuda-spill-audit.csv (--out): one row per (operator,
sizes, arch, candidate); the summary lists the spilling candidates.
"""

import argparse
import concurrent.futures as cf
import csv
import fnmatch
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench import OPERATORS, RESULTS  # noqa: E402

ARCH_CC = {'sm_80': (8, 0), 'sm_90': (9, 0)}
PANEL_N = 110080
SIZES = {
    'rt4': {'aligne': 4},
    'rt2': {'aligne': 2},
    'rt': {},
    'baked': {'aligne': 4, 'n': PANEL_N, 'ldb': PANEL_N, 'ldc': PANEL_N},
}
DTYPES = {'f64': 'float64', 'f32': 'float32'}
# the table's gates an operator of another point set may fall below:
# (non-zeros, density) just under which a thinned copy is made
THIN_NNZ = (8192, 16384)
THIN_DENSITY = 0.5

FIELDS = ['op', 'm', 'k', 'nnz', 'density', 'beta', 'dtype', 'sizes', 'arch',
          'rank', 'variant', 'family', 'est_registers', 'minblocks',
          'registers', 'stack', 'spill_stores', 'spill_loads', 'error']

_FUNC = re.compile(r"Compiling entry function '(\w+)' for '(sm_\d+)'")
_REGS = re.compile(r'Used (\d+) registers')
_PROPS = re.compile(r'(\d+) bytes stack frame, (\d+) bytes spill stores, '
                    r'(\d+) bytes spill loads')
KNAME = 'gimmik_mm'


def thinned(A):
    """{suffix: A with its smallest-magnitude entries zeroed} so that it
    falls just below each gate it is above (a non-zero count of
    THIN_NNZ, density THIN_DENSITY); ties at the cut all go."""
    A = np.asarray(A, dtype=np.float64)
    nnz = np.count_nonzero(A)
    targets = {f'nnz{t}': t - 1 for t in THIN_NNZ if nnz >= t}
    dens = int(np.ceil(THIN_DENSITY*A.size)) - 1
    if nnz > dens:
        targets['dens'] = dens
    out = {}
    order = np.sort(np.abs(A[A != 0]))
    for key, keep in targets.items():
        cut = order[len(order) - keep - 1]
        B = np.where(np.abs(A) > cut, A, 0.0)
        if np.count_nonzero(B):
            out[key] = B
    return out


def load_ops(patterns, thin, max_nnz, suites=None, min_nnz=0):
    ops = {}
    for path in suites or sorted(glob.glob(os.path.join(OPERATORS,
                                                        '*.npz'))):
        with np.load(path) as f:
            for k in f.files:
                if k == 'provenance' or not any(
                        fnmatch.fnmatch(k, p) for p in patterns):
                    continue
                A = f[k]
                if min_nnz <= np.count_nonzero(A) <= max_nnz:
                    ops[k] = A
                if thin:
                    for suf, B in thinned(A).items():
                        if min_nnz <= np.count_nonzero(B) <= max_nnz:
                            ops[f'{k}~{suf}'] = B
    return ops


def candidates(A, beta, sizes, cc, families=None, rows=None,
               dtype='float64', only=False, offered=None):
    """[(rank, variant, family, estimate, minblocks, source)] offered (of
    the named families only, where families is given, and of the table
    rows whose id matches a glob of rows, where rows is given: the others
    are not rendered).  only: the table holds just those families' rows
    while the candidates are found (each family's offer does not depend
    on the other rows; rank is then among them).  offered: the first that
    many of what kernels() offers (its start-up cut with n baked), as a
    client timing that many sees them; None: every ranked candidate."""
    from gimmik.cuda import CUDAMatMul
    from gimmik.validate import check_dtype
    mm = CUDAMatMul(A, beta=beta, **sizes)
    dt = check_dtype(dtype)
    if only and families is not None:
        mm.table = [r for r in mm.table if r.family.name in families]
    out = []
    ranked = mm._candidates(dt, cc)
    if offered is not None:
        ranked = mm.offered(ranked)[:offered]
    for rank, cand in enumerate(ranked):
        if families is not None and cand.family not in families:
            continue
        if rows is not None and not any(fnmatch.fnmatch(cand.row, g)
                                        for g in rows):
            continue
        kern = mm.kernel(cand, dt)
        ctx = mm._platform_context(kern)
        src, meta = mm.render(cand, dt, KNAME)
        out.append((rank, meta['variant'], cand.family, kern.registers(),
                    ctx['minblocks'], src))
    return out


def src_key(src, arch):
    return hashlib.sha1(f'{arch}\n{src}'.encode()).hexdigest()


def parse_ptxas(stderr):
    """{kernel name: (registers, stack, spill stores, spill loads)}."""
    out, cur, regs = {}, None, None
    for line in stderr.splitlines():
        if mo := _FUNC.search(line):
            cur, regs = mo.group(1), None
        elif mo := _REGS.search(line):
            regs = int(mo.group(1))
            if cur in out:
                out[cur] = (regs,) + out[cur][1:]
        elif (mo := _PROPS.search(line)) and cur:
            out[cur] = (regs,) + tuple(int(x) for x in mo.groups())
    return out


def compile_batch(nvcc, items, arch):
    """items: [(key, source)] compiled in one nvcc run, each kernel and its
    helpers and tables renamed k_<key>...; {key: dict(registers, stack,
    spill_stores, spill_loads, error)}."""
    from gimmik.runtime.cuda import rename_kernel
    with tempfile.TemporaryDirectory() as tmp:
        cu = os.path.join(tmp, 'all.cu')
        with open(cu, 'w') as f:
            for key, src in items:
                f.write(rename_kernel(src, KNAME, f'k_{key[:16]}'))
                f.write('\n')
        cmd = ['nice', '-n', '10', nvcc, '-cubin', f'-arch={arch}', '-O3',
               '-Xptxas', '-v', '-o', os.path.join(tmp, 'a.cubin'), cu]
        p = subprocess.run(cmd, capture_output=True, text=True)
    rep = parse_ptxas(p.stderr)
    out = {}
    for key, _ in items:
        r = rep.get(f'k_{key[:16]}')
        if p.returncode != 0 or r is None:
            out[key] = {'error': (p.stderr[-500:] or 'no report')
                        .replace('\n', ' ')}
        else:
            out[key] = dict(zip(('registers', 'stack', 'spill_stores',
                                 'spill_loads'), r), error='')
    return out


class Cache:
    """ptxas results by (source, arch) hash, one JSON file each."""

    def __init__(self, folder):
        self.folder = folder
        os.makedirs(folder, exist_ok=True)

    def path(self, key):
        return os.path.join(self.folder, f'{key}.json')

    def get(self, key):
        try:
            with open(self.path(key)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def put(self, key, value):
        tmp = self.path(key) + '.tmp'
        with open(tmp, 'w') as f:
            json.dump(value, f)
        os.replace(tmp, self.path(key))


def batches(items, nnz_of, per_batch=6, big_nnz=2048):
    """Split [(key, src)] into nvcc runs: sources of operators with more
    than big_nnz non-zeros alone, the others per_batch at a time."""
    small = [it for it in items if nnz_of[it[0]] <= big_nnz]
    big = [[it] for it in items if nnz_of[it[0]] > big_nnz]
    return [small[i:i + per_batch]
            for i in range(0, len(small), per_batch)] + big


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--ops', default='*',
                    help='comma-separated fnmatch globs of operator names')
    ap.add_argument('--suite', nargs='+', default=None,
                    help='operator .npz files (default: bench/operators/)')
    ap.add_argument('--thinned', action='store_true',
                    help='also audit each operator thinned below the gates')
    ap.add_argument('--only-thinned', action='store_true',
                    help='audit the thinned copies only')
    ap.add_argument('--sizes', default='rt4,baked',
                    help=f'comma-separated of {",".join(SIZES)}')
    ap.add_argument('--archs', default='sm_90,sm_80')
    ap.add_argument('--dtypes', default='f64',
                    help=f'comma-separated of {",".join(DTYPES)}')
    ap.add_argument('--families', default=None,
                    help='comma-separated families to compile (default all)')
    ap.add_argument('--only-families', action='store_true',
                    help='find the candidates of --families alone (fast; '
                    'rank among them)')
    ap.add_argument('--rows', default=None,
                    help='comma-separated fnmatch globs of table row ids '
                         'to compile (default all)')
    ap.add_argument('--offered', type=int, default=None, metavar='N',
                    help="only the first N of kernels()'s offer (with n "
                    "baked its start-up cut; PyFR times 8)")
    ap.add_argument('--max-nnz', type=int, default=30000)
    ap.add_argument('--min-nnz', type=int, default=0)
    ap.add_argument('--min-est', type=int, default=0,
                    help='compile only candidates estimated at least this '
                    'many registers')
    ap.add_argument('--jobs', type=int, default=2)
    ap.add_argument('--budget', type=float, default=3600,
                    help='submit no nvcc run after this many seconds')
    ap.add_argument('--recheck', default=None, metavar='CSV',
                    help='only the (operator, variant) pairs that spilled '
                    'in an earlier audit CSV and are still offered')
    ap.add_argument('--no-compile', action='store_true',
                    help='report what the cache holds, compile nothing')
    ap.add_argument('--cache', default=os.path.join(ROOT, '.devwork',
                                                    'spill-cache'))
    ap.add_argument('--out', default=os.path.join(RESULTS,
                                                  'cuda-spill-audit.csv'))
    args = ap.parse_args(argv)
    nvcc = shutil.which('nvcc')
    if nvcc is None:
        ap.error('nvcc is not on PATH')
    fams = set(args.families.split(',')) if args.families else None
    row_globs = args.rows.split(',') if args.rows else None
    ops = load_ops(args.ops.split(','), args.thinned or args.only_thinned,
                   args.max_nnz, args.suite, args.min_nnz)
    if args.only_thinned:
        ops = {k: v for k, v in ops.items() if '~' in k}
    cache = Cache(args.cache)
    t0 = time.time()
    recheck = None
    if args.recheck:
        with open(args.recheck) as f:
            recheck = {(r['op'], r['variant']) for r in csv.DictReader(f)
                       if r.get('spill_stores') not in (None, '', '0')
                       or r.get('stack') not in (None, '', '0')}
        ops = {k: v for k, v in ops.items()
               if any(k == op for op, _ in recheck)}

    from gimmik.operators import default_beta
    rows, todo, nnz_of = [], {}, {}
    for name, A in ops.items():
        base = name.split('~')[0]
        beta = default_beta(base)
        nnz = int(np.count_nonzero(A))
        for sz, dname in ((s, d) for s in args.sizes.split(',')
                          for d in args.dtypes.split(',')):
            for arch in args.archs.split(','):
                for rank, var, fam, est, mb, src in candidates(
                        A, beta, SIZES[sz], ARCH_CC[arch], fams,
                        row_globs, DTYPES[dname], args.only_families,
                        args.offered):
                    if (fams and fam not in fams
                            or (est or 0) < args.min_est
                            or recheck is not None
                            and (name, var) not in recheck):
                        continue
                    key = src_key(src, arch)
                    rows.append({'op': name, 'm': A.shape[0],
                                 'k': A.shape[1], 'nnz': nnz,
                                 'density': f'{nnz/A.size:.4f}',
                                 'beta': beta, 'dtype': dname,
                                 'sizes': sz, 'arch': arch,
                                 'rank': rank, 'variant': var,
                                 'family': fam, 'est_registers': est,
                                 'minblocks': mb or '', '_key': key})
                    if cache.get(key) is None and not args.no_compile:
                        todo.setdefault(arch, {})[key] = src
                        nnz_of[key] = nnz
    ntodo = sum(len(v) for v in todo.values())
    print(f'{len(ops)} operators, {len(rows)} candidate builds, {ntodo} '
          'sources to compile', flush=True)

    with cf.ThreadPoolExecutor(args.jobs) as pool:
        futs = {}
        for arch, srcs in todo.items():
            for b in batches(sorted(srcs.items(), key=lambda x: nnz_of[x[0]]),
                             nnz_of):
                futs[pool.submit(_timed_batch, nvcc, b, arch, t0,
                                 args.budget)] = b
        done = 0
        for fut in cf.as_completed(futs):
            for key, res in (fut.result() or {}).items():
                cache.put(key, res)
            done += len(futs[fut])
            print(f'  {done}/{ntodo} compiled [{time.time() - t0:.0f} s]',
                  flush=True)

    out = []
    for r in rows:
        res = cache.get(r.pop('_key'))
        if res is None:
            r['error'] = 'not compiled (budget)'
        else:
            r.update(res)
        out.append(r)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(out)
    for line in summarise(out):
        print(line)
    return 0


def _timed_batch(nvcc, batch, arch, t0, budget):
    if time.time() - t0 > budget:
        return None
    return compile_batch(nvcc, batch, arch)


def summarise(rows):
    """Lines: builds compiled, and each spilling (or failed) one."""
    built = [r for r in rows if r.get('registers') not in (None, '')]
    bad = [r for r in built if int(r['spill_stores']) or int(r['stack'])]
    err = [r for r in rows if r.get('error')]
    lines = [f'{len(built)} builds reported, {len(bad)} spill or use a '
             f'stack, {len(err)} not built']
    for r in bad:
        lines.append(f'  SPILL {r["op"]} {r.get("dtype", "f64")} '
                     f'{r["sizes"]} {r["arch"]} '
                     f'#{r["rank"]} {r["variant"]}: est {r["est_registers"]}'
                     f' minblocks {r["minblocks"] or "-"} -> '
                     f'{r["registers"]} regs, {r["spill_stores"]} B stores, '
                     f'stack {r["stack"]}')
    for r in err[:20]:
        lines.append(f'  ERROR {r["op"]} {r["sizes"]} {r["arch"]} '
                     f'{r["variant"]}: {r["error"][:200]}')
    return lines


if __name__ == '__main__':
    sys.exit(main())
