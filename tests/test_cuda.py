"""CUDA generator: the candidate table and its gates, (where nvcc is
installed) every candidate compiled for sm_80 and sm_90 with no local-memory
spills, and mma-gemm kernels run on the CPU by gimmik.emulate.run_cuda.
The fragment bakes are tested in test_fragments.

Numerics on silicon are checked on the device (bench/cuda/cuda_bench.py
--check); CI has no GPU."""

import concurrent.futures as cf
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

from conftest import gradient_like, kron_like, prism_like, random_operator
from gimmik.base import Candidate
from gimmik.emulate import run_cuda
from gimmik.validate import check_dtype
from gimmik.cuda import CUDAMatMul
from gimmik.operators import suite


# -- the candidate table ---------------------------------------------------
def _variants(A, dtype='float64', **kw):
    cc = kw.pop('compute_capability', (9, 0))
    mm = CUDAMatMul(A, **kw)
    return [c.variant for c in mm._candidates(check_dtype(dtype), cc)]


def test_mma_gemm_offered_only_where_it_applies(rng):
    dense = rng.standard_normal((84, 84))
    sparse = random_operator(rng, 84, 84, 0.05)
    gemm = lambda v, s='': any(x.startswith('mma-gemm') and s in x  # noqa
                               for x in v)
    assert gemm(_variants(dense, aligne=2), 'm16n8k8')
    # sm_80: only m8n8k4, no Hopper shapes
    v80 = _variants(dense, aligne=2, compute_capability=(8, 0))
    assert gemm(v80, 'm8n8k4') and not gemm(v80, 'm16n8')
    assert not gemm(_variants(dense, aligne=2, compute_capability=(7, 5)))
    assert not gemm(_variants(dense, 'float32', aligne=2))
    assert not gemm(_variants(dense))              # no even alignment
    assert not gemm(_variants(sparse, aligne=2))
    # where the tensor cores are offered first, big streaming kernels
    # are not
    big = _variants(rng.standard_normal((140, 420)), aligne=2)
    assert big and all(v.startswith('mma-') for v in big)
    assert big[0].startswith('mma-gemm')
    assert not any(v.startswith('mma-dense') for v in big)


def test_gemm_options_only_where_they_matter(rng):
    """skip, preload_c and reorder are dropped where they would change nothing
    (no zero slab, beta 0, no order with fewer live slabs), so no kernel
    is offered twice.  The sparse rows' transposed tiles reorder A where
    its zero columns can go (no zero slab is then left to skip)."""
    dense = rng.standard_normal((140, 100))
    slabs = dense.copy()
    slabs[:, 50:] = 0.0
    slabs[:, 80:90] = 1.0
    for A, beta, opts in ((dense, 0.0, set()), (dense, 1.0, {'preload_c'}),
                          (slabs, 0.0, {'skip'}),
                          (slabs, 2.0, {'skip', 'preload_c'})):
        v = [x for x in _variants(A, beta=beta, aligne=2)
             if x.startswith('mma-gemm')]
        assert v
        for x in v:
            got = {o for o in ('skip', 'preload_c', 'reorder')
                   if f'/{o}/' in x}
            assert got == opts
    # a prism-like pattern, rows and columns shuffled: the sparse rows'
    # transposed tiles reorder it (and skip the slabs left empty)
    prisms = np.kron(rng.standard_normal((30, 9)), np.eye(8))
    prisms = prisms[rng.permutation(240)][:, rng.permutation(72)]
    v = [x for x in _variants(prisms, aligne=2) if x.startswith('mma-gemm')]
    reordered = [x for x in v if '/reorder/' in x]
    assert reordered and all('/skip/' in x for x in reordered)
    assert all(re.search(r'shape\w+t/', x) for x in reordered)


def test_gemm_offered_for_sparser_big_operators(rng):
    """Prism-like operators (about 10% dense, many non-zeros) get the
    skipping mma-gemm beside the streaming families (their order is
    gimmik.order's, see test_order); very sparse ones not."""
    pri = random_operator(rng, 400, 150, 0.12)
    v = _variants(pri, aligne=2)
    gemm = [x for x in v if x.startswith('mma-gemm')]
    assert gemm
    assert any(x.startswith('cstream') for x in v)
    assert not any(x.startswith('mma-gemm') for x in
                   _variants(pri, aligne=2, compute_capability=(8, 0)))
    hexlike = random_operator(rng, 1029, 343, 0.02)
    assert not any(x.startswith('mma-gemm')
                   for x in _variants(hexlike, aligne=2))


def test_gemm_blocks_row_caps_registers_only(rng):
    """An mma-gemm row naming blocks gets that second launch bound and
    nothing else changes: its kernel is its twin's without the bound."""
    A = rng.standard_normal((150, 70))
    mm = CUDAMatMul(A, beta=0.5, aligne=2)
    p = dict(shape='m16n8k4t', mwarps=2, nwarps=2, wm=4, wn=2, kstage=2,
             nbuf=6, preload_c=True)
    bound = re.compile(r'__launch_bounds__\((\d+), (\d+)\)')
    srcs = []
    for q in (dict(p, blocks=4), p):
        cand = Candidate('mma-gemm', q, {'compute_capability': (9, 0)})
        src, _ = mm.render(cand, np.float64, 'k0')
        srcs.append(src)
    assert bound.search(srcs[0]).groups() == ('128', '4')
    assert bound.search(srcs[1]).groups() != ('128', '4')
    assert bound.sub('', srcs[0]) == bound.sub('', srcs[1])
    assert any(c.params.get('blocks') == 4
               for c in mm._candidates(check_dtype('float64'), (9, 0)))


def test_gemm_blocks_row_not_where_a_fills_one_m_block(rng):
    """The capped row is not offered where A's rows fill one m-block (49-64
    rows of the 64 x 64 tile) and k > 40: ptxas spills it there."""
    for m, k, offered in ((56, 168, False), (64, 41, False), (65, 168, True),
                          (150, 168, True), (48, 168, True), (60, 40, True)):
        v = _variants(rng.standard_normal((m, k)), aligne=2)
        assert any(x.startswith('mma-gemm/') for x in v)
        assert any('blocks' in x for x in v) == offered, (m, k)


def test_gemm_blocks_that_do_not_fit_an_sm_are_refused(rng):
    """Five 48 KiB blocks exceed an SM's shared memory."""
    mm = CUDAMatMul(rng.standard_normal((150, 70)), aligne=2)
    cand = Candidate('mma-gemm', dict(
        shape='m16n8k4t', mwarps=2, nwarps=2, wm=4, wn=2, kstage=2, nbuf=6,
        blocks=5), {'compute_capability': (9, 0)})
    with pytest.raises(ValueError, match='do not fit an SM'):
        mm.render(cand, np.float64, 'k0')


