"""Property tests: random operators, beta, dtype, sizes and strides; every
candidate of every platform that runs on a CPU (HIP through the executor, C
natively) must match the float64 NumPy reference, write every element of
its (NaN-poisoned) output, leave the padding of C alone and B unchanged.

Profiles: `ci` (bounded, the default) and `deep` (HYPOTHESIS_PROFILE=deep)
for long runs.  They are applied per test, never loaded globally.
"""

import os
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, event, given, note, settings
from hypothesis import strategies as st

from conftest import Panels, random_operator, rel_error
from gimmik.families import family

# name -> (settings, largest nnz of A, most candidates per example,
#          widest panel)
_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large,
           HealthCheck.function_scoped_fixture]
# ci does not shrink: every shrink step compiles kernels, so a failure is
# reported at once with its reproduce_failure blob instead
settings.register_profile('ci', max_examples=14, deadline=None,
                          derandomize=False, suppress_health_check=_HEALTH,
                          print_blob=True,
                          phases=[Phase.explicit, Phase.reuse,
                                  Phase.generate])
settings.register_profile('deep', max_examples=400, deadline=None,
                          derandomize=False, suppress_health_check=_HEALTH,
                          print_blob=True)
# Per profile and platform: examples, largest nnz of A (C kernels compile
# far slower than the executor's), candidates per example (None: all of
# them) and the widest panel.
LIMITS = {
    'ci': {'hip': dict(examples=12, nnz=400, per_example=3, n=300),
           'c': dict(examples=5, nnz=120, per_example=2, n=300),
           'generate_mm': dict(examples=6, nnz=400, per_example=1, n=300)},
    'deep': {'hip': dict(examples=400, nnz=6000, per_example=None, n=2000),
             'c': dict(examples=150, nnz=3000, per_example=None, n=5000),
             'generate_mm': dict(examples=200, nnz=6000, per_example=1,
                                 n=2000)},
}

PROFILE = os.environ.get('HYPOTHESIS_PROFILE', 'ci')
if PROFILE not in LIMITS:
    PROFILE = 'ci'


def profile(platform):
    """The settings of one property test under the selected profile."""
    return settings(settings.get_profile(PROFILE),
                    max_examples=LIMITS[PROFILE][platform]['examples'])

# Counts for the closing report (printed with -s)
TRIED = {'examples': 0, 'kernels': 0}

# Values a pool of repeated operator entries is drawn from (besides random
# normals): exact ones, and magnitudes far from 1.
NICE = [1.0, -1.0, 0.5, -2.0, 0.25, 3.0, 1/3, 0.1, 1e-3, 1e3]


@st.composite
def operators(draw, max_nnz):
    """A random operator: shape 1-160, density 0.01-1, values either all
    distinct or from a small pool with repeats."""
    m = draw(st.integers(1, 160), label='m')
    k = draw(st.integers(1, 160), label='k')
    density = draw(st.floats(0.01, 1.0), label='density')
    # keep the unrolled kernels compilable in the bounded profile
    density = min(density, max_nnz / (m*k))
    pool = draw(st.sampled_from([None, 1, 2, 3, 8, 'nice']), label='pool')
    seed = draw(st.integers(0, 2**32 - 1), label='seed')
    rng = np.random.default_rng(seed)
    if pool == 'nice':
        A = random_operator(rng, m, k, density)
        A = np.where(A != 0, rng.choice(NICE, size=A.shape), 0.0)
    else:
        A = random_operator(rng, m, k, density, pool)
    return A


