import math

import numpy as np
import pytest

from gimmik.validate import (c_literal, check_dtype, check_kname,
                             check_matrix, check_scalar, check_sizes)

HARD_VALUES = [1e-300, 1e300, 0.1, 1/3, 5e-324, -2.5e-310, 1.0, -0.0,
               2.0**-1074, 1.7976931348623157e308, 123456789.123456789]


@pytest.mark.parametrize('x', HARD_VALUES)
def test_f64_literal_round_trips(x):
    s = c_literal(x, np.float64)
    assert float(s) == x
    assert math.copysign(1, float(s)) == math.copysign(1, x)
    assert '.' in s or 'e' in s          # never an integer literal


@pytest.mark.parametrize('x', [0.1, 1/3, 3.4e38, 1.4e-45, 1e-40, 7.0])
def test_f32_literal_round_trips(x):
    s = c_literal(x, np.float32)
    assert s.endswith('f')
    assert np.float32(s[:-1]) == np.float32(x)


def test_random_literals_round_trip(rng):
    for x in rng.standard_normal(200)*10.0**rng.integers(-300, 300, 200):
        assert float(c_literal(x, np.float64)) == x


@pytest.mark.parametrize('name', ['np.float32', 'float32', 'f32', 'single',
                                  'np.float64', 'float64', 'f8', 'double'])
def test_dtype_names(name):
    dt = check_dtype(eval(name) if name.startswith('np.') else name)
    assert dt in (np.float32, np.float64)


@pytest.mark.parametrize('bad', [np.float16, np.int32, np.complex128, bool,
                                 object, 'int', 'half', None, str])
def test_bad_dtypes(bad):
    with pytest.raises(TypeError, match='dtype'):
        check_dtype(bad)


@pytest.mark.parametrize('good', ['k', 'gimmik_mm', 'x_1', 'mm_p3_hex'])
def test_good_knames(good):
    assert check_kname(good) == good


@pytest.mark.parametrize('bad', ['', '1abc', 'a b', 'int', 'while', 'main',
                                 'k(){}; void x', 'a-b', 'café', '__x', '_x1',
                                 'threadIdx', 'k\n'])
def test_bad_knames(bad):
    with pytest.raises(ValueError, match='kname'):
        check_kname(bad)


def test_kname_type():
    with pytest.raises(TypeError, match='kname'):
        check_kname(b'gimmik')


@pytest.mark.parametrize('A,exc,what', [
    (np.zeros((3, 3)), ValueError, 'all zeros'),
    (np.ones(3), ValueError, '2-D'),
    (np.ones((0, 3)), ValueError, 'empty'),
    (np.array([[1.0, np.nan]]), ValueError, 'NaN'),
    (np.array([[1.0, np.inf]]), ValueError, 'NaN or Inf'),
    (np.ones((2, 2), np.complex128), TypeError, 'complex|real'),
    (np.ones((2, 2), np.float16), TypeError, 'float16'),
    (np.ones((2, 2), bool), TypeError, 'bool'),
    ('abc', TypeError, 'str'),
    (np.ones((2, 10001)), ValueError, 'at most'),
])
def test_bad_matrices(A, exc, what):
    with pytest.raises(exc, match=what):
        check_matrix(A)


def test_matrix_is_copied():
    A = np.ones((2, 2))
    B = check_matrix(A)
    B[0, 0] = 5
    assert A[0, 0] == 1


@pytest.mark.parametrize('x,exc', [(math.nan, ValueError),
                                   (math.inf, ValueError), ('1', TypeError),
                                   (True, TypeError), (1j, TypeError)])
def test_bad_scalars(x, exc):
    with pytest.raises(exc, match='beta'):
        check_scalar(x, 'beta')


@pytest.mark.parametrize('args,what', [
    ((10, None, None, None), 'missing ldb, ldc'),
    ((None, 10, 10, None), 'missing n'),
    ((-1, 10, 10, None), 'n must be at least'),
    ((10, 9, 10, None), r'ldb \(9\) must be at least n'),
    ((10, 10, 8, None), r'ldc \(8\) must be at least n'),
    ((10, 10, 11, 2), r'aligne \(2\) does not divide ldc \(11\)'),
    ((10, 12, 11, 4), 'does not divide'),
    ((None, None, None, 0), 'aligne must be at least 1'),
])
def test_bad_sizes(args, what):
    with pytest.raises(ValueError, match=what):
        check_sizes(*args)


def test_sizes_types():
    with pytest.raises(TypeError, match='n must be an integer'):
        check_sizes(10.0, 10, 10, None)
    assert check_sizes(np.int64(8), 8, 16, 4) == (8, 8, 16, 4)


@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_numpy_spellings_of_a_dtype(dtype):
    """What dtype.str and dtype.char return names the dtype too."""
    dt = np.dtype(dtype)
    for spelling in (dt.str, '=' + dt.str[1:], dt.char, dt.name,
                     dt.str[1:]):
        assert check_dtype(spelling) is dtype, spelling
    assert check_dtype('float_') is np.float64


@pytest.mark.parametrize('bad', ['>f8' if np.little_endian else '<f8', 'i4',
                                 '<i8', 'e', 'F', 'g', 'U8', 'float16', '',
                                 'f8 ', 'float_x'])
def test_numpy_spellings_of_other_types_refused(bad):
    with pytest.raises(TypeError, match='float32 or float64'):
        check_dtype(bad)


def test_product_range():
    from gimmik.validate import check_product_range
    ok = np.ones((2, 3))
    check_product_range(ok, ok, np.float64)
    with pytest.raises(ValueError, match='overflows float32'):
        check_product_range(ok, np.full((2, 3), 1e39), np.float32)
    with pytest.raises(ValueError, match='overflows float64'):
        check_product_range(np.full((2, 3), np.inf), ok, np.float64)
