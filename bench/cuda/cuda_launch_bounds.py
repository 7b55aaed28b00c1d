"""Time CUDA candidates (n at run time) as offered and with other launch
bounds, on the GPU: whether a bound that keeps ptxas from spilling pays
(bench/results/cuda-h200-spill-bounds.csv, docs/cuda-spills.md).

    PYTHONPATH=. python3 bench/cuda/cuda_launch_bounds.py CASES.txt \\
        [--out DIR] [--name NAME]

CASES.txt: one candidate a line, `OP VARIANT BOUND...` (a BOUND is what
goes between the parentheses of __launch_bounds__, e.g. `128,8`). Each is
checked against A @ B + beta*C on the GPU and timed at n = 110080 and at B
+ C = 512 MiB, the bounds interleaved, 7 rounds of 10 launches, medians."""

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
FIELDS = ['op', 'variant', 'n', 'bound', 'registers', 'local_mem', 'err',
          'time_us', 'over_offered', 'device']


def panel_sizes(m, k):
    return {'110080': 110080, '512MiB': (512 << 20) // ((m + k)*8) // 4*4}


def with_bound(src, bound):
    """src with its launch bounds replaced by `bound` (None: as offered)."""
    if bound is None:
        return src
    return re.sub(r'__launch_bounds__\([^)]*\)',
                  f'__launch_bounds__({bound})', src)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('cases')
    ap.add_argument('--out', default=os.environ.get('OUT') or '.')
    ap.add_argument('--name', default='cuda-spill-bounds')
    args = ap.parse_args(argv)
    import cupy as cp
    from gimmik.cuda import CUDAMatMul
    from gimmik.operators import default_beta, suite
    from gimmik.runtime.cuda import Runtime
    with open(args.cases) as f:
        cases = [line.split() for line in f if line.strip()]
    rt = Runtime()
    path = os.path.join(args.out, f'{args.name}.csv')
    with open(path, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for op, var, *bounds in cases:
            A = suite([op], os.path.join(ROOT, 'bench', 'operators',
                      'pyfr-ops-p7.npz' if op.startswith('p7')
                      else 'pyfr-ops.npz'))[op]
            beta = default_beta(op)
            mm = CUDAMatMul(A, beta=beta, aligne=4)
            cand = next(c for c in mm.candidates(np.float64)
                        if c.variant == var)
            src, meta = mm.render(cand, np.float64, 'gimmik_mm')
            m, k = A.shape
            for label, n in panel_sizes(m, k).items():
                b = cp.random.standard_normal((k, n))
                c0 = cp.random.standard_normal((m, n))
                ref = cp.asarray(A) @ b + beta*c0
                runs = {}
                for bound in [None] + bounds:
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
                    w.writerow({'op': op, 'variant': var, 'n': label,
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
