"""The CUDA offer order of a before checkout against this checkout's, two
ways (no GPU for the first):

- replay: PyFR 3.1's walk (gimmik.pyfr.replay_times: the first 8, the
  package's family pruning, a new pick only when below 0.95 of the pick so
  far) over recorded H100 candidate times (tests/fixtures: 512 MiB panels
  with n not baked, and PyFR's panel with n baked), each order cut to the
  candidates timed there; per operator the pick's time over the best timed
  and this order's pick over the before order's;
- recorded context (--recorded-context FILE...): each replayed pick at
  PyFR's panel looked up in in_context.py candidate files (ctx_over_up of
  that variant at that operator and n, geomean over the files holding it):
  what the changed picks cost in PyFR's place, without a device;
- context: two bench/pyfr/in_context.py runs (--context BEFORE.csv
  AFTER.csv ...: later files override earlier ones per operator), per
  operator our in-context time over upstream's (timed interleaved in the
  same run, which cancels the drift between runs) after over before.

    git worktree add ../before <commit>
    PYTHONPATH=. python3 bench/model/order_compare.py --before ../before \\
        [--csv OUT.csv] [--context BEFORE.csv AFTER.csv [AFTER2.csv]]
        [--recorded-context RUN-candidates.csv ...]
"""

import argparse
import csv
import math
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.model import in_checkout  # noqa: E402
from gimmik.cuda import CUDAMatMul  # noqa: E402
from gimmik.operators import default_beta  # noqa: E402
from gimmik.pyfr import (PROTOCOLS, picked, read_times,  # noqa: E402
                         recorded_name, replay_times, with_twins)

FIXTURES = os.path.join(ROOT, 'tests', 'fixtures')
SUITE = os.path.join(ROOT, 'bench', 'operators', 'pyfr-ops.npz')
DATASETS = {'512mib': ('h100-512mib-times.csv.gz', None),
            'pyfr': ('h100-pyfr-panel-times.csv.gz', 110080)}
PYFR_CUDA = PROTOCOLS['3.1', 'cuda']
MISS = 1.03

# Run in the before checkout's interpreter: its offer order by variant
ORDERS = r'''
import json, sys
import numpy as np
import gimmik
from gimmik import CUDAMatMul
req = json.load(sys.stdin)
z = np.load(req['suite'])
out = {}
for name, n in req['keys']:
    if n is None:
        mm = CUDAMatMul(z[name], beta=req['beta'][name], aligne=2)
    else:
        mm = CUDAMatMul(z[name], beta=req['beta'][name],
                        aligne=req['aligne'], n=n, ldb=n, ldc=n)
    out[f'{name} {n}'] = [c.variant for c in mm.candidates(
        np.float64, compute_capability=(9, 0))]
json.dump({'gimmik': gimmik.__file__, 'orders': out}, sys.stdout)
'''


def generator(A, beta, n):
    """The generator the recorded runs used (n None: 512 MiB, aligne 2)."""
    if n is None:
        return CUDAMatMul(A, beta=beta, aligne=2)
    return CUDAMatMul(A, beta=beta, aligne=PYFR_CUDA.aligne(np.float64),
                      n=n, ldb=n, ldc=n)


def recorded():
    """{dataset: {(op, n): [(variant, seconds)]}}, the PyFR file at the n
    where every candidate was timed."""
    out = {}
    for ds, (fname, n) in DATASETS.items():
        data = read_times(os.path.join(FIXTURES, fname))
        if n is None:
            out[ds] = {(op, None): rows for op, rows in data.items()}
        else:
            out[ds] = {(op, m): rows for (op, m), rows in data.items()
                       if m == n}
    return out


def before_orders(checkout, keys):
    """{(op, n): [variant]} of the gimmik in directory `checkout`."""
    req = {'suite': SUITE, 'keys': sorted(keys, key=str),
           'aligne': PYFR_CUDA.aligne(np.float64),
           'beta': {op: default_beta(op) for op, _ in keys}}
    got = in_checkout(checkout, ORDERS, req)
    out = {}
    for k, v in got['orders'].items():
        op, n = k.split(' ')
        out[op, None if n == 'None' else int(n)] = v
    return out


def replay(mm, times, order):
    """(variant, seconds) of the walk's pick over `order` cut to the timed."""
    return picked(replay_times(PYFR_CUDA, mm, times, arch=(9, 0),
                               offer=order, timed_only=True))


def replay_rows(before_dir):
    data = recorded()
    rows = []
    with np.load(SUITE) as z:
        names = set(z.files)
        keys = [k for d in data.values() for k in d if k[0] in names]
        before = before_orders(before_dir, keys)
        for ds, d in data.items():
            for (op, n), timed in d.items():
                if op not in names:
                    continue
                mm = generator(z[op], default_beta(op), n)
                after = mm.candidates(np.float64, compute_capability=(9, 0))
                times = with_twins(dict(timed), after)
                by_v = {c.variant: c for c in after}
                for c in after:    # a revision older than the stcg stores
                    by_v.setdefault(recorded_name(c.variant), c)
                bef = [by_v[v] for v in before[op, n] if v in by_v]
                best = min(times[v] for v in by_v if v in times)
                (bv, bt), (av, at) = replay(mm, times, bef), \
                    replay(mm, times, after)
                rows.append({'dataset': ds, 'op': op, 'n': n or '',
                             'before_pick': bv, 'after_pick': av,
                             'before_over_best': round(bt / best, 4),
                             'after_over_best': round(at / best, 4),
                             'after_over_before': round(at / bt, 4)})
    return rows


