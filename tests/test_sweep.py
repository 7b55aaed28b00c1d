"""gimmik sweep: rows, resumption, errors and progress, with a stand-in
tuner; then a short real sweep on the C platform."""

import csv
import io
import json
import os
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import _sweep
from gimmik.analysis import analyse
from gimmik.operators import suite
from gimmik.runtime import moved_bytes
from gimmik.progress import SweepBar
from gimmik.sweep import COLUMNS, read_rows, sweep

OPS = 'p1-quad-*,p1-tri-m0'   # 6 small operators


class FakeRuntime:
    name = 'fake'
    device = 'Fake Device 9000'


class FakeTune:
    """Stands in for gimmik.tune.tune: times that depend only on A."""

    def __init__(self, fail=(), interrupt_after=None, no_correct=()):
        self.calls = []
        self.fail, self.no_correct = set(fail), set(no_correct)
        self.interrupt_after = interrupt_after

    def __call__(self, A, *, beta, dtype, n, platform, runtime, use_cache,
                 name, progress=None):
        if self.interrupt_after is not None \
                and len(self.calls) == self.interrupt_after:
            raise KeyboardInterrupt
        self.calls.append(dict(name=name, beta=beta, dtype=dtype, n=n,
                               platform=platform, runtime=runtime))
        if name in self.fail:
            raise RuntimeError(f'compile of {name} failed\nlog line')
        if progress is not None:
            progress(1, 2, 'cstream/w2')
        t = 1e-6*(1 + np.count_nonzero(A))
        best = None if name in self.no_correct else \
            {'variant': 'cstream/w2', 'time_s': t, 'gbps': 0.0,
             'src': '...', 'meta': {}}
        return SimpleNamespace(
            platform=platform, device=runtime.device, dtype=dtype,
            beta=beta, n=n, best=best,
            vendor={'time_s': 2e-6*A.size, 'gbps': 0.0}, copy_gbps=50.0,
            candidates=[{'variant': 'cstream/w2', 'time_s': t, 'gbps': 0.0,
                         'correct': True, 'error': None},
                        {'variant': 'bstream', 'time_s': None, 'gbps': None,
                         'correct': False, 'error': 'wrong'}],
            use_vendor=False,
            to_json=lambda: {'name': name, 'best': best})


def run(tmp_path, tune, **kw):
    kw.setdefault('ops', OPS)
    kw.setdefault('n', 1000)
    return sweep(tmp_path, runtime=FakeRuntime(), tune=tune, **kw)


def test_rows(tmp_path):
    tune = FakeTune()
    rows = run(tmp_path, tune, dtype='f32')
    ops = suite(OPS)
    assert [r['operator'] for r in rows] == list(ops)
    assert [c['name'] for c in tune.calls] == list(ops)

    for call in tune.calls:
        want = 1.0 if call['name'].endswith(('-m3', '-m6')) else 0.0
        assert call['beta'] == want
        assert call['dtype'] == 'float32' and call['n'] == 1000
        assert call['platform'] == 'fake'

    disk = read_rows(tmp_path / 'sweep.csv')
    assert disk == rows
    with open(tmp_path / 'sweep.csv') as f:
        assert tuple(next(csv.reader(f))) == COLUMNS

    for r in rows:
        A = ops[r['operator']]
        info = analyse(A)
        nbytes = moved_bytes(info, r['beta'], 1000, 4)
        assert (r['m'], r['k'], r['nnz']) == A.shape + (info.nnz,)
        assert r['unique'] == info.unique
        assert r['gbps'] == pytest.approx(nbytes / r['time_s'] / 1e9)
        assert r['vendor_gbps'] == pytest.approx(
            nbytes / r['vendor_time_s'] / 1e9)
        assert r['gflops'] == pytest.approx(2*info.nnz*1000 / r['time_s']
                                            / 1e9)
        assert r['copy_fraction'] == pytest.approx(r['gbps'] / 50.0)
        assert r['speedup'] == pytest.approx(r['vendor_time_s']
                                             / r['time_s'])
        assert r['device'] == 'Fake Device 9000'
        assert (r['candidates'], r['correct']) == (2, 1)
        assert r['error'] == ''

    doc = json.loads((tmp_path / 'sweep.json').read_text())
    assert doc['config']['dtype'] == 'float32'
    assert doc['config']['n'] == 1000
    assert doc['config']['suite']['pyfr_version'] == '3.1'
    assert [r['operator'] for r in doc['rows']] == list(ops)
    tj = json.loads((tmp_path / 'tune' / 'p1-quad-m460.json').read_text())
    assert tj['name'] == 'p1-quad-m460'
    assert not list(tmp_path.glob('*.tmp'))


