"""HIPMatMul: the candidate contract, the families' launch limits, and every
candidate's numerics in the CPU executor."""

import itertools
import re
import zlib

import numpy as np
import pytest

from conftest import HIP_OPTS, Panels, random_operator, run_hip_candidate
from gimmik import CUDAMatMul, HIPMatMul, generate_mm
from gimmik.base import Candidate, MAX_SHARED, MAX_THREADS
from gimmik.emulate import run_hip
from gimmik.hip import CANDIDATES, PADDED_TAIL_MAX_ROWS

STREAMING = {'cstream', 'bstream', 'bstream-msplit', 'cstream-ksplit'}


def sample_operator(rng):
    A = random_operator(rng, 20, 15, 0.35)
    A[3] = 0                               # an all-zero row
    A[:, 7] = 0                            # an unused row of B
    return A


def pyfr_subset():
    """Small PyFR operators for the default run (all of them with --full)."""
    ops = pytest.importorskip('gimmik.operators')
    return ops.suite()


# -- the contract ---------------------------------------------------------

def test_meta_contract(rng):
    A = sample_operator(rng)
    for baked in (False, True):
        kw = dict(n=1000, ldb=1002, ldc=1004) if baked else {}
        mm = HIPMatMul(A, beta=0.5, aligne=2, **kw)
        metas = [meta for _, meta in mm.kernels(np.float64)]
        assert {m['tplname'] for m in metas} == STREAMING
        variants = [m['variant'] for m in metas]
        assert len(set(variants)) == len(variants)
        for meta in metas:
            assert len(meta['block']) == 3
            assert np.prod(meta['block']) <= MAX_THREADS
            assert 0 <= meta['shared'] <= MAX_SHARED
            assert meta['width'] in (1, 2)
            if baked:
                assert meta['args'] == ('b', 'c')
                cols = meta['block'][0]*meta['width']
                assert meta['grid'] == (-(-1000 // cols), 1, 1)
            else:
                assert meta['args'] == ('n', 'b', 'ldb', 'c', 'ldc')
                assert 'grid' not in meta
            grid, block = mm.launch_config(meta, 777)
            assert block == meta['block']
            assert grid[0]*block[0]*meta['width'] >= 777
            assert (grid[0] - 1)*block[0]*meta['width'] < 777


def test_gates(rng):
    A = sample_operator(rng)
    odd = [m['variant'] for _, m in HIPMatMul(A).kernels('f64')]
    assert odd and not any('width2' in v for v in odd)
    assert not any('preload_c' in v for v in odd)       # beta = 0
    even = [m['variant'] for _, m in HIPMatMul(
        A, aligne=2, n=300, ldb=300, ldc=300).kernels('f32')]
    assert any('width2' in v for v in even)
    # at run time n a two-column thread's block covers 2*block[0] columns:
    # PyFR main's ceil(n/block[0]) grid would launch twice the blocks
    runtime = [m for _, m in HIPMatMul(A, aligne=2).kernels('f32')]
    assert runtime and all(
        m['launch']['grid'][0]['div'] <= 1.1*m['launch']['grid'][0].get(
            'mul', 1)*m['block'][0] for m in runtime)
    assert not any('width2' in m['variant'] for m in runtime)
    beta = [m['variant'] for _, m in HIPMatMul(A, beta=2).kernels('f32')]
    assert any('preload_c' in v for v in beta)


def test_table_rows_are_unique():
    keys = [(row.family, tuple(sorted(row.params.items())))
            for row in CANDIDATES]
    assert len(keys) == len(set(keys))


def test_launch_limits_never_exceeded():
    """Wide operators with large LDS needs drop candidates instead."""
    A = np.ones((600, 300))
    for _, meta in HIPMatMul(A, beta=1.0, aligne=2).kernels('f64'):
        assert meta['shared'] <= MAX_SHARED
        assert np.prod(meta['block']) <= MAX_THREADS
    ks = [m for _, m in HIPMatMul(A).kernels('f64')
          if m['tplname'] == 'cstream-ksplit']
    assert not ks                          # 3*600*64*8 bytes > 64 KiB


def test_plain_b_loads_are_the_default(rng):
    mm = HIPMatMul(sample_operator(rng), aligne=2)
    base = dict(width=2, msplit=2, bsz=16)
    opts = {'gcn_arch': 'gfx942', 'warp_size': 64}

    def render(**params):
        cand = Candidate('bstream-msplit', {**base, **params}, opts)
        return mm.render(cand, np.float64)[0]

    plain, off, on = render(), render(ld='plain'), render(ld='cs')
    assert off == plain
    assert '__builtin_nontemporal_load' not in plain
    assert '__builtin_nontemporal_load' in on


C_READ = re.compile(r'\(\*(\(gimmik_v2\*\))?\(c \+')


def test_beta_zero_never_reads_c(rng):
    A = sample_operator(rng)
    for src, meta in HIPMatMul(A, aligne=2).kernels('f64'):
        assert not C_READ.search(src), meta['variant']
    for src, meta in HIPMatMul(A, beta=0.5, aligne=2).kernels('f64'):
        assert C_READ.search(src), meta['variant']


def test_values_printed_exactly():
    A = np.array([[0.1, 1/3], [1e-300, 5e-324]])
    src = generate_mm(A, 'f64', 'hip')
    for x in A.ravel():
        assert repr(float(x)) in src


def test_generate_mm_alpha_and_name(rng):
    A = sample_operator(rng)
    src = generate_mm(A, np.float64, 'hip', alpha=2.0, funcn='my_kernel')
    assert 'my_kernel(' in src
    first, meta = next(HIPMatMul(2.0*A).kernels(np.float64, kname='my_kernel'))
    assert src == first


@pytest.mark.parametrize('kwargs,exc,what', [
    (dict(beta=float('nan')), ValueError, 'beta'),
    (dict(n=10), ValueError, 'ldb'),
    (dict(n=10, ldb=8, ldc=10), ValueError, 'ldb'),
    (dict(n=10, ldb=10, ldc=10, aligne=3), ValueError, 'aligne'),
])
def test_constructor_errors(rng, kwargs, exc, what):
    with pytest.raises(exc, match=what):
        HIPMatMul(sample_operator(rng), **kwargs)


@pytest.mark.parametrize('kwargs,exc,what', [
    (dict(dtype=np.int32), TypeError, 'dtype'),
    (dict(dtype='f64', kname='do'), ValueError, 'kname'),
    (dict(dtype='f64', gcn_arch='sm_90'), ValueError, 'gcn_arch'),
    (dict(dtype='f64', warp_size=48), ValueError, 'warp_size'),
])
def test_kernels_errors_before_any_source(rng, kwargs, exc, what):
    mm = HIPMatMul(sample_operator(rng))
    with pytest.raises(exc, match=what):
        mm.kernels(**kwargs)


def test_send_feedback_prunes_slow_families(rng):
    mm = HIPMatMul(sample_operator(rng), aligne=2)
    gen = mm.kernels('f64')
    src, meta = gen.send(None)
    seen = [meta['tplname']]
    try:
        while True:
            slow = meta['tplname'] != 'bstream-msplit'
            src, meta = gen.send({'runtime': 10.0 if slow else 1.0})
            seen.append(meta['tplname'])
    except StopIteration:
        pass
    everything = [m['tplname'] for _, m in mm.kernels('f64')]
    assert len(seen) < len(everything)
    # once bstream-msplit is 10x faster, a slow family is offered once
    # more at most (its first result, if it had none) and no more
    fast = seen.index('bstream-msplit')
    for fam in STREAMING - {'bstream-msplit'}:
        after = seen[fast:].count(fam)
        assert after <= (0 if fam in seen[:fast] else 1), fam


# -- numerics in the executor ---------------------------------------------

def run_all(A, dtype, beta, baked, rng, n=301, pad=(3, 5), aligne=2,
            only=None):
    """Run every candidate (or the `only`-th ones) and check each."""
    lb, lc = n + pad[0], n + pad[1]
    if aligne:
        lb, lc = -(-lb // aligne)*aligne, -(-lc // aligne)*aligne
    kw = dict(n=n, ldb=lb, ldc=lc) if baked else {}
    mm = HIPMatMul(A, beta=beta, aligne=aligne, **kw)
    count = 0
    for idx, (src, meta) in enumerate(mm.kernels(dtype)):
        if only is not None and not only(idx, meta):
            continue
        p = Panels(rng, A, beta, dtype, n, lb, lc)
        run_hip(src, meta, p.b, p.c)
        p.check(f'{meta["variant"]} {np.dtype(dtype).name} beta={beta} '
                f'baked={baked}')
        count += 1
    return count


COMBOS = list(itertools.product((np.float64, np.float32), (0.0, 1.0, 0.5),
                                (False, True)))


@pytest.mark.parametrize('dtype,beta,baked', COMBOS,
                         ids=lambda x: getattr(x, '__name__', str(x)))
def test_every_candidate_random_operator(rng, dtype, beta, baked):
    # at run-time n no two-columns-a-thread candidates (MAX_OVERLAUNCH)
    assert run_all(sample_operator(rng), dtype, beta, baked,
                   rng) >= (9 if baked else 6)


@pytest.mark.parametrize('dtype,beta,baked', COMBOS,
                         ids=lambda x: getattr(x, '__name__', str(x)))
def test_every_candidate_pyfr_subset(rng, dtype, beta, baked):
    """Each candidate meets a different small PyFR operator, so every
    (candidate, dtype, beta, baked) runs once across a few operators."""
    ops = {k: v for k, v in pyfr_subset().items()
           if k.startswith(('p1-', 'p2-')) and max(v.shape) <= 64}
    names = sorted(ops)
    assert len(names) >= 10
    salt = zlib.crc32(f'{dtype.__name__}{beta}{baked}'.encode())
    total = 0
    for pick in range(3):
        name = names[(salt + pick*7919) % len(names)]
        total += run_all(ops[name], dtype, beta, baked, rng, n=197,
                         only=lambda i, m: i % 3 == pick)
    assert total >= (9 if baked else 5)


def test_no_aligne_width_one_only(rng):
    assert run_all(sample_operator(rng), np.float64, 0.5, False, rng,
                   pad=(1, 2), aligne=None) >= 8


@pytest.mark.full
@pytest.mark.parametrize('dtype,beta,baked', COMBOS,
                         ids=lambda x: getattr(x, '__name__', str(x)))
def test_every_candidate_every_pyfr_operator(rng, dtype, beta, baked):
    for name, A in sorted(pyfr_subset().items()):
        run_all(A, dtype, beta, baked, rng, n=261)


# -- two columns a thread with a ragged n: one body -----------------------

@pytest.mark.parametrize('family', ['bstream', 'cstream'])
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
@pytest.mark.parametrize('beta', [0.0, -0.5])
@pytest.mark.parametrize('baked', [False, True])
def test_padded_tail_exact(rng, family, dtype, beta, baked):
    """bstream and cstream at width 2 load a ragged last column's pair
    whole (strides n + 1, the least an even stride leaves) and store its
    first column only: exact, B and C's padding untouched; one copy of
    the body (CUDA keeps a one-column copy)."""
    A = sample_operator(rng)
    p, meta = run_hip_candidate(rng, A, family, dict(width=2), dtype, beta,
                                baked, n=131, pad=(1, 1), aligne=2)
    p.check(f'{meta["variant"]} {np.dtype(dtype).name} beta={beta} '
            f'baked={baked}')
    kw = dict(n=131, ldb=132, ldc=132) if baked else {}
    src, _ = HIPMatMul(A, beta=beta, aligne=2, **kw).render(
        Candidate(family, dict(width=2), HIP_OPTS), dtype)
    assert src.count('if (col < n)') == 1 and 'else if' not in src
    assert src.count('if (col + 1 < n)') == A.shape[0]
    cuda, _ = CUDAMatMul(A, beta=beta, aligne=2, **kw).render(
        Candidate(family, dict(width=2), {'compute_capability': (9, 0)}),
        dtype)
    assert 'else if (col < n)' in cuda


def test_padded_tail_even_baked_n_stores_pairs(rng):
    """With an even n baked no pair is ragged: no test at the stores."""
    A = sample_operator(rng)
    mm = HIPMatMul(A, beta=0.5, aligne=2, n=130, ldb=132, ldc=132)
    for family in ('bstream', 'cstream'):
        src, _ = mm.render(Candidate(family, dict(width=2), HIP_OPTS),
                           np.float64)
        assert 'col + 1 < n' not in src, family


def test_padded_tail_only_for_few_b_rows(rng):
    """From PADDED_TAIL_MAX_ROWS rows of B on, width 2 keeps a one-column
    copy for the ragged pair (the per-row store test of one body made
    clang-19 spill there) and is still exact."""
    A = random_operator(rng, 12, PADDED_TAIL_MAX_ROWS + 2, 0.5)
    A[0] = 1.0                            # every row of B used
    for family in ('bstream', 'cstream'):
        src, _ = HIPMatMul(A, beta=0.5, aligne=2).render(
            Candidate(family, dict(width=2), HIP_OPTS), np.float64)
        assert 'else if (col < n)' in src, family
        p, meta = run_hip_candidate(rng, A, family, dict(width=2),
                                    np.float64, 0.5, False, n=131,
                                    pad=(1, 1), aligne=2)
        p.check(meta['variant'])


# -- load batches fenced ---------------------------------------------------

@pytest.mark.parametrize('beta', [0.0, 1.0])
def test_load_batches_fenced(rng, beta):
    """HIP: a scheduling fence after each load batch of cstream and
    cstream-mblock and each run of bstream (B's and C's); none on CUDA."""
    fence = '__builtin_amdgcn_sched_barrier(0);'
    A = random_operator(rng, 90, 60, 0.3)
    mm = HIPMatMul(A, beta=beta, aligne=2)
    cuda = CUDAMatMul(A, beta=beta, aligne=2)
    rows = [('cstream', dict(width=1)), ('cstream', dict(width=2)),
            ('bstream', dict(width=1)), ('bstream', dict(width=2)),
            ('cstream-mblock', dict(width=1, groups=4))]
    for family, params in rows:
        cand = Candidate(family, params, HIP_OPTS)
        kern = mm.kernel(cand, np.float64)
        if family == 'bstream':
            bruns, cruns = kern.runs()
            want = len(bruns) + len(cruns or [])
        elif family == 'cstream':
            want = len(kern.context()['batches'])
        else:
            want = sum(len(batches) for _, batches in kern.plan)
        if params.get('width') == 2 and family != 'cstream-mblock':
            # many rows of B: a two-column and a one-column copy, each
            # fenced (no padded tail)
            assert len(kern.info.bix) >= PADDED_TAIL_MAX_ROWS
            want *= 2
        src, _ = mm.render(cand, np.float64)
        assert src.count(fence) == want, family
        csrc, _ = cuda.render(Candidate(family, params,
                                        {'compute_capability': (9, 0)}),
                              np.float64)
        assert 'sched_barrier' not in csrc


def test_no_packed_f32_only_for_f32_one_column_staged(rng):
    """The kernels compiled without packed f32 math: f32 bstream-msplit
    and bstream-mgroup with one column a thread (Family.no_packed_f32),
    no other; its macro is empty outside the AMDGPU compiler (the
    executor runs it)."""
    A = random_operator(rng, 40, 36, 0.3)
    mm = HIPMatMul(A, beta=1.0, aligne=2)
    opts = {'gcn_arch': 'gfx942', 'warp_size': 64}
    staged = ('bstream-msplit', 'bstream-mgroup')
    for family, params in (('bstream-msplit', dict(msplit=4, bsz=16,
                                                   width=1)),
                           ('bstream-msplit', dict(msplit=2, bsz=16,
                                                   width=2)),
                           ('bstream-mgroup', dict(msplit=2, rows=8,
                                                   bsz=16, width=1)),
                           ('cstream', dict(width=1))):
        for dtype in (np.float32, np.float64):
            src, _ = mm.render(Candidate(family, params, opts), dtype)
            want = (family in staged and params['width'] == 1
                    and dtype == np.float32)
            assert ('GIMMIK_NO_PACKED_F32 void' in src) == want
            assert ('target("no-packed-fp32-ops")' in src) == want
