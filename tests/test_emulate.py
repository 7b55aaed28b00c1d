"""The CPU executor itself: argument checks, barrier semantics, poisoned
LDS, and the errors it reports instead of hanging."""

import numpy as np
import pytest

from bad_inputs import BAD_KNAMES, PANELS, _ids, raises_naming
from conftest import Panels
from gimmik import HIPMatMul
from gimmik.emulate import EmulatorError, run_hip

PROLOGUE = '''extern "C" __global__ void __launch_bounds__(128)
gimmik_mm(int n, const double* __restrict__ b, int ldb,
          double* __restrict__ c, int ldc)
{
    const int col = blockIdx.x*blockDim.x + threadIdx.x;
'''


def meta_for(block=(64, 2, 1), m=2, k=2):
    return {'dtype': 'float64', 'args': ('n', 'b', 'ldb', 'c', 'ldc'),
            'block': block, 'width': 1, 'm': m, 'k': k, 'n': None}


def panels(n=100, m=2, k=2):
    return np.ones((k, n)), np.zeros((m, n))


def test_block_exchange_through_lds():
    """Wavefront 1 reads what wavefront 0 wrote, after a barrier."""
    src = PROLOGUE + '''
    __shared__ double x[64];
    if (threadIdx.y == 0)
        x[threadIdx.x] = col < n ? 2.0*b[col] : 0.0;
    __syncthreads();
    if (threadIdx.y == 1 && col < n)
        c[col] = x[threadIdx.x] + 1.0;
}
'''
    b, c = panels()
    b[0] = np.arange(100)
    run_hip(src, meta_for(), b, c)
    assert np.array_equal(c[0], 2*np.arange(100) + 1)


def test_lds_starts_poisoned():
    src = PROLOGUE + '''
    __shared__ double x[64];
    if (col < n) c[col] = x[threadIdx.x];
}
'''
    b, c = panels()
    run_hip(src, meta_for((64, 1, 1)), b, c)
    assert np.isnan(c[0]).all()


def test_divergent_barrier_is_an_error():
    src = PROLOGUE + '''
    if (threadIdx.x == 5) return;
    __syncthreads();
    if (col < n) c[col] = 1.0;
}
'''
    b, c = panels()
    with pytest.raises(EmulatorError, match='divergent __syncthreads'):
        run_hip(src, meta_for(), b, c)


def test_compile_error_carries_the_log():
    src = PROLOGUE + '    this is not C++;\n}\n'
    b, c = panels()
    with pytest.raises(RuntimeError, match='rejected'):
        run_hip(src, meta_for(), b, c)


@pytest.fixture
def baked(rng):
    A = rng.standard_normal((4, 3))
    mm = HIPMatMul(A, n=50, ldb=52, ldc=54)
    src, meta = next(mm.kernels('f64'))
    return A, src, meta


def test_baked_sizes_must_match(rng, baked):
    A, src, meta = baked
    p = Panels(rng, A, 0.0, np.float64, 50, 52, 54)
    run_hip(src, meta, p.b, p.c)
    p.check('baked')
    for n, lb, lc, what in ((49, 52, 54, 'n'), (50, 50, 54, 'ldb'),
                            (50, 52, 56, 'ldc')):
        q = Panels(rng, A, 0.0, np.float64, n, lb, lc)
        with pytest.raises(ValueError, match=f'{what} is'):
            run_hip(src, meta, q.b, q.c)


def test_panel_checks(rng, baked):
    A, src, meta = baked
    p = Panels(rng, A, 0.0, np.float64, 50, 52, 54)
    with pytest.raises(TypeError, match='dtype'):
        run_hip(src, meta, p.b.astype(np.float32), p.c)
    with pytest.raises(TypeError, match='NumPy array'):
        run_hip(src, meta, p.b.tolist(), p.c)
    with pytest.raises(ValueError, match='rows'):
        run_hip(src, meta, p.b[:2], p.c)
    with pytest.raises(ValueError, match='unit stride'):
        run_hip(src, meta, p.bfull[:, ::2][:, :50], p.c)
    ro = p.c.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match='read-only'):
        run_hip(src, meta, p.b, ro)


def test_misaligned_panels_rejected(rng):
    A = rng.standard_normal((3, 3))
    mm = HIPMatMul(A, aligne=2)
    src, meta = next(iter(mm.kernels('f64')))
    assert meta['aligne'] == 2
    b = np.ones((3, 41))[:, 1:]        # odd start: not 2-element aligned
    c = np.zeros((3, 40))
    with pytest.raises(ValueError, match='aligned'):
        run_hip(src, meta, b, c)