def test_progress_through_the_tuner(tmp_path):
    tty = FakeTTY()
    sweep(tmp_path, ops='p1-tri-m0', n=10, runtime=FakeRuntime(),
          tune=FakeTune(), progress=SweepBar(tty))
    text = tty.getvalue()
    assert 'candidate 1/2 cstream/w2' in text
    assert '1/1 p1-tri-m0' in text


def test_resume_after_interrupt(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, FakeTune(interrupt_after=2))
    done = [r['operator'] for r in read_rows(tmp_path / 'sweep.csv')]
    assert len(done) == 2

    tune = FakeTune()
    rows = run(tmp_path, tune)
    assert len(rows) == 6
    assert not set(c['name'] for c in tune.calls) & set(done)
    assert len(tune.calls) == 4

    # nothing left: no tuning at all; --restart tunes everything again
    tune = FakeTune()
    assert run(tmp_path, tune) == rows and not tune.calls
    run(tmp_path, tune, restart=True)
    assert len(tune.calls) == 6


def test_failures_are_rows_and_are_retried(tmp_path):
    rows = run(tmp_path, FakeTune(fail={'p1-quad-m3'},
                                  no_correct={'p1-tri-m0'}))
    byname = {r['operator']: r for r in rows}
    assert 'compile of p1-quad-m3 failed log line' in \
        byname['p1-quad-m3']['error']
    assert byname['p1-quad-m3']['time_s'] is None
    assert byname['p1-tri-m0']['error'] == 'no correct candidate'

    tune = FakeTune()
    rows = run(tmp_path, tune)
    assert sorted(c['name'] for c in tune.calls) == ['p1-quad-m3',
                                                      'p1-tri-m0']
    assert not any(r['error'] for r in rows)


def test_mismatched_resume(tmp_path):
    run(tmp_path, FakeTune())
    with pytest.raises(ValueError, match='dtype float64 and n 1000'):
        run(tmp_path, FakeTune(), n=2000)
    with pytest.raises(ValueError, match='--restart'):
        run(tmp_path, FakeTune(), dtype='f32')


@pytest.mark.parametrize('kw, exc, match', [
    ({'platform': 'tpu'}, ValueError, 'platform'),
    ({'dtype': 'f16'}, TypeError, 'dtype'),
    ({'n': 0}, ValueError, 'n must'),
    ({'n': 2.5}, ValueError, 'n must'),
    ({'ops': 'p9-*'}, ValueError, 'no operator'),
    ({'ops_path': 'missing.npz'}, OSError, 'does not exist'),
])
def test_bad_arguments(tmp_path, kw, exc, match):
    tune = FakeTune()
    with pytest.raises(exc, match=match):
        run(tmp_path, tune, **kw)
    assert not tune.calls


def test_not_a_sweep_table(tmp_path):
    (tmp_path / 'sweep.csv').write_text('a,b\n1,2\n')
    with pytest.raises(ValueError, match='not a gimmik sweep table'):
        run(tmp_path, FakeTune())


