"""Checks on everything a user hands to gimmik, run before any source exists.

Every failure is a ValueError or TypeError whose message names the argument.
"""

import keyword
import math
import numbers
import re

import numpy as np

from gimmik.analysis import MAX_DIM, MAX_UNROLLED_NNZ

_IDENT = re.compile(r'[A-Za-z_][A-Za-z0-9_]*\Z')

# C, C++ and HIP/CUDA words a kernel may not be named after
_RESERVED = frozenset('''
    alignas alignof and and_eq asm auto bitand bitor bool break case catch
    char char8_t char16_t char32_t class co_await co_return co_yield compl
    concept const consteval constexpr constinit const_cast continue decltype
    default delete do double dynamic_cast else enum explicit export extern
    false float for friend goto if inline int long mutable namespace new
    noexcept not not_eq nullptr operator or or_eq private protected public
    register reinterpret_cast requires restrict return short signed sizeof
    static static_assert static_cast struct switch template this
    thread_local throw true try typedef typeid typename union unsigned using
    virtual void volatile wchar_t while xor xor_eq _Bool _Complex _Imaginary
    _Alignas _Alignof _Atomic _Generic _Noreturn _Static_assert
    _Thread_local main threadIdx blockIdx blockDim gridDim warpSize
    NULL gimmik_v2
'''.split())  # reliability: NULL and gimmik_v2 (a template typedef) broke builds

_DTYPES = {np.dtype(np.float32): np.float32, np.dtype(np.float64): np.float64}


_DTYPE_NAMES = {'f32': np.float32, 'float32': np.float32, 'f4': np.float32,
                'single': np.float32, 'f64': np.float64, 'float64': np.float64,
                'f8': np.float64, 'double': np.float64, 'float': np.float64}


def check_dtype(dtype, arg='dtype'):
    """Return np.float32 or np.float64 for a dtype object or name."""
    if dtype is None:  # np.dtype(None) would silently mean float64
        raise TypeError(f'{arg} must be float32 or float64, not None')
    if isinstance(dtype, str):
        if dtype not in _DTYPE_NAMES:
            raise TypeError(f'{arg} must be float32 or float64, not {dtype!r}')
        return _DTYPE_NAMES[dtype]
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f'{arg} must be float32 or float64, not {dtype!r}') \
            from e
    if dt not in _DTYPES:
        raise TypeError(f'{arg} must be float32 or float64, not {dtype!r}')
    return _DTYPES[dt]


