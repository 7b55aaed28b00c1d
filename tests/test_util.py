"""gimmik.util: atomic writes that honour the umask, the advisory file lock
(with real processes), the identity of a tool."""

import os
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from gimmik.util import atomic_path, atomic_write, file_lock, tool_identity, \
    umask


@pytest.fixture
def mask():
    """Set the umask for a test, restoring it after."""
    old = os.umask(0o022)
    os.umask(old)

    def set_mask(m):
        os.umask(m)
        return m
    yield set_mask
    os.umask(old)


@pytest.mark.parametrize('m', [0o002, 0o022, 0o027, 0o077])
def test_atomic_write_honours_the_umask(tmp_path, mask, m):
    mask(m)
    assert umask() == m
    path = tmp_path / 'f.txt'
    atomic_write(path, 'x')
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~m
    with atomic_path(tmp_path / 'lib.so', mode=0o777) as part:
        with open(part, 'wb') as f:
            f.write(b'\0')
        os.chmod(part, 0o600)    # what a copy may leave behind
    assert stat.S_IMODE(os.stat(tmp_path / 'lib.so').st_mode) == 0o777 & ~m
    assert sorted(os.listdir(tmp_path)) == ['f.txt', 'lib.so']


_HOLDER = textwrap.dedent('''
    import sys, time
    from gimmik.util import file_lock
    path, log, tag = sys.argv[1:4]
    with file_lock(path):
        with open(log, 'a') as f:
            f.write(f'{tag} in {time.monotonic()}\\n')
        time.sleep(0.5)
        with open(log, 'a') as f:
            f.write(f'{tag} out {time.monotonic()}\\n')
''')


def test_file_lock_serialises_processes(tmp_path):
    lock, log = tmp_path / 'x.lock', tmp_path / 'log'
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, '-c', _HOLDER, str(lock),
                               str(log), str(i)], env=env)
             for i in range(3)]
    assert [p.wait(120) for p in procs] == [0, 0, 0]
    events = [line.split()[:2] for line in log.read_text().splitlines()]
    assert len(events) == 6
    # never two holders at once: every 'in' is followed by the same 'out'
    for i in range(0, 6, 2):
        assert events[i][1] == 'in' and events[i + 1] == [events[i][0], 'out']


def test_file_lock_waits_and_says_so(tmp_path):
    lock = tmp_path / 'y.lock'
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)}
    holder = subprocess.Popen(
        [sys.executable, '-c', 'import sys, time\nfrom gimmik.util import '
         'file_lock\nwith file_lock(sys.argv[1]):\n    print("held", '
         'flush=True)\n    time.sleep(1.0)\n', str(lock)],
        env=env, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == 'held'
    waited = []
    t0 = time.monotonic()
    with file_lock(lock, on_wait=lambda: waited.append(1)) as locked:
        assert locked
    assert waited == [1] and time.monotonic() - t0 > 0.2
    assert holder.wait(60) == 0
    # free now: no waiting
    with file_lock(lock, on_wait=lambda: waited.append(2)):
        pass
    assert waited == [1]


def test_file_lock_without_a_file(tmp_path):
    with file_lock(None) as locked:
        assert locked is False
    blocker = tmp_path / 'file'
    blocker.write_text('')
    with file_lock(blocker / 'sub.lock') as locked:
        assert locked is False


def test_tool_identity(tmp_path):
    tool = tmp_path / 'fakecc'
    tool.write_text('#!/bin/sh\necho "fakecc 1.2.3"\n')
    tool.chmod(0o755)
    assert tool_identity((str(tool),)) == 'fakecc 1.2.3'
    missing = str(tmp_path / 'missing')
    assert tool_identity((missing, 'x')) == f'{missing} x'
