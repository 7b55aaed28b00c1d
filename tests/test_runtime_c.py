"""gimmik.runtime.c: the C runtime's compiled launches."""

import numpy as np
import pytest

from bad_inputs import C_BUFFERS, _ids, raises_naming


# -- bad input: launches ------------------------------------------------------
@pytest.fixture(scope='module')
def c_launches():
    """launch() of a runtime-n and a baked-n C kernel (built before the
    no_source patch applies to the test)."""
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


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('label,kernel,b,c,n,ldb,ldc,exc,arg', C_BUFFERS,
                         ids=_ids(C_BUFFERS))
def test_c_launch_rejects_buffers(c_launches, label, kernel, b, c, n, ldb,
                                  ldc, exc, arg):
    cbefore = c.copy() if isinstance(c, np.ndarray) else None
    with raises_naming(exc, arg):
        c_launches[kernel](b, c, n, ldb, ldc)
    if cbefore is not None:
        assert np.array_equal(c, cbefore)
