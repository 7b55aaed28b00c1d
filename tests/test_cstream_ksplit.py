"""cstream-ksplit (gimmik.families.cstream_ksplit) on HIP: an owner's old C
values read in runs before its stores run exactly in the CPU executor
(ragged n, padded strides, beta 0, 1 and -0.5, f32 and f64, n baked and
not, 2 and 4 waves, C preloaded or not); the runs cover the rows that
read C; a perturbed bake is caught; the CUDA rendering reads C a row at a
time.  The k-split in passes of rows (chunk, CUDA): run exactly in the
CUDA emulation, each warp loading each of its B rows once, where it first
needs it; offered only where loads are not batched and passes are more
than one; its register estimate holds what a pass keeps."""

import itertools
import re
import shutil

import numpy as np
import pytest

from conftest import (CUDA_OPTS, HIP_OPTS, random_operator, run_candidate,
                      run_hip_candidate)
from gimmik import CUDAMatMul, HIPMatMul, OpenCLMatMul
from gimmik.base import Candidate
from gimmik.pyfr import PROTOCOLS, walk
from gimmik.targets import HIP
from gimmik.families.cstream_ksplit import (CHUNKED_GATES, MIN_PART_COLUMNS,
                                            CstreamKsplit)

OPTS = HIP_OPTS
ROWS = [dict(ksplit=2), dict(ksplit=4), dict(ksplit=2, preload_c=True)]
COMBOS = list(itertools.product((np.float64, np.float32), (0.0, 1.0, -0.5),
                                (False, True)))


def owned_operator(rng, m=27, k=30, density=0.2):
    """More than a run of rows a wave owns, zero rows among them and an
    unused row of B."""
    A = random_operator(rng, m, k, density)
    A[2] = 0
    A[20] = 0
    A[:, 5] = 0
    return A


def run_one(rng, A, params, dtype, beta, baked, **kw):
    return run_hip_candidate(rng, A, 'cstream-ksplit', params, dtype, beta,
                             baked, **kw)


@pytest.mark.parametrize('dtype,beta,baked', COMBOS,
                         ids=lambda x: getattr(x, '__name__', str(x)))
def test_rows_emulated(rng, dtype, beta, baked):
    A = owned_operator(rng)
    for params in ROWS:
        if params.get('preload_c') and beta == 0:
            continue
        p, meta = run_one(rng, A, params, dtype, beta, baked)
        p.check(f'{meta["variant"]} {np.dtype(dtype).name} beta={beta} '
                f'baked={baked}')


@pytest.mark.parametrize('beta', [1.0, -0.5])
@pytest.mark.parametrize('ksplit', [2, 4])
def test_c_runs_cover_the_rows_that_read_c(rng, beta, ksplit):
    A = owned_operator(rng)
    mm = HIPMatMul(A, beta=beta)
    fam = mm.kernel(Candidate('cstream-ksplit', dict(ksplit=ksplit), OPTS),
                    np.float64)
    crows = fam.crows()
    for y, runs in enumerate(crows):
        rows = [i for run in runs for i in run]
        owned = [i for i, o in enumerate(fam.plan.owner) if o == y]
        assert rows == [i for i in owned if beta != 1 or A[i].any()]
        assert all(len(run) >= HIP.batch_loads for run in runs[:-1])
    src, _ = mm.render(Candidate('cstream-ksplit', dict(ksplit=ksplit),
                                 OPTS), np.float64)
    # every old value of C is loaded once, by one code for every warp,
    # and used once by each warp whose row at that position reads it
    owned = fam.owned()
    for o in (o for run in fam.cruns() for o in run):
        found = [bool(m.group(1)) for m in
                 re.finditer(rf'\bcin{o}\b( = )?', src)]
        readers = sum(o < len(rows) and rows[o] in sum(runs, [])
                      for rows, runs in zip(owned, crows))
        # the declaration, the load, the uses
        assert found == [False, True] + [False]*readers


def test_c_joins_b_where_either_is_short(rng):
    """C's old values are loaded with B's where a warp loads fewer than a
    batch of either, else in runs after the partial sums."""
    A = owned_operator(rng)
    seen = set()
    for ksplit in (2, 4):
        fam = HIPMatMul(A, beta=1.0).kernel(
            Candidate('cstream-ksplit', dict(ksplit=ksplit), OPTS),
            np.float64)
        nb = max(map(len, fam.plan.loads))
        nc = sum(map(len, fam.cruns()))
        short = min(nb, nc) < HIP.batch_loads
        assert fam.c_joins() == short
        assert len(fam.cruns()) == 1 or not short
        seen.add(short)
    assert seen == {False, True}


