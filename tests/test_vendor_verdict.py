"""The vendor promise (issue #50, item 2): where the vendor BLAS's best is
faster than every candidate, the tuner says "use vendor" in its table, its
JSON and a one-line message, and a sweep in its CSV, its JSON, its
progress line, its closing message and the report; where gimmik wins, none
of them says so.  On the C platform, with every candidate (or the vendor
BLAS) made slower by a fixed delay a launch."""

import csv
import json
import os
import time

import numpy as np
import pytest

from conftest import random_operator
from gimmik import report
from gimmik.cli import main
from gimmik.progress import summary
from gimmik.runtime.c import Runtime as CRuntime
from gimmik.sweep import sweep
from gimmik.tune import (VERDICT_GIMMIK, VERDICT_VENDOR, format_table,
                         tune)

DELAY = 0.06        # seconds a launch of the slowed side: above a busy
# machine's scheduler slices (12-24 ms) with margin: the verdict is the delay's
N = 256


def _delayed(launch):
    def slow(b, c, n, ldb, ldc):
        launch(b, c, n, ldb, ldc)
        time.sleep(DELAY)
    return slow


class SlowKernels(CRuntime):
    """Every candidate DELAY slower than it is: the vendor BLAS wins."""

    def compile(self, src, meta):
        return _delayed(super().compile(src, meta))


class SlowVendor(CRuntime):
    """Every vendor formulation DELAY slower: gimmik wins."""

    def vendor_formulations(self, *args, **kwargs):
        return [(name, _delayed(launch)) for name, launch in
                super().vendor_formulations(*args, **kwargs)]


@pytest.fixture(autouse=True)
def cache_dir(fast_tune):
    return fast_tune


def _ops(rng, path):
    ops = {'p1-quad-m0': random_operator(rng, 6, 4, 0.6),
           'p1-tri-m0': random_operator(rng, 9, 5, 0.5)}
    np.savez(path, **ops)
    return ops


def test_tune_says_use_vendor(rng):
    A = random_operator(rng, 7, 5, 0.6)
    res = tune(A, n=N, runtime=SlowKernels(), name='slowop')
    assert res.best is not None and res.use_vendor
    assert res.verdict == VERDICT_VENDOR
    assert res.to_json()['verdict'] == VERDICT_VENDOR
    msg = res.message()
    assert '\n' not in msg and msg.startswith('slowop')
    assert VERDICT_VENDOR in msg and res.best['variant'] in msg
    assert f'{1/res.speedup:.2f}x' in msg
    table = format_table(res).splitlines()
    assert 'verdict: USE VENDOR' in table
    # the vendor BLAS ranks above every candidate, first of the ranking
    ranked = [ln for ln in table if ln.strip().split()[:1]
              and ln.split()[0] in ('V', '1')]
    assert ranked[0].split()[0] == 'V', ranked
    # the verdict survives the cache
    again = tune(A, n=N, runtime=SlowKernels(), name='slowop')
    assert again.cached and again.verdict == VERDICT_VENDOR \
        and again.message().startswith('slowop')


def test_tune_says_use_gimmik(rng):
    A = random_operator(rng, 7, 5, 0.6)
    res = tune(A, n=N, runtime=SlowVendor(), name='fastop')
    assert not res.use_vendor and res.verdict == VERDICT_GIMMIK
    assert res.to_json()['verdict'] == VERDICT_GIMMIK
    assert VERDICT_VENDOR not in res.message()
    table = format_table(res)
    assert 'verdict: use gimmik' in table and 'USE VENDOR' not in table
    # the vendor row ranks after the best candidate
    first = next(ln for ln in table.splitlines()
                 if ln.split()[:1] in (['V'], ['1']))
    assert first.split()[0] == '1'


def test_tune_cli_json_prints_the_verdict(tmp_path, rng, monkeypatch, capsys):
    path = tmp_path / 'ops.npz'
    _ops(rng, path)
    monkeypatch.setattr('gimmik.tune.get_runtime', lambda p: SlowKernels())
    assert main(['tune', f'{path}:p1-quad-m0', '--platform', 'c', '--n',
                 str(N), '--json']) == 0
    out, err = capsys.readouterr()
    obj = json.loads(out)
    assert obj['verdict'] == VERDICT_VENDOR and obj['use_vendor']
    assert err.strip().splitlines()[-1] == obj['message']
    assert obj['message'].startswith('p1-quad-m0')


@pytest.mark.parametrize('slow, vendor_wins',
                         [(SlowKernels, True), (SlowVendor, False)])
def test_sweep_tables_and_report_carry_the_verdict(tmp_path, rng, monkeypatch,
                                                   capsys, slow, vendor_wins):
    path = tmp_path / 'ops.npz'
    ops = _ops(rng, path)
    out = tmp_path / 'out'
    monkeypatch.setattr('gimmik.sweep.get_runtime', lambda p: slow())
    status = main(['sweep', '--platform', 'c', '--ops-path', str(path),
                   '--n', str(N), '--out', str(out), '--quiet'])
    assert status == 0
    err = capsys.readouterr().err
    want = VERDICT_VENDOR if vendor_wins else VERDICT_GIMMIK
    with open(out / 'sweep.csv', newline='') as f:
        rows = list(csv.DictReader(f))
    assert {r['operator'] for r in rows} == set(ops)
    assert all(r['verdict'] == want for r in rows), rows
    assert all((r['use_vendor'] == 'true') == vendor_wins for r in rows)
    with open(out / 'sweep.json') as f:
        doc = json.load(f)
    assert 'verdict' in doc['columns']
    assert all(r['verdict'] == want for r in doc['rows'])
    # one closing line names every such operator (or there is none)
    lines = [ln for ln in err.splitlines() if ln.startswith('use vendor:')]
    if vendor_wins:
        assert len(lines) == 1 and all(name in lines[0] for name in ops)
        assert f'on {len(ops)} of {len(ops)} operators' in lines[0]
    else:
        assert lines == []
    # the progress line and the report
    from gimmik.sweep import read_rows
    parsed = read_rows(out / 'sweep.csv')
    assert all(('USE VENDOR' in summary(r)) == vendor_wins for r in parsed)
    md = report.markdown(parsed)
    assert ('**Use the vendor BLAS** for 2 of 2' in md) == vendor_wins
    assert md.count('**use vendor**') == (2 if vendor_wins else 0)


def test_an_old_table_gets_its_verdict(tmp_path):
    """A sweep.csv of a gimmik before the verdict column: the rows keep
    their use_vendor and get the verdict that follows from it."""
    from gimmik.sweep import COLUMNS, read_rows, write_tables
    old = [c for c in COLUMNS if c != 'verdict']
    row = {c: '' for c in old}
    row.update(operator='p1-quad-m0', m='6', k='4', nnz='10', n='256',
               dtype='float64', candidate='cstream', time_s='1e-05',
               speedup='0.5', use_vendor='true')
    os.makedirs(tmp_path / 'out')
    with open(tmp_path / 'out' / 'sweep.csv', 'w', newline='') as f:
        w = csv.DictWriter(f, old)
        w.writeheader()
        w.writerow(row)
    rows = read_rows(tmp_path / 'out' / 'sweep.csv')
    assert rows and 'verdict' not in rows[0]
    write_tables(tmp_path / 'out', rows, {})
    again = read_rows(tmp_path / 'out' / 'sweep.csv')
    assert again[0]['verdict'] == VERDICT_VENDOR
