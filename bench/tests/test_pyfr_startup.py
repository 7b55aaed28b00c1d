"""bench/pyfr/pyfr_startup.py's pure parts: which operators an Euler case hands
the generator, duplicate sources counted once, and the per-case sums."""

import os
import sys

import numpy as np
import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'bench')
sys.path.insert(0, os.path.join(BENCH, 'pyfr'))

import pyfr_startup as ps  # noqa: E402


def test_startup_operators_follow_pyfrs_filter():
    ops = np.load(os.path.join(BENCH, 'operators', 'pyfr-ops.npz'))
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
    A = np.load(os.path.join(BENCH, 'operators', 'pyfr-ops.npz'))[name]
    n = 5*ps.CASE_ELEMENTS[name.split('-')[1]]
    return CUDAMatMul(A, beta=beta, aligne=16, n=n, ldb=n, ldc=n)


@pytest.mark.parametrize('name', ['p3-hex-m0', 'p4-hex-m132', 'p4-tet-m3'])
def test_shipped_is_what_kernels_offers(name):
    mm = pyfr_mm(name)
    got = [c.variant for c in ps.offered(mm, 'shipped')]
    gen = mm.kernels(np.float64, compute_capability=ps.ARCH)
    want = [meta['variant'] for _, meta in gen][:ps.PYFR_NKERNS]
    assert got == want


def test_cuts_apply_to_their_gates_only():
    small = pyfr_mm('p3-hex-m0')                  # 384 non-zeros
    assert not ps.cut_gates(small)['big']
    assert [c.variant for c in ps.offered(small, 'no-width2+dense3')] == \
        [c.variant for c in ps.offered(small, 'as-is')]
    big = pyfr_mm('p4-hex-m6', 1.0)               # sparse, 750 non-zeros
    assert ps.cut_gates(big) == {'big': True, 'big-dense': False,
                                 'large-dense': False}
    as_is = ps.offered(big, 'as-is')
    cut = ps.offered(big, 'no-width2')
    assert any(c.params.get('width') == 2 for c in as_is)
    assert not any(c.params.get('width') == 2 for c in cut)
    assert len(cut) == len(as_is)                 # the next ones move up
    assert ps.offered(big, 'dense3') == as_is
    dense = pyfr_mm('p4-tet-m3', 1.0)
    assert ps.cut_gates(dense)['big-dense']
    assert ps.offered(dense, 'dense3') == ps.offered(dense, 'as-is')[:3]


def test_dense_mma2_keeps_the_tensor_core_tiles():
    dense = pyfr_mm('p4-tet-m3', 1.0)
    got = ps.offered(dense, 'dense-mma2')
    assert len(got) == 2 and all(c.family == 'mma-gemm' for c in got)
    mma = [c for c in ps.offered(dense, 'as-is') if c.family == 'mma-gemm']
    assert got == mma[:2]
    # an operator without tensor-core rows keeps its candidates
    sparse = pyfr_mm('p4-hex-m132')
    assert ps.offered(sparse, 'dense-mma2') == ps.offered(sparse, 'as-is')


def test_proposal():
    sparse = pyfr_mm('p4-hex-m132')
    got = ps.offered(sparse, 'proposal')
    assert got == ps.offered(sparse, 'no-width2')[:3]
    small_dense = pyfr_mm('p3-tet-m132')          # 1092 non-zeros
    assert ps.offered(small_dense, 'proposal') == \
        ps.offered(small_dense, 'no-width2+dense2')
    large_dense = pyfr_mm('p4-pyr-m132')          # 8913 non-zeros
    assert ps.cut_gates(large_dense)['large-dense']
    assert ps.offered(large_dense, 'proposal') == \
        ps.offered(large_dense, 'dense-mma2')
    # the proposal is what the generator offers now
    for mm in (sparse, small_dense, large_dense):
        assert ps.offered(mm, 'proposal') == ps.offered(mm, 'shipped')
    small = pyfr_mm('p3-hex-m0')
    assert ps.offered(small, 'proposal') == ps.offered(small, 'as-is')


def test_cut_kernels_as_is_walks_as_kernels_does():
    """The same offer and the same pruning by send() feedback."""
    mm = pyfr_mm('p3-hex-m0')

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

    want = walk(mm.kernels(np.float64, kname='k_mm',
                           compute_capability=ps.ARCH))
    got = walk(ps.cut_kernels(mm, 'as-is', np.float64, kname='k_mm',
                              compute_capability=ps.ARCH))
    assert got == want
    assert len(want) < len(ps.offered(mm, 'as-is', None))
    with pytest.raises(TypeError):
        ps.cut_kernels(mm, 'as-is', np.int32)
    with pytest.raises(ValueError):
        ps.cut_kernels(mm, 'as-is', np.float64, kname='bad name')
