"""gimmik.hiprtc: every HIP candidate compiles through the real hiprtc (via
hip-python) to a code object holding the kernel symbol.

CI uses Debian's ROCm 5.2 (libamdhip64-5, libhiprtc-builtins5), whose hiprtc
targets gfx90a; its comgr aborts on gfx940/941/942, so those are refused
with RuntimeUnavailable (and skipped here) rather than compiled."""

import os
import shutil
import subprocess

import numpy as np
import pytest

from bad_inputs import (BAD_ARCHES, BAD_KNAMES, BAD_SOURCES, _ids,
                        raises_naming)
from conftest import random_operator
from gimmik import hiprtc
from gimmik.runtime import RuntimeUnavailable

# (operator, beta): a small dense and a small sparse PyFR operator (beta != 0
# brings in the preload_c candidates); more with --full
DEFAULT_OPS = [('p2-tet-m132', 0.0), ('p3-quad-m460', 0.5)]
FULL_OPS = [(f'p{p}-{e}-{m}', beta) for p in (1, 2, 3)
            for e in ('quad', 'tri', 'hex', 'tet', 'pri', 'pyr')
            for m, beta in (('m0', 0.0), ('m132', 0.5), ('m460', 0.0))]

SIMPLE = '''
extern "C" __global__ void __launch_bounds__(64)
gimmik_probe(const double* __restrict__ b, double* __restrict__ c)
{
    const int i = blockIdx.x*blockDim.x + threadIdx.x;
    c[i] = 2.0*b[i];
}
'''


@pytest.fixture(scope='module')
def lib():
    try:
        return hiprtc.load()[1]
    except RuntimeUnavailable as e:
        pytest.skip(str(e))


def _operator(name):
    ops = pytest.importorskip('gimmik.operators')
    suite = ops.suite()
    if name not in suite:
        pytest.skip(f'{name} is not in the operator suite')
    return suite[name]


def compile_all(lib, name, beta, arch, dtype='float64'):
    """Compile every candidate; their sources."""
    from gimmik.hip import HIPMatMul
    try:
        hiprtc.check_arch(arch, lib)
    except RuntimeUnavailable as e:
        pytest.skip(str(e))
    A = _operator(name)
    mm = HIPMatMul(A, beta=beta, aligne=4)
    srcs = []
    for src, meta in mm.kernels(dtype, kname='pyfr_mm', gcn_arch=arch):
        code = hiprtc.compile_hip(src, arch, 'pyfr_mm')
        assert code[:4] == b'\x7fELF', meta['variant']
        assert 'pyfr_mm' in hiprtc.kernel_symbols(code), meta['variant']
        srcs.append(src)
    assert srcs
    return srcs


def test_f32_candidates_compile(lib):
    """f32, among them kernels compiled without packed f32 math (a target
    attribute ROCm 5.2's compiler must take)."""
    srcs = compile_all(lib, 'p2-pyr-m6', 1.0, 'gfx90a', 'float32')
    assert any('GIMMIK_NO_PACKED_F32 void' in s for s in srcs)


@pytest.mark.parametrize('arch', ['gfx90a', 'gfx942'])
@pytest.mark.parametrize('name,beta', DEFAULT_OPS)
def test_every_candidate_compiles(lib, name, beta, arch):
    compile_all(lib, name, beta, arch)


@pytest.mark.full
@pytest.mark.parametrize('name,beta', FULL_OPS)
def test_every_candidate_compiles_full(lib, name, beta):
    compile_all(lib, name, beta, 'gfx90a')


def test_code_object_holds_the_kernel(lib, tmp_path):
    code = hiprtc.compile_hip(SIMPLE, 'gfx90a', 'gimmik_probe')
    assert hiprtc.kernel_symbols(code) == {'gimmik_probe'}
    readelf = shutil.which('llvm-readelf-19') or shutil.which('llvm-readelf')
    if readelf:
        path = tmp_path / 'k.co'
        path.write_bytes(code)
        out = subprocess.run([readelf, '--symbols', str(path)],
                             capture_output=True, text=True).stdout
        assert ' FUNC ' in out and 'gimmik_probe' in out
        assert 'gimmik_probe.kd' in out


def test_wrong_kernel_name_is_an_error(lib):
    with pytest.raises(hiprtc.HiprtcError, match='no kernel other'):
        hiprtc.compile_hip(SIMPLE, 'gfx90a', 'other')


def test_compile_error_carries_the_log(lib):
    with pytest.raises(hiprtc.HiprtcError) as ei:
        hiprtc.compile_hip(SIMPLE.replace('2.0*b[i]', '2.0*q[i]'), 'gfx90a',
                           'gimmik_probe')
    assert 'error' in ei.value.log and 'q' in ei.value.log
    assert ei.value.log in str(ei.value)


def test_new_arch_refused_by_old_hiprtc(lib):
    have = hiprtc._version(lib)
    if have is None or have >= hiprtc.MIN_ROCM['gfx942']:
        pytest.skip(f'{lib} can compile gfx942')
    with pytest.raises(RuntimeUnavailable, match='gfx942'):
        hiprtc.compile_hip(SIMPLE, 'gfx942', 'gimmik_probe')


