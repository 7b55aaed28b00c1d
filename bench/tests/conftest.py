"""The lab's tests: the pure parts of the bench scripts, on the CPU.  Run
with `python -m pytest bench/tests` from the repository root."""

import zlib

import numpy as np
import pytest


@pytest.fixture
def rng(request):
    """A generator seeded from the test's name."""
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


def random_operator(rng, m, k, density):
    """An m x k operator with about `density` non-zeros (at least one)."""
    A = rng.standard_normal((m, k))*(rng.random((m, k)) < density)
    A[rng.integers(m), rng.integers(k)] = 1.0
    return A
