"""How PyFR's walk fares with the CUDA candidate order, from measured
candidate times (no GPU): per operator, replay PyFR 3.1's provider (first 8
of kernels(), this package's 1.5x family pruning, a new pick only when
below 0.95 of the pick so far) with each candidate's measured time, and
compare its pick with the best candidate of all (walk_over_all).  Done for
the table order as offered and for gimmik.order.order_candidates.

    PYTHONPATH=. python3 bench/order_analysis.py \
        [--candidates bench/results/cuda-h100-candidates.csv] [--csv OUT]
"""

import argparse
import collections
import csv
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from pyfr_walk import beta_of, pyfr_nuq, pyfr_sends, replay_walk  # noqa
from gimmik.cuda import CUDAMatMul  # noqa: E402
from gimmik.order import order_candidates  # noqa: E402

MISS = 1.03


def measured(path):
    """{op: [(variant, seconds)]} in the file's (offer) order."""
    out = collections.defaultdict(list)
    with open(path) as f:
        for r in csv.DictReader(f):
            if r.get('status', 'ok') == 'ok' and r['time_s']:
                out[r['op']].append((r['variant'], float(r['time_s'])))
    return out


def walk_with_times(mm, cands, times, cc=(9, 0)):
    """replay_walk over mm's own _walk on `cands`, renders stubbed (only
    the variant matters), runtimes from `times` (variant -> seconds; a
    variant without a time counts as infinitely slow)."""
    mm.render = lambda cand, dtype, kname='k': ('', {'variant':
                                                     cand.variant})
    gen = mm._walk(cands, np.float64, 'k')
    return replay_walk(gen, lambda s, m: times.get(m['variant'],
                                                   float('inf')))


def analyse_op(name, A, rows, reorder):
    beta = beta_of(name)
    mm = CUDAMatMul(A, beta=beta, aligne=2)
    cands = mm.candidates(np.float64, compute_capability=(9, 0))
    if reorder:
        cands = order_candidates(mm.info, cands, 'cuda', beta=beta)
    times = dict(rows)
    walk = walk_with_times(mm, cands, times)
    pv, pt = walk['seen'][walk['pick']]
    best_v, best_t = min(rows, key=lambda x: x[1])
    order = [c.variant for c in cands]
    info = mm.info
    return {'op': name, 'm': info.m, 'k': info.k, 'nnz': info.nnz,
            'density': round(info.density, 4), 'nuq': pyfr_nuq(A),
            'sends': pyfr_sends(A), 'used_k': round(len(info.bix)/info.k, 3),
            'zero_rows': len(info.zero_rows), 'ncand': len(cands),
            'walk_pick': pv, 'walk_time_s': pt, 'all_best': best_v,
            'all_best_time_s': best_t, 'walk_over_all': pt / best_t,
            'best_rank': order.index(best_v) if best_v in order else -1,
            'seen': ' '.join(v for v, _ in walk['seen'])}


def report(results, label):
    miss = [r for r in results if r['walk_over_all'] > MISS]
    w = np.array([r['walk_over_all'] for r in results])
    print(f'\n{label}: {len(results)} operators; walk_over_all geomean '
          f'{np.exp(np.log(w).mean()):.4f}, max {w.max():.3f}; '
          f'> {MISS} on {len(miss)}; best within the first 8 offered on '
          f'{sum(0 <= r["best_rank"] < 8 for r in results)}')
    if miss:
        print(f'  {"op":13s} {"m":>4s} {"k":>4s} {"nnz":>6s} {"dens":>6s} '
              f'{"nuq":>4s} {"usedk":>5s} {"zr":>3s} {"w/all":>6s} '
              f'{"rank":>4s}  walk pick -> best')
    for r in sorted(miss, key=lambda r: -r['walk_over_all']):
        print(f'  {r["op"]:13s} {r["m"]:4d} {r["k"]:4d} {r["nnz"]:6d} '
              f'{r["density"]:6.3f} {r["nuq"]:4d} {r["used_k"]:5.2f} '
              f'{r["zero_rows"]:3d} {r["walk_over_all"]:6.3f} '
              f'{r["best_rank"]:4d}  {r["walk_pick"]} -> {r["all_best"]}')


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--candidates', default=os.path.join(
        HERE, 'results', 'cuda-h100-candidates.csv'))
    ap.add_argument('--suite', default=os.path.join(HERE, 'operators',
                                                    'pyfr-ops.npz'))
    ap.add_argument('--csv', default=None,
                    help='write per-operator before/after rows here')
    args = ap.parse_args(argv)
    data = measured(args.candidates)
    with np.load(args.suite) as f:
        ops = {k: f[k] for k in f.files if k in data}
    before = [analyse_op(k, ops[k], data[k], False) for k in sorted(ops)]
    after = [analyse_op(k, ops[k], data[k], True) for k in sorted(ops)]
    report(before, 'table order')
    report(after, 'order_candidates')
    if args.csv:
        fields = list(before[0]) + ['order']
        with open(args.csv, 'w', newline='') as f:
            w = csv.DictWriter(f, fieldnames=fields)
            w.writeheader()
            for lab, rs in (('table', before), ('ordered', after)):
                for r in rs:
                    w.writerow(dict(r, order=lab))


if __name__ == '__main__':
    sys.exit(main())
