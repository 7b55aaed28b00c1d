"""cstream-mblock (gimmik.families.cstream_mblock) and cstream in load
batches: on HIP with beta != 0 a group's rows are computed in batches
(gimmik.plans.load_batches, tested in tests/test_plans.py), on CUDA and
with beta 0 one row a batch; bstream on HIP loads B and C in runs; the
batched kernels run exactly in the executor and a changed value is
caught; the row groups by shared B rows (`shared`) run exactly on both
GPU platforms and are offered where they read fewer B rows.  The other
executor runs of
cstream-mblock are in tests/test_bstream_mgroup.py, the ISA check of the
batched waits in tests/test_isa.py."""

import numpy as np
import pytest

from conftest import (GPU_RUNS, Panels, gradient_like, group_operator,
                      kron_like, random_operator, run_candidate)
from gimmik import CUDAMatMul, HIPMatMul
from gimmik.base import Candidate
from gimmik.emulate import run_hip
from gimmik.targets import HIP
from gimmik.validate import check_dtype
from gimmik.families.cstream_mblock import (RUNTIME_STACK, CstreamMblock,
                                            group_reads,
                                            mblock_groups, mblock_rows,
                                            stack_groups)
from gimmik.plans import (balanced_row_groups, batched_live_values,
                          cstream_plan, load_batches, row_batches_wait_often)

OPTS = {'gcn_arch': 'gfx942', 'warp_size': 64}


def test_platform_batches(rng):
    A = group_operator(rng)
    size = HIP.batch_loads
    cand = Candidate('cstream-mblock', dict(width=1, groups=4), OPTS)
    hip = HIPMatMul(A, beta=1.0).kernel(cand, np.float64)
    assert hip.plan == mblock_groups(
        A, mblock_rows(A, dict(groups=4)),
        lambda plan: load_batches(plan, 1.0, size))
    assert any(len(b.rows) > 1 for _, bs in hip.plan for b in bs)
    cuda = CUDAMatMul(A, beta=1.0).kernel(
        Candidate('cstream-mblock', dict(width=1, groups=4),
                  {'compute_capability': (9, 0)}), np.float64)
    assert all(len(b.rows) == 1 and not b.crows
               for _, bs in cuda.plan for b in bs)
    assert isinstance(hip, CstreamMblock)


def test_beta_zero_batches_where_rows_wait_often(rng):
    """HIP, beta 0: a group is computed in load batches where one row a
    batch would wait more than once per batch_loads loads (a gather: four
    B rows of its own a row), else one row a batch (a dense A: its first
    row loads every B row); never a C value read."""
    size = HIP.batch_loads
    gather = np.zeros((32, 128))
    for i in range(32):
        gather[i, 4*i:4*i + 4] = rng.uniform(1.0, 2.0, 4)
    ways = set()
    for A in (gather, group_operator(rng), rng.uniform(1.0, 2.0, (16, 24))):
        cand = Candidate('cstream-mblock', dict(width=1, groups=4), OPTS)
        kern = HIPMatMul(A, beta=0.0).kernel(cand, np.float64)
        groups = [(list(range(r0, r1)), cstream_plan(A[r0:r1]))
                  for r0, r1 in balanced_row_groups(A, 4) if r1 > r0]
        want = [(rows, load_batches(plan, 0.0, size
                                    if row_batches_wait_often(plan, size)
                                    else None)) for rows, plan in groups]
        assert kern.plan == want
        assert not any(b.crows for _, bs in kern.plan for b in bs)
        ways |= {len(b.rows) > 1 for _, bs in kern.plan for b in bs}
        if A is gather:
            assert all(len(b.loads) >= size for _, bs in kern.plan
                       for b in bs)
    assert ways == {True, False}


def test_cstream_batches(rng):
    A = group_operator(rng)
    cand = Candidate('cstream', dict(width=1), OPTS)
    hip = HIPMatMul(A, beta=-0.5).kernel(cand, np.float64)
    batches = hip.context()['batches']
    assert any(len(b.rows) > 1 for b in batches)
    assert [r.i for b in batches for r in b.rows] == list(range(A.shape[0]))
    kern = CUDAMatMul(A, beta=1.0).kernel(
        Candidate('cstream', dict(width=1), {'compute_capability': (9, 0)}),
        np.float64)
    assert all(len(b.rows) == 1 and not b.crows
               for b in kern.context()['batches'])


