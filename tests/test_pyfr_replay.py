"""PyFR's walk replayed without a device (gimmik.pyfr.walk, CPU only, fake
timers), PyFR's filters at their thresholds, its panel sizes, the
recorded-walk replay (replay_times, read_times) and the bytes a product
moves (gimmik.runtime.moved_bytes), which the benches time a copy of."""

import gzip
import os

import numpy as np
import pytest

from gimmik.analysis import analyse
from gimmik.base import Candidate, MatMul, PRUNE_FACTOR
from gimmik.cuda import CUDAMatMul
from gimmik.operators import default_beta
from gimmik.pyfr import (IFAC, PROTOCOLS, SOASZ, euler_nvars, panel, picked,
                         read_times, replay_times, walk, with_twins)
from gimmik.runtime import moved_bytes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS = os.path.join(ROOT, 'bench', 'operators', 'pyfr-ops.npz')
CUDA31 = PROTOCOLS['3.1', 'cuda']
CC = (9, 0)


class Table(MatMul):
    """A generator with a fixed candidate list and stub sources: the walk
    (base.MatMul.kernels) is the real one."""
    platform = 'cuda'

    def __init__(self, rows):
        super().__init__(np.eye(4))
        self.rows = rows

    def _candidates(self, dtype, **opts):
        return [Candidate(f, {'v': v}) for f, v in self.rows]

    def render(self, cand, dtype, kname='gimmik_mm'):
        return f'// {cand.variant}', {'variant': cand.variant,
                                      'tplname': cand.family}

    def walk_group(self, cand, dtype):
        return cand.family


def fake_timer(times, log=None):
    def time_candidate(src, meta):
        if log is not None:
            log.append(meta['variant'])
        return times[meta['variant']], {'registers': 32, 'local_mem': 0,
                                        'shared_mem': 0}
    return time_candidate


def replay(kgen, time_candidate):
    return walk(CUDA31, kgen, time_candidate)


def test_prune_factor_is_what_the_expectations_assume():
    assert PRUNE_FACTOR == 1.5 and IFAC == 0.95
    assert CUDA31.nkerns == 8


def test_replay_hand_computed():
    # offer order: a1 b1 a2 c1 b2 a3 d1 c2 d2 a4 e1
    rows = [('a', 1), ('b', 1), ('a', 2), ('c', 1), ('b', 2), ('a', 3),
            ('d', 1), ('c', 2), ('d', 2), ('a', 4), ('e', 1)]
    t = {'a/v1': 1.00, 'b/v1': 1.60, 'a/v2': 0.97, 'c/v1': 1.40,
         'b/v2': 0.10, 'a/v3': 0.90, 'd/v1': 0.84, 'c/v2': 0.83,
         'd/v2': 0.70, 'a/v4': 0.50, 'e/v1': 0.01}
    mm = Table(rows)
    w = replay(mm.kernels(np.float64), fake_timer(t))
    seen = [v for v, _ in w['seen']]
    # b's best 1.6 > 1.5 x 1.0: b/v2 skipped; a2 0.97 is not below 0.95 x
    # a1; c1 1.40 <= 1.5 x 0.97 keeps c for now; a3 0.90 < 0.95 becomes the
    # pick; d1 0.84 < 0.855 becomes it; c's 1.40 > 1.5 x 0.84: c/v2
    # skipped; d2 0.70 < 0.798 and a4 0.50 < 0.665 each become the pick;
    # eight seen, so e1 (the fastest of all) is never timed.
    assert seen == ['a/v1', 'b/v1', 'a/v2', 'c/v1', 'a/v3', 'd/v1', 'd/v2',
                    'a/v4']
    assert picked(w) == ('a/v4', 0.50)


def test_replay_first_is_kept_unless_five_percent_faster():
    mm = Table([('a', 1), ('b', 1), ('c', 1)])
    t = {'a/v1': 1.0, 'b/v1': 0.96, 'c/v1': 0.951}
    w = replay(mm.kernels(np.float64), fake_timer(t))
    assert picked(w) == ('a/v1', 1.0)
    assert len(w['seen']) == 3


def test_replay_sends_pyfr_feedback():
    sent = []

    def gen():
        kdata = None
        for i in range(3):
            kdata = yield f'src{i}', {'variant': f'v{i}'}
            sent.append(kdata)
    w = replay(gen(), lambda s, m: (2e-3, {'registers': 40, 'local_mem': 8,
                                           'shared_mem': 0}))
    assert [v for v, _ in w['seen']] == ['v0', 'v1', 'v2']
    assert sent[0] == {'runtime': 2.0, 'registers': 40, 'local_mem': 8,
                       'shared_mem': 0}     # PyFR sends milliseconds
    assert len(sent) == 3