def test_mtx_directory_suite(tmp_path):
    from gimmik.operators import export_mtx
    export_mtx(tmp_path / 'ops', 'p2-hex-m0,p2-hex-m6')
    tune = FakeTune()
    rows = run(tmp_path / 'out', tune, ops='*', ops_path=tmp_path / 'ops')
    assert [(r['operator'], r['beta']) for r in rows] == \
        [('p2-hex-m0', 0.0), ('p2-hex-m6', 1.0)]


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_progress():
    tty = FakeTTY()
    bar = SweepBar(tty)
    bar.begin(2, 3, 'x/sweep.csv')
    bar.start('p1-hex-m0')
    bar.step(3, 7, 'bstream/w2')
    assert 'p1-hex-m0' in tty.getvalue()
    assert 'candidate 3/7 bstream/w2' in tty.getvalue()
    row = {'error': 'skipped: too big'}
    bar.finish('p1-hex-m0', row)
    bar.start('p1-hex-m3')
    bar.finish('p1-hex-m3', row)
    bar.close()
    text = tty.getvalue()
    assert 'resuming: 1 of 3 operators already done in x/sweep.csv' in text
    assert '2/2 p1-hex-m3' in text and '1/2' in text

    # elsewhere (a log file): plain lines, no bar; quiet: nothing
    plain = io.StringIO()
    bar = SweepBar(plain)
    bar.begin(1, 1, 'x')
    bar.start('x')
    bar.finish('x', row)
    bar.close()
    assert plain.getvalue() == '   1/1 x                skipped: too big\n'
    quiet = FakeTTY()
    bar = SweepBar(quiet, quiet=True)
    bar.begin(1, 2, 'x')
    bar.start('x')
    bar.finish('x', row)
    bar.close()
    assert quiet.getvalue() == ''


def test_cli_errors(tmp_path, capsys):
    from gimmik.cli import main
    rc = main(['sweep', '--ops', 'p9-*', '--out', str(tmp_path)])
    assert rc == 2
    assert 'no operator' in capsys.readouterr().err


def _c_platform_ready():
    try:
        import gimmik.tune  # noqa: F401
        from gimmik.runtime import get_runtime
        get_runtime('c')
    except Exception:
        return False
    return True


@pytest.mark.skipif(not _c_platform_ready(),
                    reason='gimmik.tune or the C runtime is not available')
def test_real_sweep_on_c(tmp_path):
    """Two tiny operators through the real tuner on the C platform."""
    from gimmik.cli import main
    out = tmp_path / 'out'
    rc = main(['sweep', '--platform', 'c', '--ops', 'p1-tri-m0,p1-quad-m3',
               '--n', '4096', '--out', str(out), '--no-cache', '--quiet'])
    assert rc == 0
    rows = read_rows(out / 'sweep.csv')
    assert [r['operator'] for r in rows] == ['p1-quad-m3', 'p1-tri-m0']
    for r in rows:
        assert r['error'] == '' and r['platform'] == 'c'
        assert r['time_s'] > 0 and r['gbps'] > 0 and r['correct'] >= 1
        assert r['vendor_time_s'] > 0 and r['copy_gbps'] > 0
        assert r['beta'] == (1.0 if r['operator'].endswith('m3') else 0.0)
    assert os.path.exists(out / 'tune' / 'p1-tri-m0.json')


def test_max_nnz(tmp_path):
    ops = 'p1-quad-m0,p3-hex-m0,p3-hex-m3'   # 16, 384 and 384 non-zeros
    tune = FakeTune()
    rows = run(tmp_path, tune, ops=ops, max_nnz=100)
    skipped = {r['operator'] for r in rows if r['error']}
    assert skipped == {'p3-hex-m0', 'p3-hex-m3'}
    assert all(r['error'] == 'skipped: 384 non-zeros > max_nnz 100'
               for r in rows if r['error'])
    assert [c['name'] for c in tune.calls] == ['p1-quad-m0']
    # a later run without the limit tunes only the skipped ones
    tune = FakeTune()
    run(tmp_path, tune, ops=ops, max_nnz=None)
    assert {c['name'] for c in tune.calls} == skipped
    with pytest.raises(ValueError, match='max_nnz'):
        run(tmp_path, FakeTune(), max_nnz=0)