@pytest.mark.parametrize('width', [1, 2])
@pytest.mark.parametrize('baked', [True, False])
def test_cstream_batches_beta_zero(rng, width, baked):
    """HIP, beta 0: load batches where one row a batch would wait more
    than once per batch_loads loads, else one row a batch; with n baked,
    one row a batch also where the batches' registers exceed the family's
    limit (with n at run time the batches stay and the estimate decides
    whether the candidate is offered); never a C value read."""
    size = HIP.batch_loads
    diag = np.diag(rng.uniform(1.0, 2.0, 24))
    dense = rng.uniform(1.0, 2.0, (6, 24))
    # row 0 of `held` loads 38 B rows kept to the last row, the rows
    # between two fresh B rows each: one row a batch fits 200 VGPRs at
    # width 2 (40 values), batches of 8 loads do not (46)
    held = np.zeros((27, 88))
    held[0, :38] = held[-1, :38] = 1.0
    for i in range(1, 26):
        held[i, 36 + 2*i:38 + 2*i] = 1.0
    sizes = dict(n=130, ldb=132, ldc=132) if baked else {}
    seen = set()
    for A in (diag, dense, held, group_operator(rng)):
        kern = HIPMatMul(A, beta=0.0, aligne=2, **sizes).kernel(
            Candidate('cstream', dict(width=width), OPTS), np.float64)
        plan = kern.plan
        rows = load_batches(plan, 0.0, None)
        batched = load_batches(plan, 0.0, size)
        fits = (kern.registers_of(batched_live_values(batched))
                <= kern.register_limit())
        want = (batched if row_batches_wait_often(plan, size)
                and (fits or not baked) else rows)
        got = kern.context()['batches']
        assert got == want
        assert not any(b.crows for b in got)
        if not fits and not baked:
            assert not HIPMatMul(A, beta=0.0, aligne=2).registers_fit(kern)
        seen.add((want is batched, fits))
    # each way taken: batched, one row a batch for want of waits and (n
    # baked) for want of registers
    assert (True, True) in seen and (False, True) in seen
    if width == 2:
        assert ((False, False) if baked else (True, False)) in seen


# (family, parameters): two columns a thread and a ragged n
BATCHED = [('cstream-mblock', dict(width=2, groups=3)),
           ('cstream-mblock', dict(width=1, shared=8)),
           ('cstream', dict(width=2)), ('bstream', dict(width=2))]


