"""The bad-input catalogue: every public entry point given every kind of bad
argument raises a ValueError or TypeError whose message names the argument,
before any source is rendered or compiled.

The catalogue is a set of data tables (BAD_*) walked against each entry
point; the tables are also what the closing report counts.  Entry points of
modules that have not landed yet are skipped, and run once they exist.
"""

import importlib
import re

import numpy as np
import pytest

import gimmik.base
from gimmik.validate import c_literal

GOOD_A = np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.5]])

# -- the catalogue -------------------------------------------------------------
# (label, value, exception); the argument named is the entry point's own.
BAD_MATRICES = [
    ('1-D', np.ones(3), ValueError),
    ('3-D', np.ones((2, 2, 2)), ValueError),
    ('0-D', np.float64(1.0), ValueError),
    ('no rows', np.zeros((0, 3)), ValueError),
    ('no columns', [[]], ValueError),
    ('all zero', np.zeros((3, 4)), ValueError),
    ('NaN', [[1.0, np.nan]], ValueError),
    ('+Inf', [[1.0, np.inf]], ValueError),
    ('-Inf', [[-np.inf, 1.0]], ValueError),
    ('object dtype', np.array([[1.0, 2.0]], dtype=object), TypeError),
    ('mixed object', np.array([[1.0, 'x']], dtype=object), TypeError),
    ('str', 'eye(3)', TypeError),
    ('bytes', b'\x00\x01', TypeError),
    ('string array', np.array([['1', '2']]), TypeError),
    ('complex', np.array([[1 + 1j, 0]]), TypeError),
    ('complex, zero imaginary', np.array([[1 + 0j]]), TypeError),
    ('bool', np.array([[True, False]]), TypeError),
    ('float16', np.ones((2, 2), np.float16), TypeError),
    ('None', None, TypeError),
    ('dict', {'a': 1}, TypeError),
    ('ragged', [[1.0, 2.0], [3.0]], ValueError),
    ('int beyond int64', [[2**70]], TypeError),
    ('m > 10000', np.ones((10_001, 1)), ValueError),
    ('k > 10000', np.ones((1, 10_001)), ValueError),
    ('too many non-zeros to unroll', np.ones((600, 600)), ValueError),
]

BAD_SCALARS = [
    ('NaN', float('nan'), ValueError),
    ('+Inf', float('inf'), ValueError),
    ('-Inf', -float('inf'), ValueError),
    ('float32 NaN', np.float32('nan'), ValueError),
    ('str', '0.5', TypeError),
    ('complex', 1j, TypeError),
    ('bool', True, TypeError),
    ('numpy bool', np.bool_(False), TypeError),
    ('None', None, TypeError),
    ('0-D array', np.array(0.5), TypeError),
    ('list', [0.5], TypeError),
    ('int beyond float64', 10**400, ValueError),
]

# (label, sizes, exception, argument named)
BAD_SIZES = [
    ('n alone', dict(n=8), ValueError, 'ldb'),
    ('n and ldb', dict(n=8, ldb=8), ValueError, 'ldc'),
    ('ldb alone', dict(ldb=8), ValueError, 'n'),
    ('ldc alone', dict(ldc=8), ValueError, 'n'),
    ('negative n', dict(n=-1, ldb=8, ldc=8), ValueError, 'n'),
    ('zero n', dict(n=0, ldb=8, ldc=8), ValueError, 'n'),
    ('negative ldb', dict(n=8, ldb=-8, ldc=8), ValueError, 'ldb'),
    ('negative ldc', dict(n=8, ldb=8, ldc=-8), ValueError, 'ldc'),
    ('float n', dict(n=8.0, ldb=8, ldc=8), TypeError, 'n'),
    ('str n', dict(n='8', ldb=8, ldc=8), TypeError, 'n'),
    ('bool n', dict(n=True, ldb=8, ldc=8), TypeError, 'n'),
    ('ldb < n', dict(n=8, ldb=7, ldc=8), ValueError, 'ldb'),
    ('ldc < n', dict(n=8, ldb=8, ldc=7), ValueError, 'ldc'),
    ('n beyond C int', dict(n=2**31, ldb=2**31, ldc=2**31), ValueError, 'n'),
    ('ldb beyond C int', dict(n=8, ldb=2**40, ldc=8), ValueError, 'ldb'),
    ('ldc beyond C int', dict(n=8, ldb=8, ldc=2**62), ValueError, 'ldc'),
    ('aligne not dividing ldb', dict(n=10, ldb=10, ldc=12, aligne=4),
     ValueError, 'aligne'),
    ('aligne not dividing ldc', dict(n=8, ldb=8, ldc=10, aligne=4),
     ValueError, 'aligne'),
    ('zero aligne', dict(aligne=0), ValueError, 'aligne'),
    ('negative aligne', dict(aligne=-2), ValueError, 'aligne'),
    ('float aligne', dict(aligne=2.0), TypeError, 'aligne'),
    ('str aligne', dict(aligne='2'), TypeError, 'aligne'),
]

