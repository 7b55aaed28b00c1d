"""The loads a thread of each cstream-mblock build issues over its row group
(the family's `thread_loads`: used B rows plus, where beta != 0, its rows of
C, times the width) beside what ptxas made of it in a spill audit: the data
behind `cstream_mblock.MAX_GROUP_LOADS` (docs/cuda-spills.md).

    PYTHONPATH=. python3 bench/cuda/mblock_loads.py AUDIT.csv [--out CSV]

AUDIT.csv is a `cuda_spill_audit.py` result (both suites' operators and
their thinned copies, f64 or f32, sizes rt4 or baked); its m-block rows are
matched to the candidates the generator makes now with the loads gate
lifted (so the builds the gate removes are counted too).  Prints the most
loads of a build that did not spill and the fewest of one that spilled, per
launch bound (free or not)."""

import argparse
import csv
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench import RESULTS  # noqa: E402
from bench.cuda.cuda_spill_audit import (DTYPES, SIZES,  # noqa: E402
                                         load_ops)

FAMILY = 'cstream-mblock'
FIELDS = ['op', 'dtype', 'beta', 'sizes', 'variant', 'width',
          'thread_loads',
          'est_registers', 'minblocks', 'registers', 'spill_stores']


def loads_of(A, beta, sizes, dtype='f64'):
    """{variant: (thread loads, width)} of A's m-block candidates, the gate
    lifted."""
    from gimmik.cuda import CUDAMatMul
    from gimmik.families.cstream_mblock import CstreamMblock
    from gimmik.validate import check_dtype
    dt = check_dtype(DTYPES[dtype])
    saved = CstreamMblock.max_thread_loads
    CstreamMblock.max_thread_loads = {}
    try:
        mm = CUDAMatMul(A, beta=beta, **SIZES[sizes])
        out = {}
        for cand in mm._candidates(dt, (9, 0)):
            if cand.family == FAMILY:
                kern = mm.kernel(cand, dt)
                out[cand.variant] = (kern.thread_loads(),
                                     kern.params.get('width', 1))
        return out
    finally:
        CstreamMblock.max_thread_loads = saved


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('audit')
    ap.add_argument('--out', default=os.path.join(
        RESULTS, 'cuda-spill-audit-mblock-loads.csv'))
    args = ap.parse_args(argv)
    with open(args.audit) as f:
        rows = [r for r in csv.DictReader(f)
                if r['family'] == FAMILY and not r['error']]
    # the suites' operators, and their thinned copies where the audit has them
    ops = load_ops(['*'], any('~' in r['op'] for r in rows), float('inf'))
    cache, out = {}, []
    for r in rows:
        key = (r['op'], r['beta'], r['sizes'], r['dtype'])
        if r['op'] not in ops:
            continue
        if key not in cache:
            cache[key] = loads_of(ops[r['op']], float(r['beta']),
                                  r['sizes'], r['dtype'])
        if r['variant'] not in cache[key]:
            continue
        loads, width = cache[key][r['variant']]
        out.append({'op': r['op'], 'dtype': r['dtype'], 'beta': r['beta'],
                    'sizes': r['sizes'],
                    'variant': r['variant'], 'width': width,
                    'thread_loads': loads,
                    'est_registers': r['est_registers'],
                    'minblocks': r['minblocks'],
                    'registers': r['registers'],
                    'spill_stores': r['spill_stores']})
    out.sort(key=lambda r: (r['thread_loads'], r['op'], r['variant']))
    with open(args.out, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(out)
    for bound in ('free', 'bounded'):
        sel = [r for r in out if bool(r['minblocks']) == (bound == 'bounded')]
        ok = [r['thread_loads'] for r in sel if int(r['spill_stores']) == 0]
        bad = [r['thread_loads'] for r in sel if int(r['spill_stores']) > 0]
        print(f'{bound}: {len(sel)} builds, {len(bad)} spill; most loads '
              f'without a spill {max(ok, default="-")}, spilling loads '
              f'{sorted(bad)}')
    print(f'wrote {args.out} ({len(out)} rows)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