@pytest.mark.parametrize('family,params', BATCHED,
                         ids=[f for f, _ in BATCHED])
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
@pytest.mark.parametrize('beta', [0.0, 1.0, -0.5])
def test_batched_kernel_emulated(rng, family, params, dtype, beta):
    """Batches of several rows, C read ahead, ragged n and padded strides:
    exact in the executor; a changed value in one batch is caught."""
    A = group_operator(rng)
    n, lb, lc = 131, 134, 136
    mm = HIPMatMul(A, beta=beta, aligne=2, n=n, ldb=lb, ldc=lc)
    cand = Candidate(family, params, OPTS)
    src, meta = mm.render(cand, dtype)
    assert ('cin' in src) == (beta != 0)
    assert ('bv1' in src) == (family == 'bstream')
    p = Panels(rng, A, beta, dtype, n, lb, lc)
    run_hip(src, meta, p.b, p.c)
    p.check(f'{meta["variant"]} {np.dtype(dtype).name} beta={beta}')

    kern = mm.kernel(cand, dtype)
    if family == 'bstream':
        terms = kern.plan[len(kern.plan) // 2].terms
        i, v, first = terms[0]
        terms[0] = (i, v + 1.0, first)
    else:
        plan = kern.plan[1][1] if family == 'cstream-mblock' else [
            kern.plan]
        rows = [r for b in plan for r in getattr(b, 'rows', b) if r.terms]
        j, v = rows[len(rows) // 2].terms[0]
        rows[len(rows) // 2].terms[0] = (j, v + 1.0)
    src, meta = mm.render(cand, dtype)
    p = Panels(rng, A, beta, dtype, n, lb, lc)
    run_hip(src, meta, p.b, p.c)
    with pytest.raises(AssertionError, match='relative error'):
        p.check('mutated')


def test_bstream_runs(rng):
    A = group_operator(rng)
    used = int((A != 0).any(axis=0).sum())
    cand = Candidate('bstream', dict(width=1), OPTS)
    for beta in (0.0, 1.0, -0.5):
        kern = HIPMatMul(A, beta=beta).kernel(cand, np.float64)
        bruns, cruns = kern.runs()
        assert [cp for r in bruns for cp in r] == kern.plan
        assert all(len(r) >= HIP.batch_loads for r in bruns)
        assert sum(map(len, bruns)) == used
        if beta == 0:
            assert cruns is None
            continue
        assert [i for rows, _ in cruns for i in rows] == list(
            range(A.shape[0]))
        # beta 1: the zero rows of A are left as they are, not read
        read = {i for _, crows in cruns for i in crows}
        assert (3 in read) == (beta != 1)
    cuda = CUDAMatMul(A, beta=1.0).kernel(
        Candidate('bstream', dict(width=1), {'compute_capability': (9, 0)}),
        np.float64)
    assert cuda.runs() == (None, None)



# grouped rows: by shared B rows, partitioned, and two groups a block
# (stack; an odd count of groups: the last block's second group is empty)
GROUPED = [dict(width=1, shared=9), dict(width=1, part=6),
           dict(width=1, part=6, stack=2), dict(width=2, groups=5, stack=2)]
GROUPED_IDS = ['shared', 'part', 'part-stack2', 'groups5-w2-stack2']


@pytest.mark.parametrize('params', GROUPED, ids=GROUPED_IDS)
@pytest.mark.parametrize('platform,dtype,beta,baked', GPU_RUNS,
                         ids=lambda x: getattr(x, '__name__', str(x)))
def test_shared_groups_emulated(rng, platform, dtype, beta, baked, params):
    """Rows grouped by shared B rows or partitioned (a gradient with zero
    rows: the groups are not contiguous): exact in the platform's
    executor, ragged n and padded strides, n baked or at run time."""
    A = gradient_like(rng, 3)
    A[[4, 40]] = 0
    p, meta = run_candidate(rng, platform, A, 'cstream-mblock', params,
                            dtype, beta, baked, n=131, aligne=2)
    p.check(f'{meta["variant"]} {np.dtype(dtype).name} beta={beta}')
    stack = params.get('stack', 1)
    assert meta['row_groups'] == -(-len(mblock_rows(A, params)) // stack)


@pytest.mark.parametrize('params', GROUPED, ids=GROUPED_IDS)
@pytest.mark.parametrize('platform', ['hip', 'cuda'])
def test_shared_groups_wrong_bake_is_caught(rng, platform, params):
    A = gradient_like(rng, 3)

    def mutate(plan):
        rows, batches = plan[len(plan) // 2]
        row = next(r for b in batches for r in b.rows if r.terms)
        j, v = row.terms[0]
        row.terms[0] = (j, v + 1.0)

    p, _ = run_candidate(rng, platform, A, 'cstream-mblock', params,
                         np.float64, 0.0, True, n=67, aligne=2,
                         mutate=mutate)
    with pytest.raises(AssertionError, match='relative error'):
        p.check('mutated')


def test_stack_groups(rng):
    """stack_groups: the same groups, each run of `stack` led by the first
    group not yet placed, then the one sharing the most B rows with the
    run; the block's geometry: stack times the streaming threads over
    stream_threads columns, ceil(groups/stack) blocks a column tile; a
    block's groups read fewer B rows from L2 together than apart."""
    from gimmik.cost import work
    A = gradient_like(rng, 4)
    rows = mblock_rows(A, dict(part=8))
    S = A != 0
    for stack in (1, 2, 3):
        got = stack_groups(A, rows, stack)
        assert sorted(got) == sorted(rows)
        for i in range(0, len(got), stack):
            run = got[i:i + stack]
            left = [g for g in rows if g not in got[:i]]
            assert run[0] == left[0]
            if len(run) > 1:
                union = S[run[0]].any(axis=0)
                best = max(int((S[g].any(axis=0) & union).sum())
                           for g in left[1:])
                assert int((S[run[1]].any(axis=0) & union).sum()) == best
    # the pairing beats pairing neighbours on a gradient
    pairs = stack_groups(A, rows, 2)
    assert (group_reads(A, [pairs[i] + pairs[i + 1]
                            for i in range(0, len(pairs) - 1, 2)])
            < group_reads(A, [rows[i] + rows[i + 1]
                              for i in range(0, len(rows) - 1, 2)]))
    mm = CUDAMatMul(A, beta=0.0)
    opts = {'compute_capability': (9, 0)}
    one = mm.kernel(Candidate('cstream-mblock', dict(width=1, part=8),
                              opts), np.float64)
    two = mm.kernel(Candidate('cstream-mblock', dict(width=1, part=8,
                                                     stack=2), opts),
                    np.float64)
    g1, g2 = one.geometry(), two.geometry()
    # a block's groups along y, over one column tile of block[0] threads
    assert g1.block == (mm.stream_threads(opts), 1, 1)
    assert g2.block == (mm.stream_threads(opts), 2, 1)
    assert g2.tile_cols == g1.tile_cols == g1.block[0]
    assert g2.row_groups == -(-len(rows) // 2)
    assert two.block_rows == [two.group_rows[i] + two.group_rows[i + 1]
                              for i in range(0, len(rows) - 1, 2)] + (
        [two.group_rows[-1]] if len(rows) % 2 else [])
    w1 = work(mm, Candidate('cstream-mblock', dict(width=1, part=8), opts),
              np.float64)
    w2 = work(mm, Candidate('cstream-mblock', dict(width=1, part=8,
                                                   stack=2), opts),
              np.float64)
    assert w2.l2_bytes < w1.l2_bytes and w2.inflight == w1.inflight
    assert w2.dram_bytes == w1.dram_bytes and w2.wave_paths == 2


def test_shared_groups_plan_and_offer(rng):
    """The groups are analysis.shared_row_groups' (the geometry's row
    groups, each group's plan over its own rows); offered where they read
    at most SHARED_MAX_READS of the B rows contiguous groups as many
    read: on a gradient, not on an operator whose rows share no more than
    neighbours do."""
    from gimmik.analysis import shared_row_groups
    from gimmik.families.cstream_mblock import SHARED_MAX_READS
    params = dict(width=1, shared=16)
    grad = gradient_like(rng, 4)
    mm = HIPMatMul(grad, beta=0.0, aligne=2)
    kern = mm.kernel(Candidate('cstream-mblock', params, OPTS), np.float64)
    groups = shared_row_groups(grad, 16)
    assert [rows for rows, _ in kern.plan] == [list(g) for g in groups]
    assert kern.geometry().row_groups == len(groups)
    assert kern.plan == mblock_groups(grad, [list(g) for g in groups],
                                      kern.cstream_batches)
    # n at run time PyFR main launches a block a column tile: the groups
    # are stacked in blocks (RUNTIME_STACK)
    assert CstreamMblock.adapt(mm, params) == dict(params,
                                                   stack=RUNTIME_STACK)

    def reads(A, rows):
        return sum(int((A[list(g)] != 0).any(axis=0).sum()) for g in rows)

    rand = random_operator(rng, 96, 96, 0.3)
    rows = mblock_rows(rand, params)
    contiguous = mblock_rows(rand, dict(groups=len(rows)))
    assert reads(rand, rows) > SHARED_MAX_READS*reads(rand, contiguous)
    assert CstreamMblock.adapt(HIPMatMul(rand), params) is None
    for platform, mm in (('hip', HIPMatMul(grad, aligne=2, n=4096,
                                           ldb=4096, ldc=4096)),
                         ('cuda', CUDAMatMul(grad, aligne=2, n=4096,
                                             ldb=4096, ldc=4096))):
        offered = [c.params for c in mm.candidates(np.float64)
                   if c.family == 'cstream-mblock']
        assert any('shared' in p for p in offered), platform


def test_budgets_finding_the_same_groups_offer_one_kernel(rng):
    """Blocks of rows of one support each, rows shuffled: every budget
    finds the same groups (the blocks), so of the shared rows only the
    first is offered (Family.kernel_key), on both GPU platforms; the
    contiguous groups of the same operator stay."""
    A = kron_like(rng, 96, 48, blocks=8, bk=6)
    for mm, opts in ((HIPMatMul(A, aligne=2), OPTS),
                     (CUDAMatMul(A, aligne=2),
                      {'compute_capability': (9, 0)})):
        shared = [c for c in mm.candidates(np.float64, **opts)
                  if 'shared' in c.params]
        assert len(shared) == 1, [c.row for c in shared]
        kern = mm.kernel(shared[0], np.float64)
        assert len(kern.group_rows) == 8
        for u in (32, 64):
            other = Candidate('cstream-mblock', dict(shared[0].params,
                                                     shared=u), opts)
            assert mm.kernel(other, np.float64).kernel_key() == \
                kern.kernel_key()
        assert any('groups' in c.params
                   for c in mm.candidates(np.float64, **opts))


def test_partitioned_groups_plan_and_offer(rng):
    """The groups are analysis.partition_rows' (about `part` rows each);
    offered where they read at most SHARED_MAX_READS of the B rows
    contiguous groups as many read: on a divergence-like operator (the
    transpose of a gradient), first of CUDA's offer where no shared groups
    are, and on HIP on a gradient; not where A's rows come in blocks
    of one support (prism-like, the sparse tensor-core tiles'), nor on
    CUDA with beta != 0, nor where its estimate bounds them (n at run
    time, or B rows reused by many of a group's terms) and exceeds the
    budget."""
    from gimmik.analysis import partition_rows
    from gimmik.cuda import CANDIDATES as CUDA_CANDIDATES
    from gimmik.families.cstream_mblock import PART_MAX_REUSE, PART_MAX_TERMS
    from conftest import divergence_like, prism_like
    params = dict(width=1, part=22)
    div = divergence_like(rng, 7, zero_centre=True)
    mm = HIPMatMul(div, beta=0.0, aligne=2)
    kern = mm.kernel(Candidate('cstream-mblock', params, OPTS), np.float64)
    groups = partition_rows(div, -(-div.shape[0] // 22))
    assert [rows for rows, _ in kern.plan] == [list(g) for g in groups]
    assert CstreamMblock.adapt(mm, params) == dict(params,
                                                   stack=RUNTIME_STACK)

    def offered(mm, **opts):
        return [c for c in mm.candidates(np.float64, **opts)
                if c.family == 'cstream-mblock' and 'part' in c.params]
    sizes = dict(aligne=2, n=4096, ldb=4096, ldc=4096)
    # HIP: where its register filter keeps them (a gradient's groups of
    # few B values, not the divergence's)
    assert offered(HIPMatMul(gradient_like(rng, 5), **sizes), **OPTS)
    cuda = CUDAMatMul(div, **sizes)
    cands = cuda.candidates(np.float64, compute_capability=(9, 0))
    assert not any('shared' in c.params for c in cands)
    assert 'part' in cands[0].params
    assert max(int((div[list(g)] != 0).sum()) for g in groups) \
        < PART_MAX_TERMS
    assert not offered(CUDAMatMul(div, beta=1.0, **sizes),
                       compute_capability=(9, 0))
    # CUDA budgets them by their terms with n baked, not at run time
    # (there the estimate bounds them, and the divergence's exceeds it)
    assert not offered(CUDAMatMul(div, aligne=2), compute_capability=(9, 0))
    # ... and not where a group's terms reuse its B rows more than
    # PART_MAX_REUSE times (rows of a few dense columns)
    row = next(r for r in CUDA_CANDIDATES if r.params.get('part') == 16)
    dense = np.kron(np.eye(8), rng.uniform(1.0, 2.0, (16, 12)))
    mm = CUDAMatMul(dense, **sizes)
    kern = mm.kernel(Candidate('cstream-mblock', row.params,
                               {'compute_capability': (9, 0)}), np.float64)
    assert 16 > PART_MAX_REUSE and not kern.terms_bound()
    kern = cuda.kernel(next(c for c in cands if 'part' in c.params),
                       np.float64)
    assert kern.terms_bound()
    prism = prism_like(rng, 28, 7)
    assert CstreamMblock.adapt(HIPMatMul(prism), params) is None



@pytest.mark.parametrize('beta', [0.0, 1.0])
def test_cuda_group_loads_capped_in_f64(rng, monkeypatch, beta):
    """A thread's loads over its row group (used B rows, plus its C rows
    where beta != 0, times the width) bound CUDA f64 m-blocks at
    MAX_GROUP_LOADS: the groups past it are dropped, the rest offered
    whatever their width; f32 and HIP keep them."""
    from gimmik.families.cstream_mblock import MAX_GROUP_LOADS
    A = np.zeros((128, 512))
    for i in range(128):
        A[i, rng.choice(512, 24, replace=False)] = rng.uniform(0.5, 2, 24)
    S = A != 0

    def mblocks(mm, dtype, *opts):
        dt = check_dtype(dtype)
        return {c.variant: mm.kernel(c, dt)
                for c in mm._candidates(dt, *opts)
                if c.family == 'cstream-mblock'}

    def cuda(dtype):
        return mblocks(CUDAMatMul(A, beta=beta, aligne=4), dtype, (9, 0))

    kept = cuda('float64')
    monkeypatch.setattr(CstreamMblock, 'max_thread_loads', {})
    every = cuda('float64')
    for kern in every.values():
        w = kern.params.get('width', 1)
        assert kern.thread_loads() == w*max(
            int(S[g].any(axis=0).sum()) + (beta != 0)*len(g)
            for g in kern.group_rows)
    over = {v for v, k in every.items() if k.thread_loads() > MAX_GROUP_LOADS}
    assert over and set(every) - over == set(kept)
    monkeypatch.undo()
    assert over <= set(cuda('float32'))
    hip = mblocks(HIPMatMul(A, beta=beta, aligne=4), 'float64', 'gfx942',
                  64)
    assert any(k.thread_loads() > MAX_GROUP_LOADS for k in hip.values())