def test_gemm_offered_for_sparse_operators_reading_c(rng):
    """Sparse operators with beta != 0 whose dense product is memory-bound
    get the mma-gemm rows too (placed by gimmik.order); with beta 0, or a
    dense product that would be compute-bound, they do not."""
    from gimmik.analysis import analyse, sparse_gemm_worth_it
    from gimmik.fragments.mma import gemm_compute_bound
    hexlike = random_operator(rng, 64, 96, 0.06)     # p3 hex m3-like
    assert not sparse_gemm_worth_it(analyse(hexlike))
    assert not gemm_compute_bound(64, 96, 1.0)
    v = _variants(hexlike, beta=1.0, aligne=2)
    gemm = [i for i, x in enumerate(v) if x.startswith('mma-gemm')]
    assert gemm and all('/preload_c/' in v[i] for i in gemm)
    assert any(x.startswith(('cstream', 'bstream')) for x in v)
    assert not any(x.startswith('mma-gemm')
                   for x in _variants(hexlike, beta=0.0, aligne=2))
    assert not any(x.startswith('mma-gemm') for x in
                   _variants(hexlike, beta=1.0, aligne=2,
                             compute_capability=(8, 0)))
    big = random_operator(rng, 600, 600, 0.005)      # compute-bound dense
    assert gemm_compute_bound(600, 600, 1.0)
    assert not sparse_gemm_worth_it(analyse(big))
    assert not any(x.startswith('mma-gemm')
                   for x in _variants(big, beta=1.0, aligne=2))


def test_gemm_for_c_readers_only_where_panels_pass_l2(rng):
    """With n baked the beta != 0 tile is offered only where A's used rows
    of B and C at that n do not fit the L2 (a hot walk would time it from
    L2, where in a step its panels come from DRAM)."""
    from gimmik.cuda import CUDA_L2, panels_fit_l2
    hexlike = random_operator(rng, 64, 96, 0.06)
    rows = 64 + int(np.count_nonzero(hexlike.any(axis=0)))
    fits = CUDA_L2 // (8*rows) // 2 * 2

    def at(n):
        mm = CUDAMatMul(hexlike, beta=1.0, aligne=2, n=n, ldb=n, ldc=n)
        return mm, [c.variant for c in mm._candidates(np.float64, (9, 0))]
    mm, v = at(fits)
    assert panels_fit_l2(mm) and v
    assert not any(x.startswith('mma-gemm') for x in v)
    mm, v = at(fits + 2)
    assert not panels_fit_l2(mm)
    assert any(x.startswith('mma-gemm') for x in v)


def test_long_warprows_budgeted_as_long_kernels(rng):
    """A warp-rows kernel of LONG_KERNEL_TERMS terms a warp or more fits
    only where LONG_REGISTER_FACTOR times its estimate fits a thread's 255
    registers (ptxas spilled such kernels at one block an SM from
    estimates of 114); shorter ones keep the plain budget."""
    from gimmik.cuda import LONG_KERNEL_TERMS, LONG_REGISTER_FACTOR
    seen = set()
    for shape, d in (((343, 1029), 0.02), ((216, 648), 0.028)):
        mm = CUDAMatMul(random_operator(rng, *shape, d))
        for ms in (4, 8):
            kern = mm.kernel(Candidate('bstream-warprows', dict(
                bsz=24, msplit=ms, ld='cg', st='cg'),
                {'compute_capability': (9, 0)}), np.float64)
            est, fit = kern.registers(), mm.registers_fit(kern)
            if kern.thread_terms() >= LONG_KERNEL_TERMS:
                assert fit == (est*LONG_REGISTER_FACTOR <= 255)
                seen.add('long refused' if not fit else 'long')
            else:
                assert fit
                seen.add('short')
    assert {'long refused', 'short'} <= seen


def test_no_unrolled_streaming_of_huge_sparse_gemm_operators(rng):
    """Above MAX_STREAM_NNZ_SPARSE non-zeros, an operator that gets the
    sparse mma-gemm rows gets only those; without them (sm_80, f32, odd
    alignment) the streaming families stay, as they do below the limit."""
    from gimmik.cuda import MAX_STREAM_NNZ_SPARSE
    huge = random_operator(rng, 288, 864, 0.3)       # p7 prism-like
    assert np.count_nonzero(huge) > MAX_STREAM_NNZ_SPARSE
    v = _variants(huge, aligne=2)
    assert v and all(x.startswith('mma-gemm') for x in v)
    for kw in (dict(aligne=2, compute_capability=(8, 0)),
               dict(dtype='float32', aligne=2), dict(aligne=None)):
        v = _variants(huge, **kw)
        assert any(x.startswith(('cstream', 'bstream')) for x in v), kw
    small = random_operator(rng, 120, 200, 0.3)
    assert np.count_nonzero(small) < MAX_STREAM_NNZ_SPARSE
    v = _variants(small, aligne=2)
    assert any(x.startswith('mma-gemm') for x in v)
    assert any(x.startswith(('cstream', 'bstream')) for x in v)


def test_candidates_unique_and_width2_needs_alignment(rng):
    A = random_operator(rng, 30, 20, 0.3)
    for kw in ({}, {'aligne': 2}, {'aligne': 4, 'n': 99, 'ldb': 100,
                                   'ldc': 104}):
        v = _variants(A, **kw)
        assert v and len(v) == len(set(v))
        assert any('width2' in x for x in v) == ('aligne' in kw)


def test_big_operators_offer_only_unspilled_kernels(rng):
    """An operator too big for registers still gets candidates: the
    row groups over blocks.  Not the reload cstream: ptxas merges its
    repeated loads and holds B (8 KiB spilled on such an operator)."""
    A = random_operator(rng, 1029, 343, 0.02)
    v = _variants(A, aligne=2)
    assert 'cstream/ldreload/width1' not in v
    assert any(x.startswith('cstream-mblock/') for x in v)
    assert not any(x.startswith('bstream/') for x in v)


def test_reload_estimated_as_holding_b(rng):
    """The reload cstream is estimated at least as the cstream holding the
    same B values: offered with a big k where few B rows are live at once
    (a banded operator), not where they all are."""
    banded = np.zeros((80, 80))
    for i in range(80):
        banded[i, max(0, i - 2):i + 3] = rng.standard_normal(
            len(range(max(0, i - 2), min(80, i + 3))))
    assert 'cstream/ldreload/width1' in _variants(banded, aligne=2)
    assert 'cstream/ldreload/width1' not in _variants(
        rng.standard_normal((40, 80)) * (rng.random((40, 80)) < 0.3),
        aligne=2)


