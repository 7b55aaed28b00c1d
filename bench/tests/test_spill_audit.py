"""bench/cuda/cuda_spill_audit.candidates: --offered audits what a client
timing N candidates is offered, the start-up cut with n baked included."""

import numpy as np

from bench.cuda import cuda_spill_audit as audit
from gimmik import CUDAMatMul
from gimmik.cuda import BAKED_OFFER_MIN_NNZ


def test_offered_is_the_first_n_of_kernels_offer():
    rng = np.random.default_rng(5)
    A = rng.standard_normal((60, 60))*(rng.random((60, 60)) < 0.2)
    assert np.count_nonzero(A) >= BAKED_OFFER_MIN_NNZ
    baked = audit.SIZES['baked']
    mm = CUDAMatMul(A, beta=0.0, **baked)
    want = [m['variant'] for _, m in mm.kernels(np.float64)][:8]
    got = audit.candidates(A, 0.0, baked, (9, 0), offered=8)
    assert [v for _, v, *_ in got] == want
    every = audit.candidates(A, 0.0, baked, (9, 0))
    assert len(every) > len(got)       # the start-up cut: fewer offered
