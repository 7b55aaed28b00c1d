"""Reliability, round 4 (issue #50, item 5): the outside audit's defects
9-13 (input handling and complexity), each by a test that fails without
its fix (docs/reliability.md, "Round 4").

Regenerate the plan digests (tests/fixtures/reliability4-plans.json) only
for an intended change of a partition or plan:
``python tests/test_reliability4_inputs.py --write-plans``."""

import dataclasses
import hashlib
import json
import os
import sys
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PLANS = os.path.join(HERE, 'fixtures', 'reliability4-plans.json')
SUITES = [os.path.join(ROOT, 'bench', 'operators', f)
          for f in ('pyfr-ops.npz', 'pyfr-ops-p7.npz')]


# -- 9: row partitions and plans near-quadratic in m ------------------------
def _canon(x):
    """x as JSON-able plain data, floats exactly (hex): a digest that does
    not depend on NumPy's repr."""
    if dataclasses.is_dataclass(x):
        return [type(x).__name__,
                [_canon(getattr(x, f.name)) for f in dataclasses.fields(x)]]
    if isinstance(x, dict):
        return [[_canon(k), _canon(v)] for k, v in x.items()]
    if isinstance(x, (list, tuple, range, np.ndarray)):
        return [_canon(v) for v in x]
    if isinstance(x, (bool, np.bool_)) or x is None or isinstance(x, str):
        return x if not isinstance(x, np.bool_) else bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x).hex()
    raise TypeError(f'cannot canonicalise {type(x).__name__}')


def _digest(x):
    return hashlib.sha256(json.dumps(_canon(x)).encode()).hexdigest()[:16]


def suite_operators():
    """(name, A) of every operator of the committed PyFR suites."""
    for path in SUITES:
        with np.load(path) as z:
            for key in z.files:
                if key != 'provenance':
                    yield key, z[key]


def plan_digests(A):
    """{what: digest} of the row partitions and plans whose construction
    the complexity fix rewrote (analysis.partition_rows, union_row_blocks,
    shared_row_groups; plans.msplit_plan, warprows_plan; kparts_plan), at
    the parameters the platforms use and a few more; unmemoised."""
    from gimmik import analysis, plans
    from gimmik.families.cstream_kparts import kparts_plan
    S = np.asarray(A) != 0
    m = A.shape[0]
    out = {}
    for parts in sorted({-(-m // 22), -(-m // 16), 2, 5}):
        out[f'partition_rows/{parts}'] = _digest(
            analysis.partition_rows.__wrapped__(S, parts))
    for size in (16, 64):
        out[f'union_row_blocks/{size}'] = _digest(
            analysis.union_row_blocks.__wrapped__(S, size))
    for budget in (1, 8, 32, 48, 64):
        out[f'shared_row_groups/{budget}'] = _digest(
            analysis.shared_row_groups.__wrapped__(S, budget))
    for ms, bsz, even, ml in ((4, 64, False, 8), (2, 32, True, None),
                              (8, 16, False, None)):
        out[f'msplit_plan/{ms}/{bsz}/{even}/{ml}'] = _digest(
            plans.msplit_plan(A, ms, bsz, even, ml))
    for ms, bsz in ((4, 64), (2, 32), (8, 16)):
        out[f'warprows_plan/{ms}/{bsz}'] = _digest(
            plans.warprows_plan(A, ms, bsz))
    for g, w, ml in ((1, 4, 8), (2, 2, None)):
        out[f'kparts_plan/{g}/{w}/{ml}'] = _digest(
            kparts_plan(A, g, 3, 32, w, ml))
    return out


# the operators checked by default (all with --full): those up to this many
# entries, a few seconds in all
PLANS_FAST_ENTRIES = 20_000


def _check_plans(full):
    with open(PLANS) as f:
        want = json.load(f)
    names = []
    for name, A in suite_operators():
        if not full and A.size > PLANS_FAST_ENTRIES:
            continue
        names.append(name)
        assert _digest(sorted(plan_digests(A).items())) == want[name], name
    assert len(names) > (200 if full else 100)


def test_plans_as_before_the_complexity_fix():
    """Defect 9: the near-quadratic partitions and plans are the ones the
    cubic code made, on the committed operators up to PLANS_FAST_ENTRIES
    entries (the digests were written by the code before the fix)."""
    _check_plans(full=False)


@pytest.mark.full
def test_plans_as_before_the_complexity_fix_all_operators():
    """The same on every committed operator (about a minute)."""
    _check_plans(full=True)


# COMPLEXITY GUARD (slow-ish: ~3 s of CPU): the offer of a 1024 x 1024
# identity may take at most this many CPU seconds (~10x the fixed code; the
# cubic code took 84-106 s on the auditor's machine, 7-24 s here) ...
IDENTITY_MAX_S = 20
# ... and at most this many times the offer of a 256 x 256 identity: the
# growth of quadratic work over 4x the rows, whatever the machine's speed
# (the cubic code: 29-63x, the fixed one 5-7x)
IDENTITY_MAX_GROWTH = 16


@pytest.mark.parametrize('platform', ['hip', 'cuda'])
def test_large_sparse_identity_offer_is_not_cubic(platform):
    """Defect 9: the HIP and CUDA candidates of a 1024 x 1024 identity
    (every row its own B row: partition_rows, shared_row_groups and the
    plans at their largest) take seconds, and at most quadratically more
    than those of a 256 x 256 one."""
    from gimmik.cuda import CUDAMatMul
    from gimmik.hip import HIPMatMul
    cls = {'hip': HIPMatMul, 'cuda': CUDAMatMul}[platform]

    def offer(m):
        t0 = time.process_time()
        assert cls(np.eye(m)).candidates(np.float64)
        return time.process_time() - t0

    offer(8)    # the one-time costs (imports, templates) out of the way
    small, big = offer(256), offer(1024)
    assert big < IDENTITY_MAX_S, \
        f'{platform} candidates of a 1024 x 1024 identity took {big:.0f} s'
    assert big < IDENTITY_MAX_GROWTH*small, \
        (f'{platform} candidates: {small:.2f} s at m = 256, {big:.2f} s at '
         f'm = 1024, more than quadratic growth')


if __name__ == '__main__':
    if sys.argv[1:] != ['--write-plans']:
        sys.exit(__doc__)
    with open(PLANS, 'w') as f:
        json.dump({name: _digest(sorted(plan_digests(A).items()))
                   for name, A in suite_operators()},
                  f, indent=0, sort_keys=True)
        f.write('\n')
