"""The autotuner, run for real on the c platform: correctness gating against
the vendor BLAS, the choice, buffer rotation, the disk cache and
``gimmik tune``."""

import json
import os

import numpy as np
import pytest

import gimmik.operators  # also binds gimmik
from bad_inputs import (BAD_DTYPES, BAD_MATRICES, BAD_SCALARS, GOOD_A,
                        TUNE_PANELS, TUNE_SIZES, _ids, raises_naming)
from conftest import A_SMALL, Panels, random_operator
from gimmik import cache
from gimmik.analysis import analyse
from gimmik.cli import main
from gimmik.runtime import (Runtime, RuntimeUnavailable, get_runtime,
                            moved_bytes)
from gimmik.runtime.c import Runtime as CRuntime
from gimmik.tune import (DEFAULT_N, TOLERANCE, clear_cache, default_n,
                         format_table, tune)

N, LDB, LDC = 3000, 3001, 3008


@pytest.fixture(autouse=True)
def cache_dir(fast_tune):
    """Every test here: a fresh cache and fewer timed launches (conftest's
    fast_tune; the timings are not what is tested here)."""
    return fast_tune


@pytest.fixture(scope='module')
def rt():
    return get_runtime('c')


def operator(rng=None):
    """A fixed small operator (the tuner draws fresh random panels itself):
    its kernels are built once per process and shared by the tests."""
    A = random_operator(np.random.default_rng(6), 6, 5, 0.5)
    A[1] = 0
    A[0, 0] = 0.5
    return A


class Sabotaged(CRuntime):
    """A c runtime whose candidates misbehave on purpose: one never runs
    (and is thus the fastest), one is off in one element, one fails to
    build."""

    LAZY, WRONG, FAILS = ('cstream/width64', 'bstream/width64',
                          'rowblock/rows1/vw16/width256')

    def __init__(self):
        super().__init__()
        self._device += ' (sabotaged)'

    def compile(self, src, meta):
        v = meta['variant']
        if v == self.FAILS:
            raise RuntimeError('the C compiler crashed (on purpose)')
        good = super().compile(src, meta)
        if v == self.LAZY:
            return lambda b, c, n, ldb, ldc: None
        if v == self.WRONG:
            def launch(b, c, n, ldb, ldc):
                good(b, c, n, ldb, ldc)
                # off by far more than the f64 tolerance whatever the
                # element's own size (a relative change of an element near
                # zero could hide under it)
                c[-1, n - 1] += 1e-6
            return launch
        return good


def check_result(res, A, beta, dtype, n=N):
    assert res.platform == 'c' and res.dtype == np.dtype(dtype).name
    assert res.n == n and res.beta == beta
    correct = [c for c in res.candidates if c['correct']]
    assert correct, res.candidates
    assert res.best['variant'] in {c['variant'] for c in correct}
    assert res.best['time_s'] == min(c['time_s'] for c in correct)
    assert res.use_vendor == (res.vendor['time_s'] < res.best['time_s'])
    moved = moved_bytes(analyse(A), beta, n, np.dtype(dtype).itemsize)
    for c in correct:
        assert c['gbps'] == pytest.approx(moved / c['time_s'] / 1e9)
        assert c['error'] is None
    for c in res.candidates:
        if not c['correct']:
            assert c['time_s'] is None and c['error']
    assert res.copy_gbps > 0 and res.vendor_error <= TOLERANCE[res.dtype]
    json.dumps(res.to_json())


def run_best(rt, res, A, beta, dtype, rng):
    """The chosen source computes the right thing on fresh panels."""
    p = Panels(rng, A, beta, np.dtype(dtype).type, 1234, 1240, 1236)
    rt.compile(res.best['src'], res.best['meta'])(p.bfull, p.cfull, 1234,
                                                  1240, 1236)
    p.check(res.best['variant'])


# -- the whole tuner, for real ------------------------------------------------

@pytest.mark.parametrize('dtype,beta', [('float64', 0.0), ('float32', -0.5)])
def test_tune_for_real(rt, rng, dtype, beta):
    A = operator(rng)
    seen = []
    res = tune(A, beta=beta, dtype=dtype, n=N, ldb=LDB, ldc=LDC,
               platform='c', name='op', progress=lambda *a: seen.append(a))
    check_result(res, A, beta, dtype)
    assert res.operator == 'op' and not res.cached
    assert [d for d, _, _ in seen] == list(range(1, len(res.candidates) + 1))
    assert all(t >= d for d, t, _ in seen)
    assert all(c['correct'] for c in res.candidates)
    run_best(rt, res, A, beta, dtype, rng)

    js = res.to_json()
    assert set(js) >= {'operator', 'platform', 'best', 'vendor',
                       'candidates'}
    assert set(js['best']) == {'variant', 'time_s', 'gbps'}
    assert set(js['vendor']) == {'time_s', 'gbps', 'formulation',
                                 'formulations'}
    assert js['vendor']['formulation'] == 'numpy-gemm'
    assert [f['name'] for f in js['vendor']['formulations']] == [
        'numpy-gemm']
    for c in js['candidates']:
        assert set(c) >= {'variant', 'time_s', 'gbps', 'correct'}


