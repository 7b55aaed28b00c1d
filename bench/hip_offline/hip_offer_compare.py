"""Before/after table of two bench/hip_offline/hip_offer_audit.py CSVs (same
operators, dtype and n mode): per operator, candidates offered, the best
waves per SIMD among the first 8 and the worst scratch on gfx942 and
gfx90a, as Markdown.

    PYTHONPATH=. python3 bench/hip_offline/hip_offer_compare.py \\
        BEFORE.csv AFTER.csv > table.md
"""

import csv
import sys


def load(path):
    rows = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            rows[(r['op'], r['dtype'], r['n_mode'], r['arch'])] = r
    return rows


def best_waves(r):
    return max((int(w) for w in r['waves_first8'].split()), default=0)


def main(argv=None):
    before, after = map(load, (argv or sys.argv[1:])[:2])
    keys = sorted({k[:3] for k in before} & {k[:3] for k in after})
    print('| operator | offered | best waves gfx942 | scratch gfx942 | '
          'scratch gfx90a | at >= 2 waves (first 8, gfx942) |')
    print('|---|---|---|---|---|---|')
    for op, dtype, mode in keys:
        cells = []
        for what in ('offered', 'waves', 'scratch942', 'scratch90a', 'at2'):
            pair = []
            for rows in (before, after):
                r942 = rows.get((op, dtype, mode, 'gfx942'))
                r90a = rows.get((op, dtype, mode, 'gfx90a'))
                if what == 'offered':
                    pair.append(r942['offered'])
                elif what == 'waves':
                    pair.append(str(best_waves(r942)))
                elif what == 'scratch942':
                    pair.append(r942['max_scratch'])
                elif what == 'scratch90a':
                    pair.append(r90a['max_scratch'] if r90a else '-')
                else:
                    pair.append(r942['at_2_waves'])
            cells.append(' -> '.join(pair))
        print(f'| {op} | ' + ' | '.join(cells) + ' |')
    return 0


if __name__ == '__main__':
    sys.exit(main())
