"""gimmik sweep's per-operator panel sizes (--mib), its per-candidate table
(gimmik candidates and vendor formulations, the chosen of each kind) and
building the next operator ahead, with the stand-in tuner of test_sweep."""

import csv

import numpy as np
import pytest

from gimmik import sweep as sweep_mod
from gimmik.operators import suite
from gimmik.sweep import (CANDIDATE_COLUMNS, panel_n, read_rows, sweep)
from test_sweep import OPS, FakeRuntime, FakeTune


class VendorTune(FakeTune):
    """FakeTune whose vendor lists formulations, the second fastest."""

    def __call__(self, A, **kw):
        res = super().__call__(A, **kw)
        vt = res.vendor['time_s']
        res.vendor = {'time_s': vt, 'gbps': 0.0, 'formulation': 'lt/h0',
                      'formulations': [
                          {'name': 'gemm-nn', 'time_s': 2*vt, 'error': None},
                          {'name': 'lt/h0', 'time_s': vt, 'error': None},
                          {'name': 'broken', 'time_s': None,
                           'error': 'status 15\n(on purpose)'}]}
        return res


def read_candidates(path):
    with open(path / 'candidates.csv', newline='') as f:
        return list(csv.DictReader(f))


def test_panel_n():
    A = np.ones((6, 2))
    n = panel_n(A, 1)              # 1 MiB over 8 rows of doubles
    assert n % 256 == 0 and n*8*8 >= 2**20 > (n - 256)*8*8
    assert panel_n(A, 1, itemsize=4) == 2*n


def test_mib_sizes_each_operator(tmp_path):
    tune = VendorTune()
    rows = sweep(tmp_path, ops=OPS, mib=2, runtime=FakeRuntime(), tune=tune)
    ops = suite(OPS)
    assert len(rows) == len(ops)
    for call in tune.calls:
        assert call['n'] == panel_n(ops[call['name']], 2)
    assert len({c['n'] for c in tune.calls}) > 1
    assert {r['operator']: r['n'] for r in read_rows(tmp_path /
                                                     'sweep.csv')} == \
        {c['name']: c['n'] for c in tune.calls}
    assert {r['vendor_formulation'] for r in rows} == {'lt/h0'}
    # resuming with the same --mib does nothing; another --mib refuses
    again = VendorTune()
    sweep(tmp_path, ops=OPS, mib=2, runtime=FakeRuntime(), tune=again)
    assert again.calls == []
    with pytest.raises(ValueError, match='n '):
        sweep(tmp_path, ops=OPS, mib=3, runtime=FakeRuntime(),
              tune=VendorTune())


@pytest.mark.parametrize('kw,match', [
    (dict(n=100, mib=1), 'not both'), (dict(mib=0), 'mib must'),
    (dict(mib='1'), 'mib must'), (dict(mib=True), 'mib must')])
def test_mib_bad_input(tmp_path, kw, match):
    with pytest.raises(ValueError, match=match):
        sweep(tmp_path, ops=OPS, runtime=FakeRuntime(), tune=VendorTune(),
              **kw)


def test_candidate_table(tmp_path):
    sweep(tmp_path, ops=OPS, n=1000, runtime=FakeRuntime(),
          tune=VendorTune(fail={'p1-quad-m3'}))
    recs = read_candidates(tmp_path)
    assert recs and list(recs[0]) == list(CANDIDATE_COLUMNS)
    ops = [r['operator'] for r in recs]
    assert 'p1-quad-m3' not in ops
    assert len(set(ops)) == len(suite(OPS)) - 1
    one = [r for r in recs if r['operator'] == 'p1-quad-m0']
    assert [(r['kind'], r['name'], r['chosen']) for r in one] == [
        ('gimmik', 'cstream/w2', 'true'), ('gimmik', 'bstream', 'false'),
        ('vendor', 'gemm-nn', 'false'), ('vendor', 'lt/h0', 'true'),
        ('vendor', 'broken', 'false')]
    assert one[1]['error'] == 'wrong' and one[1]['time_s'] == ''
    assert one[4]['error'] == 'status 15 (on purpose)'
    assert float(one[2]['time_s']) == 2*float(one[3]['time_s'])
    assert float(one[3]['gbps']) > 0 and float(one[3]['copy_fraction']) > 0
    # the failed operator is retried; the others' rows are kept
    sweep(tmp_path, ops=OPS, n=1000, runtime=FakeRuntime(),
          tune=VendorTune())
    again = read_candidates(tmp_path)
    assert [r for r in again if r['operator'] != 'p1-quad-m3'] == recs
    assert any(r['operator'] == 'p1-quad-m3' for r in again)


def test_building_ahead(tmp_path, monkeypatch):
    """With the real tuner and a runtime that builds ahead, each operator
    after the first is handed to tune.prepare before it is tuned."""
    import gimmik.tune as tune_mod
    events = []

    def fake_tune(A, *, name, n, **kw):
        events.append(('tune', name, n))
        return VendorTune()(A, name=name, n=n, **kw)

    def fake_prepare(A, *, beta, dtype, n, runtime):
        events.append(('prepare', A.shape, n))
    monkeypatch.setattr(tune_mod, 'tune', fake_tune)
    monkeypatch.setattr(tune_mod, 'prepare', fake_prepare)

    class Ahead(FakeRuntime):
        prepare_ahead = True
    sweep(tmp_path, ops='p1-quad-m0,p1-quad-m3,p1-tri-m0', mib=1,
          runtime=Ahead())
    ops = suite('p1-quad-m0,p1-quad-m3,p1-tri-m0')
    names = list(ops)
    tuned = [e[1] for e in events if e[0] == 'tune']
    prepared = [e for e in events if e[0] == 'prepare']
    assert tuned == names
    assert [(shape, n) for _, shape, n in prepared] == [
        (ops[x].shape, panel_n(ops[x], 1)) for x in names[1:]]
    # without prepare_ahead nothing is built ahead
    events.clear()
    sweep(tmp_path / 'b', ops=OPS, n=1000, runtime=FakeRuntime())
    assert events and all(e[0] == 'tune' for e in events)


def test_budget(tmp_path):
    from gimmik.sweep import SweepProgress

    class Progress(SweepProgress):
        def stopped(self, name, budget_s):
            self.said = (name, budget_s)
    tune, progress = VendorTune(), Progress()
    rows = sweep(tmp_path, ops=OPS, n=1000, runtime=FakeRuntime(), tune=tune,
                 budget_s=-1, progress=progress)
    assert rows == [] and tune.calls == []
    assert progress.said[1] == -1 and progress.said[0] in suite(OPS)
    rows = sweep(tmp_path, ops=OPS, n=1000, runtime=FakeRuntime(), tune=tune,
                 budget_s=1e9)
    assert len(rows) == len(suite(OPS))