# -- torn tables --------------------------------------------------------------
@pytest.mark.parametrize('cut', [1, 5, 20, 40])
def test_torn_last_row_is_redone(tmp_path, cut):
    from gimmik.sweep import read_rows
    calls = []
    _sweep(tmp_path, calls)
    csv_path = tmp_path / 'sweep.csv'
    text = csv_path.read_text()
    last = text.rstrip('\n').rsplit('\n', 1)[1]
    torn = text[:len(text) - 1 - len(last) + cut]     # part of the last row
    csv_path.write_text(torn)
    problems = []
    rows = read_rows(csv_path, problems)
    assert len(rows) == 2 and len(problems) == 1
    assert problems[0][0] == 4 and 'torn' in problems[0][1]
    assert all(r['time_s'] for r in rows)

    calls.clear()
    rows = _sweep(tmp_path, calls)
    assert calls == [last.split(',')[0]]
    assert len(rows) == 3 and all(r['time_s'] for r in rows)
    assert read_rows(csv_path, problems := []) and not problems


# -- sweeps sharing DIR, interrupted writes, resuming ------------------------
def table_ops(out):
    with open(os.path.join(out, 'sweep.csv'), newline='') as f:
        done = [r['operator'] for r in csv.DictReader(f)]
    with open(os.path.join(out, 'candidates.csv'), newline='') as f:
        cands = {r['operator'] for r in csv.DictReader(f)}
    with open(os.path.join(out, 'sweep.json')) as f:
        in_json = [r['operator'] for r in json.load(f)['rows']]
    return done, cands, in_json


_NODE = '''
import sys, time
sys.path.insert(0, sys.argv[1])
from test_sweep import FakeRuntime, FakeTune
from gimmik.sweep import sweep
out, ops = sys.argv[2], sys.argv[3]
fake = FakeTune()

def slow(A, **kw):
    time.sleep(0.2)
    return fake(A, **kw)
sweep(out, ops=ops, n=1000, runtime=FakeRuntime(), tune=slow)
'''


def test_two_sweeps_into_one_out(tmp_path):
    """Two nodes, one suite split between them, one --out."""
    import subprocess
    import sys
    out = tmp_path / 'out'
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)}
    halves = ['p1-quad-*', 'p1-tri-*']
    procs = [subprocess.Popen([sys.executable, '-c', _NODE,
                               os.path.dirname(__file__), str(out), ops],
                              env=env) for ops in halves]
    assert [p.wait(300) for p in procs] == [0, 0]
    want = set(suite(','.join(halves)))
    done, cands, in_json = table_ops(out)
    assert sorted(done) == sorted(want) and len(done) == len(want)
    assert cands == want and sorted(in_json) == sorted(want)


@pytest.mark.parametrize('target', ['candidates.csv', 'sweep.json',
                                    'sweep.csv'])
def test_stopped_between_table_writes_loses_no_rows(tmp_path, monkeypatch,
                                                    target):
    """A sweep killed while it puts its tables in place (here: at the
    rename of `target` after the second operator) resumes with every
    operator's rows in every table."""
    real, seen = os.replace, []

    def replace(src, dst):
        if os.path.basename(dst) == target:
            seen.append(dst)
            if len(seen) == 2:
                raise KeyboardInterrupt
        return real(src, dst)
    monkeypatch.setattr(os, 'replace', replace)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, FakeTune())
    monkeypatch.setattr(os, 'replace', real)
    run(tmp_path, FakeTune())
    done, cands, in_json = table_ops(tmp_path)
    want = set(suite(OPS))
    assert set(done) == want and cands == want and set(in_json) == want
    assert not [f for f in os.listdir(tmp_path) if f.endswith('.part')]


def test_resume_over_a_cached_result_of_another_n(tmp_path):
    """The tuner may answer from a result of another n of the same n class
    (cached): the table then holds that n, and the sweep still resumes."""
    class OtherN(FakeTune):
        def __call__(self, A, *, n, **kw):
            return super().__call__(A, n=n + 152, **kw)
    run(tmp_path, OtherN(), n=2048)
    assert {r['n'] for r in read_rows(tmp_path / 'sweep.csv')} == {2200}
    tune = FakeTune()
    run(tmp_path, tune, n=2048)
    assert tune.calls == []
    with pytest.raises(ValueError, match='n 2200, not dtype float64 and n '
                       '4096'):
        run(tmp_path, FakeTune(), n=4096)