def test_loads_are_one_code_for_every_warp(rng):
    """Batched, every B row a warp sums is loaded once in the kernel (no
    load inside a warp's case), the row chosen by the warp's index."""
    A = owned_operator(rng)
    for ksplit in (2, 4):
        cand = Candidate('cstream-ksplit', dict(ksplit=ksplit), OPTS)
        mm = HIPMatMul(A, beta=0.0)
        fam = mm.kernel(cand, np.float64)
        src, _ = mm.render(cand, np.float64)
        body = src[src.index('switch'):]
        assert '(b + ' not in body
        for s, rows in enumerate(fam.stage_rows()):
            assert all(rows[y] == (fam.plan.loads[y] or [rows[y]])[
                min(s, len(fam.plan.loads[y]) - 1)] for y in range(ksplit))
            assert len(re.findall(rf'\bld{s} = ', src)) == 1


def test_no_c_runs_where_c_is_not_read_in_the_finish(rng):
    A = owned_operator(rng)
    for beta, params in ((0.0, ROWS[0]), (1.0, ROWS[2])):
        fam = HIPMatMul(A, beta=beta).kernel(
            Candidate('cstream-ksplit', params, OPTS), np.float64)
        assert fam.crows() is None
    cand = Candidate('cstream-ksplit', ROWS[0],
                     {'compute_capability': (9, 0)})
    fam = CUDAMatMul(A, beta=1.0).kernel(cand, np.float64)
    assert fam.crows() is None


def test_wrong_bake_is_caught(rng):
    """A plan with one value changed gives a wrong C in the executor."""
    A = owned_operator(rng)

    def mutate(plan):
        y, i = next((y, i) for y in range(2) for i in range(A.shape[0])
                    if plan.terms[y][i])
        j, v = plan.terms[y][i][0]
        plan.terms[y][i][0] = (j, v + 1.0)

    p, _ = run_one(rng, A, ROWS[0], np.float64, 1.0, True, mutate=mutate)
    with pytest.raises(AssertionError, match='relative error'):
        p.check('mutated')


# -- the k-split in passes of rows (CUDA) ------------------------------------
GXX = shutil.which('g++')
CHUNKED = [dict(ksplit=2, chunk=5), dict(ksplit=4, chunk=3),
           dict(ksplit=2, chunk=24)]


def run_cuda_chunked(rng, A, params, dtype, beta, baked, **kw):
    return run_candidate(rng, 'cuda', A, 'cstream-ksplit', params, dtype,
                         beta, baked, n=45, **kw)


@pytest.mark.skipif(GXX is None, reason='g++ is not installed')
@pytest.mark.parametrize('dtype,beta,baked', COMBOS,
                         ids=lambda x: getattr(x, '__name__', str(x)))
def test_chunked_emulated(rng, dtype, beta, baked):
    """Ragged n (45 of a 32-column block), padded strides, a zero row and
    an unused row of B, passes with a short last one, 2 and 4 warps."""
    A = owned_operator(rng)
    for params in CHUNKED:
        p, meta = run_cuda_chunked(rng, A, params, dtype, beta, baked)
        assert len(CUDAMatMul(A).kernel(
            Candidate('cstream-ksplit', params, CUDA_OPTS),
            dtype).plan.passes) > 1
        p.check(f'{meta["variant"]} {np.dtype(dtype).name} beta={beta} '
                f'baked={baked}')


@pytest.mark.skipif(GXX is None, reason='g++ is not installed')
def test_chunked_wrong_bake_is_caught(rng):
    A = owned_operator(rng)

    def mutate(plan):
        i = next(i for i in range(A.shape[0]) if plan.terms[1][i])
        j, v = plan.terms[1][i][0]
        plan.terms[1][i][0] = (j, v + 1.0)

    p, _ = run_cuda_chunked(rng, A, CHUNKED[0], np.float64, 0.0, True,
                            mutate=mutate)
    with pytest.raises(AssertionError, match='relative error'):
        p.check('mutated')


def test_chunked_loads_each_b_row_once_at_first_use(rng):
    A = owned_operator(rng)
    for params in CHUNKED[:2]:
        mm = CUDAMatMul(A)
        cand = Candidate('cstream-ksplit', params, CUDA_OPTS)
        plan = mm.kernel(cand, np.float64).plan
        src, _ = mm.render(cand, np.float64)
        ks = params['ksplit']
        # each used B row is loaded once in the kernel, into its warp's slot
        loads = re.findall(r'ld(\d+) = __ldg\(\(b \+ (\d+)\*ldbl', src)
        assert sorted(int(j) for _, j in loads) == sorted(
            j for cols in plan.kcols for j in cols)
        for y in range(ks):
            fetch = plan.fetch(y)
            # the row that first uses j is the row j is fetched at
            for j in plan.loads[y]:
                first = min(i for i in range(A.shape[0])
                            if any(jj == j for jj, _ in plan.terms[y][i]))
                assert j in fetch[first]
        # two buffers, one barrier a pass
        passes = plan.passes
        assert src.count('__syncthreads()') == len(passes)
        assert f'red[2][{ks - 1}][{params["chunk"]}][32]' in src


