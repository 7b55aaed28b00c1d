"""Validate gimmik.cost's CUDA form on measured H100 candidate times.

For every (operator, n) of a candidates CSV of bench/pyfr/pyfr_walk.py (kind
'ours', status 'ok'), each measured variant is mapped to today's
candidate of CUDAMatMul with PyFR's arguments (aligne 16, n = ldb = ldc
baked); the mapped ones are estimated with gimmik.cost (arch sm_90) from
the facts ptxas gave the measured binary (the CSV's registers, local and
shared bytes), or with --compile from nvcc -cubin -Xptxas -v on today's
source; then per (operator, n):

- spearman: rank correlation of estimated and measured times;
- model_pick_over_best: measured time of the estimate's first pick over
  the best measured time (1.0: the model picked the best);
- order_pick_over_best: the same for today's gimmik.order first candidate
  among the mapped ones, for comparison.

One row per (operator, n) in OUT (default
bench/results/cost-validation-h100-NAME.csv) and a summary by operator
class on stdout.

Offline (no GPU):

    PYTHONPATH=. python bench/model/cost_validate.py \\
        bench/results/pyfr-walk-h100-gemm-candidates.csv --name gemm

A fresh measurement on the device first (every candidate timed at
PyFR's n by bench/pyfr/pyfr_walk.py), then the validation of it:

    PYTHONPATH=. python bench/model/cost_validate.py --measure \\
        --ops 'p[1-6]-*' --name fresh --out-dir "$OUT"
"""

import argparse
import collections
import csv
import math
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench import BENCH, OPERATORS, RESULTS  # noqa: E402

from gimmik import cost  # noqa: E402
from gimmik.operators import default_beta, parse_name  # noqa: E402
from gimmik.pyfr import PROTOCOLS  # noqa: E402

# PyFR's CUDA alignment of f64 panels (bench/pyfr/pyfr_walk.py's)
ALIGNE = PROTOCOLS['3.1', 'cuda'].aligne(np.float64)

# The target: the estimate's first pick within this of the best
WITHIN = 1.05

# Operators with fewer mapped candidates than this are not validated
MIN_CANDIDATES = 3

FIELDS = ['op', 'n', 'class', 'mat', 'm', 'k', 'nnz', 'density', 'beta',
          'measured', 'mapped', 'best_variant', 'best_time_s',
          'model_pick', 'model_pick_time_s', 'model_pick_over_best',
          'model_pick_est_s', 'model_pick_bound', 'spearman',
          'order_pick', 'order_pick_over_best', 'est_copy_frac_best',
          'facts']


def op_class(info, beta):
    """The regime of an operator from properties of A (not its name)."""
    dense = info.density >= 0.5
    if dense and max(info.m, info.k) > 128:
        return 'dense-big'
    if dense:
        return 'dense'
    if info.m > 64:
        return 'sparse-tall' if info.m >= 2*info.k else 'sparse-big'
    if info.k > info.m:
        return 'sparse-wide'
    return 'sparse-small'


def spearman(x, y):
    """Spearman's rank correlation (average ranks for ties)."""
    from scipy.stats import spearmanr
    if len(x) < 3:
        return math.nan
    r = spearmanr(x, y).statistic
    return float(r)


def read_measured(path):
    """{(op, n, baked): [(variant, seconds, registers, local, shared)]}
    of a candidates CSV of bench/pyfr/pyfr_walk.py (n baked, ptxas facts
    recorded) or of gimmik sweep / bench/cuda/cuda_bench.py (runtime n, kind
    'gimmik', no facts)."""
    out = collections.defaultdict(list)
    with open(path) as f:
        for r in csv.DictReader(f):
            if 'operator' in r:         # gimmik sweep's candidates.csv
                if r.get('kind') != 'gimmik' or r.get('error'):
                    continue
                r = dict(r, op=r['operator'], variant=r['name'],
                         kind='ours', status='ok', baked='')
            if r.get('kind', 'ours') != 'ours' or r.get('status') != 'ok':
                continue
            try:
                t = float(r['time_s'])
            except (TypeError, ValueError):
                continue
            out[r['op'], int(r['n']), r.get('baked', 'y') != ''].append(
                (r['variant'], t, _int(r.get('registers')),
                 _int(r.get('local_mem')), _int(r.get('shared_mem'))))
    return out


