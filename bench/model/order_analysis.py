"""How PyFR's walk fares with the CUDA candidate order, from measured
candidate times (no GPU): per operator, replay PyFR 3.1's provider
(gimmik.pyfr.replay_times: first 8 of kernels(), this package's 1.5x
family pruning, a new pick only when below 0.95 of the pick so far) with
each candidate's measured time over every ranked candidate (no start-up
cut), and compare its pick with the best candidate of all
(walk_over_all).  Done for the order candidates() returns ('ranked') and
with gimmik.order.order_candidates applied again ('reordered': what --loo
varies), on two datasets:

- 512mib: bench/results/cuda-h100-candidates.csv (512 MiB panels, n not
  baked, aligne 2), replayed with n unknown;
- pyfr: bench/results/pyfr-walk-h100-candidates.csv (PyFR's panel, n baked,
  ldb = ldc = n, aligne 16), replayed with the generator built as PyFR
  builds it, at each n that file timed every candidate at.

--loo refits the order's baked-n constants leaving out one element type at
a time and reports how the left-out type fares.

    PYTHONPATH=. python3 bench/model/order_analysis.py [--csv OUT] [--loo]
"""

import argparse
import csv
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench import OPERATORS, RESULTS  # noqa: E402
from bench.pyfr.walk_replay import PYFR_CUDA, pyfr_nuq  # noqa: E402
from gimmik.cuda import CUDAMatMul  # noqa: E402
from gimmik.operators import default_beta, parse_name  # noqa: E402
import gimmik.order as gorder  # noqa: E402
from gimmik.order import order_candidates  # noqa: E402
from gimmik.pyfr import picked, read_times, replay_times  # noqa: E402

MISS = 1.03

DATASETS = {'512mib': os.path.join(RESULTS, 'cuda-h100-candidates.csv'),
            'pyfr': os.path.join(RESULTS, 'pyfr-walk-h100-candidates.csv')}


def all_n_only(data):
    """A PyFR walk file's (op, n) entries at the n where every candidate
    was timed (the n holding the most candidates of an operator)."""
    best = {}
    for (op, n), rows in data.items():
        if len(rows) > len(data.get((op, best.get(op)), ())):
            best[op] = n
    return {(op, n): data[(op, n)] for op, n in best.items()}


_BUILT = {}    # (op, n, A) -> (generator, its candidates)


def analyse_op(name, A, rows, reorder, n=None):
    """One operator's walk on measured `rows`; n: the baked panel width
    (PyFR's generator) or None (512 MiB runs: n not baked, aligne 2)."""
    beta = default_beta(name)
    key = (name, n, A.tobytes())
    if key not in _BUILT:
        if n is None:
            mm = CUDAMatMul(A, beta=beta, aligne=2)
        else:
            mm = CUDAMatMul(A, beta=beta,
                            aligne=PYFR_CUDA.aligne(np.float64), n=n, ldb=n,
                            ldc=n)
        _BUILT[key] = mm, mm.candidates(np.float64,
                                        compute_capability=(9, 0))
    mm, cands = _BUILT[key]
    if reorder:
        cands = order_candidates(mm.info, cands, 'cuda', beta=beta, n=n)
    walk = replay_times(PYFR_CUDA, mm, dict(rows), arch=(9, 0), offer=cands)
    pv, pt = picked(walk)
    best_v, best_t = min(rows, key=lambda x: x[1])
    order = [c.variant for c in cands]
    info = mm.info
    return {'op': name, 'n': n or '', 'm': info.m, 'k': info.k,
            'nnz': info.nnz,
            'density': round(info.density, 4), 'nuq': pyfr_nuq(A),
            'sends': PYFR_CUDA.sends(A),
            'used_k': round(len(info.bix)/info.k, 3),
            'zero_rows': len(info.zero_rows), 'ncand': len(cands),
            'walk_pick': pv, 'walk_time_s': pt, 'all_best': best_v,
            'all_best_time_s': best_t, 'walk_over_all': pt / best_t,
            'best_rank': order.index(best_v) if best_v in order else -1,
            'seen': ' '.join(v for v, _ in walk['seen'])}


def stats(results):
    """(count > MISS, worst, geomean) of walk_over_all."""
    w = np.array([r['walk_over_all'] for r in results])
    return (int((w > MISS).sum()), float(w.max()),
            float(np.exp(np.log(w).mean())))


def report(results, label, detail=True):
    miss = [r for r in results if r['walk_over_all'] > MISS]
    nmiss, worst, gm = stats(results)
    print(f'\n{label}: {len(results)} operators; walk_over_all geomean '
          f'{gm:.4f}, max {worst:.3f}; > {MISS} on {nmiss}; best within '
          f'the first 8 offered on '
          f'{sum(0 <= r["best_rank"] < 8 for r in results)}')
    if not detail:
        return
    if miss:
        print(f'  {"op":13s} {"m":>4s} {"k":>4s} {"nnz":>6s} {"dens":>6s} '
              f'{"nuq":>4s} {"usedk":>5s} {"zr":>3s} {"w/all":>6s} '
              f'{"rank":>4s}  walk pick -> best')
    for r in sorted(miss, key=lambda r: -r['walk_over_all']):
        print(f'  {r["op"]:13s} {r["m"]:4d} {r["k"]:4d} {r["nnz"]:6d} '
              f'{r["density"]:6.3f} {r["nuq"]:4d} {r["used_k"]:5.2f} '
              f'{r["zero_rows"]:3d} {r["walk_over_all"]:6.3f} '
              f'{r["best_rank"]:4d}  {r["walk_pick"]} -> {r["all_best"]}')


