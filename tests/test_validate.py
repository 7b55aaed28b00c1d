import math
import os
import re
import warnings

import numpy as np
import pytest

import gimmik
from bad_inputs import (BAD_ARCHES, BAD_CLI, BAD_CLI_NO_OPERATOR,
                        BAD_DTYPES, BAD_KNAMES, BAD_MATRICES, BAD_OPTIONS,
                        BAD_SCALARS, BAD_SIZES, BAD_SOURCES, C_BUFFERS,
                        PANELS, TUNE_PANELS, TUNE_SIZES)
from conftest import A_SMALL, PLATFORM_OPTS
from gimmik.validate import (c_literal, check_dtype, check_kname,
                             check_matrix, check_scalar, check_sizes,
                             reserved_names)

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


# -- kernel names -------------------------------------------------------------
CLASHING = [
    # macros and constants of math.h, stdio.h, limits.h, the GPU headers
    'NAN', 'INFINITY', 'HUGE_VAL', 'M_PI', 'EOF', 'NULL', 'FLT_MAX',
    'INT_MAX', 'CUDART_INF',
    # vector and standard types
    'double2', 'float4', 'int3', 'uint4', 'half2', 'dim3', 'size_t',
    'int32_t', 'ptrdiff_t', 'uintptr_t',
    # libc, libm (both precisions), C++ overloads
    'printf', 'malloc', 'free', 'memcpy', 'strlen', 'exit', 'abort', 'fma',
    'fmaf', 'sin', 'sinf', 'sqrt', 'rsqrt', 'exp2', 'pow', 'min', 'max',
    'abs', 'fabs', 'isnan', 'signbit',
    # OpenMP and its runtimes
    'omp_get_num_threads', 'omp_get_thread_num', 'GOMP_parallel',
    'GOMP_barrier', 'gomp_team', 'kmp_set_defaults', 'ompt_start_tool',
    # CUDA and HIP builtins and APIs
    'threadIdx', 'blockIdx', 'warpSize', 'atomicAdd', 'make_double2',
    'hipMalloc', 'cudaMalloc', 'cuLaunchKernel', 'tex1Dfetch',
    # the implementation's name space
    '_x', '__global__', '__syncthreads', '_Float16',
    # names gimmik's templates and CPU executor define
    'gimmik_v2', 'gimmik_v4d', 'gimmik_emu', 'gimmik_emu_entry',
    'gimmik_emu_call', 'gimmik_lds',
    # keywords
    'int', 'class', 'restrict', 'main', 'operator',
]


ORDINARY = ['gimmik_mm', 'gimmik_mm_3x4', 'gimmik_mm_openmp', 'my_mm', 'mm',
            'kernel1', 'p3_hex_m0', 'gimmik_fast', 'stream_mm', 'total',
            'b', 'c', 'n', 'ldb', 'copy_kernel', 'dgemm_like', 'hip_mm',
            'cuda_mm', 'cu_mm']


@pytest.mark.parametrize('kname', CLASHING)
def test_clashing_kname_refused_everywhere(platform, kname):
    mm = gimmik.matmul_class(platform)(A_SMALL)
    with pytest.raises(ValueError, match=rf"kname '{kname}' is reserved"):
        mm.kernels(np.float64, kname=kname, **PLATFORM_OPTS[platform])
    with pytest.raises(ValueError, match='funcn'):
        gimmik.generate_mm(A_SMALL, 'float64', platform, funcn=kname)


@pytest.mark.parametrize('kname', ORDINARY)
def test_ordinary_kname_accepted(platform, kname):
    mm = gimmik.matmul_class(platform)(A_SMALL)
    src, meta = next(mm.kernels(np.float64, kname=kname,
                                **PLATFORM_OPTS[platform]))
    assert re.search(rf'\b{kname}\s*\(', src) and meta['kname'] == kname


def _rendered_names(platform):
    """Identifiers the rendered sources of a platform call, define as
    macros or typedef, over a sparse and a dense operator."""
    rng = np.random.default_rng(1)
    sparse = np.where(rng.random((12, 9)) < 0.5,
                      rng.standard_normal((12, 9)), 0)
    dense = rng.standard_normal((32, 32))
    names = set()
    for A in (sparse, dense):
        for dt in (np.float32, np.float64):
            mm = gimmik.matmul_class(platform)(A, beta=0.5, aligne=2)
            for cand in mm.candidates(dt, **PLATFORM_OPTS[platform]):
                src, _ = mm.render(cand, dt, 'probe')
                src = re.sub(r'//[^\n]*|/\*.*?\*/', ' ', src, flags=re.S)
                names |= set(re.findall(r'\b([A-Za-z_]\w*)\s*\(', src))
                names |= set(re.findall(r'#\s*define\s+(\w+)', src))
                names |= set(re.findall(r'\btypedef\b[^;]*?(\w+)\s*;', src))
    # helpers named after the kernel (probe_tail...) follow its name
    return {n for n in names if n != 'probe' and not n.startswith('probe_')}


def test_every_name_the_sources_use_is_reserved(platform):
    names = _rendered_names(platform)
    assert names
    accepted = []
    for name in sorted(names):
        try:
            check_kname(name)
            accepted.append(name)
        except ValueError:
            pass
    assert not accepted, f'{platform} sources use {accepted}'


def test_shim_names_are_reserved():
    # everything the CPU executor's shim declares or defines at file scope
    shim = os.path.join(os.path.dirname(gimmik.__file__), 'emulate',
                        'hip_shim.h')
    text = open(shim).read()
    declared = set(re.findall(r'#\s*define\s+(\w+)', text)) \
        | set(re.findall(r'\bstruct\s+(\w+)', text)) \
        | set(re.findall(r'\bnamespace\s+(\w+)', text))
    assert declared and declared <= reserved_names() | {
        n for n in declared if n.startswith('_') or n.isupper()}
    for name in declared:
        with pytest.raises(ValueError):
            check_kname(name)


