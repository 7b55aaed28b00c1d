"""The gimmik package: generate_mm, the legacy entry point."""

import importlib
import warnings

import numpy as np
import pytest

from bad_inputs import (BAD_DTYPES, BAD_KNAMES, BAD_MATRICES, BAD_SCALARS,
                        BAD_SIZES, GOOD_A, _ids, raises_naming)


# -- bad input: generate_mm ---------------------------------------------------
def _generate_mm():
    gen = getattr(importlib.import_module('gimmik'), 'generate_mm', None)
    if gen is None:
        pytest.skip('gimmik.generate_mm has not landed')
    return gen


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('label,A,exc', BAD_MATRICES, ids=_ids(BAD_MATRICES))
def test_generate_mm_rejects_matrix(label, A, exc):
    with raises_naming(exc, 'mat'):
        _generate_mm()(A, np.float64, 'hip')


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('arg', ['alpha', 'beta'])
@pytest.mark.parametrize('label,x,exc', BAD_SCALARS, ids=_ids(BAD_SCALARS))
def test_generate_mm_rejects_scalars(arg, label, x, exc):
    with raises_naming(exc, arg):
        _generate_mm()(GOOD_A, np.float64, 'hip', **{arg: x})


@pytest.mark.usefixtures('no_source')
def test_generate_mm_rejects_zero_alpha():
    with raises_naming(ValueError, 'alpha'):
        _generate_mm()(GOOD_A, np.float64, 'hip', alpha=0.0)


@pytest.mark.usefixtures('no_source')
def test_generate_mm_rejects_overflowing_alpha():
    # the error alone: no numpy overflow warning before it
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        with raises_naming(ValueError, 'alpha', 'alpha*mat'):
            _generate_mm()([[1e300]], np.float64, 'hip', alpha=1e10)


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('platform', ['rocm', 'HIP', 'metal', '', None, 3,
                                      'hip; rm -rf /', 'auto'])
def test_generate_mm_rejects_platform(platform):
    with raises_naming((ValueError, TypeError), 'platform'):
        _generate_mm()(GOOD_A, np.float64, platform)


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('label,dtype', BAD_DTYPES, ids=_ids(BAD_DTYPES))
def test_generate_mm_rejects_dtype(label, dtype):
    with raises_naming(TypeError, 'dtype'):
        _generate_mm()(GOOD_A, dtype, 'hip')


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('label,kname,exc', BAD_KNAMES, ids=_ids(BAD_KNAMES))
def test_generate_mm_rejects_funcn(label, kname, exc):
    # the message names the kernel name as funcn (the argument) or kname
    with raises_naming(exc, 'funcn', 'kname'):
        _generate_mm()(GOOD_A, np.float64, 'hip', funcn=kname)


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('label,sizes,exc,arg',
                         [r for r in BAD_SIZES if 'aligne' not in r[1]],
                         ids=[r[0] for r in BAD_SIZES if 'aligne' not in r[1]])
def test_generate_mm_rejects_sizes(label, sizes, exc, arg):
    with raises_naming(exc, arg):
        _generate_mm()(GOOD_A, np.float64, 'hip', **sizes)


def test_upstream_public_names(rng):
    """Every public name of upstream GiMMiK 4.0 imports from gimmik: the
    constants with upstream's values, COpenMPMatMul as the C platform
    (its kernel runs on the C runtime), and the generators gimmik does not
    offer raise NotImplementedError naming the one to use."""
    import ctypes

    import gimmik
    from conftest import Panels
    from gimmik.runtime import get_runtime
    names = ('CUDAMatMul', 'HIPMatMul', 'OpenCLMatMul', 'CMatMul',
             'COpenMPMatMul', 'ISPCMatMul', 'PTXMatMul', 'SIG_BC', 'SIG_ABC',
             'SIG_BDESC_C', 'SIG_BDESC_CDESC', 'SIGS', 'OPERAND_BUFFER',
             'OPERAND_TENSORMAP')
    for name in names:
        assert getattr(gimmik, name) is not None, name
    assert gimmik.SIG_BC in gimmik.SIGS and len(gimmik.SIGS) == 4
    A = rng.standard_normal((6, 4))
    src, meta = next(iter(gimmik.COpenMPMatMul(A, beta=1.0).kernels(
        np.float64, kname='gimmik_mm_omp')))
    fn = getattr(get_runtime('c').build(src, 'gimmik_mm_omp'), 'gimmik_mm_omp')
    fn.restype = None
    fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                   ctypes.c_void_p, ctypes.c_int]
    p = Panels(rng, A, 1.0, np.float64, 37, 40, 41)
    fn(37, p.b.ctypes.data, 40, p.c.ctypes.data, 41)
    p.check('COpenMPMatMul')
    for cls, alt in ((gimmik.PTXMatMul, 'CUDAMatMul'),
                     (gimmik.ISPCMatMul, 'CMatMul')):
        with pytest.raises(NotImplementedError, match=alt):
            cls(A)
