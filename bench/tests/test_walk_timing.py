"""bench/pyfr/walk_timing.compile_pool: the workers end with the run."""

import os
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

SCRIPT = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, sys.argv[1])
    from bench.pyfr.walk_timing import compile_pool

    if __name__ == '__main__':
        pool = compile_pool(2)
        futs = [pool.submit(time.sleep, 60) for _ in range(2)]
        time.sleep(2)
        print('exiting', flush=True)
        os._exit(0)
""")


@pytest.mark.skipif(not sys.platform.startswith('linux'),
                    reason='PR_SET_PDEATHSIG is Linux only')
def test_a_pipe_reader_sees_eof_when_the_run_exits(tmp_path):
    # a worker left running holds the pipe open: the reader would wait 60 s
    script = tmp_path / 'run.py'
    script.write_text(SCRIPT)
    t0 = time.time()
    p = subprocess.run([sys.executable, str(script), ROOT],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       timeout=50, cwd=tmp_path)
    assert p.stdout.strip() == b'exiting'
    assert time.time() - t0 < 30


class _FakeCupy:
    """Events that read a shared log of launches: an event pair's time is
    1 for a warm launch (the launch before it was its own) and 2 for a cold
    one, so time_median's result says what ran before each timed launch."""

    def __init__(self):
        self.log = []
        log = self.log

        class Event:
            def record(self, stream):
                self.at = len(log)

            def synchronize(self):
                pass

        def elapsed(s, e):
            timed = log[s.at:e.at]
            assert len(timed) == 1
            warm = s.at > 0 and log[s.at - 1] == timed[0]
            return 1e3 if warm else 2e3

        self.cuda = type('cuda', (), {'Event': Event,
                                      'get_elapsed_time': staticmethod(elapsed)})


def test_time_median_times_each_launch_warm_in_a_rotated_order():
    from bench.pyfr.walk_timing import Device
    dev = object.__new__(Device)
    dev.cupy, dev.stream = _FakeCupy(), None
    launches = [lambda k=k: dev.cupy.log.append(k) for k in 'abc']
    ts = dev.time_median(launches, 3)
    # cold timed launches (one after another's) would read 2.0
    assert ts == [1.0, 1.0, 1.0]
    timed_first = [dev.cupy.log[i] for i in (0, 6, 12)]
    assert timed_first == ['a', 'b', 'c']
