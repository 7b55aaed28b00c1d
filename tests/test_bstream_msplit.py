"""bstream-msplit (gimmik.families.bstream_msplit) in load batches on HIP:
its chunks staged in batches of at least batch_loads loads a wave and C's
old values read in runs run exactly in the CPU executor (ragged n, padded
strides, beta 0, 1 and -0.5, f32 and f64, n baked and not, 2, 3 and 4
waves, a chunk a wave shares unevenly); the runs cover the rows that read
C; a perturbed bake is caught; the CUDA rendering has no batches."""

import itertools
import re

import numpy as np
import pytest

from conftest import HIP_OPTS, random_operator, run_hip_candidate
from gimmik import CUDAMatMul, HIPMatMul
from gimmik.base import Candidate
from gimmik.targets import HIP

OPTS = HIP_OPTS

# (m, msplit, bsz): 4 waves of 4 rows a chunk, 2 of 8, 3 waves sharing 16
# rows unevenly (a wave loads 6, the others 5)
ROWS = [dict(msplit=4, bsz=16, width=1),
        dict(msplit=2, bsz=16, width=2, ld='cs'),
        dict(msplit=3, bsz=16, width=1),
        dict(msplit=2, bsz=8, width=2, preload_c=True),
        dict(msplit=4, bsz=16, width=2)]
COMBOS = list(itertools.product((np.float64, np.float32), (0.0, 1.0, -0.5),
                                (False, True)))


def wide_operator(rng, m=21, k=70, density=0.25):
    """Several chunks of B rows (the last ragged), a zero row of A and an
    unused row of B."""
    A = random_operator(rng, m, k, density)
    A[4] = 0
    A[:, 9] = 0
    return A


def run_one(rng, A, params, dtype, beta, baked, **kw):
    return run_hip_candidate(rng, A, 'bstream-msplit', params, dtype, beta,
                             baked, aligne=2, **kw)


@pytest.mark.parametrize('dtype,beta,baked', COMBOS,
                         ids=lambda x: getattr(x, '__name__', str(x)))
def test_batched_rows_emulated(rng, dtype, beta, baked):
    """Two rows a combination, in turn: every row meets several
    combinations across the run."""
    A = wide_operator(rng)
    idx = COMBOS.index((dtype, beta, baked))
    for params in (ROWS[idx % len(ROWS)], ROWS[(idx + 2) % len(ROWS)]):
        if params.get('preload_c') and beta == 0:
            continue
        p, meta = run_one(rng, A, params, dtype, beta, baked)
        p.check(f'{meta["variant"]} {np.dtype(dtype).name} beta={beta} '
                f'baked={baked}')


def test_batches_hold_several_chunks(rng):
    """The operator's chunks are loaded two at a time by 4 waves of 4 rows
    a chunk: the batches the kernel walks are the plan's."""
    A = wide_operator(rng)
    mm = HIPMatMul(A, beta=1.0, aligne=2)
    fam = mm.kernel(Candidate('bstream-msplit', ROWS[0], OPTS), np.float64)
    assert fam.plan.batches[0] == [0, 1]
    assert fam.plan.nstage >= 8
    src, _ = mm.render(Candidate('bstream-msplit', ROWS[0], OPTS),
                       np.float64)
    # the first batch: 8 staging registers a wave loaded before chunk 0's
    # LDS writes
    head = src[:src.index('__syncthreads')]
    assert all(f'st{s} = ' in head for s in range(8))


@pytest.mark.parametrize('beta', [1.0, -0.5])
def test_c_runs_cover_the_rows_that_read_c(rng, beta):
    A = wide_operator(rng)
    mm = HIPMatMul(A, beta=beta, aligne=2)
    fam = mm.kernel(Candidate('bstream-msplit', ROWS[0], OPTS), np.float64)
    crows = fam.crows()
    for (r0, r1), runs in zip(fam.plan.groups, crows):
        rows = [i for run in runs for i in run]
        zero = [i for i in range(r0, r1) if not A[i].any()]
        want = [i for i in range(r0, r1) if beta != 1 or i not in zero]
        assert rows == want
        assert all(len(run) >= HIP.batch_loads for run in runs[:-1])
    assert fam.live_values() >= fam.plan.nacc + max(
        len(run) for runs in crows for run in runs)


def test_c_joins_the_last_batch_where_either_is_short(rng):
    """C's old values are loaded with the last batch's B rows where a
    wave stages fewer than a batch of B or reads fewer of C, else in runs
    after the last chunk; the old values each load once in the kernel."""
    seen = set()
    # a random operator may land every row set on one side: three sizes
    for A, params in itertools.product(
            (wide_operator(rng), wide_operator(rng, m=8, k=20),
             wide_operator(rng, m=48, k=140, density=0.5)), ROWS):
        if params.get('preload_c'):
            continue
        mm = HIPMatMul(A, beta=1.0, aligne=2)
        cand = Candidate('bstream-msplit', params, OPTS)
        fam = mm.kernel(cand, np.float64)
        plan = fam.plan
        nb = sum(len(plan.loads[q][0]) for b in plan.batches for q in b)
        nc = sum(map(len, fam.cruns()))
        short = min(nb, nc) < HIP.batch_loads
        assert fam.c_joins() == short
        seen.add(short)
        src, _ = mm.render(cand, np.float64)
        for a in (a for run in fam.cruns() for a in run):
            assert len(re.findall(rf'\bcin{a} = ', src)) == 1
        if short:
            # loaded ahead of the last batch's B rows
            last = max(src.index(f'st{s} = ')
                       for q in plan.batches[-1] for s in plan.slots[q][0])
            assert all(src.index(f'cin{a} = ') < last
                       for a in fam.cruns()[0])
    assert seen == {False, True}


