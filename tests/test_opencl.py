"""OpenCLMatMul's kernels on a real OpenCL device (PoCL's CPU device, from
the test extra, where no other has a driver): every candidate exact
against float64 NumPy with C poisoned first, n baked and at run time, as
PyFR's OpenCL backend drives the generator (gimmik.pyfr)."""

import numpy as np
import pytest

from conftest import Panels, random_operator
from gimmik import OpenCLMatMul
from gimmik.operators import default_beta, suite
from gimmik.pyfr import PROTOCOLS, walk

opencl = pytest.importorskip('gimmik.runtime.opencl')


@pytest.fixture(scope='module', autouse=True)
def device():
    try:
        return opencl.device_context(fp64=True)
    except (opencl.RuntimeUnavailable, ImportError) as e:
        pytest.skip(str(e))


def run_all(rng, A, dtype, beta, baked, n=301, aligne=4):
    """Every candidate of A run and checked; the variants."""
    lb, lc = (-(-(n + p) // aligne)*aligne for p in (3, 9))
    kw = dict(n=n, ldb=lb, ldc=lc) if baked else {}
    mm = OpenCLMatMul(A, beta=beta, aligne=aligne, **kw)
    seen = []
    for src, meta in mm.kernels(dtype):
        assert '__kernel' in src and 'extern' not in src
        p = Panels(rng, A, beta, dtype, n, lb, lc,
                   alignb=aligne*np.dtype(dtype).itemsize)
        opencl.run_opencl(src, meta, p.b, p.c)
        p.check(f"{meta['variant']} {np.dtype(dtype).name} beta={beta} "
                f'baked={baked}')
        seen.append(meta['variant'])
    return seen


COMBOS = [(dtype, beta, baked) for dtype in (np.float64, np.float32)
          for beta in (0.0, 1.0, -0.5) for baked in (True, False)]
# by default each dtype, beta and n mode at least once; all with --full
DEFAULT = {(np.float64, 0.0, True), (np.float64, 1.0, False),
           (np.float32, -0.5, True), (np.float32, 0.0, False)}


@pytest.mark.parametrize('dtype,beta,baked', [
    c if c in DEFAULT else pytest.param(*c, marks=pytest.mark.full)
    for c in COMBOS])
def test_every_candidate_random_operator(rng, dtype, beta, baked):
    A = random_operator(rng, 40, 27, 0.3)
    seen = run_all(rng, A, dtype, beta, baked)
    families = {v.split('/')[0] for v in seen}
    assert {'cstream', 'bstream', 'bstream-msplit',
            'cstream-ksplit'} <= families
    assert any('width2' in v for v in seen)
    # the k-split in passes (40 rows: passes of 16 and of 32)
    assert {'cstream-ksplit/chunk16/ksplit2',
            'cstream-ksplit/chunk32/ksplit2'} <= set(seen)
    # four parts in passes of 16: not a row of OpenCL's table
    assert 'cstream-ksplit/chunk16/ksplit4' not in seen


def test_no_alignment_one_column_a_thread(rng):
    A = random_operator(rng, 20, 12, 0.4)
    seen = run_all(rng, A, np.float64, 1.0, False, aligne=1)
    assert seen and not any('width2' in v for v in seen)


def pyfr_operators():
    """The smallest and largest operator of each matrix kind PyFR's
    OpenCL backend sends (nnz <= its gimmik-max-nnz)."""
    proto = PROTOCOLS['3.1', 'opencl']
    ops = {k: A for k, A in suite().items() if proto.sends(A)}
    out = set()
    for mat in ('m0', 'm3', 'm6', 'm132', 'm460'):
        kind = sorted((A.size, k) for k, A in ops.items()
                      if k.endswith('-' + mat))
        if kind:
            out.update({kind[0][1], kind[-1][1]})
    return sorted(out)


@pytest.mark.parametrize('name', pyfr_operators())
def test_pyfr_opencl_walk(rng, name):
    """PyFR's OpenCL provider (3.1 and main alike): n, ldb, ldc baked,
    local_mem_size from the device, meta['global_work_size'] and
    meta['local_work_size'] launched, eight candidates at most."""
    A = suite()[name]
    proto = PROTOCOLS['main', 'opencl']
    assert proto.sends(A)
    n = 1000
    beta = default_beta(name)
    aligne = proto.aligne(np.float64)
    lb = lc = -(-n // aligne)*aligne
    mm = proto.generator(A, beta, aligne, n, lb, lc)
    kgen = proto.kernels(mm, np.float64, kname='gimmik_mm_op',
                         local_mem_size=48*1024)

    def time_candidate(src, meta):
        assert meta['args'] == proto.args
        grid, block = proto.launch(meta, n)
        assert tuple(meta['global_work_size']) == tuple(
            g*b for g, b in zip(grid, block))
        p = Panels(rng, A, beta, np.float64, n, lb, lc, alignb=128)
        opencl.run_opencl(src, meta, p.b, p.c, grid=grid)
        p.check(f"{name} {meta['variant']}")
        return 1.0

    res = walk(proto, kgen, time_candidate)
    assert 2 <= len(res['seen']) <= proto.nkerns


def test_one_work_group_short_fails(rng):
    A = random_operator(rng, 16, 10, 0.5)
    n = 500
    mm = OpenCLMatMul(A, beta=0.0, n=n, ldb=n, ldc=n)
    src, meta = next(iter(mm.kernels(np.float64)))
    grid, _ = PROTOCOLS['3.1', 'opencl'].launch(meta, n)
    p = Panels(rng, A, 0.0, np.float64, n)
    opencl.run_opencl(src, meta, p.b, p.c, grid=(grid[0] - 1, *grid[1:]))
    with pytest.raises(AssertionError, match='relative error'):
        p.check('one work-group short')


def test_local_memory_bounds_the_offer():
    A = np.random.default_rng(3).standard_normal((30, 30))
    mm = OpenCLMatMul(A, beta=0.0)
    roomy = mm.candidates(np.float64, local_mem_size=64*1024)
    tight = mm.candidates(np.float64, local_mem_size=0)
    assert any(mm.kernel(c, np.float64).geometry().shared for c in roomy)
    assert tight and all(
        mm.kernel(c, np.float64).geometry().shared == 0 for c in tight)
    for bad in (-1, 1.5, True, 'big'):
        with pytest.raises(ValueError, match='local_mem_size'):
            mm.candidates(np.float64, local_mem_size=bad)
