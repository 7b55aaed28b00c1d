"""cstream-kparts (gimmik.families.cstream_kparts): the plan (parts,
groups, roles, slots) follows from A's pattern; the kernels run exactly
in both GPU executors (f32/f64, beta 0, 1 and -0.5, n baked or at run
time, ragged n, padded strides, zero rows, one and several row groups) and
a changed value is caught; the family is offered only where it reads few
B rows."""

import dataclasses

import numpy as np
import pytest

from conftest import GPU_RUNS, divergence_like, gradient_like, run_candidate
from gimmik import CUDAMatMul, HIPMatMul
from gimmik.base import Candidate
from gimmik.families.cstream_kparts import (KPARTS_MAX_READS,
                                            CstreamKparts, kparts_plan,
                                            kparts_reads)

CUDA = {'compute_capability': (9, 0)}


def test_plan_roles_and_reads(rng):
    """Three parts (the derivatives), one row group: every row crosses all
    three parts (first, add, last, one slot each); each part's groups are
    lines of p points, which share no B row, so each used B row is loaded
    once; every term of A is in the plan once."""
    p = 3
    A = divergence_like(rng, p)
    plan = kparts_plan(A, 1, 3, 32, 2)
    assert len(plan) == 1 and plan[0].slots == p**3
    roles = {}
    terms = {}
    for part in plan[0].parts:
        for warp in part:
            for g in warp:
                assert len(g.loads) == p
                for row in g.rows:
                    roles.setdefault(row.i, []).append(row.role)
                    assert row.slot == row.i
                    for j, v in row.terms:
                        assert j in g.loads
                        terms[row.i, j] = v
    assert all(r == ['first', 'add', 'last'] for r in roles.values())
    nz = {(i, j): A[i, j] for i, j in zip(*np.nonzero(A))}
    assert terms == nz
    assert kparts_reads(plan) == A.shape[1]
    # two row groups: the third part's lines cross them, read twice
    two = kparts_plan(A, 2, 3, 32, 2)
    assert len(two) == 2
    assert A.shape[1] < kparts_reads(two) <= KPARTS_MAX_READS*A.shape[1]


def test_batches(rng):
    """With min_loads, a warp's groups merge in order into batches of at
    least that many B rows (the last of a warp may have fewer), each B
    row loaded once a batch; the rows and terms stay the same."""
    A = divergence_like(rng, 4)
    plain = kparts_plan(A, 1, 3, 32, 2)
    batched = kparts_plan(A, 1, 3, 32, 2, min_loads=8)
    for part, bpart in zip(plain[0].parts, batched[0].parts):
        for warp, bwarp in zip(part, bpart):
            assert [r for g in warp for r in g.rows] == \
                [r for g in bwarp for r in g.rows]
            assert all(len(g.loads) >= 8 for g in bwarp[:-1])
            assert all(len(set(g.loads)) == len(g.loads) for g in bwarp)
            assert len(bwarp) < len(warp)


def test_warps_balanced(rng):
    A = divergence_like(rng, 4)
    plan = kparts_plan(A, 1, 3, 32, 4)
    for part in plan[0].parts:
        cost = [sum(len(g.loads) + sum(len(r.terms) for r in g.rows)
                    for g in warp) for warp in part]
        assert max(cost) - min(cost) <= max(cost) // 2
        assert all(cost)



@pytest.mark.parametrize('platform,dtype,beta,baked', GPU_RUNS,
                         ids=lambda x: getattr(x, '__name__', str(x)))
def test_emulated(rng, platform, dtype, beta, baked):
    """Zero rows, a row in one part only, one and two row groups: exact in
    the platform's executor with ragged n and padded strides."""
    A = divergence_like(rng, 3)
    A[[4, 20]] = 0
    A[7, 27:] = 0
    for groups, warps in ((1, 3), (2, 2)):
        params = dict(parts=3, groups=groups, shared=16, warps=warps)
        p, meta = run_candidate(rng, platform, A, 'cstream-kparts', params,
                                dtype, beta, baked, n=77, aligne=2)
        p.check(f'{meta["variant"]} {np.dtype(dtype).name} beta={beta}')
        assert meta['row_groups'] == groups
        assert meta['block'][1] == warps


@pytest.mark.parametrize('platform', ['hip', 'cuda'])
def test_wrong_bake_is_caught(rng, platform):
    A = divergence_like(rng, 3)

    def mutate(plan):
        blk = plan[-1]
        g = blk.parts[-1][0][0]
        row = g.rows[0]
        (j, v), *rest = row.terms
        row = dataclasses.replace(row, terms=((j, v + 1.0), *rest))
        g = dataclasses.replace(g, rows=(row,) + g.rows[1:])
        warp = (g,) + blk.parts[-1][0][1:]
        part = (warp,) + blk.parts[-1][1:]
        plan[-1] = dataclasses.replace(blk, parts=blk.parts[:-1] + (part,))

    p, _ = run_candidate(rng, platform, A, 'cstream-kparts',
                         dict(parts=3, groups=1, shared=16, warps=2),
                         np.float64, 0.0, True, n=45, aligne=2,
                         mutate=mutate)
    with pytest.raises(AssertionError, match='relative error'):
        p.check('mutated')


def test_offered_where_it_reads_few_b_rows(rng):
    """Offered on a gradient's transpose (each B row read once or twice)
    on sm_90 and on HIP; not on sm_80, nor on the gradient itself (no row crosses parts: its rows are one
    derivative each) nor on a dense operator (every part's groups read
    every B row of the part, once a row group, but rows share all)."""
    def offered(A):
        return [c for c in CUDAMatMul(A).candidates(np.float64, **CUDA)
                if c.family == CstreamKparts.name]
    assert offered(divergence_like(rng, 4))
    assert not offered(gradient_like(rng, 4))
    # measured on sm_90 only, its launch bound an sm_90 SM's blocks
    assert not [c for c in CUDAMatMul(divergence_like(rng, 4)).candidates(
        np.float64, compute_capability=(8, 0))
        if c.family == CstreamKparts.name]
    # HIP: on operators of more than 64 rows (gate bigm), every offered one
    # within a CU's LDS
    mm = HIPMatMul(divergence_like(rng, 5))
    hip = [c for c in mm.candidates(np.float64, gcn_arch='gfx942',
                                    warp_size=64)
           if c.family == CstreamKparts.name]
    assert hip
    for c in hip:
        assert mm.kernel(c, np.float64).geometry().shared <= 64*1024
    dense = rng.uniform(1.0, 2.0, (40, 120))
    mm = CUDAMatMul(dense)
    assert CstreamKparts.adapt(mm, dict(parts=3, groups=4, shared=8,
                                        warps=2)) is None
