"""HIPMatMul and CMatMul driven exactly the way PyFR's backend providers
drive them: a kernel generator per (A, beta, aligne, n, ldb, ldc), the first
candidate from send(None), then up to eight more with send() feedback dicts
of {'runtime', 'registers', 'local_mem', 'shared_mem'}, StopIteration ending
the walk, grids from meta['block'] and meta['width'], and the output matrix
saved before benchmarking and restored after.  HIP kernels run in the CPU
executor (no GPU here), C kernels through the c runtime."""

import ctypes
import time

import numpy as np
import pytest

from conftest import Panels, RTOL, random_operator, rel_error
from gimmik import CMatMul, HIPMatMul, generate_mm
from gimmik.emulate import run_hip
from gimmik.runtime import get_runtime

NKERNS = 8     # PyFR's gimmik-nkerns default


def get_grid_for_block(block, nrow, ncol=1):
    """PyFR's grid helper: enough blocks to cover nrow x ncol threads."""
    return (-(-nrow // block[0]), -(-ncol // block[1]), 1)


def pyfr_operator(rng):
    A = random_operator(rng, 12, 9, 0.4, pool=6)
    A[4] = 0
    A[0, 0] = 1.0
    return A


def benchmark_walk(kgen, run, feedback):
    """PyFR's loop: returns [(variant, dt)] of the candidates it timed."""
    timed, sdata = [], None
    try:
        for _ in range(NKERNS):
            src, meta = kgen.send(sdata)
            dt = run(src, meta)
            timed.append((meta['variant'], dt))
            sdata = {'runtime': dt, **feedback(src, meta)}
    except StopIteration:
        pass
    return timed


@pytest.mark.parametrize('dtype,beta', [
    (np.float64, 1.0),
    pytest.param(np.float32, 0.0, marks=pytest.mark.full),
    pytest.param(np.float64, -0.5, marks=pytest.mark.full),
])
def test_hip_provider(rng, dtype, beta):
    alpha = -2.0
    arr = pyfr_operator(rng)
    n, ldb, ldc = 300, 304, 310                # PyFR pads rows to aligne
    aligne = 2
    p = Panels(rng, alpha*arr, beta, dtype, n, ldb, ldc)
    saved = p.cfull.copy()                     # out_np = out.get()
    kname = f'gimmik_mm_{arr.shape[0]}x{arr.shape[1]}'

    mm = HIPMatMul(alpha*arr, beta=beta, aligne=aligne, n=n, ldb=ldb,
                   ldc=ldc)
    kgen = mm.kernels(dtype, kname=kname, gcn_arch='gfx90a', warp_size=64)

    def run(src, meta):
        assert f'{kname}(' in src
        block = meta['block']
        grid = get_grid_for_block(block, -(-n // meta['width']))
        assert grid == meta['grid'] == HIPMatMul.launch_config(meta, n)[0]
        assert grid[0]*block[0]*meta['width'] >= n
        np.copyto(p.cfull, saved)
        if beta == 0:
            p.c[...] = np.nan
        t0 = time.perf_counter()
        run_hip(src, meta, p.b, p.c, kname=kname)
        dt = time.perf_counter() - t0
        p.check(meta['variant'])
        return dt

    def feedback(src, meta):
        return {'registers': 64, 'local_mem': 0,
                'shared_mem': meta['shared']}

    timed = benchmark_walk(kgen, run, feedback)
    np.copyto(p.cfull, saved)                  # out.set(out_np)

    assert 2 <= len(timed) <= NKERNS
    assert len({v for v, _ in timed}) == len(timed)
    assert np.array_equal(p.cfull, saved, equal_nan=True)


def test_c_provider(rng):
    """CMatMul as an OpenMP provider uses it: kernels(dtype, kname=...),
    the same send() walk, and the chosen kernel called by address on
    column blocks of the panels (PyFR's batch wrapper), with n, b, ldb, c,
    ldc at run time."""
    rt = get_runtime('c')
    dtype, beta, alpha = np.float64, 0.0, 0.5
    arr = pyfr_operator(rng)
    n, ldb, ldc, blocksz = 1000, 1008, 1016, 96
    p = Panels(rng, alpha*arr, beta, dtype, n, ldb, ldc)
    saved = p.cfull.copy()
    kname = 'gimmik_mm_openmp'
    kgen = CMatMul(alpha*arr, beta=beta, aligne=8).kernels(dtype,
                                                           kname=kname)
    best = {}

    def run(src, meta):
        assert meta['block'] == (1, 1, 1)
        fn = getattr(rt.build(src, kname), kname)
        fn.restype = None
        fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                       ctypes.c_void_p, ctypes.c_int]
        p.c[...] = np.nan
        isz = p.b.itemsize
        t0 = time.perf_counter()
        for j0 in range(0, n, blocksz):        # batch over column blocks
            fn(min(blocksz, n - j0), p.b.ctypes.data + j0*isz, ldb,
               p.c.ctypes.data + j0*isz, ldc)
        dt = time.perf_counter() - t0
        p.check(meta['variant'])
        if not best or dt < best['dt']:
            best.update(dt=dt, variant=meta['variant'])
        return dt

    timed = benchmark_walk(kgen, run, lambda src, meta: {
        'registers': 0, 'local_mem': 0, 'shared_mem': 0})
    np.copyto(p.cfull, saved)
    assert len(timed) >= 2 and best['variant'] in dict(timed)


def test_legacy_generate_mm_c(rng):
    """PyFR's older OpenMP provider: generate_mm(..., platform='c') and a
    gimmik_mm(n, b, ldb, c, ldc) symbol."""
    rt = get_runtime('c')
    arr = pyfr_operator(rng)
    src = generate_mm(arr, np.float32, platform='c', alpha=3.0, beta=1.0)
    fn = rt.build(src).gimmik_mm
    fn.restype = None
    fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                   ctypes.c_void_p, ctypes.c_int]
    p = Panels(rng, 3.0*arr, 1.0, np.float32, 257, 260, 264)
    fn(257, p.b.ctypes.data, 260, p.c.ctypes.data, 264)
    assert rel_error(p.c, p.ref) <= RTOL[np.float32]
    p.check('generate_mm c')
