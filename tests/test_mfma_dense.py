"""The HIP mfma-dense family: its gate, launch limits, numerics in the CPU
executor (whose MFMA builtin is checked against the facts-document layout
first) and, where clang is installed, the real AMDGPU ISA it compiles to."""

import numpy as np
import pytest

from conftest import Panels, full_run, random_operator, rel_error
from gimmik.analysis import DENSE_DENSITY
from gimmik.base import Candidate
from gimmik.families.mfma_dense import MfmaDense
from gimmik.emulate import EmulatorError, run_hip
from gimmik.fragments.mfma import (MIN_SPLIT_LOADS, WAVE, block_loads,
                                   code_paths, kernel_mfmas,
                                   mfma_f64_16x16x4)
from gimmik.families.mfma_dense import waves as mfma_dense_waves
from gimmik.hip import MFMA_ARCHS, HIPMatMul

BETAS = (0.0, 1.0, 0.5)


def mfma_rows(A, beta=0.0, aligne=2, arch='gfx942', dtype=np.float64,
              **sizes):
    """The generator and its mfma-dense Candidates (nothing rendered)."""
    mm = HIPMatMul(A, beta=beta, aligne=aligne, **sizes)
    return mm, [c for c in mm._candidates(dtype, arch, 64)
                if c.family == 'mfma-dense']


def mfma_plan(mm, params):
    """The MfmaPlan of an mfma-dense candidate of generator mm."""
    return mm.kernel(Candidate('mfma-dense', params), np.float64).plan


def mfma_candidates(A, beta=0.0, aligne=2, arch='gfx942', **sizes):
    """(src, meta) of every mfma-dense candidate, in offering order."""
    mm, cands = mfma_rows(A, beta, aligne, arch, **sizes)
    return [mm.render(c, np.float64) for c in cands]


def pyfr_dense(pattern='*'):
    """The PyFR operators the gate admits (skips when the suite is absent)."""
    ops = pytest.importorskip('gimmik.operators')
    try:
        suite = ops.suite(pattern)
    except (OSError, ValueError) as e:
        pytest.skip(f'no PyFR operator suite: {e}')
    return {k: A for k, A in suite.items()
            if (A != 0).mean() >= DENSE_DENSITY}


def run_checked(rng, A, beta, src, meta, n, ldb, ldc):
    p = Panels(rng, A, beta, np.float64, n, ldb, ldc)
    run_hip(src, meta, p.b, p.c)
    p.check(meta['variant'])


# -- the executor's MFMA builtin --------------------------------------------
_MFMA_PROBE = '''
typedef double probe_v4d __attribute__((vector_size(32)));
extern "C" __global__ void __launch_bounds__(128)
gimmik_mm(const double* __restrict__ b, double* __restrict__ c)
{
    const int L = threadIdx.x, w = threadIdx.y;
    probe_v4d acc;
    for (int v = 0; v < 4; v++)
        acc[v] = c[(4*w + v)*64 + L];
    if (DIVERGE)
        acc = __builtin_amdgcn_mfma_f64_16x16x4f64(b[2*w*64 + L],
                                                   b[(2*w + 1)*64 + L],
                                                   acc, 0, 0, 0);
    for (int v = 0; v < 4; v++)
        c[(4*w + v)*64 + L] = acc[v];
}
'''
_PROBE_META = {'dtype': 'float64', 'args': ('b', 'c'), 'k': 4, 'm': 8,
               'n': 64, 'ldb': 64, 'ldc': 64, 'block': (64, 2, 1),
               'width': 1, 'aligne': None, 'tplname': 'probe'}


