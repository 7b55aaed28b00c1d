"""gimmik.cost: the estimate on hand-made work and compiler facts, the
architecture constants, the ranking and its family diversity."""

from dataclasses import replace
import math

import numpy as np
import pytest

from gimmik import cost
from gimmik.cuda import CUDAMatMul
from gimmik.hip import HIPMatMul

SM90 = cost.arch('sm_90')
N = 1 << 20


def stream_work(**kw):
    """A one-thread-per-column kernel: 64 B rows read, 64 C rows written."""
    w = cost.Work(dram_bytes=8*128, l2_bytes=8*128, lds_bytes=0.0,
                  valu_flops=2*1024, matrix_flops=0.0, instructions=40,
                  inflight=8*64, block_threads=128, cols_per_block=128,
                  row_groups=1, straight=True)
    return replace(w, **kw)


FACTS = cost.Facts(registers=64)


def est(w=None, facts=FACTS, a=SM90, n=N):
    return cost.estimate(w or stream_work(), facts, a, n).seconds


# -- constants ---------------------------------------------------------------

@pytest.mark.parametrize('name', ['gfx90a', 'gfx942', 'sm_90'])
def test_constants_present_and_positive(name):
    a = cost.arch(name)
    for field in ('units', 'clock_hz', 'peak_bw', 'copy_bw', 'latency_s',
                  'l2_bw', 'lds_bytes_clk', 'valu_flop_clk',
                  'matrix_flop_clk', 'issue_clk', 'lanes', 'simds',
                  'max_waves', 'regs_per_lane', 'shared_bytes'):
        assert getattr(a, field) > 0, field
    # a copy never beats the vendor's peak
    assert a.copy_bw <= a.peak_bw
    assert a.matrix_flop_clk >= a.valu_flop_clk


def test_constants_have_sources():
    # every Arch(...) field set in ARCHES follows a comment naming where
    # it comes from (or saying ASSUMED/MEASURED)
    import inspect
    from gimmik import targets
    src = inspect.getsource(targets)
    body = src[src.index('class Arch'):src.index('class Target')]
    assert body.count('#') >= 3*len(cost.ARCHES)
    for word in ('data sheet', 'ROCm', 'ASSUMED', 'MEASURED'):
        assert word in body


def test_arch_names():
    assert cost.arch('gfx942:sramecc+:xnack-') is cost.ARCHES['gfx942']
    with pytest.raises(ValueError, match='gfx1100'):
        cost.arch('gfx1100')
    with pytest.raises(TypeError):
        cost.arch(942)


@pytest.mark.parametrize('gcn,want', [
    ('gfx942:sramecc+:xnack-', 'gfx942'), ('gfx942', 'gfx942'),
    ('gfx90a:xnack+', 'gfx90a'), ('gfx940', 'gfx942'), ('gfx950', 'gfx942'),
    ('gfx908', 'gfx90a'), ('gfx1100', cost.DEFAULT_HIP_ARCH),
    ('sm_90', cost.DEFAULT_HIP_ARCH)])
def test_hip_arch(gcn, want):
    assert cost.hip_arch(gcn) == want
    assert cost.arch(cost.hip_arch(gcn)).platform == 'hip'


def test_hip_arch_type():
    with pytest.raises(TypeError, match='gcn_arch'):
        cost.hip_arch(942)


# -- the estimate on hand-made work ----------------------------------------

def test_monotone_in_bytes():
    times = [est(stream_work(dram_bytes=b, l2_bytes=b))
             for b in (256, 512, 1024, 4096, 16384)]
    assert all(x < y for x, y in zip(times, times[1:]))


def test_monotone_in_lds_and_flops():
    base = est()
    assert est(stream_work(lds_bytes=1 << 14)) > base
    assert est(stream_work(valu_flops=1 << 16)) > base
    assert est(stream_work(matrix_flops=1 << 18)) > base


@pytest.mark.parametrize('name', ['gfx90a', 'gfx942', 'sm_90'])
def test_more_waves_never_slower_when_memory_bound(name):
    a = cost.arch(name)
    # little in flight a thread: the resident waves set the bandwidth
    w = stream_work(inflight=8, block_threads=a.lanes*2,
                    cols_per_block=a.lanes*2)
    times = []
    for waves in (1, 2, 3, 4, 6, 8):
        f = cost.Facts(registers=64, waves=waves)
        times.append(cost.estimate(w, f, a, N).seconds)
    assert all(x >= y for x, y in zip(times, times[1:]))
    assert times[0] > times[-1]


def test_monotone_in_full_waits():
    times = [est(facts=cost.Facts(registers=64, full_waits=k))
             for k in (0, 1, 4, 16, 64, 256)]
    assert all(x <= y for x, y in zip(times, times[1:]))
    assert times[-1] > times[0]


