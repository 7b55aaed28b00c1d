"""bench/pyfr/pyfr_startup.py's pure parts (which operators an Euler case
hands the generator, duplicate sources counted once, the per-case sums)
and the what-if offers of bench/pyfr/cuts.py."""

import os

import numpy as np
import pytest

from bench import OPERATORS
from bench.pyfr import cuts
from bench.pyfr import pyfr_startup as ps
from gimmik import cuda


def test_startup_operators_follow_pyfrs_filter():
    ops = np.load(os.path.join(OPERATORS, 'pyfr-ops.npz'))
    got = {name: (beta, n, sends) for name, A, beta, n, sends in
           ps.startup_operators(ops, [4], ['hex', 'tet'])}
    assert set(got) == {f'p4-{e}-{m}' for e in ('hex', 'tet')
                        for m in ('m0', 'm132', 'm3')}
    # M3 accumulates (beta = 1); the others overwrite
    assert [got[f'p4-hex-{m}'][0] for m in ('m0', 'm132', 'm3')] == \
        [0.0, 0.0, 1.0]
    # sparse hex operators go to the generator, dense tets to cuBLAS
    assert all(got[f'p4-hex-{m}'][2] for m in ('m0', 'm132', 'm3'))
    assert not any(got[f'p4-tet-{m}'][2] for m in ('m0', 'm132', 'm3'))
    # n: 5 Euler variables times the case's elements padded to 32
    assert got['p4-hex-m0'][1] == 5*ps.CASE_ELEMENTS['hex']
    assert got['p4-tet-m0'][1] % 32 == 0
    assert got['p4-tet-m0'][1] >= 5*ps.CASE_ELEMENTS['tet']


def test_mark_duplicates():
    cands = [{'rank': i, 'src_sha': s} for i, s in enumerate('abab')]
    ps.mark_duplicates(cands)
    assert [c['dup_of'] for c in cands] == ['', '', 0, 1]


def row(pkg, sends, cpu, gen, dup='', etype='tet', err='',
        variant='cstream/ldnc/width1'):
    return {'pkg': pkg, 'etype': etype, 'order': '3', 'sends': sends,
            'cpu_s': cpu, 'gen_s': gen, 'dup_of': dup, 'src_bytes': 2048,
            'error': err, 'variant': variant}


def test_summarise_counts_distinct_compiles_and_modes():
    rows = [row('ours', 'True', '1.0', '0.1'),
            row('ours', 'True', '0', '0.1', dup=0),
            row('ours', 'False', '2.0', '0.2'),
            row('ours', 'False', '', '0.3', err='nvrtc failed'),
            row('up', 'True', '0.5', '0.05')]
    s = ps.summarise(rows)
    shipped, relaxed = s[('tet', 3, 'ours', 'shipped')], \
        s[('tet', 3, 'ours', 'relaxed')]
    assert shipped['ncomp'] == 1 and shipped['cpu_s'] == pytest.approx(1.0)
    assert shipped['gen_s'] == pytest.approx(0.2)
    assert relaxed['ncomp'] == 2 and relaxed['cpu_s'] == pytest.approx(3.0)
    assert relaxed['src_kb'] == pytest.approx(4.0)
    assert s[('tet', 3, 'up', 'shipped')]['cpu_s'] == pytest.approx(0.5)
    # the device estimate scales each family's NVRTC seconds
    other = ps.DEVICE_PER_CPU[None]
    assert relaxed['device_s'] == pytest.approx(3.0*other)
    mma = ps.summarise([row('ours', 'True', '1.0', '0',
                            variant='mma-gemm/kstage2')])
    assert mma[('tet', 3, 'ours', 'shipped')]['device_s'] == \
        pytest.approx(ps.DEVICE_PER_CPU['mma-gemm'])


def pyfr_mm(name, beta=0.0):
    from gimmik.cuda import CUDAMatMul
    A = np.load(os.path.join(OPERATORS, 'pyfr-ops.npz'))[name]
    n = 5*ps.CASE_ELEMENTS[name.split('-')[1]]
    return CUDAMatMul(A, beta=beta, aligne=16, n=n, ldb=n, ldc=n)


@pytest.mark.parametrize('name', ['p3-hex-m0', 'p4-hex-m132', 'p4-tet-m3'])
def test_shipped_is_what_kernels_offers(name):
    mm = pyfr_mm(name)
    got = [c.variant for c in cuts.offered(mm, 'shipped', ps.PYFR_NKERNS)]
    gen = mm.kernels(np.float64, compute_capability=cuts.ARCH)
    want = [meta['variant'] for _, meta in gen][:ps.PYFR_NKERNS]
    assert got == want


