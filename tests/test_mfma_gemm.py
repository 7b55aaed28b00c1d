"""The HIP mfma-gemm family (gimmik/fragments/mfma_tiled.py,
gimmik/families/mfma_gemm.py): its plan against a NumPy
model of the kernel, its gate and place in the HIP table, exact results in
the CPU executor (ragged n, padded ldb and ldc, beta 0/1/other, baked and
runtime n; A reordered), a mis-baked kernel and one ignoring a row table
caught, and, where clang-19 and hiprtc are
installed, the real AMDGPU code: at least two waves per SIMD, no scratch.

With --full: the ISA of every MFMA candidate (mfma-dense and mfma-gemm) of
every dense operator of the PyFR suite, on gfx942 and gfx90a."""

import numpy as np
import pytest

from conftest import (Panels, full_run, kron_like, prism_like, random_operator,
                      rel_error)
from gimmik.fragments import mfma_tiled as mg
from gimmik.analysis import DENSE_DENSITY
from gimmik.base import Candidate
from gimmik.families.mfma_dense import MfmaDense
from gimmik.families.mfma_gemm import MfmaGemm
from gimmik.emulate import run_hip
from gimmik.verify import reference
from gimmik.hip import (CANDIDATES, MFMA_COMPACT_ROWS, MFMA_GEMM_ROWS,
                        MFMA_SPARSE_ROWS,
                        HIPMatMul)

ARCHES = ('gfx942', 'gfx90a')
MFMA_FAMILIES = (MfmaDense.name, MfmaGemm.name)

# Parameter sets of the plan tests (any operator shape)
PARAMS = [dict(mwaves=2, nwaves=2, wm=2, wn=4, kstage=2),
          dict(mwaves=1, nwaves=1, wm=3, wn=2, kstage=1),
          dict(mwaves=4, nwaves=1, wm=1, wn=2, kstage=3)]
# ... that reach two waves per SIMD on a single m-tile
SMALL = [dict(mwaves=1, nwaves=2, wm=1, wn=4, kstage=1),
         dict(mwaves=1, nwaves=1, wm=3, wn=2, kstage=1)]


def gemm_candidates(A, beta=0.0, aligne=2, arch='gfx942', **sizes):
    """The generator and its mfma-gemm Candidates (nothing rendered)."""
    mm = HIPMatMul(A, beta=beta, aligne=aligne, **sizes)
    return mm, [c for c in mm._candidates(np.float64, arch, 64)
                if c.family == MfmaGemm.name]


def forced(A, params, beta=0.0, aligne=2, **sizes):
    """The generator and one mfma-gemm Candidate, for operators the gate
    does not offer the family for (m and k at most mg.MIN_DIM)."""
    mm = HIPMatMul(A, beta=beta, aligne=aligne, **sizes)
    p = MfmaGemm.adapt(mm, dict(params, vec=2 if mm.width2_ok() else 1))
    return mm, Candidate(MfmaGemm.name, p, {'gcn_arch': 'gfx942',
                                            'warp_size': 64})


def pyfr_dense(pattern='*'):
    ops = pytest.importorskip('gimmik.operators')
    try:
        suite = ops.suite(pattern)
    except (OSError, ValueError) as e:
        pytest.skip(f'no PyFR operator suite: {e}')
    return {k: A for k, A in suite.items()
            if (A != 0).mean() >= DENSE_DENSITY}