@pytest.mark.parametrize('beta', [0.0, 1.0])
def test_wrong_and_failing_never_chosen(rng, beta):
    A = operator(rng)
    res = tune(A, beta=beta, n=N, ldb=LDB, ldc=LDC, runtime=Sabotaged(),
               use_cache=False)
    by = {c['variant']: c for c in res.candidates}
    for v in (Sabotaged.LAZY, Sabotaged.WRONG, Sabotaged.FAILS):
        assert not by[v]['correct'], by[v]
    assert 'relative error' in by[Sabotaged.WRONG]['error']
    assert 'relative error' in by[Sabotaged.LAZY]['error']
    assert 'crashed' in by[Sabotaged.FAILS]['error']
    assert res.best['variant'] not in (Sabotaged.LAZY, Sabotaged.WRONG,
                                       Sabotaged.FAILS)
    check_result(res, A, beta, 'float64')


def test_no_correct_candidate_means_vendor(rng):
    class AllWrong(CRuntime):
        def compile(self, src, meta):
            return lambda b, c, n, ldb, ldc: None
    res = tune(operator(rng), n=500, runtime=AllWrong(), use_cache=False)
    assert res.best is None and res.use_vendor
    assert not any(c['correct'] for c in res.candidates)
    assert json.loads(json.dumps(res.to_json()))['best'] is None


def test_padding_writes_are_wrong(rng):
    class Spills(CRuntime):
        def compile(self, src, meta):
            good = super().compile(src, meta)

            def launch(b, c, n, ldb, ldc):
                good(b, c, n, ldb, ldc)
                c[:, n] = 0.0                   # one column past n
            return launch
    res = tune(operator(rng), n=N, ldb=LDB, ldc=LDC, runtime=Spills(),
               use_cache=False)
    assert res.best is None
    assert all('padding' in c['error'] for c in res.candidates)


def test_callers_buffers_restored(rng):
    A = operator(rng)
    b = rng.standard_normal((5, N))
    c = rng.standard_normal((6, N))
    b0, c0 = b.copy(), c.copy()
    res = tune(A, beta=0.0, runtime=get_runtime('c'), b=b, c=c,
               use_cache=False)
    assert res.n == N
    assert np.array_equal(c, c0) and np.array_equal(b, b0)

    class Broken(CRuntime):
        def vendor_gemm(self, *a, **k):
            raise RuntimeError('no BLAS today')
    with pytest.raises(RuntimeError, match='no BLAS'):
        tune(A, runtime=Broken(), b=b, c=c, use_cache=False)
    assert np.array_equal(c, c0)


def test_non_finite_caller_values_keep_the_check(rng):
    b = rng.standard_normal((5, N))
    c = rng.standard_normal((6, N))
    c[2, 7], b[0, 1] = np.nan, np.inf
    b0, c0 = b.tobytes(), c.tobytes()
    res = tune(operator(), beta=1.0, runtime=Sabotaged(), b=b, c=c,
               use_cache=False)
    assert np.isfinite(res.vendor_error)
    by = {x['variant']: x for x in res.candidates}
    assert not by[Sabotaged.WRONG]['correct']
    assert res.best['variant'] != Sabotaged.WRONG
    assert b.tobytes() == b0 and c.tobytes() == c0


def test_no_vendor_blas_checks_against_numpy(rng):
    class NoBLAS(Sabotaged):
        def vendor_gemm(self, *a, **k):
            raise RuntimeUnavailable('no hipBLAS bindings (on purpose)')
    res = tune(operator(), beta=0.5, n=N, ldb=LDB, ldc=LDC, runtime=NoBLAS(),
               use_cache=False)
    assert res.vendor['time_s'] is None and 'on purpose' in \
        res.vendor['error']
    assert res.best is not None and not res.use_vendor
    by = {x['variant']: x for x in res.candidates}
    assert not by[Sabotaged.WRONG]['correct']
    assert res.best['variant'] not in (Sabotaged.LAZY, Sabotaged.WRONG)
    assert 'no vendor BLAS' in format_table(res)
    assert json.loads(json.dumps(res.to_json()))['vendor']['time_s'] is None


