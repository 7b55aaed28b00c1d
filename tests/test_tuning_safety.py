"""Tuning safety: a candidate made wrong on purpose, or one that fails to
compile, is never selected, even when it is reported as the fastest; the
caller's panels are byte-identical after tuning (also when tuning is
interrupted); an interrupted tuning run leaves the cache consistent.

The runtime is the real C runtime (real compiles, real launches) with its
timing replaced, so that each sabotaged candidate claims to be the fastest.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

tune_mod = pytest.importorskip('gimmik.tune')
runtime_c = pytest.importorskip('gimmik.runtime.c')
cache = pytest.importorskip('gimmik.cache')

from gimmik.runtime import RuntimeUnavailable  # noqa: E402

A = np.array([[1.0, 0.0, 2.0, 0.0],
              [0.0, 3.0, 0.5, 0.0],
              [0.25, 0.0, 0.0, -1.0],
              [0.0, 0.0, 0.0, 0.0],
              [1.5, -2.0, 0.0, 0.75]])
N = 96

# How to break a candidate.  Each takes the real launch and returns the
# broken one; 'compile' breaks the source instead.
SABOTAGE = {
    # a tiny error, above tolerance: one element off by a relative 1e-9
    'wrong': lambda launch: _after(launch, lambda c, n: c.__setitem__(
        (1, n // 2), c[1, n // 2]*(1 + 1e-9) + 1e-9)),
    'nan': lambda launch: _after(launch, lambda c, n: c.__setitem__(
        (-1, n - 1), np.nan)),
    'padding': lambda launch: _after(launch, lambda c, n: c.__setitem__(
        (0, n), 0.0)),
    'skip last column': lambda launch: (
        lambda b, c, n, ldb, ldc: launch(b, c, n - 1, ldb, ldc)),
    'nothing': lambda launch: (lambda b, c, n, ldb, ldc: None),
    'raise': lambda launch: _raise,
}


def _after(launch, spoil):
    def broken(b, c, n, ldb, ldc):
        launch(b, c, n, ldb, ldc)
        spoil(c, n)
    return broken


def _raise(b, c, n, ldb, ldc):
    raise RuntimeError('sabotaged launch')


class Saboteur(runtime_c.Runtime):
    """The C runtime with chosen candidates broken and reported fastest."""

    def __init__(self, broken):
        super().__init__()
        self.broken = dict(broken)     # variant -> SABOTAGE key or 'compile'
        self.compiled = []
        self._now = None

    def compile(self, src, meta):
        variant = meta['variant']
        self.compiled.append(variant)
        how = self.broken.get(variant)
        if how == 'compile':
            src = src.replace('{', '{ this is not C;', 1)
        launch = super().compile(src, meta)
        if how is not None:
            launch = SABOTAGE[how](launch)

        def tagged(b, c, n, ldb, ldc):
            self._now = variant
            launch(b, c, n, ldb, ldc)
        return tagged

    def vendor_gemm(self, A, alpha, beta, dtype):
        launch = super().vendor_gemm(A, alpha, beta, dtype)

        def tagged(b, c, n, ldb, ldc):
            self._now = 'vendor'
            launch(b, c, n, ldb, ldc)
        return tagged

    def time(self, launch, args, *, warmup=2, repeats=10):
        launch(*args)
        if self._now == 'vendor':
            return 1.0
        return 1e-9 if self._now in self.broken else 1e-3

    def copy_bandwidth(self, nbytes):
        return 1e9

    def cache_bytes(self):
        return 0


@pytest.fixture(scope='module')
def cache_root(tmp_path_factory):
    return tmp_path_factory.mktemp('gimmik-cache')


@pytest.fixture(autouse=True)
def private_cache(cache_root, monkeypatch):
    """A cache directory of this module's own: built C libraries are kept
    between its tests (they are keyed by source), tuning results are not."""
    monkeypatch.setenv('GIMMIK_CACHE_DIR', str(cache_root))
    tdir = cache_root / 'tune'
    if tdir.exists():
        for f in tdir.iterdir():
            f.unlink()


def _variants():
    from gimmik.c import CMatMul
    return [meta['variant'] for _, meta in
            CMatMul(A, beta=0.5, aligne=2).kernels(np.float64)]


def _tune(rt, **kw):
    kw = {'beta': 0.5, 'n': N, 'use_cache': False, **kw}
    try:
        return tune_mod.tune(A, runtime=rt, **kw)
    except RuntimeUnavailable as e:
        pytest.skip(str(e))


@pytest.mark.parametrize('how', [*SABOTAGE, 'compile'])
@pytest.mark.parametrize('beta', [0.0, 0.5])
def test_broken_candidate_never_selected(how, beta):
    first = _variants()[0]
    rt = Saboteur({first: how})
    ldc = N + 2 if how == 'padding' else N
    res = _tune(rt, beta=beta, ldc=ldc)
    assert first in rt.compiled
    rec = next(c for c in res.candidates if c['variant'] == first)
    assert not rec['correct'] and rec['error'], rec
    assert rec['time_s'] is None
    assert res.best is not None and res.best['variant'] != first
    assert all(c['correct'] for c in res.candidates
               if c['variant'] != first), res.candidates


def test_all_broken_means_vendor():
    rt = Saboteur({v: 'wrong' for v in _variants()})
    res = _tune(rt)
    assert res.best is None and res.use_vendor
    assert not any(c['correct'] for c in res.candidates)
    assert res.to_json()['best'] is None


def test_broken_candidate_not_fed_back_as_fast():
    """The generator's pruning only hears about correct candidates: a
    broken one's fake 1 ns must not prune the others."""
    variants = _variants()
    rt = Saboteur({variants[0]: 'wrong'})
    res = _tune(rt)
    assert [c['variant'] for c in res.candidates] == variants


