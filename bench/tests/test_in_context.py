"""bench/pyfr/in_context.py without a GPU: the step sizes, the memory-policy
source variants (compiled by nvcc where it is installed), the sequencing
and ratios of the in-context timing over a fake timer, and its CSVs."""

import csv
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from bench import OPERATORS
from bench.pyfr import in_context as ic
from bench.pyfr import pyfr_walk as pw
from bench.pyfr import walk_report
from gimmik.cuda import CUDAMatMul


# -- sizes -------------------------------------------------------------------
def test_points_from_the_suite():
    ops = pw.load_suite(os.path.join(OPERATORS, 'pyfr-ops.npz'), ['*-m0'])
    assert ic.points_of(ops, 4, 'hex') == (125, 150)
    assert ic.points_of(ops, 3, 'tet') == (20, 40)
    assert ic.points_of(ops, 2, 'tri') == (6, 9)
    with pytest.raises(KeyError, match='p9-hex-m0'):
        ic.points_of(ops, 9, 'hex')


def test_step_working_set_hand_computed():
    # hex p4, 3-D Euler (5 variables), RK4's 3 registers: per element
    # (3*5 + 3*5 + 9 + 1)*125 + (2*5 + 3 + 1)*150 = 5000 + 2100 doubles
    assert ic.step_working_set('hex', 125, 150, 1) == 8*7100
    assert ic.step_working_set('hex', 125, 150, 22016) == 8*7100*22016
    # quad p1, 2-D (4 variables): (3*4 + 2*4 + 4 + 1)*4 + (2*4 + 2 + 1)*8
    assert ic.step_working_set('quad', 4, 8, 10) == 8*10*(100 + 88)
    # the registers count
    assert (ic.step_working_set('tet', 20, 40, 1, nregs=2)
            == ic.step_working_set('tet', 20, 40, 1) - 8*5*20)


def test_flush_bytes_is_the_rest_capped():
    assert ic.flush_bytes(1000, 100, 200, cap=10**6) == 700
    assert ic.flush_bytes(1000, 100, 200, cap=500) == 500
    assert ic.flush_bytes(100, 100, 200, cap=500) == 0


# -- memory policies ---------------------------------------------------------
def _src(A, family, beta=0.0, n=4096):
    mm = CUDAMatMul(A, beta=beta, aligne=16, n=n, ldb=n, ldc=n)
    for cand in mm.candidates(np.float64):
        if cand.family == family:
            return mm.render(cand, np.float64)[0]
    raise AssertionError(f'{family} not offered')


@pytest.fixture
def sparse_op():
    rng = np.random.default_rng(12)     # an operator every family takes
    A = rng.standard_normal((12, 10))
    A[rng.random(A.shape) < 0.6] = 0.0
    A[0, 0] = 1.0
    return A


def test_policies_parse():
    assert ic.parse_policies('') == ()
    assert ic.parse_policies('default') == ic.DEFAULT_POLICIES
    assert ic.parse_policies('idx32,ldplain+stcg,idx32') == (
        'idx32', 'ldplain+stcg')
    with pytest.raises(ValueError, match="'ldfoo'"):
        ic.parse_policies('ldplain+ldfoo')
    with pytest.raises(ValueError, match='twice'):
        ic.parse_policies('ldplain+ldnc')


def test_policy_plain_loads_and_stores(sparse_op):
    src = _src(sparse_op, 'cstream', beta=0.5)
    nb = len(re.findall(r'__ldg\(\(', src))
    nc = len(re.findall(r'__ldcs\(\(c', src))
    ns = len(re.findall(r'__stcg\(', src))    # C kept in L2 by default
    assert nb and nc and ns and '__stcs' not in src
    out = ic.policy_variant(src, 'ldplain+stplain', 10**6)
    assert out.count('gimmik_ctx_ld((') == nb
    assert out.count('gimmik_ctx_st(') == ns + 1      # + the macro
    assert '__ldg' not in out and '__stcg' not in out
    assert len(re.findall(r'__ldcs\(\(c', out)) == nc  # beta*C kept
    assert out.startswith(ic.PLAIN_HELPERS)
    # a hint for another: B loads only
    out = ic.policy_variant(src, 'ldcg', 10**6)
    assert out.count('__ldcg((') == nb and '__ldg' not in out
    assert ic.policy_variant(src, 'ldnc', 10**6) is None     # unchanged
    # C's old values loaded plainly or L2-only, B loads kept
    out = ic.policy_variant(src, 'ldcplain', 10**6)
    assert out.count('gimmik_ctx_ld((c') == nc and '__ldcs' not in out
    assert len(re.findall(r'__ldg\(\(', out)) == nb
    out = ic.policy_variant(src, 'ldccg+ldplain', 10**6)
    assert len(re.findall(r'__ldcg\(\(c', out)) == nc
    assert out.count('gimmik_ctx_ld((') == nb
    out = ic.policy_variant(src, 'stcs', 10**6)        # evict-first
    assert len(re.findall(r'__stcs\(', out)) == ns and '__stcg' not in out


