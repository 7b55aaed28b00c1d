"""Time CUDA candidates as offered and with other launch bounds, on the
GPU: whether a bound that keeps ptxas from spilling pays
(bench/results/cuda-h200-spill-bounds.csv, docs/cuda-spills.md).

    PYTHONPATH=. python3 bench/cuda/cuda_launch_bounds.py CASES.txt \\
        [--out DIR] [--name NAME]

CASES.txt: one candidate a line, `OP VARIANT BOUND...` (a BOUND is what
goes between the parentheses of __launch_bounds__, e.g. `128,8`; `none`
for no launch bounds; `driver-l1`, timed only: the build as offered with
the driver's L1 carveout, not the largest L1 a spilling kernel gets from
gimmik.runtime.cuda.prefer_l1 as from PyFR). Each is
checked against A @ B + beta*C on the GPU and timed at n = 110080 and at B
+ C = 512 MiB, the bounds interleaved, 7 rounds of 10 launches, medians;
n at run time, or with --sizes baked baked to each panel size.

--compile-only (no GPU): each bound's ptxas registers and spill bytes
(nvcc -cubin -arch=sm_90), the candidates as offered with n at run time or,
with --sizes baked, with PyFR's n baked (bench/cuda/cuda_spill_audit.SIZES)."""

import argparse
import csv
import os
import re
import statistics
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

ROUNDS = 7
FIELDS = ['op', 'variant', 'sizes', 'n', 'bound', 'registers', 'local_mem',
          'err', 'time_us', 'over_offered', 'device']
# a source's launch bounds, its threads a block the first group
BOUNDS = re.compile(r'__launch_bounds__\((\d+)[^)]*\)')
# a timing-only BOUND: the build as offered, loaded without prefer_l1
DRIVER_L1 = 'driver-l1'
COMPILE_FIELDS = ['op', 'variant', 'sizes', 'bound', 'registers', 'stack',
                  'spill_stores', 'spill_loads', 'error']


def panel_sizes(m, k):
    return {'110080': 110080, '512MiB': (512 << 20) // ((m + k)*8) // 4*4}


def with_bound(src, bound):
    """src with its launch bounds replaced by `bound` (None: as offered;
    'none': removed, leaving ptxas no cap below its 255 registers)."""
    if bound is None:
        return src
    new = '' if bound == 'none' else f'__launch_bounds__({bound})'
    return BOUNDS.sub(new, src, count=1)


def case_source(op, var, sizes):
    """(A, beta, source, meta) of candidate `var` of operator `op` (both
    suites) under the generator's sizes keywords."""
    from gimmik.cuda import CUDAMatMul
    from gimmik.operators import default_beta, suite
    A = suite([op], os.path.join(ROOT, 'bench', 'operators',
              'pyfr-ops-p7.npz' if op.startswith('p7')
              else 'pyfr-ops.npz'))[op]
    beta = default_beta(op)
    mm = CUDAMatMul(A, beta=beta, **sizes)
    cand = next(c for c in mm.candidates(np.float64) if c.variant == var)
    src, meta = mm.render(cand, np.float64, 'gimmik_mm')
    return A, beta, src, meta


def compile_only(cases, sizes_name, path):
    """ptxas's registers and spills of each case under each bound."""
    import shutil
    from bench.cuda import cuda_spill_audit as audit
    nvcc = shutil.which('nvcc')
    if nvcc is None:
        raise SystemExit('nvcc is not on PATH')
    with open(path, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=COMPILE_FIELDS)
        w.writeheader()
        for op, var, *bounds in cases:
            _, _, src, _ = case_source(op, var, audit.SIZES[sizes_name])
            keyed = [(audit.src_key(with_bound(src, b), 'sm_90'),
                      with_bound(src, b)) for b in [None] + bounds]
            # one nvcc run a case (a bound that changes nothing once)
            got = audit.compile_batch(nvcc, list(dict(keyed).items()),
                                      'sm_90')
            for bound, (key, _) in zip([None] + bounds, keyed):
                r = got[key]
                w.writerow({'op': op, 'variant': var, 'sizes': sizes_name,
                            'bound': bound or 'offered', **r})
                print(f'{op} {var} {bound or "offered"}: '
                      f'{r.get("registers")} registers, '
                      f'{r.get("spill_stores")} bytes spilled', flush=True)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('cases')
    ap.add_argument('--out', default=os.environ.get('OUT') or '.')
    ap.add_argument('--name', default='cuda-spill-bounds')
    ap.add_argument('--compile-only', action='store_true',
                    help="ptxas's registers and spills, no GPU")
    ap.add_argument('--sizes', default='rt4', choices=('rt4', 'baked'),
                    help='n at run time or baked (with --compile-only at '
                    'PyFR\'s n, timed at each panel size)')
    args = ap.parse_args(argv)
    with open(args.cases) as f:
        cases = [line.split() for line in f if line.strip()]
    path = os.path.join(args.out, f'{args.name}.csv')
    if args.compile_only:
        return compile_only(cases, args.sizes, path)
    import cupy as cp
    from gimmik.runtime.cuda import Runtime
    rt = Runtime()
    with open(path, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for op, var, *bounds in cases:
            A, beta, src, meta = case_source(op, var, {'aligne': 4})
            m, k = A.shape
            for label, n in panel_sizes(m, k).items():
                if args.sizes == 'baked':
                    # each panel size its own source, n baked as PyFR does
                    try:
                        _, _, src, meta = case_source(
                            op, var, {'aligne': 4, 'n': n, 'ldb': n, 'ldc': n})
                    except StopIteration:
                        print(f'{op} {var} {label}: not offered', flush=True)
                        continue
                b = cp.random.standard_normal((k, n))
                c0 = cp.random.standard_normal((m, n))
                ref = cp.asarray(A) @ b + beta*c0
                runs = {}
                for bound in [None] + bounds:
                    if bound == DRIVER_L1:
                        rt.spill_l1 = False
                        try:
                            launch = rt.compile(src, meta)
                        finally:
                            rt.spill_l1 = True
                    else:
                        launch = rt.compile(with_bound(src, bound), meta)
                    c = c0.copy()
                    launch(b, c, n, n, n)
                    err = float(cp.abs(c - ref).max() / cp.abs(ref).max())
                    runs[bound] = (launch, err, rt.kernel_attributes(launch))
                times = {bound: [] for bound in runs}
                for _ in range(ROUNDS):
                    for bound, (launch, _, _) in runs.items():
                        c = c0.copy()
                        times[bound].append(rt.time(launch, (b, c, n, n, n),
                                                    warmup=2, repeats=10))
                t0 = statistics.median(times[None])
                for bound, (launch, err, attrs) in runs.items():
                    t = statistics.median(times[bound])
                    w.writerow({'op': op, 'variant': var,
                                'sizes': args.sizes, 'n': label,
                                'bound': bound or 'offered',
                                'registers': attrs['registers'],
                                'local_mem': attrs['local_mem'],
                                'err': f'{err:.2e}',
                                'time_us': f'{t*1e6:.2f}',
                                'over_offered': f'{t/t0:.4f}',
                                'device': rt.device})
                f.flush()
                print(f'{op} {var} {label}: ' + ' '.join(
                    f'{b or "offered"} {statistics.median(t)/t0:.3f}'
                    for b, t in times.items()), flush=True)
                del b, c0, ref
                cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == '__main__':
    sys.exit(main())