def test_kernel_name_comes_from_meta(rng):
    A = rng.standard_normal((3, 2))
    src, meta = next(HIPMatMul(A).kernels('f64', kname='op_m0'))
    p = Panels(rng, A, 0.0, np.float64, 5)
    run_hip(src, meta, p.b, p.c)
    p.check('kname from meta')


# -- bad input: run_hip -------------------------------------------------------
@pytest.fixture(scope='module')
def hip_kernels():
    """(src, meta) of a runtime-n kernel, a baked-n one and an aligned one;
    rendered before the no_source patch applies to the test."""
    from gimmik.hip import HIPMatMul
    A = np.array([[1.0, 2.0], [0.0, 3.0], [1.0, 1.0]])
    out = {}
    for key, kw in (('runtime', {}), ('baked', dict(n=8, ldb=8, ldc=8)),
                    ('aligned', dict(aligne=2))):
        out[key] = next(HIPMatMul(A, **kw).kernels(np.float64))
    return out


@pytest.mark.usefixtures('no_source')
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


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('label,kname,exc', RUN_HIP_BAD_KNAMES,
                         ids=_ids(RUN_HIP_BAD_KNAMES))
def test_run_hip_rejects_kname(hip_kernels, label, kname, exc):
    from gimmik.emulate import run_hip
    src, meta = hip_kernels['runtime']
    with raises_naming(exc, 'kname'):
        run_hip(src, meta, np.ones((2, 4)), np.zeros((3, 4)), kname=kname)


# -- the executor's build: stack sized from the kernel, compiler commands --
BIG_FRAME = PROLOGUE + '''
    // a frame of 4 MiB, far beyond a fixed 512 KiB fiber stack
    volatile double scratch[1 << 19];
    for (int i = 0; i < (1 << 19); i += 512)
        scratch[i] = col;
    if (col < n)
        c[col] = b[col] + scratch[(col % 2)*512] - col;
}
'''

_RUN_BIG = '''
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from test_emulate import BIG_FRAME, meta_for, panels
from gimmik.emulate import run_hip
b, c = panels(n=300, m=1, k=1)
b[0] = np.arange(300)
run_hip(BIG_FRAME, meta_for(block=(64, 1, 1), m=1, k=1), b, c)
assert (c[0] == np.arange(300)).all(), c
print('ok')
'''


def test_fiber_stack_sized_from_the_kernel(tmp_path):
    """A kernel whose frame exceeds any fixed stack runs (in a process of
    its own: an overflow would end it with SIGSEGV)."""
    import os
    import subprocess
    import sys
    env = {**os.environ, 'GIMMIK_CACHE_DIR': str(tmp_path / 'cache'),
           'PYTHONPATH': os.pathsep.join(sys.path)}
    r = subprocess.run([sys.executable, '-c', _RUN_BIG,
                        os.path.dirname(__file__)], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == 'ok', \
        (r.returncode, r.stderr[-2000:])


def test_stack_usage_report(tmp_path):
    from gimmik.emulate import stack_usage
    (tmp_path / 'kernel.su').write_text(
        'kernel.hip:3:1:void gimmik_mm(int)\t4194352\tstatic\n'
        'hip_shim.h:80:1:void f()\t48\tdynamic,bounded\n')
    (tmp_path / 'other.txt').write_text('x\t999\tstatic\n')
    assert stack_usage(tmp_path) == 4194400


def test_host_compiler_with_a_launcher_word(tmp_path, monkeypatch):
    launch = tmp_path / 'launch'
    launch.write_text('#!/bin/sh\nexec "$@"\n')
    launch.chmod(0o755)
    monkeypatch.setenv('CXX', f'{launch} g++')
    monkeypatch.setenv('GIMMIK_CACHE_DIR', str(tmp_path / 'cache'))
    src = PROLOGUE + '''
    if (col < n)
        c[col] = 3.0*b[col];
}
'''
    b, c = panels(m=1, k=1)
    run_hip(src, meta_for(block=(64, 1, 1), m=1, k=1), b, c)
    assert (c == 3.0).all()
    monkeypatch.setenv('CXX', 'no-such-launcher g++')
    from gimmik.emulate import host_compiler
    from gimmik.runtime import RuntimeUnavailable
    with pytest.raises(RuntimeUnavailable, match='CXX'):
        host_compiler()