BAD_DTYPES = [
    ('float16', np.float16), ('"float16"', 'float16'), ('"half"', 'half'),
    ('int32', np.int32), ('"int32"', 'int32'), ('int', int),
    ('bool', bool), ('complex128', np.complex128), ('object', object),
    ('str', str), ('None', None), ('longdouble', np.longdouble),
    ('big-endian f8', '>f8'), ('big-endian dtype', np.dtype('>f8')),
    ('list', [1]), ('dict', {}), ('code', 'f64; system("x")'),
    ('"F64"', 'F64'),
]

BAD_KNAMES = [
    ('C keyword', 'int', ValueError), ('C keyword', 'while', ValueError),
    ('C99 keyword', 'restrict', ValueError), ('C11 keyword', '_Bool',
                                              ValueError),
    ('C++ keyword', 'class', ValueError), ('C++ keyword', 'template',
                                           ValueError),
    ('C++20 keyword', 'co_await', ValueError),
    ('HIP builtin', 'threadIdx', ValueError),
    ('HIP attribute', '__global__', ValueError),
    ('predefined macro', '__LINE__', ValueError),
    ('macro', 'NULL', ValueError), ('template typedef', 'gimmik_v2',
                                    ValueError),
    ('code', 'f(){}; void g', ValueError), ('comment', 'x/*', ValueError),
    ('preprocessor', '#define', ValueError), ('space', 'a b', ValueError),
    ('operator', 'a-b', ValueError), ('newline', 'abc\n', ValueError),
    ('empty', '', ValueError), ('leading digit', '1abc', ValueError),
    ('non-ASCII', 'k\u00e9', ValueError), ('None', None, TypeError),
    ('bytes', b'gimmik_mm', TypeError), ('int', 42, TypeError),
]

# -- platform generators and their option catalogues -----------------------------
from gimmik import PLATFORMS  # noqa: E402  platform -> (module, class)

# (platform, label, options, argument named)
BAD_OPTIONS = [
    ('hip', 'CUDA arch', dict(gcn_arch='sm_90'), 'gcn_arch'),
    ('hip', 'arch with code', dict(gcn_arch='gfx942"; x'), 'gcn_arch'),
    ('hip', 'arch with newline', dict(gcn_arch='gfx942\n'), 'gcn_arch'),
    ('hip', 'upper-case arch', dict(gcn_arch='GFX942'), 'gcn_arch'),
    ('hip', 'empty arch', dict(gcn_arch=''), 'gcn_arch'),
    ('hip', 'None arch', dict(gcn_arch=None), 'gcn_arch'),
    ('hip', 'warp 16', dict(warp_size=16), 'warp_size'),
    ('hip', 'warp True', dict(warp_size=True), 'warp_size'),
    ('hip', 'warp 64.0', dict(warp_size=64.0), 'warp_size'),
    ('hip', 'warp "64"', dict(warp_size='64'), 'warp_size'),
    ('hip', 'unknown option', dict(fast=True), 'fast'),
    ('cuda', 'pre-Volta', dict(compute_capability=(6, 0)),
     'compute_capability'),
    ('cuda', 'str cc', dict(compute_capability='sm_90'),
     'compute_capability'),
    ('cuda', 'short cc', dict(compute_capability=(9,)),
     'compute_capability'),
    ('cuda', 'float cc', dict(compute_capability=(9.0, 0)),
     'compute_capability'),
    ('cuda', 'bool cc', dict(compute_capability=(True, 0)),
     'compute_capability'),
    ('cuda', 'minor 10', dict(compute_capability=(9, 10)),
     'compute_capability'),
    ('cuda', 'None cc', dict(compute_capability=None), 'compute_capability'),
    ('cuda', 'unknown option', dict(gcn_arch='gfx942'), 'gcn_arch'),
    ('c', 'unknown option', dict(gcn_arch='gfx942'), 'gcn_arch'),
]


def platform_class(platform):
    mod, cls = PLATFORMS[platform]
    try:
        return getattr(importlib.import_module(mod), cls)
    except ModuleNotFoundError as e:
        if e.name != mod:
            raise
        pytest.skip(f'{mod} has not landed')


