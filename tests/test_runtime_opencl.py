"""The opencl runtime (gimmik.runtime.opencl.Runtime) on a real OpenCL
device (PoCL's CPU device from the test extra): kernels exact against
float64 NumPy with C poisoned first, the baseline that stands in for the
vendor BLAS named, and `gimmik tune/sweep --platform opencl` ranking the
candidates against it."""

import csv
import json

import numpy as np
import pytest

from conftest import Panels, random_operator
from gimmik.cli import main as cli_main

opencl = pytest.importorskip('gimmik.runtime.opencl')


@pytest.fixture(scope='module')
def rt():
    try:
        return opencl.Runtime()
    except (opencl.RuntimeUnavailable, ImportError) as e:
        pytest.skip(str(e))


def has_clblast():
    try:
        opencl.load_clblast()
        return True
    except opencl.RuntimeUnavailable:
        return False


def run(rt, launch, p, n):
    """p.c after launch on the runtime's copies of p's panels."""
    b, c = rt.upload(p.bfull), rt.upload(p.cfull)
    launch(b, c, n, p.bfull.shape[1], p.cfull.shape[1])
    out = np.empty_like(p.cfull)
    rt.download(c, out)
    p.cfull[...] = out


@pytest.mark.parametrize('dtype,beta', [(np.float64, 0.0),
                                        (np.float64, -0.5),
                                        (np.float32, 1.0)])
def test_candidates_exact(rt, rng, dtype, beta):
    A = random_operator(rng, 30, 20, 0.3)
    n, ldb, ldc = 777, 780, 784
    mm = rt.matmul(A, beta, aligne=4)
    seen = 0
    for src, meta in mm.kernels(dtype, **rt.kernel_options()):
        p = Panels(rng, A, beta, dtype, n, ldb, ldc)
        run(rt, rt.compile(src, meta), p, n)
        p.check(f"{meta['variant']} {np.dtype(dtype).name} beta={beta}")
        seen += 1
    assert seen >= 4


def test_a_wrong_kernel_is_caught(rt, rng):
    """The check above fails on a kernel one coefficient off."""
    A = random_operator(rng, 12, 9, 0.5)
    mm = rt.matmul(A, 0.0, aligne=1)
    src, meta = next(iter(mm.kernels(np.float64, **rt.kernel_options())))
    v = A[np.nonzero(A)][0]
    lit = repr(float(v))
    assert lit in src
    bad = src.replace(lit, repr(float(v) + 1.0), 1)
    p = Panels(rng, A, 0.0, np.float64, 300)
    run(rt, rt.compile(bad, meta), p, 300)
    with pytest.raises(AssertionError, match='relative error'):
        p.check('one coefficient off')


def test_baseline_is_named_and_exact(rt, rng):
    A = random_operator(rng, 16, 11, 0.4)
    forms = rt.vendor_formulations(A, 1.0, 1.0, np.float64)
    names = [name for name, _ in forms]
    assert names == (['clblast-nn', 'clblast-nt'] if has_clblast()
                     else ['numpy-host'])
    for name, launch in forms:
        p = Panels(rng, A, 1.0, np.float64, 500, 503, 509)
        run(rt, launch, p, 500)
        p.check(name)
        assert rt.time(launch, (rt.upload(p.bfull), rt.upload(p.cfull),
                                500, 503, 509), warmup=1, repeats=2) > 0


def test_buffers_checked(rt):
    A = np.eye(3)
    launch = rt.vendor_gemm(A, 1.0, 0.0, np.float64)
    b, c = rt.upload(np.ones((3, 8))), rt.upload(np.ones((3, 8)))
    with pytest.raises(TypeError, match='b must be a buffer'):
        launch(np.ones((3, 8)), c, 8, 8, 8)
    with pytest.raises(ValueError, match='n'):
        launch(b, c, 9, 8, 8)
    with pytest.raises(ValueError, match='c must be a 3 x 8 float32'):
        rt.vendor_gemm(A, 1.0, 0.0, np.float32)(
            rt.upload(np.ones((3, 8), np.float32)), c, 8, 8, 8)
    with pytest.raises(ValueError, match='device'):
        opencl.Runtime(device=10**6)
    with pytest.raises(TypeError, match='options'):
        opencl.Runtime(options='-O3')


def test_copy_bandwidth(rt):
    assert rt.copy_bandwidth(1 << 20) > 1e6


def test_tune_cli_ranks_against_the_named_baseline(fast_tune, tmp_path,
                                                   capsys, rng):
    A = random_operator(rng, 20, 14, 0.3)
    np.savez(tmp_path / 'ops.npz', op=A)
    capsys.readouterr()         # the seed the rng fixture printed
    rc = cli_main(['tune', f'{tmp_path}/ops.npz:op', '--platform', 'opencl',
                   '--n', '1500', '--beta', '1', '--json'])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    assert res['platform'] == 'opencl'
    base = 'clblast-' if has_clblast() else 'numpy-host'
    assert res['vendor']['formulation'].startswith(base)
    cands = res['candidates']
    assert len(cands) >= 4 and all(c['correct'] for c in cands)
    assert res['best']['variant'] in {c['variant'] for c in cands}
    assert res['vendor_error'] <= 1e-12
    rc = cli_main(['tune', f'{tmp_path}/ops.npz:op', '--platform', 'opencl',
                   '--n', '1500', '--beta', '1'])
    assert rc == 0
    assert base in capsys.readouterr().out


def test_sweep_cli(fast_tune, tmp_path, rng):
    np.savez(tmp_path / 'suite.npz',
             **{'p1-hex-m0': random_operator(rng, 12, 8, 0.5),
                'p1-hex-m3': random_operator(rng, 8, 24, 0.3)})
    out = tmp_path / 'out'
    rc = cli_main(['sweep', '--platform', 'opencl', '--ops-path',
                   str(tmp_path / 'suite.npz'), '--n', '1024', '--out',
                   str(out)])
    assert rc == 0
    rows = list(csv.DictReader(open(out / 'sweep.csv')))
    assert sorted(r['operator'] for r in rows) == ['p1-hex-m0', 'p1-hex-m3']
    base = 'clblast-' if has_clblast() else 'numpy-host'
    for r in rows:
        assert r['platform'] == 'opencl' and not r.get('error')
        assert r['vendor_formulation'].startswith(base)
