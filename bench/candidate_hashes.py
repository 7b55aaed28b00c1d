"""Fingerprints of what the generators offer, to show that a refactor
leaves them unchanged: per case (operator, platform and its options, dtype,
beta, aligne, n baked or not) the sha256 of the ordered list of (source,
meta) that kernels() yields when drained with send(None).  Dicts inside
meta (params) are compared with their keys sorted.

    PYTHONPATH=. python3 bench/candidate_hashes.py --out before.json
    PYTHONPATH=. python3 bench/candidate_hashes.py --compare before.json

--sample takes every third operator of each suite plus its largest ones
(the quick check); without it every operator is rendered (slow: all
cases of both suites take about an hour on two cores).  --jobs renders in
that many processes.  --compare reports the cases whose hash differs or
which either side lacks, and exits 1 if there are any.
"""

import argparse
import hashlib
import json
import multiprocessing
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SUITES = [os.path.join(HERE, 'operators', f)
          for f in ('pyfr-ops.npz', 'pyfr-ops-p7.npz')]

# n, ldb and ldc where the case bakes them (PyFR's panel of a 22k-element
# hex mesh)
BAKED_N = 110080

# (platform, generator options) of every case
PLATFORMS = [('hip', {'gcn_arch': 'gfx90a'}), ('hip', {'gcn_arch': 'gfx942'}),
             ('cuda', {'compute_capability': (8, 0)}),
             ('cuda', {'compute_capability': (9, 0)}), ('c', {})]
DTYPES = ('float32', 'float64')
BETAS = (0.0, 1.0)
ALIGNES = (2, None, 16)

# One template lookup per platform for every generator of a process, so
# that each template is compiled once (the templates are the same files)
_LOOKUPS = {}

# With --sample: besides every third operator, this many of the largest
# (most non-zeros) of each suite
SAMPLE_LARGEST = 4


def operators(sample):
    """[(suite file name, key)] of the operators to render."""
    out = []
    for path in SUITES:
        with np.load(path) as ops:
            keys = sorted(k for k in ops.files
                          if ops[k].ndim == 2 and ops[k].size)
            if sample:
                nnz = {k: np.count_nonzero(ops[k]) for k in keys}
                big = sorted(keys, key=lambda k: -nnz[k])[:SAMPLE_LARGEST]
                keys = sorted(set(keys[::3]) | set(big))
        out += [(os.path.basename(path), k) for k in keys]
    return out


def _canonical(value):
    if isinstance(value, dict):
        return sorted((k, _canonical(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(_canonical(v) for v in value)
    return value


def case_hash(mm, dtype, opts):
    """(sha256, [variant]) of the candidates mm.kernels() yields."""
    h = hashlib.sha256()
    variants = []
    gen = mm.kernels(dtype, **opts)
    try:
        src, meta = gen.send(None)
        while True:
            h.update(repr((src, _canonical(meta))).encode())
            variants.append(meta['variant'])
            src, meta = gen.send(None)
    except StopIteration:
        pass
    return h.hexdigest(), variants


def operator_cases(item):
    """{case name: [sha256, variants]} of every case of one operator."""
    import gimmik

    suite, key = item
    with np.load(os.path.join(HERE, 'operators', suite)) as ops:
        A = ops[key]
    out = {}
    for platform, opts in PLATFORMS:
        cls = gimmik.matmul_class(platform)
        for dtype in DTYPES:
            for beta in BETAS:
                for aligne in ALIGNES:
                    for baked in (False, True):
                        sizes = (dict(n=BAKED_N, ldb=BAKED_N, ldc=BAKED_N)
                                 if baked else {})
                        name = '|'.join(map(str, (
                            suite, key, platform, sorted(opts.items()),
                            dtype, beta, aligne, baked)))
                        mm = cls(A, beta=beta, aligne=aligne, **sizes)
                        mm._lookup = _LOOKUPS.setdefault(platform,
                                                         mm._lookup)
                        try:
                            out[name] = list(case_hash(mm, dtype, opts))
                        except ValueError as e:   # e.g. not representable
                            out[name] = [f'ValueError: {e}', []]
    return out


def compare(before, after):
    """Names of the cases that differ or that one side lacks."""
    bad = []
    for name in sorted(set(before) | set(after)):
        if name not in before or name not in after:
            bad.append((name, 'missing'))
        elif before[name][0] != after[name][0]:
            b, a = before[name][1], after[name][1]
            bad.append((name, 'order/variants' if b != a else 'sources'))
    return bad


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--sample', action='store_true')
    ap.add_argument('--jobs', type=int, default=1)
    ap.add_argument('--out', help='write the hashes to this JSON file')
    ap.add_argument('--compare', help='compare with this JSON file')
    ap.add_argument('--ops', help='comma-separated operator keys only')
    args = ap.parse_args(argv)

    items = operators(args.sample)
    if args.ops:
        want = set(args.ops.split(','))
        items = [it for it in items if it[1] in want]
    hashes = {}
    if args.jobs > 1:
        with multiprocessing.Pool(args.jobs) as pool:
            for part in pool.imap_unordered(operator_cases, items):
                hashes.update(part)
    else:
        for it in items:
            hashes.update(operator_cases(it))
    print(f'{len(items)} operators, {len(hashes)} cases')
    if args.out:
        with open(args.out, 'w') as f:
            json.dump(hashes, f, indent=0, sort_keys=True)
    if args.compare:
        with open(args.compare) as f:
            before = json.load(f)
        before = {k: v for k, v in before.items() if k in hashes}
        bad = compare(before, hashes)
        for name, why in bad:
            print(f'DIFFERS ({why}): {name}')
        print(f'{len(hashes) - len(bad)} of {len(hashes)} cases match')
        return 1 if bad else 0
    return 0


if __name__ == '__main__':
    sys.exit(main())
