"""CUDA launch bounds where A's f64 values recur (issue #50, item 3):
ptxas keeps an f64 value a thread's code uses more than once in registers,
which no register estimate counts; bstream-mgroup and bstream-warprows get
one block an SM (a thread's 255 registers) where a thread's code reuses
HOISTED_VALUES of them, as where it is long.  The count, the rule (only
f64, only sm_90, only such operators), and ptxas on a suite operator whose
m-group spilled at 3 blocks an SM before."""

import os
import re
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

from gimmik.base import Candidate
from gimmik.cuda import HOISTED_VALUES, LONG_KERNEL_TERMS, CUDAMatMul
from gimmik.families import recurring

NVCC = shutil.which('nvcc')
SUITE = os.path.join(os.path.dirname(os.path.dirname(__file__)), 'bench',
                     'operators', 'pyfr-ops.npz')
WARPROWS8 = dict(msplit=8, bsz=24, ld='cg', st='cg')
MGROUP4 = dict(msplit=4, rows=16, bsz=64, nbuf=1)


def _count(values):
    """recurring() by brute force: distinct |v| used twice or more, less
    values whose low 32 bits are zero."""
    seen = {}
    for v in np.ravel(values):
        v = abs(float(v))
        if v == 0 or np.float64(v).view(np.uint64) & 0xffffffff == 0:
            continue
        seen[v] = seen.get(v, 0) + 1
    return sum(c > 1 for c in seen.values())


def test_recurring_counts_what_ptxas_keeps(rng):
    vals = rng.standard_normal(40)
    A = rng.choice(np.concatenate([vals, -vals, [1.0, 0.5, -2.0, 0.0]]),
                   size=(30, 20))
    assert recurring(A) == _count(A)
    assert 0 < recurring(A) <= 40
    assert recurring(rng.standard_normal((30, 20))) == 0   # all distinct
    assert recurring(np.full((5, 5), 0.25)) == 0           # an immediate
    assert recurring([0.1, -0.1]) == 1                     # sign is free


def _symmetric(rng, pairs, m=161, k=140):
    """Rows of `pairs` values each in mirrored columns j and k-1-j, each
    row its own values: the reuse of a symmetric point set's operator,
    every value used twice within its row."""
    A = np.zeros((m, k))
    for i in range(m):
        cols = rng.choice(k//2, pairs, replace=False)
        A[i, cols] = A[i, k - 1 - cols] = rng.uniform(0.1, 1.0, pairs)
    return A


def _bounds(A, params, family, dtype=np.float64, cc=(9, 0), **sizes):
    mm = CUDAMatMul(A, **sizes)
    cand = Candidate(family, params, {'compute_capability': cc})
    kern = mm.kernel(cand, np.dtype(dtype).type)
    src, _ = mm.render(cand, dtype, 'k0')
    return re.search(r'__launch_bounds__\(([^)]*)\)', src).group(1), kern


# pairs a row: a thread's code (warprows: 21 rows, m-group: 14) reuses
# 357 (350) values in 714 (700) terms, below LONG_KERNEL_TERMS
@pytest.mark.parametrize('family, params, pairs', [
    ('bstream-warprows', WARPROWS8, 17), ('bstream-mgroup', MGROUP4, 25)])
def test_reused_f64_values_get_a_threads_registers(rng, family, params,
                                                    pairs):
    A = _symmetric(rng, pairs)
    distinct = np.where(A != 0, rng.uniform(0.1, 1.0, A.shape), 0.0)
    baked = dict(n=110080, ldb=110080, ldc=110080)
    bounds, kern = _bounds(A, params, family, **baked)
    # below the long-kernel terms: only the reuse decides
    assert kern.thread_terms() < LONG_KERNEL_TERMS
    assert kern.recurring_values() >= HOISTED_VALUES
    assert bounds.endswith(', 1'), bounds
    # the same pattern with distinct values, and f32: as before
    for case in (_bounds(distinct, params, family, **baked),
                 _bounds(A, params, family, dtype=np.float32, **baked)):
        assert not case[0].endswith(', 1'), case[0]
    # sm_80: the register budget alone, whatever the values
    assert _bounds(A, params, family, cc=(8, 0), **baked)[0] \
        == _bounds(distinct, params, family, cc=(8, 0), **baked)[0]
    assert _bounds(distinct, params, family, **baked)[1] \
        .recurring_values() == 0


@pytest.mark.skipif(NVCC is None, reason='nvcc is not installed')
def test_reused_values_compile_without_spills():
    """p4-pyr-m6 (384 values reused a wave): bstream-mgroup 4x16 at n run
    time spilled 16 bytes at 3 blocks an SM (168 registers)."""
    with np.load(SUITE) as f:
        A = f['p4-pyr-m6']
    mm = CUDAMatMul(A, beta=1.0, aligne=4)
    cand = next(c for c in mm._candidates(np.float64, (9, 0))
                if c.row == 'mgroup-4x16-b64')
    assert mm.kernel(cand, np.float64).recurring_values() >= HOISTED_VALUES
    src, _ = mm.render(cand, np.float64, 'k0')
    with tempfile.TemporaryDirectory() as tmp:
        cu = os.path.join(tmp, 'k.cu')
        with open(cu, 'w') as f:
            f.write(src)
        p = subprocess.run([NVCC, '-cubin', '-arch=sm_90', '-O3', '-Xptxas',
                            '-v', '-o', os.path.join(tmp, 'k.cubin'), cu],
                           capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    mo = re.search(r'(\d+) bytes stack frame, (\d+) bytes spill stores',
                   p.stderr)
    assert mo and mo.groups() == ('0', '0'), p.stderr[-1000:]