@pytest.fixture(params=sorted(PLATFORMS))
def matmul_cls(request):
    return platform_class(request.param)


@pytest.fixture(autouse=True)
def no_source(request, monkeypatch):
    """Fail any test that renders a template or compiles a kernel (unless it
    asks for render_allowed)."""
    import mako.template
    if 'render_allowed' in request.fixturenames:
        return

    def rendered(*args, **kwargs):
        raise AssertionError('source was rendered for a bad input')

    monkeypatch.setattr(mako.template.Template, 'render', rendered)
    # the executor neither builds nor loads a kernel
    monkeypatch.setattr('gimmik.emulate.subprocess.run', rendered)
    monkeypatch.setattr('gimmik.emulate.ctypes.CDLL', rendered)


def raises_naming(exc, *names):
    """pytest.raises(exc) whose message must name one of `names`."""
    pattern = '|'.join(rf'(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])'
                       for n in names)
    return pytest.raises(exc, match=pattern)


def _ids(table):
    return [row[0] for row in table]


# -- *MatMul constructors and kernels() -----------------------------------------
@pytest.mark.parametrize('label,A,exc', BAD_MATRICES, ids=_ids(BAD_MATRICES))
def test_constructor_rejects_matrix(matmul_cls, label, A, exc):
    with raises_naming(exc, 'A'):
        matmul_cls(A)


@pytest.mark.parametrize('label,beta,exc', BAD_SCALARS, ids=_ids(BAD_SCALARS))
def test_constructor_rejects_beta(matmul_cls, label, beta, exc):
    with raises_naming(exc, 'beta'):
        matmul_cls(GOOD_A, beta=beta)


@pytest.mark.parametrize('label,sizes,exc,arg', BAD_SIZES,
                         ids=_ids(BAD_SIZES))
def test_constructor_rejects_sizes(matmul_cls, label, sizes, exc, arg):
    with raises_naming(exc, arg):
        matmul_cls(GOOD_A, **sizes)


@pytest.mark.parametrize('label,dtype', BAD_DTYPES, ids=_ids(BAD_DTYPES))
def test_kernels_rejects_dtype(matmul_cls, label, dtype):
    with raises_naming(TypeError, 'dtype'):
        matmul_cls(GOOD_A).kernels(dtype)


@pytest.mark.parametrize('label,kname,exc', BAD_KNAMES, ids=_ids(BAD_KNAMES))
def test_kernels_rejects_kname(matmul_cls, label, kname, exc):
    with raises_naming(exc, 'kname'):
        matmul_cls(GOOD_A).kernels(np.float64, kname=kname)


@pytest.mark.parametrize('platform,label,opts,arg', BAD_OPTIONS,
                         ids=[f'{r[0]}-{r[1]}' for r in BAD_OPTIONS])
def test_kernels_rejects_options(platform, label, opts, arg):
    cls = platform_class(platform)
    with raises_naming((ValueError, TypeError), arg):
        cls(GOOD_A).kernels(np.float64, **opts)


@pytest.mark.parametrize('label,A,beta,arg', [
    ('A beyond float32', [[1.0, 1e39]], 0.0, 'A'),
    ('A far beyond float32', [[1e300]], 0.0, 'A'),
    ('A all zero in float32', [[1e-50, 0.0]], 0.0, 'A'),
    ('beta beyond float32', [[1.0]], -1e39, 'beta'),
])
def test_kernels_rejects_float32_overflow(matmul_cls, label, A, beta, arg):
    mm = matmul_cls(A, beta=beta)
    with raises_naming(ValueError, arg):
        mm.kernels(np.float32)
    mm.kernels(np.float64)       # fine in float64


# -- generate_mm ---------------------------------------------------------------
def _generate_mm():
    gen = getattr(importlib.import_module('gimmik'), 'generate_mm', None)
    if gen is None:
        pytest.skip('gimmik.generate_mm has not landed')
    return gen


@pytest.mark.parametrize('label,A,exc', BAD_MATRICES, ids=_ids(BAD_MATRICES))
def test_generate_mm_rejects_matrix(label, A, exc):
    with raises_naming(exc, 'mat'):
        _generate_mm()(A, np.float64, 'hip')


@pytest.mark.parametrize('arg', ['alpha', 'beta'])
@pytest.mark.parametrize('label,x,exc', BAD_SCALARS, ids=_ids(BAD_SCALARS))
def test_generate_mm_rejects_scalars(arg, label, x, exc):
    with raises_naming(exc, arg):
        _generate_mm()(GOOD_A, np.float64, 'hip', **{arg: x})


