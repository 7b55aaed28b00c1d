"""The tiling of A and the fragment bakes, checked with NumPy models of the
instructions (no GPU, no compiler): AMD's MFMA f64 16x16x4
(gimmik.fragments.mfma) and NVIDIA's f64 mma.sync shapes m8n8k4 and
m16n8k4/k8/k16 (gimmik.fragments.mma)."""

import numpy as np
import pytest

from conftest import random_operator, rel_error
from gimmik.fragments.mfma import (MAX_CHUNK_KTILES, MFMA_K, MFMA_M, WAVE,
                                   b_fragment, bake_mfma, index_expr,
                                   lane_coords, mfma_count, mfma_f64_16x16x4,
                                   mfma_plan, model_product, tile_operator)
from gimmik.fragments.mfma import c_runs as mfma_c_runs
from gimmik.fragments.mma import (GEMM_SHAPES, MMA_N, gemm_b_offset,
                                  gemm_b_read, gemm_c_pairs, gemm_coords,
                                  gemm_compact_stages, gemm_model,
                                  gemm_ntile, gemm_plan, gemm_reference)
from gimmik.verify import reference


def test_mfma_model_matches_facts_layout():
    # Small integers: every partial sum is exact.  Lane L = 16g + t
    # supplies A[t][g] and B[g][t]; element v of lane L is D[4v + g][t].
    rng = np.random.default_rng(1)
    Am = rng.integers(-8, 9, (16, 4)).astype(float)
    Bm = rng.integers(-8, 9, (4, 16)).astype(float)
    Cm = rng.integers(-8, 9, (16, 16)).astype(float)
    a = np.array([Am[L % 16, L // 16] for L in range(WAVE)])
    b = np.array([Bm[L // 16, L % 16] for L in range(WAVE)])
    c = np.array([[Cm[4*v + L // 16, L % 16] for v in range(4)]
                  for L in range(WAVE)])
    d = mfma_f64_16x16x4(a, b, c)
    D = Am @ Bm + Cm
    for L in range(WAVE):
        for v in range(4):
            assert d[L, v] == D[4*v + L // 16, L % 16]


def test_tiling_compacts_pads_and_masks():
    A = np.zeros((20, 11))
    A[0, 1] = 1.0           # k-tile 0, m-tile 0
    A[19, 10] = 2.0         # last row, last column
    A[3, 7] = 3.0
    tl = tile_operator(A)
    assert tl.kcols == (1, 7, 10, -1)           # columns 0, 2-6, 8, 9 unused
    assert tl.m_tiles == 2 and tl.k_tiles == 3 and tl.active_k_tiles == 1
    assert tl.Apad.shape == (32, 4)
    assert np.array_equal(tl.Apad[:20, :3], A[:, [1, 7, 10]])
    assert not tl.Apad[20:].any() and not tl.Apad[:, 3].any()
    assert tl.nonzero.tolist() == [[True], [True]]
    assert tl.ktile_rows(0) == (1, 7, 10, -1)


def test_zero_tile_mask():
    A = np.ones((32, 8))
    A[16:, :4] = 0
    tl = tile_operator(A)
    assert tl.nonzero.tolist() == [[True, True], [False, True]]
    bake = bake_mfma(tl)
    assert bake.index.tolist() == [[0, 1], [-1, 2]]
    assert bake.tiles == [(0, 0), (0, 1), (1, 1)]
    assert mfma_count(A) == 4*3


def test_bake_lane_layout():
    rng = np.random.default_rng(2)
    A = random_operator(rng, 37, 23, 0.8)
    bake = bake_mfma(A)
    tl = bake.tiling
    g, t = lane_coords()
    for s, (mt, kt) in enumerate(bake.tiles):
        for L in range(WAVE):
            j = tl.kcols[MFMA_K*kt + g[L]]
            want = A[MFMA_M*mt + t[L], j] if j >= 0 and \
                MFMA_M*mt + t[L] < 37 else 0.0
            assert bake.frags[s, L] == want


@pytest.mark.parametrize('shape,density', [((16, 4), 1.0), ((37, 23), 0.9),
                                           ((9, 6), 1.0), ((60, 41), 0.5),
                                           ((5, 70), 0.2)])
def test_model_product_reproduces_AB(rng, shape, density):
    A = random_operator(rng, *shape, density)
    A[:, shape[1] // 2] = 0         # an unused column: compaction
    if not A.any():
        A[0, 0] = 1.0
    B = rng.standard_normal((shape[1], 48))
    B[shape[1] // 2] = np.nan       # never read
    C = model_product(bake_mfma(A), B)
    assert rel_error(C, *reference(A, np.nan_to_num(B))) <= 1e-13


def test_misbaked_fragment_is_caught(rng):
    A = random_operator(rng, 32, 16, 1.0)
    B = rng.standard_normal((16, 32))
    bake = bake_mfma(A)
    assert rel_error(model_product(bake, B), *reference(A, B)) <= 1e-13
    bake.frags[3, [5, 21]] = bake.frags[3, [21, 5]]     # two lanes swapped
    assert rel_error(model_product(bake, B), A @ B) > 1e-6


def test_b_fragment_pads_with_zeros():
    A = np.ones((16, 3))
    tl = tile_operator(A)
    B = np.arange(3*16, dtype=float).reshape(3, 16)
    frag = b_fragment(tl, 0, B, np.arange(16))
    assert np.array_equal(frag[:48], B.ravel()) and not frag[48:].any()


@pytest.mark.parametrize('msplit', [1, 2, 3, 4])
@pytest.mark.parametrize('vec', [1, 2])
def test_plan_covers_every_tile_once(rng, msplit, vec):
    A = random_operator(rng, 70, 90, 0.7)
    A[16:32, :8] = 0
    bake = bake_mfma(A)
    tl = bake.tiling
    plan = mfma_plan(bake, msplit, kchunk=5, vec=vec, nbuf=2)
    per = -(-tl.m_tiles // msplit)
    assert plan.per == per
    assert plan.groups[0] == (0, per)
    # every non-zero tile in exactly one (wavefront, slot), every other
    # wavefront/slot fragment zero
    seen = np.zeros(len(bake.tiles), int)
    kts = []
    for q, items in enumerate(plan.work):
        for kt, ts in items:
            assert kt in plan.chunks[q]
            kts.append(kt)
            for i, slot in ts:
                for y in range(msplit):
                    mt = y*per + i
                    s = bake.index[mt, kt] if mt < tl.m_tiles else -1
                    if s >= 0:
                        seen[s] += 1
                        assert np.array_equal(plan.frags[y, slot],
                                              bake.frags[s])
                    else:
                        assert not plan.frags[y, slot].any()
    assert (seen == 1).all()
    assert sorted(kts) == sorted(set(kts)) == list(range(tl.active_k_tiles))
    assert plan.mfma_count == mfma_count(bake, msplit)
    if msplit == 1:
        assert not plan.lds and plan.lds_bytes == 0
        assert plan.mfma_count == 4*len(bake.tiles)
        return
    # LDS staging: chunks of at most kchunk k-tiles, every row slot of a
    # chunk loaded exactly once, by some wavefront, with the right B row
    assert max(len(c) for c in plan.chunks) <= 5
    # (wavefront y's slot s is load y + s*msplit of the chunk: one code for
    # every wavefront, only the last slot with fewer of them)
    for q, ch in enumerate(plan.chunks):
        rows = [r for kt in ch for r in tl.ktile_rows(kt)]
        got = {}
        for s, slot in enumerate(plan.stage[q]):
            assert 1 <= len(slot) <= msplit
            assert len(slot) == msplit or s == len(plan.stage[q]) - 1
            for y, (s0, rs) in enumerate(slot):
                assert s0 == vec*(y + s*msplit) and len(rs) == vec
                for d, r in enumerate(rs):
                    assert s0 + d not in got
                    got[s0 + d] = r
        assert got == dict(enumerate(rows))
    assert plan.lds_bytes == 2*MFMA_K*5*WAVE*8


def _newest_waits(steps):
    """The steps that wait for the newest global load issued before them
    (a full wait): each load step ('a', 'b', 's', 'l') is a batch; an MFMA
    step waits for its fragments and (direct) B, an LDS write for its
    chunk's loads, C's final values for their run's loads."""
    issued, full = [], []
    for st in steps:
        kind = st[0]
        if kind in 'abls':
            if kind == 'a' and not st[2]:
                continue
            issued.append((kind,) + tuple(st[1:2]))
            continue
        if kind == 'm':
            need = [('a', st[1]), ('b', st[1])]
        elif kind == 'w':
            need = [('s', st[1])]
        elif kind == 'f':
            need = [('l', st[1])]
        else:
            continue
        if issued and issued[-1] in need:
            full.append(st)
    return full


@pytest.mark.parametrize('msplit,pipe,nbuf,kchunk', [
    (1, 0, 1, 1), (1, 1, 1, 1), (2, 0, 1, 8), (3, 1, 2, 4), (4, 2, 2, 4),
    (2, 1, 2, 2), (3, 0, 1, 1)])
def test_steps_wait_for_the_newest_load_once(rng, msplit, pipe, nbuf, kchunk):
    # every MFMA, LDS write and C run leaves a load in flight but the last
    A = random_operator(rng, 70, 45, 0.9)
    plan = mfma_plan(A, msplit, kchunk=kchunk, vec=2, nbuf=nbuf, pipe=pipe)
    steps = plan.steps
    assert _newest_waits(steps) == [('f', len(plan.crun) - 1)]
    # each fragment slot loaded once, before its MFMAs; every k-tile's
    # MFMAs once, in order; C's runs loaded before their final values
    loaded = [s for st in steps if st[0] == 'a' for s in st[2]]
    assert sorted(loaded) == list(range(plan.nslots))
    ms = [st[1] for st in steps if st[0] == 'm']
    assert ms == [kt for items in plan.work for kt, _ in items]
    slots = {kt: [s for _, s in ts] for items in plan.work for kt, ts in items}
    for j, st in enumerate(steps):
        if st[0] == 'm':
            before = {s for s2 in steps[:j] if s2[0] == 'a' for s in s2[2]}
            assert set(slots[st[1]]) <= before
            if msplit == 1:
                assert ('b', st[1]) in steps[:j]
            else:
                assert ('r', st[1], plan.chunk_of(st[1]) % nbuf) in steps[:j]
    ls = [st[1] for st in steps if st[0] == 'l']
    fs = [st[1] for st in steps if st[0] == 'f']
    assert ls == fs == list(range(len(plan.crun)))
    assert all(steps.index(('l', r)) < steps.index(('f', r)) for r in ls)
    for q in range(len(plan.chunks) if msplit > 1 else 0):
        # chunk q is loaded, written, and read after a barrier
        w = next(j for j, st in enumerate(steps) if st[:2] == ('w', q))
        r = next(j for j, st in enumerate(steps)
                 if st[0] == 'r' and plan.chunk_of(st[1]) == q)
        assert steps.index(('s', q)) < w < r
        assert ('sync',) in steps[w:r]
    # the check can fail: the MFMAs of the first k-tile right after its
    # fragments wait for all of them
    bad = [st for st in steps if st[0] != 'a' or st[1] != ms[0]]
    bad.insert(bad.index(('m', ms[0])), ('a', ms[0], tuple(slots[ms[0]])))
    assert ('m', ms[0]) in _newest_waits(bad)


def test_c_runs_cover_the_rows_of_a_wavefront():
    for m, per in ((6, 1), (16, 1), (35, 3), (42, 1), (60, 4)):
        runs = mfma_c_runs(m, per, 2)
        rows = [(i, v) for run in runs for i, v in run]
        assert rows == [(i, v) for i in range(per) for v in range(4)
                        if 16*i + 4*v < m]
        assert all(1 <= len(r) <= 2 for r in runs)


@pytest.mark.parametrize('values,vmax,offset', [
    ((3, 4, 5, 6), 3, 0), ((3, 4, 5), 3, 0), ((7, 2, 9, 4), 3, 0),
    ((0, 1, 2, 3, 4, 5), 3, 4), ((5, 1, 8, 2, 6, 0, 3), 7, 2),
    ((2, 3, 4, 5, 6, 7, 8), 7, 0), ((4,), 3, 0)])
def test_index_expr(values, vmax, offset):
    expr = index_expr(values, 'x', vmax, offset)
    for x in range(vmax + 1):
        got = _c_eval(expr, x)
        assert got == values[min(x + offset, len(values) - 1)], (expr, x)


def _c_eval(expr, x):
    """Evaluate a C expression of ints, ==, <, + and ?: (right
    associative) at x."""
    import re
    toks = re.findall(r'\d+|==|[<+?:()x]', expr)
    pos = 0

    def peek():
        return toks[pos] if pos < len(toks) else None

    def take():
        nonlocal pos
        pos += 1
        return toks[pos - 1]

    def atom():
        t = take()
        if t == '(':
            v = cond()
            take()
            return v
        return x if t == 'x' else int(t)

    def add():
        v = atom()
        while peek() == '+':
            take()
            v += atom()
        return v

    def cmp():
        v = add()
        if peek() in ('==', '<'):
            op = take()
            w = add()
            v = (v == w) if op == '==' else (v < w)
        return v

    def cond():
        c = cmp()
        if peek() == '?':
            take()
            a = cond()
            take()
            b = cond()
            return a if c else b
        return c

    return cond()


def test_lds_bounded_whatever_k():
    A = np.ones((64, 420))
    for nbuf, kchunk in ((1, MAX_CHUNK_KTILES), (2, 4)):
        plan = mfma_plan(A, 4, kchunk=kchunk, nbuf=nbuf)
        assert plan.lds_bytes <= 16*1024
    with pytest.raises(ValueError, match='kchunk'):
        mfma_plan(A, 4, kchunk=MAX_CHUNK_KTILES + 1)
    with pytest.raises(ValueError, match='msplit'):
        mfma_plan(np.ones((16, 4)), 2)


# == NVIDIA f64 mma.sync ==================================================
# -- mma-gemm: the fragment layouts and the bake ---------------------------
@pytest.mark.parametrize('shape', sorted(GEMM_SHAPES))
def test_gemm_coords_cover_each_element_once(shape):
    """Every element of the A (MT x KT), B (KT x NT) and C (MT x NT) tiles
    is held by exactly one (lane, value); NT = 8, 16 for transposed
    shapes."""
    mt, kt = GEMM_SHAPES[shape]
    nt = gemm_ntile(shape)
    assert nt == (16 if shape.endswith('t') else 8)
    for rc, dims in zip(gemm_coords(shape), ((mt, kt), (kt, nt), (mt, nt))):
        seen = np.zeros(dims, int)
        np.add.at(seen, (rc[..., 0], rc[..., 1]), 1)
        assert (seen == 1).all()


def test_gemm_coords_are_the_ptx_layout():
    """Spot checks written out from the PTX ISA tables (.f64), g = lane/4,
    t = lane%4: m16n8k8 a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4);
    b0 (t, g), b1 (t+4, g); c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t);
    m16n8k16 a5 (g+8, t+8), b3 (t+12, g)."""
    a, b, c = gemm_coords('m16n8k8')
    lane = 13                      # g = 3, t = 1
    assert [tuple(x) for x in a[lane]] == [(3, 1), (11, 1), (3, 5), (11, 5)]
    assert [tuple(x) for x in b[lane]] == [(1, 3), (5, 3)]
    assert [tuple(x) for x in c[lane]] == [(3, 2), (3, 3), (11, 2), (11, 3)]
    a, b, _ = gemm_coords('m16n8k16')
    assert tuple(a[lane, 5]) == (11, 9) and tuple(b[lane, 3]) == (13, 3)
    a, b, _ = gemm_coords('m16n8k4')
    assert [tuple(x) for x in a[lane]] == [(3, 1), (11, 1)]


def test_gemm_transposed_coords_swap_the_operands():
    """A transposed shape's A values are the PTX B operand of the same
    instruction read as A's tile transposed, its B values the PTX A
    operand read as B's tile transposed, its C the D fragment transposed."""
    for k in (4, 8, 16):
        a, b, c = gemm_coords(f'm16n8k{k}')
        at, bt, ct = gemm_coords(f'm16n8k{k}t')
        assert (at == b[..., ::-1]).all() and (bt == a[..., ::-1]).all()
        assert (ct == c[..., ::-1]).all()


def test_gemm_model_m8n8k4_is_the_ptx_layout(rng):
    """A: lane l holds A[l/4][l%4]; B: B[l%4][l/4]; C/D: C[l/4][2(l%4) + i]
    (PTX ISA, mma.m8n8k4 .f64 fragments)."""
    a = rng.standard_normal((8, 4))
    b = rng.standard_normal((4, MMA_N))
    c = rng.standard_normal((8, MMA_N))
    lanes = np.arange(32)
    afrag = np.array([[a[l // 4, l % 4]] for l in lanes])
    bfrag = np.array([[b[l % 4, l // 4]] for l in lanes])
    cfrag = np.array([[c[l // 4, 2*(l % 4) + i] for i in (0, 1)]
                      for l in lanes])
    d = a @ b + c
    want = np.array([[d[l // 4, 2*(l % 4) + i] for i in (0, 1)]
                     for l in lanes])
    np.testing.assert_allclose(gemm_model('m8n8k4', afrag, bfrag, cfrag),
                               want, rtol=1e-14, atol=1e-14)


GEMM_GEOMS = [dict(mwarps=1, nwarps=1, wm=1, wn=2, kstage=1, nbuf=2),
              dict(mwarps=2, nwarps=2, wm=2, wn=2, kstage=2, nbuf=3),
              dict(mwarps=2, nwarps=1, wm=3, wn=4, kstage=1, nbuf=4),
              dict(mwarps=3, nwarps=2, wm=1, wn=8, kstage=2, nbuf=2)]


@pytest.mark.parametrize('shape', ['m16n8k4t', 'm16n8k8'])
def test_gemm_reordered_plan_reproduces_product(rng, shape):
    """reorder: the plan runs A with its rows and used columns in
    gemm_order's order, fewer live stages than A's own, and the product
    (rows scattered back) is A @ B."""
    A = np.zeros((96, 50))
    for b in range(6):
        A[16*b:16*(b + 1), 8*b:8*(b + 1)] = rng.standard_normal((16, 8))
    A = A[rng.permutation(96)][:, rng.permutation(50)]
    geom = dict(mwarps=2, nwarps=2, wm=2, wn=2, kstage=1, nbuf=3)
    plain = gemm_plan(A, shape, skip=True, **geom)
    plan = gemm_plan(A, shape, skip=True, reorder=True, **geom)
    assert sorted(plan.rows) == list(range(96)) and len(plan.cols) == 48
    assert plan.cnt.sum() < plain.cnt.sum()
    B = rng.standard_normal((50, plan.BN + 5))
    ref = A @ B
    err = np.abs(gemm_reference(plan, A, B) - ref).max() / np.abs(ref).max()
    assert err <= 1e-13
    # an order keeping more than analysis.REORDER_MAX_LIVE: A's own
    assert gemm_plan(np.ones((96, 50)), shape, reorder=True,
                     **geom).rows is None


@pytest.mark.parametrize('shape', ['m16n8k4t', 'm16n8k8', 'm8n8k4'])
def test_gemm_compact_plan_reproduces_product(rng, shape):
    """compact: each m-block runs only its own used columns (bcols, -1
    past them, the A values there zero), fewer stages than the reordered
    plan on a gradient, and the product (rows scattered back) is A @ B
    for B of a ragged width."""
    from conftest import gradient_like
    A = gradient_like(rng, 5)
    geom = dict(mwarps=2, nwarps=2, wm=2, wn=2, kstage=2, nbuf=3)
    plan = gemm_plan(A, shape, compact=True, **geom)
    reord = gemm_plan(A, shape, skip=True, reorder=True, **geom)
    assert sorted(plan.rows) == list(range(A.shape[0])) and plan.cols is None
    assert plan.cnt.sum() < reord.cnt.sum()
    assert plan.cnt.sum() == gemm_compact_stages(A, shape, **geom)
    Ar = A[list(plan.rows)]
    for mb in range(plan.nmb):
        used = plan.bcols[mb][plan.bcols[mb] >= 0]
        blk = Ar[mb*plan.BM:(mb + 1)*plan.BM]
        assert list(used) == list(np.flatnonzero((blk != 0).any(axis=0)))
        assert plan.cnt[mb] == -(-len(used) // plan.BK)
    B = rng.standard_normal((A.shape[1], plan.BN + 5))
    ref = A @ B
    err = np.abs(gemm_reference(plan, A, B) - ref).max() / np.abs(ref).max()
    assert err <= 1e-13


@pytest.mark.parametrize('shape', sorted(GEMM_SHAPES))
@pytest.mark.parametrize('geom', GEMM_GEOMS)
@pytest.mark.parametrize('mk', [(37, 45), (70, 24), (9, 130)])
@pytest.mark.parametrize('skip', [False, True])
def test_gemm_bake_reproduces_product(rng, shape, geom, mk, skip):
    """The kernel's sequence of mmas, replayed on the baked table and B
    with the NumPy model, gives A @ B for ragged m, k and n; with skip the
    zero slabs of A are left out and the result is the same."""
    m, k = mk
    A = random_operator(rng, m, k, density=0.9)
    A[:m // 2, k // 3:] = 0.0      # zero slabs for the upper m-blocks
    A[-1, 0] = 0.5
    plan = gemm_plan(A, shape, skip=skip, **geom)
    n = plan.BN + 3                # a ragged second column block
    B = rng.standard_normal((k, n))
    ref = A @ B
    err = np.abs(gemm_reference(plan, A, B) - ref).max() / np.abs(ref).max()
    assert err <= 1e-13
    assert plan.table.size == plan.nmb*plan.nslots*plan.BM*plan.BK
    assert plan.nmb*plan.BM >= m and plan.nstages*plan.BK >= k
    assert (plan.nmb - 1)*plan.BM < m
    if not skip:
        assert plan.full and (plan.cnt == plan.nstages).all()
    for mb in range(plan.nmb):     # live stages: increasing, in range
        ks = plan.kidx[mb, :plan.cnt[mb]]
        assert (np.diff(ks) > 0).all() and (ks < plan.nstages).all()


def test_gemm_skip_leaves_out_zero_slabs():
    A = np.zeros((64, 64))
    A[:16, :8] = 1.0               # m-block 0, stage 0 only
    A[40:, 50:] = 2.0              # m-block 1, the last stages
    plan = gemm_plan(A, 'm16n8k8', mwarps=2, nwarps=1, wm=1, wn=2,
                     kstage=1, nbuf=2, skip=True)
    assert plan.nmb == 2 and plan.nstages == 8
    assert plan.cnt.tolist() == [1, 2]
    assert plan.kidx[0, 0] == 0 and plan.kidx[1].tolist() == [6, 7]
    assert not plan.full and plan.nslots == 2


@pytest.mark.parametrize('shape', ['m8n8k4', 'm16n8k8', 'm16n8k16'])
def test_gemm_bake_catches_a_wrong_layout(rng, shape):
    """The model test can fail: A fragments baked with another lane
    mapping (lanes transposed within a fragment, or the values of a lane
    out of order) give a wrong C."""
    A = rng.standard_normal((32, 32))
    geom = dict(mwarps=2, nwarps=1, wm=1, wn=2, kstage=1, nbuf=2)
    B = rng.standard_normal((32, 8))
    plan = gemm_plan(A, shape, **geom)
    assert np.abs(gemm_reference(plan, A, B) - A @ B).max() < 1e-12
    lanes = np.arange(32)
    wrong = (lanes % 4)*8 + lanes // 4
    bad = gemm_plan(A, shape, **geom)
    t = bad.table.reshape(-1, 32, bad.a_vec)
    bad.table = t[:, wrong].reshape(-1)
    assert np.abs(gemm_reference(bad, A, B) - A @ B).max() > 1e-3
    if bad.a_vec == 2:
        bad = gemm_plan(A, shape, **geom)
        bad.table = bad.table.reshape(-1, 2)[:, ::-1].reshape(-1)
        assert np.abs(gemm_reference(bad, A, B) - A @ B).max() > 1e-3


@pytest.mark.parametrize('wn,nwarps', [(4, 1), (4, 2), (8, 2), (4, 3),
                                       (2, 2)])
def test_gemm_b_stage_layout(wn, nwarps):
    """B's shared layout (gemm_b_offset, gemm_b_read): every element of a
    stage has its own place, the 16-byte chunks of a 128-byte line of B
    stay in one 128-byte line with sector pairs adjacent (the cp.async
    writes); lane (g, t)'s v-th vector read finds row t and the columns of
    n-tiles 2v, 2v + 1 at MMA column g (GemmPlan.column); each 8-lane
    phase of a read hits 8 distinct 16-byte bank groups."""
    BN, BK = MMA_N*nwarps*wn, 8
    rows, cols = np.meshgrid(np.arange(BK), np.arange(BN), indexing='ij')
    off = gemm_b_offset(BN, rows, cols)
    assert sorted(off.ravel()) == list(range(BK*BN))
    assert (off[:, 1::2] == off[:, ::2] + 1).all()          # 2 columns
    line = off[:, ::2].reshape(BK, -1, 8) // 16              # 8 chunks
    assert (line == line[..., :1]).all()
    assert (off[:, ::4] % 4 == 0).all()                      # sectors
    plan = gemm_plan(np.ones((16, 8)), 'm16n8k8', mwarps=1, nwarps=nwarps,
                     wm=1, wn=wn, kstage=1, nbuf=2)
    where = {int(o): (int(r), int(c)) for o, r, c in
             zip(off.ravel(), rows.ravel(), cols.ravel())}
    lane = np.arange(32)
    g, t = lane // 4, lane % 4
    for wx in range(nwarps):
        for v in range(wn // 2):
            read = np.array([gemm_b_read(BN, wn, wx, int(g[l]), int(t[l]), v)
                             for l in range(32)])
            assert (read % 2 == 0).all()
            for l in range(32):
                for d in (0, 1):
                    assert where[int(read[l]) + d] == (
                        t[l], plan.column(wx, 2*v + d, g[l]))
            groups = (read // 2) % 8
            for p in range(4):
                assert len(set(groups[8*p:8*p + 8])) == 8


@pytest.mark.parametrize('wn', [2, 4, 6, 8])
def test_gemm_c_pairs_fill_whole_sectors(wn):
    """A lane pair's stores of a row of C (gemm_c_pairs): after the swap,
    store s writes columns 4s .. 4s + 3 of the pair (one 32-byte sector),
    lane o the two from 4s + 2o, and these hold the values the lanes own
    there; every column is written once."""
    sent, stores = gemm_c_pairs(wn)
    assert len(sent[0]) == len(sent[1]) == wn
    own = [{lc: (t, lc) for lc in range(2*wn)} for t in (0, 1)]
    got = {}
    for s, lanes in enumerate(stores):
        for o, (mine, i) in enumerate(lanes):
            for d in (0, 1):
                if mine:
                    t, lc = o, i + d
                else:               # the partner's sent[1 - o][i + d]
                    t, lc = 1 - o, sent[1 - o][i + d]
                    assert i + d < wn
                col = 4*s + 2*o + d
                assert col not in got
                got[col] = own[t][lc]
    # column c of the pair is lane c // (2*wn)'s local column c % (2*wn)
    assert got == {c: (c // (2*wn), c % (2*wn)) for c in range(4*wn)}


def test_gemm_issue_late_follows_intensity():
    """Late stage loads only for compute-bound operators (flops per byte of
    B and C moved at least the threshold; beta*C adds C's reads), and only
    where a stage has k-steps and buffers to spare."""
    from gimmik.fragments.mma import (GEMM_LATE_ISSUE_FLOP_PER_BYTE,
                                      gemm_compute_bound, gemm_intensity,
                                      gemm_issue_late)
    assert gemm_issue_late(420, 140, 0.0, 4, 3)        # 26 flop/byte
    assert not gemm_issue_late(140, 161, 1.0, 2, 3)    # 12.8 (beta*C read)
    assert gemm_issue_late(140, 161, 0.0, 2, 3)        # 18.7
    assert not gemm_issue_late(420, 140, 0.0, 1, 3)    # one k-step
    assert not gemm_issue_late(420, 140, 0.0, 4, 2)    # two buffers
    # the threshold itself: m = k = 64*t gives exactly 8*t flop/byte
    t = GEMM_LATE_ISSUE_FLOP_PER_BYTE
    assert gemm_issue_late(8*t, 8*t, 0.0, 2, 3)
    assert not gemm_issue_late(8*t - 1, 8*t, 0.0, 2, 3)
    # the intensity: 2*m*k flops a column over (k + m) words, 2*m with beta
    assert gemm_intensity(64, 96, 0.0) == 2*64*96/(8*(96 + 64))
    assert gemm_intensity(64, 96, 1.0) == 2*64*96/(8*(96 + 128))
    assert gemm_compute_bound(8*t, 8*t, 0.0)
    assert not gemm_compute_bound(8*t, 8*t, 1.0)


def test_gemm_plan_rejects_late_issue_without_spare_stages():
    with pytest.raises(ValueError, match='late_issue'):
        gemm_plan(np.ones((16, 8)), 'm16n8k4', mwarps=1, nwarps=1, wm=1,
                  wn=2, kstage=1, nbuf=3, late_issue=True)


@pytest.mark.parametrize('wn,nwarps', [(2, 1), (2, 2), (4, 2)])
def test_gemm_transposed_b_reads(wn, nwarps):
    """Transposed shapes: lane (g, t) reads one 16-byte vector of a B stage
    per n-tile and k-row t: B's columns g and g + 8 of the n-tile (the
    MMA's a0, a1), adjacent by the column map and the stage layout; the 8
    lanes of each quarter-warp hit 8 distinct 16-byte bank groups."""
    plan = gemm_plan(np.ones((16, 8)), 'm16n8k8t', mwarps=1, nwarps=nwarps,
                     wm=2, wn=wn, kstage=1, nbuf=2)
    BN = plan.BN
    assert BN == 16*nwarps*wn
    lanes = np.arange(32)
    g, t = lanes // 4, lanes % 4
    for wx in range(nwarps):
        for nt in range(wn):
            off = gemm_b_offset(BN, t, plan.column(wx, nt, g))
            assert (off % 2 == 0).all()
            assert (off + 1 == gemm_b_offset(BN, t, plan.column(wx, nt,
                                                                g + 8))).all()
            # the template's formula for the same offset
            tmpl = t*BN + 2*((wx*8*wn + 8*nt + g) ^ (2*t))
            assert (tmpl == off).all()
            for q in range(4):
                groups = (off[8*q:8*q + 8] // 2) % 8
                assert len(set(groups.tolist())) == 8
