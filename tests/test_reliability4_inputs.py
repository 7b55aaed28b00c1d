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


# -- 10: the executor checks a meta against its source -----------------------
def _guarded(rows, n, pad=4):
    """A (rows x n) view of NaN-poisoned memory with `pad` rows of guard
    values after it: what a kernel writing past c leaves there shows."""
    whole = np.full((rows + pad, n), np.nan)
    whole[rows:] = 7.0
    return whole[:rows], whole


@pytest.mark.parametrize('runner', ['hip', 'cuda'])
def test_executor_refuses_another_operators_meta(runner, rng):
    """Defect 10: a source run with the meta of another operator (fewer
    rows of C) is refused before it runs, not left to write past c."""
    from gimmik.cuda import CUDAMatMul
    from gimmik.emulate import run_cuda, run_hip
    from gimmik.hip import HIPMatMul
    cls, run = {'hip': (HIPMatMul, run_hip),
                'cuda': (CUDAMatMul, run_cuda)}[runner]
    big = rng.standard_normal((8, 3))
    small = rng.standard_normal((4, 3))
    src, _ = next(iter(cls(big).kernels(np.float64)))
    _, meta = next(iter(cls(small).kernels(np.float64)))
    n = 70
    b = rng.standard_normal((3, n))
    c, whole = _guarded(4, n)
    with pytest.raises(ValueError, match=r'declares A 8x3.*m = 4'):
        run(src, meta, b, c)
    assert (whole[4:] == 7.0).all() and np.isnan(c).all()


def test_executor_refuses_a_meta_of_other_baked_sizes(rng):
    """Defect 10: a source baked for n = 96 run with a meta saying n = 64
    (its arrays of 64 columns) is refused."""
    from gimmik.emulate import run_hip
    from gimmik.hip import HIPMatMul
    A = rng.standard_normal((4, 3))
    src, _ = next(iter(HIPMatMul(A, n=96, ldb=96, ldc=96)
                       .kernels(np.float64)))
    _, meta = next(iter(HIPMatMul(A, n=64, ldb=64, ldc=64)
                        .kernels(np.float64)))
    # rows of 64 columns: the source's 96-column rows would reach row 6
    b = rng.standard_normal((8, 64))[:3]
    c, whole = _guarded(4, 64)
    with pytest.raises(ValueError, match='n = 96'):
        run_hip(src, meta, b, c)
    assert (whole[4:] == 7.0).all() and np.isnan(c).all()


def test_executor_refuses_a_block_over_the_launch_bounds(rng):
    """Defect 10: a meta whose block has more threads than the source's
    launch bounds (extra waves would compute rows past m) is refused."""
    from gimmik.emulate import run_hip
    from gimmik.hip import HIPMatMul
    A = rng.standard_normal((4, 3))
    src, meta = next(iter(HIPMatMul(A).kernels(np.float64)))
    block = meta['launch']['block']
    meta = {**meta, 'block': (block[0], 4*block[1], 1),
            'launch': {**meta['launch'], 'block': (block[0], 4*block[1], 1)}}
    with pytest.raises(ValueError, match='launch bounds'):
        run_hip(src, meta, rng.standard_normal((3, 64)), np.zeros((4, 64)))


def test_c_runtime_refuses_another_operators_meta(rng, tmp_path,
                                                 monkeypatch):
    """Defect 10, the same check where a runtime compiles a kernel (here
    the C one's: its launch checks the arrays against meta alone)."""
    from gimmik.c import CMatMul
    from gimmik.runtime.c import Runtime
    monkeypatch.setenv('GIMMIK_CACHE_DIR', str(tmp_path))
    src, _ = next(iter(CMatMul(rng.standard_normal((8, 3)))
                       .kernels(np.float64)))
    _, meta = next(iter(CMatMul(rng.standard_normal((4, 3)))
                        .kernels(np.float64)))
    with pytest.raises(ValueError, match=r'declares A 8x3.*m = 4'):
        Runtime().compile(src, meta)