def test_vendor_disagreeing_is_an_error(rng):
    class BadBLAS(CRuntime):
        def vendor_gemm(self, A, alpha, beta, dtype):
            good = super().vendor_gemm(A, alpha, beta, dtype)

            def launch(b, c, n, ldb, ldc):
                good(b, c, n, ldb, ldc)
                c[0, 0] += 1.0
            return launch
    with pytest.raises(RuntimeError, match='vendor BLAS'):
        tune(operator(rng), n=200, runtime=BadBLAS(), use_cache=False)


# -- buffer rotation ----------------------------------------------------------

@pytest.mark.parametrize('cache_bytes,expect', [(0, 1), (None, 'many')])
def test_buffer_rotation(rng, monkeypatch, cache_bytes, expect):
    monkeypatch.setattr('gimmik.tune.REPEATS', 20)
    A = operator(rng)
    setbytes = (5*LDB + 6*LDC)*8
    used = []

    class Counting(CRuntime):
        def cache_bytes(self):
            return 8*setbytes if cache_bytes is None else cache_bytes

        def compile(self, src, meta):
            good = super().compile(src, meta)

            def launch(b, c, n, ldb, ldc):
                used.append(id(b))
                good(b, c, n, ldb, ldc)
            return launch
    tune(A, n=N, ldb=LDB, ldc=LDC, runtime=Counting(), use_cache=False)
    # the first launch is a check, on the check's own B (no timing set)
    timing = set(used) - {used[0]}
    if expect == 1:
        assert len(timing) == 1
    else:
        assert len(timing) == 16       # enough sets to cover twice it


# -- the cache ----------------------------------------------------------------

def test_cache_hit_bypass_and_clear(rng, cache_dir):
    A = operator(rng)
    kw = dict(n=N, ldb=LDB, ldc=LDC, platform='c')
    first = tune(A, **kw)
    again = tune(A, **kw, name='other')
    assert again.cached and not first.cached
    assert again.best == first.best and again.operator == 'other'
    assert again.to_json()['candidates'] == first.to_json()['candidates']
    assert not tune(A, **kw, use_cache=False).cached

    # the same n class and alignment shares the entry
    assert tune(A, n=N + 60, ldb=N + 61, ldc=N + 72, platform="c").cached
    # another beta, dtype or operator does not
    assert not tune(A, beta=1.0, **kw).cached
    assert not tune(A, dtype='float32', **kw).cached
    assert not tune(2*A, **kw).cached

    files = os.listdir(cache_dir / 'tune')
    assert files and all(f.endswith('.json') for f in files)
    assert clear_cache() == len(files)
    assert not tune(A, **kw).cached


def test_corrupt_cache_entry_is_retuned(rng, cache_dir):
    A = operator(rng)
    tune(A, n=500, platform='c')
    for f in os.listdir(cache_dir / 'tune'):
        (cache_dir / 'tune' / f).write_text('{"truncated": ')
    assert not tune(A, n=500, platform='c').cached
    for f in os.listdir(cache_dir / 'tune'):
        (cache_dir / 'tune' / f).write_text('{"platform": "c"}')
    assert not tune(A, n=500, platform='c').cached


def test_cache_key():
    A = np.eye(3)
    base = dict(beta=0.0, dtype='float64', platform='c', device='cpu',
                options={}, n=1000, ldb=1000, ldc=1000, version='1')
    k = cache.tune_key(A, **base)
    assert k == cache.tune_key(A.copy(), **base)
    assert k == cache.tune_key(A, **{**base, 'n': 1096, 'ldb': 1096,
                                     'ldc': 1096})
    for change in [{'beta': 1.0}, {'dtype': 'float32'}, {'device': 'gpu'},
                   {'n': 4000, 'ldb': 4000, 'ldc': 4000},
                   {'ldb': 1001}, {'version': '2'},
                   {'options': {'gcn_arch': 'gfx90a'}}]:
        assert cache.tune_key(A, **{**base, **change}) != k, change
    assert cache.tune_key(2*A, **base) != k
    assert cache.tune_key(A.T.copy()[:2], **base) != k
    with pytest.raises(ValueError, match='cache key'):
        cache.load('../../etc/passwd')


def test_atomic_store(cache_dir):
    key = 'ab'*32
    cache.store(key, {'x': 1})
    assert cache.load(key) == {'x': 1}

    class Boom:
        pass
    with pytest.raises(TypeError):
        cache.store(key, {'x': Boom()})
    assert cache.load(key) == {'x': 1}
    assert os.listdir(cache_dir / 'tune') == [f'{key}.json']


# -- bad input ----------------------------------------------------------------

