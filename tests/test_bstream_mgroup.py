"""bstream-mgroup (gimmik.families.bstream_mgroup): the plan covers every
term of A once within bounded row groups, and the register-bounded HIP
rows (bstream-mgroup, cstream-mblock) run exactly in the
CPU executor: ragged n, padded strides, beta 0, 1 and -0.5, f32 and f64,
n baked and not; a perturbed bake is caught.  On HIP a group's chunks
are loaded in load batches, each fenced off from what follows it."""

import itertools

import numpy as np
import pytest

from conftest import HIP_OPTS, Panels, random_operator, run_hip_candidate
from gimmik import CUDAMatMul, HIPMatMul
from gimmik.base import Candidate
from gimmik.targets import HIP
from gimmik.plans import msplit_plan
from gimmik.emulate import run_hip
from gimmik.families.bstream_mgroup import group_rows, mgroup_plan
from gimmik.hip import BIG_M

OPTS = HIP_OPTS


def tall_operator(rng, m=70, k=30, density=0.2):
    A = random_operator(rng, m, k, density)
    A[5] = 0                               # an all-zero row of A
    A[:, 3] = 0                            # an unused row of B
    return A


@pytest.mark.parametrize('m,msplit,rows', [(70, 4, 4), (9, 2, 8),
                                           (375, 4, 16), (64, 4, 16)])
