"""Shared test helpers: fresh random panels, poisoned outputs and the NumPy
reference every kernel is checked against."""

import os

import numpy as np
import pytest

# Relative error allowed against the float64 NumPy reference
RTOL = {np.float64: 1e-13, np.float32: 1e-5}


def pytest_addoption(parser):
    parser.addoption('--full', action='store_true',
                     help='run the exhaustive sweeps (also GIMMIK_FULL=1)')


def pytest_configure(config):
    config.addinivalue_line('markers', 'full: exhaustive, only with --full')
    config.addinivalue_line('markers', 'gpu: runs on a CUDA device; skipped '
                            'where the cuda runtime cannot run')


def pytest_collection_modifyitems(config, items):
    if config.getoption('--full') or os.environ.get('GIMMIK_FULL') == '1':
        return
    skip = pytest.mark.skip(reason='exhaustive: run with --full')
    for item in items:
        if 'full' in item.keywords:
            item.add_marker(skip)


def full_run(config):
    return config.getoption('--full') or os.environ.get('GIMMIK_FULL') == '1'


class Panels:
    """B (k x n, row stride ldb) and C (m x n, row stride ldc) cut from
    larger arrays whose padding is filled with a sentinel, plus the float64
    reference for C = A*B + beta*C.  With beta == 0 C starts as NaN, so an
    element the kernel does not write fails."""

    SENTINEL = 1234.5

    def __init__(self, rng, A, beta, dtype, n, ldb=None, ldc=None):
        m, k = A.shape
        ldb, ldc = ldb or n, ldc or n
        self.dtype, self.n, self.beta = dtype, n, beta
        self.bfull = np.full((k, ldb), self.SENTINEL, dtype)
        self.cfull = np.full((m, ldc), self.SENTINEL, dtype)
        self.bfull[:, :n] = rng.standard_normal((k, n))
        self.cfull[:, :n] = rng.standard_normal((m, n))
        self.b = self.bfull[:, :n]
        self.c = self.cfull[:, :n]
        self.b0 = self.bfull.copy()
        self.ref = A @ self.b.astype(np.float64) \
            + beta*self.c.astype(np.float64)
        if beta == 0:
            self.c[...] = np.nan

    def check(self, what=''):
        """Assert C matches the reference and B and the padding are intact."""
        err = rel_error(self.c, self.ref)
        assert err <= RTOL[self.dtype], f'{what}: relative error {err:.3g}'
        assert np.array_equal(self.bfull, self.b0), f'{what}: B was modified'
        pad = self.cfull[:, self.n:]
        assert (pad == self.SENTINEL).all(), f'{what}: C padding was written'


def rel_error(c, ref):
    """max |c - ref| / max |ref|; NaN anywhere in c gives inf."""
    c = np.asarray(c, dtype=np.float64)
    if not np.isfinite(c).all():
        return np.inf
    scale = max(np.abs(ref).max(), np.finfo(np.float64).tiny)
    return float(np.abs(c - ref).max() / scale)


def random_operator(rng, m, k, density, pool=None):
    """A random m x k operator with about `density` non-zeros (at least
    one), values drawn from `pool` distinct values when given."""
    mask = rng.random((m, k)) < density
    mask[rng.integers(m), rng.integers(k)] = True
    if pool:
        vals = rng.choice(rng.standard_normal(pool), size=(m, k))
    else:
        vals = rng.standard_normal((m, k))
    return np.where(mask, vals, 0.0)


@pytest.fixture
def rng(request):
    """A fresh generator per test, seeded from the test's name and the
    GIMMIK_SEED environment variable (random when unset)."""
    seed = os.environ.get('GIMMIK_SEED')
    seed = int(seed) if seed else np.random.SeedSequence().entropy
    print(f'GIMMIK_SEED={seed}')  # shown when the test fails
    return np.random.default_rng([seed, abs(hash(request.node.name)) % 2**32])