def test_bad_input(rng):
    A = operator(rng)
    with pytest.raises(ValueError, match='platform'):
        tune(A, platform='tpu')
    with pytest.raises(TypeError, match='dtype'):
        tune(A, dtype='int8', platform='c')
    with pytest.raises(ValueError, match='n'):
        tune(A, n=0, platform='c')
    with pytest.raises(ValueError, match='ldb'):
        tune(A, n=10, ldb=5, platform='c')
    with pytest.raises(TypeError, match='runtime'):
        tune(A, runtime='c')
    with pytest.raises(ValueError, match='platform'):
        tune(A, runtime=get_runtime('c'), platform='hip')
    with pytest.raises(TypeError, match='progress'):
        tune(A, platform='c', progress=5)
    with pytest.raises(ValueError, match='b must have shape'):
        tune(A, platform='c', n=10, b=np.zeros((4, 10)))
    with pytest.raises(TypeError, match='c has dtype'):
        tune(A, platform='c', n=10, c=np.zeros((6, 10), np.float32))
    with pytest.raises(ValueError, match='A'):
        tune(np.zeros((3, 3)), platform='c')
    with pytest.raises(ValueError, match='platform'):
        default_n('tpu')
    assert default_n('c') == DEFAULT_N['c'] <= 2**16
    assert issubclass(CRuntime, Runtime)


# -- gimmik tune --------------------------------------------------------------

@pytest.fixture
def npz(tmp_path, rng):
    path = tmp_path / 'ops.npz'
    np.savez_compressed(path, op=operator(rng))
    return f'{path}:op'


def test_cli_json(npz, capsys):
    assert main(['tune', npz, '--platform', 'c', '--n', '2000',
                 '--beta', '1', '--json']) == 0
    out = json.loads(capsys.readouterr().out)
    assert out['operator'] == 'op' and out['platform'] == 'c'
    assert out['beta'] == 1.0 and out['n'] == 2000
    assert set(out['best']) == {'variant', 'time_s', 'gbps'}
    assert out['candidates'] and all(
        set(c) >= {'variant', 'time_s', 'gbps', 'correct'}
        for c in out['candidates'])


def test_cli_table_and_cache_flags(npz, capsys):
    assert main(['tune', npz, '--platform', 'c', '--n', '2000',
                 '--dtype', 'f32']) == 0
    out = capsys.readouterr().out
    assert 'vs BLAS' in out and 'float32' in out
    assert '  1  ' in out                   # ranked
    assert main(['tune', npz, '--platform', 'c', '--n', '2000',
                 '--dtype', 'f32']) == 0
    assert 'cached' in capsys.readouterr().out
    assert main(['tune', npz, '--platform', 'c', '--n', '2000',
                 '--dtype', 'f32', '--no-cache']) == 0
    assert 'cached' not in capsys.readouterr().out
    assert main(['tune', '--clear-cache']) == 0
    assert 'removed 1 cached' in capsys.readouterr().out


def test_cli_errors(tmp_path, capsys):
    assert main(['tune', str(tmp_path / 'missing.mtx'),
                 '--platform', 'c']) == 2
    assert 'missing.mtx' in capsys.readouterr().err
    assert main(['tune', '--platform', 'c']) == 2
    assert 'OPERATOR' in capsys.readouterr().err


# -- the tuning cache ---------------------------------------------------------
def _spoil(entry, how):
    if how == 'vendor null':
        entry['vendor'] = None
    elif how == 'no best time':
        del entry['best']['time_s']
    elif how == 'best time 0':
        entry['best']['time_s'] = 0
    elif how == 'best time negative':
        entry['best']['time_s'] = -1.0
    elif how == 'best src missing':
        entry['best']['src'] = None
    elif how == 'candidates null':
        entry['candidates'] = None
    elif how == 'candidate time NaN':
        entry['candidates'][0]['time_s'] = float('nan')
    elif how == 'copy_gbps string':
        entry['copy_gbps'] = 'fast'
    elif how == 'use_vendor string':
        entry['use_vendor'] = 'no'
    elif how == 'use_vendor wrong':
        entry['use_vendor'] = not entry['use_vendor']
    elif how == 'dtype other':
        entry['dtype'] = 'float32'
    elif how == 'a list':
        return [entry]
    elif how == 'null':
        return None
    return entry


SPOILS = ['vendor null', 'no best time', 'best time 0', 'best time negative',
          'best src missing', 'candidates null', 'candidate time NaN',
          'copy_gbps string', 'use_vendor string', 'use_vendor wrong',
          'dtype other', 'a list', 'null']


