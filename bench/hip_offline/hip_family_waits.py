"""Full waits for loads per HIP family: for each operator PyFR's HIP
backend sends (both suites), every candidate the generator offers (n =
110080 baked, aligne 16, beta 1 for M3/M6 else 0) compiled by clang-19,
one CSV row a candidate: its rank in the offer, family, global loads,
`s_waitcnt vmcnt(0)` count, waves a SIMD, VGPRs and scratch.  With
--summary, per family over the CSV's rows (or only the operators of
--ops): full waits per global load, over the first 8 and over every
offered candidate, and the mean waves a SIMD.

    PYTHONPATH=. nice python3 bench/hip_offline/hip_family_waits.py --jobs 2 \\
        --out bench/results/hip-family-waits-after.csv
    python3 bench/hip_offline/hip_family_waits.py --summary \\
        bench/results/hip-family-waits-after.csv [--ops OPS]

gimmik is imported from PYTHONPATH (so that another checkout's generator
can be measured with this script); reports are cached (gimmik.isa).
"""

import argparse
import collections
import csv
import fnmatch
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

FIELDS = ['op', 'arch', 'rank', 'variant', 'family', 'global_loads',
          'vmcnt0', 'occupancy', 'vgprs', 'agprs', 'scratch_bytes']


def measure(patterns, arches, dtype, jobs):
    sys.path.append(ROOT)
    from bench.hip_offline.hip_offer_audit import ALIGNE, PYFR_N, operators
    from gimmik import HIPMatMul
    from gimmik.isa import inspect_many
    from gimmik.operators import default_beta

    rows = []
    for name, A in operators(patterns).items():
        mm = HIPMatMul(A, beta=default_beta(name), aligne=ALIGNE, n=PYFR_N,
                       ldb=PYFR_N, ldc=PYFR_N)
        for arch in arches:
            offered = list(mm.kernels(dtype, gcn_arch=arch))
            reps = inspect_many([(s, arch) for s, _ in offered], jobs)
            for rank, ((_, meta), rep) in enumerate(zip(offered, reps)):
                if isinstance(rep, Exception):
                    continue
                rows.append({'op': name, 'arch': arch, 'rank': rank,
                             'variant': meta['variant'],
                             'family': meta['tplname'],
                             'global_loads':
                                 sum(rep['global_loads'].values()),
                             **{k: rep[k] for k in FIELDS[6:]}})
        print(name, flush=True)
    return rows


def summary(rows, first=8):
    """Markdown lines: per family and arch, waits per load over the first
    `first` and over all, and mean waves."""
    acc = collections.defaultdict(lambda: [0, 0, 0, 0, 0, 0])
    for r in rows:
        a = acc[(r['family'], r['arch'])]
        loads, waits = int(r['global_loads']), int(r['vmcnt0'])
        if int(r['rank']) < first:
            a[0] += loads
            a[1] += waits
            a[4] += int(r['occupancy'])
            a[5] += 1
        a[2] += loads
        a[3] += waits
    out = ['| family | arch | candidates (first 8) | waits/load (first 8) '
           '| waits/load (all) | mean waves (first 8) |',
           '|---|---|---|---|---|---|']
    for (fam, arch), (l8, w8, la, wa, occ, n8) in sorted(acc.items()):
        out.append(f'| {fam} | {arch} | {n8} | '
                   f'{w8 / l8 if l8 else 0:.3f} | '
                   f'{wa / la if la else 0:.3f} | '
                   f'{occ / n8 if n8 else 0:.2f} |')
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--ops', default='*',
                    help='comma-separated fnmatch globs of operator names')
    ap.add_argument('--arch', nargs='+', default=['gfx942'])
    ap.add_argument('--dtype', default='float64')
    ap.add_argument('--jobs', type=int, default=os.cpu_count() or 1)
    ap.add_argument('--out', help='CSV to write')
    ap.add_argument('--summary', nargs='+', metavar='CSV',
                    help='summarise these CSVs instead of measuring')
    args = ap.parse_args(argv)
    pats = args.ops.split(',')
    if args.summary:
        rows = []
        for path in args.summary:
            with open(path) as f:
                rows += [r for r in csv.DictReader(f)
                         if any(fnmatch.fnmatch(r['op'], p) for p in pats)]
        print('\n'.join(summary(rows)))
        return 0
    if not args.out:
        ap.error('--out is required unless --summary is given')
    rows = measure(pats, args.arch, np.dtype(args.dtype).name, args.jobs)
    with open(args.out, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == '__main__':
    sys.exit(main())