def test_cuts_leave_small_operators_alone():
    small = pyfr_mm('p3-hex-m0')                  # 384 non-zeros
    assert small.info.nnz < cuda.BAKED_OFFER_MIN_NNZ
    shipped = cuts.offered(small, 'shipped')
    assert all(cuts.offered(small, cut) == shipped for cut in cuts.CUTS)


def test_cuts_set_the_generators_constants():
    ranked = {}
    for name, beta in (('p4-hex-m6', 1.0), ('p4-pyr-m132', 0.0)):
        mm = pyfr_mm(name, beta)
        ranked[name] = mm, mm.candidates(np.float64,
                                         compute_capability=cuts.ARCH)
    # sparse, 750 non-zeros: the first 3 one-column candidates, 5 wider
    mm, cands = ranked['p4-hex-m6']
    assert cuda.BAKED_OFFER_MIN_NNZ <= mm.info.nnz < cuda.BAKED_MMA_ONLY_NNZ
    one_col = [c for c in cands if c.params.get('width', 1) != 2]
    assert any(c.params.get('width') == 2 for c in cands)
    assert cuts.offered(mm, 'shipped') == one_col[:cuda.BAKED_OFFER]
    assert cuts.offered(mm, 'wider') == one_col[:5]
    assert cuts.offered(mm, 'uncut') == cands
    assert cuts.offered(mm, 'no-mma-only') == cuts.offered(mm, 'shipped')
    # dense, 8913 non-zeros: the tensor-core tiles alone unless the cut
    # lets the unrolled candidates beside them
    mm, cands = ranked['p4-pyr-m132']
    assert mm.info.nnz >= cuda.BAKED_MMA_ONLY_NNZ
    one_col = [c for c in cands if c.params.get('width', 1) != 2]
    mma = [c for c in one_col if c.family == 'mma-gemm']
    assert len(mma) >= 3
    assert cuts.offered(mm, 'shipped') == mma[:cuda.BAKED_OFFER_DENSE]
    assert cuts.offered(mm, 'wider') == mma[:3]
    assert cuts.offered(mm, 'no-mma-only') == \
        one_col[:cuda.BAKED_OFFER_DENSE]
    assert cuts.offered(mm, 'uncut') == cands
    # the constants are back after each cut
    assert (cuda.BAKED_OFFER, cuda.BAKED_OFFER_DENSE) == (3, 2)
    assert cuda.BAKED_MMA_ONLY_NNZ == 1500


def test_knobs_restore_and_refuse_unknown_names():
    before = cuda.BAKED_OFFER
    with pytest.raises(RuntimeError):
        with cuts.knobs({'BAKED_OFFER': 99}):
            assert cuda.BAKED_OFFER == 99
            raise RuntimeError('inside')
    assert cuda.BAKED_OFFER == before
    with pytest.raises(AttributeError):
        with cuts.knobs({'NO_SUCH_CONSTANT': 1}):
            pass
    with pytest.raises(ValueError, match="unknown cut 'x'"):
        cuts.apply_cut(pyfr_mm('p3-hex-m0'), 'x')


@pytest.mark.parametrize('name,cut', [('p3-hex-m0', 'uncut'),
                                      ('p4-hex-m6', 'shipped'),
                                      ('p4-hex-m6', 'wider')])
def test_apply_cut_walks_as_kernels_does(name, cut):
    """The cut's offer walked by kernels() itself: the same pruning by
    send() feedback and the same argument checks."""
    beta = 1.0 if name.endswith('m6') else 0.0

    def walk(gen):
        seen, fb = [], None
        try:
            while True:
                src, meta = gen.send(fb)
                seen.append((meta['variant'], src))
                # the first family fastest: later ones pruned
                fb = {'runtime': 1e-3 if len(seen) == 1 else 5e-3}
        except StopIteration:
            return seen

    mm = pyfr_mm(name, beta)
    offer = cuts.offered(mm, cut)
    cut_mm = cuts.apply_cut(pyfr_mm(name, beta), cut)
    got = walk(cut_mm.kernels(np.float64, kname='k_mm',
                              compute_capability=cuts.ARCH))
    # what the plain walk over the same offer sees
    plain = pyfr_mm(name, beta)
    plain.offered = lambda cands: offer
    want = walk(plain.kernels(np.float64, kname='k_mm',
                              compute_capability=cuts.ARCH))
    assert got == want
    # the offer in order, the slow families' later candidates skipped
    seen = iter(c.variant for c in offer)
    assert got and all(v in seen for v, _ in got)
    assert got[0][0] == offer[0].variant
    if cut == 'shipped':
        assert got == walk(mm.kernels(np.float64, kname='k_mm',
                                      compute_capability=cuts.ARCH))
    with pytest.raises(TypeError):
        next(cut_mm.kernels(np.int32))
    with pytest.raises(ValueError):
        next(cut_mm.kernels(np.float64, kname='bad name'))
