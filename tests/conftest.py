"""Shared test helpers: seeded generators, random operators, and (from
gimmik.verify) the panels with poisoned outputs and the NumPy reference
every kernel is checked against."""

import os

import numpy as np
import pytest

from gimmik.verify import Panels, rel_error  # noqa: F401 (shared helpers)

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


@pytest.fixture(autouse=True)
def confirmed_verdicts(monkeypatch):
    """Timings on a shared test machine are noise: every tuning verdict
    counts as confirmed (gimmik.tune.UNSTABLE_FACTOR infinite), except in
    tests of the confirmation, which set the factor back."""
    monkeypatch.setattr('gimmik.tune.UNSTABLE_FACTOR', float('inf'),
                        raising=False)
