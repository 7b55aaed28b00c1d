"""Every CUDA candidate run on a CUDA device (marked gpu; skipped where the
cuda runtime cannot run): random operators that between them offer every
family, f64 with beta 0, 1 and -0.5 and f32, odd n (a ragged pair), padded
row strides, n as an argument and baked; each output starts poisoned (NaN
when beta is 0), is checked against float64 NumPy and must leave the
padding of C alone.  Candidates are built through the runtime's prepare()
(batched nvcc runs).  GIMMIK_CHECK_FAMILIES=f1,f2 limits the families.

    python -m pytest -m gpu tests/test_cuda_gpu.py
"""

import os

import numpy as np
import pytest

from conftest import Panels
from gimmik.cuda import CUDAMatMul
from gimmik.runtime import RuntimeUnavailable

pytestmark = pytest.mark.gpu

OPERATORS = ('dense-84x252', 'dense-45x37', 'dense-150x70', 'sparse-40x30',
             'sparse-200x90', 'zero-rows-24x16')
CONFIGS = ((np.float64, 0.0), (np.float64, 1.0), (np.float64, -0.5),
           (np.float32, 0.0))


@pytest.fixture(scope='module')
def rt():
    try:
        from gimmik.runtime.cuda import Runtime
        return Runtime()
    except RuntimeUnavailable as e:
        pytest.skip(f'no CUDA device: {e}')


def operator(name, rng):
    def sparse(m, k, d):
        A = rng.standard_normal((m, k))*(rng.random((m, k)) < d)
        A[0, 0] = 1.5
        return A
    m, k = (int(x) for x in name.rsplit('-', 1)[1].split('x'))
    if name.startswith('dense'):
        return rng.standard_normal((m, k))
    if name.startswith('sparse'):
        return sparse(m, k, 0.2 if m < 100 else 0.05)
    return np.vstack([sparse(m // 2, k, 0.4), np.zeros((m - m // 2, k))])


def slow_to_build(name, dtype, beta, baked):
    """The large dense operators' streaming kernels take nvcc long: they
    are checked in fewer configurations."""
    return name.startswith(('dense-84', 'dense-150')) and (
        dtype == np.float32 or baked == (beta != -0.5))


@pytest.mark.parametrize('baked', [False, True], ids=['runtime-n', 'baked'])
@pytest.mark.parametrize('dtype,beta', CONFIGS,
                         ids=[f'{np.dtype(d).name}-beta{b:g}'
                              for d, b in CONFIGS])
@pytest.mark.parametrize('name', OPERATORS)
def test_every_candidate_on_the_device(rt, rng, name, dtype, beta, baked):
    if slow_to_build(name, dtype, beta, baked):
        pytest.skip('checked in fewer configurations (slow to build)')
    families = os.environ.get('GIMMIK_CHECK_FAMILIES')
    families = set(families.split(',')) if families else None
    A = operator(name, rng)
    n = int(rng.integers(900, 1300)) | 1        # odd: a ragged pair
    ld = n + 7 + (n + 7) % 2
    sizes = dict(n=n, ldb=ld, ldc=ld) if baked else {}
    mm = CUDAMatMul(A, beta=beta, aligne=2, **sizes)
    kernels = [(src, meta) for src, meta in
               mm.kernels(dtype, **rt.kernel_options())
               if families is None or meta['tplname'] in families]
    if not kernels:
        pytest.skip('no candidate of the selected families')
    rt.prepare(kernels)
    failures = []
    for src, meta in kernels:
        p = Panels(rng, A, beta, dtype, n, ld, ld)
        try:
            launch = rt.compile(src, meta)
            b, c = rt.upload(p.bfull), rt.upload(p.cfull)
            launch(b, c, n, ld, ld)
            rt.download(c, p.cfull)
            p.check(meta['variant'])
        except Exception as e:
            failures.append(f'{meta["variant"]}: {type(e).__name__}: '
                            f'{str(e)[:300]}')
    assert not failures, '\n'.join(failures)
