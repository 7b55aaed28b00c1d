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