def test_malformed_cache_entries_are_retuned(fast_tune, monkeypatch):
    import copy
    from gimmik import tune as tune_mod
    from gimmik.tune import tune
    kw = dict(n=300, platform='c')
    first = tune(A_SMALL, **kw)
    (path,) = (fast_tune / 'tune').iterdir()
    good = json.loads(path.read_text())
    assert tune(A_SMALL, **kw).cached
    # tuning again gives the same answer, without the wait
    runs = []
    monkeypatch.setattr(tune_mod, '_tune', lambda *a: runs.append(a)
                        or copy.deepcopy(first))
    for i, how in enumerate(SPOILS, 1):
        path.write_text(json.dumps(_spoil(json.loads(json.dumps(good)),
                                          how)))
        res = tune(A_SMALL, **kw)
        assert not res.cached and len(runs) == i, how
        assert res.best['time_s'] > 0
        # the entry was rewritten: the next run is served from it
        assert tune(A_SMALL, **kw).cached, how
        good = json.loads(path.read_text())


def test_unwritable_cache_is_a_warning(fast_tune, capsys, tmp_path):
    from gimmik.tune import tune
    fast_tune.mkdir(parents=True)
    (fast_tune / 'tune').write_text('a file where the directory would be')
    with pytest.warns(RuntimeWarning, match='cache not written'):
        res = tune(A_SMALL, n=300, platform='c')
    assert res.best and not res.cached

    mtx = tmp_path / 'op.mtx'
    gimmik.operators.write_mtx(mtx, A_SMALL)
    rc = main(['tune', str(mtx), '--platform', 'c', '--n', '300'])
    cap = capsys.readouterr()
    assert rc == 0 and 'best ' in cap.out
    assert 'gimmik tune: warning: gimmik cache not written' in cap.err


def test_cache_write_failure_keeps_result(fast_tune, monkeypatch):
    from gimmik.tune import tune

    def denied(*a, **k):
        raise PermissionError(13, 'Permission denied')
    monkeypatch.setattr('gimmik.util.tempfile.mkstemp', denied)
    with pytest.warns(RuntimeWarning, match='Permission denied'):
        res = tune(A_SMALL, n=300, platform='c')
    assert res.best['variant']


# -- limits and errors that name the real problem -----------------------------
def test_memory_bound(monkeypatch, fast_tune):
    from gimmik.tune import tune
    monkeypatch.setattr('gimmik.tune.MAX_MEMORY_FRACTION', 1e-9)
    with pytest.raises(ValueError, match='n = 300.*smaller n'):
        tune(A_SMALL, n=300, platform='c')


def test_beta_beyond_float32_named(tmp_path, capsys, fast_tune):
    from gimmik.tune import tune
    with pytest.raises(ValueError, match='beta.*float32'):
        tune(A_SMALL, beta=1e39, dtype='float32', n=300, platform='c')
    with pytest.raises(ValueError, match='A has values beyond the float32'):
        tune(A_SMALL*1e39, dtype='float32', n=300, platform='c')
    with pytest.raises(ValueError, match='all zeros in float32'):
        tune(A_SMALL*1e-60, dtype='float32', n=300, platform='c')
    mtx = tmp_path / 'op.mtx'
    gimmik.operators.write_mtx(mtx, A_SMALL)
    rc = main(['tune', str(mtx), '--platform', 'c', '--dtype', 'f32',
               '--beta', '1e39', '--n', '300'])
    err = capsys.readouterr().err
    assert rc == 2 and 'beta' in err and 'float32' in err
    assert 'vendor' not in err


# -- the correctness check ----------------------------------------------------
class CstreamSaboteur(CRuntime):
    """A c runtime whose cstream candidates (its victims) compute C right
    and then do after(b, c, n)."""

    label = 'saboteur'

    def __init__(self):
        super().__init__()
        self._device += f' ({self.label})'
        self.victims = set()

    def after(self, b, c, n):
        raise NotImplementedError

    def compile(self, src, meta):
        good = super().compile(src, meta)
        if meta['tplname'] != 'cstream':
            return good
        self.victims.add(meta['variant'])

        def launch(b, c, n, ldb, ldc):
            good(b, c, n, ldb, ldc)
            self.after(b, c, n)
        return launch


class SmallRowSaboteur(CstreamSaboteur):
    """Its cstream candidates zero, or flip the sign of, the small row 0 of
    C (A's row 0 is 1e12 times smaller than its row 1)."""

    def __init__(self, how):
        super().__init__()
        self.how = how

    def after(self, b, c, n):
        if self.how == 'zero':
            c[0, :n] = 0
        else:
            c[0, :n] *= -1