@st.composite
def problems(draw, platform, aligne_choices=(None, 1, 2, 4)):
    """(A, beta, dtype, sizes, n, ldb, ldc, seed) of one example."""
    limit = LIMITS[PROFILE][platform]
    A = draw(operators(limit['nnz']))
    beta = draw(st.sampled_from([0.0, 1.0, -1.0, 0.5, 'random']),
                label='beta')
    if beta == 'random':
        # beta*C stays in float32's normal range: a subnormal f32 result
        # holds too few bits for the 1e-5 relative check (none with flush
        # to zero), which rows of A that are zero would see alone
        beta = draw(st.one_of(st.just(0.0), st.floats(
            2**-60, 4, width=32), st.floats(
            -4, -2**-60, width=32)), label='random beta')
    dtype = draw(st.sampled_from([np.float64, np.float32]), label='dtype')
    n = draw(st.integers(1, limit['n']), label='n')
    aligne = draw(st.sampled_from(aligne_choices), label='aligne')
    al = aligne or 1
    ldb = -(-(n + draw(st.integers(0, 9), label='ldb pad')) // al)*al
    ldc = -(-(n + draw(st.integers(0, 9), label='ldc pad')) // al)*al
    baked = draw(st.booleans(), label='baked n')
    sizes = dict(aligne=aligne)
    if baked:
        sizes.update(n=n, ldb=ldb, ldc=ldc)
    seed = draw(st.integers(0, 2**32 - 1), label='panel seed')
    return A, beta, dtype, sizes, n, ldb, ldc, seed


def _pick(data, cands, platform):
    """All candidates (deep) or a drawn subset of them (ci)."""
    cap = LIMITS[PROFILE][platform]['per_example']
    if cap is None or len(cands) <= cap:
        return cands
    idx = data.draw(st.lists(st.integers(0, len(cands) - 1), min_size=1,
                             max_size=cap, unique=True), label='candidates')
    return [cands[i] for i in sorted(idx)]


def check(p, what, rerun):
    """p.check(what); on a wrong result first run the kernel again on the
    same inputs (rerun(b, c) on copies), so that the failure says whether
    it is reproducible or flaky."""
    try:
        p.check(what)
    except AssertionError as e:
        c = _aligned(p.c0full)
        rerun(p.bfull, c)
        again = rel_error(c[:, :p.n], p.ref)
        raise AssertionError(f'{e}; the same kernel on the same inputs '
                             f'again: relative error {again:.3g}') from e


def _describe(A, beta, dtype, sizes, n, ldb, ldc):
    note(f'A {A.shape}, nnz {np.count_nonzero(A)}, beta {beta!r}, '
         f'{np.dtype(dtype).name}, n {n}, ldb {ldb}, ldc {ldc}, '
         f'sizes {sizes}')
    if A.size <= 200:
        note(f'A = {A.tolist()!r}')


def _aligned(x, nbytes=64):
    """A copy of x whose data starts on an nbytes boundary."""
    buf = np.empty(x.nbytes + nbytes, np.uint8)
    off = -buf.ctypes.data % nbytes
    y = buf[off:off + x.nbytes].view(x.dtype).reshape(x.shape)
    y[...] = x
    return y


def panels(rng, A, beta, dtype, n, ldb, ldc):
    """conftest's Panels with B and C starting on a 64-byte boundary, as
    device allocations do (candidates for aligne > 1 rely on it)."""
    p = Panels(rng, A, beta, dtype, n, ldb, ldc)
    p.bfull, p.cfull = _aligned(p.bfull), _aligned(p.cfull)
    p.b, p.c = p.bfull[:, :n], p.cfull[:, :n]
    p.c0full = p.cfull.copy()
    return p


@profile('hip')
@given(problem=problems('hip'),
       arch=st.sampled_from([('gfx942', 64), ('gfx90a', 64),
                             ('gfx1100', 32), ('gfx942', 32)]),
       data=st.data())
def test_hip_candidates_match_numpy(problem, arch, data):
    from gimmik.emulate import run_hip
    from gimmik.hip import HIPMatMul

    A, beta, dtype, sizes, n, ldb, ldc, seed = problem
    _describe(A, beta, dtype, sizes, n, ldb, ldc)
    mm = HIPMatMul(A, beta=beta, **sizes)
    gcn_arch, warp_size = arch
    cands = list(mm.kernels(dtype, gcn_arch=gcn_arch, warp_size=warp_size))
    assert cands, 'no candidate offered'
    TRIED['examples'] += 1
    rng = np.random.default_rng(seed)
    for src, meta in _pick(data, cands, 'hip'):
        event(f'hip {meta["variant"]}')
        p = panels(rng, A, beta, dtype, n, ldb, ldc)
        run_hip(src, meta, p.b, p.c)
        TRIED['kernels'] += 1
        check(p, meta['variant'], lambda b, c: run_hip(
            src, meta, b[:, :n], c[:, :n]))


@profile('c')
@given(problem=problems('c'), data=st.data())
def test_c_candidates_match_numpy(problem, data):
    pytest.importorskip('gimmik.c')
    runtime_c = pytest.importorskip('gimmik.runtime.c')
    from gimmik.c import CMatMul
    from gimmik.runtime import RuntimeUnavailable

    try:
        rt = runtime_c.Runtime()
    except RuntimeUnavailable as e:
        pytest.skip(str(e))
    A, beta, dtype, sizes, n, ldb, ldc, seed = problem
    _describe(A, beta, dtype, sizes, n, ldb, ldc)
    mm = CMatMul(A, beta=beta, **sizes)
    cands = list(mm.kernels(dtype))
    assert cands, 'no candidate offered'
    TRIED['examples'] += 1
    rng = np.random.default_rng(seed)
    for src, meta in _pick(data, cands, 'c'):
        event(f'c {meta["variant"]}')
        p = panels(rng, A, beta, dtype, n, ldb, ldc)
        launch = rt.compile(src, meta)
        launch(p.bfull, p.cfull, n, ldb, ldc)
        TRIED['kernels'] += 1
        check(p, meta['variant'],
              lambda b, c: launch(b, c, n, ldb, ldc))


@profile('generate_mm')
@given(problem=problems('generate_mm', aligne_choices=(None,)),
       data=st.data())
def test_generate_mm_matches_numpy(problem, data):
    """The legacy entry point with alpha folded in: its one kernel, run in
    the executor, matches alpha*A*B + beta*C."""
    import gimmik
    from gimmik.emulate import run_hip
    from gimmik.hip import HIPMatMul

    if not hasattr(gimmik, 'generate_mm'):
        pytest.skip('gimmik.generate_mm has not landed')
    A, beta, dtype, sizes, n, ldb, ldc, seed = problem
    alpha = data.draw(st.sampled_from([1.0, -1.0, 0.5, 3.0]), label='alpha')
    _describe(A, beta, dtype, sizes, n, ldb, ldc)
    sizes = {k: v for k, v in sizes.items() if k != 'aligne'}
    src = gimmik.generate_mm(A, dtype, 'hip', alpha=alpha, beta=beta,
                             funcn='fuzzed_mm', **sizes)
    # the metadata of the same candidate (the first that is not tied to
    # an architecture), to launch it
    src2, meta = next((s, m) for s, m in HIPMatMul(alpha*A, beta=beta,
                                                   **sizes)
                      .kernels(dtype, kname='fuzzed_mm')
                      if not family(m['tplname']).arch_specific)
    assert src == src2
    TRIED['examples'] += 1
    p = panels(np.random.default_rng(seed), alpha*A, beta, dtype, n, ldb,
               ldc)
    run_hip(src, meta, p.b, p.c, kname='fuzzed_mm')
    TRIED['kernels'] += 1
    p.check(meta['variant'])


# Rendering alone is cheap: every candidate of every platform (CUDA too,
# which cannot run here) for many more operators, checked for the launch
# limits and for non-finite literals.
RENDER_EXAMPLES = {'ci': 30, 'deep': 1000}
_NONFINITE = re.compile(r'(?<![A-Za-z0-9_])(inf|nan)f?(?![A-Za-z0-9_])',
                        re.I)
_OPTIONS = {'hip': [dict(gcn_arch='gfx942'), dict(gcn_arch='gfx90a'),
                    dict(gcn_arch='gfx1100', warp_size=32)],
            'cuda': [dict(compute_capability=(9, 0)),
                     dict(compute_capability=(8, 0)),
                     dict(compute_capability=(7, 0))],
            'c': [{}]}


@settings(settings.get_profile(PROFILE),
          max_examples=RENDER_EXAMPLES[PROFILE])
@given(problem=problems('hip'), platform=st.sampled_from(sorted(_OPTIONS)),
       data=st.data())
def test_every_candidate_renders(problem, platform, data):
    import importlib
    mod, cls = {'hip': ('gimmik.hip', 'HIPMatMul'),
                'cuda': ('gimmik.cuda', 'CUDAMatMul'),
                'c': ('gimmik.c', 'CMatMul')}[platform]
    try:
        cls = getattr(importlib.import_module(mod), cls)
    except ModuleNotFoundError:
        pytest.skip(f'{mod} has not landed')
    A, beta, dtype, sizes, n, ldb, ldc, seed = problem
    _describe(A, beta, dtype, sizes, n, ldb, ldc)
    opts = data.draw(st.sampled_from(_OPTIONS[platform]), label='options')
    mm = cls(A, beta=beta, **sizes)
    count = 0
    for src, meta in mm.kernels(dtype, kname='fuzzed_mm', **opts):
        count += 1
        event(f'{platform} {meta["variant"]}')
        assert 'fuzzed_mm' in src
        bad = _NONFINITE.search(src)
        assert not bad, f'{meta["variant"]}: non-finite literal {bad[0]!r}'
        block = meta['block']
        assert 1 <= block[0]*block[1]*block[2] <= 1024, meta
        assert 0 <= meta['shared'] <= 64*1024 or platform == 'cuda', meta
        assert (meta['m'], meta['k']) == A.shape
    assert count, 'no candidate offered'
    TRIED['rendered'] = TRIED.get('rendered', 0) + count


@settings(settings.get_profile(PROFILE),
          max_examples=RENDER_EXAMPLES[PROFILE])
@given(A=operators(4000), shape=st.sampled_from(['m8n8k4', 'm16n8k4',
                                                'm16n8k8', 'm16n8k16']),
       mwarps=st.sampled_from([1, 2]), nwarps=st.sampled_from([1, 2]),
       wm=st.sampled_from([1, 2]), wn=st.sampled_from([2, 4]),
       kstage=st.sampled_from([1, 2]), skip=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_cuda_mma_gemm_bake_model_matches_numpy(A, shape, mwarps, nwarps, wm,
                                                wn, kstage, skip, seed):
    """CUDA's mma-gemm cannot run on silicon here: its bake, evaluated one
    mma at a time by the NumPy model of the instruction, must give A @ B."""
    mma = pytest.importorskip('gimmik.fragments.mma')
    plan = mma.gemm_plan(A, shape, mwarps, nwarps, wm, wn, kstage, 2,
                         skip=skip)
    B = np.random.default_rng(seed).standard_normal((A.shape[1],
                                                     plan.BN + 3))
    ref = A @ B
    got = mma.gemm_reference(plan, A, B)
    assert got.shape == ref.shape
    assert np.abs(got - ref).max() <= 1e-13*max(np.abs(ref).max(), 1e-300)


@settings(settings.get_profile(PROFILE),
          max_examples=RENDER_EXAMPLES[PROFILE])
@given(A=operators(4000), ncols=st.sampled_from([16, 32, 48]),
       seed=st.integers(0, 2**32 - 1))
def test_mfma_bake_model_matches_numpy(A, ncols, seed):
    """The MFMA fragment bake, multiplied out with the NumPy model of
    v_mfma_f64_16x16x4f64, gives A @ B."""
    fragments = pytest.importorskip('gimmik.fragments.mfma')
    B = np.random.default_rng(seed).standard_normal((A.shape[1], ncols))
    ref = A @ B
    got = fragments.model_product(fragments.bake_mfma(A), B)[:A.shape[0]]
    assert np.abs(got - ref).max() <= 1e-13*max(np.abs(ref).max(), 1e-300)


def test_report_counts():
    """Prints how many fuzz examples and kernel runs this session made (run
    last in the file; shown with -s)."""
    print(f'\nfuzz ({PROFILE}): {TRIED["examples"]} examples, '
          f'{TRIED["kernels"]} kernel runs, '
          f'{TRIED.get("rendered", 0)} candidates rendered')
