"""The hip runtime: hiprtc compiles every HIP family for real (gfx90a, ROCm
5.2's hiprtc needs no GPU), and without an AMD GPU every way in says so
clearly, as a RuntimeUnavailable naming what is missing."""

import os
import sys

import numpy as np
import pytest

from conftest import random_operator
from gimmik import HIPMatMul
from gimmik.cli import main
from gimmik.hiprtc import kernel_symbols
from gimmik.runtime import RuntimeUnavailable, get_runtime
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
    import rocm.bindings.util.paths as paths
    monkeypatch.setattr(paths, 'get_library_path',
                        lambda name, *a: b'libamdhip64.so')
    with pytest.raises(RuntimeUnavailable, match='no HIP runtime library'):
        hiprt.load_hip()


def test_missing_hip_python_is_named(monkeypatch):
    monkeypatch.setattr(hiprt, '_state', {})
    monkeypatch.setitem(sys.modules, 'hip', None)
    with pytest.raises(RuntimeUnavailable, match='hip-python is not'):
        hiprt.load_hip()


def test_missing_hipblas_is_named(monkeypatch):
    for mod in ('hip.hipblas', 'rocm.bindings.hipblas'):
        monkeypatch.setitem(sys.modules, mod, None)
    with pytest.raises(RuntimeUnavailable, match='hipBLAS'):
        hiprt._load_hipblas()