@pytest.mark.parametrize('how', ['zero', 'flip'])
@pytest.mark.parametrize('beta', [0.0, 1.0])
def test_wrong_small_row_never_wins(fast_tune, how, beta):
    from gimmik.tune import tune
    A = np.array([[1e-6, 2e-6, 0], [1e6, 0, -3e6], [0, 5e5, 1e6]])
    rt = SmallRowSaboteur(how)
    res = tune(A, beta=beta, n=300, runtime=rt, use_cache=False)
    by = {c['variant']: c for c in res.candidates}
    assert rt.victims
    for v in rt.victims:
        assert not by[v]['correct'] and 'relative error' in by[v]['error']
    assert res.best['variant'] not in rt.victims
    assert any(c['correct'] for c in res.candidates)


class BScribbler(CstreamSaboteur):
    """Its cstream candidates compute C right, then overwrite B (which
    would make every later candidate look wrong)."""

    label = 'scribbler'

    def after(self, b, c, n):
        b[:, :n] = 0


def test_candidate_writing_b_is_wrong_and_harmless(fast_tune):
    from gimmik.tune import tune
    rt = BScribbler()
    res = tune(A_SMALL, n=300, runtime=rt, use_cache=False)
    by = {c['variant']: c for c in res.candidates}
    assert rt.victims
    for v, c in by.items():
        assert c['correct'] == (v not in rt.victims), c
        if v in rt.victims:
            assert c['error'] == 'modified B'
    assert res.best['variant'] not in rt.victims


# -- timing outliers ----------------------------------------------------------
class HiccupRuntime(CRuntime):
    """Times are FAST, except the first measurement of candidate `slow`
    (or the first `first_slow` measurements of the whole run), which a
    scheduler hiccup makes 100 times slower.  The copy bandwidth is what
    FAST moves per second."""

    FAST = 1e-3

    def __init__(self, moved, slow=None, first_slow=0):
        super().__init__()
        self._device += ' (hiccups)'
        self.moved, self.slow, self.first_slow = moved, slow, first_slow
        self.current, self.calls, self.timed = None, 0, []

    def compile(self, src, meta):
        self.current = meta['variant']
        return super().compile(src, meta)

    def vendor_gemm(self, A, alpha, beta, dtype):
        self.current = 'vendor'
        return super().vendor_gemm(A, alpha, beta, dtype)

    def time(self, launch, args, *, warmup=2, repeats=10):
        launch(*args)
        self.calls += 1
        slow = self.calls <= self.first_slow or (
            self.current == self.slow and self.current not in self.timed)
        self.timed.append(self.current)
        return self.FAST*(100 if slow else 1)

    def copy_bandwidth(self, nbytes):
        return self.moved / self.FAST


def _moved(A, beta=0.0, n=300):
    from gimmik.analysis import analyse
    return moved_bytes(analyse(A), beta, n, 8)


def test_outlier_candidate_is_retimed(fast_tune):
    from gimmik.tune import tune
    variants = [c.variant for c in gimmik.CMatMul(A_SMALL, aligne=4)
                .candidates(np.float64)]
    victim = variants[2]
    rt = HiccupRuntime(_moved(A_SMALL), slow=victim)
    res = tune(A_SMALL, n=300, ldb=300, ldc=300, runtime=rt, use_cache=False)
    by = {c['variant']: c for c in res.candidates}
    assert by[victim]['retimed'] >= 1
    assert by[victim]['time_s'] == pytest.approx(HiccupRuntime.FAST)
    assert all(c['time_s'] == pytest.approx(HiccupRuntime.FAST)
               for c in res.candidates if c['correct'])
    assert sum(c['retimed'] for c in res.candidates) == by[victim]['retimed']


def test_slow_result_against_copy_bandwidth_is_retimed(fast_tune):
    """A hiccup over the vendor BLAS and every candidate: nothing stands
    out among them, but the result is far below the copy bandwidth."""
    from gimmik.tune import tune
    n_cands = len(gimmik.CMatMul(A_SMALL, aligne=4).candidates(np.float64))
    rt = HiccupRuntime(_moved(A_SMALL), first_slow=1 + n_cands)
    res = tune(A_SMALL, n=300, ldb=300, ldc=300, runtime=rt, use_cache=False)
    assert res.best['time_s'] == pytest.approx(HiccupRuntime.FAST)
    assert res.vendor['time_s'] == pytest.approx(HiccupRuntime.FAST)
    assert res.best['gbps'] == pytest.approx(res.copy_gbps)


