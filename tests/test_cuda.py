"""CUDA generator: the candidate table and its gates, the mma-dense and
mma-gemm fragment bakes against NumPy models of the f64 MMAs (m8n8k4,
m16n8k4/k8/k16), and (where nvcc is installed) every candidate compiled for
sm_80 and sm_90 with no local-memory spills.

Numerics on silicon are checked on the device (bench/cuda_bench.py --check);
CI has no GPU."""

import concurrent.futures as cf
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

from conftest import random_operator
from gimmik.base import Candidate
from gimmik.validate import check_dtype
from gimmik.cuda import (CUDAMatMul, GEMM_SHAPES, MMA_K, MMA_M, MMA_N,
                         gemm_coords, gemm_model, gemm_plan, gemm_reference,
                         mma_a_fragment, mma_model, mma_plan, mma_reference,
                         mma_tiles)

MMA_SHAPES = [dict(mwarps=1, nwarps=1, ntile=1, kstage=1),
              dict(mwarps=2, nwarps=2, ntile=4, kstage=4),
              dict(mwarps=4, nwarps=1, ntile=2, kstage=3),
              dict(mwarps=8, nwarps=1, ntile=2, kstage=8)]


# -- the NumPy model of one MMA -----------------------------------------
def test_mma_model_is_the_ptx_layout(rng):
    """A: lane l holds A[l/4][l%4]; B: B[l%4][l/4]; C/D: C[l/4][2(l%4) + i]
    (PTX ISA, mma.m8n8k4 .f64 fragments)."""
    a = rng.standard_normal((MMA_M, MMA_K))
    b = rng.standard_normal((MMA_K, MMA_N))
    c = rng.standard_normal((MMA_M, MMA_N))
    lanes = np.arange(32)
    afrag = np.array([a[l // 4, l % 4] for l in lanes])
    bfrag = np.array([b[l % 4, l // 4] for l in lanes])
    cfrag = np.array([[c[l // 4, 2*(l % 4) + i] for i in (0, 1)]
                      for l in lanes])
    d = a @ b + c
    want = np.array([[d[l // 4, 2*(l % 4) + i] for i in (0, 1)]
                     for l in lanes])
    np.testing.assert_allclose(mma_model(afrag, bfrag, cfrag), want,
                               rtol=1e-14, atol=1e-14)
    np.testing.assert_array_equal(mma_a_fragment(a), afrag)


def test_mma_tiles_pad_and_mask():
    A = np.zeros((10, 7))
    A[9, 6] = 2.0
    A[0, 0] = 1.0
    tiles, mask = mma_tiles(A)
    assert tiles.shape == (2, 2, MMA_M, MMA_K)
    assert mask.tolist() == [[True, False], [False, True]]
    assert tiles[1, 1, 1, 2] == 2.0


# -- the bake: every warp's mma sequence gives A @ B ---------------------
@pytest.mark.parametrize('shape', [(8, 4), (37, 45), (84, 252), (140, 60),
                                   (5, 130)])
@pytest.mark.parametrize('geom', MMA_SHAPES)
def test_mma_bake_reproduces_product(rng, shape, geom):
    A = random_operator(rng, *shape, density=0.9)
    A[:, -1] = 0.0                # a zero column and a zero tile row
    A[:min(8, shape[0]), :] = 0.0
    A[-1, 0] = 0.5
    plan = mma_plan(A, **geom)
    B = rng.standard_normal((shape[1], plan.cols))
    ref = A @ B
    err = np.abs(mma_reference(plan, A, B) - ref).max() / np.abs(ref).max()
    assert err <= 1e-13
    # the table holds every tile of A at [k-tile][m-tile], zero padding
    # beyond, and the warp rows' m-tiles cover A's
    tiles, mask = mma_tiles(A)
    nmt, nkt = mask.shape
    assert plan.frags.shape == (plan.nstages*plan.kstage,
                                plan.mwarps*plan.mw, 32)
    assert plan.mw == -(-nmt // plan.mwarps)
    assert (plan.frags[:nkt, :nmt].any(axis=2) == mask.T).all()
    assert not plan.frags[nkt:].any() and not plan.frags[:, nmt:].any()


def test_mma_bake_catches_a_wrong_layout(rng):
    """The model test can fail: a transposed A fragment gives a wrong C."""
    A = rng.standard_normal((16, 8))
    plan = mma_plan(A, mwarps=1, nwarps=1, ntile=1, kstage=2)
    lanes = np.arange(32)
    plan.frags = plan.frags.reshape(-1, 8, 4)[:, lanes % 8, lanes // 8] \
        .reshape(plan.frags.shape)
    B = rng.standard_normal((8, plan.cols))
    assert np.abs(mma_reference(plan, A, B) - A @ B).max() > 1e-3


# -- mma-gemm: the fragment layouts and the bake ---------------------------
@pytest.mark.parametrize('shape', sorted(GEMM_SHAPES))
def test_gemm_coords_cover_each_element_once(shape):
    """Every element of the A (MT x KT), B (KT x 8) and C (MT x 8) tiles is
    held by exactly one (lane, value)."""
    mt, kt = GEMM_SHAPES[shape]
    for rc, dims in zip(gemm_coords(shape), ((mt, kt), (kt, MMA_N),
                                              (mt, MMA_N))):
        seen = np.zeros(dims, int)
        np.add.at(seen, (rc[..., 0], rc[..., 1]), 1)
        assert (seen == 1).all()


def test_gemm_coords_are_the_ptx_layout():
    """Spot checks written out from the PTX ISA tables (.f64), g = lane/4,
    t = lane%4: m16n8k8 a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4);
    b0 (t, g), b1 (t+4, g); c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t);
    m16n8k16 a5 (g+8, t+8), b3 (t+12, g); m8n8k4 as mma_model."""
    a, b, c = gemm_coords('m16n8k8')
    lane = 13                      # g = 3, t = 1
    assert [tuple(x) for x in a[lane]] == [(3, 1), (11, 1), (3, 5), (11, 5)]
    assert [tuple(x) for x in b[lane]] == [(1, 3), (5, 3)]
    assert [tuple(x) for x in c[lane]] == [(3, 2), (3, 3), (11, 2), (11, 3)]
    a, b, _ = gemm_coords('m16n8k16')
    assert tuple(a[lane, 5]) == (11, 9) and tuple(b[lane, 3]) == (13, 3)
    a, b, _ = gemm_coords('m16n8k4')
    assert [tuple(x) for x in a[lane]] == [(3, 1), (11, 1)]


def test_gemm_model_m8n8k4_is_mma_model(rng):
    """The generic model agrees with mma-dense's m8n8k4 model."""
    af, bf = rng.standard_normal(32), rng.standard_normal(32)
    cf = rng.standard_normal((32, 2))
    np.testing.assert_allclose(gemm_model('m8n8k4', af[:, None],
                                          bf[:, None], cf),
                               mma_model(af, bf, cf), rtol=1e-14, atol=1e-14)


GEMM_GEOMS = [dict(mwarps=1, nwarps=1, wm=1, wn=1, kstage=1, nbuf=2),
              dict(mwarps=2, nwarps=2, wm=2, wn=2, kstage=2, nbuf=3),
              dict(mwarps=2, nwarps=1, wm=3, wn=2, kstage=1, nbuf=4)]


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
    assert plan.table.size == plan.nmb*plan.nslot*plan.BM*plan.BK
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
    plan = gemm_plan(A, 'm16n8k8', mwarps=2, nwarps=1, wm=1, wn=1,
                     kstage=1, nbuf=2, skip=True)
    assert plan.nmb == 2 and plan.nstages == 8
    assert plan.cnt.tolist() == [1, 2]
    assert plan.kidx[0, 0] == 0 and plan.kidx[1].tolist() == [6, 7]
    assert not plan.full and plan.nslot == 2


@pytest.mark.parametrize('shape', ['m8n8k4', 'm16n8k8', 'm16n8k16'])
def test_gemm_bake_catches_a_wrong_layout(rng, shape):
    """The model test can fail: A fragments baked with another lane
    mapping (lanes transposed within a fragment, or the values of a lane
    out of order) give a wrong C."""
    A = rng.standard_normal((32, 32))
    geom = dict(mwarps=2, nwarps=1, wm=1, wn=1, kstage=1, nbuf=2)
    B = rng.standard_normal((32, 8))
    plan = gemm_plan(A, shape, **geom)
    assert np.abs(gemm_reference(plan, A, B) - A @ B).max() < 1e-12
    lanes = np.arange(32)
    wrong = (lanes % 4)*8 + lanes // 4
    bad = gemm_plan(A, shape, **geom)
    t = bad.table.reshape(-1, 32, bad.v)
    bad.table = t[:, wrong].reshape(-1)
    assert np.abs(gemm_reference(bad, A, B) - A @ B).max() > 1e-3
    if bad.v == 2:
        bad = gemm_plan(A, shape, **geom)
        bad.table = bad.table.reshape(-1, 2)[:, ::-1].reshape(-1)
        assert np.abs(gemm_reference(bad, A, B) - A @ B).max() > 1e-3


# -- the candidate table ---------------------------------------------------
def _variants(A, dtype='float64', **kw):
    cc = kw.pop('compute_capability', (9, 0))
    mm = CUDAMatMul(A, **kw)
    return [c.variant for c in mm._candidates(check_dtype(dtype), cc)]


def test_mma_dense_offered_only_where_it_applies(rng):
    dense = rng.standard_normal((84, 84))
    sparse = random_operator(rng, 84, 84, 0.05)
    has = lambda v: any(x.startswith('mma-dense') for x in v)  # noqa: E731
    assert has(_variants(dense, aligne=2))
    gemm = lambda v, s: any(x.startswith('mma-gemm') and s in x  # noqa: E731
                            for x in v)
    assert gemm(_variants(dense, aligne=2), 'm16n8k8')
    # sm_80: only m8n8k4, no Hopper shapes
    v80 = _variants(dense, aligne=2, compute_capability=(8, 0))
    assert gemm(v80, 'm8n8k4') and not gemm(v80, 'm16n8')
    assert has(_variants(dense, aligne=2, compute_capability=(8, 0)))
    assert not has(_variants(dense, aligne=2, compute_capability=(7, 5)))
    assert not has(_variants(dense, 'float32', aligne=2))
    assert not has(_variants(dense))              # no even alignment
    assert not has(_variants(sparse, aligne=2))
    # where the mma families are offered first, big streaming kernels
    # are not
    big = _variants(rng.standard_normal((140, 420)), aligne=2)
    assert big and all(v.startswith('mma-') for v in big)
    assert big[0].startswith('mma-gemm')


def test_gemm_options_only_where_they_matter(rng):
    """skip and cpre are dropped where they would change nothing (no zero
    slab, beta 0), so no kernel is offered twice."""
    dense = rng.standard_normal((140, 100))
    slabs = dense.copy()
    slabs[:, 50:] = 0.0
    slabs[:, 80:90] = 1.0
    for A, beta, opts in ((dense, 0.0, set()), (dense, 1.0, {'cpre'}),
                          (slabs, 0.0, {'skip'}),
                          (slabs, 2.0, {'skip', 'cpre'})):
        v = [x for x in _variants(A, beta=beta, aligne=2)
             if x.startswith('mma-gemm')]
        assert v
        for x in v:
            assert {o for o in ('skip', 'cpre') if f'/{o}/' in x} == opts


def test_gemm_offered_late_for_sparser_big_operators(rng):
    """Prism-like operators (about 10% dense, many non-zeros) get the
    skipping mma-gemm after the streaming families; very sparse ones not."""
    pri = random_operator(rng, 400, 150, 0.12)
    v = _variants(pri, aligne=2)
    first = next(i for i, x in enumerate(v) if x.startswith('mma-gemm'))
    assert first > 0
    assert not any(x.startswith('mma-') for x in v[:first])
    assert not any(x.startswith('mma-gemm') for x in
                   _variants(pri, aligne=2, compute_capability=(8, 0)))
    hexlike = random_operator(rng, 1029, 343, 0.02)
    assert not any(x.startswith('mma-gemm')
                   for x in _variants(hexlike, aligne=2))


def test_candidates_unique_and_width2_needs_alignment(rng):
    A = random_operator(rng, 30, 20, 0.3)
    for kw in ({}, {'aligne': 2}, {'aligne': 4, 'n': 99, 'ldb': 100,
                                   'ldc': 104}):
        v = _variants(A, **kw)
        assert v and len(v) == len(set(v))
        assert any('width2' in x for x in v) == ('aligne' in kw)


def test_big_operators_offer_only_unspilled_kernels(rng):
    """An operator too big for registers still gets candidates: the
    row groups over blocks and the reload cstream."""
    A = random_operator(rng, 1029, 343, 0.02)
    v = _variants(A, aligne=2)
    assert 'cstream/ldreload/width1' in v
    assert any(x.startswith('cstream-mblock/') for x in v)
    assert not any(x.startswith('bstream/') for x in v)


@pytest.mark.parametrize('cc, exc', [((9,), TypeError), ('sm_90', TypeError),
                                     ((9.0, 0), TypeError),
                                     ((True, 0), TypeError),
                                     ((6, 1), ValueError),
                                     ((9, 12), ValueError)])
def test_bad_compute_capability(cc, exc):
    with pytest.raises(exc, match='compute_capability'):
        next(CUDAMatMul(np.eye(4)).kernels('float64', compute_capability=cc))


def test_launch_config_covers_columns(rng):
    A = rng.standard_normal((40, 40))
    for src, meta in CUDAMatMul(A, aligne=2).kernels('float64'):
        grid, block = CUDAMatMul.launch_config(meta, 1001)
        cols = meta.get('cols_per_block') or block[0]*meta['width']
        groups = meta.get('row_groups', 1)
        assert grid[0] % groups == 0
        assert (grid[0]//groups - 1)*cols < 1001 <= grid[0]//groups*cols
        assert f'__launch_bounds__({block[0]*block[1]*block[2]}' in src


# -- nvcc: every candidate builds for sm_80 and sm_90 without spills ---------
NVCC = shutil.which('nvcc')
ARCHS = ('sm_80', 'sm_90')

_FUNC = re.compile(r"Compiling entry function '(\w+)' for '(sm_\d+)'")
_PROPS = re.compile(r'(\d+) bytes stack frame, (\d+) bytes spill stores, '
                    r'(\d+) bytes spill loads')


def ptxas_report(srcs, arch):
    """Compile kernels (named k0, k1, ...) in one nvcc run; returns
    {kname: (stack, spill stores, spill loads)}."""
    with tempfile.TemporaryDirectory() as tmp:
        cu = os.path.join(tmp, 'all.cu')
        with open(cu, 'w') as f:
            f.write('\n'.join(srcs))
        p = subprocess.run([NVCC, '-cubin', f'-arch={arch}', '-O3',
                            '-Xptxas', '-v', '-o', os.path.join(tmp, 'a'),
                            cu], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    out, cur = {}, None
    for line in p.stderr.splitlines():
        if mo := _FUNC.search(line):
            cur = mo.group(1)
        elif (mo := _PROPS.search(line)) and cur:
            out[cur] = tuple(int(x) for x in mo.groups())
    return out


def _compile_cases(rng):
    """(label, A, beta, dtype, sizes) of representative operators."""
    hexlike = np.kron(np.eye(4), random_operator(rng, 6, 4, 1.0))
    zero_rows = np.vstack([random_operator(rng, 10, 12, 0.4),
                           np.zeros((6, 12))])
    return [('sparse-f64', random_operator(rng, 24, 20, 0.25), 0.0,
             'float64', {'aligne': 2}),
            ('sparse-f32-beta', random_operator(rng, 20, 24, 0.25), 0.5,
             'float32', {'aligne': 2}),
            ('dense-mma-beta1', rng.standard_normal((32, 32)), 1.0,
             'float64', {'aligne': 2}),
            ('blocky-baked', hexlike, 1.0, 'float64',
             {'aligne': 2, 'n': 1001, 'ldb': 1002, 'ldc': 1004}),
            ('zero-rows-odd', zero_rows, 0.0, 'float64', {}),
            ('tall-mblock', random_operator(rng, 72, 24, 0.15), 0.0,
             'float64', {'aligne': 2})]


def _full_cases(rng):
    return [('sparse-40x30', random_operator(rng, 40, 30, 0.2), 0.0,
             'float64', {'aligne': 2}),
            ('dense-45x37-f32', rng.standard_normal((45, 37)), 0.5,
             'float32', {'aligne': 2}),
            ('hexp6-like-m132', random_operator(rng, 1029, 343, 0.02), 0.0,
             'float64', {'aligne': 2}),
            ('dense-mma-84x252', rng.standard_normal((84, 252)), 0.0,
             'float64', {'aligne': 2}),
            ('dense-f32-60x40', rng.standard_normal((60, 40)), 1.0,
             'float32', {'aligne': 2})]


def _check_no_spills(cases):
    jobs = []
    for label, A, beta, dtype, sizes in cases:
        mm = CUDAMatMul(A, beta=beta, **sizes)
        srcs, names = [], {}
        dt = check_dtype(dtype)
        for i, cand in enumerate(mm._candidates(dt, (8, 0))):
            src, meta = mm.render(cand, dt, f'k{i}')
            srcs.append(src)
            names[f'k{i}'] = meta['variant']
        for arch in ARCHS:
            jobs.append((label, arch, srcs, names))
    with cf.ThreadPoolExecutor(2) as pool:
        futs = [(j, pool.submit(ptxas_report, j[2], j[1])) for j in jobs]
        for (label, arch, srcs, names), fut in futs:
            rep = fut.result()
            assert set(rep) == set(names), f'{label} {arch}: missing kernels'
            for kname, (stack, st, ld) in rep.items():
                assert (stack, st, ld) == (0, 0, 0), \
                    (f'{label} {arch} {names[kname]}: {stack} bytes stack, '
                     f'{st}/{ld} bytes spilled')


@pytest.mark.skipif(NVCC is None, reason='nvcc is not installed')
def test_every_candidate_compiles_without_spills(rng):
    _check_no_spills(_compile_cases(rng))


@pytest.mark.full
@pytest.mark.skipif(NVCC is None, reason='nvcc is not installed')
def test_big_candidates_compile_without_spills(rng):
    _check_no_spills(_full_cases(rng))


def _gemm90_cases(rng):
    """Operators whose sm_90 candidates include every mma-gemm code path:
    the Hopper shapes, ragged m and k, beta 0 / 1 / other, baked n, zero
    slabs skipped, an m-block with no live stage."""
    slabs = rng.standard_normal((150, 70))
    slabs[:64, :] = 0.0
    slabs[100:, 60:] = 0.0
    return [('gemm-baked-beta', rng.standard_normal((150, 70)), -0.5,
             'float64', {'aligne': 2, 'n': 1001, 'ldb': 1002, 'ldc': 1004}),
            ('gemm-slabs-beta1', slabs, 1.0, 'float64', {'aligne': 2}),
            ('gemm-prism-like', random_operator(rng, 400, 150, 0.12), 0.0,
             'float64', {'aligne': 2})]


@pytest.mark.skipif(NVCC is None, reason='nvcc is not installed')
def test_gemm_sm90_candidates_compile_without_spills(rng):
    """mma-gemm's sm_90 candidates (compute capability 9.0) build for
    sm_90 with no spills."""
    jobs = []
    for label, A, beta, dtype, sizes in _gemm90_cases(rng):
        mm = CUDAMatMul(A, beta=beta, **sizes)
        dt = check_dtype(dtype)
        cands = [c for c in mm._candidates(dt, (9, 0))
                 if c.family == 'mma-gemm']
        assert cands
        if label == 'gemm-slabs-beta1':     # the skipping code is built
            assert not all(mm._gemm_plan(c.params).full for c in cands)
        if label != 'gemm-baked-beta':      # (bounded run time) the most
            cands = [c for c in cands      # registers: the 4 x 4 warp tiles
                     if c.params['wm'] == c.params['wn'] == 4][:3]
        srcs, names = [], {}
        for i, cand in enumerate(cands):
            src, meta = mm.render(cand, dt, f'k{i}')
            srcs.append(src)
            names[f'k{i}'] = meta['variant']
        jobs.append((label, srcs, names))
    with cf.ThreadPoolExecutor(2) as pool:
        futs = [(j, pool.submit(ptxas_report, j[1], 'sm_90')) for j in jobs]
        for (label, srcs, names), fut in futs:
            rep = fut.result()
            assert set(rep) == set(names), f'{label}: missing kernels'
            for kname, (stack, st, ld) in rep.items():
                assert (stack, st, ld) == (0, 0, 0), \
                    (f'{label} sm_90 {names[kname]}: {stack} bytes stack, '
                     f'{st}/{ld} bytes spilled')


# -- mma-gemm run on the CPU: the generated CUDA source, emulated ------------
#
# No GPU in CI, so the mma-gemm source itself is compiled with g++ against a
# small emulation of what it uses: each block's threads run as OS threads
# (blocks one after another), __syncthreads is a barrier, the warp-wide mma
# exchanges the lanes' fragments through memory (layouts written out again
# here in C++ from the PTX ISA tables), cp.async is a synchronous copy with
# the same zero fill, shared memory starts as NaN.
GXX = shutil.which('g++')

EMU_HEADER = r'''
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
#define __constant__
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(x) __attribute__((aligned(x)))
struct __attribute__((aligned(16))) double2 { double x, y; };
struct dim3_ { int x = 0, y = 0, z = 0; };
thread_local dim3_ threadIdx, blockIdx;
static std::barrier<>* emu_block;
struct EmuWarp { double a[32][8], b[32][4]; std::barrier<>* bar; };
static EmuWarp emu_warps[32];
static inline void __syncthreads() { emu_block->arrive_and_wait(); }
template <class T> static inline T __ldcs(const T* p) { return *p; }
template <class T> static inline T __ldg(const T* p) { return *p; }
template <class T> static inline void __stcs(T* p, T v) { *p = v; }
static inline void emu_cp16(double* dst, const double* src, int bytes)
{
    std::memset(dst, 0, 16);
    std::memcpy(dst, src, bytes);
}
// D += A*B for one f64 mma of shape MT x 8 x KT over the warp.
static void emu_mma(int MT, int KT, double* d, const double* a,
                    const double* b)
{
    const int lane = threadIdx.x % 32;
    EmuWarp& w = emu_warps[threadIdx.x / 32];
    const int na = MT*KT/32, nb = KT/4, nc = MT/4;
    for (int i = 0; i < na; ++i) w.a[lane][i] = a[i];
    for (int i = 0; i < nb; ++i) w.b[lane][i] = b[i];
    w.bar->arrive_and_wait();
    double A[16][16], B[16][8];
    for (int l = 0; l < 32; ++l)
    {
        const int g = l / 4, t = l % 4;
        for (int i = 0; i < na; ++i)
        {
            if (MT == 8)
                A[g][t] = w.a[l][i];
            else
                A[g + 8*(i % 2)][t + 4*(i / 2)] = w.a[l][i];
        }
        for (int i = 0; i < nb; ++i)
            B[t + 4*i][g] = w.b[l][i];
    }
    w.bar->arrive_and_wait();
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < nc; ++i)
    {
        const int r = MT == 8 ? g : g + 8*(i / 2);
        const int c = MT == 8 ? 2*t + i : 2*t + i % 2;
        for (int k = 0; k < KT; ++k)
            d[i] += A[r][k]*B[k][c];
    }
}
'''

EMU_MAIN = r'''
int main(int argc, char** argv)
{
    const int n = atoi(argv[1]), ldb = atoi(argv[2]), ldc = atoi(argv[3]);
    const int k = atoi(argv[4]), m = atoi(argv[5]);
    const int grid = atoi(argv[6]), nthreads = atoi(argv[7]);
    std::vector<double> b((size_t) k*ldb), c((size_t) m*ldc);
    FILE* f = fopen(argv[8], "rb");
    if (fread(b.data(), 8, b.size(), f) != b.size()
        || fread(c.data(), 8, c.size(), f) != c.size())
        return 2;
    fclose(f);
    for (int w = 0; w < 32; ++w)
        emu_warps[w].bar = new std::barrier<>(32);
    for (int blk = 0; blk < grid; ++blk)
    {
        std::barrier<> bar(nthreads);
        emu_block = &bar;
        std::vector<std::thread> th;
        for (int t = 0; t < nthreads; ++t)
            th.emplace_back([&, t] {
                threadIdx.x = t;
                blockIdx.x = blk;
                CALL;
            });
        for (auto& x : th)
            x.join();
    }
    f = fopen(argv[9], "wb");
    fwrite(c.data(), 8, c.size(), f);
    fclose(f);
    return 0;
}
'''


def emulate(src, meta, B, C, n, ldb, ldc, tmp):
    """Run a rendered mma-gemm kernel on the CPU; B and C are the full
    (k x ldb, m x ldc) arrays; returns C after the kernel."""
    shape = meta['params']['shape']
    mt, kt = GEMM_SHAPES[shape]
    kname = meta['kname']
    head = r'static __device__ __forceinline__ void\n(\w+)'
    src = re.sub(head + r'_mma\(.*?\n\}\n',
                 lambda mo: f'static inline void {mo.group(1)}_mma('
                 f'double* d, const double* a, const double* b)\n'
                 f'{{ emu_mma({mt}, {kt}, d, a, b); }}\n', src, flags=re.S)
    src = re.sub(head + r'_cp16\(.*?\n\}\n',
                 lambda mo: f'static inline void {mo.group(1)}_cp16('
                 'double* dst, const double* s, int bytes)\n'
                 '{ emu_cp16(dst, s, bytes); }\n', src, flags=re.S)
    src = re.sub(r'asm volatile\("cp\.async\.[a-z_]+( \d+)?;" ::: "memory"\);',
                 '', src)
    assert 'asm' not in src
    # shared memory starts as NaN in every block
    src = re.sub(r'(__shared__ __align__\(16\) double (\w+)(\[\w+\])+;)',
                 r'\1 if (threadIdx.x == 0) std::fill_n((double*) \2, '
                 r'sizeof(\2)/8, NAN); __syncthreads();', src)
    src = src.replace('extern "C" ', '')
    args = ('b.data(), c.data()' if meta['n'] is not None else
            'n, b.data(), ldb, c.data(), ldc')
    main = EMU_MAIN.replace('CALL', f'{kname}({args})')
    cpp = os.path.join(tmp, 'k.cpp')
    with open(cpp, 'w') as f:
        f.write(EMU_HEADER + '#include <algorithm>\n' + src + main)
    exe = os.path.join(tmp, 'k')
    p = subprocess.run([GXX, '-std=c++20', '-O1', '-pthread', '-w', '-o',
                        exe, cpp], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    grid, block = CUDAMatMul.launch_config(meta, n)
    inp, out = os.path.join(tmp, 'in'), os.path.join(tmp, 'out')
    with open(inp, 'wb') as f:
        f.write(np.ascontiguousarray(B).tobytes())
        f.write(np.ascontiguousarray(C).tobytes())
    m, k = meta['m'], meta['k']
    p = subprocess.run([exe, str(n), str(ldb), str(ldc), str(k), str(m),
                        str(grid[0]), str(block[0]), inp, out],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return np.fromfile(out).reshape(C.shape)


GEMM_EMU = [  # (shape params, operator, beta, baked)
    (dict(shape='m16n8k8', mwarps=2, nwarps=2, wm=4, wn=4, kstage=1,
          nbuf=3), 'dense', 0.0, False),
    (dict(shape='m16n8k8', mwarps=2, nwarps=2, wm=4, wn=4, kstage=1,
          nbuf=3, skip=True, cpre=True), 'slabs', 1.0, False),
    (dict(shape='m16n8k16', mwarps=2, nwarps=2, wm=2, wn=4, kstage=1,
          nbuf=2), 'dense', -0.5, True),
    (dict(shape='m8n8k4', mwarps=2, nwarps=2, wm=4, wn=4, kstage=2,
          nbuf=3), 'slabs', 1.0, False),
    (dict(shape='m16n8k8', mwarps=2, nwarps=2, wm=4, wn=4, kstage=1,
          nbuf=3, skip=True, cpre=True, tiles=3), 'slabs', 1.0, False),
    (dict(shape='m16n8k8', mwarps=2, nwarps=2, wm=2, wn=4, kstage=2,
          nbuf=2, tiles=2), 'dense', -0.5, True),
    (dict(shape='m16n8k4', mwarps=2, nwarps=4, wm=4, wn=4, kstage=1,
          nbuf=4, skip=True, cpre=True, tiles=3), 'slabs', -0.5, True),
]


@pytest.mark.skipif(GXX is None, reason='g++ is not installed')
@pytest.mark.parametrize('case', range(len(GEMM_EMU)))
def test_gemm_kernel_emulated(rng, case):
    """The generated mma-gemm kernel, run on the CPU, computes
    C = A*B + beta*C: ragged m, k and n (two column blocks, the last one
    odd, with tiles a tile wholly beyond n), padded strides left alone,
    every element of C written, zero slabs skipped and an m-block with no
    live stage."""
    params, kind, beta, baked = GEMM_EMU[case]
    m, k = (270, 45) if kind == 'dense' else (200, 45)
    A = rng.standard_normal((m, k))
    if kind == 'slabs':
        A[:128, :] = 0.0           # m-block(s) with no live stage
        A[128:, 40:] = 0.0         # dead stages for the others, the
        A[128:, :8] = 0.0          # first one too
    mm0 = CUDAMatMul(A, beta=beta, aligne=2)
    pl0 = mm0._gemm_plan(params, table=False)
    n = pl0.BN*pl0.tiles + pl0.BN + 5   # tiles beyond n in the last block
    ldb, ldc = n + 3, n + 7
    ldb, ldc = ldb + ldb % 2, ldc + ldc % 2
    sizes = dict(n=n, ldb=ldb, ldc=ldc) if baked else {}
    mm = CUDAMatMul(A, beta=beta, aligne=2, **sizes)
    cand = Candidate('mma-gemm', params, {'compute_capability': (9, 0)})
    src, meta = mm.render(cand, np.float64, 'k0')
    Bf = np.full((k, ldb), 7.0)
    Bf[:, :n] = rng.standard_normal((k, n))
    Cf = np.full((m, ldc), 9.0)
    Cf[:, :n] = rng.standard_normal((m, n))
    ref = A @ Bf[:, :n] + beta*Cf[:, :n]
    if beta == 0:
        Cf[:, :n] = np.nan
    plan = mm._gemm_plan(params)
    assert plan.nmb > 1
    if kind == 'slabs' and params.get('skip'):
        assert plan.cnt.min() == 0 and not plan.full
    with tempfile.TemporaryDirectory() as tmp:
        out = emulate(src, meta, Bf, Cf, n, ldb, ldc, tmp)
    assert np.isfinite(out[:, :n]).all()
    assert np.abs(out[:, :n] - ref).max() <= 1e-13*np.abs(ref).max()
    assert (out[:, n:] == 9.0).all()


@pytest.mark.skipif(GXX is None, reason='g++ is not installed')
@pytest.mark.parametrize('wrong', [
    ('const int g = lane / 4, t4 = lane % 4;',
     'const int t4 = lane / 8, g = lane % 8;'),     # lanes transposed
    ('const int kst = kidx[sn];', 'const int kst = sn;')])  # slots ignored
def test_gemm_emulation_catches_a_wrong_kernel(rng, wrong):
    """The emulated run can fail: a kernel with its lanes mapped wrongly,
    or reading B at the slot instead of the live stage, gives a wrong C."""
    params = dict(shape='m16n8k8', mwarps=2, nwarps=2, wm=4, wn=4,
                  kstage=1, nbuf=3, skip=True, cpre=True)
    A = rng.standard_normal((200, 45))
    A[:128, :] = 0.0
    A[128:, 40:] = 0.0
    A[128:, :8] = 0.0
    mm = CUDAMatMul(A, beta=1.0, aligne=2)
    cand = Candidate('mma-gemm', params, {'compute_capability': (9, 0)})
    src, meta = mm.render(cand, np.float64, 'k0')
    assert wrong[0] in src
    src = src.replace(*wrong)
    n = 70
    B, C = rng.standard_normal((45, n)), rng.standard_normal((200, n))
    with tempfile.TemporaryDirectory() as tmp:
        out = emulate(src, meta, B, C.copy(), n, n, n, tmp)
    assert np.abs(out - (A @ B + C)).max() > 1e-3
