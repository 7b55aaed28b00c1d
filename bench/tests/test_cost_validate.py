"""bench/model/cost_validate.py: reading both candidate CSV formats, mapping
measured variants to today's candidates and the per-operator figures
(CPU only; plan facts, no nvcc)."""

import csv
import math

import numpy as np
import pytest

from bench.model import cost_validate as cv
from gimmik import cost
from gimmik.cuda import CUDAMatMul

N = 110080


def _op():
    rng = np.random.default_rng(7)
    A = rng.standard_normal((24, 16))
    A[rng.random(A.shape) < 0.2] = 0
    return A


def _write(path, fields, rows):
    with open(path, 'w', newline='') as f:
        w = csv.DictWriter(f, fields)
        w.writeheader()
        w.writerows(rows)


def test_read_walk_format(tmp_path):
    p = tmp_path / 'walk.csv'
    _write(p, ['op', 'n', 'kind', 'rank', 'variant', 'time_s', 'registers',
               'local_mem', 'shared_mem', 'status'], [
        dict(op='p1-x-m0', n=N, kind='ours', variant='cstream/ldnc/width1',
             time_s='1e-5', registers=40, local_mem=0, shared_mem=0,
             status='ok'),
        dict(op='p1-x-m0', n=N, kind='up', variant='cstream',
             time_s='1e-5', status='ok'),
        dict(op='p1-x-m0', n=N, kind='ours', variant='bstream/ldcs/width1',
             time_s='', status='not timed')])
    got = cv.read_measured(p)
    assert got == {('p1-x-m0', N, True): [
        ('cstream/ldnc/width1', 1e-5, 40, 0, 0)]}


def test_read_sweep_format(tmp_path):
    p = tmp_path / 'sweep.csv'
    _write(p, ['operator', 'n', 'kind', 'name', 'time_s', 'error'], [
        dict(operator='p1-x-m0', n=4096, kind='gimmik',
             name='cstream/ldnc/width1', time_s='2e-5', error=''),
        dict(operator='p1-x-m0', n=4096, kind='vendor', name='cublas',
             time_s='3e-5', error=''),
        dict(operator='p1-x-m0', n=4096, kind='gimmik', name='bstream',
             time_s='', error='boom')])
    got = cv.read_measured(p)
    assert got == {('p1-x-m0', 4096, False): [
        ('cstream/ldnc/width1', 2e-5, None, None, None)]}


def test_validate_figures():
    A = _op()
    mm = CUDAMatMul(A, beta=0.0, aligne=cv.ALIGNE, n=N, ldb=N, ldc=N)
    cands = mm.candidates(np.float64)
    est = {c.variant: cost.estimate_candidate(
        mm, c, np.float64, 'sm_90', N, cost.plan_facts(mm, c, np.float64))
        .seconds for c in cands}
    # measured times: the estimate's order reversed, so that its pick is
    # the slowest measured candidate
    order = sorted(est, key=est.get)
    meas = [(v, 1e-5*(1 + i), None, None, None)
            for i, v in enumerate(reversed(order))]
    meas.append(('no-such/variant', 1e-6, None, None, None))
    rows, unmapped = cv.validate({('p1-tet-m0', N, True): meas},
                                 {'p1-tet-m0': A}, facts_from='plan')
    assert unmapped == {'no-such': 1}
    (r,) = rows
    assert r['mapped'] == len(cands) and r['measured'] == len(cands) + 1
    # the pick has the least estimate; its measured time over the best
    assert est[r['model_pick']] == min(est.values())
    t = dict((v, s) for v, s, *_ in meas)
    assert float(r['model_pick_over_best']) == pytest.approx(
        t[r['model_pick']] / min(t[v] for v in est), rel=1e-3)
    assert float(r['model_pick_over_best']) > 1
    if len(set(est.values())) == len(est):
        assert float(r['spearman']) == pytest.approx(-1.0)
    assert r['class'] == cv.op_class(mm.info, 0.0)


def test_spearman_and_classes():
    assert cv.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1)
    assert math.isnan(cv.spearman([1, 2], [2, 1]))
    from gimmik.analysis import analyse
    assert cv.op_class(analyse(np.ones((200, 100))), 0) == 'dense-big'
    assert cv.op_class(analyse(np.ones((20, 10))), 0) == 'dense'
    tall = np.zeros((200, 50))
    tall[np.arange(200), np.arange(200) % 50] = 1
    assert cv.op_class(analyse(tall), 0) == 'sparse-tall'
    wide = np.zeros((20, 50))
    wide[np.arange(20), np.arange(20)] = 1
    assert cv.op_class(analyse(wide), 0) == 'sparse-wide'
