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
@pytest.mark.parametrize('platform', ['rocm', 'HIP', 'opencl', '', None, 3,
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