def run_case(rng, mm, cand, A, beta, n, pad):
    """Run one candidate in the executor on fresh panels (n columns, row
    strides n + pad rounded up to the alignment) and check it."""
    al = mm.aligne or 1
    ld = -(-(n + pad) // al)*al
    if mm.baked_n:
        n, ld = mm.n, mm.ldb
    src, meta = mm.render(cand, np.float64)
    p = Panels(rng, A, beta, np.float64, n, ld, ld)
    run_hip(src, meta, p.b, p.c)
    p.check(meta['variant'])
    return meta


# -- the plan and its NumPy model -------------------------------------------
@pytest.mark.parametrize('params', PARAMS)
@pytest.mark.parametrize('m,k', [(37, 45), (150, 20), (16, 130)])
def test_model_matches_numpy(rng, m, k, params):
    A = random_operator(rng, m, k, 0.8)
    A[:16, 8:20] = 0                      # a zero slab (skipped stages)
    P = mg.plan(A, **params)
    for n in (1, 45, P.block_n + 3):
        B = rng.standard_normal((k, n))
        C = mg.model_product(P, B)
        assert rel_error(C, *reference(A, B)) <= 1e-13


def test_model_catches_a_misbake(rng):
    A = random_operator(rng, 40, 30, 1.0)
    P = mg.plan(A, **PARAMS[0])
    P.table[[3, 19]] = P.table[[19, 3]]   # lanes 3 and 19 of one fragment
    B = rng.standard_normal((30, 70))
    assert rel_error(mg.model_product(P, B), A @ B) > 1e-6


def test_table_layout(rng):
    A = random_operator(rng, 50, 27, 1.0)
    P = mg.plan(A, mwaves=2, nwaves=1, wm=1, wn=2, kstage=2)
    assert (P.m_blocks, P.wm, P.block_m, P.block_k) == (2, 1, 32, 8)
    assert (P.stages, P.slots, P.all_live) == (4, 4, True)
    # lane L = 16g + t of m-tile i, wavefront row wy, k-step ks, stage st
    # of m-block mb: A[16*(2*mb + wy + i) + t][8*st + 4*ks + g]
    for mb, st, wy, ks, L in ((0, 0, 0, 0, 5), (1, 3, 1, 1, 63),
                              (1, 2, 0, 1, 17)):
        g, t = divmod(L, 16)
        row, col = 16*(2*mb + wy) + t, 8*st + 4*ks + g
        want = A[row, col] if row < 50 and col < 27 else 0.0
        off = (mb*P.slots + st)*P.slot_size + P.a_offset(wy, ks, 0) + L
        assert P.table[off] == want


def test_zero_slabs_are_skipped():
    A = np.ones((64, 40))
    A[:32, 8:24] = 0                      # m-block 0, stages 1 and 2
    P = mg.plan(A, mwaves=2, nwaves=1, wm=1, wn=2, kstage=2)
    assert P.live_count.tolist() == [3, 5] and P.slots == 5
    assert P.live_stages[0, :3].tolist() == [0, 3, 4]
    assert not P.all_live
    A[32:] = 0                            # m-block 1: nothing to do
    P = mg.plan(A, mwaves=2, nwaves=1, wm=1, wn=2, kstage=2)
    assert P.live_count.tolist() == [3, 0]
    assert not mg.model_product(P, np.ones((40, 5)))[32:].any()


def test_geometry_spreads_mtiles():
    # 27 m-tiles, 8 per m-block: 4 m-blocks, wm stays 4
    g = mg.geometry_of(420, 140, mwaves=2, nwaves=2, wm=4, wn=4, kstage=1)
    assert (g['m_blocks'], g['wm'], g['block_m'], g['block_n']) == \
        (4, 4, 128, 128)
    g = mg.geometry_of(150, 40, mwaves=2, nwaves=2, wm=4, wn=4, kstage=1)
    assert (g['m_blocks'], g['wm']) == (2, 3)    # 10 m-tiles: 2 x 2 x 3
    assert g['lds_bytes'] == 2*8*(96*4 + 4*(128 + mg.B_ROW_PAD))


@pytest.mark.parametrize('bad', [dict(wn=3), dict(wn=0), dict(wm=0),
                                 dict(kstage=0), dict(mwaves=17),
                                 dict(vec=3)])
def test_bad_parameters(bad):
    p = dict(PARAMS[0], **bad)
    with pytest.raises(ValueError):
        mg.geometry_of(100, 100, **p)


def test_waves_rule():
    # the facts document's examples (gfx942 Occupancy): 112 -> 4, 208 -> 2,
    # 440 -> 1; AccumOffset rounds the arch VGPRs up to 4
    assert mg.waves_per_simd(112, 0) == 4
    assert mg.waves_per_simd(80, 128) == 2
    assert mg.waves_per_simd(208, 232) == 1
    assert mg.waves_per_simd(129, 128) == 1       # 132 + 128 = 260
    # LDS: 25 KiB blocks of 4 wavefronts, 2 per CU -> 2 waves per SIMD
    assert mg.waves_per_simd(100, 0, 25*1024, 4) == 2


# -- gate and table ----------------------------------------------------------
def test_gate(rng):
    A = random_operator(rng, 140, 30, 1.0)
    assert gemm_candidates(A)[1]
    assert gemm_candidates(A, arch='gfx90a')[1]
    assert not gemm_candidates(A[:128])[1]             # m, k <= 128
    assert gemm_candidates(A.T.copy())[1]              # k > 128
    mm = HIPMatMul(A, aligne=2)
    for dtype, arch in (('float32', 'gfx942'), ('float64', 'gfx908'),
                        ('float64', 'gfx1100')):
        fams = {m['tplname'] for _, m in mm.kernels(dtype, gcn_arch=arch)}
        assert MfmaGemm.name not in fams and fams
    sparse = random_operator(rng, 140, 30, 0.3)
    assert not gemm_candidates(sparse)[1]


def test_table_order(rng):
    # mfma-dense fits: its rows come first; 420 rows: it does not (7+
    # m-tiles per wavefront), so mfma-gemm leads
    def fams(A):
        mm = HIPMatMul(A, aligne=2)
        return [c.family for c in mm._candidates(np.float64, 'gfx942', 64)
                if c.family in MFMA_FAMILIES]
    small = fams(random_operator(rng, 140, 40, 1.0))
    assert small[0] == MfmaDense.name and MfmaGemm.name in small
    big = fams(random_operator(rng, 420, 40, 1.0))
    assert big[0] == MfmaGemm.name
    assert [r for r in CANDIDATES if r.family is MfmaGemm] == \
        MFMA_GEMM_ROWS + MFMA_SPARSE_ROWS + MFMA_COMPACT_ROWS


def test_meta_and_grid(rng):
    A = random_operator(rng, 150, 40, 1.0)
    mm, cands = gemm_candidates(A, n=300, ldb=300, ldc=300)
    for cand in cands:
        src, meta = mm.render(cand, np.float64)
        P = mg.plan(A, **cand.params)
        assert meta['cols_per_block'] == P.block_n
        assert meta['row_groups'] == P.m_blocks
        assert meta['grid'] == (P.m_blocks*-(-300 // P.block_n), 1, 1)
        assert meta['block'] == P.block and meta['shared'] == P.lds_bytes
        assert f'amdgpu_waves_per_eu({mg.MIN_WAVES})' in src
        assert mg.waves_estimate(cand.params, 150, 40) >= mg.MIN_WAVES


# -- exact in the executor ---------------------------------------------------
# (beta, baked n, n past whole tiles, row padding): either half has every
# beta, baked and runtime n
CASES = [(0.0, False, 9, 3), (1.0, True, 1, 0), (-0.5, False, 33, 6),
         (0.0, True, 70, 2), (1.0, False, 0, 5), (-0.5, True, 5, 1)]
HALF1, HALF2 = CASES[:3], CASES[3:]


def _sweep(rng, A, cands_of, aligne, cases):
    """Run candidate j of A with case j (mod the cases) and every case once
    (with the first candidate where there are fewer candidates)."""
    runs = 0
    for i, (beta, baked, extra, pad) in enumerate(cases):
        mm0, cands = cands_of(A, beta, aligne)
        n = cands[0].params['nwaves']*cands[0].params['wn']*16 + extra
        al = aligne or 1
        ld = -(-(n + pad) // al)*al
        sizes = dict(n=n, ldb=ld, ldc=ld) if baked else {}
        mm, cands = cands_of(A, beta, aligne, **sizes)
        for j, cand in enumerate(cands):
            if j % len(cases) == i or (j == 0 and i >= len(cands)):
                run_case(rng, mm, cand, A, beta, n, pad)
                runs += 1
    return runs


def _offered(A, beta, aligne, **sizes):
    return gemm_candidates(A, beta, aligne, **sizes)


def test_random_big(rng):
    # m > 128 with a zero slab, zero rows from 128 on (an m-block of 64 or
    # 128 rows with no live stage: C = beta*C there) and k not a multiple
    # of the stage
    A = random_operator(rng, 150, 37, 0.9)
    A[:64, 8:16] = 0
    A[128:] = 0
    assert _sweep(rng, A, _offered, 2, HALF1) >= 3


def test_random_big_k_scalar(rng):
    # k > 128, odd strides (scalar accesses)
    A = random_operator(rng, 20, 131, 0.9)
    assert _sweep(rng, A, _offered, None, HALF2) >= 3


def test_random_small_forced(rng):
    # the family on an operator it is not offered for (one m-tile, k 10)
    A = random_operator(rng, 13, 10, 1.0)

    def cands_of(A, beta, aligne, **sizes):
        mm, c1 = forced(A, SMALL[0], beta, aligne, **sizes)
        _, c2 = forced(A, SMALL[1], beta, aligne, **sizes)
        return mm, [c1, c2]
    assert _sweep(rng, A, cands_of, 2, CASES[1:4]) >= 3


@pytest.mark.parametrize('name,cases', [('p5-tet-m6', HALF2),
                                        ('p4-pyr-m460', HALF1)])
def test_pyfr_operators(rng, name, cases):
    # 168 x 84 at density 0.5 (zero slabs), 165 x 55
    A = pyfr_dense(name)[name]
    assert _sweep(rng, A, _offered, 2, cases) >= 3


def test_misbaked_kernel_fails(rng, monkeypatch):
    A = random_operator(rng, 140, 20, 1.0)
    plan0 = mg.plan

    def swapped(*a, **kw):
        P = plan0(*a, **kw)
        P.table[[6, 22]] = P.table[[22, 6]]
        return P
    monkeypatch.setattr(mg, 'plan', swapped)
    mm, cands = gemm_candidates(A, beta=0.5)
    src, meta = mm.render(cands[0], np.float64)
    p = Panels(rng, A, 0.5, np.float64, 40)
    run_hip(src, meta, p.b, p.c)
    assert rel_error(p.c, p.ref) > 1e-6


# -- sparse operators, A reordered --------------------------------------------
# The sparse rows' tilings (64 and 128 columns a block: the B row table
# read for two rows and for one row a wavefront)
REORDERED = [{k: v for k, v in r.params.items() if k not in ('vec', 'reorder')}
             for r in MFMA_SPARSE_ROWS if r.params['vec'] == 2]


def sparse_kron(rng):
    """A prism-like sparse operator: 6 blocks of 50 x 16 (4800 non-zeros,
    density 0.17), rows and columns shuffled."""
    return kron_like(rng, 300, 100, blocks=6, bk=16)


def _rows_cands(rows):
    """cands_of(A, beta, aligne, **sizes): the generator and the mfma-gemm
    Candidates of the table rows `rows` of A's width (kept where adapt
    keeps them; the table offers them where beta is 0, the kernel is exact
    for any beta)."""
    def cands_of(A, beta, aligne, **sizes):
        mm = HIPMatMul(A, beta=beta, aligne=aligne, **sizes)
        vec = 2 if mm.width2_ok() else 1
        params = [MfmaGemm.adapt(mm, dict(r.params, vec=vec))
                  for r in rows if r.params['vec'] == vec]
        return mm, [Candidate(MfmaGemm.name, p, {'gcn_arch': 'gfx942',
                                                 'warp_size': 64})
                    for p in params if p is not None]
    return cands_of


# A reordered: the 'mfmasparse' rows
_reordered = _rows_cands(MFMA_SPARSE_ROWS)


def test_sparse_gate(rng):
    A = sparse_kron(rng)
    ids = {r.id for r in MFMA_SPARSE_ROWS if r.params['vec'] == 2}
    assert len(ids) == len(REORDERED)
    for arch, ws, dtype, offered in [('gfx942', 64, np.float64, True),
                                     ('gfx90a:sramecc+:xnack-', 64,
                                      np.float64, True),
                                     ('gfx942', 64, np.float32, False),
                                     ('gfx908', 64, np.float64, False),
                                     ('gfx942', 32, np.float64, False)]:
        mm = HIPMatMul(A, aligne=2)
        got = {c.row for c in mm._candidates(dtype, arch, ws)}
        assert (ids <= got) == offered and (ids & got == set()) != offered
    # C read; sparse without blocks (no order with fewer live slabs), too
    # few non-zeros, dense: none of the sparse rows
    for B, beta in ((A, 1.0), (random_operator(rng, 300, 100, 0.17), 0.0),
                    (A[:, :40], 0.0), (rng.standard_normal((300, 100)), 0.0)):
        mm = HIPMatMul(B, beta=beta, aligne=2)
        assert not any(c.params.get('reorder')
                       for c in mm._candidates(np.float64, 'gfx942', 64))


def test_reordered_model_matches_numpy(rng):
    A = sparse_kron(rng)
    p = REORDERED[0]
    plain, P = mg.plan(A, **p), mg.plan(A, reorder=True, **p)
    assert sorted(P.rows) == list(range(300)) and len(P.cols) == 96
    assert P.live_count.sum() <= 0.5*plain.live_count.sum()
    B = rng.standard_normal((100, 150))
    ref = A @ B
    assert rel_error(mg.model_product(P, B), ref) <= 1e-13
    # nothing to gain: A's own order
    D = rng.standard_normal((100, 40))
    assert mg.plan(D, reorder=True, **p).rows is None


def test_reordered_in_executor(rng):
    A = sparse_kron(rng)
    assert len(_reordered(A, 0.0, 2)[1]) == len(REORDERED)
    assert _sweep(rng, A, _reordered, 2, HALF1) >= 3
    assert _sweep(rng, A, _reordered, None, HALF2) >= 3


@pytest.mark.parametrize('table', ['brow', 'crow'])
def test_kernel_ignoring_a_row_table_fails(rng, table):
    A = sparse_kron(rng)
    mm, cands = _reordered(A, 0.0, 2)
    src, meta = mm.render(cands[0], np.float64)
    name = f'{meta["kname"]}_{table}'
    # the table's entries as 0, 1, 2, ...: A's own order
    head, rest = src.split(f'{name}[', 1)
    size, rest = rest.split(']', 1)
    body, rest = rest.split('};', 1)
    ident = ', '.join(str(i) for i in range(int(size)))
    src = f'{head}{name}[{size}]{body.split("{")[0]}{{{ident}}};{rest}'
    p = Panels(rng, A, 0.0, np.float64, 200)
    run_hip(src, meta, p.b, p.c)
    assert rel_error(p.c, p.ref) > 1e-3


# -- sparse operators, each m-block over its own columns ----------------------
# each m-block over its own columns: the compact rows
_compact = _rows_cands(MFMA_COMPACT_ROWS)


def test_compact_model_matches_numpy(rng):
    """compact: each m-block over its own used columns runs fewer stages
    than the reordered plan on a prism-like gradient, and the model
    product is A @ B."""
    A = prism_like(rng)
    p = REORDERED[0]
    P, R = mg.plan(A, compact=True, **p), mg.plan(A, reorder=True, **p)
    assert sorted(P.rows) == list(range(A.shape[0])) and P.cols is None
    assert P.live_count.sum() < R.live_count.sum()
    assert (P.bcols >= 0).sum() == sum(
        (A[list(P.rows)][P.block_m*mb:P.block_m*(mb + 1)] != 0)
        .any(axis=0).sum() for mb in range(P.m_blocks))
    B = rng.standard_normal((A.shape[1], 150))
    assert rel_error(mg.model_product(P, B), A @ B) <= 1e-13


def test_compact_in_executor(rng):
    A = prism_like(rng)
    assert _compact(A, 0.0, 2)[1]
    assert _sweep(rng, A, _compact, 2, HALF1) >= 3
    assert _sweep(rng, A, _compact, None, HALF2) >= 3


def test_compact_kernel_reading_one_table_fails(rng):
    """A compact kernel reading every m-block's B rows from the first
    m-block's part of the table gives a wrong C."""
    import re
    A = prism_like(rng)
    mm, cands = _compact(A, 0.0, 2)
    src, meta = mm.render(cands[0], np.float64)
    wrong = re.compile(r'kr0 = mb\*\d+ \+ ')
    assert wrong.search(src)
    p = Panels(rng, A, 0.0, np.float64, 200)
    run_hip(wrong.sub('kr0 = ', src), meta, p.b, p.c)
    assert rel_error(p.c, p.ref) > 1e-3


# -- the real ISA and hiprtc -------------------------------------------------
def _inspect_or_skip():
    isa = pytest.importorskip('gimmik.isa')
    from gimmik.runtime import RuntimeUnavailable
    try:
        isa.find_clang()
    except RuntimeUnavailable as e:
        pytest.skip(str(e))
    return isa


def mfma_reports(isa, A, arch, beta=1.0, aligne=2):
    """[(variant, params, meta, report)] of every MFMA candidate."""
    mm = HIPMatMul(A, beta=beta, aligne=aligne)
    rendered = [mm.render(c, np.float64)
                for c in mm._candidates(np.float64, arch, 64)
                if c.family in MFMA_FAMILIES]
    reps = isa.inspect_many([(src, arch) for src, _ in rendered], workers=2)
    return [(meta['variant'], meta['params'], meta, rep)
            for (_, meta), rep in zip(rendered, reps)]


def check_reports(name, rows, arch, A):
    assert rows, f'{name}: no MFMA candidate'
    for variant, params, meta, rep in rows:
        what = f'{name} {variant} {arch}'
        assert not isinstance(rep, Exception), f'{what}: {rep}'
        assert rep['scratch_bytes'] == 0 and rep['vgpr_spills'] == 0, what
        assert rep['occupancy'] >= mg.MIN_WAVES, \
            f'{what}: {rep["occupancy"]} wave(s) per SIMD ' \
            f'({rep["vgprs"]} VGPRs, {rep["agprs"]} AGPRs)'
        assert rep['lds_bytes'] == meta['shared'], what
        if meta['tplname'] == MfmaGemm.name:
            assert rep['mfma'] == mg.plan(A, **params).kernel_mfmas, what


@pytest.mark.parametrize('arch', ARCHES)
def test_isa_waves_and_scratch(rng, arch):
    isa = _inspect_or_skip()
    A = random_operator(rng, 150, 37, 0.9)
    A[:64, 8:16] = 0
    check_reports('random 150x37', mfma_reports(isa, A, arch), arch, A)
    name = 'p6-pyr-m460'         # 420 x 140: mfma-dense at 1 wave before
    A = pyfr_dense(name)[name]
    check_reports(name, mfma_reports(isa, A, arch, 0.0, None), arch, A)
    # sparse, A reordered (its row tables in constant memory)
    A = sparse_kron(rng)
    rows = mfma_reports(isa, A, arch, 0.0)
    assert {p.get('reorder') for _, p, _, _ in rows} == {True}
    check_reports('kron 300x100', rows, arch, A)
    # sparse, each m-block over its own columns (and A reordered)
    A = prism_like(rng)
    rows = mfma_reports(isa, A, arch, 0.0)
    assert {bool(p.get('compact')) for _, p, _, _ in rows} == {True, False}
    check_reports('prism-like 378x126', rows, arch, A)


def test_hiprtc_compiles(rng, tmp_path, request):
    import re
    import shutil
    import subprocess

    hiprtc = pytest.importorskip('gimmik.hiprtc')
    from gimmik.runtime import RuntimeUnavailable
    A = random_operator(rng, 140, 30, 0.9)
    mm, cands = gemm_candidates(A, beta=0.5, arch='gfx90a')
    if not full_run(request.config):
        cands = cands[:1]
    objdump = shutil.which('llvm-objdump-19')
    obj = tmp_path / 'k.o'
    for cand in cands:
        src, meta = mm.render(cand, np.float64)
        try:
            code = hiprtc.compile_hip(src, 'gfx90a')
        except RuntimeUnavailable as e:
            pytest.skip(str(e))
        assert 'gimmik_mm' in hiprtc.kernel_symbols(code)
        obj.write_bytes(code)
        if objdump:
            dis = subprocess.run([objdump, '-d', '--mcpu=gfx90a', str(obj)],
                                 capture_output=True, text=True,
                                 check=True).stdout
            assert dis.count('v_mfma_f64_16x16x4') == \
                mg.plan(A, **cand.params).kernel_mfmas, meta['variant']
        readelf = shutil.which('llvm-readelf-19')
        if readelf:
            notes = subprocess.run([readelf, '--notes', str(obj)],
                                   capture_output=True, text=True,
                                   check=True).stdout
            regs = dict(re.findall(r'\.(vgpr_count|agpr_count|private_'
                                   r'segment_fixed_size):\s*(\d+)', notes))
            # .vgpr_count is the total, AGPRs included
            assert int(regs['vgpr_count']) <= 256, meta['variant']
            assert int(regs['private_segment_fixed_size']) == 0


@pytest.mark.full
@pytest.mark.parametrize('arch', ARCHES)
def test_isa_every_dense_operator(arch):
    isa = _inspect_or_skip()
    from gimmik.operators import BETA_ONE_MATRICES, parse_name
    for name, A in sorted(pyfr_dense().items()):
        parsed = parse_name(name)
        beta = 1.0 if parsed and parsed[2] in BETA_ONE_MATRICES else 0.0
        for aligne in (2, None):
            check_reports(name, mfma_reports(isa, A, arch, beta, aligne),
                          arch, A)