def _int(x):
    try:
        return int(float(x))
    except (TypeError, ValueError):
        return None


_PTXAS = re.compile(r'Used (\d+) registers')
_SMEM = re.compile(r'(\d+) bytes smem')
_SPILL = re.compile(r'(\d+) bytes spill stores')


def ptxas_facts(src, arch='sm_90'):
    """gimmik.cost.Facts of a CUDA source from nvcc -cubin -Xptxas -v."""
    with tempfile.TemporaryDirectory() as tmp:
        cu = os.path.join(tmp, 'k.cu')
        with open(cu, 'w') as f:
            f.write('extern "C" {\n' + src + '\n}\n')
        res = subprocess.run(
            ['nvcc', '-cubin', f'-arch={arch}', '-Xptxas', '-v', '-o',
             os.path.join(tmp, 'k.cubin'), cu],
            capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(res.stderr[-1000:])
    log = res.stderr
    regs = int(_PTXAS.search(log).group(1))
    smem = _SMEM.search(log)
    spill = _SPILL.search(log)
    return cost.facts_from_ptxas(regs, int(smem.group(1)) if smem else 0,
                                 int(spill.group(1)) if spill else 0)


def validate(measured, ops, facts_from='csv', ns=None):
    from gimmik.cuda import CUDAMatMul
    from gimmik.tune import _ld_align      # the sweep's aligne rule
    rows, unmapped = [], collections.Counter()
    for (name, n, baked), meas in sorted(measured.items()):
        if ns and n not in ns:
            continue
        if name not in ops:
            unmapped['operator not in suite'] += len(meas)
            continue
        A, beta = ops[name], default_beta(name)
        if baked:
            mm = CUDAMatMul(A, beta=beta, aligne=ALIGNE, n=n, ldb=n, ldc=n)
        else:      # the sweep's generator: runtime n, ldb = ldc = n
            mm = CUDAMatMul(A, beta=beta, aligne=_ld_align(n, n))
        cands = mm.candidates(np.float64, compute_capability=(9, 0))
        by_variant = {c.variant: c for c in cands}
        items = []
        for variant, t, regs, local, shared in meas:
            c = by_variant.get(variant)
            if c is None:
                unmapped[variant.split('/')[0]] += 1
                continue
            if facts_from == 'plan':
                facts = cost.plan_facts(mm, c, np.float64)
            elif facts_from == 'compile' or regs is None:
                src, _ = mm.render(c, np.float64, 'gimmik_mm')
                facts = ptxas_facts(src)
            else:
                facts = cost.facts_from_ptxas(regs, shared or 0, local or 0)
            est = cost.estimate_candidate(mm, c, np.float64, 'sm_90', n,
                                          facts)
            items.append((c, t, est, facts.source))
        if len(items) < MIN_CANDIDATES:
            continue
        times = [t for _, t, _, _ in items]
        ests = [e.seconds for _, _, e, _ in items]
        best = min(range(len(items)), key=lambda i: times[i])
        pick = min(range(len(items)), key=lambda i: (ests[i], i))
        order = {c.variant: i for i, c in enumerate(cands)}
        first = min(range(len(items)),
                    key=lambda i: order[items[i][0].variant])
        info = mm.info
        rows.append({
            'op': name, 'n': n, 'class': op_class(info, beta),
            'mat': parse_name(name)[2], 'm': info.m, 'k': info.k,
            'nnz': info.nnz, 'density': f'{info.density:.3f}',
            'beta': beta, 'measured': len(meas), 'mapped': len(items),
            'best_variant': items[best][0].variant,
            'best_time_s': f'{times[best]:.6e}',
            'model_pick': items[pick][0].variant,
            'model_pick_time_s': f'{times[pick]:.6e}',
            'model_pick_over_best': f'{times[pick] / times[best]:.4f}',
            'model_pick_est_s': f'{ests[pick]:.6e}',
            'model_pick_bound': items[pick][2].bound,
            'spearman': f'{spearman(ests, times):.3f}',
            'order_pick': items[first][0].variant,
            'order_pick_over_best': f'{times[first] / times[best]:.4f}',
            'est_copy_frac_best': f'{items[best][2].copy_frac:.3f}',
            'facts': items[0][3]})
    return rows, unmapped


def summarise(rows, unmapped, out=sys.stdout):
    def line(label, rs):
        if not rs:
            return
        r = [float(x['model_pick_over_best']) for x in rs]
        o = [float(x['order_pick_over_best']) for x in rs]
        s = [float(x['spearman']) for x in rs
             if not math.isnan(float(x['spearman']))]
        print(f'{label:14s} {len(rs):4d} ops  model within 5%: '
              f'{sum(v <= WITHIN for v in r) / len(r):6.1%}  '
              f'geomean {math.exp(np.mean(np.log(r))):.3f}  '
              f'worst {max(r):.2f}  | order within 5%: '
              f'{sum(v <= WITHIN for v in o) / len(o):6.1%}  '
              f'| spearman median {np.median(s) if s else math.nan:.2f}',
              file=out)
    line('all', rows)
    for c in sorted({r['class'] for r in rows}):
        line(c, [r for r in rows if r['class'] == c])
    for c in sorted({r['mat'] for r in rows}):
        line(c, [r for r in rows if r['mat'] == c])
    mapped = sum(r['mapped'] for r in rows)
    print(f'mapped {mapped} measured candidates; not mapped to today\'s '
          f'candidates: {sum(unmapped.values())} '
          f'({dict(unmapped.most_common())})', file=out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('candidates', nargs='*',
                    help='candidates CSVs of bench/pyfr/pyfr_walk.py')
    ap.add_argument('--name', default=None,
                    help='output name: cost-validation-h100-NAME.csv')
    ap.add_argument('--out-dir', default=RESULTS)
    ap.add_argument('--suite', nargs='+',
                    default=[os.path.join(OPERATORS, 'pyfr-ops.npz')])
    ap.add_argument('--facts', choices=('csv', 'compile', 'plan'),
                    default='csv',
                    help="compiler facts: the CSV's registers/local/shared "
                    "(default; nvcc where the CSV has none), nvcc -Xptxas "
                    "-v on today's sources, or the families' register "
                    "estimates")
    ap.add_argument('--measure', action='store_true',
                    help='first time every candidate on the device with '
                    'bench/pyfr/pyfr_walk.py at n ~ 110080 (needs a GPU)')
    ap.add_argument('--ops', nargs='+', default=['*'])
    ap.add_argument('--budget', type=float, default=480,
                    help='--measure: start no operator after this many '
                    'seconds (the walk resumes from its CSV when run '
                    'again)')
    ap.add_argument('--n', type=int, nargs='*', default=[110080],
                    help='only these n (default PyFR\'s 110080, where '
                    'every candidate was timed; none given: all)')
    args = ap.parse_args(argv)

    paths = list(args.candidates)
    if args.measure:
        name = f'pyfr-walk-cost-{args.name or "fresh"}'
        code = subprocess.call(
            [sys.executable, os.path.join(BENCH, 'pyfr', 'pyfr_walk.py'),
             '--ops', *args.ops, '--suite', args.suite[0],
             '--out', args.out_dir, '--name', name, '--n', '110080',
             '--all-n', '110080', '--budget', str(args.budget)])
        if code:
            return code
        paths.append(os.path.join(args.out_dir, f'{name}-candidates.csv'))
    if not paths:
        ap.error('give candidates CSVs or --measure')

    ops = {}
    for path in args.suite:
        with np.load(path) as z:
            ops.update({k: z[k] for k in z.files})
    measured = {}
    for p in paths:
        measured.update(read_measured(p))
    rows, unmapped = validate(measured, ops, args.facts, set(args.n))
    name = args.name or os.path.basename(paths[0]).replace(
        '-candidates.csv', '')
    out = os.path.join(args.out_dir, f'cost-validation-h100-{name}.csv')
    with open(out, 'w', newline='') as f:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        w.writerows(rows)
    print(f'{out}: {len(rows)} (operator, n)')
    summarise(rows, unmapped)
    return 0


if __name__ == '__main__':
    sys.exit(main())
