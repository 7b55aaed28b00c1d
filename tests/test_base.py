"""gimmik.base: the table walk's send() feedback and the generators'
argument checks."""

import warnings

import numpy as np
import pytest

import gimmik
from bad_inputs import (BAD_DTYPES, BAD_KNAMES, BAD_MATRICES, BAD_OPTIONS,
                        BAD_SCALARS, BAD_SIZES, GOOD_A, _ids, platform_class,
                        raises_naming)
from conftest import A_SMALL, PLATFORM_OPTS
from gimmik import PLATFORMS


# -- send() feedback ----------------------------------------------------------
BAD_FEEDBACK = [
    ({'runtime': -1.0}, 'runtime'), ({'runtime': 0}, 'runtime'),
    ({'runtime': 0.0}, 'runtime'), ({'runtime': float('nan')}, 'runtime'),
    ({'runtime': -float('inf')}, 'runtime'), ({'runtime': 'fast'}, 'runtime'),
    ({'runtime': 1e-3 + 1j}, 'runtime'), ({'runtime': True}, 'runtime'),
    ({'runtime': [1e-3]}, 'runtime'), ({'runtime': b'1'}, 'runtime'),
    (0.001, 'feedback'), ([1e-3], 'feedback'), ('1e-3', 'feedback'),
    ((1e-3,), 'feedback'), (1, 'feedback'),
]


def _walk(mm, platform, feedback):
    """Variants offered when every send() carries `feedback`."""
    kgen = mm.kernels(np.float64, **PLATFORM_OPTS[platform])
    seen = [next(kgen)[1]['variant']]
    while True:
        try:
            seen.append(kgen.send(feedback)[1]['variant'])
        except StopIteration:
            return seen


@pytest.mark.parametrize('feedback,word', BAD_FEEDBACK,
                         ids=[repr(f) for f, _ in BAD_FEEDBACK])
def test_malformed_feedback_never_hides_candidates(platform, feedback, word):
    A = np.random.default_rng(3).standard_normal((24, 24))
    mm = gimmik.matmul_class(platform)(A, aligne=2)
    everything = [c.variant for c in
                  mm.candidates(np.float64, **PLATFORM_OPTS[platform])]
    assert _walk(mm, platform, None) == everything
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        assert _walk(mm, platform, feedback) == everything
    msgs = [str(w.message) for w in caught
            if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == len(everything)      # one per send()
    assert all(f"'{word}'" in m or word in m for m in msgs), msgs[:1]


def test_good_feedback_still_prunes():
    A = np.random.default_rng(3).standard_normal((24, 24))
    mm = gimmik.CMatMul(A, aligne=2)
    everything = _walk(mm, 'c', None)
    kgen = mm.kernels(np.float64)
    src, meta = next(kgen)
    seen = [meta['variant']]
    first = meta['tplname']
    while True:
        t = 1e-3 if meta['tplname'] == first else 1.0
        try:
            # numbers of any real type, other keys ignored
            src, meta = kgen.send({'runtime': np.float32(t), 'regs': 'x'})
        except StopIteration:
            break
        seen.append(meta['variant'])
    assert len(seen) < len(everything)


def test_inf_runtime_means_no_time():
    mm = gimmik.CMatMul(A_SMALL)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert _walk(mm, 'c', {'runtime': float('inf')}) == \
            _walk(mm, 'c', {'runtime': None}) == _walk(mm, 'c', {})


# -- bad input: *MatMul constructors and kernels() ----------------------------
@pytest.fixture(params=sorted(PLATFORMS))
def matmul_cls(request):
    return platform_class(request.param)


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('label,A,exc', BAD_MATRICES, ids=_ids(BAD_MATRICES))
def test_constructor_rejects_matrix(matmul_cls, label, A, exc):
    with raises_naming(exc, 'A'):
        matmul_cls(A)


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('label,beta,exc', BAD_SCALARS, ids=_ids(BAD_SCALARS))
def test_constructor_rejects_beta(matmul_cls, label, beta, exc):
    with raises_naming(exc, 'beta'):
        matmul_cls(GOOD_A, beta=beta)


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('label,sizes,exc,arg', BAD_SIZES,
                         ids=_ids(BAD_SIZES))
def test_constructor_rejects_sizes(matmul_cls, label, sizes, exc, arg):
    with raises_naming(exc, arg):
        matmul_cls(GOOD_A, **sizes)


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('label,dtype', BAD_DTYPES, ids=_ids(BAD_DTYPES))
def test_kernels_rejects_dtype(matmul_cls, label, dtype):
    with raises_naming(TypeError, 'dtype'):
        matmul_cls(GOOD_A).kernels(dtype)


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('label,kname,exc', BAD_KNAMES, ids=_ids(BAD_KNAMES))
def test_kernels_rejects_kname(matmul_cls, label, kname, exc):
    with raises_naming(exc, 'kname'):
        matmul_cls(GOOD_A).kernels(np.float64, kname=kname)


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('platform,label,opts,arg', BAD_OPTIONS,
                         ids=[f'{r[0]}-{r[1]}' for r in BAD_OPTIONS])
def test_kernels_rejects_options(platform, label, opts, arg):
    cls = platform_class(platform)
    with raises_naming((ValueError, TypeError), arg):
        cls(GOOD_A).kernels(np.float64, **opts)


@pytest.mark.usefixtures('no_source')
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