def run(data, ops, reorder):
    """analyse_op over a dataset ({op: rows} or {(op, n): rows})."""
    out = []
    for key in sorted(data):
        op, n = key if isinstance(key, tuple) else (key, None)
        if op in ops:
            out.append(analyse_op(op, ops[op], data[key], reorder, n))
    return out


# the baked-n constants --loo refits, and the values it tries
LOO_GRID = {
    'FEW_FLOPS': (0, 12, 16, 20, 24, 32, 48),
    'BAKED_MBLOCK_ROWS': (None, 16, 24, 32, 48, 64),
    'BAKED_WIDE_FIRST': (
        (), gorder.BAKED_WIDE_FIRST, ('cstream-w1-nc',), ('bstream-w1-cs',),
        ('cstream-w2-nc', 'cstream-w1-nc', 'bstream-w1-cs'))}


# the baked-n rules off
LOO_OFF = {'FEW_FLOPS': 0, 'BAKED_MBLOCK_ROWS': None, 'BAKED_WIDE_FIRST': ()}


def _set(consts):
    for k, v in consts.items():
        setattr(gorder, k, v)


def _score(results):
    nmiss, _, gm = stats(results)
    return (nmiss, gm)


def leave_one_out(data, ops):
    """Per element type: fit the baked-n constants (one at a time, in
    LOO_GRID order, twice round) on the other types' PyFR-walk operators,
    then replay the left-out type with the fitted and the shipped
    constants."""
    shipped = {k: getattr(gorder, k) for k in LOO_GRID}
    etypes = sorted({parse_name(op)[1] for op, _ in data})
    print('\nleave one element type out (pyfr dataset): fitted constants; '
          'left-out type with fitted / shipped constants / no baked-n '
          'rules (misses, worst, geomean)')
    rows = []
    for et in etypes:
        train = {k: v for k, v in data.items() if parse_name(k[0])[1] != et}
        test = {k: v for k, v in data.items() if parse_name(k[0])[1] == et}
        fit = dict(shipped)
        for _ in range(2):
            for name, grid in LOO_GRID.items():
                scores = []
                for val in grid:
                    _set(dict(fit, **{name: val}))
                    scores.append((_score(run(train, ops, True)),
                                   grid.index(val), val))
                fit[name] = min(scores, key=lambda s: s[:2])[2]
        _set(fit)
        held = stats(run(test, ops, True))
        _set(shipped)
        ref = stats(run(test, ops, True))
        _set(LOO_OFF)
        off = stats(run(test, ops, True))
        _set(shipped)
        wide = [f'{f}/w{p.get("width")}' for f, p in
                fit['BAKED_WIDE_FIRST']]
        print(f'  {et:5s} FEW_FLOPS={fit["FEW_FLOPS"]} '
              f'ROWS={fit["BAKED_MBLOCK_ROWS"]} WIDE={wide}: '
              f'{held[0]} / {ref[0]} / {off[0]} misses of {len(test)}, '
              f'worst {held[1]:.3f} / {ref[1]:.3f} / {off[1]:.3f}, geomean '
              f'{held[2]:.4f} / {ref[2]:.4f} / {off[2]:.4f}')
        rows.append((et, fit, held, ref, off))
    _set(shipped)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--suite', default=os.path.join(OPERATORS,
                                                    'pyfr-ops.npz'))
    ap.add_argument('--dataset', choices=sorted(DATASETS), nargs='*',
                    default=sorted(DATASETS))
    ap.add_argument('--csv', default=None,
                    help='write per-operator before/after rows here')
    ap.add_argument('--loo', action='store_true',
                    help='leave-one-element-type-out check of the baked-n '
                    'constants')
    args = ap.parse_args(argv)
    with np.load(args.suite) as f:
        ops = {k: f[k] for k in f.files if k != 'provenance'}
    out, summary = [], []
    for ds in args.dataset:
        data = read_times(DATASETS[ds])
        if ds == 'pyfr':
            data = all_n_only(data)
        before, after = run(data, ops, False), run(data, ops, True)
        report(before, f'[{ds}] ranked (candidates())')
        report(after, f'[{ds}] reordered (order_candidates again)')
        summary.append((ds, stats(before), stats(after), len(before)))
        out += [dict(r, dataset=ds, order='ranked') for r in before]
        out += [dict(r, dataset=ds, order='reordered') for r in after]
    print(f'\n{"dataset":8s} {"ops":>4s}  {"ranked: >3%, worst, geomean":>28s}'
          f'  {"reordered: >3%, worst, geomean":>30s}')
    for ds, b, a, nops in summary:
        print(f'{ds:8s} {nops:4d}  {b[0]:8d} {b[1]:8.3f} {b[2]:9.4f}'
              f'  {a[0]:10d} {a[1]:8.3f} {a[2]:9.4f}')
    if args.loo:
        leave_one_out(all_n_only(read_times(DATASETS['pyfr'])), ops)
    if args.csv:
        fields = ['dataset', 'order'] + [k for k in out[0]
                                         if k not in ('dataset', 'order')]
        with open(args.csv, 'w', newline='') as f:
            w = csv.DictWriter(f, fieldnames=fields)
            w.writeheader()
            w.writerows(out)


if __name__ == '__main__':
    sys.exit(main())