# -- input conversion ---------------------------------------------------------
def test_masked_arrays():
    masked = np.ma.masked_array(A_SMALL, mask=A_SMALL > 1)
    with pytest.raises(ValueError, match='A is a masked array with 3 masked'):
        check_matrix(masked)
    with pytest.raises(ValueError, match='masked'):
        gimmik.CMatMul(masked)
    assert np.array_equal(check_matrix(np.ma.masked_array(A_SMALL)), A_SMALL)
    assert np.array_equal(check_matrix(masked.filled(0)),
                          np.where(A_SMALL > 1, 0, A_SMALL))


def test_scipy_sparse_accepted():
    sp = pytest.importorskip('scipy.sparse')
    for conv in (sp.csr_matrix, sp.csc_matrix, sp.coo_matrix, sp.csr_array,
                 sp.lil_matrix, sp.dok_matrix):
        A = check_matrix(conv(A_SMALL))
        assert type(A) is np.ndarray and np.array_equal(A, A_SMALL)
    src = gimmik.generate_mm(sp.csr_matrix(A_SMALL), 'float64', 'c')
    assert src == gimmik.generate_mm(A_SMALL, 'float64', 'c')
    with pytest.raises(ValueError, match='at most'):
        check_matrix(sp.csr_matrix((1, 10**6)))
    with pytest.raises(TypeError, match='complex'):
        check_matrix(sp.csr_matrix(A_SMALL*1j))


@pytest.mark.parametrize('bad', [[[1, 'a']], [[1.0, None]], [[{}, 1.0]],
                                 np.array([[1, 2]], dtype=object)])
def test_object_arrays_message(bad):
    with pytest.raises(TypeError, match='real floats.*sparse'):
        check_matrix(bad)


def test_unconvertible_array_named():
    class DeviceArray:
        def __array__(self, *args, **kwargs):
            raise TypeError('Implicit conversion to a NumPy array is not '
                            'allowed')
    with pytest.raises(TypeError, match='A .DeviceArray. cannot be '
                                        'converted to a NumPy array'):
        check_matrix(DeviceArray())
    with pytest.raises(ValueError, match='rectangular'):
        check_matrix([[1.0, 2.0], [3.0]])


# -- literals -----------------------------------------------------------------
EDGE_F64 = [1e-300, 1e300, 0.1, 1/3, 5e-324, 2.2250738585072014e-308,
            1.7976931348623157e308, -0.1, 1.0, 123456789.123456789,
            2.0**-1074*3]


EDGE_F32 = [float(np.float32(x)) for x in
            (1e-38, 3e38, 0.1, 1/3, 1e-45, 1.1754943508222875e-38,
             3.4028234663852886e38, -0.1, 1.0, 16777217.0)]


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('x', EDGE_F64)
def test_f64_edge_literal_round_trips(x):
    s = c_literal(x, np.float64)
    assert re.fullmatch(r'-?[0-9.]+(e[-+]?[0-9]+)?', s), s
    assert float(s) == x


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('x', EDGE_F32)
def test_f32_edge_literal_round_trips(x):
    s = c_literal(x, np.float32)
    assert re.fullmatch(r'-?[0-9.]+(e[-+]?[0-9]+)?f', s), s
    assert np.float32(s[:-1]) == np.float32(x)


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('x', [float('nan'), float('inf'), -float('inf'),
                               1e39])
def test_literal_refuses_non_finite(x):
    # the error alone: no numpy overflow warning before it
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        with pytest.raises(ValueError):
            c_literal(x, np.float32)
    if np.isfinite(x):
        return
    with pytest.raises((AssertionError, ValueError)):
        c_literal(x, np.float64)


@pytest.fixture
def render_allowed():
    """Marks a test that really renders and runs kernels."""


@pytest.mark.parametrize('dtype,values', [(np.float64, EDGE_F64),
                                          (np.float32, EDGE_F32)])
def test_edge_values_exact_through_executor(render_allowed, dtype, values):
    """A column of edge values times B = 1 gives C = A exactly: every
    literal made it into the kernel and back unchanged."""
    from gimmik.emulate import run_hip
    from gimmik.hip import HIPMatMul
    A = np.array(values)[:, None]
    for family in ('cstream', 'bstream'):
        mm = HIPMatMul(A)
        src, meta = next((s, m) for s, m in mm.kernels(dtype)
                         if m['tplname'] == family)
        b = np.ones((1, 5), dtype)
        c = np.full((len(values), 5), np.nan, dtype)
        run_hip(src, meta, b, c)
        want = np.repeat(A.astype(dtype), 5, axis=1)
        assert np.array_equal(c, want), (family, c[:, 0], want[:, 0])


# -- the bad-input catalogue --------------------------------------------------
@pytest.mark.usefixtures('no_source')
def test_catalogue_size():
    """The numbers the closing report quotes."""
    n = (len(BAD_MATRICES) + len(BAD_SCALARS) + len(BAD_SIZES)
         + len(BAD_DTYPES) + len(BAD_KNAMES) + len(BAD_OPTIONS)
         + len(PANELS) + len(BAD_ARCHES) + len(BAD_SOURCES) + len(BAD_CLI)
         + len(TUNE_SIZES) + len(BAD_CLI_NO_OPERATOR) + len(C_BUFFERS)
         + len(TUNE_PANELS))
    print(f'{n} distinct bad inputs in the catalogue')
    assert n >= 150


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
