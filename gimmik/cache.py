"""gimmik's on-disk caches: built C libraries and tuning results.

Everything lives under ``$GIMMIK_CACHE_DIR`` (default
``$XDG_CACHE_HOME/gimmik`` or ``~/.cache/gimmik``), one sub-directory per
kind (``tune``, ``c``; the HIP executor uses ``emulate``).  Writes go to a
temporary file in the same directory and are renamed into place, so an
interrupted run never leaves a half-written entry behind.
"""

import hashlib
import json
import os
import re
import shutil
import warnings

import numpy as np

from gimmik.util import atomic_path

_KINDS = ('tune', 'c', 'emulate', 'isa')


def base_dir():
    return os.environ.get('GIMMIK_CACHE_DIR') or os.path.join(
        os.environ.get('XDG_CACHE_HOME') or os.path.expanduser('~/.cache'),
        'gimmik')


def cache_dir(kind):
    """The directory of one kind of cache entry, created on demand."""
    if kind not in _KINDS:
        raise ValueError(f'unknown cache kind {kind!r}')
    path = os.path.join(base_dir(), kind)
    os.makedirs(path, exist_ok=True)
    return path


def n_class(n):
    """The bucket of column counts that share a tuning result: n rounded to
    the nearest power of two, as its exponent."""
    return int(round(np.log2(max(int(n), 1))))


def tune_key(A, *, beta, dtype, platform, device, options, n, ldb, ldc,
             version):
    """sha256 over everything a tuning result depends on."""
    A = np.ascontiguousarray(A, dtype=np.float64)
    h = hashlib.sha256()
    h.update(repr(A.shape).encode())
    h.update(A.tobytes())
    h.update(json.dumps({
        'beta': float(beta), 'dtype': np.dtype(dtype).name,
        'platform': platform, 'device': device,
        'options': {k: str(v) for k, v in sorted(options.items())},
        'n_class': n_class(n),
        # the alignment the candidates may assume follows the strides
        'ld_align': _pow2_divisor(ldb) if ldb == ldc else
        [_pow2_divisor(ldb), _pow2_divisor(ldc)],
        'version': version}, sort_keys=True).encode())
    return h.hexdigest()


def _pow2_divisor(x, cap=16):
    d = 1
    while d < cap and x % (2*d) == 0:
        d *= 2
    return d


def load_json(kind, key):
    """The cached JSON value of one kind for key, or None (also for an
    entry that cannot be read or parsed, or a cache that cannot be made)."""
    _check_key(key)
    try:
        with open(_entry(kind, key)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def store_json(kind, key, obj):
    """Write obj as JSON for key atomically; returns whether it was stored.
    A cache that cannot be written is a warning, never an error: the caller
    has its result and only loses the shortcut next time."""
    _check_key(key)
    try:
        with atomic_path(_entry(kind, key)) as tmp:
            with open(tmp, 'w') as f:
                json.dump(obj, f)
                f.flush()
                os.fsync(f.fileno())
    except OSError as e:
        warnings.warn(f'gimmik cache not written ({e}); set GIMMIK_CACHE_DIR '
                      f'to a writable directory to keep results',
                      RuntimeWarning, stacklevel=2)
        return False
    return True


def load(key):
    """The cached tuning result (a JSON object) for key, or None."""
    return load_json('tune', key)


def store(key, obj):
    """Store a tuning result for key (see store_json)."""
    return store_json('tune', key, obj)


def clear(kind='tune'):
    """Remove every entry of one kind ('tune', 'c' or 'all'); returns the
    number of files removed."""
    kinds = _KINDS if kind == 'all' else (kind,)
    count = 0
    for k in kinds:
        d = cache_dir(k)
        for name in os.listdir(d):
            p = os.path.join(d, name)
            if os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    continue
            count += 1
    return count


_KEY = re.compile(r'[0-9a-f]{16,64}\Z')


def _check_key(key):
    if not isinstance(key, str) or not _KEY.match(key):
        raise ValueError(f'not a cache key: {key!r}')


def _entry(kind, key):
    return os.path.join(cache_dir(kind), f'{key}.json')