def test_generate_mm_rejects_zero_alpha():
    with raises_naming(ValueError, 'alpha'):
        _generate_mm()(GOOD_A, np.float64, 'hip', alpha=0.0)


def test_generate_mm_rejects_overflowing_alpha():
    with raises_naming(ValueError, 'alpha', 'alpha*mat'):
        _generate_mm()([[1e300]], np.float64, 'hip', alpha=1e10)


@pytest.mark.parametrize('platform', ['rocm', 'HIP', 'opencl', '', None, 3,
                                      'hip; rm -rf /', 'auto'])
def test_generate_mm_rejects_platform(platform):
    with raises_naming((ValueError, TypeError), 'platform'):
        _generate_mm()(GOOD_A, np.float64, platform)


@pytest.mark.parametrize('label,dtype', BAD_DTYPES, ids=_ids(BAD_DTYPES))
def test_generate_mm_rejects_dtype(label, dtype):
    with raises_naming(TypeError, 'dtype'):
        _generate_mm()(GOOD_A, dtype, 'hip')


@pytest.mark.parametrize('label,kname,exc', BAD_KNAMES, ids=_ids(BAD_KNAMES))
def test_generate_mm_rejects_funcn(label, kname, exc):
    # the message names the kernel name as funcn (the argument) or kname
    with raises_naming(exc, 'funcn', 'kname'):
        _generate_mm()(GOOD_A, np.float64, 'hip', funcn=kname)


@pytest.mark.parametrize('label,sizes,exc,arg',
                         [r for r in BAD_SIZES if 'aligne' not in r[1]],
                         ids=[r[0] for r in BAD_SIZES if 'aligne' not in r[1]])
def test_generate_mm_rejects_sizes(label, sizes, exc, arg):
    with raises_naming(exc, arg):
        _generate_mm()(GOOD_A, np.float64, 'hip', **sizes)


# -- run_hip -------------------------------------------------------------------
@pytest.fixture(scope='module')
def hip_kernels():
    """(src, meta) of a runtime-n kernel, a baked-n one and an aligned one;
    rendered before the autouse no_source patch applies to the test."""
    from gimmik.hip import HIPMatMul
    A = np.array([[1.0, 2.0], [0.0, 3.0], [1.0, 1.0]])
    out = {}
    for key, kw in (('runtime', {}), ('baked', dict(n=8, ldb=8, ldc=8)),
                    ('aligned', dict(aligne=2))):
        out[key] = next(HIPMatMul(A, **kw).kernels(np.float64))
    return out


def _panels():
    from numpy.lib.stride_tricks import as_strided
    B, C = np.ones((2, 8)), np.zeros((3, 8))
    wide_b, wide_c = np.ones((2, 16)), np.zeros((3, 16))
    ro = np.zeros((3, 8))
    ro.flags.writeable = False
    one_row = np.ones(8)
    return [
        # (label, kernel, b, c, exception, argument named)
        ('b float32', 'runtime', B.astype(np.float32), C, TypeError, 'b'),
        ('c float32', 'runtime', B, C.astype(np.float32), TypeError, 'c'),
        ('b int', 'runtime', B.astype(np.int64), C, TypeError, 'b'),
        ('b big-endian', 'runtime', B.astype('>f8'), C, TypeError, 'b'),
        ('b list', 'runtime', B.tolist(), C, TypeError, 'b'),
        ('b None', 'runtime', None, C, TypeError, 'b'),
        ('c None', 'runtime', B, None, TypeError, 'c'),
        ('b 1-D', 'runtime', B[0], C, ValueError, 'b'),
        ('c 1-D', 'runtime', B, C[0], ValueError, 'c'),
        ('b 3-D', 'runtime', B[None], C, ValueError, 'b'),
        ('b rows', 'runtime', np.ones((3, 8)), C, ValueError, 'b'),
        ('c rows', 'runtime', B, np.zeros((2, 8)), ValueError, 'c'),
        ('b columns', 'runtime', np.ones((2, 7)), C, ValueError, 'b'),
        ('b strided', 'runtime', wide_b[:, ::2], C, ValueError, 'b'),
        ('c strided', 'runtime', B, wide_c[:, ::2], ValueError, 'c'),
        ('b Fortran', 'runtime', np.asfortranarray(B), C, ValueError, 'b'),
        ('c Fortran', 'runtime', B, np.asfortranarray(C), ValueError, 'c'),
        ('c read-only', 'runtime', B, ro, ValueError, 'c'),
        ('b reversed rows', 'runtime', B[::-1], C, ValueError, 'b'),
        ('c reversed rows', 'runtime', B, C[::-1], ValueError, 'c'),
        ('c rows aliased', 'runtime', B,
         as_strided(np.zeros(8), (3, 8), (0, 8)), ValueError, 'c'),
        ('b stride beyond C int', 'runtime',
         as_strided(one_row, (2, 8), (8*2**31, 8)), C, ValueError, 'ldb'),
        ('baked n differs', 'baked', np.ones((2, 9)), np.zeros((3, 9)),
         ValueError, 'n'),
        ('baked ldb differs', 'baked', wide_b[:, :8], C, ValueError, 'ldb'),
        ('baked ldc differs', 'baked', B, wide_c[:, :8], ValueError, 'ldc'),
        ('unaligned stride', 'aligned', np.ones((2, 9))[:, :7],
         np.zeros((3, 7)), ValueError, 'b'),
        ('unaligned start', 'aligned', wide_b[:, 1:9], C, ValueError, 'b'),
    ]