def test_genuinely_slow_candidates_cost_bounded_retimes(fast_tune):
    """A candidate that is always slow is measured at most 1 + RETIMES
    times and reported as slow."""
    from gimmik import tune as tune_mod

    class AlwaysSlow(HiccupRuntime):
        def time(self, launch, args, **kw):
            launch(*args)
            self.timed.append(self.current)
            return self.FAST*(100 if self.current == self.slow else 1)

    variants = [c.variant for c in gimmik.CMatMul(A_SMALL, aligne=4)
                .candidates(np.float64)]
    victim = variants[1]
    rt = AlwaysSlow(_moved(A_SMALL), slow=victim)
    res = tune_mod.tune(A_SMALL, n=300, ldb=300, ldc=300, runtime=rt,
                        use_cache=False)
    by = {c['variant']: c for c in res.candidates}
    assert rt.timed.count(victim) == 1 + tune_mod.RETIMES
    assert by[victim]['time_s'] == pytest.approx(100*HiccupRuntime.FAST)
    assert res.best['variant'] != victim


# -- bad input ----------------------------------------------------------------
def _tune():
    return pytest.importorskip('gimmik.tune').tune


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('label,A,exc', BAD_MATRICES, ids=_ids(BAD_MATRICES))
def test_tune_rejects_matrix(label, A, exc):
    with raises_naming(exc, 'A'):
        _tune()(A, platform='c', n=64, use_cache=False)


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('label,beta,exc', BAD_SCALARS, ids=_ids(BAD_SCALARS))
def test_tune_rejects_beta(label, beta, exc):
    with raises_naming(exc, 'beta'):
        _tune()(GOOD_A, beta=beta, platform='c', n=64, use_cache=False)


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('label,dtype', BAD_DTYPES, ids=_ids(BAD_DTYPES))
def test_tune_rejects_dtype(label, dtype):
    with raises_naming(TypeError, 'dtype'):
        _tune()(GOOD_A, dtype=dtype, platform='c', n=64, use_cache=False)


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('label,sizes,exc,arg', TUNE_SIZES,
                         ids=_ids(TUNE_SIZES))
def test_tune_rejects_sizes(label, sizes, exc, arg):
    with raises_naming(exc, arg):
        _tune()(GOOD_A, platform='c', use_cache=False, **sizes)


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('platform', ['rocm', 'HIP', 'metal', '', None, 3,
                                      'c; rm -rf /'])
def test_tune_rejects_platform(platform):
    with raises_naming((ValueError, TypeError), 'platform'):
        _tune()(GOOD_A, platform=platform, n=64, use_cache=False)


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('label,b,c,exc,arg', TUNE_PANELS,
                         ids=_ids(TUNE_PANELS))
def test_tune_rejects_panels(label, b, c, exc, arg):
    with raises_naming(exc, arg):
        _tune()(GOOD_A, platform='c', n=64, use_cache=False, b=b, c=c)


# -- many ranks, unstable timings, environment failures, overflow -----------
class SteadyClock(CRuntime):
    """The c runtime with fixed times (vendor 1 ms, candidates 0.5 ms) that
    take `delay` seconds each to measure, and a log of the tunings run."""

    def __init__(self, delay=0.0, log=None):
        super().__init__()
        self.delay, self.log = delay, log

    def vendor_formulations(self, *args, **kw):
        if self.log:
            with open(self.log, 'a') as f:
                f.write(f'{os.getpid()}\n')
        forms = super().vendor_formulations(*args, **kw)
        return [(name, self._tag(launch, 'vendor'))
                for name, launch in forms]

    def compile(self, src, meta):
        return self._tag(super().compile(src, meta), 'candidate')

    @staticmethod
    def _tag(launch, kind):
        def tagged(b, c, n, ldb, ldc):
            launch(b, c, n, ldb, ldc)
        tagged.kind = kind
        return tagged

    def time(self, launch, args, *, warmup=2, repeats=10):
        import time as _time
        _time.sleep(self.delay)
        launch(*args)
        return self.timing(launch)

    def timing(self, launch):
        return 1e-3 if getattr(launch, 'kind', 'vendor') == 'vendor' \
            else 5e-4

    def copy_bandwidth(self, nbytes):
        return 1e10


_RANK = '''
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from test_tune import SteadyClock, operator
from gimmik.tune import tune
log, gate, nranks = sys.argv[2], sys.argv[3], int(sys.argv[4])
with open(gate, 'a') as f:
    f.write('x')
while os.path.getsize(gate) < nranks:    # all ranks start together
    time.sleep(0.01)
res = tune(operator(), n=500, runtime=SteadyClock(0.05, log))
print(json.dumps([res.cached, res.best['variant'], res.vendor['time_s']]))
'''


