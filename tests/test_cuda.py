"""CUDA generator: the candidate table and its gates, the mma-dense fragment
bake against a NumPy model of mma.m8n8k4, and (where nvcc is installed)
every candidate compiled for sm_80 and sm_90 with no local-memory spills.

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
from gimmik.validate import check_dtype
from gimmik.cuda import (CUDAMatMul, MMA_K, MMA_M, MMA_N, mma_a_fragment,
                         mma_model, mma_plan, mma_reference, mma_tiles)

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
    assert has(_variants(dense, aligne=2, compute_capability=(8, 0)))
    assert not has(_variants(dense, aligne=2, compute_capability=(7, 5)))
    assert not has(_variants(dense, 'float32', aligne=2))
    assert not has(_variants(dense))              # no even alignment
    assert not has(_variants(sparse, aligne=2))
    # where mma-dense is offered first, big streaming kernels are not
    big = _variants(rng.standard_normal((140, 420)), aligne=2)
    assert big and all(v.startswith('mma-dense') for v in big)


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
        assert (grid[0] - 1)*cols < 1001 <= grid[0]*cols
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
