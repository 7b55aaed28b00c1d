"""Fingerprints of what the generators offer, to show that a refactor
leaves them unchanged: per case (operator, platform and its options, dtype,
beta, aligne, n baked or not) the sha256 of the ordered list of (source,
meta) that kernels() yields when drained with send(None).  Dicts inside
meta (params) are compared with their keys sorted.

    PYTHONPATH=. python3 bench/model/candidate_hashes.py --out before.jsonl
    PYTHONPATH=. python3 bench/model/candidate_hashes.py --out after.jsonl
    python3 bench/model/candidate_hashes.py --compare before.jsonl after.jsonl

Operators go smallest (fewest non-zeros) first and each one's line is
written to --out as soon as it is done, so an interrupted run still
compares what it finished.  --sample takes every third operator of each
suite plus its largest ones (the quick check); --max-nnz skips the
operators with more non-zeros (rendering costs about 7 ms of CPU per
non-zero of A for the 120 cases of an operator: all of both suites,
about a million non-zeros, take two hours of one core).  --jobs renders in
that many processes.  --compare reports the cases whose hash differs
between two such files, among the operators both hold, and exits 1 if
there are any.
"""

import argparse
import hashlib
import json
import multiprocessing
import os
import sys

import numpy as np

OPERATORS = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'operators')
SUITES = [os.path.join(OPERATORS, f)
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


def operators(sample, max_nnz=None):
    """[(suite file name, key)] of the operators to render, fewest
    non-zeros first."""
    out = []
    for path in SUITES:
        with np.load(path) as ops:
            keys = sorted(k for k in ops.files
                          if ops[k].ndim == 2 and ops[k].size)
            nnz = {k: int(np.count_nonzero(ops[k])) for k in keys}
            if max_nnz is not None:
                keys = [k for k in keys if nnz[k] <= max_nnz]
            if sample:
                big = sorted(keys, key=lambda k: -nnz[k])[:SAMPLE_LARGEST]
                keys = sorted(set(keys[::3]) | set(big))
        out += [(nnz[k], os.path.basename(path), k) for k in keys]
    return [(suite, k) for _, suite, k in sorted(out)]


def _canonical(value):
    if isinstance(value, dict):
        return sorted((k, _canonical(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(_canonical(v) for v in value)
    return value


def case_hash(mm, dtype, opts):
    """(sha256, [variant], sha256 of the sources alone) of the candidates
    mm.kernels() yields."""
    h, hs = hashlib.sha256(), hashlib.sha256()
    variants = []
    gen = mm.kernels(dtype, **opts)
    try:
        src, meta = gen.send(None)
        while True:
            h.update(repr((src, _canonical(meta))).encode())
            hs.update(src.encode())
            variants.append(meta['variant'])
            src, meta = gen.send(None)
    except StopIteration:
        pass
    return h.hexdigest(), variants, hs.hexdigest()


def operator_cases(item):
    """{case name: [sha256, variants]} of every case of one operator."""
    import gimmik

    suite, key = item
    with np.load(os.path.join(OPERATORS, suite)) as ops:
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


def load(path):
    """{case name: [sha256, variants]} of a file --out wrote."""
    out = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                out.update(json.loads(line))
    return out


def compare(before, after):
    """(cases compared, [(name, why)] of those that differ) among the
    cases both hold."""
    common = sorted(set(before) & set(after))
    bad = []
    for name in common:
        if before[name][0] != after[name][0]:
            b, a = before[name], after[name]
            if len(b) > 2 and len(a) > 2 and b[2] == a[2]:
                why = 'names only (same sources in the same order)'
            else:
                why = 'order/variants' if b[1] != a[1] else 'sources'
            bad.append((name, why))
    return len(common), bad


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--sample', action='store_true')
    ap.add_argument('--max-nnz', type=int)
    ap.add_argument('--jobs', type=int, default=1)
    ap.add_argument('--out', help='append each operator\'s hashes to this '
                    'file (JSON lines)')
    ap.add_argument('--ops', help='comma-separated operator keys only')
    ap.add_argument('--compare', nargs=2, metavar=('BEFORE', 'AFTER'),
                    help='compare two --out files (renders nothing)')
    args = ap.parse_args(argv)

    if args.compare:
        before, after = map(load, args.compare)
        ncases, bad = compare(before, after)
        ops = {name.split('|')[1] for name in set(before) & set(after)}
        for name, why in bad:
            print(f'DIFFERS ({why}): {name}')
        print(f'{len(ops)} operators, {ncases - len(bad)} of {ncases} '
              'cases match')
        return 1 if bad or not ncases else 0

    items = operators(args.sample, args.max_nnz)
    if args.ops:
        want = set(args.ops.split(','))
        items = [it for it in items if it[1] in want]
    out = open(args.out, 'a') if args.out else None
    ncases = 0
    with multiprocessing.Pool(max(1, args.jobs)) as pool:
        for part in pool.imap(operator_cases, items):
            ncases += len(part)
            if out:
                out.write(json.dumps(part, sort_keys=True) + '\n')
                out.flush()
    print(f'{len(items)} operators, {ncases} cases')
    return 0


if __name__ == '__main__':
    sys.exit(main())
