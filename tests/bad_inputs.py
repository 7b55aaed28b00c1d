"""The bad-input catalogue: data tables (BAD_*) of every kind of bad
argument, walked against each public entry point by the tests of its
module (each must raise a ValueError or TypeError whose message names the
argument, before any source is rendered or compiled: the no_source
fixture), and the helpers they share."""

import importlib
import re

import numpy as np
import pytest

from gimmik import PLATFORMS  # platform -> (module, class)


GOOD_A = np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.5]])


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


def raises_naming(exc, *names):
    """pytest.raises(exc) whose message must name one of `names`."""
    pattern = '|'.join(rf'(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])'
                       for n in names)
    return pytest.raises(exc, match=pattern)


def _ids(table):
    return [row[0] for row in table]


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


BAD_ARCHES = [('CUDA arch', 'sm_90'), ('empty', ''), ('None', None),
              ('flag', '-O0'), ('with a flag', 'gfx942 --foo'),
              ('with code', 'gfx942;rm'), ('upper case', 'GFX942'),
              ('newline', 'gfx942\n'), ('int', 942)]


BAD_SOURCES = [('bytes', b'__global__ void k() {}', TypeError),
               ('None', None, TypeError),
               ('NUL', 'void k() {}\0', ValueError)]


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


# sub-commands that take no operator: (sub-command, label, arguments, word)
BAD_CLI_NO_OPERATOR = [
    ('sweep', 'bad platform', ['--platform', 'rocm'], 'platform'),
    ('sweep', 'float16', ['--dtype', 'f16'], 'dtype'),
    ('sweep', 'zero n', ['--n', '0'], 'n'),
    ('sweep', 'negative n', ['--n', '-3'], 'n'),
    ('sweep', 'word n', ['--n', 'many'], 'n'),
    ('report', 'missing directory', ['no/such/sweep'], 'no/such/sweep'),
]


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


# the tuner's optional host panels: (label, b, c, exception, argument named)
TUNE_PANELS = [
    ('b list', [[1.0]*64]*3, None, TypeError, 'b'),
    ('b rows', np.ones((2, 64)), None, ValueError, 'b'),
    ('b too narrow', np.ones((3, 32)), None, ValueError, 'b'),
    ('b float32', np.ones((3, 64), np.float32), None, TypeError, 'b'),
    ('c 1-D', None, np.ones(64), ValueError, 'c'),
    ('c int', None, np.ones((2, 64), np.int64), TypeError, 'c'),
]