PANELS = _panels()


@pytest.mark.parametrize('label,kernel,b,c,exc,arg', PANELS,
                         ids=_ids(PANELS))
def test_run_hip_rejects_panels(hip_kernels, label, kernel, b, c, exc, arg):
    from gimmik.emulate import run_hip
    src, meta = hip_kernels[kernel]
    cbefore = c.copy() if isinstance(c, np.ndarray) else None
    with raises_naming(exc, arg):
        run_hip(src, meta, b, c)
    if cbefore is not None:
        assert np.array_equal(c, cbefore, equal_nan=True)


# kname=None means "the name in meta" for run_hip
RUN_HIP_BAD_KNAMES = [x for x in BAD_KNAMES if x[1] is not None]


@pytest.mark.parametrize('label,kname,exc', RUN_HIP_BAD_KNAMES,
                         ids=_ids(RUN_HIP_BAD_KNAMES))
def test_run_hip_rejects_kname(hip_kernels, label, kname, exc):
    from gimmik.emulate import run_hip
    src, meta = hip_kernels['runtime']
    with raises_naming(exc, 'kname'):
        run_hip(src, meta, np.ones((2, 4)), np.zeros((3, 4)), kname=kname)



# -- isa.inspect and hiprtc.compile_hip ----------------------------------------
BAD_ARCHES = [('CUDA arch', 'sm_90'), ('empty', ''), ('None', None),
              ('flag', '-O0'), ('with a flag', 'gfx942 --foo'),
              ('with code', 'gfx942;rm'), ('upper case', 'GFX942'),
              ('newline', 'gfx942\n'), ('int', 942)]
BAD_SOURCES = [('bytes', b'__global__ void k() {}', TypeError),
               ('None', None, TypeError),
               ('NUL', 'void k() {}\0', ValueError)]


@pytest.mark.parametrize('label,arch', BAD_ARCHES, ids=_ids(BAD_ARCHES))
def test_isa_inspect_rejects_arch(label, arch):
    isa = pytest.importorskip('gimmik.isa')
    with raises_naming((ValueError, TypeError), 'arch'):
        isa.inspect('extern "C" __global__ void k() {}', arch)


@pytest.mark.parametrize('label,src,exc', BAD_SOURCES, ids=_ids(BAD_SOURCES))
def test_isa_inspect_rejects_src(label, src, exc):
    isa = pytest.importorskip('gimmik.isa')
    with raises_naming(exc, 'src'):
        isa.inspect(src, 'gfx942')


@pytest.mark.parametrize('label,arch', BAD_ARCHES, ids=_ids(BAD_ARCHES))
def test_compile_hip_rejects_arch(label, arch):
    hiprtc = pytest.importorskip('gimmik.hiprtc')
    with raises_naming((ValueError, TypeError), 'arch'):
        hiprtc.compile_hip('extern "C" __global__ void k() {}', arch, 'k')


@pytest.mark.parametrize('label,src,exc', BAD_SOURCES, ids=_ids(BAD_SOURCES))
def test_compile_hip_rejects_src(label, src, exc):
    hiprtc = pytest.importorskip('gimmik.hiprtc')
    with raises_naming(exc, 'src'):
        hiprtc.compile_hip(src)


@pytest.mark.parametrize('label,kname,exc', BAD_KNAMES, ids=_ids(BAD_KNAMES))
def test_compile_hip_rejects_kname(label, kname, exc):
    hiprtc = pytest.importorskip('gimmik.hiprtc')
    with raises_naming(exc, 'kname'):
        hiprtc.compile_hip('extern "C" __global__ void k() {}', 'gfx90a',
                           kname)


