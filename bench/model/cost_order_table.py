"""The first 8 HIP candidates of two offering orders side by side, each
with gimmik.cost's estimate (no GPU): the order of a before checkout
(--before, a directory holding another revision of gimmik, e.g. a git
worktree of main) and this checkout's, for PyFR's heaviest hex and prism
operators, each arch, n baked as PyFR bakes it.

One row per (operator, arch, order, position): the row id and variant,
the estimate of this checkout's gimmik.cost (plan facts, as the order
uses: est_us, est_copy_frac, est_bound), the waves per SIMD those facts
give (waves_plan) and, with --isa, clang-19's (waves_isa; compiles every
candidate once, then gimmik.isa's cache).

    git worktree add ../before <commit>
    PYTHONPATH=. python bench/model/cost_order_table.py --before ../before \\
        --out bench/results/hip-order-before-after.csv --isa
"""

import argparse
import csv
import fnmatch
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench import OPERATORS  # noqa: E402
from bench.model import in_checkout  # noqa: E402

from gimmik import cost  # noqa: E402
from gimmik.hip import HIPMatMul  # noqa: E402
from gimmik.operators import default_beta  # noqa: E402
from gimmik.pyfr import PROTOCOLS  # noqa: E402

# PyFR's HIP call: its aligne for f64, n = ldb = ldc baked, beta 1 for the
# operators that accumulate (M3, M6)
ALIGNE = PROTOCOLS['3.1', 'hip'].aligne(np.float64)
PYFR_N = 110080
FIRST = 8
OPS = ['p[3-6]-hex-m0', 'p[3-6]-hex-m3', 'p[3-6]-hex-m6', 'p[3-6]-hex-m132',
       'p[3-6]-hex-m460', 'p[3-6]-pri-m0', 'p[3-6]-pri-m3', 'p[3-6]-pri-m6',
       'p[3-6]-pri-m132', 'p[3-6]-pri-m460']

FIELDS = ['op', 'm', 'k', 'nnz', 'beta', 'arch', 'n', 'order', 'pos', 'row',
          'variant', 'est_us', 'est_copy_frac', 'est_bound', 'waves_plan',
          'waves_isa', 'offered']


# Run in the before checkout's interpreter: its offer order by variant
ORDERS = r'''
import json, sys
import numpy as np
import gimmik
from gimmik import HIPMatMul
req = json.load(sys.stdin)
z = np.load(req['suite'])
out = {}
for name in req['ops']:
    for arch in req['arch']:
        mm = HIPMatMul(z[name], beta=req['beta'][name], aligne=req['aligne'],
                       n=req['n'], ldb=req['n'], ldc=req['n'])
        out[name + ' ' + arch] = [c.variant for c in mm.candidates(
            np.float64, gcn_arch=arch)]
json.dump({'gimmik': gimmik.__file__, 'orders': out}, sys.stdout)
'''


def orders_of(checkout, suite, ops, arches, n):
    """{(op, arch): [variant]} of the gimmik in directory `checkout`."""
    req = {'suite': os.path.abspath(suite), 'ops': ops, 'arch': arches, 'n': n,
           'aligne': ALIGNE, 'beta': {o: default_beta(o) for o in ops}}
    got = in_checkout(checkout, ORDERS, req)
    return {tuple(k.split(' ')): v for k, v in got['orders'].items()}


def waves_per_simd(a, est, block_threads):
    return est.blocks_per_unit*-(-block_threads // a.lanes) / a.simds


def rows_for(name, A, arch, n, before, use_isa):
    beta = default_beta(name)
    mm = HIPMatMul(A, beta=beta, aligne=ALIGNE, n=n, ldb=n, ldc=n)
    cands = mm.candidates(np.float64, gcn_arch=arch)
    by_variant = {c.variant: c for c in cands}
    orders = {'after': cands}
    if before is not None:
        missing = [v for v in before if v not in by_variant]
        if missing:
            raise ValueError(f'{name} {arch}: before variants {missing} '
                             'are not candidates here')
        orders['before'] = [by_variant[v] for v in before]
    shown = {c.variant: c for o in orders.values() for c in o[:FIRST]}
    isa = {}
    if use_isa:
        from gimmik.isa import inspect_many
        vs = sorted(shown)
        reps = inspect_many([(mm.render(shown[v], np.float64)[0], arch)
                             for v in vs])
        isa = {v: r['occupancy'] for v, r in zip(vs, reps)
               if not isinstance(r, Exception)}
    a = cost.arch(cost.hip_arch(arch))
    out = []
    for label in ('before', 'after'):
        for pos, c in enumerate(orders.get(label, [])[:FIRST], 1):
            e = cost.estimate_candidate(mm, c, np.float64, a.name, n)
            w = cost.work(mm, c, np.float64)
            out.append({
                'op': name, 'm': A.shape[0], 'k': A.shape[1],
                'nnz': int(np.count_nonzero(A)), 'beta': beta,
                'arch': arch, 'n': n, 'order': label, 'pos': pos,
                'row': c.row, 'variant': c.variant,
                'est_us': f'{e.seconds*1e6:.1f}',
                'est_copy_frac': f'{e.copy_frac:.3f}', 'est_bound': e.bound,
                'waves_plan': f'{waves_per_simd(a, e, w.block_threads):g}',
                'waves_isa': isa.get(c.variant, ''),
                'offered': len(orders[label])})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--ops', nargs='+', default=OPS,
                    help='fnmatch globs of operator names')
    ap.add_argument('--suite', default=os.path.join(OPERATORS,
                                                    'pyfr-ops.npz'))
    ap.add_argument('--arch', nargs='+', default=['gfx942', 'gfx90a'])
    ap.add_argument('--n', type=int, default=PYFR_N)
    ap.add_argument('--before', default=None,
                    help='a checkout of the revision to compare with')
    ap.add_argument('--isa', action='store_true',
                    help="clang-19's waves per SIMD (compiles)")
    ap.add_argument('--out', default=None, help='CSV (default stdout)')
    args = ap.parse_args(argv)
    with np.load(args.suite) as z:
        ops = {k: z[k] for k in z.files
               if any(fnmatch.fnmatch(k, p) for p in args.ops)}
    names = sorted(ops, key=lambda k: -np.count_nonzero(ops[k]))
    before = (orders_of(args.before, args.suite, names, args.arch, args.n)
              if args.before else {})
    f = open(args.out, 'w', newline='') if args.out else sys.stdout
    w = csv.DictWriter(f, FIELDS)
    w.writeheader()
    for name in names:
        for arch in args.arch:
            w.writerows(rows_for(name, ops[name], arch, args.n,
                                 before.get((name, arch)), args.isa))
            f.flush()
    if args.out:
        f.close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