@pytest.mark.parametrize('kwargs,exc,what', [
    (dict(src=b'x'), TypeError, 'src'),
    (dict(src='a\0b'), ValueError, 'src'),
    (dict(arch='gfx90a --save-temps'), ValueError, 'arch'),
    (dict(arch=942), TypeError, 'arch'),
    (dict(kname='k; int x'), ValueError, 'kname'),
    (dict(kname='__global__'), ValueError, 'kname'),
])
def test_bad_input(kwargs, exc, what):
    args = dict(src=SIMPLE, arch='gfx90a', kname='gimmik_probe')
    args.update(kwargs)
    with pytest.raises(exc, match=what):
        hiprtc.compile_hip(**args)


def test_missing_library(monkeypatch, tmp_path):
    monkeypatch.setenv(hiprtc.LIB_ENV, str(tmp_path / 'libhiprtc.so'))
    with pytest.raises(RuntimeUnavailable, match=hiprtc.LIB_ENV):
        hiprtc.find_library()
    monkeypatch.delenv(hiprtc.LIB_ENV)
    for var in ('ROCM_PATH', 'ROCM_HOME', 'LD_LIBRARY_PATH'):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(hiprtc, '_SYSTEM_DIRS', (str(tmp_path),))
    with pytest.raises(RuntimeUnavailable, match='libamdhip64-5'):
        hiprtc.find_library()
    # a ROCm 5 HIP runtime counts: hiprtc lives in it
    (tmp_path / 'libamdhip64.so.5').write_bytes(b'')
    assert hiprtc.find_library() == str(tmp_path / 'libamdhip64.so.5')


def test_shim_links_the_library(monkeypatch, tmp_path):
    monkeypatch.setenv('GIMMIK_CACHE_DIR', str(tmp_path / 'cache'))
    target = tmp_path / 'libamdhip64.so.5.2.1'
    target.write_bytes(b'')
    root = hiprtc.rocm_link_dir(str(target))
    assert os.path.realpath(root).startswith(str(tmp_path / 'cache'))
    for name in ('libhiprtc.so', 'libamdhip64.so'):
        link = os.path.join(root, 'lib', name)
        assert os.path.realpath(link) == str(target.resolve())


def test_versions():
    assert hiprtc._version('/x/libamdhip64.so.5.2.21153') == (5, 2)
    assert hiprtc._version('/x/libhiprtc.so.6') == (6, 0)
    assert hiprtc._version('/nonexistent/libhiprtc.so') is None


def test_kernel_symbols_of_junk(rng):
    assert hiprtc.kernel_symbols(b'') == set()
    assert hiprtc.kernel_symbols(b'not an elf at all') == set()
    junk = b'\x7fELF' + rng.integers(0, 256, 200, dtype=np.uint8).tobytes()
    assert isinstance(hiprtc.kernel_symbols(junk), set)


def test_random_operator_compiles(lib, rng):
    """A fresh random operator through the first candidate, end to end."""
    from gimmik.hip import HIPMatMul
    A = random_operator(rng, 9, 7, 0.4)
    src, meta = next(HIPMatMul(A, aligne=2).kernels('float64'))
    code = hiprtc.compile_hip(src, 'gfx90a')
    assert 'gimmik_mm' in hiprtc.kernel_symbols(code)


def test_rocm_path_is_restored(monkeypatch):
    from gimmik.hiprtc import rocm_path
    monkeypatch.delenv('ROCM_PATH', raising=False)
    with rocm_path('/x/rocm'):
        assert os.environ['ROCM_PATH'] == '/x/rocm'
    assert 'ROCM_PATH' not in os.environ
    monkeypatch.setenv('ROCM_PATH', 'mine')
    with pytest.raises(RuntimeError):
        with rocm_path('/x/rocm'):
            raise RuntimeError('load failed')
    assert os.environ['ROCM_PATH'] == 'mine'
    with rocm_path(None):
        assert os.environ['ROCM_PATH'] == 'mine'


# -- bad input ----------------------------------------------------------------
@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('label,arch', BAD_ARCHES, ids=_ids(BAD_ARCHES))
def test_compile_hip_rejects_arch(label, arch):
    hiprtc = pytest.importorskip('gimmik.hiprtc')
    with raises_naming((ValueError, TypeError), 'arch'):
        hiprtc.compile_hip('extern "C" __global__ void k() {}', arch, 'k')


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('label,src,exc', BAD_SOURCES, ids=_ids(BAD_SOURCES))
def test_compile_hip_rejects_src(label, src, exc):
    hiprtc = pytest.importorskip('gimmik.hiprtc')
    with raises_naming(exc, 'src'):
        hiprtc.compile_hip(src)


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('label,kname,exc', BAD_KNAMES, ids=_ids(BAD_KNAMES))
def test_compile_hip_rejects_kname(label, kname, exc):
    hiprtc = pytest.importorskip('gimmik.hiprtc')
    with raises_naming(exc, 'kname'):
        hiprtc.compile_hip('extern "C" __global__ void k() {}', 'gfx90a',
                           kname)


def test_tile_walks_compile(lib):
    """n at run time, the kernels that walk their tiles under PyFR main's
    grid (a loop over blockIdx.x + k*gridDim.x) compile with hiprtc, as
    PyFR's HIP backend compiles them."""
    srcs = compile_all(lib, 'p5-quad-m6', 1.0, 'gfx90a')
    walks = [s for s in srcs if 'vb += gridDim.x' in s]
    assert len(walks) >= 2