def test_replay_empty_generator():
    def gen():
        return
        yield
    w = replay(gen(), lambda s, m: 1.0)
    assert w == {'seen': [], 'pick': None}
    assert picked(w) == (None, None)


def pyfr_mm(name, n):
    A = np.load(OPS)[name]
    return CUDAMatMul(A, beta=default_beta(name),
                      aligne=CUDA31.aligne(np.float64), n=n, ldb=n, ldc=n)


@pytest.mark.parametrize('name', ['p2-hex-m0', 'p3-tet-m132', 'p2-pri-m6'])
def test_replay_records_what_our_generator_yields(name):
    """Driving CUDAMatMul.kernels() by hand with the same valid feedback
    yields exactly the candidates the replay records, and without pruning
    those are the first 8 of what it offers of candidates()."""
    mm = pyfr_mm(name, panel(20480, 5)[1])
    cands = [c.variant for c in mm.candidates(np.float64,
                                              compute_capability=CC)]
    rng = np.random.default_rng(1)
    times = {v: float(rng.uniform(0.5, 3.0)) for v in cands}

    w = replay(mm.kernels(np.float64, compute_capability=CC),
               fake_timer(times))
    gen = mm.kernels(np.float64, compute_capability=CC)
    by_hand, kdata = [], None
    for _ in range(8):
        try:
            src, meta = gen.send(kdata)
        except StopIteration:
            break
        by_hand.append(meta['variant'])
        kdata = {'runtime': times[meta['variant']]*1e3}
    assert [v for v, _ in w['seen']] == by_hand
    assert set(by_hand) <= set(cands)
    assert picked(w)[0] in by_hand

    flat = replay(mm.kernels(np.float64, compute_capability=CC),
                  lambda s, m: 1.0)
    offered = mm.offered(mm.candidates(np.float64, compute_capability=CC))
    assert [v for v, _ in flat['seen']] == [c.variant for c in offered[:8]]
    assert picked(flat)[0] == offered[0].variant


# -- the recorded-walk replay -------------------------------------------------
@pytest.mark.parametrize('name', ['p2-hex-m0', 'p4-tet-m6', 'p1-quad-m3'])
def test_replay_times_walks_as_the_rendered_kernels(name):
    """replay_times picks what the walk over really rendered sources picks
    with the same times, and leaves the generator as it was; offer= walks
    the candidates given in place of kernels()' offer, timed_only= only
    those with a time."""
    mm = pyfr_mm(name, 110080)
    cands = mm.candidates(np.float64, compute_capability=CC)
    rng = np.random.default_rng(7)
    times = {c.variant: float(rng.uniform(1e-5, 3e-5)) for c in cands}
    got = replay_times(CUDA31, mm, times, arch=CC)
    want = replay(CUDA31.kernels(mm, np.float64, arch=CC),
                  lambda s, m: times[m['variant']])
    assert got == want and got['seen']
    assert 'render' not in vars(mm) and 'offered' not in vars(mm)
    # a variant without a time is infinitely slow: never the pick
    first = got['seen'][0][0]
    slow = replay_times(CUDA31, mm, {k: v for k, v in times.items()
                                     if k != first}, arch=CC)
    assert slow['seen'][0] == (first, np.inf) and picked(slow)[0] != first
    # timed_only: a variant without a time is not walked at all
    cut = replay_times(CUDA31, mm, {k: v for k, v in times.items()
                                    if k != first}, arch=CC, timed_only=True)
    assert cut['seen'][0] == slow['seen'][1]
    assert first not in [v for v, _ in cut['seen']]
    # every ranked candidate, reversed: the walk starts at the last
    rev = replay_times(CUDA31, mm, times, arch=CC, offer=cands[::-1])
    assert rev['seen'][0][0] == cands[-1].variant


def test_read_times_keeps_ours_ok_rows_in_file_order(tmp_path):
    text = ('op,n,kind,variant,time_s,status\n'
            'p1-hex-m0,100,ours,a/v1,2e-5,ok\n'
            'p1-hex-m0,100,up,cstream,1e-5,ok\n'
            'p1-hex-m0,100,ours,b/v1,,not timed\n'
            'p1-hex-m0,100,ours,c/v1,3e-5,RuntimeError: wrong\n'
            'p1-hex-m0,200,ours,a/v1,4e-5,ok\n'
            'p1-hex-m0,100,ours,d/v1,1.5e-5,ok\n')
    path = tmp_path / 'walk-candidates.csv.gz'
    with gzip.open(path, 'wt') as f:
        f.write(text)
    assert read_times(str(path)) == {
        ('p1-hex-m0', 100): [('a/v1', 2e-5), ('d/v1', 1.5e-5)],
        ('p1-hex-m0', 200): [('a/v1', 4e-5)]}
    # the sweep-style file: no n, no kind, no status
    plain = tmp_path / 'times.csv'
    plain.write_text('op,variant,time_s\nx,a/v1,1e-3\nx,b/v1,\n')
    assert read_times(str(plain)) == {'x': [('a/v1', 1e-3)]}


