"""What PyFR main's HIP launch costs the kernels that walk their tiles, on
the CUDA twin: every candidate of ours whose launch contract needs more
blocks than ceil(n/block[0]) (row groups, tiles narrower than a block),
with n at run time, timed under its own grid (gimmik's launch_config) and
under PyFR main's, ceil(n/block[0]) x 1 x 1 (the same source and binary;
each output checked against cuBLAS under both), interleaved, medians.

    PYTHONPATH=. python3 bench/cuda/grid_rules.py --n 110080 --out "$OUT" \\
        --ops 'p[3-6]-hex-*' 'p[3-6]-pri-*'

Writes NAME.csv: op, variant, blocks under each rule, seconds under each,
pyfr_over_own (> 1: PyFR main's grid is slower)."""

import argparse
import csv
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench import OPERATORS, RESULTS  # noqa: E402
from bench.pyfr import walk_timing as timing  # noqa: E402
from bench.pyfr.pyfr_walk import load_suite  # noqa: E402
from bench.pyfr.walk_replay import kname_of, twin_mm  # noqa: E402
from gimmik.base import MatMul  # noqa: E402
from gimmik.operators import default_beta  # noqa: E402
from gimmik.pyfr import PROTOCOLS  # noqa: E402

FIELDS = ['op', 'n', 'variant', 'own_blocks', 'pyfr_blocks', 'own_s',
          'pyfr_s', 'pyfr_over_own', 'err_own', 'err_pyfr', 'device']
RULE = PROTOCOLS['main', 'hip']


def walkers(A, beta, cc):
    """(src, meta) of our run-time-n candidates that walk their tiles."""
    mm = twin_mm(A, beta)
    out = []
    for cand in mm.candidates(np.float64, compute_capability=cc):
        if mm.kernel(cand, np.float64).geometry().walks_tiles():
            out.append(mm.render(cand, np.float64, kname_of(A)))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--ops', nargs='+', default=['p[3-6]-hex-*',
                                                 'p[3-6]-pri-*'])
    ap.add_argument('--suite', default=os.path.join(OPERATORS,
                                                    'pyfr-ops.npz'))
    ap.add_argument('--n', type=int, default=110080)
    ap.add_argument('--repeats', type=int, default=20)
    ap.add_argument('--out', default=os.environ.get('OUT') or
                    RESULTS)
    ap.add_argument('--name', default='cuda-h200-grid-rules')
    ap.add_argument('--budget', type=float, default=420,
                    help='start no operator after this many seconds')
    args = ap.parse_args(argv)
    t0 = time.time()

    dev = timing.Device()
    ops = load_suite(args.suite, args.ops)
    n = args.n
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f'{args.name}.csv')
    with open(path, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for name, A in ops.items():
            if not PROTOCOLS['3.1', 'cuda'].sends(A):
                continue
            if time.time() - t0 > args.budget:
                print(f'budget spent; stopping before {name}', flush=True)
                break
            beta = default_beta(name)
            cands = walkers(A, beta, dev.cc)
            if not cands:
                continue
            panels = timing.DevicePanels(dev, A, beta, n, seed=len(name))
            try:
                for src, meta in cands:
                    cubin, _ = timing.nvrtc_compile(
                        src, f'sm_{dev.cc[0]}{dev.cc[1]}')
                    fn, _ = dev.load(cubin, kname_of(A))
                    own = MatMul.launch_config(meta, n)[0]
                    pyfr = RULE.launch(meta, n)[0]
                    ldn = np.int32(n)
                    args_ = (ldn, panels.b, ldn, panels.c, ldn)
                    blk = tuple(meta['block'])

                    def run(grid, fn=fn, blk=blk, a=args_):
                        fn(grid, blk, a, 0, dev.stream)
                    with dev.stream:
                        e_own = panels.check(lambda: run(own))
                        e_pyfr = panels.check(lambda: run(pyfr))
                        t_own, t_pyfr = dev.time_median(
                            [lambda: run(own), lambda: run(pyfr)],
                            args.repeats)
                    row = {'op': name, 'n': n, 'variant': meta['variant'],
                           'own_blocks': own[0], 'pyfr_blocks': pyfr[0],
                           'own_s': f'{t_own:.6e}',
                           'pyfr_s': f'{t_pyfr:.6e}',
                           'pyfr_over_own': f'{t_pyfr/t_own:.4f}',
                           'err_own': f'{e_own:.2e}',
                           'err_pyfr': f'{e_pyfr:.2e}', 'device': dev.name}
                    w.writerow(row)
                    f.flush()
                    print(f"{name:13s} {meta['variant']:55s} "
                          f"{own[0]:7d} {pyfr[0]:6d} blocks "
                          f"{row['pyfr_over_own']} err {row['err_pyfr']}",
                          flush=True)
            finally:
                panels.free()
    return 0


if __name__ == '__main__':
    sys.exit(main())