def test_spills_cost():
    assert est(facts=cost.Facts(registers=64, spill_bytes=256)) > est()


def test_copy_fraction():
    e = cost.estimate(stream_work(), FACTS, SM90, N)
    # the copy fraction is the copy time of the bytes over the estimate
    assert e.copy_frac == pytest.approx(N*1024 / SM90.copy_bw / e.seconds)
    assert 0 < e.copy_frac < 1
    assert e.bound in e.terms


def test_shared_memory_limits_residency():
    a = SM90
    assert cost.resident_blocks(a, cost.Facts(registers=32), 128) == 16
    assert cost.resident_blocks(
        a, cost.Facts(registers=32, shared=48*1024), 128) == 4
    assert cost.resident_blocks(
        a, cost.Facts(registers=32, shared=300*1024), 128) == 0
    w = stream_work()
    assert math.isinf(cost.estimate(
        w, cost.Facts(registers=32, shared=300*1024), a, N).seconds)


def test_amd_occupancy_rule():
    # facts doc: waves/SIMD = min(8, 512 // roundup8(total VGPRs))
    a = cost.arch('gfx942')
    for regs, waves in ((112, 4), (208, 2), (440, 1), (64, 8)):
        blocks = cost.resident_blocks(a, cost.Facts(registers=regs), 64)
        assert blocks == 4*waves


def test_bad_n():
    with pytest.raises(ValueError):
        cost.estimate(stream_work(), FACTS, SM90, 0)


# -- facts -----------------------------------------------------------------

def test_facts_from_isa_report():
    rep = {'vgprs': 40, 'agprs': 8, 'total_vgprs': 48, 'sgprs': 20,
           'scratch_bytes': 16, 'lds_bytes': 4096, 'occupancy': 8,
           'mfma': 0, 'global_loads': {8: 3}, 'nt_loads': 0, 'vmcnt0': 2,
           'lgkmcnt0': 1, 'instructions': 300}
    f = cost.facts_from_isa(rep)
    assert (f.registers, f.shared, f.spill_bytes, f.waves, f.full_waits,
            f.instructions) == (48, 4096, 16, 8, 2, 300)


# -- the plan's work ----------------------------------------------------------