def test_concurrent_ranks_share_one_tuning(tmp_path, cache_dir):
    import subprocess
    import sys
    nranks = 3
    log, gate = tmp_path / 'tunings', tmp_path / 'gate'
    gate.write_text('')
    env = {**os.environ, 'GIMMIK_CACHE_DIR': str(cache_dir),
           'PYTHONPATH': os.pathsep.join(sys.path)}
    procs = [subprocess.Popen(
        [sys.executable, '-W', 'ignore', '-c', _RANK,
         os.path.dirname(__file__), str(log), str(gate), str(nranks)],
        env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(nranks)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0]*nranks, outs
    results = [json.loads(o) for o in outs]
    assert len(log.read_text().split()) == 1        # one rank tuned
    assert sorted(r[0] for r in results) == [False] + [True]*(nranks - 1)
    assert len({tuple(r[1:]) for r in results}) == 1    # one answer


class Jittery(SteadyClock):
    """A busy machine: the vendor BLAS's first measurement came in a
    scheduler slice 100x slower than the kernel (and the copy bandwidth
    was measured as low, so nothing looks out of line)."""

    def __init__(self):
        super().__init__()
        self.vendor_times = 0

    def timing(self, launch):
        if getattr(launch, 'kind', 'vendor') == 'vendor':
            self.vendor_times += 1
            return 1e-1 if self.vendor_times == 1 else 1e-3
        return 5e-4

    def copy_bandwidth(self, nbytes):
        return 1e6


def test_unstable_verdict_is_reported_not_cached(rng, cache_dir,
                                                 monkeypatch):
    monkeypatch.setattr('gimmik.tune.UNSTABLE_FACTOR', 4.0)
    res = tune(operator(rng), n=500, runtime=Jittery())
    assert res.unstable and 'vendor BLAS' in res.unstable
    assert res.to_json()['unstable'] == res.unstable
    assert 'timings unstable' in format_table(res)
    assert not tune(operator(rng), n=500, runtime=Jittery()).cached
    steady = tune(operator(rng), n=500, runtime=SteadyClock())
    assert steady.unstable is None and not steady.cached
    assert tune(operator(rng), n=500, runtime=SteadyClock()).cached


class DiskFull(SteadyClock):
    """Every build fails: the cache disk is full."""

    def compile(self, src, meta):
        import errno
        raise OSError(errno.ENOSPC, 'No space left on device')


class NoAssembler(SteadyClock):
    """One build fails: the toolchain cannot run `as`."""

    def compile(self, src, meta):
        if meta['variant'].startswith('cstream'):
            raise RuntimeError("the C compiler (cc) rejected the kernel:\ncc: "
                               "fatal error: cannot execute 'as': execvp: No "
                               "such file or directory")
        return super().compile(src, meta)


@pytest.mark.parametrize('rt', [DiskFull, NoAssembler])
def test_environment_failures_are_errors_not_verdicts(rng, cache_dir, rt):
    from gimmik.errors import EnvironmentFault
    with pytest.raises(EnvironmentFault, match='outside the kernel'):
        tune(operator(rng), n=500, runtime=rt())
    assert not os.path.exists(cache_dir / 'tune') \
        or os.listdir(cache_dir / 'tune') == []


def test_tmpdir_missing_is_an_error(rng, cache_dir, monkeypatch, tmp_path):
    import tempfile
    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path / 'no-tmp'))
    from gimmik.errors import EnvironmentFault
    with pytest.raises(EnvironmentFault, match='No such file'):
        tune(operator(rng) * 3, n=500, platform='c')
    assert os.listdir(cache_dir / 'tune') == []


def test_every_candidate_failing_is_an_error(rng, cache_dir):
    class Broken(SteadyClock):
        def compile(self, src, meta):
            raise RuntimeError('internal compiler error: in kernel')
    from gimmik.errors import EnvironmentFault
    with pytest.raises(EnvironmentFault, match='all .* candidates failed'):
        tune(operator(rng), n=500, runtime=Broken())


@pytest.mark.parametrize('dtype, big', [('float64', 1e308),
                                        ('float32', 1e38)])
def test_overflowing_product_is_named(rng, dtype, big):
    A = np.full((3, 4), big)
    A[0, 0] = -big
    with pytest.raises(ValueError, match=f'overflows {dtype}'):
        tune(A, n=200, dtype=dtype, platform='c', use_cache=False)


def test_cli_clear_builds(npz, capsys, cache_dir, monkeypatch):
    from gimmik.runtime import c as runtime_c
    monkeypatch.setattr(runtime_c, '_loaded', {})   # no library in memory
    assert main(['tune', npz, '--n', '300', '--platform', 'c']) == 0
    assert os.listdir(cache_dir / 'c')
    capsys.readouterr()
    assert main(['tune', '--clear-builds']) == 0
    assert 'cached builds' in capsys.readouterr().out
    assert os.listdir(cache_dir / 'c') == []
    assert os.listdir(cache_dir / 'tune')