def _panels(rng, dtype=np.float64, pad=3):
    b = rng.standard_normal((A.shape[1], N + pad)).astype(dtype)
    c = rng.standard_normal((A.shape[0], N + pad)).astype(dtype)
    # values whose bytes a float round trip could change
    c[0, :4] = [-0.0, np.nan, np.inf, 5e-324]
    c[1, 0] = np.frombuffer(np.uint64(0x7ff8dead00000001).tobytes(),
                            np.float64)[0]
    return b, c


@pytest.mark.parametrize('beta', [0.0, 0.5])
def test_caller_panels_byte_identical(rng, beta):
    b, c = _panels(rng)
    b0, c0 = b.tobytes(), c.tobytes()
    rt = Saboteur({_variants()[0]: 'nan'})
    # NaN/Inf in the caller's c only feed the check when beta != 0; give
    # finite values to the checked part then
    if beta:
        c[:, :N] = np.nan_to_num(c[:, :N], posinf=1.0)
        c0 = c.tobytes()
    res = _tune(rt, beta=beta, b=b, c=c)
    assert res.best is not None
    assert b.tobytes() == b0
    assert c.tobytes() == c0


def test_nan_in_caller_c_keeps_the_check(rng):
    """NaN/Inf in the caller's c must not make the reference NaN (and the
    check of every candidate vacuous) when beta = 0."""
    b, c = _panels(rng)
    res = _tune(Saboteur({}), beta=0.0, b=b, c=c)
    assert np.isfinite(res.vendor_error)


class Interrupt(BaseException):
    pass


def test_interrupted_tuning_restores_caller_c_and_writes_no_cache(rng):
    b, c = _panels(rng)
    b0, c0 = b.tobytes(), c.tobytes()
    rt = Saboteur({})

    def progress(done, total, variant):
        if done == 2:
            raise Interrupt

    with pytest.raises(Interrupt):
        tune_mod.tune(A, beta=0.0, n=N, runtime=rt, b=b, c=c,
                      progress=progress, use_cache=True)
    assert b.tobytes() == b0 and c.tobytes() == c0
    tdir = os.path.join(os.environ['GIMMIK_CACHE_DIR'], 'tune')
    assert not os.path.isdir(tdir) or os.listdir(tdir) == []

    # the next run tunes afresh and caches a complete, loadable result
    res = tune_mod.tune(A, beta=0.0, n=N, runtime=rt, use_cache=True)
    assert not res.cached and res.best is not None
    again = tune_mod.tune(A, beta=0.0, n=N, runtime=rt, use_cache=True)
    assert again.cached and again.best['variant'] == res.best['variant']


