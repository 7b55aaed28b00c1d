"""clang's ISA report of every HIP MFMA candidate (mfma-dense, mfma-gemm) of
every dense operator of a suite, for gfx942 and gfx90a: registers, waves per
SIMD, scratch and LDS, one row per (operator, strides, candidate).

f64; beta = 1 for m3 and m6, else 0; aligne 2 (16-byte accesses) and none
(scalar accesses).  No GPU needed; reports are cached (gimmik.isa).

    PYTHONPATH=. python bench/hip_offline/hip_mfma_isa.py \\
        --out bench/results/hip-mfma-isa.csv

Prints, on stderr, the lowest waves per SIMD and highest scratch of each
family and arch.
"""

import argparse
import csv
import sys

import numpy as np

from gimmik import isa
from gimmik.analysis import DENSE_DENSITY
from gimmik.hip import HIPMatMul
from gimmik.operators import default_beta, suite

ARCHES = ('gfx942', 'gfx90a')
FAMILIES = ('mfma-dense', 'mfma-gemm')
FIELDS = ['op', 'm', 'k', 'beta', 'aligne', 'variant']
PER_ARCH = [('vgpr', 'vgprs'), ('agpr', 'agprs'), ('waves', 'occupancy'),
            ('scratch', 'scratch_bytes'), ('lds', 'lds_bytes')]


def rows(ops, jobs):
    for name, A in ops.items():
        beta = default_beta(name)
        for aligne in (2, None):
            mm = HIPMatMul(A, beta=beta, aligne=aligne)
            found = {}
            for arch in ARCHES:
                for c in mm._candidates(np.float64, arch, 64):
                    if c.family in FAMILIES:
                        src, _ = mm.render(c, np.float64)
                        found.setdefault(c.variant, {})[arch] = src
            order = list(found)
            todo = [(found[v][a], a) for v in order for a in ARCHES
                    if a in found[v]]
            reps = iter(isa.inspect_many(todo, jobs))
            for v in order:
                row = {'op': name, 'm': A.shape[0], 'k': A.shape[1],
                       'beta': beta, 'aligne': aligne or '', 'variant': v}
                for a in ARCHES:
                    rep = next(reps) if a in found[v] else None
                    for col, key in PER_ARCH:
                        if isinstance(rep, Exception):
                            row[f'{col}_{a}'] = 'error'
                        else:
                            row[f'{col}_{a}'] = '' if rep is None else rep[key]
                yield row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--ops', default='*', help='fnmatch glob(s) of operators')
    p.add_argument('--suite', default=None,
                   help='.npz file or directory of .mtx files (default: the '
                        'PyFR suite)')
    p.add_argument('--out', default='-', help='CSV file (default stdout)')
    p.add_argument('--jobs', type=int, default=None)
    args = p.parse_args(argv)
    ops = {k: A for k, A in suite(args.ops, args.suite).items()
           if (A != 0).mean() >= DENSE_DENSITY}
    fields = FIELDS + [f'{c}_{a}' for a in ARCHES for c, _ in PER_ARCH]
    out = sys.stdout if args.out == '-' else open(args.out, 'w', newline='')
    w = csv.DictWriter(out, fields)
    w.writeheader()
    worst = {}
    for row in rows(ops, args.jobs):
        w.writerow(row)
        out.flush()
        for a in ARCHES:
            waves, scratch = row[f'waves_{a}'], row[f'scratch_{a}']
            if waves not in ('', 'error'):
                fam = row['variant'].split('/')[0]
                lo, sc, n = worst.get((fam, a), (8, 0, 0))
                worst[(fam, a)] = (min(lo, waves), max(sc, scratch), n + 1)
    for (fam, a), (lo, sc, n) in sorted(worst.items()):
        print(f'{fam} {a}: {n} candidates, min waves/SIMD {lo}, '
              f'max scratch {sc}', file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main())