def test_group_rows_bounded_and_contiguous(m, msplit, rows):
    groups = group_rows(m, msplit, rows)
    assert groups[0][0] == 0 and groups[-1][1] == m
    assert all(a[1] == b[0] for a, b in zip(groups, groups[1:]))
    assert all(0 < r1 - r0 <= msplit*rows for r0, r1 in groups)
    assert len(groups) == -(-m // (msplit*rows))


@pytest.mark.parametrize('msplit,rows,bsz', [(4, 4, 8), (2, 8, 16),
                                             (4, 2, 4)])
def test_plan_covers_every_term_once(rng, msplit, rows, bsz):
    A = tall_operator(rng)
    plan = mgroup_plan(A, msplit, rows, bsz)
    seen = np.zeros_like(A)
    for r0, r1, sub in plan.groups:
        used = [int(j) for j in np.flatnonzero((A[r0:r1] != 0).any(axis=0))]
        assert [j for ch in sub.chunks for j in ch] == used
        assert all(len(ch) <= bsz for ch in sub.chunks)
        for q, ch in enumerate(sub.chunks):
            # each chunk row staged by exactly one wave
            staged = sorted(r for ld in sub.loads[q] for r in ld)
            assert staged == list(range(len(ch)))
            for y, (s0, s1) in enumerate(sub.groups):
                assert s1 - s0 <= rows
                for a, v, r, _ in sub.updates[q][y]:
                    i, j = r0 + s0 + a, ch[r]
                    assert A[i, j] == v
                    seen[i, j] += 1
    assert np.array_equal(seen, (A != 0).astype(float))
    assert plan.nacc <= rows
    assert plan.nstage == -(-min(bsz, A.shape[1]) // msplit)


MGROUP = [dict(msplit=4, rows=4, bsz=8),
          dict(msplit=4, rows=4, bsz=12, nbuf=1),
          dict(msplit=2, rows=8, bsz=16, ld='cs'),
          dict(msplit=2, rows=8, bsz=16, width=2, ld='cs')]
BOUNDED = [('bstream-mgroup', p) for p in MGROUP] + [
    ('cstream-mblock', dict(width=1, groups=8)),
    ('cstream-mblock', dict(width=2, groups=4))]
COMBOS = list(itertools.product((np.float64, np.float32), (0.0, 1.0, -0.5),
                                (False, True)))


def run_one(rng, A, family, params, dtype, beta, baked, **kw):
    return run_hip_candidate(rng, A, family, params, dtype, beta, baked,
                             aligne=2, **kw)


def test_hip_loads_chunks_in_batches(rng):
    """HIP: each group's chunks in plans.msplit_plan's load batches of
    batch_loads loads a wave (CUDA: one chunk a batch), the staging
    registers those of the fullest batch; the HIP source fences each
    batch's loads and each group's case, the CUDA source has no fence."""
    A = tall_operator(rng)
    joined = False
    for params in MGROUP:
        cand = Candidate('bstream-mgroup', params, OPTS)
        kern = HIPMatMul(A, beta=0.0, aligne=2).kernel(cand, np.float64)
        for r0, r1, sub in kern.plan.groups:
            want = msplit_plan(A[r0:r1], params['msplit'], params['bsz'],
                               even=True, min_loads=HIP.batch_loads)
            assert sub.batches == want.batches
            assert sub.slots == want.slots
            joined |= any(len(b) > 1 for b in sub.batches)
        assert kern.plan.nstage == max(sub.nstage
                                       for _, _, sub in kern.plan.groups)
        batches = sum(len(sub.batches) for _, _, sub in kern.plan.groups)
        groups = len(kern.plan.groups)
        copies = 2 if params.get('width') == 2 else 1
        for beta in (0.0, -0.5):
            # fences: a batch's loads, a group's case and, with beta != 0,
            # its C values read ahead of the waves' cases (in each copy of
            # a two-column body) unless they join its last batch
            mm = HIPMatMul(A, beta=beta, aligne=2)
            joins = mm.kernel(cand, np.float64).c_joins()
            src, _ = mm.render(cand, np.float64)
            ahead = sum(not j for j in joins)*copies if beta else 0
            want = batches + groups + ahead
            assert src.count('__builtin_amdgcn_sched_barrier(0);') == want
            assert src.count('*ldcl + bcol)') == (
                sum(max(s1 - s0 for s0, s1 in sub.groups)
                    for (_, _, sub), j in zip(kern.plan.groups, joins)
                    if j))
        cuda = CUDAMatMul(A, beta=0.0, aligne=2)
        ccand = Candidate('bstream-mgroup', params,
                          {'compute_capability': (9, 0)})
        for _, _, sub in cuda.kernel(ccand, np.float64).plan.groups:
            assert sub.batches == [[q] for q in range(len(sub.chunks))]
        csrc, _ = cuda.render(ccand, np.float64)
        assert 'sched_barrier' not in csrc
    assert joined


def test_c_joins_the_last_batch(rng):
    """HIP, beta != 0, one column a thread: a group whose last batch's B
    loads or C loads are fewer than batch_loads loads C's old values with
    that batch (the estimate holds both); two columns a thread, beta 0 and
    CUDA never; exact in the executor."""
    A = tall_operator(rng)
    size = HIP.batch_loads
    seen = set()
    for params in MGROUP:
        cand = Candidate('bstream-mgroup', params, OPTS)
        for beta in (0.0, 1.0, -0.5):
            kern = HIPMatMul(A, beta=beta, aligne=2).kernel(cand, np.float64)
            joins = kern.c_joins()
            for (_, _, sub), j in zip(kern.plan.groups, joins):
                ms = len(sub.groups)
                last = sum(-(-len(sub.chunks[q]) // ms)
                           for q in sub.batches[-1])
                cl = max(s1 - s0 for s0, s1 in sub.groups)
                assert j == (beta != 0 and params.get('width', 1) == 1
                             and min(last, cl) < size)
                if j:
                    assert kern.live_values() >= kern.plan.nacc + last + cl
                seen.add(j)
            if any(joins):
                p, meta = run_one(rng, A, 'bstream-mgroup', params,
                                  np.float64, beta, False)
                p.check(meta['variant'])
    assert seen == {True, False}


@pytest.mark.parametrize('dtype,beta,baked', COMBOS,
                         ids=lambda x: getattr(x, '__name__', str(x)))
def test_bounded_rows_emulated(rng, dtype, beta, baked):
    """Two of the rows a combination, in turn: every row meets several
    combinations across the run."""
    A = tall_operator(rng)
    idx = COMBOS.index((dtype, beta, baked))
    for family, params in (BOUNDED[idx % len(BOUNDED)],
                           BOUNDED[(idx + 2) % len(BOUNDED)]):
        p, meta = run_one(rng, A, family, params, dtype, beta, baked)
        p.check(f'{meta["variant"]} {np.dtype(dtype).name} beta={beta} '
                f'baked={baked}')


def test_wrong_bake_is_caught(rng):
    """A plan with one value changed gives a wrong C in the executor."""
    A = tall_operator(rng)

    def mutate(plan):
        _, _, sub = plan.groups[1]
        q, y = next((q, y) for q in range(len(sub.chunks))
                    for y in range(len(sub.groups)) if sub.updates[q][y])
        a, v, r, first = sub.updates[q][y][0]
        sub.updates[q][y][0] = (a, v + 1.0, r, first)

    p, _ = run_one(rng, A, 'bstream-mgroup', MGROUP[0], np.float64, 0.0,
                   True, mutate=mutate)
    with pytest.raises(AssertionError, match='relative error'):
        p.check('mutated')


def test_runtime_n_zero_columns_is_a_no_op(rng):
    A = tall_operator(rng)
    mm = HIPMatMul(A, aligne=2)
    src, meta = mm.render(Candidate('bstream-mgroup', MGROUP[0], OPTS),
                          np.float64)
    b, c = np.ones((A.shape[1], 0)), np.zeros((A.shape[0], 0))
    run_hip(src, meta, b, c)


def test_offered_first_for_tall_sparse_operators(rng):
    """An operator with many rows whose streaming kernels would hold too
    many values gets the register-bounded rows among its first 8, and
    every candidate it gets is within the register limit."""
    A = random_operator(rng, 400, 150, 0.04)
    assert A.shape[0] > BIG_M
    mm = HIPMatMul(A, aligne=16, n=110080, ldb=110080, ldc=110080)
    cands = mm.candidates(np.float64)
    first = {c.family for c in cands[:8]}
    assert {'bstream-mgroup', 'cstream-mblock'} <= first
    for c in cands:
        est = mm.kernel(c, np.float64).registers()
        limit = mm.kernel(c, np.float64).register_limit()
        assert est is None or est <= limit, c.variant


def test_no_spilling_fallback(rng):
    """Where no row fits the register limit nothing is offered in its
    place: a dense 60 x 200 operator has no bounded rows (m <= BIG_M) and
    its unrolled streams hold too many values; what is offered fits."""
    A = rng.standard_normal((60, 200))
    mm = HIPMatMul(A, aligne=16)
    for c in mm.candidates(np.float32):
        est = mm.kernel(c, np.float32).registers()
        limit = mm.kernel(c, np.float64).register_limit()
        assert est is None or est <= limit, c.variant


@pytest.mark.parametrize('params,offered', [
    (dict(msplit=4, rows=16, bsz=64), True),
    (dict(msplit=4, rows=16, bsz=62), False),     # bsz not a multiple
    (dict(msplit=4, rows=32, bsz=64), False),     # one group of 100 rows
    (dict(msplit=4, rows=1, bsz=8), True),
])
def test_adapt(params, offered):
    from gimmik.families.bstream_mgroup import BstreamMgroup
    mm = HIPMatMul(np.eye(100))
    assert (BstreamMgroup.adapt(mm, params) is not None) == offered


@pytest.mark.parametrize('dtype,beta,baked', [(np.float64, -0.5, True),
                                              (np.float32, 1.0, False)])
def test_renders_for_cuda_emulated(rng, dtype, beta, baked):
    """The shared template on the CUDA platform (32-wide warps), in the
    CUDA executor."""
    from gimmik import CUDAMatMul
    from gimmik.emulate import run_cuda

    A = tall_operator(rng)
    n, lb, lc = 301, 304, 306
    kw = dict(n=n, ldb=lb, ldc=lc) if baked else {}
    mm = CUDAMatMul(A, beta=beta, aligne=2, **kw)
    cand = Candidate('bstream-mgroup', dict(msplit=4, rows=4, bsz=8,
                                            nbuf=1),
                     {'compute_capability': (9, 0)})
    src, meta = mm.render(cand, dtype)
    p = Panels(rng, A, beta, dtype, n, lb, lc)
    run_cuda(src, meta, p.b, p.c)
    p.check(f'cuda {np.dtype(dtype).name} beta={beta} baked={baked}')
