"""The tiling of A and the MFMA f64 16x16x4 fragment bake, checked with a
NumPy model of the instruction (no GPU, no compiler)."""

import numpy as np
import pytest

from conftest import random_operator, rel_error
from gimmik.fragments import (MAX_CHUNK_KTILES, MFMA_K, MFMA_M, WAVE,
                              b_fragment, bake_mfma, lane_coords,
                              mfma_count, mfma_f64_16x16x4, mfma_plan,
                              model_product, tile_operator)


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
    assert rel_error(C, A @ np.nan_to_num(B)) <= 1e-13


def test_misbaked_fragment_is_caught(rng):
    A = random_operator(rng, 32, 16, 1.0)
    B = rng.standard_normal((16, 32))
    bake = bake_mfma(A)
    assert rel_error(model_product(bake, B), A @ B) <= 1e-13
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
    assert kts == sorted(set(kts))
    assert plan.mfma_count == mfma_count(bake, msplit)
    if msplit == 1:
        assert not plan.lds and plan.lds_bytes == 0
        assert plan.mfma_count == 4*len(bake.tiles)
        return
    # LDS staging: chunks of at most kchunk k-tiles, every row slot of a
    # chunk loaded exactly once, by some wavefront, with the right B row
    assert max(len(c) for c in plan.chunks) <= 5
    for q, ch in enumerate(plan.chunks):
        rows = [r for kt in ch for r in tl.ktile_rows(kt)]
        got = {}
        for y in range(msplit):
            for s0, rs in plan.stage[q][y]:
                assert len(rs) == vec
                for d, r in enumerate(rs):
                    assert s0 + d not in got
                    got[s0 + d] = r
        assert got == dict(enumerate(rows))
    assert plan.lds_bytes == 2*MFMA_K*5*WAVE*8


def test_lds_bounded_whatever_k():
    A = np.ones((64, 420))
    for nbuf, kchunk in ((1, MAX_CHUNK_KTILES), (2, 4)):
        plan = mfma_plan(A, 4, kchunk=kchunk, nbuf=nbuf)
        assert plan.lds_bytes <= 16*1024
    with pytest.raises(ValueError, match='kchunk'):
        mfma_plan(A, 4, kchunk=MAX_CHUNK_KTILES + 1)
    with pytest.raises(ValueError, match='msplit'):
        mfma_plan(np.ones((16, 4)), 2)
