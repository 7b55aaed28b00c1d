"""The hip runtime: hiprtc compiles every HIP family for real (gfx90a, ROCm
5.2's hiprtc needs no GPU), and without an AMD GPU every way in says so
clearly, as a RuntimeUnavailable naming what is missing."""

import ctypes
import json
import os
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import random_operator
from gimmik import HIPMatMul
from gimmik.cli import main
from gimmik.emulate import run_hip
from gimmik.hiprtc import kernel_symbols
from gimmik.runtime import MissingExtra, RuntimeUnavailable, get_runtime
import gimmik.runtime.hip as hiprt
from gimmik.tune import tune

HAVE_AMD_GPU = os.path.exists('/dev/kfd')
no_gpu_only = pytest.mark.skipif(HAVE_AMD_GPU,
                                 reason='this machine has an AMD GPU')
MISSING = r'no AMD GPU|libamdhip64|hip-python'


def test_hiprtc_builds_every_family(rng):
    A = random_operator(rng, 10, 8, 0.4)
    A[0, 0] = 1.0
    mm = HIPMatMul(A, beta=0.5, aligne=2)
    first = {}
    for dtype in (np.float64, np.float32):
        for src, meta in mm.kernels(dtype, kname='k_hip', gcn_arch='gfx90a'):
            first.setdefault((meta['tplname'], meta['dtype']), (src, meta))
    assert {f for f, _ in first} >= {'cstream', 'bstream', 'bstream-msplit',
                                     'cstream-ksplit'}
    for (family, dtype), (src, meta) in sorted(first.items()):
        if dtype == 'float32' and family != 'bstream-msplit':
            continue                      # one f32 build is enough
        code = hiprt.build(src, meta, 'gfx90a')
        assert isinstance(code, bytes) and 'k_hip' in kernel_symbols(code)


@no_gpu_only
def test_runtime_without_gpu_says_so():
    with pytest.raises(RuntimeUnavailable, match=MISSING) as e:
        get_runtime('hip')
    assert 'Traceback' not in str(e.value)
    with pytest.raises(RuntimeUnavailable, match=MISSING):
        hiprt.Runtime()
    # auto moves on to another platform
    assert get_runtime('auto').name != 'hip'


@no_gpu_only
def test_tune_and_cli_without_gpu(tmp_path, capsys):
    with pytest.raises(RuntimeUnavailable, match=MISSING):
        tune(np.eye(3), platform='hip')
    path = tmp_path / 'ops.npz'
    np.savez(path, eye=np.eye(3))
    assert main(['tune', f'{path}:eye', '--platform', 'hip']) == 2
    err = capsys.readouterr().err
    assert 'gimmik tune: error:' in err and len(err.splitlines()) <= 2
    assert any(w in err for w in ('no AMD GPU', 'libamdhip64', 'hip-python'))


def test_missing_library_is_named(monkeypatch):
    monkeypatch.setattr(hiprt, '_state', {})
    monkeypatch.setattr(hiprt, '_find_amdhip', lambda: None)
    paths = pytest.importorskip('rocm.bindings.util.paths')
    monkeypatch.setattr(paths, 'get_library_path',
                        lambda name, *a: b'libamdhip64.so')
    with pytest.raises(RuntimeUnavailable, match='no HIP runtime library'):
        hiprt.load_hip()


def test_missing_hip_python_is_named(monkeypatch):
    monkeypatch.setattr(hiprt, '_state', {})
    monkeypatch.setitem(sys.modules, 'hip', None)
    with pytest.raises(MissingExtra, match=r"hip-python, which is not "
                       r"installed.*pip install 'gimmik\[hip\]'"):
        hiprt.load_hip()


def test_missing_hipblas_is_named(monkeypatch):
    for mod in ('hip.hipblas', 'rocm.bindings.hipblas'):
        monkeypatch.setitem(sys.modules, mod, None)
    with pytest.raises(RuntimeUnavailable, match='hipBLAS'):
        hiprt._load_hipblas()


# -- the hip runtime's plumbing against a stand-in for hip-python ------------
# No AMD GPU is reachable, so the runtime's own logic (buffers, argument
# packing, grids, event timing, the row-major hipBLAS call) is exercised
# against a stand-in whose kernels run in the CPU executor and whose gemm is
# column-major, as hipBLAS's is.

class FakeMem:
    def __init__(self, size):
        raw = np.zeros(size + 256, np.uint8)     # 256-byte aligned, as HIP
        off = -raw.ctypes.data % 256
        self.mem = raw[off:off + size]

    def view(self, dtype, rows, ld):
        return self.mem.view(dtype)[:rows*ld].reshape(rows, ld)


