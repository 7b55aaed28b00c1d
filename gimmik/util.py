"""Small helpers shared across gimmik: atomic file writes that honour the
umask, advisory file locks, and the identity of an external tool."""

import contextlib
import errno
import functools
import os
import subprocess
import tempfile
import warnings


def umask():
    """The process's file mode creation mask, read without changing it
    where the system allows (os.umask would change it for every thread for
    a moment)."""
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith('Umask:'):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path, suffix='.part', mode=0o666):
    """A temporary path in path's directory to write into; on a clean exit it
    is renamed onto `path` (atomic on POSIX), otherwise removed, so that
    readers only ever see the old or the complete new file; mode less umask."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix='.' + os.path.basename(path),
                               suffix=suffix)
    try:
        os.fchmod(fd, mode & ~umask())
    finally:
        os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, mode & ~umask())   # a copy may have set its own mode
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write(path, data):
    """Write str or bytes to `path` atomically (see atomic_path), flushed to
    disk before the rename."""
    with atomic_path(path) as tmp:
        with open(tmp, 'wb' if isinstance(data, bytes) else 'w',
                  **({} if isinstance(data, bytes) else {'newline': ''})) \
                as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())


# flock's failures on a file system that does not provide it: NFS without lockd
# (ENOLCK), Lustre mounted without -o flock (ENOSYS), others (EOPNOTSUPP)
_NO_FLOCK = frozenset(getattr(errno, name) for name in
                      ('ENOLCK', 'ENOSYS', 'EOPNOTSUPP', 'ENOTSUP')
                      if hasattr(errno, name))
_flock_warned = False


def _warn_no_flock(path, error):
    """Say once a process that locks are not available, and what follows."""
    global _flock_warned
    if _flock_warned:
        return
    _flock_warned = True
    warnings.warn(
        f'cannot lock {path}: the file system does not support flock '
        f'({errno.errorcode.get(error.errno, error.errno)}: '
        f'{error.strerror}); going on without locks: do not run tunings or '
        f'sweeps sharing this directory at the same time',
        RuntimeWarning, stacklevel=4)


@contextlib.contextmanager
def file_lock(path, on_wait=None):
    """Hold an exclusive advisory lock (flock) on the file `path`, created when
    missing, for the duration; yields False, running unlocked, where no lock
    can be had (a warning where the file system has no flock)."""
    import fcntl
    if path is None:
        yield False
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        try:    # another user's lock file: a read-only descriptor locks too
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            yield False
            return
    try:
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if on_wait is not None:
                    on_wait()
                fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as e:
            if e.errno not in _NO_FLOCK:
                raise
            _warn_no_flock(path, e)
            locked = False
        else:
            locked = True
        yield locked
    finally:
        os.close(fd)    # closing the descriptor releases the lock


@functools.lru_cache(maxsize=None)
def tool_identity(argv):
    """What identifies a command-line tool's build (argv a tuple, e.g.
    ('ccache', 'gcc')): its --version output, or the command itself when
    it does not say."""
    try:
        r = subprocess.run([*argv, '--version'], capture_output=True,
                           text=True, timeout=60)
        text = (r.stdout or r.stderr).strip()
    except (OSError, subprocess.SubprocessError):
        text = ''
    return text or ' '.join(argv)
