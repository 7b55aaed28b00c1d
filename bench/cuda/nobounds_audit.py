"""Each build of a spill audit compiled again with its launch bounds removed:
ptxas's registers and spills as offered beside those it picks with no cap
below 255 registers (docs/cuda-spills.md, "Without launch bounds").

    PYTHONPATH=. python3 bench/cuda/nobounds_audit.py AUDIT.csv [AUDIT.csv ...]
        [--free] [--out CSV] [--cache DIR]

AUDIT.csv: `cuda_spill_audit.py` results (sm_90 rows are read; both suites'
operators and their thinned copies).  --free: only the builds offered
without a minimum of blocks.  A block of more than 256 threads keeps its
bounds (ptxas could then take more registers than one block may launch
with); its `registers_none` is left empty.  Sources and ptxas results
share the spill audit's cache."""

import argparse
import csv
import os
import shutil
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench import RESULTS  # noqa: E402
from bench.cuda import cuda_spill_audit as audit  # noqa: E402
from bench.cuda.cuda_launch_bounds import BOUNDS, with_bound  # noqa: E402

# 255 registers x 256 threads still fit an SM's 64K registers
MAX_THREADS = 256
FIELDS = ['op', 'dtype', 'sizes', 'variant', 'family', 'est_registers',
          'minblocks', 'nthreads', 'registers', 'spill_stores',
          'registers_none', 'spill_stores_none']


def builds(paths, free):
    """{(op, sizes, dtype): {variant: minblocks}} of the audits' sm_90 rows."""
    out = {}
    for path in paths:
        with open(path) as f:
            for r in csv.DictReader(f):
                if r['arch'] != 'sm_90' or r['error'] or (
                        free and r['minblocks']):
                    continue
                out.setdefault((r['op'], r['sizes'], r['dtype']),
                               {})[r['variant']] = r['minblocks']
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('audits', nargs='+')
    ap.add_argument('--free', action='store_true',
                    help='only builds without a minimum of blocks')
    ap.add_argument('--out', default=os.path.join(
        RESULTS, 'cuda-spill-audit-nobounds.csv'))
    ap.add_argument('--cache', default=os.path.join(ROOT, '.devwork',
                                                    'spill-cache'))
    args = ap.parse_args(argv)
    nvcc = shutil.which('nvcc')
    if nvcc is None:
        ap.error('nvcc is not on PATH')
    from gimmik.operators import default_beta
    want = builds(args.audits, args.free)
    ops = audit.load_ops(['*'], any('~' in op for op, _, _ in want),
                         float('inf'))
    cache = audit.Cache(args.cache)
    rows, todo, nnz_of = [], {}, {}
    for (op, sizes, dtype), variants in sorted(want.items()):
        nnz = int(np.count_nonzero(ops[op]))
        for _, var, fam, est, mb, src in audit.candidates(
                ops[op], default_beta(op.split('~')[0]), audit.SIZES[sizes],
                (9, 0), dtype=audit.DTYPES[dtype]):
            if var not in variants:
                continue
            nthreads = int(BOUNDS.search(src)[1])
            srcs = {'': src}
            if nthreads <= MAX_THREADS:
                srcs['_none'] = with_bound(src, 'none')
            keys = {}
            for suffix, s in srcs.items():
                keys[suffix] = audit.src_key(s, 'sm_90')
                if cache.get(keys[suffix]) is None:
                    todo[keys[suffix]] = s
                    nnz_of[keys[suffix]] = nnz
            rows.append(({'op': op, 'dtype': dtype, 'sizes': sizes,
                          'variant': var, 'family': fam,
                          'est_registers': est, 'minblocks': mb or '',
                          'nthreads': nthreads}, keys))
    print(f'{len(rows)} builds, {len(todo)} sources to compile', flush=True)
    # the audit's batching: big operators' sources in nvcc runs of their own
    batches = audit.batches(sorted(todo.items()), nnz_of)
    for i, batch in enumerate(batches):
        for key, res in audit.compile_batch(nvcc, batch, 'sm_90').items():
            cache.put(key, res)
        print(f'  {i + 1}/{len(batches)} nvcc runs', flush=True)
    spilled = {'': 0, '_none': 0}
    with open(args.out, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for row, keys in rows:
            for suffix, key in keys.items():
                res = cache.get(key) or {}
                row['registers' + suffix] = res.get('registers', '')
                row['spill_stores' + suffix] = res.get('spill_stores', '')
                spilled[suffix] += bool(res.get('spill_stores'))
            w.writerow(row)
    print(f'{len(rows)} builds: {spilled[""]} spill as offered, '
          f'{spilled["_none"]} without launch bounds')
    return 0


if __name__ == '__main__':
    sys.exit(main())