def test_interrupted_cache_write_leaves_old_entry(monkeypatch):
    rt = Saboteur({})
    res = tune_mod.tune(A, beta=0.0, n=N, runtime=rt, use_cache=True)
    tdir = os.path.join(os.environ['GIMMIK_CACHE_DIR'], 'tune')
    entries = {f: open(os.path.join(tdir, f)).read()
               for f in os.listdir(tdir)}
    assert len(entries) == 1

    real_dump = json.dump

    def dump_then_die(obj, f, **kw):
        f.write(json.dumps(obj)[:50])   # half an entry
        raise Interrupt

    monkeypatch.setattr(json, 'dump', dump_then_die)
    # a new result (another beta: another key) dies while being written
    with pytest.raises(Interrupt):
        tune_mod.tune(A, beta=0.5, n=N, runtime=rt, use_cache=True)
    # and so does a rewrite of the existing key
    (entry,) = entries
    with pytest.raises(Interrupt):
        cache.store(entry[:-len('.json')], {'garbage': True})
    monkeypatch.setattr(json, 'dump', real_dump)
    # the complete old entry and nothing else
    now = {f: open(os.path.join(tdir, f)).read() for f in os.listdir(tdir)}
    assert now == entries
    again = tune_mod.tune(A, beta=0.0, n=N, runtime=rt, use_cache=True)
    assert again.cached and again.best['variant'] == res.best['variant']


def test_corrupt_cache_entry_is_retuned():
    rt = Saboteur({})
    tune_mod.tune(A, beta=0.0, n=N, runtime=rt, use_cache=True)
    tdir = os.path.join(os.environ['GIMMIK_CACHE_DIR'], 'tune')
    (entry,) = os.listdir(tdir)
    for garbage in ('', '{"best": ', '[1, 2, 3]', '{"platform": "c"}'):
        with open(os.path.join(tdir, entry), 'w') as f:
            f.write(garbage)
        res = tune_mod.tune(A, beta=0.0, n=N, runtime=rt, use_cache=True)
        assert not res.cached and res.best is not None
        with open(os.path.join(tdir, entry)) as f:
            assert json.load(f)['best']['variant'] == res.best['variant']


# A child that tunes and is killed (SIGKILL, no clean-up at all) in the
# middle of its candidates.
KILLED_CHILD = textwrap.dedent('''
    import os, signal, sys
    import numpy as np
    from gimmik.tune import tune
    A = np.array(%r)

    def progress(done, total, variant):
        if done == int(sys.argv[1]):
            os.kill(os.getpid(), signal.SIGKILL)

    tune(A, beta=0.0, n=%d, platform='c', use_cache=True,
         progress=progress)
''')


@pytest.mark.parametrize('when', [1, 3])
def test_killed_tuning_leaves_cache_consistent(tmp_path, when):
    env = dict(os.environ, OMP_NUM_THREADS='1')
    r = subprocess.run([sys.executable, '-c',
                        KILLED_CHILD % (A.tolist(), N), str(when)],
                       env=env, capture_output=True, text=True, timeout=600)
    if 'RuntimeUnavailable' in r.stderr:
        pytest.skip(r.stderr.strip().splitlines()[-1])
    assert r.returncode == -signal.SIGKILL, r.stderr
    tdir = os.path.join(os.environ['GIMMIK_CACHE_DIR'], 'tune')
    left = os.listdir(tdir) if os.path.isdir(tdir) else []
    assert left == [], left
    # every built library the child left behind loads
    import ctypes
    cdir = os.path.join(os.environ['GIMMIK_CACHE_DIR'], 'c')
    for f in os.listdir(cdir) if os.path.isdir(cdir) else []:
        assert f.endswith('.so'), f'half-written build left: {f}'
        ctypes.CDLL(os.path.join(cdir, f))
    res = tune_mod.tune(A, beta=0.0, n=N, platform='c', use_cache=True)
    assert res.best is not None and not res.cached