def test_chunked_only_where_loads_are_not_batched(rng):
    A = random_operator(rng, 27, 60, 0.15)       # wide and sparse
    for mm in (HIPMatMul(A), CUDAMatMul(A)):
        kept = mm.kernel(Candidate('cstream-ksplit', dict(ksplit=2), {
            'hip': HIP_OPTS, 'cuda': CUDA_OPTS}[mm.platform]), np.float64)
        assert type(kept).adapt(mm, dict(ksplit=2, chunk=5)) == (
            None if mm.platform == 'hip' else dict(ksplit=2, chunk=5))
    # dense: not offered (long rows spilled)
    dense = random_operator(rng, 40, 90, 0.5)
    assert (CUDAMatMul(dense).info.density
            >= CHUNKED_GATES['cuda']['max_density'])
    assert CstreamKsplit.adapt(CUDAMatMul(dense),
                               dict(ksplit=2, chunk=5)) is None
    # square: not offered
    assert CstreamKsplit.adapt(CUDAMatMul(owned_operator(rng)),
                               dict(ksplit=2, chunk=5)) is None
    # one pass: not a row of its own
    mm = CUDAMatMul(A)
    assert type(mm.kernel(Candidate('cstream-ksplit', dict(ksplit=2),
                                    CUDA_OPTS), np.float64)).adapt(
        mm, dict(ksplit=2, chunk=A.shape[0])) is None
    with pytest.raises(ValueError, match='unbatched'):
        HIPMatMul(A).kernel(Candidate('cstream-ksplit',
                                      dict(ksplit=2, chunk=5), HIP_OPTS),
                            np.float64).plan
    hip = [c.params for c in HIPMatMul(A).candidates(np.float64, **HIP_OPTS)
           if c.family == 'cstream-ksplit']
    assert hip and not any('chunk' in p for p in hip)


def test_chunked_estimate_holds_a_pass(rng):
    """The estimate: a pass's owned sums plus the B values a warp holds
    between first and last use; on a banded wide operator (each row of B
    used by nearby rows) far below the one-pass k-split's, on a random one
    not."""
    i, j = np.indices((125, 375))
    A = np.where(np.abs(j - 3*i) < 8, rng.standard_normal((125, 375)), 0.0)
    mm = CUDAMatMul(A)
    one = mm.kernel(Candidate('cstream-ksplit', dict(ksplit=2), CUDA_OPTS),
                    np.float64)
    fam = mm.kernel(Candidate('cstream-ksplit', dict(ksplit=2, chunk=24),
                              CUDA_OPTS), np.float64)
    plan = fam.plan
    assert fam.live_values() == 12 + max(plan.live_b(y) for y in range(2))
    assert fam.live_values() < one.live_values() // 4
    A = random_operator(rng, 125, 375, 0.04)
    fam = CUDAMatMul(A).kernel(Candidate(
        'cstream-ksplit', dict(ksplit=2, chunk=24), CUDA_OPTS), np.float64)
    assert fam.live_values() > 150


def test_passes_not_pruned_with_the_one_pass_ksplit(rng):
    """The walk prunes a slow family's later candidates; the k-split in
    passes is another kernel (walk_group), so a slow one-pass k-split does
    not take it out of the walk."""
    A = random_operator(rng, 49, 98, 0.14)
    mm = OpenCLMatMul(A, beta=0.0, n=4096, ldb=4096, ldc=4096)

    def walked(slow):
        # PyFR's walk of every candidate, `slow` ones timed 10x the rest
        res = walk(PROTOCOLS['3.1', 'opencl'], mm.kernels(np.float64),
                   lambda src, meta: 10.0 if slow(meta['variant']) else 1.0,
                   nkerns=100)
        return [v for v, _ in res['seen']]

    seen = walked(lambda v: v == 'cstream-ksplit/ksplit2')
    assert 'cstream-ksplit/ksplit2' in seen
    assert 'cstream-ksplit/chunk32/ksplit2' in seen
    # a slow pass-wise one prunes the later pass-wise ones only
    first = seen.index('cstream-ksplit/chunk32/ksplit2')
    after = walked(lambda v: 'chunk' in v)
    assert not any('chunk' in v for v in after[first + 1:])
    assert any('chunk' not in v for v in after[first + 1:])


def test_opencl_parts_hold_more_than_two_used_columns(rng, monkeypatch):
    # 9 used columns: four parts of 2.25 offered, and with an unused column
    # (8 used) not; two parts of 4 both times.  HIP keeps all four parts.
    A = random_operator(rng, 12, 9, 0.6)
    A[:, 0] = 1.0

    def ksplits(mm):
        return {c.params['ksplit'] for c in mm.candidates(np.float64)
                if c.family == 'cstream-ksplit' and 'chunk' not in c.params}
    assert ksplits(OpenCLMatMul(A)) == {2, 4}
    A[:, 0] = 0
    assert ksplits(OpenCLMatMul(A)) == {2}
    assert {2, 4} <= {c.params['ksplit'] for c in HIPMatMul(A).candidates(
        np.float64, **HIP_OPTS) if c.family == 'cstream-ksplit'}
    monkeypatch.setitem(MIN_PART_COLUMNS, 'opencl', 0)
    assert ksplits(OpenCLMatMul(A)) == {2, 4}
