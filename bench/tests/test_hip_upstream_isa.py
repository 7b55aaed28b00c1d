"""bench/hip_offline/hip_upstream_isa.py: the vector types declared for
upstream's sources, the identical-source detection and the per-column
arithmetic (PyFR's HIP filter: tests/test_pyfr_replay.py); with clang, an
upstream-style width-2 kernel compiled through gimmik.isa; with upstream
GiMMiK 4.0 present, its wasted slots found."""

import os
import sys

import numpy as np
import pytest

from bench import OPERATORS
from bench.hip_offline import hip_upstream_isa as hu
from gimmik import isa
from gimmik.runtime import RuntimeUnavailable


def test_vector_types_declared_as_named():
    decl = hu.vector_type('double', 2)
    assert 'aligned(16)' in decl and 'operator+=' in decl
    assert 'x += o.x; y += o.y;' in decl and 'make_double2(double x' in decl
    assert 'aligned(16)' in hu.vector_type('float', 4)
    assert 'aligned(8)' in hu.vector_type('float', 2)
    for bad in (('double', 3), ('half', 2), ('int', 4)):
        with pytest.raises(ValueError, match='no HIP vector type'):
            hu.vector_type(*bad)

    src = 'double2 a = make_double2(1, 2); double x;'
    out = hu.with_vector_types(src)
    assert out.endswith(src) and 'struct __attribute__((aligned(16))) ' \
        'double2' in out and 'float2' not in out
    # names that merely contain a type name declare nothing
    assert hu.with_vector_types('my_double2 = double22;') == \
        'my_double2 = double22;'
    both = hu.with_vector_types('float2 a; double2 b;')
    assert both.count('struct') == 2


def test_duplicates_name_the_first_identical_source():
    cands = [('a', 's1'), ('b', 's2'), ('c', 's1'), ('d', 's1'),
             ('e', 's2 '), ('f', 's2')]
    assert hu.duplicates(cands) == [('c', 'a'), ('d', 'a'), ('f', 'b')]
    assert hu.duplicates([]) == []


def test_per_column_arithmetic():
    rep = {'instructions': 300, 'global_loads': {8: 3, 16: 2},
           'global_stores': {16: 4}}
    # 64 x 4 lanes, two columns each: one lane's code covers two columns
    meta = {'block': (64, 4, 1), 'width': 2}
    assert hu.lane_columns(meta) == 2
    assert hu.moved_bytes(rep) == 3*8 + 2*16 + 4*16
    assert hu.per_column(rep, meta) == (150, 60)
    # a block whose columns are not block x * width
    meta = {'block': (128, 1, 1), 'width': 1, 'cols_per_block': 512}
    assert hu.lane_columns(meta) == 4
    assert hu.per_column(rep, meta) == (75, 30)


def test_ideal_bytes_count_used_rows_of_b_and_rows_of_c():
    A = np.array([[1., 0, 0, 2], [0, 3, 0, 0], [0, 0, 0, 0]])
    assert hu.ideal_bytes_col(A, 0.0, 8) == 8*(3 + 3)
    assert hu.ideal_bytes_col(A, 1.0, 8) == 8*(3 + 6)
    assert hu.ideal_bytes_col(A, -0.5, 4) == 4*(3 + 6)


def _rep(waves, scratch, instr=100, loads=None):
    return {'occupancy': waves, 'scratch_bytes': scratch,
            'instructions': instr, 'global_loads': loads or {8: 10},
            'global_stores': {8: 5}, 'vgprs': 64, 'agprs': 0, 'sgprs': 20,
            'lds_bytes': 0, 'vmcnt0': 1}


def test_side_stats_counts_distinct_candidates_only():
    w1 = {'block': (128, 1, 1), 'width': 1}
    w2 = {'block': (64, 2, 1), 'width': 2}
    first = [('a', 'sa', w1, _rep(4, 0, 200)),
             ('b', 'sb', w2, _rep(1, 0, 100, {16: 30})),
             ('c', 'sa', w1, _rep(4, 0, 200)),      # identical to a
             ('d', 'sd', w1, _rep(2, 96, 50)),
             ('e', 'se', w1, isa.IsaError('clang failed'))]
    st = hu.side_stats(12, first, ideal=150)
    assert st['offered'] == 12 and st['distinct8'] == 4
    assert st['best_waves'] == 4 and st['worst_scratch'] == 96
    assert st['zs2'] == 1 and st['all_bad'] == 0 and st['errors'] == 1
    assert st['dups'] == 'c=a'
    # b: 100 instructions over 2 columns; d: 50 over one
    assert st['min_instr_col'] == 50
    # a: (80 + 40) bytes; b: (480 + 40) / 2; d: 120
    assert st['min_bytes_col'] == 120 and st['below_ideal'] == 2

    bad = hu.side_stats(2, [('a', 'sa', w1, _rep(1, 0)),
                            ('b', 'sb', w1, _rep(3, 8)),
                            ('c', 'sc', w1, RuntimeError('x'))])
    assert bad['all_bad'] == 1 and bad['zs2'] == 0