def test_executor_mfma_matches_facts_layout(rng):
    # Small integers: exact whatever the order of the sums.  Two wavefronts
    # with different operands, so a mix-up between waves shows too.
    b = rng.integers(-8, 9, (4, 64)).astype(float)
    c = rng.integers(-8, 9, (8, 64)).astype(float)
    want = np.vstack([mfma_f64_16x16x4(b[2*w], b[2*w + 1], c[4*w:4*w + 4].T).T
                      for w in range(2)])
    # The facts document directly: element v of lane L is D[4v + g][t]
    for w in range(2):
        Am = np.array([[b[2*w, 16*kk + r] for kk in range(4)]
                       for r in range(16)])
        Bm = b[2*w + 1].reshape(4, 16)
        D = Am @ Bm
        for L in range(WAVE):
            for v in range(4):
                assert want[4*w + v, L] == c[4*w + v, L] + \
                    D[4*v + L // 16, L % 16]
    run_hip(_MFMA_PROBE.replace('DIVERGE', '1'), _PROBE_META, b, c)
    assert np.array_equal(c, want)


def test_executor_reports_divergent_mfma(rng):
    b = rng.standard_normal((4, 64))
    c = np.zeros((8, 64))
    src = _MFMA_PROBE.replace('DIVERGE', 'L < 32')
    with pytest.raises(EmulatorError, match='divergent MFMA: 32 of the 64'):
        run_hip(src, _PROBE_META, b, c)


# -- the gate ----------------------------------------------------------------
@pytest.mark.parametrize('arch', sorted(MFMA_ARCHS) +
                         ['gfx942:sramecc+:xnack-', 'gfx90a:xnack+'])
def test_gate_admits_cdna_f64_dense(rng, arch):
    A = random_operator(rng, 40, 20, 1.0)
    assert mfma_candidates(A, arch=arch)


@pytest.mark.parametrize('arch,dtype,density,warp', [
    ('gfx942', 'float32', 1.0, 64),      # f64 instruction only
    ('gfx908', 'float64', 1.0, 64),      # MI100: no f64 MFMA
    ('gfx1100', 'float64', 1.0, 64),     # RDNA: no MFMA
    ('gfx1030', 'float64', 1.0, 32),
    ('gfx906', 'float64', 1.0, 64),
    ('gfx942', 'float64', 0.3, 64),      # sparse: streaming families win
    ('gfx942', 'float64', 1.0, 32),      # the layout is wave64's
])
def test_gate_refuses(rng, arch, dtype, density, warp):
    A = random_operator(rng, 40, 20, density)
    while (A != 0).mean() >= DENSE_DENSITY and density < DENSE_DENSITY:
        A = random_operator(rng, 40, 20, density)
    mm = HIPMatMul(A, aligne=2)
    fams = {m['tplname'] for _, m in mm.kernels(dtype, gcn_arch=arch,
                                                warp_size=warp)}
    assert 'mfma-dense' not in fams and fams


def test_gate_density_threshold():
    A = np.ones((32, 8))
    A[:, ::2] = 0                        # density exactly 0.5: admitted
    assert mfma_candidates(A)
    A[0, 1] = 0                          # just below
    assert not mfma_candidates(A)


def test_vec2_needs_even_aligne(rng):
    A = random_operator(rng, 40, 20, 1.0)
    for aligne, vec in ((2, 2), (4, 2), (3, 1), (None, 1)):
        vs = {m['params']['vec'] for _, m in mfma_candidates(A, aligne=aligne)}
        assert vs == {vec}


# -- launch limits ------------------------------------------------------------
def test_launch_limits_and_msplit_cap():
    for m, k in ((16, 4), (40, 20), (420, 161), (140, 420), (250, 400)):
        A = np.ones((m, k))
        mtiles = -(-m // 16)
        mm, cands = mfma_rows(A)
        # 420 rows: 7 m-tiles per wavefront at msplit 4, too many
        # accumulators for two waves per SIMD
        assert bool(cands) == (m != 420)
        for cand in cands:
            g = mm.kernel(cand, np.float64).geometry()
            (bx, by, bz), shared, width = g.block, g.shared, g.width
            p = cand.params
            assert (bx, bz, width) == (64, 1, 1) and bx*by <= 1024
            assert by == p['msplit'] <= min(4, mtiles)
            assert shared <= 16*1024
            assert -(-mtiles // by) <= 8       # accumulators fit the AGPRs
            assert mfma_dense_waves(mtiles, p) >= 2
            if by == 1:
                assert shared == 0 and 'kchunk' not in p
            if m*k < 10_000:
                assert mfma_plan(mm, p).lds_bytes == shared
        assert len({c.variant for c in cands}) == len(cands)


def test_c_read_needs_more_registers():
    # 5 m-tiles on one wavefront: 168 AGPRs; with beta*C read the arch
    # VGPRs reach ARCH_VGPRS_C_READ and two waves per SIMD no longer fit
    A = np.ones((80, 40))
    direct = {c.variant for c in mfma_rows(A)[1]
              if c.params['msplit'] == 1}
    assert direct
    assert not any(c.params['msplit'] == 1 for c in mfma_rows(A, 1.0)[1])
    assert mfma_dense_waves(5, dict(msplit=1)) == 2
    assert mfma_dense_waves(5, dict(msplit=1), c_read=True) == 1


# -- numerics in the executor -------------------------------------------------
def _cases(ns):
    """(beta, baked n, n) cases that cycle through every beta, baked and
    runtime n and every n of ns."""
    count = max(6, len(ns))
    return [(BETAS[i % 3], i % 2 == 1, ns[i % len(ns)]) for i in range(count)]


def _sweep(rng, A, aligne, cases, every=False):
    """Run the mfma-dense candidates for A in the executor: each one with
    the case of its index (mod the number of cases), or, with every, each
    one with every case.  Returns the number of runs."""
    runs = 0
    for i, (beta, baked, n) in enumerate(cases):
        ld = n + 3 if aligne is None else (n // aligne + 1)*aligne
        sizes = dict(n=n, ldb=ld, ldc=ld) if baked else {}
        for j, (src, meta) in enumerate(
                mfma_candidates(A, beta, aligne, **sizes)):
            if every or j % len(cases) == i:
                run_checked(rng, A, beta, src, meta, n, ld, ld)
                runs += 1
    return runs


def test_random_dense_operator(rng):
    # 3 m-tiles (msplit capped at 3), 41 used columns: 11 k-tiles, three
    # chunks of 4, and 3 padding rows in the last k-tile
    A = random_operator(rng, 37, 42, 0.9)
    A[:, 3] = 0                         # an unused B row: compaction
    A[16:32, 4:12] = 0                  # all-zero tiles
    assert _sweep(rng, A, None, _cases((64, 101, 130))) == 7


def test_pyfr_dense_subset(rng):
    # p2-pyr-m6 is 42 x 33 at density 0.58: zero tiles, 9 k-tiles
    ops = pyfr_dense('p2-pyr-m6')
    assert _sweep(rng, ops['p2-pyr-m6'], 2, _cases((70, 128, 151))) == 7


# (params, beta, n baked, n): every path of the steps (msplit 1..4, pipe
# 0..2, one and two LDS buffers, scalar and double2 loads), C's runs with
# beta 0, 1 and -0.5, n a multiple of 64 (one copy of the steps) and
# ragged (the copy for the block at column n - 1), baked and at run time
STEP_CASES = [
    (dict(msplit=1, pipe=0, vec=2), 1.0, True, 128),
    (dict(msplit=1, pipe=1, vec=2), -0.5, False, 101),
    (dict(msplit=1, pipe=1, vec=1), 0.0, True, 99),
    (dict(msplit=2, pipe=0, nbuf=1, kchunk=8, vec=2), -0.5, True, 75),
    (dict(msplit=2, pipe=1, nbuf=2, kchunk=2, vec=1), 1.0, False, 64),
    (dict(msplit=3, pipe=2, nbuf=2, kchunk=4, vec=2), 1.0, False, 157),
    (dict(msplit=4, pipe=1, nbuf=2, kchunk=4, vec=2), 0.0, True, 192),
    (dict(msplit=4, pipe=0, nbuf=1, kchunk=1, vec=1), -0.5, False, 33),
]


@pytest.mark.parametrize('params,beta,baked,n', STEP_CASES)
def test_steps_in_the_executor(rng, params, beta, baked, n):
    # 70 x 45: 5 m-tiles (rows past m in the last), an unused B row, zero
    # tiles and a k-tile with padding rows
    A = random_operator(rng, 70, 46, 0.95)
    A[:, 7] = 0
    A[16:32, 8:16] = 0
    aligne = 2 if params['vec'] == 2 else None
    ld = n + 2 if baked else n + 3
    ld += ld % 2 if aligne else 0
    sizes = dict(n=n, ldb=ld, ldc=ld) if baked else {}
    mm = HIPMatMul(A, beta=beta, aligne=aligne, **sizes)
    cand = Candidate('mfma-dense', params, {'gcn_arch': 'gfx942',
                                            'warp_size': 64})
    src, meta = mm.render(cand, np.float64)
    assert ('if (full)' in src) == (not baked or n % 64 != 0)
    run_checked(rng, A, beta, src, meta, n, ld, ld)


@pytest.mark.parametrize('beta', BETAS)
def test_small_kernel_one_guarded_copy(rng, beta):
    """A block issuing fewer than MIN_SPLIT_LOADS loads: one copy of the
    steps (clamped loads, guarded stores) for every block where n is not
    a multiple of 64, exact at ragged n baked and at run time; two copies
    (full and ragged) where it issues more."""
    A = random_operator(rng, 12, 6, 1.0)    # 1 m-tile, 2 k-tiles
    params = dict(msplit=1, pipe=0, vec=2)
    mm = HIPMatMul(A, beta=beta, aligne=2)
    plan = mfma_plan(mm, params)
    # 2 fragments, B rows of 2 k-tiles in two 16-byte loads each, C's old
    # values of the lane's 3 rows g, g + 4, g + 8 (beta != 0)
    assert block_loads(plan, beta) == 2 + 2*2 + (6 if beta else 0)
    assert code_paths(None, plan, beta) == (False,)
    assert code_paths(99, plan, beta) == (False,)
    assert code_paths(128, plan, beta) == (True,)
    big = mfma_plan(HIPMatMul(random_operator(rng, 70, 46, 0.95),
                              beta=beta, aligne=2), params)
    assert block_loads(big, beta) >= MIN_SPLIT_LOADS
    assert code_paths(None, big, beta) == (True, False)
    cand = Candidate('mfma-dense', params, {'gcn_arch': 'gfx942',
                                            'warp_size': 64})
    # n odd, rows one column longer (the tightest even stride): the pair
    # holding column n - 1 is loaded whole, column n from the padding
    for n, baked in ((99, True), (101, False)):
        ld = n + 1
        sizes = dict(n=n, ldb=ld, ldc=ld) if baked else {}
        src, meta = HIPMatMul(A, beta=beta, aligne=2, **sizes).render(
            cand, np.float64)
        assert 'if (full)' not in src and '_ld4r(' in src
        run_checked(rng, A, beta, src, meta, n, ld, ld)


def test_misbaked_fragment_is_caught(rng, monkeypatch):
    A = random_operator(rng, 40, 20, 1.0)
    plan0 = MfmaDense.build_plan

    def swapped(self):
        plan = plan0(self)
        y, s = 0, 1
        assert plan.frags[y, s, 6] != plan.frags[y, s, 22]
        plan.frags[y, s, [6, 22]] = plan.frags[y, s, [22, 6]]
        return plan

    monkeypatch.setattr(MfmaDense, 'build_plan', swapped)
    cands = mfma_candidates(A, beta=0.5)
    picks = [cands[0], next(c for c in cands if c[1]['block'][1] == 1)]
    for src, meta in picks:              # LDS path, direct path
        p = Panels(rng, A, 0.5, np.float64, 96)
        run_hip(src, meta, p.b, p.c)
        assert rel_error(p.c, p.ref) > 1e-6, meta['variant']


def test_uninitialised_lds_never_poisons(rng):
    # k = 10 used columns: the last k-tile has two padding rows, which must
    # be zero-filled in LDS (the executor fills LDS with NaN).
    A = random_operator(rng, 48, 10, 1.0)
    # a candidate staging B in LDS with msplit 4 capped at A's 3 m-tiles,
    # wherever the offering order puts it
    lds = [(s, m) for s, m in mfma_candidates(A, aligne=None)
           if m['params']['msplit'] == 3]
    assert lds
    src, meta = lds[0]
    run_checked(rng, A, 0.0, src, meta, 80, 80, 80)


@pytest.mark.full
@pytest.mark.parametrize('beta', BETAS)
def test_pyfr_dense_full(rng, beta):
    for name, A in sorted(pyfr_dense().items()):
        for aligne in (2, None):
            cases = [(beta, baked, 100) for baked in (False, True)]
            assert _sweep(rng, A, aligne, cases, every=True), name


# -- the real ISA (clang's AMDGPU back end, no GPU) ---------------------------
def _inspect_or_skip():
    isa = pytest.importorskip('gimmik.isa')
    from gimmik.runtime import RuntimeUnavailable
    try:
        isa.find_clang()
    except RuntimeUnavailable as e:
        pytest.skip(str(e))
    return isa.inspect


@pytest.mark.parametrize('arch', ['gfx942', 'gfx90a'])
def test_isa_mfma_count_no_scratch(rng, arch):
    inspect = _inspect_or_skip()
    A = random_operator(rng, 70, 45, 0.95)
    mm = HIPMatMul(A, beta=0.5, aligne=2)
    for src, meta in mfma_candidates(A, beta=0.5, arch=arch):
        rep = inspect(src, arch)
        plan = mfma_plan(mm, meta['params'])
        assert rep['mfma'] == kernel_mfmas(plan, None, 0.5), meta['variant']
        assert rep['scratch_bytes'] == 0 and rep['vgpr_spills'] == 0
        assert rep['lds_bytes'] == meta['shared']
        assert rep['nt_stores'] > 0
        assert 16 in rep['global_loads'] and 16 in rep['global_stores']


@pytest.mark.full
@pytest.mark.parametrize('arch', ['gfx942', 'gfx90a'])
def test_isa_pyfr_full(arch):
    inspect = _inspect_or_skip()
    for name, A in sorted(pyfr_dense().items()):
        for aligne in (2, None):
            mm, cands = mfma_rows(A, 1.0, aligne, arch)
            for cand in cands:
                src, meta = mm.render(cand, np.float64)
                rep = inspect(src, arch)
                what = f'{name} {meta["variant"]}'
                assert rep['mfma'] == kernel_mfmas(
                    mfma_plan(mm, cand.params), meta['n'], 1.0), what
                assert rep['scratch_bytes'] == 0, what
                assert rep['lds_bytes'] == meta['shared'] <= 64*1024, what


def test_hiprtc_compiles_candidates(rng, tmp_path, request):
    """hiprtc (what PyFR compiles with) accepts the candidates for gfx90a
    (an LDS-path and the direct-path one; all of them with --full); where
    llvm-objdump-19 is installed, the code object holds the planned number
    of MFMAs."""
    import shutil
    import subprocess

    hiprtc = pytest.importorskip('gimmik.hiprtc')
    from gimmik.runtime import RuntimeUnavailable
    A = random_operator(rng, 40, 22, 0.9)
    objdump = shutil.which('llvm-objdump-19')
    every = full_run(request.config)
    for aligne in (2, None) if every else (2,):
        mm, cands = mfma_rows(A, 0.5, aligne, 'gfx90a')
        if not every:
            cands = [cands[0], next(c for c in cands
                                    if c.params['msplit'] == 1)]
        for cand in cands:
            src, meta = mm.render(cand, np.float64)
            try:
                code = hiprtc.compile_hip(src, 'gfx90a')
            except RuntimeUnavailable as e:
                pytest.skip(str(e))
            if objdump:
                obj = tmp_path / 'k.o'
                obj.write_bytes(code)
                dis = subprocess.run([objdump, '-d', '--mcpu=gfx90a',
                                      str(obj)], capture_output=True,
                                     text=True, check=True).stdout
                assert dis.count('v_mfma_f64_16x16x4') == kernel_mfmas(
                    mfma_plan(mm, cand.params), None, 0.5), meta['variant']
