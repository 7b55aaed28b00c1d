"""gimmik.verify: the per-element error measure."""

import numpy as np

from gimmik.verify import rel_error


# -- the correctness check ----------------------------------------------------
def test_rel_error_is_per_element():
    ref = np.array([[1e9, 2e9], [1e-9, -2e-9]])
    scale = np.abs(ref)
    assert rel_error(ref, ref, scale) == 0
    zeroed = ref.copy()
    zeroed[1] = 0
    flipped = ref.copy()
    flipped[1] *= -1
    for bad in (zeroed, flipped):
        assert rel_error(bad, ref) >= 1            # per-row default scale
        assert rel_error(bad, ref, scale) >= 1
    nudged = ref*(1 + 1e-15)
    assert rel_error(nudged, ref, scale) < 1e-14
    # where the reference and its scale are zero, only zero passes
    z = np.zeros((2, 2))
    assert rel_error(z, z, z) == 0 and rel_error(z + 1e-300, z, z) == np.inf
    assert rel_error(np.full((2, 2), np.nan), ref) == np.inf