class FakeHip:
    hipMemcpyKind = SimpleNamespace(hipMemcpyHostToDevice=1,
                                    hipMemcpyDeviceToHost=2,
                                    hipMemcpyDeviceToDevice=3)
    hipFunction_attribute = SimpleNamespace(
        HIP_FUNC_ATTRIBUTE_NUM_REGS=1, HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES=2,
        HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES=3)

    def __init__(self):
        self.launches = []

    def hipGetDeviceCount(self):
        return 0, 1

    def hipSetDevice(self, d):
        return (0,)

    def hipGetDeviceProperties(self, d):
        return 0, SimpleNamespace(gcnArchName=b'gfx90a:sramecc+:xnack-',
                                  warpSize=64, name=b'Stand-in MI250X',
                                  l2CacheSize=0)

    def hipMalloc(self, size):
        return 0, FakeMem(size)

    def hipFree(self, ptr):
        return (0,)

    def hipMemcpy(self, dst, src, size, kind):
        if kind == 1:
            dst.mem[:size] = src.reshape(-1).view(np.uint8)[:size]
        elif kind == 2:
            dst.reshape(-1).view(np.uint8)[:size] = src.mem[:size]
        else:
            dst.mem[:size] = src.mem[:size]
        return (0,)

    def hipMemcpyAsync(self, dst, src, size, kind, stream):
        return self.hipMemcpy(dst, src, size, kind)

    def hipModuleLoadData(self, code):
        return 0, json.loads(code.decode())

    def hipModuleGetFunction(self, module, kname):
        assert kname.decode() == module['meta']['kname']
        return 0, module

    def hipFuncGetAttribute(self, attr, fn):
        return 0, 10*attr

    def hipModuleLaunchKernel(self, fn, gx, gy, gz, bx, by, bz,
                              sharedMemBytes, stream, kernelParams, extra):
        src, meta = fn['src'], fn['meta']
        vals = dict(zip(meta['args'], extra))
        n, ldb, ldc = (vals[a].value for a in ('n', 'ldb', 'ldc'))
        grid, block = HIPMatMul.launch_config(meta, n)
        assert (gx, gy, gz) == grid and (bx, by, bz) == tuple(block)
        dt = np.dtype(meta['dtype'])
        b = vals['b'].view(dt, meta['k'], ldb)[:, :n]
        c = vals['c'].view(dt, meta['m'], ldc)[:, :n]
        run_hip(src, meta, b, c, kname=meta['kname'])
        self.launches.append(meta['variant'])
        return (0,)

    def hipEventCreate(self):
        return 0, SimpleNamespace(t=0.0)

    def hipEventRecord(self, ev, stream):
        ev.t = time.perf_counter()
        return (0,)

    def hipEventSynchronize(self, ev):
        return (0,)

    def hipEventElapsedTime(self, a, b):
        return 0, (b.t - a.t)*1e3

    def hipEventDestroy(self, ev):
        return (0,)


class FakeBlas:
    """Column-major gemm: C = alpha*op(A)*op(B) + beta*C, op(A) m x k,
    op(B) k x n."""
    hipblasOperation_t = SimpleNamespace(HIPBLAS_OP_N='N', HIPBLAS_OP_T='T')

    def __init__(self):
        self.ops = []

    def hipblasCreate(self):
        return 0, 'handle'

    def _gemm(self, dtype, scalar, h, opa, opb, m, n, k, alpha, A, lda, B,
              ldb, beta, C, ldc):
        assert opa in 'NT' and opb in 'NT' and h == 'handle'
        self.ops.append(opa + opb)
        alpha = scalar.from_address(alpha).value
        beta = scalar.from_address(beta).value

        def colmajor(p, rows, cols, ld, op='N'):
            if op == 'T':
                return colmajor(p, cols, rows, ld).T
            assert ld >= rows
            return p.view(dtype, cols, ld)[:, :rows].T
        a, b, c = colmajor(A, m, k, lda, opa), colmajor(B, k, n, ldb, opb), \
            colmajor(C, m, n, ldc)
        # as in BLAS, beta = 0 means C is not read
        c[...] = alpha*(a.astype(float) @ b) + (beta*c if beta else 0)
        return (0,)

    def hipblasDgemm(self, *a):
        return self._gemm(np.float64, ctypes.c_double, *a)

    def hipblasSgemm(self, *a):
        return self._gemm(np.float32, ctypes.c_float, *a)


@pytest.fixture
def stand_in(monkeypatch, tmp_path):
    fake = FakeHip()
    monkeypatch.setattr(hiprt, '_state', {'hip': fake})
    fake.blas = FakeBlas()
    monkeypatch.setattr(hiprt, '_load_hipblas', lambda: fake.blas)
    monkeypatch.setattr(hiprt, 'build', lambda src, meta, arch: json.dumps(
        {'src': src, 'meta': meta}).encode())
    monkeypatch.setenv('GIMMIK_CACHE_DIR', str(tmp_path))
    monkeypatch.setattr('gimmik.tune.WARMUP', 0)
    monkeypatch.setattr('gimmik.tune.REPEATS', 1)
    monkeypatch.setattr('gimmik.tune.COPY_BYTES', (1 << 16, 1 << 16))
    return fake


@pytest.mark.parametrize('dtype,beta', [('float64', 0.5), ('float32', 0.0)])
def test_runtime_plumbing_with_stand_in(stand_in, rng, dtype, beta):
    rt = hiprt.Runtime()
    assert rt.device == 'Stand-in MI250X (gfx90a)'
    assert rt.kernel_options() == {'gcn_arch': 'gfx90a', 'warp_size': 64}
    A = random_operator(rng, 6, 5, 0.5)
    A[0, 0] = 1.0
    res = tune(A, beta=beta, dtype=dtype, n=130, ldb=132, ldc=136,
               runtime=rt, use_cache=False)
    assert res.platform == 'hip' and res.vendor['time_s'] > 0
    # both hipBLAS formulations ran and were timed; the faster is the vendor
    forms = {f['name']: f for f in res.vendor['formulations']}
    assert set(forms) == {'hipblas-nn', 'hipblas-nt'}
    assert all(f['error'] is None for f in forms.values()), forms
    assert {'NN', 'NT'} <= set(stand_in.blas.ops)
    # the fastest formulation wins (its time may since have been retaken)
    fastest = min(forms, key=lambda f: forms[f]['time_s'])
    assert res.vendor['formulation'] == fastest
    assert res.vendor['time_s'] <= forms[fastest]['time_s']
    assert res.vendor_error <= {'float64': 1e-13, 'float32': 1e-5}[dtype]
    assert res.candidates and all(c['correct'] for c in res.candidates), \
        res.candidates
    assert res.best is not None and stand_in.launches
    assert rt.launch_feedback(res.best['src'], res.best['meta']) == {
        'registers': 10, 'local_mem': 20, 'shared_mem': 30}