def test_rows_and_summary():
    A = np.array([[1., 0], [0, 2]])
    w1 = {'block': (128, 1, 1), 'width': 1}
    good = [(f'g{i}', f's{i}', w1, _rep(4, 0)) for i in range(4)]
    spills = [('s', 's', w1, _rep(2, 64)), ('t', 's', w1, _rep(2, 64))]
    rows = [hu.operator_row('op1', A, 0.0, 'gfx942',
                            hu.side_stats(1, spills), hu.side_stats(8, good)),
            hu.operator_row('op2', A, 0.0, 'gfx942',
                            hu.side_stats(8, good), hu.side_stats(8, good)),
            hu.operator_row('op3', A, 0.0, 'gfx90a',
                            hu.side_stats(8, good), hu.side_stats(1, spills))]
    assert set(rows[0]) == set(hu.FIELDS)
    assert rows[0]['ours_distinct8'] == 1 and rows[0]['ours_dups'] == 't=s'
    assert rows[0]['ideal_bytes_col'] == 8*(2 + 2)
    text = '\n'.join(hu.summary(rows, 'gfx942'))
    assert 'gfx942: 2 operators' in text
    assert '< 4 distinct candidates in the first 8: ours on 1, upstream ' \
        'on 0' in text
    assert 'spills or runs 1 wave/SIMD: ours on 1, upstream on 0' in text
    assert 'fewer than 3 zero-scratch candidates at >= 2 waves: ours on ' \
        '1, upstream on 0' in text
    assert "none in ours: 1 (op1)" in text
    assert "none in upstream's: 0" in text
    assert 'op3' not in text
    cands = hu.candidate_rows('op1', 'gfx942', 'ours', spills
                              + [('e', 'x', w1, isa.IsaError('bad\nmore'))])
    assert [c['dup_of'] for c in cands] == ['', 's', '']
    assert cands[0]['scratch'] == 64 and cands[2]['error'] == 'bad'
    assert all(set(c) <= set(hu.CAND_FIELDS) for c in cands)


def _clang_or_skip():
    try:
        isa.find_clang()
    except RuntimeUnavailable as e:
        pytest.skip(str(e))


UPSTREAM_STYLE = '''\
inline __device__ double2 operator+(double2 a, double2 b)
{ return make_double2(a.x + b.x, a.y + b.y); }
inline __device__ double2 operator*(double a, double2 b)
{ return make_double2(a*b.x, a*b.y); }
__global__ __launch_bounds__(128) void
gimmik_mm_2x2(const double2* __restrict__ b, double2* __restrict__ c)
{
    const int i = blockDim.x*blockIdx.x + threadIdx.x;
    double2 acc = 0.5*b[i];
    acc += 2.0*b[i + 1024];
    c[i] = acc + b[i];
}
'''


def test_upstream_style_vector_source_compiles():
    """HIP vector arithmetic as upstream writes it, through gimmik.isa's
    prelude: 16-byte loads and stores, no scratch."""
    _clang_or_skip()
    rep = isa.inspect(hu.with_vector_types(UPSTREAM_STYLE), 'gfx942')
    assert rep['scratch_bytes'] == 0 and rep['flat_ops'] == 0
    assert rep['global_loads'] == {16: 2} and rep['global_stores'] == {16: 1}


@pytest.mark.skipif(hu.find_upstream() is None,
                    reason='upstream GiMMiK 4.0 not present (.upstream/)')
def test_upstream_beta0_preload_slots_are_copies(monkeypatch):
    """Upstream's first 8 for a PyFR operator at beta 0 repeat sources;
    at beta 1 they do not."""
    from bench import upstream as upl
    # load afresh, whatever another test loaded before
    monkeypatch.setattr(upl, '_loaded', {})
    for k in [k for k in sys.modules if upl._is_pkg(k, upl.UP_NAME)]:
        monkeypatch.delitem(sys.modules, k)
    up = upl.load_upstream(hu.find_upstream())
    A = np.load(os.path.join(OPERATORS, 'pyfr-ops.npz'))['p1-hex-m0']
    n = hu.N_DEFAULT
    for beta, want in ((0.0, True), (1.0, False)):
        mm = up.hip.HIPMatMul(A, beta=beta, aligne=16, n=n, ldb=n, ldc=n)
        first = hu.offered(mm, 'gimmik_mm_k', 'gfx942')[:8]
        dups = hu.duplicates([(v, s) for v, s, _ in first])
        assert bool(dups) == want
        assert all('preload' in v and 'preload' not in w for v, w in dups)
