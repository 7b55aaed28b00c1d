"""What-if start-up offers: CUDAMatMul.offered (the start-up cut of an
operator with n baked) with its constants in gimmik.cuda set otherwise,
for measuring a cut at start-up (bench/pyfr/pyfr_startup.py) and inside
PyFR (bench/pyfr/pyfr_steps.py --cut) before the generator changes.
Imports only gimmik: pyfr_steps applies a cut inside a PyFR venv."""

import contextlib
import math

import numpy as np

from gimmik import cuda

ARCH = (9, 0)

# Cut name -> the gimmik.cuda constants it sets; 'shipped' is the offer
CUTS = {
    'shipped': {},
    # every ranked candidate: no start-up cut
    'uncut': {'BAKED_OFFER_MIN_NNZ': math.inf},
    # sparse operators offered their first 5, dense their first 3
    'wider': {'BAKED_OFFER': 5, 'BAKED_OFFER_DENSE': 3},
    # dense operators keep their unrolled candidates beside the tiles
    'no-mma-only': {'BAKED_MMA_ONLY_NNZ': math.inf},
}


@contextlib.contextmanager
def knobs(values):
    """gimmik.cuda's constants set to `values` inside the block."""
    old = {k: getattr(cuda, k) for k in values}     # a renamed one raises
    try:
        for k, v in values.items():
            setattr(cuda, k, v)
        yield
    finally:
        for k, v in old.items():
            setattr(cuda, k, v)


def cut_offer(mm, cut, cands):
    """What mm's class offers of the ranked `cands` under `cut`."""
    with knobs(CUTS[cut]):
        return type(mm).offered(mm, cands)


def apply_cut(mm, cut):
    """mm's kernels() from now on offers what `cut` offers (the same
    checks, the same walk and pruning by send() feedback)."""
    if cut not in CUTS:
        raise ValueError(f'unknown cut {cut!r}; cuts: {", ".join(CUTS)}')
    mm.offered = lambda cands: cut_offer(mm, cut, cands)
    return mm


def offered(mm, cut, nkerns=None, dtype=np.float64, **opts):
    """The candidates mm's kernels() offers under `cut`, no feedback: the
    first nkerns (None: all).  opts: kernels()'s (default
    compute_capability=ARCH)."""
    cands = mm.candidates(dtype, **(opts or {'compute_capability': ARCH}))
    return cut_offer(mm, cut, cands)[:nkerns]