def _op(m=24, k=16, seed=1, density=1.0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((m, k))
    A[rng.random((m, k)) > density] = 0
    A[0, 0] = 1.0
    return A


def test_work_bytes_per_column():
    A = _op(24, 16)
    A[:, 3] = 0                     # a B row A never uses
    for beta, c in ((0.0, 1), (1.0, 2)):
        mm = CUDAMatMul(A, beta=beta, aligne=16)
        for cand in mm.candidates(np.float64):
            w = cost.work(mm, cand, np.float64)
            assert w.dram_bytes == 8*(15 + c*24), cand.variant
            assert w.l2_bytes >= w.dram_bytes


def test_row_groups_reread_b():
    A = _op(200, 120, density=0.3)
    mm = CUDAMatMul(A, aligne=16)
    cands = [c for c in mm.candidates(np.float64)
             if c.family == 'cstream-mblock']
    assert cands
    for c in cands:
        w = cost.work(mm, c, np.float64)
        assert w.row_groups == c.params['groups']
        # more groups read more of B's rows again, from L2
        assert w.l2_bytes > w.dram_bytes


def test_work_is_the_familys(monkeypatch):
    """cost.work is the candidate's family's (Family.work)."""
    mm = CUDAMatMul(_op(), aligne=16)
    cand = next(c for c in mm.candidates(np.float64)
                if c.family == 'bstream-msplit')
    kern = mm.kernel(cand, np.float64)
    assert cost.work(mm, cand, np.float64) == kern.work()
    mine = replace(kern.work(), dram_bytes=1.0)
    monkeypatch.setattr(type(kern), 'work', lambda self: mine)
    assert cost.work(mm, cand, np.float64) is mine


# -- the ranking -----------------------------------------------------------

def test_diverse_caps_a_family():
    items = [('a', i) for i in range(6)] + [('b', 0), ('c', 0)] + \
        [('a', 9)]
    out = cost.diverse(items, lambda x: x[0], first=8, per_family=3)
    first = out[:8]
    # three of a, then b and c, then a again (no other family left)
    assert [f for f, _ in first] == list('aaabcaaa')
    # the first three keep their place, the order within a family too
    assert out[:3] == items[:3]
    assert sorted(out) == sorted(items)
    a_order = [x for x in out if x[0] == 'a']
    assert a_order == [x for x in items if x[0] == 'a']


def test_diverse_single_family_unchanged():
    items = [('a', i) for i in range(10)]
    assert cost.diverse(items, lambda x: x[0]) == items


def test_diverse_limits_with_many_families():
    items = [('a', i) for i in range(5)] + [('b', i) for i in range(5)] + \
        [('c', i) for i in range(5)]
    first = cost.diverse(items, lambda x: x[0])[:8]
    for f in 'abc':
        assert sum(x[0] == f for x in first) <= 3


def test_rank_orders_by_estimate():
    A = _op(40, 30, density=0.6)
    mm = CUDAMatMul(A, aligne=16, n=110080, ldb=110080, ldc=110080)
    cands = mm.candidates(np.float64)
    ranked = cost.rank(mm, cands, np.float64, 'sm_90')
    assert sorted(c.variant for c, _ in ranked) == \
        sorted(c.variant for c in cands)
    times = [e.seconds for _, e in ranked]
    # beyond the diversity window the order is by estimate
    assert times[8:] == sorted(times[8:])
    fams = [c.family for c, _ in ranked[:8]]
    others = {c.family for c in cands}
    for f in set(fams):
        assert fams.count(f) <= 3 or len(others) == 1


def test_rank_uses_given_facts():
    A = _op(40, 30)
    mm = CUDAMatMul(A, aligne=16)
    cands = mm.candidates(np.float64)
    victim = cands[0]

    def facts(c):
        # the first candidate spills heavily and fits one block an SM
        if c is victim:
            return cost.Facts(registers=255, spill_bytes=4096,
                              shared=200*1024)
        return None
    ranked = cost.rank(mm, cands, np.float64, 'sm_90', n=1 << 22,
                       facts=facts)
    assert ranked[0][0] is not victim
    plain = cost.rank(mm, cands, np.float64, 'sm_90', n=1 << 22)
    e_victim = dict((c.variant, e) for c, e in ranked)[victim.variant]
    e_plain = dict((c.variant, e) for c, e in plain)[victim.variant]
    assert e_victim.seconds > e_plain.seconds


def test_rank_hip_plan_facts():
    A = _op(48, 48)
    mm = HIPMatMul(A, aligne=4)
    cands = mm.candidates(np.float64, gcn_arch='gfx942')
    ranked = cost.rank(mm, cands, np.float64, 'gfx942', n=1 << 20)
    assert len(ranked) == len(cands)
    assert all(e.seconds > 0 and 0 < e.copy_frac <= 1 for _, e in ranked)


def test_add_isa_estimates():
    A = _op(24, 16)
    mm = HIPMatMul(A, aligne=4)
    cands = mm.candidates(np.float64, gcn_arch='gfx90a')
    rep = {'vgprs': 40, 'agprs': 0, 'total_vgprs': 40, 'sgprs': 20,
           'scratch_bytes': 0, 'lds_bytes': 0, 'occupancy': 8, 'mfma': 0,
           'global_loads': {8: 16}, 'nt_loads': 0, 'vmcnt0': 1,
           'lgkmcnt0': 1, 'instructions': 200}
    rows = [{'variant': c.variant, 'arch': 'gfx90a', **rep}
            for c in cands[:3]]
    rows.append({'variant': 'x', 'arch': 'gfx90a', 'error': 'clang'})
    cost.add_isa_estimates(mm, rows, np.float64, n=1 << 20)
    for r in rows[:3]:
        assert r['est_us'] > 0 and 0 < r['est_copy_frac'] <= 1
    assert 'est_us' not in rows[3]
    # an arch without constants of its own: those the order uses
    # (hip_arch), the same estimate as its nearest part's
    c = cands[0]
    near = [{'variant': c.variant, 'arch': a, **rep}
            for a in ('gfx950', 'gfx942')]
    cost.add_isa_estimates(mm, near, np.float64, n=1 << 20)
    assert near[0]['est_us'] == near[1]['est_us'] > 0


def test_diverse_ignores_far_families():
    # b's only item is not eligible (far behind in the estimate): a keeps
    # the first places
    items = [('a', i) for i in range(6)] + [('b', 0)]
    out = cost.diverse(items, lambda x: x[0],
                       eligible=lambda x: x[0] == 'a')
    assert out == items
    # eligible, b moves up to the fourth place
    out = cost.diverse(items, lambda x: x[0])
    assert out[3] == ('b', 0)


def test_rank_keeps_far_families_back():
    A = _op(96, 96)
    mm = HIPMatMul(A, aligne=4, n=1 << 20, ldb=1 << 20, ldc=1 << 20)
    cands = mm.candidates(np.float64, gcn_arch='gfx942')
    ranked = cost.rank(mm, cands, np.float64, 'gfx942')
    best = ranked[0][1].seconds
    # a candidate placed ahead of a faster one of its own family only
    # for diversity is within DIVERSE_WITHIN of the best
    for i, (c, e) in enumerate(ranked[:8]):
        faster_later = [x for x, f in ranked[i + 1:]
                        if f.seconds < e.seconds]
        if faster_later:
            assert e.seconds <= cost.DIVERSE_WITHIN*best


# -- bstream-mgroup: B re-read a group, LDS-fed FMAs ------------------------

def _mgroup(A, arch_opts=None):
    mm = HIPMatMul(A, aligne=16, n=4096, ldb=4096, ldc=4096)
    cands = [c for c in mm.candidates(np.float64, gcn_arch='gfx942')
             if c.family == 'bstream-mgroup']
    assert cands
    return mm, cands


def test_mgroup_waits_a_chunk_of_its_own_group():
    """Two groups: rows 0-63 use B rows 0-99 (two chunks of 64), rows
    64-127 B rows 100-139 (one): a block waits for its own group's
    chunks (2), not for every group's (3)."""
    A = np.zeros((128, 140))
    A[:64, :100] = np.random.default_rng(0).standard_normal((64, 100))
    A[64:, 100:] = 1.0
    mm, cands = _mgroup(A)
    c = next(c for c in cands if c.params['bsz'] == 64
             and c.params['msplit']*c.params['rows'] == 64)
    w = cost.work(mm, c, np.float64)
    assert w.waits == 2 and w.row_groups == 2
    # B rows read once a group: 100 + 40 of them, C 128 rows
    assert w.l2_bytes == 8*(140 + 128)
    assert w.lds_fed


def test_mgroup_reads_b_again_per_group():
    """The same B rows used by every group are read once a group."""
    A = np.ones((128, 40))
    mm, cands = _mgroup(A)
    for c in cands:
        w = cost.work(mm, c, np.float64)
        assert w.l2_bytes == 8*(40*w.row_groups + 128), c.variant
        assert w.dram_bytes == 8*(40 + 128)


def test_lds_fed_fmas_slower():
    w = stream_work(valu_flops=1 << 16)
    assert est(replace(w, lds_fed=True)) > est(w)
    e = cost.estimate(replace(w, lds_fed=True), FACTS, SM90, N)
    e0 = cost.estimate(w, FACTS, SM90, N)
    assert e.terms['valu'] == pytest.approx(
        cost.LDS_FED_SLOWDOWN*e0.terms['valu'])


def test_isa_counts_shared_by_row_groups():
    """A straight kernel switching over G row groups runs 1/G of the
    instructions and full waits clang counts in it: with the same facts,
    more groups cost no more instructions a column."""
    f = cost.Facts(registers=64, instructions=20000, full_waits=64)
    one = cost.estimate(stream_work(), f, SM90, N)
    many = cost.estimate(stream_work(row_groups=16, cols_per_block=128),
                         f, SM90, N)
    assert many.terms['issue'] <= one.terms['issue']
    assert many.terms['latency'] < 16*one.terms['latency']


# -- HIP plan facts: clang-19's waits for C ----------------------------------

def test_hip_plan_facts_wait_a_row_of_c():
    """Where C is read, a HIP cstream thread waits for each row's load of
    C (clang-19: about m full waits); beta 0, the preloaded C of the
    m-split bstream and CUDA's facts have none."""
    A = _op(48, 16)
    for beta, want in ((0.0, 0), (1.0, 48), (-0.5, 48)):
        mm = HIPMatMul(A, beta=beta, aligne=16, n=4096, ldb=4096, ldc=4096)
        cands = mm.candidates(np.float64, gcn_arch='gfx942')
        cs = next(c for c in cands if c.family == 'cstream')
        assert cost.plan_facts(mm, cs, np.float64).full_waits == want
        for c in cands:
            if c.params.get('preload_c'):
                assert cost.plan_facts(mm, c, np.float64).full_waits == 0
    mm = CUDAMatMul(A, beta=1.0, aligne=16)
    for c in mm.candidates(np.float64):
        assert cost.plan_facts(mm, c, np.float64).full_waits is None


def test_c_row_waits_slow_the_stream():
    A = _op(200, 60, density=0.2)
    mm = HIPMatMul(A, beta=1.0, aligne=16, n=1 << 17, ldb=1 << 17,
                   ldc=1 << 17)
    cs = next(c for c in mm.candidates(np.float64, gcn_arch='gfx942')
              if c.family == 'cstream')
    f = cost.plan_facts(mm, cs, np.float64)
    slow = cost.estimate_candidate(mm, cs, np.float64, 'gfx942', 1 << 17, f)
    fast = cost.estimate_candidate(mm, cs, np.float64, 'gfx942', 1 << 17,
                                   replace(f, full_waits=0))
    assert slow.seconds > fast.seconds


def test_isa_instructions_shared_by_wave_paths():
    """Waves switching over their rows each run 1/wave_paths of the
    unrolled code clang counts."""
    f = cost.Facts(registers=64, instructions=40000)
    one = cost.estimate(stream_work(), f, SM90, N)
    four = cost.estimate(stream_work(wave_paths=4), f, SM90, N)
    assert four.terms['issue'] == pytest.approx(one.terms['issue'] / 4)
