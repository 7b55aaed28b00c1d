"""gimmik's on-disk caches (``$GIMMIK_CACHE_DIR``): built C libraries and
tuning results, written atomically; a cache that cannot be written only
warns (docs/reliability.md)."""

import atexit
import glob
import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import warnings

import numpy as np

from gimmik.util import atomic_path, file_lock

_KINDS = ('tune', 'c', 'emulate', 'isa')

# The lock files of lock(), in a directory of their own that clear() leaves
# alone (a process may hold one)
LOCKS = 'locks'

# What clear() removes: tuning results, built code (C libraries, the CPU
# executor's libraries, ISA reports), or everything
CLEARABLE = {'tune': ('tune',), 'builds': ('c', 'emulate', 'isa'),
             'all': _KINDS}


def base_dir():
    return os.environ.get('GIMMIK_CACHE_DIR') or os.path.join(
        os.environ.get('XDG_CACHE_HOME') or os.path.expanduser('~/.cache'),
        'gimmik')


def cache_dir(kind):
    """The directory of one kind of cache entry, created on demand (OSError
    when it cannot be)."""
    if kind not in _KINDS:
        raise ValueError(f'unknown cache kind {kind!r}')
    path = os.path.join(base_dir(), kind)
    os.makedirs(path, exist_ok=True)
    return path


def warn_unwritable(error, what='nothing is kept between runs'):
    """The warning about a cache that cannot be written, naming it, why,
    what follows, and the variable that moves it."""
    warnings.warn(f'gimmik cache not written: {base_dir()} ({error}); '
                  f'{what}: set GIMMIK_CACHE_DIR to a writable directory',
                  RuntimeWarning, stacklevel=3)


_scratch = {}   # kind -> this process's stand-in for an unwritable cache
_scratch_lock = threading.Lock()


def build_dir(kind):
    """Where to keep built code of one kind: its cache directory, or when
    that cannot be made or written, a temporary directory of this process
    (removed at exit) after a warning."""
    try:
        path = cache_dir(kind)
        if os.access(path, os.W_OK | os.X_OK):
            return path
        raise PermissionError(f'{path} is not writable')
    except OSError as e:
        return _scratch_dir(kind, e)


def _scratch_dir(kind, error):
    """This process's temporary directory for builds of one kind (removed
    at exit), made after a warning naming error the first time."""
    with _scratch_lock:     # builds run in threads: warn once
        if kind not in _scratch:
            warn_unwritable(error, 'builds go to a temporary directory '
                            'for this run')
            tmp = tempfile.mkdtemp(prefix=f'gimmik-{kind}-')
            atexit.register(shutil.rmtree, tmp, True)
            _scratch[kind] = tmp
        return _scratch[kind]


def find_build(kind, key, ext='.so'):
    """The path of a built file stored by store_build whose bytes match the
    digest in its name, or None; files that do not match (truncated or
    damaged) are removed where possible."""
    dirs = dict.fromkeys([build_dir(kind), _scratch.get(kind)])
    for path in sorted(p for d in dirs if d for p in
                       glob.glob(os.path.join(d, f'{key}.*{ext}'))):
        digest = os.path.basename(path)[len(key) + 1:-len(ext)]
        if _file_digest(path) == digest:
            return path
        try:
            os.unlink(path)
        except OSError:
            pass
    return None


def store_build(kind, key, built, ext='.so'):
    """Copy the file `built` into the cache as KEY.DIGEST.EXT (atomically,
    mode 0777 less the umask); returns its path."""
    digest = _file_digest(built)
    name = f'{key}.{digest}{ext}'
    path = os.path.join(build_dir(kind), name)
    try:
        return _copy_atomic(built, path)
    except OSError as e:
        # a directory that looks writable and is not (ACLs, a full disk or
        # quota): this run keeps its builds in its scratch directory
        return _copy_atomic(built, os.path.join(_scratch_dir(kind, e), name))


def _copy_atomic(src, path):
    with atomic_path(path, mode=0o777) as part:
        shutil.copyfile(src, part)
    return path


def _file_digest(path, size=16):
    h = hashlib.sha256()
    try:
        with open(path, 'rb') as f:
            for chunk in iter(lambda: f.read(1 << 20), b''):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()[:size]


def lock(kind, key, on_wait=None):
    """An exclusive lock (gimmik.util.file_lock) on one entry, for whoever
    computes it: the others wait, then read what the holder stored."""
    _check_key(key)
    if kind not in _KINDS:
        raise ValueError(f'unknown cache kind {kind!r}')
    d = os.path.join(base_dir(), LOCKS)
    try:
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, f'{kind}-{key}.lock')
    except OSError:
        path = None     # no cache: nothing to share, no lock to take
    return file_lock(path, on_wait)


def n_class(n):
    """The bucket of column counts that share a tuning result: n rounded to
    the nearest power of two, as its exponent."""
    return int(round(np.log2(max(int(n), 1))))


def tune_key(A, *, beta, dtype, platform, device, options, n, ldb, ldc,
             version, build=''):
    """sha256 over everything a tuning result depends on; `build` says what
    the kernels were built with (Runtime.build_identity)."""
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
        'version': version, 'build': build}, sort_keys=True).encode())
    return h.hexdigest()


def _pow2_divisor(x, cap=16):
    d = 1
    while d < cap and x % (2*d) == 0:
        d *= 2
    return d


def load_json(kind, key, problems=None):
    """The cached JSON value of one kind for key, or None (also for an entry
    that cannot be read or parsed, or a cache that cannot be made)."""
    _check_key(key)
    try:
        with open(_entry(kind, key)) as f:
            return json.load(f)
    except OSError:
        return None
    # RecursionError: nesting deeper than the parser goes
    except (ValueError, RecursionError) as e:
        if problems is not None:
            problems.append(f'{type(e).__name__}: {e}'[:200])
        return None


def entry_path(kind, key):
    """Where the entry of one kind for key lives (for messages)."""
    return os.path.join(base_dir(), kind, f'{key}.json')


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
        warn_unwritable(e, 'the result is not kept for the next run')
        return False
    return True


def load(key, problems=None):
    """The cached tuning result (a JSON object) for key, or None."""
    return load_json('tune', key, problems)


def store(key, obj):
    """Store a tuning result for key (see store_json)."""
    return store_json('tune', key, obj)


# the files gimmik writes into a cache, so that clear() removes only those
_OWN_NAME = r'[0-9a-f]{16,64}(?:\.json|\.[0-9a-f]{16}\.so)'
_OWN_FILE = re.compile(rf'(?:{_OWN_NAME}|\.{_OWN_NAME}[a-z0-9_]{{8}}\.part)\Z')


def clear(kind='tune'):
    """Remove every entry of one kind (a cache kind, or a key of CLEARABLE:
    'tune', 'builds', 'all'); returns the number of files removed (only
    gimmik's own names: anything a user put there stays)."""
    kinds = CLEARABLE.get(kind, (kind,))
    count = 0
    for k in kinds:
        if k not in _KINDS:
            raise ValueError(f'unknown cache kind {k!r}')
        d = os.path.join(base_dir(), k)
        try:
            names = os.listdir(d)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for name in names:
            p = os.path.join(d, name)
            if not _OWN_FILE.match(name) or os.path.islink(p) \
                    or not os.path.isfile(p):
                continue
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
