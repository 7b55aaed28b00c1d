import numpy as np
import pytest

from gimmik.analysis import (SPARSE_GEMM_MAX_LIVE, SPARSE_GEMM_MIN_DENSITY,
                             SPARSE_GEMM_MIN_NNZ,
                             OperatorInfo, analyse, chunks, ksplit_ranges,
                             live_slabs, reordered, shared_row_groups,
                             slab_order,
                             sparse_gemm_worth_it, useful_slab_order,
                             split_even)
from gimmik import analysis, plans

from conftest import gradient_like, random_operator


def brute_force(A):
    m, k = A.shape
    first = [next((j for j in range(k) if A[i, j]), -1) for i in range(m)]
    last = [next((j for j in reversed(range(k)) if A[i, j]), -1)
            for i in range(m)]
    bix = [j for j in range(k) if any(A[i, j] for i in range(m))]
    return first, last, bix


def test_known_matrix():
    A = np.array([[0, 2.0, 0, -2.0],
                  [0, 0, 0, 0],
                  [1.5, 0, 0, 0]])
    info = analyse(A)
    assert isinstance(info, OperatorInfo)
    assert (info.m, info.k, info.nnz) == (3, 4, 3)
    assert info.density == 3/12
    assert info.unique == 2              # |2| = |-2|, 1.5
    assert info.first == (1, -1, 0)
    assert info.last == (3, -1, 0)
    assert info.bix == (0, 1, 3)
    assert info.zero_rows == (1,)


@pytest.mark.parametrize('shape,density', [((7, 5), 0.3), ((40, 60), 0.05),
                                           ((33, 33), 1.0), ((1, 9), 0.5)])
def test_against_brute_force(rng, shape, density):
    A = np.where(rng.random(shape) < density, rng.standard_normal(shape), 0)
    A[0, 0] = 1.0
    info = analyse(A)
    first, last, bix = brute_force(A)
    assert list(info.first) == first
    assert list(info.last) == last
    assert list(info.bix) == bix
    assert info.nnz == np.count_nonzero(A)
    assert info.unique == len(set(abs(x) for x in A.ravel() if x))


def test_split_even_covers_range():
    for count in range(0, 20):
        for parts in range(1, 6):
            ranges = split_even(count, parts)
            assert len(ranges) == parts
            assert [i for a, b in ranges for i in range(a, b)] == \
                list(range(count))
            sizes = [b - a for a, b in ranges]
            assert max(sizes) - min(sizes) <= 1


def test_chunks():
    assert chunks(range(5), 2) == [[0, 1], [2, 3], [4]]
    assert chunks([], 3) == []


def test_ksplit_ranges_partition_used_columns(rng):
    A = np.where(rng.random((12, 30)) < 0.3, 1.0, 0.0)
    A[:, 4] = 0
    A[0, 0] = 1
    for parts in (1, 2, 3, 4):
        groups = ksplit_ranges(A, parts)
        assert len(groups) == parts
        flat = [j for g in groups for j in g]
        assert flat == list(analyse(A).bix)


def evaluate(plan_terms, m, B):
    """Sum a plan's terms into an m x n result."""
    out = np.zeros((m, B.shape[1]))
    for i, j, v in plan_terms:
        out[i] += v*B[j]
    return out