def test_executor_runs_every_candidate_with_its_own_meta(rng):
    """Defect 10, no false alarm: every HIP and CUDA candidate of an
    operator, n at run time and baked, passes the check with its own meta
    (and not with a meta of one row more)."""
    from gimmik.cuda import CUDAMatMul
    from gimmik.emulate import check_source
    from gimmik.hip import HIPMatMul
    A = np.load(SUITES[0])['p2-hex-m460']
    seen = 0
    for cls in (HIPMatMul, CUDAMatMul):
        for n in (None, 96):
            for dtype in (np.float64, np.float32):
                for src, meta in cls(A, n=n, ldb=n, ldc=n).kernels(dtype):
                    check_source(src, meta)
                    # ... and each declares its shape: one row more is not
                    with pytest.raises(ValueError, match='declares'):
                        check_source(src, {**meta, 'm': meta['m'] + 1})
                    seen += 1
    assert seen > 40


# -- 11, 12: tune()'s caller panels ------------------------------------------
def _tune_operator():
    """A small fixed operator: its C kernels are built once per process."""
    rng = np.random.default_rng(11)
    A = rng.standard_normal((6, 5))
    A[rng.random((6, 5)) < 0.4] = 0.0
    A[:, 0] = 1.0
    return A


def test_tune_refuses_read_only_c_before_tuning(tmp_path, monkeypatch):
    """Defect 11: a read-only c is refused up front, naming c, not after a
    whole tuning run that then fails restoring it."""
    from types import SimpleNamespace
    from gimmik import tune as tune_mod
    monkeypatch.setenv('GIMMIK_CACHE_DIR', str(tmp_path))
    runs = []

    def fake_tune(*args):
        runs.append(args)
        return SimpleNamespace(unstable=None)
    monkeypatch.setattr(tune_mod, '_tune', fake_tune)
    A = _tune_operator()
    c = np.ones((6, 64))
    c.flags.writeable = False
    with pytest.raises(ValueError, match='c is read-only'):
        tune_mod.tune(A, beta=1.0, n=64, platform='c', use_cache=False,
                      b=np.ones((5, 64)), c=c)
    assert not runs, 'tuned before refusing c'


def _scaling_runtime():
    """The C runtime with one candidate that doubles its output: right
    only where B and C are zero."""
    from gimmik.runtime.c import Runtime

    class Doubling(Runtime):
        WRONG = None

        def compile(self, src, meta):
            good = super().compile(src, meta)
            if Doubling.WRONG is None:
                Doubling.WRONG = meta['variant']
            if meta['variant'] != Doubling.WRONG:
                return good

            def launch(b, c, n, ldb, ldc):
                good(b, c, n, ldb, ldc)
                c[:, :n] *= 2.0
            return launch
    return Doubling()


@pytest.mark.parametrize('beta', [0.0, 1.0])
def test_tune_with_zero_panels_still_catches_a_wrong_kernel(
        tmp_path, monkeypatch, beta):
    """Defect 12: zeros for b (and c) make every output zero; the check
    must still catch a kernel that doubles C (it checks its own random
    panels), and so the verdict cached under the operator's key holds."""
    from gimmik.tune import tune
    monkeypatch.setenv('GIMMIK_CACHE_DIR', str(tmp_path))
    monkeypatch.setattr('gimmik.tune.WARMUP', 1)
    monkeypatch.setattr('gimmik.tune.REPEATS', 3)
    monkeypatch.setattr('gimmik.tune.COPY_BYTES', (1 << 20, 1 << 20))
    rt = _scaling_runtime()
    n = 256
    b, c = np.zeros((5, n)), np.zeros((6, n))
    res = tune(_tune_operator(), beta=beta, n=n, runtime=rt, b=b, c=c)
    by = {x['variant']: x for x in res.candidates}
    wrong = by[type(rt).WRONG]
    assert not wrong['correct'] and 'relative error' in wrong['error']
    assert res.best is not None and res.best['variant'] != type(rt).WRONG
    assert not b.any() and not c.any()


if __name__ == '__main__':
    if sys.argv[1:] != ['--write-plans']:
        sys.exit(__doc__)
    with open(PLANS, 'w') as f:
        json.dump({name: _digest(sorted(plan_digests(A).items()))
                   for name, A in suite_operators()},
                  f, indent=0, sort_keys=True)
        f.write('\n')