def test_loads_are_one_code_for_every_wave(rng):
    """Batched, no global load is inside a wave's case: each staging
    register and each accumulator's preloaded C is loaded once in the
    kernel, the row chosen by the wave's index."""
    A = wide_operator(rng)
    for params in ROWS:
        mm = HIPMatMul(A, beta=1.0, aligne=2)
        cand = Candidate('bstream-msplit', params, OPTS)
        fam = mm.kernel(cand, np.float64)
        src, _ = mm.render(cand, np.float64)
        for case in re.split(r'switch \(wave\)', src)[1:]:
            body = case[:case.index('\n    }\n')]
            # B's loads and C's (a dereference: load_c)
            assert '(b + ' not in body and '(*' not in body
        for s in range(fam.plan.nstage):
            assert len(re.findall(rf'\bst{s} = ', src)) == \
                sum(s in fam.plan.slots[q][0] for b in fam.plan.batches
                    for q in b)


def test_no_c_runs_where_c_is_not_read_in_the_finish(rng):
    A = wide_operator(rng)
    for beta, params in ((0.0, ROWS[0]), (1.0, ROWS[3])):
        mm = HIPMatMul(A, beta=beta, aligne=2)
        fam = mm.kernel(Candidate('bstream-msplit', params, OPTS),
                        np.float64)
        assert fam.crows() is None


def test_cuda_renders_one_chunk_a_batch(rng):
    A = wide_operator(rng)
    mm = CUDAMatMul(A, beta=1.0, aligne=2)
    cand = Candidate('bstream-msplit', dict(msplit=4, bsz=16, width=1),
                     {'compute_capability': (9, 0)})
    fam = mm.kernel(cand, np.float64)
    assert fam.plan.batches == [[q] for q in range(len(fam.plan.chunks))]
    assert fam.crows() is None


def test_wrong_bake_is_caught(rng):
    """A plan with one value changed gives a wrong C in the executor."""
    A = wide_operator(rng)

    def mutate(plan):
        q, y = next((q, y) for q in range(len(plan.chunks))
                    for y in range(len(plan.groups)) if plan.updates[q][y])
        a, v, r, first = plan.updates[q][y][0]
        plan.updates[q][y][0] = (a, v + 1.0, r, first)

    p, _ = run_one(rng, A, ROWS[0], np.float64, 1.0, True, mutate=mutate)
    with pytest.raises(AssertionError, match='relative error'):
        p.check('mutated')


def test_batches_past_the_register_limit_not_offered(rng):
    """Where batches take the estimate past the limit (f64, 4 waves of 82
    rows: 4 staged values a wave fit, a batch of 10 does not), the
    candidate keeps its batches and is not offered (one chunk a batch
    would wait for every 4 loads); the kernel still runs exactly."""
    A = np.zeros((328, 40))
    for i in range(328):
        A[i, [(i + d) % 40 for d in range(3)]] = rng.standard_normal(3)
    mm = HIPMatMul(A, beta=1.0, aligne=2)
    cand = Candidate('bstream-msplit', ROWS[0], OPTS)
    fam = mm.kernel(cand, np.float64)
    assert fam.min_loads == HIP.batch_loads
    assert fam.plan == fam._plan(HIP.batch_loads)
    assert fam.registers() > fam.register_limit()
    assert not mm.registers_fit(fam)
    offered = [m['variant'] for _, m in mm.kernels(
        np.float64, gcn_arch='gfx942', warp_size=64)]
    assert offered and cand.variant not in offered
    p, meta = run_one(rng, A, ROWS[0], np.float64, 1.0, False, n=67)
    p.check(meta['variant'])


def test_cuda_offers_no_msplit_its_block_cannot_hold(rng):
    """CUDA offers an m-split only where its block leaves each thread its
    register_factor times its estimate; the many-warp blocks of a heavy
    operator are dropped, the smaller ones stay."""
    from gimmik.families.bstream_msplit import BstreamMsplit
    factor = BstreamMsplit.register_factor['cuda']
    A = random_operator(rng, 384, 512, 0.016)
    mm = CUDAMatMul(A)
    offered = [c for c in mm.candidates(np.float64)
               if c.family == BstreamMsplit.name]
    assert offered
    for c in offered:
        kern = mm.kernel(c, np.float64)
        block = kern.geometry().block
        cap = min(255, 65536 // (block[0]*block[1]))
        assert kern.registers()*factor <= cap, c.variant
    splits = {c.params['msplit'] for c in offered}
    # the table's 32-warp row bound to this operator would not fit
    big = Candidate('bstream-msplit', dict(bsz=16, msplit=32, width=1,
                                           ld='cs'),
                    {'compute_capability': (9, 0)})
    kern = mm.kernel(big, np.float64)
    assert kern.registers()*factor > 65536 // (32*32)
    assert 32 not in splits and splits & {4, 8}