def test_policy_strides_and_bounds(sparse_op):
    src = _src(sparse_op, 'cstream')
    assert 'const long ldbl = 4096, ldcl = 4096;' in src
    out = ic.policy_variant(src, 'idx32', 11*4096 + 4096)
    assert 'const int ldbl = 4096, ldcl = 4096;' in out
    with pytest.raises(ValueError, match='idx32'):
        ic.policy_variant(src, 'idx32', 2**31)
    # a cstream with many live values: a minimum of blocks per SM
    rng = np.random.default_rng(40)
    A = rng.standard_normal((40, 30))
    A[rng.random(A.shape) < 0.5] = 0.0
    src = _src(A, 'cstream')
    mb = re.search(r'__launch_bounds__\((\d+), (\d+)\)', src)
    assert mb
    out = ic.policy_variant(src, 'nominblocks', 0)
    assert f'__launch_bounds__({mb.group(1)})' in out
    assert '__launch_bounds__' not in ic.policy_variant(src, 'nobounds', 0)


NVCC = shutil.which('nvcc')


@pytest.mark.skipif(NVCC is None, reason='nvcc is not installed')
def test_policy_variants_compile(sparse_op, tmp_path):
    """Every policy of the default set (and stores of two-column values)
    yields a source nvcc builds for sm_90."""
    srcs = []
    for fam in ('cstream', 'bstream'):
        src = _src(sparse_op, fam, beta=1.0)
        for i, spec in enumerate(ic.DEFAULT_POLICIES + ('stwb', 'ldcs',
                                                         'ldcplain', 'ldccg')):
            out = ic.policy_variant(src, spec, 10**6)
            if out is not None:
                srcs.append(out.replace('gimmik_mm', f'k_{fam[0]}{i}')
                            .replace(ic.PLAIN_HELPERS, ''))
    cu = tmp_path / 'all.cu'     # wrapped as PyFR and NVRTC runs do
    cu.write_text('extern "C"\n{\n' + ic.PLAIN_HELPERS + '\n'.join(srcs)
                  + '\n}\n')
    p = subprocess.run([NVCC, '-cubin', '-arch=sm_90', '-o',
                        str(tmp_path / 'a.cubin'), str(cu)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    assert len(srcs) >= 10


# -- the sequencing, over a fake timer ---------------------------------------
class FakeTimer:
    """timer.sequence: logs the stage names, returns each stage's time
    from a table (a list of values is consumed one per call)."""

    def __init__(self, times):
        self.times = {k: list(v) if isinstance(v, list) else v
                      for k, v in times.items()}
        self.log = []

    def sequence(self, stages):
        self.log.append(tuple(s.name for s in stages))
        out = []
        for s in stages:
            t = self.times[s.name]
            out.append(t.pop(0) if isinstance(t, list) else t)
        return out


def _stages(*names):
    return [ic.Stage(n, None) for n in names]


def test_in_context_sequence_and_medians():
    traffic, prod, cons = _stages('traffic', 'producer', 'consumer')
    ours, up = _stages('ours', 'up')
    # warm-up repetitions return a huge time (must not be counted)
    timer = FakeTimer({'traffic': 9.0, 'producer': 1.0, 'consumer': 2.0,
                       'ours': [100.0, 3.0, 5.0, 4.0],
                       'up': [100.0, 6.0, 6.0, 7.0]})
    res = ic.measure_in_context(timer, [ours, up], traffic, prod, cons,
                                repeats=3, warmup=1)
    assert timer.log == [('traffic', 'producer', 'ours', 'consumer'),
                         ('traffic', 'producer', 'up', 'consumer'),
                         ('traffic', 'producer', 'up', 'consumer'),
                         ('traffic', 'producer', 'ours', 'consumer'),
                         ('traffic', 'producer', 'ours', 'consumer'),
                         ('traffic', 'producer', 'up', 'consumer'),
                         ('traffic', 'producer', 'up', 'consumer'),
                         ('traffic', 'producer', 'ours', 'consumer')]
    # counted ours: 3, 5, 4 -> median 4; in context + 1 + 2 (not traffic)
    assert res['ours'] == {'ctx_s': 7.0, 'kctx_s': 4.0}
    assert res['up'] == {'ctx_s': 9.0, 'kctx_s': 6.0}


def test_repeats_for_short_and_long_sequences():
    # 1 ms sequences, 50 ms wanted: 50 repetitions, within the bounds
    assert ic.repeats_for(1e-3, 30, 0.05, 300) == 50
    assert ic.repeats_for(1e-4, 30, 0.05, 300) == 300
    assert ic.repeats_for(1e-2, 30, 0.05, 300) == 30
    assert ic.repeats_for(1e-4, 30, 0.0, 300) == 30


def test_in_context_times_short_kernels_more_often():
    traffic, prod, cons = _stages('traffic', 'producer', 'consumer')
    ours, up = _stages('ours', 'up')
    # warm-up sequence: 1 + 1 + 1 + 2 = 5 s (up's), 40 s wanted -> 8 reps
    timer = FakeTimer({'traffic': 1.0, 'producer': 1.0, 'consumer': 1.0,
                       'ours': [1.0] + [3.0]*7 + [30.0],
                       'up': [2.0] + [4.0]*8})
    res = ic.measure_in_context(timer, [ours, up], traffic, prod, cons,
                                repeats=2, warmup=1, min_timed_s=40.0,
                                max_repeats=100)
    assert len(timer.log) == 2*(1 + 8)
    # ours: seven 3 s and one 30 s kernel -> median 3 (2 repeats: 16.5)
    assert res['ours']['kctx_s'] == 3.0
    assert res['up'] == {'ctx_s': 6.0, 'kctx_s': 4.0}


def test_in_context_refuses_a_short_timer():
    class Short(FakeTimer):
        def sequence(self, stages):
            return super().sequence(stages)[:3]
    t = Short({'a': 1.0, 'b': 1.0, 'c': 1.0, 'x': 1.0})
    with pytest.raises(RuntimeError, match='3 times'):
        ic.measure_in_context(t, _stages('x'), *_stages('a', 'b', 'c'),
                              repeats=1, warmup=0)


def test_hot_is_pyfrs_mean_after_warmup_median_over_repeats():
    ours, up = _stages('ours', 'up')
    # per call: 1 warm-up + 5 timed; ours' timed means 2, 4, 3 -> 3
    seq = []
    for mean in (2.0, 4.0, 3.0):
        seq += [50.0] + [mean]*5
    timer = FakeTimer({'ours': seq, 'up': [50.0] + [1.0]*5 + [50.0]
                       + [1.5]*5 + [50.0] + [9.0]*5})
    res = ic.measure_hot(timer, [ours, up], repeats=3, nbench=5, nwarmup=1)
    assert res == {'ours': 3.0, 'up': 1.5}
    assert timer.log[0] == ('ours',)*6 and timer.log[1] == ('up',)*6
    assert timer.log[2] == ('up',)*6          # repetition 2 starts at up


def test_rows_ratios_and_csv(tmp_path):
    ctx = {'ours': {'ctx_s': 9.0, 'kctx_s': 3.0},
           'up': {'ctx_s': 10.0, 'kctx_s': 4.0},
           'ours@a': {'ctx_s': 9.0, 'kctx_s': 3.0},
           'ours@b': {'ctx_s': 8.0, 'kctx_s': 2.5},
           'ours+ldplain': {'ctx_s': 8.5, 'kctx_s': 2.0}}
    hot = {'ours': 2.0, 'up': 2.5, 'ours@a': 2.0, 'ours@b': 2.2,
           'ours+ldplain': 1.9}
    base = {'op': 'p1-hex-m0', 'n': 100, 'pyfr_sends': True,
            'device': 'fake'}
    row = ic.summary_row(base, ctx, hot, ['ours@a', 'ours@b'],
                         ['ours+ldplain'])
    assert row['ours_over_up'] == '0.9000'
    assert row['kctx_ours_over_up'] == '0.7500'
    assert row['hot_ours_over_up'] == '0.8000'
    assert row['best8'] == 'ours@b' and row['walk_over_best8'] == '1.1250'
    assert row['best_policy'] == 'ours+ldplain'
    assert row['best_policy_over_up'] == '0.8500'
    info = {k: {'variant': k} for k in ctx}
    crows = ic.contender_rows('p1-hex-m0', 100, ctx, hot, info)
    byname = {r['contender']: r for r in crows}
    assert byname['up']['ctx_over_up'] == '1.0000'
    assert byname['ours@b']['ctx_over_up'] == '0.8000'
    assert byname['ours+ldplain']['hot_over_up'] == '0.7600'

    path = tmp_path / 'cuda-test-context.csv'
    walk_report.append(str(path), ic.FIELDS, [row, dict(row, n=200,
                                              ours_over_up='1.0500',
                                              hot_ours_over_up='0.9000')])
    with open(path) as f:
        back = list(csv.DictReader(f))
    assert [r['ours_over_up'] for r in back] == ['0.9000', '1.0500']
    assert walk_report.read_done(str(path)) == {('p1-hex-m0', 100),
                                       ('p1-hex-m0', 200)}
    lines = ic.summarise(str(path))
    assert lines[0].startswith('n=100: 1 operators')
    assert '0 > 1.03' in lines[0]
    assert any('1 > 1.03' in x for x in lines)
    assert any('within 3 %' in x and '0 of 1' in x for x in lines)


def test_rows_without_upstream_leave_ratios_empty():
    row = ic.summary_row({'op': 'x'}, {'ours': {'ctx_s': 1.0,
                                                'kctx_s': 0.5}},
                         {'ours': 0.4}, [], [])
    assert row['ours_over_up'] == '' and row['hot_ours_over_up'] == ''
    assert row['ctx_ours_s'] == '1.000000e+00'


# -- merging runs ------------------------------------------------------------
def test_offer_key_is_the_first_8():
    v = [f'fam/v{i}' for i in range(10)]
    assert ic.offer_key(v) == ic.offer_key(v[:8])
    assert ic.offer_key(v) != ic.offer_key(v[1:])
    assert re.fullmatch('[0-9a-f]{8}', ic.offer_key(v))


def test_merge_runs_keeps_the_newest_row_of_todays_offer():
    def row(op, n, offer, r):
        return {'op': op, 'n': str(n), 'offer': offer, 'ours_over_up': r}
    today = {('a', 1): 'k2', ('b', 1): 'k1', ('c', 1): 'k3', ('a', 5): 'k1'}
    new = [row('a', 1, 'k2', '0.9'), row('b', 1, 'k2', '0.8')]
    old = [row('a', 1, 'k2', '1.1'), row('b', 1, 'k1', '1.0'),
           row('c', 1, 'k1', '1.2'), row('a', 5, 'k1', ''),
           row('a', 5, 'k1', '0.7')]
    rows, missing = ic.merge_runs([('new', new), ('old', old)],
                                  lambda op, n: today[(op, n)])
    got = {(r['op'], int(r['n'])): (r['run'], r['ours_over_up'])
           for r in rows}
    assert got == {('a', 1): ('new', '0.9'), ('b', 1): ('old', '1.0'),
                   ('a', 5): ('old', '0.7')}
    assert missing == [('c', 1)]


def test_current_offer_follows_the_generator():
    ops = pw.load_suite(os.path.join(OPERATORS, 'pyfr-ops.npz'),
                        ['p3-quad-m0'])
    key = ic.current_offer(ops)('p3-quad-m0', 110080)
    mm = CUDAMatMul(ops['p3-quad-m0'], beta=0.0, aligne=16, n=110080,
                    ldb=110080, ldc=110080)
    variants = [c.variant for c in mm.offered(
        mm.candidates(np.float64, compute_capability=(9, 0)))]
    assert key == ic.offer_key(variants)
    assert key != ic.current_offer(ops)('p3-quad-m0', 4096)