def check_matrix(A, arg='A'):
    """Return A as a new float64 2-D array after checking it."""
    if isinstance(A, (str, bytes)) or A is None:
        raise TypeError(f'{arg} must be a 2-D array of floats, '
                        f'not {type(A).__name__}')
    try:
        arr = np.asarray(A)
    except Exception as e:  # ragged lists and the like
        raise ValueError(f'{arg} is not a rectangular array: {e}') from e

    if arr.dtype.kind not in 'fiu' or arr.dtype == np.float16 \
            or arr.dtype.kind == 'b':
        raise TypeError(f'{arg} must hold real floats, not {arr.dtype}')
    if arr.ndim != 2:
        raise ValueError(f'{arg} must be 2-D, not {arr.ndim}-D')
    if arr.size == 0:
        raise ValueError(f'{arg} is empty (shape {arr.shape})')
    if max(arr.shape) > MAX_DIM:
        raise ValueError(f'{arg} has shape {arr.shape}: m and k must be at '
                         f'most {MAX_DIM}')

    arr = np.array(arr, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise ValueError(f'{arg} contains NaN or Inf')
    if not arr.any():
        raise ValueError(f'{arg} is all zeros')
    # reliability: a dense 10000 x 10000 A used to pass and then take hours
    # and gigabytes to unroll
    nnz = int(np.count_nonzero(arr))
    if nnz > MAX_UNROLLED_NNZ:
        raise ValueError(f'{arg} has {nnz} non-zeros: at most '
                         f'{MAX_UNROLLED_NNZ} can be unrolled into a kernel')
    return arr


def check_scalar(x, arg):
    """Return x as a finite Python float."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        raise TypeError(f'{arg} must be a real number, not {type(x).__name__}')
    try:
        x = float(x)
    except OverflowError as e:  # reliability: huge ints used to escape
        raise ValueError(f'{arg} is too large for a float64') from e
    if not math.isfinite(x):
        raise ValueError(f'{arg} must be finite, not {x}')
    return x


# Kernels take n, ldb and ldc as C ints (reliability: larger values used to
# be baked in and overflow)
MAX_INT = 2**31 - 1


def _check_int(x, arg, minimum, maximum=MAX_INT):
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Integral):
        raise TypeError(f'{arg} must be an integer, not {type(x).__name__}')
    x = int(x)
    if x < minimum:
        raise ValueError(f'{arg} must be at least {minimum}, not {x}')
    if x > maximum:
        raise ValueError(f'{arg} must be at most {maximum}, not {x}')
    return x


def check_sizes(n, ldb, ldc, aligne):
    """Check the (n, ldb, ldc, aligne) quadruple of a MatMul constructor."""
    given = [v is not None for v in (n, ldb, ldc)]
    if any(given) and not all(given):
        missing = [a for a, g in zip(('n', 'ldb', 'ldc'), given) if not g]
        raise ValueError('give all of n, ldb, ldc or none of them; missing '
                         + ', '.join(missing))
    if all(given):
        n = _check_int(n, 'n', 1)
        ldb = _check_int(ldb, 'ldb', 1)
        ldc = _check_int(ldc, 'ldc', 1)
        if ldb < n:
            raise ValueError(f'ldb ({ldb}) must be at least n ({n})')
        if ldc < n:
            raise ValueError(f'ldc ({ldc}) must be at least n ({n})')
    if aligne is not None:
        aligne = _check_int(aligne, 'aligne', 1)
        for name, ld in (('ldb', ldb), ('ldc', ldc)):
            if ld is not None and ld % aligne:
                raise ValueError(f'aligne ({aligne}) does not divide '
                                 f'{name} ({ld})')
    return n, ldb, ldc, aligne


def check_kname(kname, arg='kname'):
    if not isinstance(kname, str):
        raise TypeError(f'{arg} must be a str, not {type(kname).__name__}')
    if not _IDENT.match(kname) or not kname.isascii():
        raise ValueError(f'{arg} {kname!r} is not a plain C identifier')
    if kname in _RESERVED or keyword.iskeyword(kname) \
            or kname.startswith('__') or kname.startswith('gimmik_emu'):
        raise ValueError(f'{arg} {kname!r} is a reserved word')
    return kname


def check_representable(A, beta, dtype):
    """Check that A and beta survive the conversion to dtype: no value
    overflows to Inf and A does not become all zeros.  (Reliability: float32
    used to emit `inff` literals for |values| beyond 3.4e38.)"""
    if dtype != np.float32:
        return
    big = float(np.finfo(np.float32).max)
    if np.abs(A).max() > big:
        raise ValueError(f'A has values beyond the float32 range (+-{big:.4g})')
    if abs(beta) > big:
        raise ValueError(f'beta ({beta}) is beyond the float32 range')
    if not A.astype(np.float32).any():
        raise ValueError('A is all zeros in float32')


def c_literal(x, dtype):
    """Print x as a C literal of dtype that parses back to the same value."""
    if dtype == np.float32:
        v = np.float32(x)
        s = np.format_float_scientific(v, unique=True, trim='0')
        if np.float32(s) != v or not np.isfinite(v):
            raise AssertionError(f'{x!r} does not round-trip as float32')
        return s + 'f'
    v = float(x)
    s = repr(v)
    if float(s) != v or not math.isfinite(v):
        raise AssertionError(f'{x!r} does not round-trip as float64')
    if '.' not in s and 'e' not in s:
        s += '.0'
    return s