def recorded_context(paths):
    """{(op, n, variant): geomean ctx_over_up} of in_context.py candidate
    files (rows timed without error)."""
    got = {}
    for p in paths:
        with open(p, newline='') as f:
            for r in csv.DictReader(f):
                if r.get('status', 'ok') == 'ok' and r.get('ctx_over_up'):
                    got.setdefault((r['op'], int(r['n']), r['variant']),
                                   []).append(float(r['ctx_over_up']))
    return {k: geomean(v) for k, v in got.items()}


def with_recorded_context(rows, ctx):
    """rows with before_ctx and after_ctx: their picks' recorded in-context
    time over upstream's ('' where not recorded; the PyFR dataset only)."""
    for r in rows:
        for side in ('before', 'after'):
            key = (r['op'], r['n'] or None, r[f'{side}_pick'])
            r[f'{side}_ctx'] = (round(ctx[key], 4) if key in ctx else '')
    return rows


def context_summary(rows):
    """The changed picks both of whose in-context times are recorded."""
    rs = [r for r in rows if r['before_pick'] != r['after_pick']
          and r.get('before_ctx') not in ('', None)
          and r.get('after_ctx') not in ('', None)]
    if not rs:
        return 'recorded context: no changed pick recorded on both sides'
    return (f'recorded context: {len(rs)} changed picks; after/before '
            f'{geomean(r["after_ctx"] / r["before_ctx"] for r in rs):.4f}, '
            f'over upstream before {geomean(r["before_ctx"] for r in rs):.4f}'
            f' after {geomean(r["after_ctx"] for r in rs):.4f}; above {MISS}:'
            f' before {sum(r["before_ctx"] > MISS for r in rs)}, after '
            f'{sum(r["after_ctx"] > MISS for r in rs)}')


def context_rows(before, afters):
    def load(p):
        with open(p, newline='') as f:
            return {r['op']: r for r in csv.DictReader(f)}
    old, new = load(before), {}
    for p in afters:
        new.update(load(p))
    return [{'dataset': 'context', 'op': op, 'n': r['n'],
             'before_pick': old[op]['walk_pick'], 'after_pick': r['walk_pick'],
             'before_over_best': old[op]['ours_over_up'],
             'after_over_best': r['ours_over_up'],
             'after_over_before': round(float(r['ours_over_up'])
                                        / float(old[op]['ours_over_up']), 4)}
            for op, r in new.items() if op in old]


def geomean(xs):
    xs = [float(x) for x in xs]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else math.nan


def summary(rows):
    out = []
    for ds in dict.fromkeys(r['dataset'] for r in rows):
        rs = [r for r in rows if r['dataset'] == ds]
        worse = sorted((r for r in rs if r['after_over_before'] > MISS),
                       key=lambda r: -r['after_over_before'])
        out.append(
            f'{ds}: {len(rs)} operators; after/before geomean '
            f'{geomean(r["after_over_before"] for r in rs):.4f}, '
            f'{len(worse)} above {MISS} (same pick in '
            f'{sum(r["before_pick"] == r["after_pick"] for r in worse)}); '
            f'pick/{"upstream" if ds == "context" else "best"} > {MISS}: '
            f'before {sum(float(r["before_over_best"]) > MISS for r in rs)},'
            f' after {sum(float(r["after_over_best"]) > MISS for r in rs)}')
        out += [f'  {r["op"]:14} {r["after_over_before"]:.3f}  '
                f'{r["before_pick"]} -> {r["after_pick"]}' for r in worse]
    return '\n'.join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--before', help='a checkout of the before revision')
    ap.add_argument('--context', nargs='+', metavar='RUN.csv',
                    help='in_context.py runs: before, then after(s)')
    ap.add_argument('--csv', help='write the per-operator rows here')
    ap.add_argument('--recorded-context', nargs='+', metavar='CANDS.csv',
                    help="in_context.py candidate files: the replayed "
                    "picks' recorded in-context times")
    args = ap.parse_args(argv)
    if not args.before and not args.context:
        ap.error('give --before, --context or both')
    if args.context and len(args.context) < 2:
        ap.error('--context needs a before and at least one after run')
    rows = replay_rows(args.before) if args.before else []
    if args.recorded_context:
        if not args.before:
            ap.error('--recorded-context needs --before')
        rows = with_recorded_context(
            rows, recorded_context(args.recorded_context))
    if args.context:
        rows += context_rows(args.context[0], args.context[1:])
    print(summary(rows))
    if args.recorded_context:
        print(context_summary(rows))
    if args.csv:
        with open(args.csv, 'w', newline='') as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == '__main__':
    main()
