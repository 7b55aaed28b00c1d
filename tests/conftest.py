"""Shared test helpers: seeded generators, random operators, and (from
gimmik.verify) the panels with poisoned outputs and the NumPy reference
every kernel is checked against."""

import os

import numpy as np
import pytest

from gimmik.verify import Panels, rel_error  # noqa: F401 (shared helpers)

# The HIP target the executor tests render for
HIP_OPTS = {'gcn_arch': 'gfx942', 'warp_size': 64}
# ... and the CUDA one
CUDA_OPTS = {'compute_capability': (9, 0)}

# (platform, dtype, beta, n baked) of the GPU executor runs that cover a
# family: both platforms, f64 and f32, beta 0, 1 and -0.5
GPU_RUNS = [(p, dtype, beta, baked)
            for p in ('hip', 'cuda')
            for dtype in (np.float64, np.float32)
            for beta in (0.0, 1.0, -0.5) for baked in (False, True)]

# Relative error allowed against the float64 NumPy reference
RTOL = {np.float64: 1e-13, np.float32: 1e-5}


def pytest_addoption(parser):
    parser.addoption('--full', action='store_true',
                     help='run the exhaustive sweeps (also GIMMIK_FULL=1)')


def pytest_configure(config):
    config.addinivalue_line('markers', 'full: exhaustive, only with --full')
    config.addinivalue_line('markers', 'gpu: runs on a CUDA device; skipped '
                            'where the cuda runtime cannot run')


def pytest_collection_modifyitems(config, items):
    if config.getoption('--full') or os.environ.get('GIMMIK_FULL') == '1':
        return
    skip = pytest.mark.skip(reason='exhaustive: run with --full')
    for item in items:
        if 'full' in item.keywords:
            item.add_marker(skip)


def full_run(config):
    return config.getoption('--full') or os.environ.get('GIMMIK_FULL') == '1'


def random_operator(rng, m, k, density, pool=None):
    """A random m x k operator with about `density` non-zeros (at least
    one), values drawn from `pool` distinct values when given."""
    mask = rng.random((m, k)) < density
    mask[rng.integers(m), rng.integers(k)] = True
    if pool:
        vals = rng.choice(rng.standard_normal(pool), size=(m, k))
    else:
        vals = rng.standard_normal((m, k))
    return np.where(mask, vals, 0.0)


def kron_like(rng, m=200, k=46, blocks=5, bk=9):
    """`blocks` blocks of m/blocks rows x bk columns on the diagonal (the
    columns beyond them zero), rows and columns shuffled: a pattern
    gimmik.analysis.slab_order gathers back into blocks (prism operators
    are of this kind)."""
    A = np.zeros((m, k))
    h = m // blocks
    for b in range(blocks):
        A[h*b:h*(b + 1), bk*b:bk*(b + 1)] = rng.standard_normal((h, bk))
    return A[rng.permutation(m)][:, rng.permutation(k)]