def test_long_unrolled_kernels_budgeted_twice(rng):
    """A register-resident unrolled candidate with at least
    LONG_KERNEL_TERMS of A's non-zeros a thread is budgeted
    LONG_REGISTER_FACTOR times its estimate (minimum of blocks from that)
    and offered only where that fits 255 registers; a short one keeps a
    half more.  In f32: f64 cstream/bstream kernels that long are not
    offered (test_unrolled_terms_capped_in_f64)."""
    from gimmik.cuda import (LONG_KERNEL_TERMS, LONG_REGISTER_FACTOR,
                             register_budget)
    dt = check_dtype('float32')
    for m, k, density, long, beta in ((20, 60, 0.9, True, 0.0),
                                      (16, 60, 0.9, True, 1.0),
                                      (20, 30, 0.5, False, 0.0)):
        A = random_operator(rng, m, k, density)
        assert (np.count_nonzero(A) >= LONG_KERNEL_TERMS) == long
        mm = CUDAMatMul(A, beta=beta, aligne=2)
        cands = [c for c in mm._candidates(dt, (8, 0))
                 if c.family in ('cstream', 'bstream')]
        assert cands
        for c in cands:
            kern = mm.kernel(c, dt)
            est = kern.registers()
            factor = LONG_REGISTER_FACTOR if long else 1.5
            assert not long or est*factor <= 255
            regs = max(register_budget(est, factor), 168)
            threads = kern.geometry().block[0]
            assert mm._platform_context(kern)['minblocks'] == max(
                1, min(2048 // threads, 65536 // (threads*regs)))


def test_unrolled_terms_capped_in_f64(rng):
    """cstream and bstream run every term of a column in one thread's
    unrolled code: in f64 they are offered up to UNROLLED_MAX_TERMS terms
    x columns a thread and not beyond (ptxas spilled them there), in f32
    beyond too; the other families stay."""
    from gimmik.families import UNROLLED_MAX_TERMS
    cap = UNROLLED_MAX_TERMS

    def offered(A, dtype):
        mm = CUDAMatMul(A, aligne=2)
        return {(c.family, c.params.get('width', 1))
                for c in mm._candidates(check_dtype(dtype), (9, 0))}

    for nnz, present, absent in ((cap // 2, {1}, set()), (cap, {1}, {2}),
                                 (cap + 20, set(), {1, 2})):
        A = np.zeros((40, 40))
        A.flat[rng.choice(A.size, nnz, replace=False)] = \
            rng.uniform(0.5, 2.0, nnz)
        got = offered(A, 'float64')
        for fam in ('cstream', 'bstream'):
            widths = {w for f, w in got if f == fam}
            assert present <= widths and not absent & widths, (nnz, fam)
        assert {f for f, _ in got} - {'cstream', 'bstream'}
        f32 = offered(A, 'float32')
        assert {w for f, w in f32 if f == 'cstream'} >= {1}


@pytest.mark.parametrize('cc, exc', [((9,), TypeError), ('sm_90', TypeError),
                                     ((9.0, 0), TypeError),
                                     ((True, 0), TypeError),
                                     ((6, 1), ValueError),
                                     ((9, 12), ValueError)])
def test_bad_compute_capability(cc, exc):
    with pytest.raises(exc, match='compute_capability'):
        next(CUDAMatMul(np.eye(4)).kernels('float64', compute_capability=cc))


def test_launch_config_covers_columns(rng):
    A = rng.standard_normal((40, 40))
    for src, meta in CUDAMatMul(A, aligne=2).kernels('float64'):
        grid, block = CUDAMatMul.launch_config(meta, 1001)
        cols = meta.get('cols_per_block') or block[0]*meta['width']
        groups = meta.get('row_groups', 1)
        assert grid[0] % groups == 0
        assert (grid[0]//groups - 1)*cols < 1001 <= grid[0]//groups*cols
        assert f'__launch_bounds__({block[0]*block[1]*block[2]}' in src


# -- nvcc: every candidate builds for sm_80 and sm_90 without spills ---------
NVCC = shutil.which('nvcc')
ARCHS = ('sm_80', 'sm_90')

_FUNC = re.compile(r"Compiling entry function '(\w+)' for '(sm_\d+)'")
_PROPS = re.compile(r'(\d+) bytes stack frame, (\d+) bytes spill stores, '
                    r'(\d+) bytes spill loads')


def ptxas_report(srcs, arch):
    """Compile kernels (named k0, k1, ...) in one nvcc run; returns
    {kname: (stack, spill stores, spill loads)}."""
    with tempfile.TemporaryDirectory() as tmp:
        cu = os.path.join(tmp, 'all.cu')
        with open(cu, 'w') as f:
            f.write('\n'.join(srcs))
        p = subprocess.run([NVCC, '-cubin', f'-arch={arch}', '-O3',
                            '-Xptxas', '-v', '-o', os.path.join(tmp, 'a'),
                            cu], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    out, cur = {}, None
    for line in p.stderr.splitlines():
        if mo := _FUNC.search(line):
            cur = mo.group(1)
        elif (mo := _PROPS.search(line)) and cur:
            out[cur] = tuple(int(x) for x in mo.groups())
    return out


def _compile_cases(rng):
    """(label, A, beta, dtype, sizes) of representative operators."""
    hexlike = np.kron(np.eye(4), random_operator(rng, 6, 4, 1.0))
    zero_rows = np.vstack([random_operator(rng, 10, 12, 0.4),
                           np.zeros((6, 12))])
    return [('sparse-f64', random_operator(rng, 24, 20, 0.25), 0.0,
             'float64', {'aligne': 2}),
            ('sparse-f32-beta', random_operator(rng, 20, 24, 0.25), 0.5,
             'float32', {'aligne': 2}),
            ('dense-mma-beta1', rng.standard_normal((32, 32)), 1.0,
             'float64', {'aligne': 2}),
            ('blocky-baked', hexlike, 1.0, 'float64',
             {'aligne': 2, 'n': 1001, 'ldb': 1002, 'ldc': 1004}),
            ('zero-rows-odd', zero_rows, 0.0, 'float64', {}),
            ('tall-mblock', random_operator(rng, 72, 24, 0.15), 0.0,
             'float64', {'aligne': 2})]


def _full_cases(rng):
    return [('sparse-40x30', random_operator(rng, 40, 30, 0.2), 0.0,
             'float64', {'aligne': 2}),
            ('dense-45x37-f32', rng.standard_normal((45, 37)), 0.5,
             'float32', {'aligne': 2}),
            ('hexp6-like-m132', random_operator(rng, 1029, 343, 0.02), 0.0,
             'float64', {'aligne': 2}),
            ('dense-mma-84x252', rng.standard_normal((84, 252)), 0.0,
             'float64', {'aligne': 2}),
            ('dense-f32-60x40', rng.standard_normal((60, 40)), 1.0,
             'float32', {'aligne': 2})]


def _sources(mm, dt, cands):
    """The candidates' sources under kernel names k0, k1, ... and each
    name's variant."""
    srcs, names = [], {}
    for i, cand in enumerate(cands):
        src, meta = mm.render(cand, dt, f'k{i}')
        srcs.append(src)
        names[f'k{i}'] = meta['variant']
    return srcs, names


def _assert_no_spills(jobs):
    """jobs: (label, arch, sources, names); ptxas compiles each job's
    sources for its arch and every kernel has no stack and no spills."""
    with cf.ThreadPoolExecutor(2) as pool:
        futs = [(j, pool.submit(ptxas_report, j[2], j[1])) for j in jobs]
        for (label, arch, srcs, names), fut in futs:
            rep = fut.result()
            assert set(rep) == set(names), f'{label} {arch}: missing kernels'
            for kname, (stack, st, ld) in rep.items():
                assert (stack, st, ld) == (0, 0, 0), \
                    (f'{label} {arch} {names[kname]}: {stack} bytes stack, '
                     f'{st}/{ld} bytes spilled')


def _check_no_spills(cases):
    jobs = []
    for label, A, beta, dtype, sizes in cases:
        mm = CUDAMatMul(A, beta=beta, **sizes)
        dt = check_dtype(dtype)
        srcs, names = _sources(mm, dt, mm._candidates(dt, (8, 0)))
        for arch in ARCHS:
            jobs.append((label, arch, srcs, names))
    _assert_no_spills(jobs)


@pytest.mark.skipif(NVCC is None, reason='nvcc is not installed')
def test_every_candidate_compiles_without_spills(rng):
    _check_no_spills(_compile_cases(rng))


@pytest.mark.full
@pytest.mark.skipif(NVCC is None, reason='nvcc is not installed')
def test_big_candidates_compile_without_spills(rng):
    _check_no_spills(_full_cases(rng))


def _long_cases(rng):
    """Shapes whose long unrolled candidates spilled on operators of other
    point sets (bench/cuda/cuda_spill_audit.py): A's rows in one m-block of the
    capped 64 x 64 tile; half-dense tall and wide operators with
    thousands of non-zeros, beta 0 and 1."""
    return [('one-mblock', rng.standard_normal((56, 168)), 0.0, 2, True),
            ('tall-halfdense', random_operator(rng, 168, 56, 0.45), 0.0, 4,
             False),
            ('wide-halfdense-beta', random_operator(rng, 56, 168, 0.45),
             1.0, 4, False)]


def _riskiest(mm, dt, cc, count, gemm):
    """The first mma-gemm candidates offered (gemm), or the others with the
    largest register estimates; at most count."""
    cands = mm._candidates(dt, cc)
    if gemm:
        return [c for c in cands if c.family == 'mma-gemm'][:count]
    cands = [c for c in cands if c.family != 'mma-gemm']
    return sorted(cands, key=lambda c: -mm.kernel(c, dt).registers())[:count]


def _check_long_cases(rng, archs):
    jobs = []
    dt = check_dtype('float64')
    for label, A, beta, count, gemm in _long_cases(rng):
        mm = CUDAMatMul(A, beta=beta, aligne=2)
        for arch in archs:
            cc = (int(arch[3]), int(arch[4]))
            srcs, names = _sources(mm, dt,
                                   _riskiest(mm, dt, cc, count, gemm))
            jobs.append((label, arch, srcs, names))
    _assert_no_spills(jobs)


@pytest.mark.skipif(NVCC is None, reason='nvcc is not installed')
def test_long_candidates_compile_without_spills(rng):
    """The riskiest candidates of the shapes that spilled, sm_90 (compute
    capability 9.0, as offered there)."""
    _check_long_cases(rng, ('sm_90',))


@pytest.mark.full
@pytest.mark.skipif(NVCC is None, reason='nvcc is not installed')
def test_long_candidates_compile_without_spills_sm80(rng):
    _check_long_cases(rng, ('sm_80',))


@pytest.mark.skipif(NVCC is None, reason='nvcc is not installed')
def test_partitioned_groups_compile_without_spills():
    """cstream-mblock's partitioned groups of PyFR's hex divergences of
    orders 5 and 6 (groups of up to 27 rows and 567 non-zeros, budgeted
    by their terms: PART_MAX_TERMS), n baked as PyFR bakes it: no spill
    on sm_90.  (The same pattern with random values spilled 4-8 bytes on
    some draws: the budget holds for these operators, not for every
    operator of their shape; docs/cuda-spills.md.)"""
    ops = np.load(os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), 'bench', 'operators', 'pyfr-ops.npz'))
    dt = check_dtype('float64')
    jobs = []
    for name in ('p5-hex-m132', 'p6-hex-m132'):
        mm = CUDAMatMul(ops[name], aligne=4, n=110080, ldb=110080,
                        ldc=110080)
        cands = [c for c in mm._candidates(dt, (9, 0))
                 if 'part' in c.params]
        if name == 'p6-hex-m132':
            assert cands
        if cands:
            srcs, names = _sources(mm, dt, cands)
            jobs.append((name, 'sm_90', srcs, names))
    _assert_no_spills(jobs)


def _chunked_cases(rng):
    """Wide operators shaped like the flux-to-solution operators of
    hexahedra (a sum of three tensor products of a 5 x 15 one with
    identities: each row of B used by rows 1, 5 and 25 apart), n baked as
    PyFR bakes it and at run time: the k-split in passes of rows is
    offered, its estimate near CHUNKED_MAX_REGISTERS."""
    eye = np.eye(5)

    def hexlike(density):
        d = [rng.standard_normal((5, 15))*(rng.random((5, 15)) < density)
             for _ in range(3)]
        return (np.kron(eye, np.kron(eye, d[0]))
                + np.kron(eye, np.kron(d[1], eye))
                + np.kron(d[2], np.kron(eye, eye)))

    baked = {'aligne': 4, 'n': 110080, 'ldb': 110080, 'ldc': 110080}
    return [('hexlike-baked', hexlike(0.3), 0.0, baked),
            ('hexlike-beta1', hexlike(0.3), 1.0, {'aligne': 2}),
            ('hexlike-denser', hexlike(0.4), 0.0, baked)]


@pytest.mark.skipif(NVCC is None, reason='nvcc is not installed')
def test_chunked_ksplit_compiles_without_spills(rng):
    """Every offered k-split in passes of rows builds for sm_80 and sm_90
    without spills (its estimate up to CHUNKED_MAX_REGISTERS)."""
    jobs = []
    dt = check_dtype('float64')
    for label, A, beta, sizes in _chunked_cases(rng):
        mm = CUDAMatMul(A, beta=beta, **sizes)
        for arch in ARCHS:
            cc = (int(arch[3]), int(arch[4]))
            cands = [c for c in mm._candidates(dt, cc)
                     if c.params.get('chunk')]
            assert cands, label
            srcs, names = _sources(mm, dt, cands)
            jobs.append((label, arch, srcs, names))
    _assert_no_spills(jobs)


def _gemm90_cases(rng):
    """Operators whose sm_90 candidates include every mma-gemm code path:
    the Hopper shapes, ragged m and k, beta 0 / 1 / other, baked n, zero
    slabs skipped, an m-block with no live stage."""
    slabs = rng.standard_normal((150, 70))
    slabs[:64, :] = 0.0
    slabs[100:, 60:] = 0.0
    return [('gemm-baked-beta', rng.standard_normal((150, 70)), -0.5,
             'float64', {'aligne': 2, 'n': 1001, 'ldb': 1002, 'ldc': 1004}),
            ('gemm-slabs-beta1', slabs, 1.0, 'float64', {'aligne': 2}),
            ('gemm-prism-like', random_operator(rng, 400, 150, 0.12), 0.0,
             'float64', {'aligne': 2}),
            ('gemm-reordered', kron_like(rng, 300, 60), 1.0, 'float64',
             {'aligne': 2, 'n': 1001, 'ldb': 1002, 'ldc': 1004})]


@pytest.mark.skipif(NVCC is None, reason='nvcc is not installed')
def test_gemm_sm90_candidates_compile_without_spills(rng):
    """mma-gemm's sm_90 candidates (compute capability 9.0) build for
    sm_90 with no spills."""
    jobs = []
    for label, A, beta, dtype, sizes in _gemm90_cases(rng):
        mm = CUDAMatMul(A, beta=beta, **sizes)
        dt = check_dtype(dtype)
        cands = [c for c in mm._candidates(dt, (9, 0))
                 if c.family == 'mma-gemm']
        assert cands
        if label == 'gemm-slabs-beta1':     # the skipping code is built
            assert not all(mm.kernel(c, dt).plan.full for c in cands)
        if label == 'gemm-reordered':       # and the reordering code
            cands = [c for c in cands if c.params.get('reorder')]
            assert cands
        if label != 'gemm-baked-beta':      # (bounded run time) the three
            cands = (sorted(               # with the most registers, and
                [c for c in cands if 'blocks' not in c.params],
                key=lambda c: -mm.kernel(c, dt).registers())[:3]
                + [c for c in cands if 'blocks' in c.params])  # the capped
        jobs.append((label, 'sm_90', *_sources(mm, dt, cands)))
    _assert_no_spills(jobs)


# -- mma-gemm run on the CPU: the generated CUDA source, emulated ------------
#
# No GPU in CI, so the generated source itself is run on the CPU by
# gimmik.emulate.run_cuda (g++ against a small emulation of the CUDA
# features it uses, entered through the templates' GIMMIK_EMULATE hooks).
GXX = shutil.which(os.environ.get('CXX', 'g++'))


def emulate(src, meta, B, C, n):
    """Run a rendered kernel on the CPU; B and C are the full (k x ldb,
    m x ldc) arrays, their first n columns the panels; returns C."""
    run_cuda(src, meta, B[:, :n], C[:, :n])
    return C


GEMM_EMU = [  # (shape params, operator, beta, baked)
    (dict(shape='m16n8k8', mwarps=2, nwarps=2, wm=4, wn=4, kstage=1,
          nbuf=3), 'dense', 0.0, False),
    (dict(shape='m16n8k8', mwarps=2, nwarps=2, wm=4, wn=4, kstage=1,
          nbuf=3, skip=True, preload_c=True), 'slabs', 1.0, False),
    (dict(shape='m16n8k16', mwarps=2, nwarps=2, wm=2, wn=4, kstage=1,
          nbuf=2), 'dense', -0.5, True),
    (dict(shape='m8n8k4', mwarps=2, nwarps=2, wm=4, wn=4, kstage=2,
          nbuf=3), 'slabs', 1.0, False),
    (dict(shape='m16n8k8', mwarps=2, nwarps=2, wm=4, wn=4, kstage=1,
          nbuf=3, skip=True, preload_c=True, tiles=3), 'slabs', 1.0, False),
    (dict(shape='m16n8k8', mwarps=2, nwarps=2, wm=2, wn=4, kstage=2,
          nbuf=2, tiles=2), 'dense', -0.5, True),
    (dict(shape='m16n8k4', mwarps=2, nwarps=4, wm=4, wn=4, kstage=1,
          nbuf=4, skip=True, preload_c=True, tiles=3), 'slabs', -0.5, True),
    (dict(shape='m16n8k4', mwarps=2, nwarps=2, wm=2, wn=4, kstage=4,
          nbuf=3), 'dense', 0.0, False),
    (dict(shape='m16n8k4', mwarps=3, nwarps=2, wm=3, wn=4, kstage=2,
          nbuf=2, preload_c=True, tiles=2), 'dense', 1.0, True),
    # compute-bound (late_issue): stage loads issued after k-step 0
    (dict(shape='m16n8k4', mwarps=2, nwarps=2, wm=2, wn=4, kstage=4,
          nbuf=3), 'deep', 0.0, False),
    (dict(shape='m16n8k4', mwarps=2, nwarps=2, wm=2, wn=4, kstage=2,
          nbuf=4, skip=True, preload_c=True, tiles=2), 'deep', -0.5, True),
    (dict(shape='m16n8k4', mwarps=4, nwarps=1, wm=2, wn=4, kstage=2,
          nbuf=4), 'deep', 1.0, False),
    # transposed shapes (B the MMA's A operand)
    (dict(shape='m16n8k4t', mwarps=2, nwarps=2, wm=4, wn=2, kstage=2,
          nbuf=6), 'dense', 0.0, False),
    (dict(shape='m16n8k4t', mwarps=2, nwarps=2, wm=4, wn=2, kstage=2,
          nbuf=6, skip=True, preload_c=True), 'deep', 1.0, True),
    (dict(shape='m16n8k8t', mwarps=2, nwarps=1, wm=4, wn=2, kstage=2,
          nbuf=4, preload_c=True, tiles=3), 'slabs', -0.5, False),
    (dict(shape='m16n8k16t', mwarps=2, nwarps=2, wm=4, wn=2, kstage=1,
          nbuf=2), 'dense', -0.5, True),
    (dict(shape='m16n8k4t', mwarps=4, nwarps=2, wm=2, wn=2, kstage=2,
          nbuf=6, skip=True, preload_c=True, tiles=2), 'slabs', 1.0, True),
    # A reordered: B's rows gathered, C's rows scattered by tables
    (dict(shape='m16n8k4t', mwarps=2, nwarps=2, wm=4, wn=2, kstage=2,
          nbuf=6, skip=True, preload_c=True, reorder=True), 'kron', 1.0,
     False),
    (dict(shape='m16n8k4t', mwarps=2, nwarps=2, wm=2, wn=2, kstage=2,
          nbuf=6, skip=True, reorder=True), 'kron', 0.0, True),
    (dict(shape='m16n8k8', mwarps=2, nwarps=2, wm=4, wn=4, kstage=1,
          nbuf=3, skip=True, preload_c=True, tiles=3, reorder=True), 'kron',
     -0.5, True),
    # compact: each m-block's own used columns, B's rows by its table
    (dict(shape='m16n8k4t', mwarps=2, nwarps=2, wm=4, wn=2, kstage=2,
          nbuf=6, preload_c=True, compact=True), 'grad', 1.0, False),
    (dict(shape='m16n8k4t', mwarps=2, nwarps=2, wm=2, wn=2, kstage=2,
          nbuf=6, compact=True), 'grad', 0.0, True),
    (dict(shape='m16n8k8', mwarps=2, nwarps=2, wm=4, wn=4, kstage=1,
          nbuf=3, preload_c=True, tiles=3, compact=True), 'grad', -0.5, True),
]


@pytest.mark.skipif(GXX is None, reason='g++ is not installed')
# the default run takes every third tile shape; --full all of them
@pytest.mark.parametrize('case', [
    c if c % 3 == 0 else pytest.param(c, marks=pytest.mark.full)
    for c in range(len(GEMM_EMU))])
def test_gemm_kernel_emulated(rng, case):
    """The generated mma-gemm kernel, run on the CPU, computes
    C = A*B + beta*C: ragged m, k and n (two column blocks, the last one
    odd, with tiles a tile wholly beyond n), padded strides left alone,
    every element of C written, zero slabs skipped and an m-block with no
    live stage, A reordered, each m-block's own columns (compact)."""
    params, kind, beta, baked = GEMM_EMU[case]
    m, k = {'dense': (270, 45), 'slabs': (200, 45), 'deep': (150, 300),
            'kron': (200, 46), 'grad': (192, 64)}[kind]
    A = {'kron': lambda: kron_like(rng),
         'grad': lambda: gradient_like(rng, 4)}.get(
        kind, lambda: rng.standard_normal((m, k)))()
    if kind == 'deep':
        A[:, 100:140] = 0.0        # dead stages (with skip)
    if kind == 'slabs':
        A[:128, :] = 0.0           # m-block(s) with no live stage
        A[128:, 40:] = 0.0         # dead stages for the others, the
        A[128:, :8] = 0.0          # first one too
    cand = Candidate('mma-gemm', params, {'compute_capability': (9, 0)})
    geom = CUDAMatMul(A, beta=beta, aligne=2).kernel(cand, np.float64) \
        .geometry()
    bn = geom.cols_per_block // params.get('tiles', 1)
    n = geom.cols_per_block + bn + 5    # tiles beyond n in the last block
    ldb, ldc = n + 3, n + 7
    ldb, ldc = ldb + ldb % 2, ldc + ldc % 2
    sizes = dict(n=n, ldb=ldb, ldc=ldc) if baked else {}
    mm = CUDAMatMul(A, beta=beta, aligne=2, **sizes)
    src, meta = mm.render(cand, np.float64, 'k0')
    Bf = np.full((k, ldb), 7.0)
    Bf[:, :n] = rng.standard_normal((k, n))
    Cf = np.full((m, ldc), 9.0)
    Cf[:, :n] = rng.standard_normal((m, n))
    ref = A @ Bf[:, :n] + beta*Cf[:, :n]
    if beta == 0:
        Cf[:, :n] = np.nan
    plan = mm.kernel(cand, np.float64).plan
    assert plan.nmb > 1
    assert plan.late_issue == (kind == 'deep')
    if kind == 'slabs' and params.get('skip'):
        assert plan.cnt.min() == 0 and not plan.full
    assert (plan.rows is not None) == (kind in ('kron', 'grad'))
    assert (plan.bcols is not None) == bool(params.get('compact'))
    out = emulate(src, meta, Bf, Cf, n)
    assert np.isfinite(out[:, :n]).all()
    assert np.abs(out[:, :n] - ref).max() <= 1e-13*np.abs(ref).max()
    assert (out[:, n:] == 9.0).all()


@pytest.mark.skipif(GXX is None, reason='g++ is not installed')
@pytest.mark.parametrize('wrong', [
    ('const int g = lane / 4, t4 = lane % 4;',
     'const int t4 = lane / 8, g = lane % 8;'),     # lanes transposed
    ('const int kst = kidx[sn];', 'const int kst = sn;'),   # slots ignored
    ('wait_group 1', 'wait_group 2')])  # stage it + 1 read before it lands
def test_gemm_emulation_catches_a_wrong_kernel(rng, wrong):
    """The emulated run can fail: a kernel with its lanes mapped wrongly,
    reading B at the slot instead of the live stage, or reading a stage
    its cp.async group has not completed (the emulator lands copies at
    the wait_group that completes them) gives a wrong C."""
    params = dict(shape='m16n8k8', mwarps=2, nwarps=2, wm=4, wn=4,
                  kstage=1, nbuf=3, skip=True, preload_c=True)
    A = rng.standard_normal((200, 45))
    A[:128, :] = 0.0
    A[128:, 40:] = 0.0
    A[128:, :8] = 0.0
    mm = CUDAMatMul(A, beta=1.0, aligne=2)
    cand = Candidate('mma-gemm', params, {'compute_capability': (9, 0)})
    src, meta = mm.render(cand, np.float64, 'k0')
    assert wrong[0] in src
    src = src.replace(*wrong)
    n = 70
    B, C = rng.standard_normal((45, n)), rng.standard_normal((200, n))
    out = emulate(src, meta, B, C.copy(), n)
    assert not np.abs(out - (A @ B + C)).max() <= 1e-3


@pytest.mark.skipif(GXX is None, reason='g++ is not installed')
@pytest.mark.parametrize('wrong', [
    (r'k0_crow\[row\]', 'row'),                     # C's rows in A's order
    (r'bst \+ k0_brow\[([^]]*)\]', r'bst + (\1)'),  # B's rows in A's order
])
def test_gemm_emulation_catches_an_unordered_kernel(rng, wrong):
    """A reordered kernel that ignores the C row table or the B row table
    gives a wrong C."""
    A = kron_like(rng)
    params = dict(shape='m16n8k4t', mwarps=2, nwarps=2, wm=4, wn=2,
                  kstage=2, nbuf=6, skip=True, reorder=True)
    mm = CUDAMatMul(A, aligne=2)
    cand = Candidate('mma-gemm', params, {'compute_capability': (9, 0)})
    src, meta = mm.render(cand, np.float64, 'k0')
    assert re.search(wrong[0], src)
    n = 70
    B = rng.standard_normal((46, n))
    good = emulate(src, meta, B, np.zeros((200, n)), n)
    assert np.abs(good - A @ B).max() <= 1e-13*np.abs(A @ B).max()
    bad = emulate(re.sub(*wrong, src), meta, B, np.zeros((200, n)), n)
    assert not np.abs(bad - A @ B).max() <= 1e-3


@pytest.mark.skipif(GXX is None, reason='g++ is not installed')
def test_gemm_emulation_catches_a_compact_kernel_reading_one_table(rng):
    """A compact kernel reading every m-block's B rows from the first
    m-block's table gives a wrong C."""
    A = gradient_like(rng, 4)
    params = dict(shape='m16n8k4t', mwarps=2, nwarps=2, wm=2, wn=2,
                  kstage=2, nbuf=6, compact=True)
    mm = CUDAMatMul(A, aligne=2)
    cand = Candidate('mma-gemm', params, {'compute_capability': (9, 0)})
    src, meta = mm.render(cand, np.float64, 'k0')
    wrong = re.compile(r'k0_brow\[mb\*\d+ \+ ')
    assert wrong.search(src)
    n = 70
    B = rng.standard_normal((64, n))
    good = emulate(src, meta, B, np.zeros((192, n)), n)
    assert np.abs(good - A @ B).max() <= 1e-13*np.abs(A @ B).max()
    bad = emulate(wrong.sub('k0_brow[', src), meta, B, np.zeros((192, n)),
                  n)
    assert not np.abs(bad - A @ B).max() <= 1e-3


def test_gemm_compact_offered_where_it_cuts_the_stages(rng):
    """The compact tiles are offered (reorder and skip implied, not
    named) where each m-block's own columns run fewer stages than the
    reordered slabs (a prism-like gradient), not where they do not (a
    shuffled block-diagonal pattern the reorder already gathers)."""
    v = [x for x in _variants(prism_like(rng), aligne=2)
         if '/compact/' in x]
    assert v and not any('/reorder/' in x or '/skip/' in x for x in v)
    assert not any('/compact/' in x
                   for x in _variants(kron_like(rng), aligne=2))


# -- bstream-warprows run on the CPU ----------------------------------------
WARPROWS_EMU = [  # (msplit, bsz, beta, dtype, baked)
    (4, 24, 0.0, 'float64', True), (8, 24, 1.0, 'float64', True),
    (4, 5, -0.5, 'float64', False), (3, 7, 1.0, 'float32', False)]


@pytest.mark.skipif(GXX is None, reason='g++ is not installed')
@pytest.mark.parametrize('msplit,bsz,beta,dtype,baked', WARPROWS_EMU)
def test_warprows_kernel_emulated(rng, msplit, bsz, beta, dtype, baked):
    """bstream-warprows as generated, on the CPU: ragged n (not a multiple
    of the 32 columns of a block), padded ldb/ldc, a zero row and an
    unused column of A, several chunks with a short last one; C poisoned
    where beta is 0, the padding must stay untouched."""
    A = random_operator(rng, 37, 29, 0.3)
    A[5] = 0.0
    A[:, 3] = 0.0
    n, ldb, ldc = 45, 48, 50
    sizes = dict(n=n, ldb=ldb, ldc=ldc) if baked else {}
    mm = CUDAMatMul(A, beta=beta, **sizes)
    cand = Candidate('bstream-warprows',
                     dict(msplit=msplit, bsz=bsz, ld='cg', st='cg'),
                     {'compute_capability': (9, 0)})
    dt = check_dtype(dtype)
    src, meta = mm.render(cand, dt, 'k0')
    assert meta['block'] == (32, msplit, 1)
    assert len(mm.kernel(cand, dt).plan.chunks) > 1
    B = rng.standard_normal((29, ldb)).astype(dtype)
    C = rng.standard_normal((37, ldc)).astype(dtype)
    C[:, n:] = 9.0
    ref = A @ B[:, :n].astype(float) + beta*C[:, :n].astype(float)
    if beta == 0:
        C[:, :n] = np.nan
    out = emulate(src, meta, B, C, n)
    tol = 1e-13 if dtype == 'float64' else 1e-5
    scale = np.abs(A) @ np.abs(B[:, :n]) + abs(beta)*np.abs(ref) + 1
    assert np.isfinite(out[:, :n]).all()
    assert (np.abs(out[:, :n] - ref) <= tol*scale).all()
    assert (out[:, n:] == 9.0).all()


def test_warprows_reads_c_with_the_chunk_a_row_ends_in(rng):
    """With beta != 0 warp-rows loads a row's old C value with the B chunk
    of the row's last term, a barrier between the load and its use where
    the row is stored (in a step C comes from DRAM, and no sum waits on it:
    cuda-h200-context-cin-end*.csv), and reads C nowhere else; with beta 0
    it reads no C."""
    A = random_operator(rng, 37, 29, 0.3)
    cand = Candidate('bstream-warprows', dict(msplit=4, bsz=8, ld='cg',
                                              st='cg'),
                     {'compute_capability': (9, 0)})
    src, _ = CUDAMatMul(A, beta=1.0).render(cand, np.float64, 'k0')
    rows = [i for i in range(37) if A[i].any()]
    assert src.count('(c + ') == 2*len(rows)       # one load, one store
    for i in rows:
        load = src.index(f'cin{i} = __ld')
        use = src.index(f'acc{i} + cin{i})')
        assert '__syncthreads()' in src[load:use], i
        # the load goes with the chunk whose consumption ends the row: no
        # other barrier of this warp between them
        assert src[load:use].count('__syncthreads()') == 1, i
    src0, _ = CUDAMatMul(A, beta=0.0).render(cand, np.float64, 'k0')
    assert 'cin' not in src0 and src0.count('(c + ') == len(rows)


@pytest.mark.skipif(GXX is None, reason='g++ is not installed')
def test_warprows_emulation_catches_a_wrong_buffer(rng):
    """The emulated run can fail: consuming chunk 1 from the buffer chunk
    0 used gives a wrong C."""
    A = random_operator(rng, 20, 60, 0.5)
    mm = CUDAMatMul(A)
    cand = Candidate('bstream-warprows',
                     dict(msplit=4, bsz=24, ld='cg', st='cg'),
                     {'compute_capability': (9, 0)})
    src, meta = mm.render(cand, np.float64, 'k0')
    assert 'bv = bsh[1][' in src
    src = src.replace('bv = bsh[1][', 'bv = bsh[0][')
    n = 40
    B, C = rng.standard_normal((60, n)), np.zeros((20, n))
    out = emulate(src, meta, B, C, n)
    assert np.abs(out - A @ B).max() > 1e-3


def test_warprows_gets_free_launch_bounds(rng):
    """ptxas is given no minimum of blocks per SM for a short
    bstream-warprows (it then keeps registers near its needs), one block
    (255 registers) for a long one (it spilled at its own cap)."""
    A = random_operator(rng, 150, 125, 0.04)
    mm = CUDAMatMul(A, n=1000, ldb=1000, ldc=1000)
    cand = Candidate('bstream-warprows',
                     dict(msplit=4, bsz=24, ld='cg', st='cg'),
                     {'compute_capability': (9, 0)})
    src, _ = mm.render(cand, np.float64, 'k0')
    assert '__launch_bounds__(128)' in src
    assert '__ldcg(' in src and '__stcg(' in src and '__ldcs(' not in src
    long = random_operator(rng, 150, 125, 0.3)
    assert np.count_nonzero(long) >= 4*1000
    src, _ = CUDAMatMul(long, n=1000, ldb=1000, ldc=1000).render(
        cand, np.float64, 'k0')
    assert '__launch_bounds__(128, 1)' in src


def test_warprows_estimate_capped_on_cuda(rng, monkeypatch):
    """CUDA offers bstream-warprows up to its max_registers estimate (the
    builds above it ran 1.5-2.1x their operator's best): lifted, the cap's
    builds come back and are exactly the ones over it."""
    from gimmik.families.bstream_warprows import BstreamWarpRows
    dt = check_dtype('float64')
    cap = BstreamWarpRows.max_registers['cuda']

    def warprows(A):
        mm = CUDAMatMul(A, beta=1.0, aligne=4)
        return {c.variant: mm.kernel(c, dt).registers()
                for c in mm._candidates(dt, (9, 0))
                if c.family == 'bstream-warprows'}

    # two of the suite's operators whose builds cross the cap (random
    # sparse ones of their shapes often get no warp-rows offer at all)
    # and a random one under it
    ops = [*suite(['p4-hex-m3', 'p6-hex-m3']).values(),
           random_operator(rng, 200, 150, 0.05)]
    kept = [warprows(A) for A in ops]
    monkeypatch.setattr(BstreamWarpRows, 'max_registers', {})
    every = [warprows(A) for A in ops]
    assert any(est > cap for e in every for est in e.values())
    assert any(kept)
    for k, e in zip(kept, every):
        assert k == {v: est for v, est in e.items() if est <= cap}


def baked_cut(ranked, one):
    """The first BAKED_OFFER one-column variants, and the first of another
    family where those share one."""
    from gimmik.cuda import BAKED_OFFER
    fam = {c.variant: c.family for c in ranked}
    head = one[:BAKED_OFFER]
    other = [v for v in one if fam[v] != fam[head[0]]]
    if other and len({fam[v] for v in head}) == 1:
        head = head + other[:1]
    return head


def test_baked_cut_adds_a_second_family_below_its_bound(rng):
    """Where the first BAKED_OFFER with n baked are of one family, the best
    of another comes fourth, up to BAKED_SECOND_FAMILY_MAX_NNZ non-zeros."""
    from gimmik.cuda import BAKED_OFFER, BAKED_SECOND_FAMILY_MAX_NNZ
    sizes = dict(n=4096, ldb=4096, ldc=4096)
    seen = set()
    for m, k, density in ((120, 68, 0.09), (150, 125, 0.04),
                          (300, 400, 0.06), (180, 160, 0.3)):
        A = random_operator(rng, m, k, density)
        mm = CUDAMatMul(A, aligne=4, **sizes)
        ranked = mm.candidates(np.float64)
        one = [c.variant for c in ranked if c.params.get('width', 1) == 1]
        offered = [meta['variant'] for _, meta in mm.kernels(np.float64)]
        families = [v.split('/')[0] for v in offered]
        if mm.info.nnz > BAKED_SECOND_FAMILY_MAX_NNZ:
            assert offered == one[:BAKED_OFFER]
            seen.add('over')
        elif len(set(families[:BAKED_OFFER])) == 1:
            assert len(offered) == BAKED_OFFER + 1
            assert families[-1] != families[0]
            assert offered == baked_cut(ranked, one)
            seen.add('added')
        else:
            assert offered == one[:BAKED_OFFER]
    assert seen == {'over', 'added'}


def test_baked_n_offers_fewer_candidates_of_big_operators(rng):
    """With n baked, an operator with many non-zeros is offered only the
    first BAKED_OFFER of its ranked one-column candidates (each costs its
    client a compile), a dense one its first BAKED_OFFER_DENSE tensor-core
    tiles; candidates() still lists them all, and neither a small
    operator nor an unbaked generator is cut."""
    from gimmik.cuda import (BAKED_MMA_ONLY_NNZ, BAKED_OFFER,
                             BAKED_OFFER_DENSE, BAKED_OFFER_MIN_NNZ)
    big = random_operator(rng, 150, 125, 0.05)
    assert (big != 0).sum() >= BAKED_OFFER_MIN_NNZ
    small = random_operator(rng, 20, 25, 0.2)
    for A, cut in ((big, True), (small, False)):
        for sizes in (dict(n=4096, ldb=4096, ldc=4096), {}):
            mm = CUDAMatMul(A, aligne=2, **sizes)
            ranked = mm.candidates(np.float64)
            assert len(ranked) > BAKED_OFFER
            offered = [meta['variant'] for _, meta in
                       mm.kernels(np.float64)]
            if cut and sizes:
                one = [c.variant for c in ranked
                       if c.params.get('width', 1) == 1]
                assert any(c.params.get('width') == 2 for c in ranked)
                assert offered == baked_cut(ranked, one)
            else:
                assert offered == [c.variant for c in ranked]
    dense = rng.standard_normal((60, 60))
    assert dense.size >= BAKED_MMA_ONLY_NNZ
    mm = CUDAMatMul(dense, aligne=2, n=4096, ldb=4096, ldc=4096)
    offered = list(mm.kernels(np.float64))
    mma = [c.variant for c in mm.candidates(np.float64)
           if c.family == 'mma-gemm']
    assert len(mma) > BAKED_OFFER_DENSE
    assert [meta['variant'] for _, meta in offered] == \
        mma[:BAKED_OFFER_DENSE]


# -- B load hints by the size of the B panel ---------------------------------
_B_CS = re.compile(r'__ldcs\(\(?(const \w+\*\))?\(?b\b')


def _cs_variants(mm):
    return {c.variant for c in mm.candidates(np.float64)
            if c.params.get('ld') in ('cs', 'plain')}


def test_evict_first_b_loads_only_below_many_l2s(rng):
    """With n baked, the rows loading B evict-first load it plainly where
    the panel (rows of B used x n) has more than PLAIN_B_MIN_VALUES values,
    and keep 'cs' below it and with n at run time."""
    from gimmik import cuda
    A = random_operator(rng, 24, 40, 0.3)
    A[:, 7] = 0.0
    used = int((A != 0).any(axis=0).sum())
    over = cuda.PLAIN_B_MIN_VALUES // used + 1
    under = cuda.PLAIN_B_MIN_VALUES // used
    big = CUDAMatMul(A, n=over, ldb=over, ldc=over)
    small = CUDAMatMul(A, n=under, ldb=under, ldc=under)
    runtime = CUDAMatMul(A)
    assert all('ldplain' in v for v in _cs_variants(big))
    for mm in (small, runtime):
        vs = _cs_variants(mm)
        assert vs and all('ldcs' in v for v in vs)
    # the same candidates otherwise, and no evict-first B load in the source
    assert ({v.replace('ldplain', 'ldcs') for v in _cs_variants(big)}
            == _cs_variants(small))
    for src, meta in big.kernels(np.float64):
        if 'ldplain' in meta['variant']:
            assert not _B_CS.search(src), meta['variant']
    for src, meta in small.kernels(np.float64):
        if 'ldcs' in meta['variant']:
            assert _B_CS.search(src), meta['variant']


@pytest.mark.skipif(GXX is None, reason='g++ is not installed')
@pytest.mark.parametrize('beta', [
    pytest.param(0.0, marks=pytest.mark.full), -0.5])
def test_plain_b_loads_emulated(rng, monkeypatch, beta):
    """Every plain-load candidate (the limit lowered so that a small panel
    is 'many L2s') runs exactly on the CPU: ragged n, padded ldb/ldc, C
    poisoned where beta is 0, the padding untouched."""
    from gimmik import cuda
    A = random_operator(rng, 13, 11, 0.4)
    n, ldb, ldc = 45, 48, 50
    monkeypatch.setattr(cuda, 'PLAIN_B_MIN_VALUES', 8)
    mm = CUDAMatMul(A, beta=beta, aligne=2, n=n, ldb=ldb, ldc=ldc)
    plain = [(s, m) for s, m in mm.kernels(np.float64)
             if 'ldplain' in m['variant']]
    assert len(plain) >= 3
    for src, meta in plain:
        _assert_emulated_exact(rng, A, beta, src, meta, n, ldb, ldc)


def _assert_emulated_exact(rng, A, beta, src, meta, n, ldb, ldc):
    """One candidate run on the CPU on fresh padded panels (C poisoned
    where beta is 0) is within 1e-13 of NumPy's, its padding untouched."""
    m, k = A.shape
    B = rng.standard_normal((k, ldb))
    C = rng.standard_normal((m, ldc))
    C[:, n:] = 9.0
    ref = A @ B[:, :n] + beta*C[:, :n]
    if beta == 0:
        C[:, :n] = np.nan
    out = emulate(src, meta, B, C, n)
    scale = np.abs(A) @ np.abs(B[:, :n]) + abs(beta)*np.abs(ref) + 1
    assert np.isfinite(out[:, :n]).all(), meta['variant']
    assert (np.abs(out[:, :n] - ref) <= 1e-13*scale).all(), meta['variant']
    assert (out[:, n:] == 9.0).all(), meta['variant']


def _mma_variants(mm):
    return {m['variant']: src for src, m in mm.kernels(np.float64)
            if m['variant'].startswith('mma-gemm')}


def test_mma_stores_keep_c_in_l2_only_where_it_fits(rng):
    """With n baked, the mma-gemm tiles store C with __stcg (kept in L2 for
    the kernel that reads it) where the C panel fits the L2, and
    evict-first (__stcs) beyond it and with n at run time; nothing else
    about the candidates changes."""
    from gimmik import cuda
    A = rng.standard_normal((64, 48))
    fits = cuda.CUDA_L2 // (64*8)
    fits -= fits % 2
    over = fits + 2
    kept = _mma_variants(CUDAMatMul(A, aligne=2, n=fits, ldb=fits, ldc=fits))
    assert kept and all('/stcg' in v for v in kept)
    for src in kept.values():
        assert '__stcg(' in src and '__stcs(' not in src
    beyond = _mma_variants(CUDAMatMul(A, aligne=2, n=over, ldb=over,
                                      ldc=over))
    assert {v.replace('/stcg', '') for v in kept} == set(beyond)
    for evict in (beyond, _mma_variants(CUDAMatMul(A, aligne=2))):
        assert evict and not any('/stcg' in v for v in evict)
        for src in evict.values():
            assert '__stcs(' in src and '__stcg(' not in src


@pytest.mark.skipif(GXX is None, reason='g++ is not installed')
@pytest.mark.parametrize('beta', [0.0, 1.0])
def test_mma_stcg_candidates_emulated(rng, beta):
    """The mma-gemm candidates storing C by __stcg run exactly on the CPU:
    ragged n, padded ldb/ldc, C poisoned where beta is 0, the padding
    untouched."""
    A = rng.standard_normal((40, 36))
    n, ldb, ldc = 77, 80, 82
    mm = CUDAMatMul(A, beta=beta, aligne=2, n=n, ldb=ldb, ldc=ldc)
    kept = [(s, m) for s, m in mm.kernels(np.float64)
            if '/stcg' in m['variant']]
    assert len(kept) >= 2
    for src, meta in kept[:3]:
        _assert_emulated_exact(rng, A, beta, src, meta, n, ldb, ldc)
