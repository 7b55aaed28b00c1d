"""gimmik.cache: modes under the umask, unwritable caches, per-key locks,
verified builds, clearing, keys."""

import os
import stat
import warnings

import numpy as np
import pytest

from gimmik import cache


@pytest.fixture(autouse=True)
def cache_base(tmp_path, monkeypatch):
    monkeypatch.setenv('GIMMIK_CACHE_DIR', str(tmp_path / 'cache'))
    monkeypatch.setattr(cache, '_scratch', {})
    return tmp_path / 'cache'


KEY = 'ab' * 16


@pytest.mark.parametrize('mask', [0o002, 0o027])
def test_entries_and_builds_honour_the_umask(tmp_path, mask):
    old = os.umask(mask)
    try:
        assert cache.store(KEY, {'x': 1})
        built = tmp_path / 'lib.so'
        built.write_bytes(b'\x7fELF' + bytes(100))
        built.chmod(0o700)
        so = cache.store_build('c', KEY, built)
    finally:
        os.umask(old)
    entry = os.path.join(cache.cache_dir('tune'), f'{KEY}.json')
    assert stat.S_IMODE(os.stat(entry).st_mode) == 0o666 & ~mask
    assert stat.S_IMODE(os.stat(so).st_mode) == 0o777 & ~mask


def test_unwritable_cache_is_a_warning_naming_it(tmp_path, monkeypatch):
    blocker = tmp_path / 'a-file'
    blocker.write_text('')
    monkeypatch.setenv('GIMMIK_CACHE_DIR', str(blocker / 'cache'))
    with pytest.warns(RuntimeWarning, match='GIMMIK_CACHE_DIR') as rec:
        d = cache.build_dir('c')
    assert str(blocker / 'cache') in str(rec[0].message)
    assert os.path.isdir(d) and os.access(d, os.W_OK)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert cache.build_dir('c') == d        # warned once
    with pytest.warns(RuntimeWarning, match='GIMMIK_CACHE_DIR'):
        assert not cache.store(KEY, {'x': 1})
    assert cache.load(KEY) is None
    assert cache.clear('all') == 0
    with cache.lock('tune', KEY) as locked:
        assert locked is False


def test_build_the_cache_refuses_is_kept_for_the_run(tmp_path, monkeypatch):
    """A cache directory that looks writable but refuses the write (ACLs, a
    full disk or quota): the build goes to this run's scratch directory
    after one warning, and is found there."""
    real = cache.atomic_path

    def refused(path, *a, **k):
        if path.startswith(str(cache.cache_dir('c'))):
            raise PermissionError(13, 'Permission denied')
        return real(path, *a, **k)
    monkeypatch.setattr(cache, 'atomic_path', refused)
    built = tmp_path / 'lib.so'
    built.write_bytes(bytes(range(256))*4)
    with pytest.warns(RuntimeWarning, match='Permission denied'):
        so = cache.store_build('c', KEY, built)
    assert not so.startswith(str(cache.cache_dir('c')))
    assert open(so, 'rb').read() == built.read_bytes()
    assert cache.find_build('c', KEY) == so
    with warnings.catch_warnings():
        warnings.simplefilter('error')       # warned once
        assert os.path.dirname(cache.store_build('c', 'cd'*16, built)) == \
            os.path.dirname(so)


def test_truncated_build_is_not_used(tmp_path):
    built = tmp_path / 'lib.so'
    built.write_bytes(bytes(range(256))*64)
    so = cache.store_build('c', KEY, built)
    assert cache.find_build('c', KEY) == so
    with open(so, 'r+b') as f:
        f.truncate(100)
    assert cache.find_build('c', KEY) is None
    assert not os.path.exists(so)
    assert cache.find_build('c', 'cd' * 16) is None


def test_clear_builds_and_results_apart(tmp_path):
    built = tmp_path / 'lib.so'
    built.write_bytes(b'x')
    cache.store(KEY, {'x': 1})
    cache.store_build('c', KEY, built)
    cache.store_build('emulate', KEY, built)
    with cache.lock('tune', KEY):
        pass
    assert cache.clear('builds') == 2
    assert cache.load(KEY) == {'x': 1}
    assert cache.find_build('c', KEY) is None
    assert cache.clear('tune') == 1 and cache.load(KEY) is None
    with pytest.raises(ValueError, match='unknown cache kind'):
        cache.clear('bogus')


def test_tune_key_covers_the_build():
    A = np.eye(3)
    base = dict(beta=0.0, dtype='float64', platform='c', device='cpu',
                options={}, n=1024, ldb=1024, ldc=1024, version='1')
    k = cache.tune_key(A, **base, build='gcc 12 -O3')
    assert k != cache.tune_key(A, **base, build='gcc 12 -O0')
    assert k != cache.tune_key(A, **base, build='gcc 13 -O3')
    assert k == cache.tune_key(A, **base, build='gcc 12 -O3')
