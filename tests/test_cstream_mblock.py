"""cstream-mblock's plan (gimmik.families.cstream_mblock): the rows of a
group cut into load batches that cover every row and every B row once,
each issuing at least the platform's batch of loads before its rows
consume them; the register estimate follows the batches; CUDA keeps one
row a batch.  The kernels run exactly in the executor in
tests/test_bstream_mgroup.py; the ISA check of the batched waits is in
tests/test_isa.py."""

import numpy as np
import pytest

from conftest import Panels, random_operator
from gimmik import CUDAMatMul, HIPMatMul
from gimmik.base import Candidate
from gimmik.emulate import run_hip
from gimmik.families.cstream_mblock import (BATCH_LOADS, CstreamMblock,
                                            batched_live_values,
                                            load_batches, mblock_groups,
                                            reads_c)
from gimmik.plans import cstream_live_b, cstream_plan

OPTS = {'gcn_arch': 'gfx942', 'warp_size': 64}


def group_operator(rng, m=40, k=24, density=0.15):
    A = random_operator(rng, m, k, density)
    A[3] = 0                    # a zero row: read only where beta != 1
    A[10:14] = 0
    return A


def batch_loads(batch):
    return len(batch.loads) + len(batch.crows)


@pytest.mark.parametrize('beta', [0.0, 1.0, -0.5])
@pytest.mark.parametrize('min_loads', [1, 4, 8, 100])
def test_batches_cover_rows_and_loads_once(rng, beta, min_loads):
    A = group_operator(rng)
    plan = cstream_plan(A)
    batches = load_batches(plan, beta, min_loads)
    assert [r.i for b in batches for r in b.rows] == list(range(A.shape[0]))
    loads = [j for b in batches for j in b.loads]
    assert sorted(loads) == sorted(set(loads))
    assert set(loads) == set(np.flatnonzero((A != 0).any(axis=0)))
    for b in batches:
        # a B row is loaded in the batch of the first row that needs it
        assert set(b.loads) == {j for r in b.rows for j in r.loads}
        assert b.crows == [r.i for r in b.rows if reads_c(r, beta)]
    # every batch but a lone one issues at least min_loads loads
    if len(batches) > 1:
        assert all(batch_loads(b) >= min_loads for b in batches)


def test_reads_c():
    plan = cstream_plan(np.array([[1.0, 0.0], [0.0, 0.0]]))
    assert [reads_c(r, 0.0) for r in plan] == [False, False]
    assert [reads_c(r, 1.0) for r in plan] == [True, False]
    assert [reads_c(r, -0.5) for r in plan] == [True, True]


def test_batch_sizes_on_a_diagonal():
    """Each row of a diagonal A loads one B row and, with beta != 0, its C
    value: batches of 4 rows at 8 loads, the short remainder joined."""
    A = np.diag(np.arange(1.0, 11.0))
    sizes = [len(b.rows) for b in load_batches(cstream_plan(A), 1.0, 8)]
    assert sizes == [4, 6]
    sizes = [len(b.rows) for b in load_batches(cstream_plan(A), 0.0, 8)]
    assert sizes == [10]
    assert [len(b.rows) for b in load_batches(cstream_plan(A), 1.0, None)] \
        == [1]*10


def test_one_row_a_batch_is_the_cstream_estimate(rng):
    A = group_operator(rng)
    plan = cstream_plan(A)
    batches = load_batches(plan, 1.0, None)
    assert all(not b.crows for b in batches)
    assert batched_live_values(batches) == cstream_live_b(plan)


def test_batched_estimate_counts_b_and_c():
    """Rows 0-1 share B rows 0-1 and row 2 uses B row 2: at 8 loads one
    batch holds the three B rows and three C values; with beta 0 and one
    row a batch at most two B rows are held, at 2 loads (row 2's short
    batch joins the one of rows 0-1) three."""
    A = np.array([[1.0, 2.0, 0.0], [3.0, 4.0, 0.0], [0.0, 0.0, 5.0]])
    batches = load_batches(cstream_plan(A), 1.0, 8)
    assert len(batches) == 1
    assert batched_live_values(batches) == 6
    assert batched_live_values(load_batches(cstream_plan(A), 0.0, None)) == 2
    assert batched_live_values(load_batches(cstream_plan(A), 0.0, 2)) == 3


def test_platform_batches(rng):
    A = group_operator(rng)
    cand = Candidate('cstream-mblock', dict(width=1, groups=4), OPTS)
    hip = HIPMatMul(A, beta=1.0).kernel(cand, np.float64)
    assert hip.plan == mblock_groups(A, 4, 1.0, BATCH_LOADS['hip'])
    assert any(len(b.rows) > 1 for _, bs in hip.plan for b in bs)
    cuda = CUDAMatMul(A, beta=1.0).kernel(
        Candidate('cstream-mblock', dict(width=1, groups=4),
                  {'compute_capability': (9, 0)}), np.float64)
    assert all(len(b.rows) == 1 and not b.crows
               for _, bs in cuda.plan for b in bs)
    assert isinstance(hip, CstreamMblock)
    # beta 0: one row a batch on HIP too
    hip0 = HIPMatMul(A, beta=0.0).kernel(cand, np.float64)
    assert hip0.plan == mblock_groups(A, 4, 0.0, None)


@pytest.mark.parametrize('dtype', [np.float64, np.float32])
@pytest.mark.parametrize('beta', [0.0, 1.0, -0.5])
def test_batched_kernel_emulated(rng, dtype, beta):
    """Batches of several rows, C read ahead, ragged n and padded strides,
    two columns a thread: exact in the executor; a changed value in one
    batch is caught."""
    A = group_operator(rng)
    n, lb, lc = 131, 134, 136
    mm = HIPMatMul(A, beta=beta, aligne=2, n=n, ldb=lb, ldc=lc)
    cand = Candidate('cstream-mblock', dict(width=2, groups=3), OPTS)
    src, meta = mm.render(cand, dtype)
    if beta != 0:
        assert 'cin' in src
    p = Panels(rng, A, beta, dtype, n, lb, lc)
    run_hip(src, meta, p.b, p.c)
    p.check(f'batched {np.dtype(dtype).name} beta={beta}')

    kern = mm.kernel(cand, dtype)
    _, batches = kern.plan[1]
    row = next(r for b in batches for r in b.rows if r.terms)
    j, v = row.terms[0]
    row.terms[0] = (j, v + 1.0)
    src, meta = mm.render(cand, dtype)
    p = Panels(rng, A, beta, dtype, n, lb, lc)
    run_hip(src, meta, p.b, p.c)
    with pytest.raises(AssertionError, match='relative error'):
        p.check('mutated')
