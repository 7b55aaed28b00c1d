"""bench/operators/heldout.py: the thinned copies keep A's largest entries."""

import numpy as np

from bench.operators.heldout import thin


def test_thin_keeps_the_largest_quarter(rng):
    A = rng.standard_normal((40, 30))
    B = thin(A, 0.25)
    kept = B != 0
    assert kept.sum() == int(0.25*A.size)
    assert np.array_equal(B[kept], A[kept])
    assert np.abs(A[~kept]).max() <= np.abs(A[kept]).min()


def test_thin_drops_ties_at_the_cut():
    A = np.ones((4, 4))
    A[0, 0] = 2.0
    B = thin(A, 0.5)
    assert np.count_nonzero(B) == 1 and B[0, 0] == 2.0
