"""Per-target summary of bench/hip_offline/hip_offer_audit.py CSVs, as
Markdown: for each (dtype, n mode, arch), how many operators meet each of
the audit's targets, which do not and why, and which families' candidates
break the loads-batched target.

    PYTHONPATH=. python3 bench/hip_offline/hip_offer_summary.py \\
        bench/results/hip-offer-audit-*.csv
"""

import collections
import csv
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.hip_offline.hip_offer_audit import (  # noqa: E402
    MIN_AT_WAVES, MIN_DISTINCT, PYFR_NKERNS)

# (column, what it says), in table order; each a test of one CSV row
TARGETS = [
    ('compile', 'every offered candidate compiles'),
    ('distinct', f'>= {MIN_DISTINCT} distinct in the first {PYFR_NKERNS} '
                 '(or all offered)'),
    ('scratch', 'no offered candidate uses scratch'),
    ('waves', f'>= {MIN_AT_WAVES} of the first {PYFR_NKERNS} at >= 2 '
              'waves a SIMD'),
    ('vm0_first8', f'loads batched, the first {PYFR_NKERNS}'),
    ('vm0_all', 'loads batched, every offered candidate'),
    ('vm0_first8_wave', f'loads batched on a wave\'s path, the first '
                        f'{PYFR_NKERNS} (CSVs without the column: -)'),
]


def meets(r):
    """{target: bool, or None where the CSV lacks the column} of one
    audit row."""
    offered = int(r['offered'])
    first = min(offered, PYFR_NKERNS)
    return {
        'compile': 'do not compile' not in r['why'],
        'distinct': int(r['distinct_first8']) >= min(MIN_DISTINCT, offered),
        'scratch': int(r['max_scratch']) == 0,
        'waves': int(r['at_2_waves']) >= min(MIN_AT_WAVES, first),
        'vm0_first8': int(r['vm0_fail_first8']) == 0,
        'vm0_all': int(r['vm0_fail']) == 0,
        'vm0_first8_wave': (int(r['vm0_fail_first8_wave']) == 0
                            if r.get('vm0_fail_first8_wave') else None),
    }


def family(variant):
    return variant.split('/')[0]


def summary(rows):
    """Markdown lines summarising audit rows."""
    out = []
    groups = collections.defaultdict(list)
    for r in rows:
        groups[(r['dtype'], r['n_mode'], r['arch'])].append(r)
    out.append('| dtype | n | arch | operators | '
               + ' | '.join(t for t, _ in TARGETS)
               + ' | all but vm0 | all (first 8) | all |')
    out.append('|---' * (len(TARGETS) + 7) + '|')
    for key in sorted(groups):
        rs = groups[key]
        ok = [meets(r) for r in rs]
        counts = [('-' if any(m[t] is None for m in ok)
                   else sum(m[t] for m in ok)) for t, _ in TARGETS]
        base = sum(all(v for t, v in m.items() if not t.startswith('vm0'))
                   for m in ok)
        out.append(f'| {" | ".join(key)} | {len(rs)} | '
                   + ' | '.join(map(str, counts))
                   + f' | {base} | '
                   + f'{sum(int(r["pass_first8"]) for r in rs)} | '
                   + f'{sum(int(r["pass"]) for r in rs)} |')
    out.append('')
    out.append('Targets: ' + '; '.join(f'{t}: {w}' for t, w in TARGETS)
               + '.')
    for key in sorted(groups):
        rs = groups[key]
        out.append('')
        out.append(f'### {" ".join(key)}')
        for t, _ in TARGETS[:4]:
            bad = [r for r in rs if not meets(r)[t]]
            if bad:
                out.append(f'- {t} not met ({len(bad)}): ' + ', '.join(
                    f'{r["op"]} ({r["why"]})' for r in bad))
        fams = collections.Counter()
        first = collections.Counter()
        for r in rs:
            fams.update({family(v) for v in r['vm0_fail_variants'].split()})
            if int(r['vm0_fail_first8']):
                first[r['op']] = int(r['vm0_fail_first8'])
        if fams:
            out.append('- operators with a candidate of the family that '
                       'waits for all loads more than once per 8: '
                       + ', '.join(f'{f} {c}' for f, c in
                                   fams.most_common()))
        small = [r for r in rs if not meets(r)['vm0_first8']
                 and int(r['nnz']) < 500]
        out.append(f'- loads batched in the first 8 not met: {len(first)} '
                   f'operators ({len(small)} of them under 500 non-zeros)')
    return out


def main(argv=None):
    rows = []
    for path in (argv if argv is not None else sys.argv[1:]):
        with open(path) as f:
            rows += list(csv.DictReader(f))
    print('\n'.join(summary(rows)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
