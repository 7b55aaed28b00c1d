"""The cuda runtime's building ahead (prepare): candidates are built in
batched nvcc runs in the background, each source's kernel renamed apart so
a batch links, and compile() finds its kernel in its batch's module or,
when the batch failed, builds the source alone.  Runs nvcc for real (no
GPU needed); loading is a stand-in."""

import shutil

import numpy as np
import pytest

from conftest import random_operator
from gimmik.cuda import CUDAMatMul
import gimmik.runtime.cuda as cudart

needs_nvcc = pytest.mark.skipif(shutil.which('nvcc') is None,
                                reason='nvcc is not installed')


class Loaded:
    """A stand-in module: the kernel names found in the cubin."""

    def __init__(self, cubin):
        self.cubin = cubin

    def get_function(self, name):
        assert name.encode() in self.cubin, name
        return name


def bare_runtime(monkeypatch, compiler='nvcc'):
    rt = cudart.Runtime.__new__(cudart.Runtime)
    rt._init_state()
    rt.cc, rt.compiler = (9, 0), compiler
    rt.spill_l1 = False     # the stand-in kernels have no attributes
    builds = []
    real_build = rt.build

    def build(src, meta, timeout=None):
        builds.append(src.count('__global__'))
        return real_build(src, meta, timeout)
    monkeypatch.setattr(rt, 'build', build)
    monkeypatch.setattr(rt, 'load_module', Loaded)
    monkeypatch.setattr(rt, '_launcher',
                        lambda kern, mod, meta: (kern, mod, meta))
    return rt, builds


def kernels(rng, m=12, k=9):
    A = random_operator(rng, m, k, 0.5)
    A[0, 0] = 1.0
    mm = CUDAMatMul(A, beta=0.0, aligne=2)
    opts = {'compute_capability': (9, 0)}
    return [mm.render(c, np.float64, 'gimmik_mm')
            for c in mm.candidates(np.float64, **opts)]


def test_rename_kernel():
    src = ('static __device__ const double gimmik_mm_atab[2] = {1, 2};\n'
           '__global__ void gimmik_mm(int n) { gimmik_mm_atab[n]; }\n'
           'int not_gimmik_mm;')
    out = cudart.rename_kernel(src, 'gimmik_mm', 'gimmik_mm_b3_1')
    assert 'gimmik_mm_b3_1_atab[2]' in out and 'gimmik_mm_b3_1_atab[n]' in out
    assert 'void gimmik_mm_b3_1(int n)' in out and 'not_gimmik_mm;' in out


def test_batches():
    items = [('x'*10, {}), ('y'*10, {}), ('z'*30, {}), ('w'*5, {})]
    assert [len(b) for b in cudart._batches(items, 25)] == [2, 1, 1]
    assert list(cudart._batches([], 25)) == []


@needs_nvcc
def test_prepare_builds_in_batches(monkeypatch, rng):
    monkeypatch.setattr(cudart, 'BATCH_CHARS', 1)     # 1 source per batch
    rt, builds = bare_runtime(monkeypatch)
    ks = kernels(rng)
    assert len(ks) >= 3
    monkeypatch.setattr(cudart, 'BATCH_CHARS', 10**9)  # all in one
    rt.prepare(ks)
    rt.prepare(ks)          # already prepared: nothing more is built
    names = set()
    for src, meta in ks:
        kern, module, lmeta = rt.compile(src, meta)
        assert kern == lmeta['kname'] and kern.startswith('gimmik_mm_b1_')
        names.add(kern)
    # identical sources share one kernel of the batch
    assert len(names) == len({src for src, _ in ks}) and builds == [
        len(names)]
    # a source compiled without preparing is built alone (a cubin)
    src, meta = kernels(rng, 5, 4)[0]
    kern, module, lmeta = rt.compile(src, meta)
    assert kern == 'gimmik_mm' and builds == [len(names), 1]


@needs_nvcc
def test_failed_batch_falls_back_to_single_builds(monkeypatch, rng):
    rt, builds = bare_runtime(monkeypatch)
    ks = kernels(rng, 6, 5)[:2]
    broken = ('__global__ void gimmik_mm(int n) { this is not C++ }',
              dict(ks[0][1], variant='broken'))
    rt.prepare(ks + [broken])
    for src, meta in ks:
        kern, _, _ = rt.compile(src, meta)
        assert kern == 'gimmik_mm'         # rebuilt alone
    with pytest.raises(RuntimeError, match='nvcc failed on broken'):
        rt.compile(*broken)
    assert builds == [3, 1, 1, 1]


def test_nvrtc_prepares_nothing(monkeypatch, rng):
    rt, builds = bare_runtime(monkeypatch, compiler='nvrtc')
    rt.prepare(kernels(rng, 4, 4))
    assert rt._prepared == {} and builds == []


def test_prefer_l1_only_for_spilling_kernels_without_shared(monkeypatch):
    """As PyFR's CUDA backend: the largest L1 (carveout 0) is asked for a
    kernel with local memory and no static shared memory, nothing else."""
    import sys
    import types
    from gimmik.runtime.cuda import prefer_l1
    calls = []
    fake = types.SimpleNamespace(
        CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT=9,
        funcSetAttribute=lambda *a: calls.append(a))
    api = types.ModuleType('cupy_backends.cuda.api')
    api.driver = fake
    for name, mod in (('cupy_backends', types.ModuleType('cupy_backends')),
                      ('cupy_backends.cuda',
                       types.ModuleType('cupy_backends.cuda')),
                      ('cupy_backends.cuda.api', api),
                      ('cupy_backends.cuda.api.driver', fake)):
        monkeypatch.setitem(sys.modules, name, mod)
    assert not prefer_l1(7, 0, 0)
    assert not prefer_l1(7, 16, 4096)
    assert calls == []
    assert prefer_l1(7, 16, 0)
    assert calls == [(7, 9, 0)]