def divergence_like(rng, p=3, zero_centre=False):
    """The transpose of a tensor-product gradient (gradient_like): row i
    sums the three derivatives' values of the lines through point i; the
    columns come in three parts, one a derivative.  zero_centre (odd p):
    the derivative matrix's centre is zero, as at the middle of
    symmetric points (PyFR's hex divergence: 7056 non-zeros at p = 7)."""
    D = rng.standard_normal((p, p))
    if zero_centre:
        D[p // 2, p // 2] = 0.0
    eye = np.eye(p)
    return np.ascontiguousarray(np.vstack([
        np.kron(np.kron(eye, eye), D), np.kron(np.kron(eye, D), eye),
        np.kron(np.kron(D, eye), eye)]).T)


def prism_like(rng, tri=21, line=6):
    """The derivatives at the points of a prism-like tensor product (a
    triangle's `tri` points times a line's `line`): two in the triangle's
    plane (rows: one random tri x tri matrix along each point's triangle
    layer) and one along the line (a random line x line matrix along each
    point's line); columns: the points, triangle index fastest.  About
    10 % dense, as PyFR's prism operators."""
    n = tri*line
    A = np.zeros((3*n, n))
    for d in range(2):
        A[d*n:(d + 1)*n] = np.kron(np.eye(line),
                                   rng.standard_normal((tri, tri)))
    A[2*n:] = np.kron(rng.standard_normal((line, line)), np.eye(tri))
    return A


def gradient_like(rng, p=4):
    """The three derivatives at the p**3 points of a tensor-product cube
    (rows: d/dx at every point, then d/dy, then d/dz; columns: the
    points), each a row of one random p x p matrix along the point's line
    (hex gradient operators are of this kind): rows of one plane of points
    share their B rows, contiguous rows cut the planes apart."""
    D = rng.standard_normal((p, p))
    eye = np.eye(p)
    return np.vstack([np.kron(np.kron(eye, eye), D),
                      np.kron(np.kron(eye, D), eye),
                      np.kron(np.kron(D, eye), eye)])


def group_operator(rng, m=40, k=24, density=0.15):
    """A sparse operator with zero rows, for the row-grouped and batched
    plans: row 3 alone and rows 10-13 together (a zero row's C is read
    only where beta != 1)."""
    A = random_operator(rng, m, k, density)
    A[3] = 0
    A[10:14] = 0
    return A


@pytest.fixture
def rng(request):
    """A fresh generator per test, seeded from the test's name and the
    GIMMIK_SEED environment variable (random when unset)."""
    seed = os.environ.get('GIMMIK_SEED')
    seed = int(seed) if seed else np.random.SeedSequence().entropy
    print(f'GIMMIK_SEED={seed}')  # shown when the test fails
    return np.random.default_rng([seed, abs(hash(request.node.name)) % 2**32])


# -- operators and options shared by the argument-check tests ---------------
PLATFORM_OPTS = {'c': {}, 'hip': {'gcn_arch': 'gfx90a'},
                 'cuda': {'compute_capability': (9, 0)}}


A_SMALL = np.array([[0.5, 0, 2.0], [0, -1.0, 0], [1.5, 0, 0.25],
                    [0, 3.0, 0]])


@pytest.fixture(params=sorted(PLATFORM_OPTS))
def platform(request):
    return request.param


# -- the real tuner on the c platform, fast -----------------------------------
@pytest.fixture
def fast_tune(tmp_path, monkeypatch):
    monkeypatch.setenv('GIMMIK_CACHE_DIR', str(tmp_path / 'cache'))
    monkeypatch.setattr('gimmik.tune.WARMUP', 1)
    monkeypatch.setattr('gimmik.tune.REPEATS', 3)
    monkeypatch.setattr('gimmik.tune.COPY_BYTES', (1 << 20, 1 << 20))
    return tmp_path / 'cache'


# -- a sweep of three operators with a stand-in tuner -------------------------
class _Rt:
    name = 'fake'
    device = 'Fake Device'


def _fake_tune(calls):
    from types import SimpleNamespace

    def tune(A, *, beta, dtype, n, platform, runtime, use_cache, name,
             progress=None):
        calls.append(name)
        t = 1e-6*(1 + np.count_nonzero(A))
        best = {'variant': 'cstream', 'time_s': t, 'gbps': 1.0}
        return SimpleNamespace(
            platform=platform, device=runtime.device, dtype=dtype, beta=beta,
            n=n, best=best, vendor={'time_s': 2*t}, copy_gbps=50.0,
            candidates=[{'variant': 'cstream', 'time_s': t,
                         'correct': True}], use_vendor=False,
            to_json=lambda: {'name': name})
    return tune


OPS3 = 'p1-quad-m0,p1-quad-m3,p1-tri-m0'


def _sweep(out, calls):
    from gimmik.sweep import sweep
    return sweep(out, ops=OPS3, n=64, runtime=_Rt(), tune=_fake_tune(calls))


# -- no source for bad input --------------------------------------------------
@pytest.fixture
def no_source(request, monkeypatch):
    """Fail a test that uses it (the bad-input tests) if it renders a
    template or compiles a kernel (unless it asks for render_allowed)."""
    import mako.template
    if 'render_allowed' in request.fixturenames:
        return

    def rendered(*args, **kwargs):
        raise AssertionError('source was rendered for a bad input')

    monkeypatch.setattr(mako.template.Template, 'render', rendered)
    # the executor neither builds nor loads a kernel
    monkeypatch.setattr('gimmik.emulate.subprocess.run', rendered)
    monkeypatch.setattr('gimmik.emulate.ctypes.CDLL', rendered)


@pytest.fixture(autouse=True)
def confirmed_verdicts(monkeypatch):
    """Timings on a shared test machine are noise: every tuning verdict
    counts as confirmed (gimmik.tune.UNSTABLE_FACTOR infinite) and no
    timing as starved of CPU (gimmik.runtime.c.STARVED_WAIT infinite),
    except in tests of these, which set them back."""
    monkeypatch.setattr('gimmik.tune.UNSTABLE_FACTOR', float('inf'),
                        raising=False)
    monkeypatch.setattr('gimmik.runtime.c.STARVED_WAIT', float('inf'),
                        raising=False)


def run_candidate(rng, platform, A, family, params, dtype, beta, baked,
                  n=301, pad=(3, 5), aligne=None, mutate=None):
    """One candidate (family, params) of platform 'hip' or 'cuda' run in
    its CPU executor on fresh panels with poisoned output: n columns,
    strides n + pad (rounded up to aligne), n and strides baked or passed
    at run time; mutate(plan) perturbs the plan before it is rendered.
    Returns (panels, meta)."""
    from gimmik import CUDAMatMul, HIPMatMul
    from gimmik.base import Candidate
    from gimmik.emulate import run_cuda, run_hip

    mm_cls, opts, run = {
        'hip': (HIPMatMul, HIP_OPTS, run_hip),
        'cuda': (CUDAMatMul, CUDA_OPTS, run_cuda)}[platform]
    lb, lc = n + pad[0], n + pad[1]
    if aligne:
        lb, lc = (-(-x // aligne)*aligne for x in (lb, lc))
    kw = dict(n=n, ldb=lb, ldc=lc) if baked else {}
    mm = mm_cls(A, beta=beta, aligne=aligne, **kw)
    cand = Candidate(family, params, opts)
    if mutate:
        mutate(mm.kernel(cand, dtype).plan)
    src, meta = mm.render(cand, dtype)
    p = Panels(rng, A, beta, dtype, n, lb, lc)
    run(src, meta, p.b, p.c)
    return p, meta


def run_hip_candidate(rng, A, family, params, dtype, beta, baked, **kw):
    """run_candidate on HIP."""
    return run_candidate(rng, 'hip', A, family, params, dtype, beta, baked,
                         **kw)
