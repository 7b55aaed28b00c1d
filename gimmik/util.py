"""Small helpers shared across gimmik: atomic file writes."""

import contextlib
import os
import tempfile


@contextlib.contextmanager
def atomic_path(path, suffix='.part'):
    """A temporary path in path's directory to write into; on a clean exit
    it is renamed onto `path` (atomic on POSIX), otherwise removed, so that
    readers only ever see the old or the complete new file."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix='.' + os.path.basename(path),
                               suffix=suffix)
    os.close(fd)
    try:
        yield tmp
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
