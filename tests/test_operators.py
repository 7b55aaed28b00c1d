"""The PyFR operator suite and the operator loaders."""

import json

import numpy as np
import pytest

from gimmik.operators import (OperatorNameError, default_beta, export_mtx,
                              load_operator, parse_name, provenance,
                              read_mtx, suite, suite_names, write_mtx)

from conftest import random_operator

ORDERS = range(1, 7)
ELEMENTS = ('quad', 'tri', 'hex', 'tet', 'pri', 'pyr')
MATRICES = ('m0', 'm3', 'm6', 'm132', 'm460')

# solution points per element at order p, flux points per element
NUPTS = {'quad': lambda p: (p + 1)**2,
         'tri': lambda p: (p + 1)*(p + 2)//2,
         'hex': lambda p: (p + 1)**3,
         'tet': lambda p: (p + 1)*(p + 2)*(p + 3)//6,
         'pri': lambda p: (p + 1)**2*(p + 2)//2,
         'pyr': lambda p: (p + 1)*(p + 2)*(2*p + 3)//6}
NFPTS = {'quad': lambda p: 4*(p + 1),
         'tri': lambda p: 3*(p + 1),
         'hex': lambda p: 6*(p + 1)**2,
         'tet': lambda p: 4*(p + 1)*(p + 2)//2,
         'pri': lambda p: 2*(p + 1)*(p + 2)//2 + 3*(p + 1)**2,
         'pyr': lambda p: 4*(p + 1)*(p + 2)//2 + (p + 1)**2}
NDIMS = {'quad': 2, 'tri': 2, 'hex': 3, 'tet': 3, 'pri': 3, 'pyr': 3}


@pytest.fixture(scope='module')
def pyfr():
    return suite()


def expected_shape(order, element, matrix):
    nu, nf = NUPTS[element](order), NFPTS[element](order)
    d = NDIMS[element]
    return {'m0': (nf, nu), 'm3': (nu, nf), 'm6': (d*nu, nf),
            'm132': (nu, d*nu), 'm460': (d*nu, nu)}[matrix]


def test_suite_is_complete(pyfr):
    want = {f'p{p}-{e}-{m}' for p in ORDERS for e in ELEMENTS
            for m in MATRICES}
    assert set(pyfr) == want
    for name, A in pyfr.items():
        assert A.dtype == np.float64 and A.flags.c_contiguous
        assert A.shape == expected_shape(*parse_name(name)), name
        assert np.isfinite(A).all() and A.any(), name


def test_suite_mathematics(pyfr):
    """Properties the operators have whatever the point sets."""
    for p in ORDERS:
        for e in ELEMENTS:
            m0 = pyfr[f'p{p}-{e}-m0']
            # interpolation reproduces constants: rows of M0 sum to 1
            assert np.allclose(m0.sum(axis=1), 1, atol=1e-8), (p, e)
            # the gradient of a constant vanishes: with the common values
            # at the flux points equal to the constant, M460 u + M6 u_f = 0
            m460, m6 = pyfr[f'p{p}-{e}-m460'], pyfr[f'p{p}-{e}-m6']
            assert np.allclose(m460.sum(axis=1) + m6.sum(axis=1), 0,
                               atol=1e-8), (p, e)
    # tensor-product elements are sparse, simplices dense
    assert (pyfr['p6-hex-m0'] != 0).mean() < 0.05
    assert (pyfr['p3-tet-m0'] != 0).mean() == 1


def test_suite_is_cleaned_like_pyfr(pyfr):
    """PyFR flushes |a| < 1e-10 to zero before handing A to GiMMiK."""
    for name, A in pyfr.items():
        nz = np.abs(A[A != 0])
        assert nz.min() >= 1e-10, name


def test_provenance():
    prov = provenance()
    assert prov['pyfr_version'] == '3.1'
    assert prov['soln_pts']['hex'] == 'gauss-legendre'
    assert prov['matrices']['m460'] == 'M4 - M6*M0'
    assert len(prov['keys']) == 180
    json.dumps(prov)


def test_patterns():
    assert suite_names('p3-hex-*') == [f'p3-hex-{m}' for m in MATRICES]
    assert suite_names('p1-tri-m0, p2-quad-m3') == ['p2-quad-m3',
                                                    'p1-tri-m0']
    assert len(suite_names('*-m460')) == 36
    assert len(suite_names(['p1-*', 'p2-*'])) == 60
    with pytest.raises(OperatorNameError, match='no operator'):
        suite_names('p9-*')
    with pytest.raises(ValueError, match='pattern'):
        suite_names(' , ')


def test_default_beta():
    assert default_beta('p3-hex-m3') == 1.0
    assert default_beta('p3-hex-m6') == 1.0
    for m in ('m0', 'm132', 'm460'):
        assert default_beta(f'p3-hex-{m}') == 0.0
    assert default_beta('my-operator') == 0.0


def test_load_operator_specs(tmp_path, pyfr):
    name, A = load_operator('p3-hex-m460')
    assert name == 'p3-hex-m460'
    assert np.array_equal(A, pyfr['p3-hex-m460'])

    B = np.arange(12.0).reshape(3, 4) - 5
    np.savez_compressed(tmp_path / 'ops.npz', mine=B)
    name, A = load_operator(f'{tmp_path}/ops.npz:mine')
    assert name == 'mine' and np.array_equal(A, B)

    write_mtx(tmp_path / 'x.mtx', B)
    name, A = load_operator(str(tmp_path / 'x.mtx'))
    assert name == 'x' and np.array_equal(A, B)


@pytest.mark.parametrize('spec, exc, match', [
    ('p9-hex-m0', OperatorNameError, 'no operator'),
    ('nowhere.mtx', FileNotFoundError, 'does not exist'),
    ('nowhere.npz:k', FileNotFoundError, 'does not exist'),
    ('ops.npz', ValueError, 'no key'),
    ('dir/thing', ValueError, 'neither'),
    ('', ValueError, 'empty'),
    (3, TypeError, 'spec'),
])
def test_load_operator_errors(spec, exc, match):
    with pytest.raises(exc, match=match):
        load_operator(spec)


def test_npz_missing_key_and_bad_values(tmp_path):
    np.savez(tmp_path / 'ops.npz', good=np.eye(3), nan=np.full((2, 2), np.nan),
             zeros=np.zeros((2, 2)), cube=np.ones((2, 2, 2)))
    with pytest.raises(OperatorNameError, match="no operator 'bad'"):
        load_operator(f'{tmp_path}/ops.npz:bad')
    with pytest.raises(ValueError, match='NaN'):
        load_operator(f'{tmp_path}/ops.npz:nan')
    with pytest.raises(ValueError, match='all zeros'):
        load_operator(f'{tmp_path}/ops.npz:zeros')
    with pytest.raises(ValueError, match='2-D'):
        load_operator(f'{tmp_path}/ops.npz:cube')


def test_mtx_round_trip(tmp_path, rng):
    A = random_operator(rng, 17, 9, 0.3)
    write_mtx(tmp_path / 'a.mtx', A, comment='two\nlines')
    assert np.array_equal(read_mtx(tmp_path / 'a.mtx'), A)


def test_mtx_formats(tmp_path):
    def mtx(text):
        p = tmp_path / 'f.mtx'
        p.write_text(text)
        return read_mtx(p)

    A = mtx('%%MatrixMarket matrix coordinate real symmetric\n% c\n'
            '3 3 3\n1 1 2.0\n3 1 -1.5\n2 2 4\n')
    assert np.array_equal(A, [[2, 0, -1.5], [0, 4, 0], [-1.5, 0, 0]])

    A = mtx('%%MatrixMarket matrix coordinate integer skew-symmetric\n'
            '2 2 1\n2 1 3\n')
    assert np.array_equal(A, [[0, -3], [3, 0]])

    A = mtx('%%MatrixMarket matrix array real general\n2 3\n'
            '1\n2\n3\n4\n5\n6\n')
    assert np.array_equal(A, [[1, 3, 5], [2, 4, 6]])

    A = mtx('%%MatrixMarket matrix array real symmetric\n2 2\n1\n2\n3\n')
    assert np.array_equal(A, [[1, 2], [2, 3]])


@pytest.mark.parametrize('text, match', [
    ('', 'empty'),
    ('hello\n', 'not a MatrixMarket'),
    ('%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n',
     'complex'),
    ('%%MatrixMarket matrix coordinate pattern general\n1 1 1\n1 1\n',
     'pattern'),
    ('%%MatrixMarket matrix coordinate real hermitian\n1 1 0\n',
     'hermitian'),
    ('%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n',
     'declared'),
    ('%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1\n',
     'outside'),
    ('%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 x\n',
     'bad entry'),
    ('%%MatrixMarket matrix coordinate real general\n0 2 0\n', 'empty'),
    ('%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n',
     'expected'),
    ('%%MatrixMarket matrix array real symmetric\n2 3\n1\n2\n3\n',
     'square'),
    ('%%MatrixMarket matrix coordinate real general\nx y z\n',
     'size line'),
])
def test_mtx_errors(tmp_path, text, match):
    p = tmp_path / 'bad.mtx'
    p.write_text(text)
    with pytest.raises(ValueError, match=match):
        read_mtx(p)


def test_gimmik_directory_layout(tmp_path, pyfr):
    written = export_mtx(tmp_path, 'p2-tet-*')
    assert sorted(p.relative_to(tmp_path).as_posix()
                  for p in map(type(tmp_path), written)) == \
        sorted(f'p2/tet/{m}-sp.mtx' for m in MATRICES)
    (tmp_path / 'extra').mkdir()
    write_mtx(tmp_path / 'extra' / 'op.mtx', np.eye(2))

    got = suite(path=tmp_path)
    assert set(got) == {f'p2-tet-{m}' for m in MATRICES} | {'extra-op'}
    for m in MATRICES:
        assert np.array_equal(got[f'p2-tet-{m}'], pyfr[f'p2-tet-{m}'])
    assert list(suite('*m460', path=tmp_path)) == ['p2-tet-m460']

    # a single file of the layout is named like the suite key
    name, _ = load_operator(str(tmp_path / 'p2' / 'tet' / 'm132-sp.mtx'))
    assert name == 'p2-tet-m132'


def test_suite_path_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match='does not exist'):
        suite(path=tmp_path / 'missing')
    (tmp_path / 'x.txt').write_text('x')
    with pytest.raises(ValueError, match='npz'):
        suite(path=tmp_path / 'x.txt')


def test_env_override(tmp_path, monkeypatch):
    np.savez(tmp_path / 'mine.npz', a=np.eye(2), b=np.ones((2, 3)))
    monkeypatch.setenv('GIMMIK_OPERATORS', str(tmp_path / 'mine.npz'))
    assert list(suite()) == ['a', 'b']
    assert load_operator('b')[1].shape == (2, 3)


# -- MatrixMarket files that cannot be an operator ----------------------------
@pytest.mark.parametrize('body, match', [
    ('coordinate real symmetric\n2 3 1\n2 1 1.0\n', 'square'),
    ('coordinate real symmetric\n3 2 1\n3 1 1.0\n', 'square'),
    ('coordinate real skew-symmetric\n2 3 1\n2 1 1.0\n', 'square'),
    ('coordinate real skew-symmetric\n3 2 1\n3 2 1.0\n', 'square'),
    ('coordinate real symmetric\n2 2 1\n1 2 1.0\n', 'below the diagonal'),
    ('coordinate real skew-symmetric\n2 2 1\n1 1 1.0\n',
     'below the diagonal'),
    ('array real skew-symmetric\n2 3\n1\n', 'square'),
])
def test_mtx_symmetry_needs_a_square_lower_triangle(tmp_path, body, match):
    from gimmik.operators import read_mtx
    path = tmp_path / 'a.mtx'
    path.write_text('%%MatrixMarket matrix ' + body)
    with pytest.raises(ValueError, match=match):
        read_mtx(path)


def test_absurd_mtx_refused(tmp_path):
    from gimmik.operators import read_mtx
    path = tmp_path / 'a.mtx'
    path.write_text('%%MatrixMarket matrix coordinate real general\n'
                    '20000 3 1\n1 1 1.0\n')
    with pytest.raises(ValueError, match='at most'):
        read_mtx(path)


def test_npz_keys_that_make_one_name_refused(tmp_path):
    """x/m0, x_m0 and 'x m0' all sanitise to x_m0: never merged."""
    path = tmp_path / 'clash.npz'
    np.savez(path, **{'x/m0': np.eye(2), 'x_m0': 2*np.eye(2),
                      'y': np.eye(3)})
    with pytest.raises(ValueError, match="'x/m0' and 'x_m0'|'x_m0' and "
                       "'x/m0'"):
        suite('*', path)
