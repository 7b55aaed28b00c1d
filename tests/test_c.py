"""CMatMul and the c runtime: every candidate's numerics compiled by the
system C compiler and run through ctypes, the meta contract, the vendor
baseline and the runtime's checks."""

import ctypes
import itertools
import os
import re

import numpy as np
import pytest

import gimmik
from conftest import A_SMALL, Panels, random_operator
from gimmik import CMatMul
from gimmik.base import MatMul
from gimmik.families.rowblock import Rowblock
from gimmik.analysis import analyse
from gimmik.c import (BSTREAM_MAX_NNZ, CANDIDATES, MAX_SCRATCH,
                      UNROLLED_MAX_NNZ)
from gimmik.families.rowblock import (ROWBLOCK_PACK, ROWBLOCK_VECTOR,
                                      rowblock_width)
from gimmik.runtime import RuntimeUnavailable, get_runtime
from gimmik.runtime.c import Runtime as CRuntime


@pytest.fixture(scope='module')
def rt():
    return get_runtime('c')


def sample_operator(rng, m=7, k=6):
    A = random_operator(rng, m, k, 0.45)
    A[2] = 0                               # an all-zero row
    A[:, 3] = 0                            # an unused row of B
    A[0, 0] = 1.0                          # at least one term left
    return A


def run_all(rt, A, beta, dtype, rng, n, ldb, ldc, baked=False, full=False):
    sizes = dict(n=n, ldb=ldb, ldc=ldc) if baked else {}
    mm = CMatMul(A, beta=beta, **sizes)
    kgen = mm.kernels(dtype)
    seen = []
    for src, meta in kgen:
        p = Panels(rng, A, beta, dtype, n, ldb, ldc)
        rt.compile(src, meta)(p.bfull, p.cfull, n, ldb, ldc)
        p.check(f'{meta["variant"]} beta={beta} {np.dtype(dtype).name}')
        seen.append(meta['variant'])
        if not full and len(seen) == 3:
            kgen.close()
    return seen


# -- numerics ------------------------------------------------------------

@pytest.mark.parametrize('beta', [0.0, 1.0, -0.75])
def test_every_family_float64(rt, rng, beta):
    A = sample_operator(rng)
    # ragged n: not a multiple of any width; padded, unequal strides
    seen = run_all(rt, A, beta, np.float64, rng, 1000, 1003, 1010, full=True)
    assert {v.split('/')[0] for v in seen} == {'rowblock', 'cstream',
                                               'cstream-row', 'bstream'}