# -- the tuner -----------------------------------------------------------------
def _tune():
    return pytest.importorskip('gimmik.tune').tune


@pytest.mark.parametrize('label,A,exc', BAD_MATRICES, ids=_ids(BAD_MATRICES))
def test_tune_rejects_matrix(label, A, exc):
    with raises_naming(exc, 'A'):
        _tune()(A, platform='c', n=64, use_cache=False)


@pytest.mark.parametrize('label,beta,exc', BAD_SCALARS, ids=_ids(BAD_SCALARS))
def test_tune_rejects_beta(label, beta, exc):
    with raises_naming(exc, 'beta'):
        _tune()(GOOD_A, beta=beta, platform='c', n=64, use_cache=False)


@pytest.mark.parametrize('label,dtype', BAD_DTYPES, ids=_ids(BAD_DTYPES))
def test_tune_rejects_dtype(label, dtype):
    with raises_naming(TypeError, 'dtype'):
        _tune()(GOOD_A, dtype=dtype, platform='c', n=64, use_cache=False)


# the tuner takes n alone (ldb and ldc default to n)
TUNE_SIZES = [
    ('negative n', dict(n=-1), ValueError, 'n'),
    ('zero n', dict(n=0), ValueError, 'n'),
    ('float n', dict(n=64.0), TypeError, 'n'),
    ('str n', dict(n='64'), TypeError, 'n'),
    ('n beyond C int', dict(n=2**31), ValueError, 'n'),
    ('ldb < n', dict(n=64, ldb=32), ValueError, 'ldb'),
    ('ldc < n', dict(n=64, ldc=32), ValueError, 'ldc'),
    ('negative ldb', dict(n=64, ldb=-64), ValueError, 'ldb'),
]


@pytest.mark.parametrize('label,sizes,exc,arg', TUNE_SIZES,
                         ids=_ids(TUNE_SIZES))
def test_tune_rejects_sizes(label, sizes, exc, arg):
    with raises_naming(exc, arg):
        _tune()(GOOD_A, platform='c', use_cache=False, **sizes)


@pytest.mark.parametrize('platform', ['rocm', 'HIP', 'opencl', '', None, 3,
                                      'c; rm -rf /'])
def test_tune_rejects_platform(platform):
    with raises_naming((ValueError, TypeError), 'platform'):
        _tune()(GOOD_A, platform=platform, n=64, use_cache=False)


# -- the command line ----------------------------------------------------------
def _cli(capsys, argv):
    """Run `gimmik argv`; returns (exit status, stderr)."""
    from gimmik.cli import main
    try:
        status = main(argv)
    except SystemExit as e:     # argparse's own rejections
        status = e.code
    return status, capsys.readouterr().err


@pytest.fixture
def mtx(tmp_path):
    """GOOD_A as a MatrixMarket file."""
    scipy_io = pytest.importorskip('scipy.io')
    path = tmp_path / 'good.mtx'
    scipy_io.mmwrite(str(path), GOOD_A)
    return str(path)


# (sub-command, label, extra arguments, word the message must contain)
BAD_CLI = [
    ('isa', 'CUDA arch', ['--arch', 'sm_90'], 'arch'),
    ('isa', 'arch with code', ['--arch', 'gfx942;rm'], 'arch'),
    ('isa', 'float16', ['--dtype', 'float16'], 'dtype'),
    ('isa', 'int dtype', ['--dtype', 'int32'], 'dtype'),
    ('isa', 'NaN beta', ['--beta', 'nan'], 'beta'),
    ('isa', 'Inf beta', ['--beta', 'inf'], 'beta'),
    ('isa', 'word beta', ['--beta', 'half'], 'beta'),
    ('isa', 'zero n', ['--n', '0'], 'n'),
    ('isa', 'negative n', ['--n', '-5'], 'n'),
    ('isa', 'zero aligne', ['--aligne', '0'], 'aligne'),
    ('isa', 'zero jobs', ['--jobs', '0'], 'jobs'),
    ('tune', 'bad platform', ['--platform', 'rocm'], 'platform'),
    ('tune', 'float16', ['--dtype', 'float16'], 'dtype'),
    ('tune', 'NaN beta', ['--beta', 'nan'], 'beta'),
    ('tune', 'zero n', ['--n', '0'], 'n'),
    ('tune', 'negative n', ['--n', '-5'], 'n'),
]


