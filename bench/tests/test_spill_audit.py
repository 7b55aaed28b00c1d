"""bench/cuda/cuda_spill_audit.candidates: --offered audits what a client
timing N candidates is offered, the start-up cut with n baked included."""

import csv

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


def test_mblock_loads_counts_gated_builds_too(tmp_path):
    """mblock_loads matches an audit's m-block rows to the generator's
    candidates with the loads gate lifted: a build the gate drops gets its
    count, equal to the family's own, and the gate is back afterwards."""
    from bench.cuda import mblock_loads
    from gimmik.families.cstream_mblock import (MAX_GROUP_LOADS,
                                                CstreamMblock)
    A = audit.load_ops(['p7-hex-m0'], False, float('inf'))['p7-hex-m0']
    loads = {v: n for v, (n, _) in
             mblock_loads.loads_of(A, 0.0, 'rt4').items()}
    assert CstreamMblock.max_thread_loads == {'cuda': MAX_GROUP_LOADS}
    over = {v for v, n in loads.items() if n > MAX_GROUP_LOADS}
    assert over and set(loads) - over
    audit_csv = tmp_path / 'audit.csv'
    fields = ['op', 'beta', 'sizes', 'dtype', 'family', 'variant',
              'est_registers', 'minblocks', 'registers', 'spill_stores',
              'error']
    with open(audit_csv, 'w') as f:
        f.write(','.join(fields) + '\n')
        for v in sorted(loads):
            f.write(f'p7-hex-m0,0.0,rt4,f64,cstream-mblock,{v},40,,32,0,\n')
    out = tmp_path / 'loads.csv'
    assert mblock_loads.main([str(audit_csv), '--out', str(out)]) == 0
    with open(out) as f:
        got = {r['variant']: int(r['thread_loads']) for r in csv.DictReader(f)}
    assert got == loads
