"""Sanitizer mode: the executor's HIP kernels and the C platform's kernels
built with AddressSanitizer, run on a subset of operators in a child
process that preloads the ASan runtime; no report may appear.  Each run has
a control that proves the test can fail: a kernel made to step one column
past the end of its panels must produce a report.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

ASAN_REPORT = 'ERROR: AddressSanitizer'


def _libasan():
    cxx = os.environ.get('CXX', 'g++')
    if shutil.which(cxx) is None:
        pytest.skip(f'no C++ compiler {cxx!r}')
    out = subprocess.run([cxx, '-print-file-name=libasan.so'],
                         capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(out) or not os.path.exists(out):
        pytest.skip(f'{cxx} has no AddressSanitizer runtime')
    return out


# The child: builds every job's kernels with ASan, runs them on fresh
# panels (exactly sized, so one element past the end is in a redzone),
# checks the result against NumPy and prints one JSON line per kernel.
CHILD = textwrap.dedent('''
    import json, re, sys
    import numpy as np
    from gimmik.validate import check_dtype

    def operator(rng, m, k, density):
        A = np.where(rng.random((m, k)) < density,
                     rng.standard_normal((m, k)), 0.0)
        A[0, 0] = 1.0
        return A

    def sabotage(src, platform):
        """One column too many: reads and writes past the panels' end."""
        if platform == 'hip':
            out = src.replace('if (col < n)', 'if (col < n + 1)', 1)
        else:
            out = src.replace(': n;', ': n + 1;', 1)
        assert out != src, 'nothing to sabotage'
        return out

    def run(job):
        rng = np.random.default_rng(job['seed'])
        A = operator(rng, job['m'], job['k'], job['density'])
        dtype = check_dtype(job['dtype'])
        beta, n, baked = job['beta'], job['n'], job['baked']
        ld = job.get('ld', n)
        sizes = dict(n=n, ldb=ld, ldc=ld) if baked else {}
        if job['platform'] == 'hip':
            from gimmik.hip import HIPMatMul
            from gimmik.emulate import run_hip
            cands = list(HIPMatMul(A, beta=beta, aligne=job.get('aligne'),
                                   **sizes).kernels(dtype))
        else:
            from gimmik.c import CMatMul
            from gimmik.runtime.c import Runtime
            rt = Runtime(cflags=['-fsanitize=address',
                                 '-fno-omit-frame-pointer'])
            cands = list(CMatMul(A, beta=beta, **sizes).kernels(dtype))
        pick = job.get('variants')
        for src, meta in cands:
            if pick and not any(re.search(p, meta['variant'])
                                for p in pick):
                continue
            if job.get('sabotage'):
                src = sabotage(src, job['platform'])
            b = rng.standard_normal((A.shape[1], ld)).astype(dtype)[:, :n]
            c0 = rng.standard_normal((A.shape[0], ld)).astype(dtype)[:, :n]
            ref = A @ b.astype(float) + beta*c0.astype(float)
            c = np.full((A.shape[0], ld), np.nan, dtype)[:, :n]
            if beta:
                c[:] = c0
            if job['platform'] == 'hip':
                run_hip(src, meta, b, c)
            else:
                rt.compile(src, meta)(b, c, n, n, n)
            err = float(np.abs(c - ref).max() / np.abs(ref).max())
            print(json.dumps({'variant': meta['variant'], 'err': err,
                              'dtype': job['dtype']}), flush=True)

    for job in json.loads(sys.argv[1]):
        run(job)
''')

# The subset run under ASan: ragged n, runtime and baked sizes, both
# dtypes, sparse and dense operators (the dense one reaches mfma-dense).
HIP_JOBS = [
    dict(platform='hip', m=7, k=5, density=0.5, dtype='float64', beta=0.5,
         n=37, baked=False, seed=1),
    dict(platform='hip', m=20, k=18, density=0.9, dtype='float64', beta=0.0,
         n=33, baked=True, seed=2,
         variants=['mfma-dense/msplit4/pipe2', 'mfma-dense/msplit1/pipe0',
                   'cstream-ksplit/ksplit4', 'bstream-msplit/bsz16/msplit4']),
    # rows one column longer than an odd n (the tightest even stride):
    # two-column loads of the pair holding column n - 1 stay in the row
    dict(platform='hip', m=20, k=18, density=0.9, dtype='float64', beta=0.5,
         n=33, ld=34, aligne=2, baked=False, seed=6,
         variants=['^mfma-dense/.*vec2']),
    dict(platform='hip', m=9, k=12, density=0.3, dtype='float32', beta=-1.0,
         n=65, baked=False, seed=3,
         variants=['^bstream/', '^cstream/', 'preload_c']),
]
C_JOBS = [
    dict(platform='c', m=7, k=5, density=0.5, dtype='float64', beta=0.5,
         n=130, baked=False, seed=4),
    dict(platform='c', m=12, k=10, density=0.4, dtype='float32', beta=0.0,
         n=67, baked=True, seed=5,
         variants=['cstream/', 'bstream/width16', 'rowblock/rows6']),
]


def run_child(jobs, tmp_path):
    """Run the jobs in a child with ASan preloaded; (rc, stdout, stderr)."""
    env = dict(os.environ)
    env.update(GIMMIK_EMU_ASAN='1', LD_PRELOAD=_libasan(),
               ASAN_OPTIONS='detect_leaks=0:halt_on_error=1',
               GIMMIK_CACHE_DIR=str(tmp_path / 'cache'),
               OMP_NUM_THREADS='2')
    r = subprocess.run([sys.executable, '-c', CHILD, json.dumps(jobs)],
                       capture_output=True, text=True, env=env, timeout=600)
    return r.returncode, r.stdout, r.stderr


def _results(stdout):
    return [json.loads(line) for line in stdout.splitlines()
            if line.startswith('{')]


def _check_clean(jobs, tmp_path):
    rc, out, err = run_child(jobs, tmp_path)
    assert ASAN_REPORT not in err, err[-4000:]
    assert rc == 0, err[-4000:]
    res = _results(out)
    assert res, 'no kernel ran'
    tol = {'float64': 1e-13, 'float32': 1e-5}
    wrong = [r for r in res if not r['err'] <= tol[r['dtype']]]
    assert not wrong, wrong
    return res


def _check_caught(job, tmp_path):
    rc, out, err = run_child([dict(job, sabotage=True)], tmp_path)
    assert rc != 0
    assert ASAN_REPORT in err, err[-4000:]
    assert 'heap-buffer-overflow' in err, err[-4000:]


def test_hip_kernels_clean_under_asan(tmp_path):
    res = _check_clean(HIP_JOBS, tmp_path)
    assert len(res) >= 12
    assert any(r['variant'].startswith('mfma-dense') for r in res)
    assert any(r['variant'].startswith('mfma-dense')
               and r['variant'].endswith('vec2') for r in res)


def test_hip_out_of_bounds_is_reported(tmp_path):
    _check_caught(dict(HIP_JOBS[0], variants=['^cstream/width1']), tmp_path)


def test_c_kernels_clean_under_asan(tmp_path):
    pytest.importorskip('gimmik.c')
    pytest.importorskip('gimmik.runtime.c')
    res = _check_clean(C_JOBS, tmp_path)
    assert len(res) >= 4


def test_c_out_of_bounds_is_reported(tmp_path):
    pytest.importorskip('gimmik.c')
    pytest.importorskip('gimmik.runtime.c')
    _check_caught(dict(C_JOBS[0], variants=['^cstream/width64']), tmp_path)