@pytest.mark.parametrize('cmd,label,extra,word', BAD_CLI,
                         ids=[f'{r[0]}-{r[1]}' for r in BAD_CLI])
def test_cli_rejects(capsys, mtx, cmd, label, extra, word):
    pytest.importorskip(f'gimmik.{cmd}')
    pytest.importorskip('gimmik.operators')
    status, err = _cli(capsys, [cmd, mtx, *extra])
    assert status == 2, err
    assert re.search(rf'(?<![A-Za-z0-9_]){word}(?![A-Za-z0-9_])', err), err
    assert 'Traceback' not in err


@pytest.mark.parametrize('cmd', ['isa', 'tune'])
@pytest.mark.parametrize('label,spec', [
    ('missing file', 'no/such/file.mtx'),
    ('npz without key', 'ops.npz'),
    ('unknown suffix', 'ops.txt'),
])
def test_cli_rejects_operator(capsys, cmd, label, spec):
    pytest.importorskip(f'gimmik.{cmd}')
    pytest.importorskip('gimmik.operators')
    status, err = _cli(capsys, [cmd, spec])
    assert status == 2, err
    assert 'Traceback' not in err


@pytest.mark.parametrize('label,body', [
    ('all zero', '%%MatrixMarket matrix coordinate real general\n2 2 0\n'),
    ('NaN', '%%MatrixMarket matrix array real general\n1 1\nnan\n'),
    ('complex', '%%MatrixMarket matrix array complex general\n1 1\n1 2\n'),
])
def test_cli_rejects_bad_operator_file(capsys, tmp_path, label, body):
    pytest.importorskip('gimmik.isa')
    pytest.importorskip('gimmik.operators')
    path = tmp_path / 'bad.mtx'
    path.write_text(body)
    status, err = _cli(capsys, ['isa', str(path)])
    assert status == 2, err
    assert 'Traceback' not in err


# -- literals ------------------------------------------------------------------
EDGE_F64 = [1e-300, 1e300, 0.1, 1/3, 5e-324, 2.2250738585072014e-308,
            1.7976931348623157e308, -0.1, 1.0, 123456789.123456789,
            2.0**-1074*3]
EDGE_F32 = [float(np.float32(x)) for x in
            (1e-38, 3e38, 0.1, 1/3, 1e-45, 1.1754943508222875e-38,
             3.4028234663852886e38, -0.1, 1.0, 16777217.0)]


@pytest.mark.parametrize('x', EDGE_F64)
def test_f64_literal_round_trips(x):
    s = c_literal(x, np.float64)
    assert re.fullmatch(r'-?[0-9.]+(e[-+]?[0-9]+)?', s), s
    assert float(s) == x


@pytest.mark.parametrize('x', EDGE_F32)
def test_f32_literal_round_trips(x):
    s = c_literal(x, np.float32)
    assert re.fullmatch(r'-?[0-9.]+(e[-+]?[0-9]+)?f', s), s
    assert np.float32(s[:-1]) == np.float32(x)


@pytest.mark.parametrize('x', [float('nan'), float('inf'), -float('inf'),
                               1e39])
def test_literal_refuses_non_finite(x):
    with pytest.raises((AssertionError, ValueError)):
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


# sub-commands that take no operator: (sub-command, label, arguments, word)
BAD_CLI_NO_OPERATOR = [
    ('sweep', 'bad platform', ['--platform', 'rocm'], 'platform'),
    ('sweep', 'float16', ['--dtype', 'f16'], 'dtype'),
    ('sweep', 'zero n', ['--n', '0'], 'n'),
    ('sweep', 'negative n', ['--n', '-3'], 'n'),
    ('sweep', 'word n', ['--n', 'many'], 'n'),
    ('report', 'missing directory', ['no/such/sweep'], 'no/such/sweep'),
]


@pytest.mark.parametrize('cmd,label,argv,word', BAD_CLI_NO_OPERATOR,
                         ids=[f'{r[0]}-{r[1]}' for r in BAD_CLI_NO_OPERATOR])
def test_cli_rejects_without_operator(capsys, tmp_path, monkeypatch, cmd,
                                      label, argv, word):
    pytest.importorskip(f'gimmik.{cmd}')
    monkeypatch.chdir(tmp_path)
    status, err = _cli(capsys, [cmd, *argv])
    assert status == 2, err
    assert word in err, err
    assert 'Traceback' not in err