def test_with_twins_lends_a_tiles_time_to_its_stcg_twin():
    tile = dict(kstage=2, shape='m16n8k4t', wm=4, wn=2)
    cands = [Candidate('mma-gemm', dict(tile, st='cg'), {}),
             Candidate('cstream', dict(width=1), {}),
             Candidate('mma-gemm', dict(tile, kstage=4, st='cg'), {})]
    old = Candidate('mma-gemm', tile, {}).variant
    other = Candidate('mma-gemm', dict(tile, kstage=4), {}).variant
    assert cands[0].variant == old.replace('/wm4', '/stcg/wm4')
    times = {old: 2e-5, cands[1].variant: 3e-5, other: 4e-5,
             cands[2].variant: 1e-5}
    got = with_twins(times, cands)
    assert got[cands[0].variant] == 2e-5      # the recorded tile's time
    assert got[cands[2].variant] == 1e-5      # a twin's own time kept
    assert {k: got[k] for k in times} == times and len(got) == 5
    assert cands[0].variant not in times      # the input left alone


# -- PyFR's filters and panels -----------------------------------------------
def test_cuda_dense_filter():
    rng = np.random.default_rng(2)
    vals = np.arange(1, 29, dtype=float)       # 28 distinct |values|
    A = rng.choice(vals, size=(20, 20))
    assert CUDA31.sends(A)                      # dense, 28 unique
    A[0, 0] = 0.0                               # zero is counted: 29
    assert not CUDA31.sends(A)
    S = np.zeros((20, 20))
    S.flat[::7] = rng.standard_normal(S.size // 7 + 1)   # 15 % non-zeros
    assert np.count_nonzero(S) / S.size <= 0.15
    assert len(np.unique(np.abs(S))) > 28 and CUDA31.sends(S)


def _with_values(nuq_nonzero, density, shape=(20, 20)):
    """An operator with nuq_nonzero distinct |values| plus zero, about
    `density` non-zeros."""
    A = np.zeros(shape)
    nnz = max(nuq_nonzero, int(round(density*A.size)))
    vals = np.resize(np.arange(1, nuq_nonzero + 1, dtype=float), nnz)
    A.flat[:nnz] = vals*np.where(np.arange(nnz) % 2, -1, 1)
    return A


@pytest.mark.parametrize('release', ['3.1', 'main'])
def test_hip_filter_at_its_thresholds(release):
    sends = PROTOCOLS[release, 'hip'].sends
    # 129 distinct |values| counting zero, 50 % non-zeros: to rocBLAS
    assert not sends(_with_values(128, 0.5))
    # 128 counting zero: to the generator
    assert sends(_with_values(127, 0.5))
    # many values but 15 % non-zeros or fewer: to the generator
    A = _with_values(60, 0.15)
    A2 = np.zeros((40, 40))
    A2[:20, :20] = _with_values(200, 0.6)
    assert np.count_nonzero(A2) / A2.size <= 0.15
    assert sends(A) and sends(A2)
    # a sign flip is the same |value|
    B = _with_values(128, 0.5)
    B[np.abs(B) == 128] = -127
    assert (B == 127).any() and (B == -127).any()
    assert sends(B)


def test_panel_sizes():
    assert CUDA31.aligne(np.float64) == 16 and CUDA31.aligne(np.float32) == 32
    assert panel(110080, 5) == (22016, 110080)
    neles, n = panel(1_000_000, 4)
    assert neles % SOASZ == 0 and n == 4*neles and 0 <= n - 1e6 < 4*SOASZ
    assert n % CUDA31.aligne(np.float64) == 0
    assert euler_nvars('tri') == 4 and euler_nvars('quad') == 4
    assert euler_nvars('pyr') == 5 and euler_nvars('hex') == 5


def test_moved_bytes_counts_used_rows_and_c_twice_with_beta():
    A = np.arange(1.0, 16.0).reshape(3, 5)
    A[:, 2] = 0.0                  # a column of A no product reads
    info = analyse(A)
    assert moved_bytes(info, 0.0, 7, 8) == (4 + 3)*8*7
    assert moved_bytes(info, -0.5, 7, 8) == (4 + 6)*8*7
    assert moved_bytes(info, 1.0, 7, 4) == (4 + 6)*4*7
