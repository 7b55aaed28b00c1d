"""gimmik.runtime.c: the C runtime's compiled launches; its build cache:
compiler command lines with a launcher word, keys that cover the compiler,
its flags and the native CPU, damaged libraries rebuilt, an unwritable
cache."""

import os
import shutil
import stat

import numpy as np
import pytest

from bad_inputs import C_BUFFERS, _ids, raises_naming
from conftest import Panels, random_operator
from gimmik import CMatMul, cache
from gimmik.runtime import c as runtime_c
from gimmik.runtime import get_runtime


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


# -- the build cache ----------------------------------------------------------
@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv('GIMMIK_CACHE_DIR', str(tmp_path / 'cache'))
    monkeypatch.delenv('GIMMIK_CFLAGS', raising=False)
    monkeypatch.setattr(runtime_c, '_loaded', {})
    monkeypatch.setattr(cache, '_scratch', {})
    if shutil.which(os.environ.get('CC') or 'cc') is None:
        pytest.skip('no C compiler')


def first_kernel(rng):
    A = random_operator(rng, 4, 3, 0.7)
    src, meta = next(iter(CMatMul(A, beta=0.0).kernels(np.float64)))
    return A, src, meta


def run(rt, A, src, meta, rng):
    p = Panels(rng, A, 0.0, np.float64, 37)
    rt.compile(src, meta)(p.bfull, p.cfull, 37, 37, 37)
    p.check('c runtime')


def launcher(tmp_path):
    """A launcher command (like ccache) that runs the command after it."""
    path = tmp_path / 'launch'
    path.write_text('#!/bin/sh\nexec "$@"\n')
    path.chmod(0o755)
    return str(path)


def test_compiler_with_a_launcher_word(tmp_path, monkeypatch, rng):
    monkeypatch.setenv('CC', f'{launcher(tmp_path)} cc')
    rt = get_runtime('c')
    run(rt, *first_kernel(rng), rng)
    with pytest.raises(Exception, match='no C compiler'):
        runtime_c.Runtime(cc='no-such-launcher cc')


def test_key_covers_flags_compiler_and_native_cpu(tmp_path, monkeypatch):
    rt = runtime_c.Runtime()
    key = rt._key('int x;')
    monkeypatch.setenv('GIMMIK_CFLAGS', '-O0')
    assert runtime_c.Runtime()._key('int x;') != key
    monkeypatch.delenv('GIMMIK_CFLAGS')
    # another compiler behind the same command
    other = tmp_path / 'cc'
    other.write_text('#!/bin/sh\nif [ "$1" = --version ]; then echo '
                     '"othercc 99"; exit 0; fi\nexec cc "$@"\n')
    other.chmod(0o755)
    assert runtime_c.Runtime(cc=str(other))._key('int x;') != key
    # another CPU behind -march=native
    monkeypatch.setattr(runtime_c, 'native_cpu', lambda: 'Other CPU [avx]')
    assert runtime_c.Runtime()._key('int x;') != key
    assert runtime_c.Runtime(march=None)._key('int x;') \
        == runtime_c.Runtime(march=None)._key('int x;')
    assert 'native' not in ''.join(runtime_c.Runtime(march=None).flags)


def test_native_cpu_names_features():
    cpu = runtime_c.native_cpu()
    assert cpu.startswith(runtime_c._cpu_name())
    if runtime_c._cpuinfo('flags'):
        assert 'sse2' in cpu or 'avx' in cpu


def test_truncated_library_is_rebuilt(monkeypatch, rng):
    rt = runtime_c.Runtime()
    A, src, meta = first_kernel(rng)
    run(rt, A, src, meta, rng)
    d = cache.cache_dir('c')
    (so,) = [os.path.join(d, f) for f in os.listdir(d) if f.endswith('.so')]
    # cut short as a full disk or a killed copy would (a new file: this
    # process still maps the old one)
    with open(so, 'rb') as f:
        head = f.read(64)
    with open(so + '.cut', 'wb') as f:
        f.write(head)
    os.replace(so + '.cut', so)
    monkeypatch.setattr(runtime_c, '_loaded', {})   # a new process
    run(rt, A, src, meta, rng)
    assert len([f for f in os.listdir(d) if f.endswith('.so')]) == 1


def test_library_mode_follows_the_umask(rng):
    old = os.umask(0o002)
    try:
        run(runtime_c.Runtime(), *first_kernel(rng), rng)
    finally:
        os.umask(old)
    d = cache.cache_dir('c')
    for f in os.listdir(d):
        assert stat.S_IMODE(os.stat(os.path.join(d, f)).st_mode) == 0o775


def test_unwritable_cache_base_builds_anyway(tmp_path, monkeypatch, rng):
    blocker = tmp_path / 'not-a-dir'
    blocker.write_text('')
    monkeypatch.setenv('GIMMIK_CACHE_DIR', str(blocker / 'gimmik'))
    with pytest.warns(RuntimeWarning, match='GIMMIK_CACHE_DIR'):
        run(runtime_c.Runtime(), *first_kernel(rng), rng)