# -- the C runtime's launches ----------------------------------------------------
@pytest.fixture(scope='module')
def c_launches():
    """launch() of a runtime-n and a baked-n C kernel (built before the
    autouse no_source patch applies to the test)."""
    pytest.importorskip('gimmik.c')
    runtime_c = pytest.importorskip('gimmik.runtime.c')
    from gimmik.c import CMatMul
    from gimmik.runtime import RuntimeUnavailable
    try:
        rt = runtime_c.Runtime()
    except RuntimeUnavailable as e:
        pytest.skip(str(e))
    A = np.array([[1.0, 2.0], [0.0, 3.0], [1.0, 1.0]])
    out = {}
    for key, kw in (('runtime', {}), ('baked', dict(n=8, ldb=8, ldc=8))):
        src, meta = next(CMatMul(A, **kw).kernels(np.float64))
        out[key] = rt.compile(src, meta)
    return out


def _c_buffers():
    B, C = np.ones((2, 8)), np.zeros((3, 8))
    wide_b = np.ones((2, 16))
    ro = np.zeros((3, 8))
    ro.flags.writeable = False
    return [
        # (label, kernel, b, c, n, ldb, ldc, exception, argument named)
        ('b float32', 'runtime', B.astype(np.float32), C, 8, 8, 8,
         TypeError, 'b'),
        ('c int', 'runtime', B, C.astype(np.int64), 8, 8, 8, TypeError, 'c'),
        ('b list', 'runtime', B.tolist(), C, 8, 8, 8, TypeError, 'b'),
        ('c None', 'runtime', B, None, 8, 8, 8, TypeError, 'c'),
        ('b strided', 'runtime', wide_b[:, ::2], C, 8, 8, 8, ValueError, 'b'),
        ('c Fortran', 'runtime', B, np.asfortranarray(C), 8, 8, 8,
         ValueError, 'c'),
        ('b rows', 'runtime', np.ones((3, 8)), C, 8, 8, 8, ValueError, 'b'),
        ('ldb not the row length', 'runtime', B, C, 8, 16, 8, ValueError,
         'b'),
        ('zero n', 'runtime', B, C, 0, 8, 8, ValueError, 'n'),
        ('negative n', 'runtime', B, C, -4, 8, 8, ValueError, 'n'),
        ('n beyond ld', 'runtime', B, C, 9, 8, 8, ValueError, 'n'),
        ('c read-only', 'runtime', B, ro, 8, 8, 8, ValueError, 'c'),
        ('baked n differs', 'baked', np.ones((2, 9)), np.zeros((3, 9)), 9, 9,
         9, ValueError, 'n'),
    ]


C_BUFFERS = _c_buffers()


@pytest.mark.parametrize('label,kernel,b,c,n,ldb,ldc,exc,arg', C_BUFFERS,
                         ids=_ids(C_BUFFERS))
def test_c_launch_rejects_buffers(c_launches, label, kernel, b, c, n, ldb,
                                  ldc, exc, arg):
    cbefore = c.copy() if isinstance(c, np.ndarray) else None
    with raises_naming(exc, arg):
        c_launches[kernel](b, c, n, ldb, ldc)
    if cbefore is not None:
        assert np.array_equal(c, cbefore)


# the tuner's optional host panels: (label, b, c, exception, argument named)
TUNE_PANELS = [
    ('b list', [[1.0]*64]*3, None, TypeError, 'b'),
    ('b rows', np.ones((2, 64)), None, ValueError, 'b'),
    ('b too narrow', np.ones((3, 32)), None, ValueError, 'b'),
    ('b float32', np.ones((3, 64), np.float32), None, TypeError, 'b'),
    ('c 1-D', None, np.ones(64), ValueError, 'c'),
    ('c int', None, np.ones((2, 64), np.int64), TypeError, 'c'),
]


@pytest.mark.parametrize('label,b,c,exc,arg', TUNE_PANELS,
                         ids=_ids(TUNE_PANELS))
def test_tune_rejects_panels(label, b, c, exc, arg):
    with raises_naming(exc, arg):
        _tune()(GOOD_A, platform='c', n=64, use_cache=False, b=b, c=c)


def test_catalogue_size():
    """The numbers the closing report quotes."""
    n = (len(BAD_MATRICES) + len(BAD_SCALARS) + len(BAD_SIZES)
         + len(BAD_DTYPES) + len(BAD_KNAMES) + len(BAD_OPTIONS)
         + len(PANELS) + len(BAD_ARCHES) + len(BAD_SOURCES) + len(BAD_CLI)
         + len(TUNE_SIZES) + len(BAD_CLI_NO_OPERATOR) + len(C_BUFFERS)
         + len(TUNE_PANELS))
    print(f'{n} distinct bad inputs in the catalogue')
    assert n >= 150