@pytest.mark.parametrize('msplit,bsz', [(1, 4), (2, 16), (4, 3)])
def test_plans_reproduce_product(rng, msplit, bsz):
    """Every family's plan, evaluated in Python, reproduces A*B."""
    A = np.where(rng.random((13, 17)) < 0.35, rng.standard_normal((13, 17)),
                 0)
    A[5] = 0
    A[0, 0] = 1
    B = rng.standard_normal((17, 6))
    ref = A @ B

    cs = plans.cstream_plan(A)
    loaded = set()
    for row in cs:
        loaded.update(row.loads)
        assert {j for j, _ in row.terms} <= loaded
    got = evaluate([(r.i, j, v) for r in cs for j, v in r.terms], 13, B)
    assert np.allclose(got, ref)

    bs = plans.bstream_plan(A)
    got = evaluate([(i, c.j, v) for c in bs for i, v, _ in c.terms], 13, B)
    assert np.allclose(got, ref)

    ms = plans.msplit_plan(A, msplit, bsz)
    assert all(len(ch) <= bsz for ch in ms.chunks)
    terms = [(ms.groups[y][0] + a, ms.chunks[q][r], v)
             for q, per_y in enumerate(ms.updates)
             for y, ups in enumerate(per_y) for a, v, r, _ in ups]
    assert np.allclose(evaluate(terms, 13, B), ref)
    # every chunk row is staged by exactly one wavefront
    for q, ch in enumerate(ms.chunks):
        staged = sorted(r for ld in ms.loads[q] for r in ld)
        assert staged == list(range(len(ch)))

    for chunk in (None, 4):
        ks = plans.ksplit_plan(A, msplit, chunk)
        terms = [(i, j, v) for y in range(msplit) for i in range(13)
                 for j, v in ks.terms[y][i]]
        assert np.allclose(evaluate(terms, 13, B), ref)

    rows = msplit + 2          # 3, 4, 6: 13 rows never divide evenly
    rb = plans.rowblock_plan(A, rows)
    assert rb.bix == list(analyse(A).bix)
    assert len(rb.ptr) == -(-13 // rows) + 1
    terms = [(g*rows + r, rb.bix[rb.cols[t]], rb.vals[t][r])
             for g in range(len(rb.ptr) - 1)
             for t in range(rb.ptr[g], rb.ptr[g + 1]) for r in range(rows)
             if g*rows + r < 13]
    assert np.allclose(evaluate(terms, 13, B), ref)
    # padding rows past m carry only zeros, and a group lists each packed
    # row once, ascending
    assert all(rb.vals[t][r] == 0 for g in range(len(rb.ptr) - 1)
               for t in range(rb.ptr[g], rb.ptr[g + 1])
               for r in range(rows) if g*rows + r >= 13)
    for g in range(len(rb.ptr) - 1):
        cols = rb.cols[rb.ptr[g]:rb.ptr[g + 1]]
        assert cols == sorted(set(cols))


@pytest.mark.parametrize('ksplit,chunk', [(2, None), (2, 5), (4, 3), (3, 4)])
def test_ksplit_plan_passes_owners_and_fetches(rng, ksplit, chunk):
    """Passes of chunk rows cover the rows in order; each pass's rows are
    shared out evenly and contiguously among the warps; a warp's slot for
    a row it does not own is its index among the others; each column a
    warp sums is fetched once, at the first row that uses it, and live_b
    is the most columns held between first and last use."""
    A = np.where(rng.random((23, 31)) < 0.3, rng.standard_normal((23, 31)),
                 0)
    A[:, 4] = 0
    ks = plans.ksplit_plan(A, ksplit, chunk)
    assert [r for r0, r1 in ks.passes for r in range(r0, r1)] == \
        list(range(23))
    assert all(r1 - r0 == (chunk or 23) for r0, r1 in ks.passes[:-1])
    for r0, r1 in ks.passes:
        own = ks.owner[r0:r1]
        assert own == sorted(own)
        counts = [own.count(y) for y in range(ksplit)]
        assert max(counts) - min(counts) <= 1
    for y in range(ksplit):
        for i in range(23):
            o = ks.owner[i]
            assert ks.slot[y][i] == (None if o == y else
                                     [g for g in range(ksplit)
                                      if g != o].index(y))
    used = [{j for t in ks.terms[y] for j, _ in t} for y in range(ksplit)]
    assert set().union(*used) == set(np.flatnonzero(A.any(axis=0)))
    for y in range(ksplit):
        fetch = ks.fetch(y)
        assert sorted(j for f in fetch for j in f) == sorted(used[y])
        first = {}
        for i, t in enumerate(ks.terms[y]):
            for j, _ in t:
                first.setdefault(j, i)
        assert all(first[j] == i for i, f in enumerate(fetch) for j in f)
        last = {j: i for i, t in enumerate(ks.terms[y]) for j, _ in t}
        held = max((sum(first[j] <= i <= last[j] for j in first)
                    for i in range(23)), default=0)
        assert ks.live_b(y) == held


def test_balanced_row_groups_nonempty_and_contiguous(rng):
    A = np.ones((10, 4))
    A[:3] *= 0
    A[0, 0] = 1
    for parts in (1, 2, 3, 4, 10, 12):
        groups = plans.balanced_row_groups(A, parts)
        assert len(groups) == parts
        assert groups[0][0] == 0
        assert all(a[1] == b[0] for a, b in zip(groups, groups[1:]))
        assert groups[-1][1] == 10 or parts > 10


@pytest.mark.parametrize('msplit,bsz', [(1, 24), (3, 5), (4, 24), (8, 7)])
def test_warprows_plan_terms_loads_and_retirement(rng, msplit, bsz):
    A = rng.standard_normal((13, 11))*(rng.random((13, 11)) < 0.35)
    A[np.arange(13), [0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 0, 1, 10]] = 1.0
    A[4] = 0.0                     # a zero row: idle, never updated
    A[:, 6] = 0.0                  # an unused column of A: never loaded
    B = rng.standard_normal((11, 5))
    wr = plans.warprows_plan(A, msplit, bsz)
    msplit = min(msplit, 13)
    assert wr.rows == [list(range(y, 13, msplit)) for y in range(msplit)]
    assert [j for ch in wr.chunks for j in ch] == list(analyse(A).bix)
    assert all(len(ch) <= bsz for ch in wr.chunks)
    terms, firsts, done = [], [], []
    for q, per_y in enumerate(wr.steps):
        for y, walk in enumerate(per_y):
            for r, ups, fin in walk:
                assert all(i in wr.rows[y] for i, _, _ in ups)
                terms += [(i, wr.chunks[q][r], v) for i, v, _ in ups]
                firsts += [i for i, _, first in ups if first]
                done += fin
                # a row is stored once, where its last term is added
                assert set(fin) <= {i for i, _, _ in ups}
    assert np.allclose(evaluate(terms, 13, B), A @ B)
    nonzero = [i for i in range(13) if A[i].any()]
    assert sorted(firsts) == sorted(done) == nonzero
    assert [i for y in wr.idle for i in y] == [4]
    # ends: each non-zero row once, in its warp and the chunk of its last
    # used column (where the kernel loads its old C value)
    assert sorted(i for per_q in wr.ends for s in per_q for i in s) == \
        nonzero
    for q, per_y in enumerate(wr.ends):
        for y, s in enumerate(per_y):
            for i in s:
                last = max(pos for pos, j in enumerate(analyse(A).bix)
                           if A[i, j])
                assert i in wr.rows[y] and last // bsz == q
    # every chunk row is fetched by exactly one warp
    for q, ch in enumerate(wr.chunks):
        assert sorted(r for ld in wr.loads[q] for r in ld) == \
            list(range(len(ch)))
    # live: the most accumulators a warp holds between first and last term
    pos = {j: p for p, j in enumerate(analyse(A).bix)}
    most = 0
    for y in range(msplit):
        span = [(min(pos[j] for j in np.flatnonzero(A[i])),
                 max(pos[j] for j in np.flatnonzero(A[i])))
                for i in wr.rows[y] if A[i].any()]
        for p in range(len(pos)):
            most = max(most, sum(a <= p <= b for a, b in span))
    assert wr.live == most


def test_group_reads_counts_b_rows_read_by_row_groups():
    # block diagonal: each of 8 row groups reads its own B rows once
    A = np.kron(np.eye(8), np.ones((3, 2)))
    assert analyse(A).group_reads == 1.0
    # every row reads every column: 8 groups read each B row 8 times
    assert analyse(np.ones((16, 5))).group_reads == 8.0
    # fewer rows than groups: one group a row
    assert analyse(np.ones((3, 4))).group_reads == 3.0


def test_sparse_gemm_worth_it_needs_both_non_zeros_and_density():
    """At the thresholds, not below either of them."""
    side = 400
    nnz = max(SPARSE_GEMM_MIN_NNZ, int(SPARSE_GEMM_MIN_DENSITY*side*side))
    A = np.zeros((side, side))
    A.reshape(-1)[:nnz] = 1.0
    assert sparse_gemm_worth_it(analyse(A))
    A.reshape(-1)[nnz - 1] = 0.0                   # one non-zero too few
    assert not sparse_gemm_worth_it(analyse(A))
    wide = np.zeros((64, 4*SPARSE_GEMM_MIN_NNZ))   # enough non-zeros, thin
    wide.reshape(-1)[:SPARSE_GEMM_MIN_NNZ] = 1.0
    assert analyse(wide).density < SPARSE_GEMM_MIN_DENSITY
    assert not sparse_gemm_worth_it(analyse(wide))


def _blocks(rng, nb, bm, bk):
    """nb dense blocks of bm x bk on the diagonal, rows and columns
    shuffled, and a zero column."""
    A = np.zeros((nb*bm, nb*bk + 1))
    for b in range(nb):
        A[b*bm:(b + 1)*bm, b*bk:(b + 1)*bk] = rng.standard_normal((bm, bk))
    return A[rng.permutation(nb*bm)][:, rng.permutation(nb*bk + 1)]


def test_live_slabs_against_brute_force(rng):
    S = rng.random((37, 21)) < 0.05
    got = live_slabs(S, 8, 4)
    assert got.shape == (5, 6)
    for i in range(5):
        for j in range(6):
            assert got[i, j] == S[8*i:8*i + 8, 4*j:4*j + 4].any()


def test_slab_order_gathers_shuffled_blocks(rng):
    """Shuffled diagonal blocks: the order is a permutation of every row
    and of the used columns, A in it has as few live slabs as the blocks
    allow (one m-block's 16 rows of 2 blocks x 8 columns: 2 k-slabs),
    and it is deterministic."""
    A = _blocks(rng, 8, 8, 8)
    order = slab_order(A, 16, 8)
    assert sorted(order.rows) == list(range(64))
    used = np.flatnonzero((A != 0).any(axis=0))
    assert sorted(order.cols) == list(used)
    R = A[list(order.rows)][:, list(order.cols)]
    assert order.live == live_slabs(R != 0, 16, 8).sum()
    assert order.natural == live_slabs(A != 0, 16, 8).sum()
    assert order.live == 8 < order.natural
    assert slab_order(A, 16, 8) == order


def test_slab_order_none_where_a_is_already_in_blocks(rng):
    A = np.kron(np.eye(4), rng.standard_normal((16, 8)))
    assert slab_order(A, 16, 8) is None
    assert slab_order(np.zeros((20, 9)), 16, 8) is None


def test_slab_order_drops_zero_columns():
    """Two non-zeros 13 columns apart: one k-slab once the zero columns
    between them go."""
    A = np.zeros((70, 30))
    A[5, 7], A[60, 20] = 1.0, 2.0
    order = slab_order(A, 64, 8)
    assert sorted(order.cols) == [7, 20]
    assert (order.live, order.natural) == (1, 2)


def test_sparse_gemm_worth_it_for_fewer_non_zeros_where_reordered(rng):
    """Between the two non-zero bounds the GEMM is worth it where A's rows
    and columns reorder into few live slabs, not where they stay
    scattered."""
    blocks = _blocks(rng, 8, 40, 9)               # 2880 non-zeros
    info = analyse(blocks)
    assert info.nnz < SPARSE_GEMM_MIN_NNZ
    assert info.slab_live <= 0.5 and sparse_gemm_worth_it(info)
    scattered = np.where(rng.random(blocks.shape) < info.density, 1.0, 0.0)
    info = analyse(scattered)
    assert info.slab_live > SPARSE_GEMM_MAX_LIVE
    assert not sparse_gemm_worth_it(info)
    assert analyse(np.eye(8)).slab_live is None


def test_useful_slab_order_and_reordered(rng, monkeypatch):
    # shuffled blocks: an order with far fewer live slabs, A in it exact
    A = np.kron(np.eye(4), rng.standard_normal((16, 8)))
    A = A[rng.permutation(64)][:, rng.permutation(32)]
    order = useful_slab_order(A, 16, 8)
    assert order is not None and order.live <= 0.5*order.natural
    R = reordered(A, order.rows, order.cols)
    assert R.shape == (64, 32)
    assert np.array_equal(R, A[list(order.rows)][:, list(order.cols)])
    assert live_slabs(R != 0, 16, 8).sum() == order.live
    # an order keeping more than REORDER_MAX_LIVE of A's live slabs is
    # none
    bound = order.live / order.natural
    monkeypatch.setattr(analysis, 'REORDER_MAX_LIVE', 0.99*bound)
    assert useful_slab_order(A, 16, 8) is None
    monkeypatch.setattr(analysis, 'REORDER_MAX_LIVE', bound)
    assert useful_slab_order(A, 16, 8) == order


def _b_reads(A, groups):
    # B rows the row groups read in all
    return sum(int((A[list(g)] != 0).any(axis=0).sum()) for g in groups)


@pytest.mark.parametrize('budget', [1, 4, 16, 40])
def test_shared_row_groups_partition_within_budget(rng, budget):
    """Every row (the zero ones too) in exactly one group, rows ascending,
    groups by first row; a group over the budget is one support alone."""
    A = random_operator(rng, 60, 30, 0.1)
    A[[5, 17]] = 0
    groups = shared_row_groups(A, budget)
    assert sorted(i for g in groups for i in g) == list(range(60))
    assert all(list(g) == sorted(g) for g in groups)
    assert [g[0] for g in groups] == sorted(g[0] for g in groups)
    S = A != 0
    for g in groups:
        live = [i for i in g if S[i].any()]
        if S[live].any(axis=0).sum() > budget:
            assert len({S[i].tobytes() for i in live}) == 1
    assert shared_row_groups(A, budget) == groups


def test_shared_row_groups_keep_planes_of_a_gradient(rng):
    """Tensor-product gradient at 4**3 points, 16 B rows a group: the
    groups are planes of points or better (each B row read at most twice:
    with the x and y derivatives of its z-plane, with the z derivatives of
    its y-plane), where contiguous groups as many read over 2.5 times as
    often."""
    A = gradient_like(rng, 4)
    groups = shared_row_groups(A, 16)
    used = int((A != 0).any(axis=0).sum())
    assert _b_reads(A, groups) <= 2*used
    contiguous = [range(r0, r1) for r0, r1 in
                  analysis.balanced_row_groups(A, len(groups))]
    assert _b_reads(A, contiguous) >= 2.5*_b_reads(A, groups)
    # identical supports stay together: a line's derivatives
    S = A != 0
    where = {i: n for n, g in enumerate(groups) for i in g}
    for i in range(A.shape[0]):
        for j in range(i):
            if (S[i] == S[j]).all():
                assert where[i] == where[j]


def test_shared_row_groups_bad_budget_and_zero_operator():
    with pytest.raises(ValueError, match='budget'):
        shared_row_groups(np.ones((3, 3)), 0)
    assert shared_row_groups(np.zeros((4, 3)), 8) == ((0, 1, 2, 3),)


def _block_unions(A, rows, size):
    S = np.asarray(A)[list(rows)] != 0
    return [int(S[i:i + size].any(axis=0).sum())
            for i in range(0, len(rows), size)]


def test_union_row_blocks_every_row_once_and_deterministic(rng):
    A = random_operator(rng, 53, 30, 0.2)
    A[7] = 0.0
    rows = analysis.union_row_blocks(A, 8)
    assert sorted(rows) == list(range(53))
    assert analysis.union_row_blocks(A.copy(), 8) == rows
    with pytest.raises(ValueError, match='size'):
        analysis.union_row_blocks(A, 0)


def test_union_row_blocks_gathers_rows_sharing_columns(rng):
    """Rows of a block-diagonal pattern, shuffled, come back a block of
    rows at a time: each block's union is one diagonal block's columns
    (contiguous blocks of the shuffled order use many more)."""
    A = np.zeros((48, 36))
    for b in range(6):
        A[8*b:8*(b + 1), 6*b:6*(b + 1)] = rng.standard_normal((8, 6))
    A = A[rng.permutation(48)]
    rows = analysis.union_row_blocks(A, 8)
    assert _block_unions(A, rows, 8) == [6]*6
    assert sum(_block_unions(A, range(48), 8)) > 2*36


def test_union_row_blocks_on_a_gradient(rng):
    """A tensor-product gradient: blocks of 25 rows use fewer columns in
    all than contiguous blocks of its own order."""
    A = gradient_like(rng, 5)
    rows = analysis.union_row_blocks(A, 25)
    assert sum(_block_unions(A, rows, 25)) < \
        0.7*sum(_block_unions(A, range(A.shape[0]), 25))


def test_compact_blocks_each_block_its_own_columns():
    A = np.zeros((5, 6))
    A[0, [1, 4]] = 1.0
    A[1, 4] = 2.0
    A[2, [0, 5]] = 3.0
    A[4, 2] = 4.0
    bcols, Ac = analysis.compact_blocks(A, (2, 0, 1, 3, 4), 2, 2)
    # blocks: rows (2, 0), (1, 3), (4,): their used columns, -1 past them
    assert bcols.tolist() == [[0, 1, 4, 5], [4, -1, -1, -1],
                              [2, -1, -1, -1]]
    assert Ac[0].tolist() == [[3, 0, 0, 3], [0, 1, 1, 0]]
    assert Ac[1].tolist() == [[2, 0, 0, 0], [0, 0, 0, 0]]
    assert Ac[2].tolist() == [[4, 0, 0, 0], [0, 0, 0, 0]]
    assert analysis.compact_counts(bcols, 2).tolist() == [2, 1, 1]
    assert analysis.compact_stages(bcols, 2) == 2 + 1 + 1
    # the B rows a model of the kernel reads: zero rows at -1, padded
    B = np.arange(12.0).reshape(6, 2) + 1
    rows = analysis.compact_b_rows(B, bcols, 3)
    assert rows[0].tolist() == [[1, 2, 0], [3, 4, 0], [9, 10, 0],
                                [11, 12, 0]]
    assert rows[1].tolist() == [[9, 10, 0]] + [[0, 0, 0]]*3


def test_compact_worth_it_where_blocks_use_few_columns(rng):
    """A prism-like gradient: its m-blocks over their own columns run
    under 0.9 of the live slabs of any one column order; a shuffled
    block-diagonal pattern, which one order gathers whole, not."""
    from conftest import kron_like, prism_like
    A = prism_like(rng)
    rows, bcols, Ac, stages = analysis.compact_order(A, 64, 8)
    assert sorted(rows) == list(range(A.shape[0]))
    assert stages <= analysis.COMPACT_MAX_STAGES*useful_slab_order(
        A, 64, 8).live
    assert analysis.compact_worth_it(A, 64, 8)
    assert not analysis.compact_worth_it(kron_like(rng), 64, 8)


def _reads(A, groups):
    S = np.asarray(A) != 0
    return sum(int(S[list(g)].any(axis=0).sum()) for g in groups)


def test_partition_rows_every_row_once_bounded_and_deterministic(rng):
    """Every row once (zero rows too), groups in order of first row, each
    within PARTITION_MAX_SHARE of its share of the rows and at least half
    of it; the same groups for the same pattern; fewer groups than asked
    where A has fewer rows; parts < 1 refused."""
    A = random_operator(rng, 90, 60, 0.1)
    A[[3, 50]] = 0.0
    groups = analysis.partition_rows(A, 7)
    assert len(groups) == 7
    assert sorted(i for g in groups for i in g) == list(range(90))
    assert all(list(g) == sorted(g) for g in groups)
    assert [g[0] for g in groups] == sorted(g[0] for g in groups)
    share = 90 / 7
    assert all(share // 2 <= len(g)
               <= np.ceil(analysis.PARTITION_MAX_SHARE*share)
               for g in groups)
    assert analysis.partition_rows(2.0*A, 7) == groups
    assert len(analysis.partition_rows(A[:5], 8)) == 5
    with pytest.raises(ValueError, match='parts'):
        analysis.partition_rows(A, 0)


def test_partition_rows_finds_shuffled_blocks(rng):
    """Rows of a block-diagonal pattern, shuffled: the groups are the
    diagonal blocks (each used column read by one group)."""
    A = np.zeros((48, 36))
    for b in range(6):
        A[8*b:8*(b + 1), 6*b:6*(b + 1)] = rng.standard_normal((8, 6))
    A = A[rng.permutation(48)]
    assert _reads(A, analysis.partition_rows(A, 6)) == 36


def test_partition_rows_cuts_a_divergence_between_planes(rng):
    """The transpose of a tensor-product gradient on 4**3 points (row i
    sums the derivatives along the three lines through point i): 8 groups
    of 2 x 2 x 2 points read each used column twice, the fewest any 8
    groups can; union_row_blocks' blocks and contiguous groups as many
    read more."""
    A = np.ascontiguousarray(gradient_like(rng, 4).T)
    groups = analysis.partition_rows(A, 8)
    assert sorted(map(len, groups)) == [8]*8
    assert _reads(A, groups) == 2*A.shape[1]
    assert _reads(A, groups) < _reads(A, [analysis.union_row_blocks(A, 8)[
        i:i + 8] for i in range(0, 64, 8)])
    assert _reads(A, groups) < _reads(
        A, [range(a, b) for a, b in analysis.balanced_row_groups(A, 8)])