@pytest.mark.parametrize('beta', [0.0, 1.0, 0.25])
def test_rowblock_ragged(rt, rng, beta):
    """rowblock with rows of C not a multiple of the group, n not a
    multiple of the register tile or of the block, and so many used rows of
    B that the packed block shrinks to one tile."""
    A = random_operator(rng, 13, 11, 0.5)
    A[4] = 0
    run_only(rt, A, beta, np.float64, rng, 'rowblock', 517, 520, 517)
    wide = random_operator(rng, 5, ROWBLOCK_PACK // 8 // 20, 0.5)
    nb = len(analyse(wide).bix)
    assert rowblock_width(nb, 256, 16, 8) == 16
    run_only(rt, wide, beta, np.float64, rng, 'rowblock', 45, 45, 47)
    run_only(rt, A, beta, np.float32, rng, 'rowblock', 33, 35, 33,
             baked=True)


def run_only(rt, A, beta, dtype, rng, family, n, ldb, ldc, baked=False):
    sizes = dict(n=n, ldb=ldb, ldc=ldc) if baked else {}
    count = 0
    for src, meta in CMatMul(A, beta=beta, **sizes).kernels(dtype):
        if meta['tplname'] == family:
            p = Panels(rng, A, beta, dtype, n, ldb, ldc)
            rt.compile(src, meta)(p.bfull, p.cfull, n, ldb, ldc)
            p.check(f'{meta["variant"]} beta={beta}')
            count += 1
    assert count


def test_float32_and_baked(rt, rng):
    A = sample_operator(rng)
    run_all(rt, A, 0.5, np.float32, rng, 777, 780, 777)
    run_all(rt, A, 0.0, np.float64, rng, 130, 131, 136, baked=True)


def test_single_column_and_wide_operator(rt, rng):
    A = random_operator(rng, 3, 40, 0.3)
    run_all(rt, A, 0.0, np.float64, rng, 1, 1, 1)
    run_all(rt, A.T.copy(), 2.0, np.float64, rng, 65, 65, 65)


@pytest.mark.full
@pytest.mark.parametrize('dtype,beta,baked', list(itertools.product(
    [np.float32, np.float64], [0.0, 1.0, 0.3], [False, True])))
def test_sweep(rt, rng, dtype, beta, baked):
    for m, k, d in [(1, 1, 1.0), (20, 15, 0.3), (9, 40, 0.9)]:
        A = random_operator(rng, m, k, d)
        for n, pad in [(1, 0), (63, 1), (1025, 7)][1 if baked else 0:]:
            run_all(rt, A, beta, dtype, rng, n, n + pad, n + 2*pad,
                    baked=baked, full=True)


# -- the contract ---------------------------------------------------------

def test_meta_contract(rng):
    A = sample_operator(rng)
    metas = [meta for _, meta in CMatMul(A).kernels('float64')]
    assert len(metas) == len({m['variant'] for m in metas}) >= 3
    for meta in metas:
        assert meta['block'] == (1, 1, 1)
        assert meta['args'] == ('n', 'b', 'ldb', 'c', 'ldc')
        # the base geometry gives the number of column blocks
        grid, block = MatMul.launch_config(meta, 1000)
        assert grid[0] == -(-1000 // meta['width'])
    baked = next(CMatMul(A, n=10, ldb=12, ldc=10).kernels('float32'))[1]
    assert baked['args'] == ('b', 'c') and baked['grid'][0] >= 1


def test_source_shape(rng):
    A = sample_operator(rng)
    for beta in (0.0, 1.0, 0.5):
        for src, meta in CMatMul(A, beta=beta).kernels('float64',
                                                       kname='my_mm'):
            assert 'void my_mm(int n, const double* restrict b' in src
            assert '#pragma omp parallel for' in src
            assert '#pragma omp simd' in src
            if beta == 0:    # C is only ever stored to, never read
                for line in src.splitlines():
                    assert not re.search(r'=.*\bc\[', line), line


def test_scratch_gate(rng):
    """bstream's accumulators must fit MAX_SCRATCH bytes per thread, and
    its source must stay small enough to compile quickly."""
    A = np.zeros((100, 4))
    A[:, 0] = rng.standard_normal(100)
    A[0, 0] = 1.0
    assert analyse(A).nnz <= BSTREAM_MAX_NNZ
    for dtype in ('float32', 'float64'):
        size = np.dtype(dtype).itemsize
        bwidths = set()
        for _, meta in CMatMul(A).kernels(dtype):
            if meta['tplname'] == 'bstream':
                assert 100*meta['width']*size <= MAX_SCRATCH
                bwidths.add(meta['width'])
        assert bwidths and max(bwidths) < 256
    assert all(f in ('rowblock', 'cstream', 'cstream-row', 'bstream')
               for f in (row.family.name for row in CANDIDATES))
    big = random_operator(rng, 30, 30, 0.9)
    assert analyse(big).nnz > BSTREAM_MAX_NNZ
    families = {m['tplname'] for _, m in CMatMul(big).kernels('float64')}
    assert families == {'rowblock', 'cstream'}
    huge = random_operator(rng, 60, 60, 0.9)
    assert analyse(huge).nnz > UNROLLED_MAX_NNZ
    families = {m['tplname'] for _, m in CMatMul(huge).kernels('float64')}
    assert families == {'rowblock'}


def test_pruning_with_feedback(rng):
    A = sample_operator(rng)
    kgen = CMatMul(A).kernels('float64')
    src, meta = kgen.send(None)
    offered = [meta['variant']]
    try:
        while True:
            t = 1.0 if meta['tplname'] == 'cstream' else 100.0
            src, meta = kgen.send({'runtime': t})
            offered.append(meta['variant'])
    except StopIteration:
        pass
    everything = [m['variant'] for _, m in CMatMul(A).kernels('float64')]
    assert len(offered) < len(everything)
    assert all(v in offered for v in everything if v.startswith('cstream/'))


# -- bad input ---------------------------------------------------------------

def test_bad_input_before_source(rng):
    A = sample_operator(rng)
    with pytest.raises(TypeError, match='dtype'):
        next(CMatMul(A).kernels('float16'))
    with pytest.raises(ValueError, match='kname'):
        next(CMatMul(A).kernels('float64', kname='x; system("rm")'))
    with pytest.raises(TypeError):
        next(CMatMul(A).kernels('float64', gcn_arch='gfx90a'))
    with pytest.raises(ValueError, match='ldb'):
        CMatMul(A, n=10, ldb=9, ldc=10)
    with pytest.raises(ValueError, match='A'):
        CMatMul(np.full((3, 3), np.nan))


def test_runtime_checks(rt, rng):
    A = sample_operator(rng)
    m, k = A.shape
    src, meta = next(CMatMul(A).kernels('float64'))
    launch = rt.compile(src, meta)
    b, c = np.zeros((k, 10)), np.zeros((m, 10))
    with pytest.raises(TypeError, match='b has dtype'):
        launch(b.astype(np.float32), c, 10, 10, 10)
    with pytest.raises(ValueError, match='c must be'):
        launch(b, c[:, ::2], 5, 10, 5)
    with pytest.raises(ValueError, match='n'):
        launch(b, c, 11, 10, 10)
    with pytest.raises(TypeError, match='NumPy'):
        launch(b.tolist(), c, 10, 10, 10)
    with pytest.raises(ValueError, match='read-only'):
        c.flags.writeable = False
        launch(b, c, 10, 10, 10)

    src, meta = next(CMatMul(A, n=10, ldb=10, ldc=10).kernels('float64'))
    baked = rt.compile(src, meta)
    with pytest.raises(ValueError, match='baked'):
        baked(np.zeros((k, 12)), np.zeros((m, 12)), 12, 12, 12)


def test_compile_error_has_log(rt):
    meta = {'kname': 'gimmik_mm', 'dtype': 'float64', 'm': 1, 'k': 1,
            'args': ('b', 'c'), 'n': 1, 'ldb': 1, 'ldc': 1}
    with pytest.raises(RuntimeError, match='rejected'):
        rt.compile('void gimmik_mm(const double* b, double* c) { oops }\n',
                   meta)


def test_runtime_options():
    with pytest.raises(RuntimeUnavailable, match='no C compiler'):
        get_runtime('c', cc='no-such-cc-gimmik')
    with pytest.raises(ValueError, match='march'):
        get_runtime('c', march='native -o /tmp/x')
    with pytest.raises(TypeError, match='cflags'):
        get_runtime('c', cflags='-O0')


# -- the vendor baseline ------------------------------------------------------

@pytest.mark.parametrize('dtype', [np.float64, np.float32])
@pytest.mark.parametrize('beta', [0.0, 1.0, -0.5])
@pytest.mark.parametrize('pad', [0, 3])
def test_vendor_gemm(rt, rng, dtype, beta, pad):
    A = random_operator(rng, 9, 7, 0.5)
    n = 301
    p = Panels(rng, A, beta, dtype, n, n + pad, n + 2*pad)
    rt.vendor_gemm(A, 1.0, beta, dtype)(p.bfull, p.cfull, n, n + pad,
                                        n + 2*pad)
    p.check(f'vendor beta={beta}')


def test_copy_bandwidth_and_time(rt):
    assert rt.copy_bandwidth(1 << 20) > 0
    calls = []
    t = rt.time(lambda: calls.append(1), (), warmup=3, repeats=4)
    assert t >= 0 and len(calls) == 7


def test_prepare_builds_ahead_and_compile_reuses(rng, tmp_path, monkeypatch):
    """prepare() compiles every source not yet built (in parallel); after
    it compile() builds nothing; a source the compiler rejects is left to
    compile() to report."""
    monkeypatch.setenv('GIMMIK_CACHE_DIR', str(tmp_path))
    rt = get_runtime('c')
    A = sample_operator(rng)
    # a kname of its own per test run keeps the sources new to the cache
    kname = f'prep_{rng.integers(1 << 30)}'
    mm = CMatMul(A)
    kernels = [mm.render(c, np.float64, kname)
               for c in mm.candidates('float64')]
    bad = ('void broken(void) { oops }\n', dict(kernels[0][1], kname='broken'))
    rt.prepare(kernels + [bad])
    built = os.listdir(os.path.join(tmp_path, 'c'))
    assert len([f for f in built if f.endswith('.so')]) == len(kernels)

    def no_compiles(*args):
        raise AssertionError('compile() rebuilt a prepared kernel')
    monkeypatch.setattr(rt, '_compile_to', no_compiles)
    n = 70
    for src, meta in kernels:
        p = Panels(rng, A, 0.0, np.float64, n, n, n)
        rt.compile(src, meta)(p.bfull, p.cfull, n, n, n)
        p.check(meta['variant'])
    with pytest.raises(AssertionError, match='rebuilt'):
        rt.compile(*bad)


def test_copy_kernel_copies(rt):
    from gimmik.runtime.c import COPY_SRC
    fn = rt.build(COPY_SRC, 'gimmik_copy').gimmik_copy
    fn.restype = None
    fn.argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    src = np.arange(1001, dtype=np.float64)
    dst = np.full_like(src, np.nan)
    fn(1000, src.ctypes.data, dst.ctypes.data)
    assert np.array_equal(dst[:1000], src[:1000]) and np.isnan(dst[1000])


def test_rowblock_rows_fill_whole_vectors():
    rows = [row.params for row in CANDIDATES if row.family is Rowblock]
    assert rows
    for p in rows:
        for size in (4, 8):
            assert p['vw']*size % ROWBLOCK_VECTOR == 0, p
            # the packed block is a whole number of register tiles
            assert rowblock_width(100, p['width'], p['vw'], size) % p['vw'] == 0


# -- kernel names -------------------------------------------------------------
@pytest.mark.parametrize('kname', ['b', 'n', 'ldc', 'copy_kernel'])
def test_ordinary_knames_build_and_run_on_c(rng, kname):
    """Names that happen to match a kernel's parameters or locals still
    build and compute the right thing."""
    rt = CRuntime()
    mm = gimmik.CMatMul(A_SMALL)
    for src, meta in mm.kernels(np.float64, kname=kname):
        p = Panels(rng, A_SMALL, 0.0, np.float64, 37, 40, 41)
        rt.compile(src, meta)(p.bfull, p.cfull, 37, 40, 41)
        p.check(f'{kname} {meta["variant"]}')
