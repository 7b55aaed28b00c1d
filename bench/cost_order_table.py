"""The first candidates of today's HIP offering order beside those of
gimmik.cost.rank, per operator and arch, as Markdown tables (no GPU).

Facts: the clang-19 ISA report of each candidate (--isa; compiles every
candidate, minutes for operators with thousands of non-zeros) or the
families' register estimates (default).

    PYTHONPATH=. python bench/cost_order_table.py \\
        --ops 'p6-hex-m*' 'p6-pri-m*' --arch gfx90a gfx942 [--isa]
"""

import argparse
import fnmatch
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from gimmik import cost  # noqa: E402
from gimmik.hip import HIPMatMul  # noqa: E402
from walk_replay import (beta_of, nvars_of, pyfr_panel,  # noqa: E402
                       split_name)

# PyFR's HIP alignment: 128 bytes of f64, as its CUDA backend
ALIGNE = 16


def isa_facts(mm, cands, arch):
    """{variant: Facts} from clang-19 ISA reports of the candidates."""
    from gimmik.isa import inspect_many
    srcs = [mm.render(c, np.float64)[0] for c in cands]
    reps = inspect_many([(s, arch) for s in srcs])
    return {c.variant: cost.facts_from_isa(r) for c, r in zip(cands, reps)
            if not isinstance(r, Exception)}


def table(name, A, arch, n, use_isa, first):
    beta = beta_of(name)
    mm = HIPMatMul(A, beta=beta, aligne=ALIGNE, n=n, ldb=n, ldc=n)
    cands = mm.candidates(np.float64, gcn_arch=arch)
    facts = isa_facts(mm, cands, arch) if use_isa else None
    ranked = cost.rank(mm, cands, np.float64, arch, n, facts)
    est = {c.variant: e for c, e in ranked}
    out = [f'### {name} ({A.shape[0]} x {A.shape[1]}, beta {beta:g}), '
           f'{arch}, n = {n}, facts: {"ISA" if use_isa else "plan"}', '',
           '| # | today\'s order | est us | copy | cost.rank | est us | '
           'copy |', '|---|---|---|---|---|---|---|']
    for i in range(min(first, len(cands))):
        a, (b, eb) = cands[i], ranked[i]
        ea = est[a.variant]
        out.append(f'| {i + 1} | {a.variant} | {ea.seconds*1e6:.1f} | '
                   f'{ea.copy_frac:.2f} | {b.variant} | '
                   f'{eb.seconds*1e6:.1f} | {eb.copy_frac:.2f} |')
    return '\n'.join(out) + '\n'


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--ops', nargs='+', default=['p6-hex-m*', 'p6-pri-m*'])
    ap.add_argument('--suite', default=os.path.join(HERE, 'operators',
                                                    'pyfr-ops.npz'))
    ap.add_argument('--arch', nargs='+', default=['gfx90a', 'gfx942'])
    ap.add_argument('--n-target', type=int, default=110080,
                    help='columns before PyFR padding (default 110080)')
    ap.add_argument('--first', type=int, default=8)
    ap.add_argument('--isa', action='store_true',
                    help='facts from clang-19 ISA reports')
    args = ap.parse_args(argv)
    with np.load(args.suite) as z:
        ops = {k: z[k] for k in z.files
               if any(fnmatch.fnmatch(k, p) for p in args.ops)}
    for name in sorted(ops, key=lambda k: -np.count_nonzero(ops[k])):
        n = pyfr_panel(args.n_target, nvars_of(split_name(name)[1]))[1]
        for arch in args.arch:
            print(table(name, ops[name], arch, n, args.isa, args.first))
    return 0


if __name__ == '__main__':
    sys.exit(main())
