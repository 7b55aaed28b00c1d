"""Reliability, round 4 (issue #50, item 5): the outside audit's defects
9-13 (input handling and complexity), each by a test that fails without
its fix (docs/reliability.md, "Round 4").

Regenerate the plan digests (tests/fixtures/reliability4-plans.json) only
for an intended change of a partition or plan:
``python tests/test_reliability4_inputs.py --write-plans``."""

import dataclasses
import hashlib
import json
import os
import sys
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PLANS = os.path.join(HERE, 'fixtures', 'reliability4-plans.json')
SUITES = [os.path.join(ROOT, 'bench', 'operators', f)
          for f in ('pyfr-ops.npz', 'pyfr-ops-p7.npz')]


# -- 9: row partitions and plans near-quadratic in m ------------------------
def _canon(x):
    """x as JSON-able plain data, floats exactly (hex): a digest that does
    not depend on NumPy's repr."""
    if dataclasses.is_dataclass(x):
        return [type(x).__name__,
                [_canon(getattr(x, f.name)) for f in dataclasses.fields(x)]]
    if isinstance(x, dict):
        return [[_canon(k), _canon(v)] for k, v in x.items()]
    if isinstance(x, (list, tuple, range, np.ndarray)):
        return [_canon(v) for v in x]
    if isinstance(x, (bool, np.bool_)) or x is None or isinstance(x, str):
        return x if not isinstance(x, np.bool_) else bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x).hex()
    raise TypeError(f'cannot canonicalise {type(x).__name__}')


def _digest(x):
    return hashlib.sha256(json.dumps(_canon(x)).encode()).hexdigest()[:16]


def suite_operators():
    """(name, A) of every operator of the committed PyFR suites."""
    for path in SUITES:
        with np.load(path) as z:
            for key in z.files:
                if key != 'provenance':
                    yield key, z[key]


def plan_digests(A):
    """{what: digest} of the row partitions and plans whose construction
    the complexity fix rewrote (analysis.partition_rows, union_row_blocks,
    shared_row_groups; plans.msplit_plan, warprows_plan; kparts_plan), at
    the parameters the platforms use and a few more; unmemoised."""
    from gimmik import analysis, plans
    from gimmik.families.cstream_kparts import kparts_plan
    S = np.asarray(A) != 0
    m = A.shape[0]
    out = {}
    for parts in sorted({-(-m // 22), -(-m // 16), 2, 5}):
        out[f'partition_rows/{parts}'] = _digest(
            analysis.partition_rows.__wrapped__(S, parts))
    for size in (16, 64):
        out[f'union_row_blocks/{size}'] = _digest(
            analysis.union_row_blocks.__wrapped__(S, size))
    for budget in (1, 8, 32, 48, 64):
        out[f'shared_row_groups/{budget}'] = _digest(
            analysis.shared_row_groups.__wrapped__(S, budget))
    for ms, bsz, even, ml in ((4, 64, False, 8), (2, 32, True, None),
                              (8, 16, False, None)):
        out[f'msplit_plan/{ms}/{bsz}/{even}/{ml}'] = _digest(
            plans.msplit_plan(A, ms, bsz, even, ml))
    for ms, bsz in ((4, 64), (2, 32), (8, 16)):
        out[f'warprows_plan/{ms}/{bsz}'] = _digest(
            plans.warprows_plan(A, ms, bsz))
    for g, w, ml in ((1, 4, 8), (2, 2, None)):
        out[f'kparts_plan/{g}/{w}/{ml}'] = _digest(
            kparts_plan(A, g, 3, 32, w, ml))
    return out


# the operators checked by default (all with --full): those up to this many
# entries (about 100 of them), a few seconds in all
PLANS_FAST_ENTRIES = 2_000


def _check_plans(full):
    with open(PLANS) as f:
        want = json.load(f)
    names = []
    for name, A in suite_operators():
        if not full and A.size > PLANS_FAST_ENTRIES:
            continue
        names.append(name)
        assert _digest(sorted(plan_digests(A).items())) == want[name], name
    assert len(names) >= (200 if full else 90)


def test_plans_as_before_the_complexity_fix():
    """Defect 9: the near-quadratic partitions and plans are the ones the
    cubic code made, on the committed operators up to PLANS_FAST_ENTRIES
    entries (the digests were written by the code before the fix)."""
    _check_plans(full=False)


@pytest.mark.full
def test_plans_as_before_the_complexity_fix_all_operators():
    """The same on every committed operator (about a minute)."""
    _check_plans(full=True)


# COMPLEXITY GUARD (slow-ish: ~3 s of CPU): the offer of a 1024 x 1024
# identity may take at most this many CPU seconds (~10x the fixed code; the
# cubic code took 84-106 s on the auditor's machine, 7-24 s here) ...
IDENTITY_MAX_S = 20
# ... and at most this many times the offer of a 256 x 256 identity: the
# growth of quadratic work over 4x the rows, whatever the machine's speed
# (the cubic code: 29-63x, the fixed one 5-7x)
IDENTITY_MAX_GROWTH = 16


@pytest.mark.parametrize('platform', ['hip', 'cuda'])
def test_large_sparse_identity_offer_is_not_cubic(platform):
    """Defect 9: the HIP and CUDA candidates of a 1024 x 1024 identity
    (every row its own B row: partition_rows, shared_row_groups and the
    plans at their largest) take seconds, and at most quadratically more
    than those of a 256 x 256 one."""
    from gimmik.cuda import CUDAMatMul
    from gimmik.hip import HIPMatMul
    cls = {'hip': HIPMatMul, 'cuda': CUDAMatMul}[platform]

    def offer(m):
        t0 = time.process_time()
        assert cls(np.eye(m)).candidates(np.float64)
        return time.process_time() - t0

    offer(8)    # the one-time costs (imports, templates) out of the way
    small, big = offer(256), offer(1024)
    assert big < IDENTITY_MAX_S, \
        f'{platform} candidates of a 1024 x 1024 identity took {big:.0f} s'
    assert big < IDENTITY_MAX_GROWTH*small, \
        (f'{platform} candidates: {small:.2f} s at m = 256, {big:.2f} s at '
         f'm = 1024, more than quadratic growth')


# -- 10: the executor checks a meta against its source -----------------------
def _guarded(rows, n, pad=4):
    """A (rows x n) view of NaN-poisoned memory with `pad` rows of guard
    values after it: what a kernel writing past c leaves there shows."""
    whole = np.full((rows + pad, n), np.nan)
    whole[rows:] = 7.0
    return whole[:rows], whole


@pytest.mark.parametrize('runner', ['hip', 'cuda'])
def test_executor_refuses_another_operators_meta(runner, rng):
    """Defect 10: a source run with the meta of another operator (fewer
    rows of C) is refused before it runs, not left to write past c."""
    from gimmik.cuda import CUDAMatMul
    from gimmik.emulate import run_cuda, run_hip
    from gimmik.hip import HIPMatMul
    cls, run = {'hip': (HIPMatMul, run_hip),
                'cuda': (CUDAMatMul, run_cuda)}[runner]
    big = rng.standard_normal((8, 3))
    small = rng.standard_normal((4, 3))
    src, _ = next(iter(cls(big).kernels(np.float64)))
    _, meta = next(iter(cls(small).kernels(np.float64)))
    n = 70
    b = rng.standard_normal((3, n))
    c, whole = _guarded(4, n)
    with pytest.raises(ValueError, match=r'declares A 8x3.*m = 4'):
        run(src, meta, b, c)
    assert (whole[4:] == 7.0).all() and np.isnan(c).all()


def test_executor_refuses_a_meta_of_other_baked_sizes(rng):
    """Defect 10: a source baked for n = 96 run with a meta saying n = 64
    (its arrays of 64 columns) is refused."""
    from gimmik.emulate import run_hip
    from gimmik.hip import HIPMatMul
    A = rng.standard_normal((4, 3))
    src, _ = next(iter(HIPMatMul(A, n=96, ldb=96, ldc=96)
                       .kernels(np.float64)))
    _, meta = next(iter(HIPMatMul(A, n=64, ldb=64, ldc=64)
                        .kernels(np.float64)))
    # rows of 64 columns: the source's 96-column rows would reach row 6
    b = rng.standard_normal((8, 64))[:3]
    c, whole = _guarded(4, 64)
    with pytest.raises(ValueError, match='n = 96'):
        run_hip(src, meta, b, c)
    assert (whole[4:] == 7.0).all() and np.isnan(c).all()


def test_executor_refuses_a_block_over_the_launch_bounds(rng):
    """Defect 10: a meta whose block has more threads than the source's
    launch bounds (extra waves would compute rows past m) is refused."""
    from gimmik.emulate import run_hip
    from gimmik.hip import HIPMatMul
    A = rng.standard_normal((4, 3))
    src, meta = next(iter(HIPMatMul(A).kernels(np.float64)))
    block = meta['launch']['block']
    meta = {**meta, 'block': (block[0], 4*block[1], 1),
            'launch': {**meta['launch'], 'block': (block[0], 4*block[1], 1)}}
    with pytest.raises(ValueError, match='launch bounds'):
        run_hip(src, meta, rng.standard_normal((3, 64)), np.zeros((4, 64)))


def test_c_runtime_refuses_another_operators_meta(rng, tmp_path,
                                                 monkeypatch):
    """Defect 10, the same check where a runtime compiles a kernel (here
    the C one's: its launch checks the arrays against meta alone)."""
    from gimmik.c import CMatMul
    from gimmik.runtime.c import Runtime
    monkeypatch.setenv('GIMMIK_CACHE_DIR', str(tmp_path))
    src, _ = next(iter(CMatMul(rng.standard_normal((8, 3)))
                       .kernels(np.float64)))
    _, meta = next(iter(CMatMul(rng.standard_normal((4, 3)))
                        .kernels(np.float64)))
    with pytest.raises(ValueError, match=r'declares A 8x3.*m = 4'):
        Runtime().compile(src, meta)


def test_executor_runs_every_candidate_with_its_own_meta(rng):
    """Defect 10, no false alarm: every HIP and CUDA candidate of an
    operator, n at run time and baked, passes the check with its own meta
    (and not with a meta of one row more)."""
    from gimmik.cuda import CUDAMatMul
    from gimmik.emulate import check_source
    from gimmik.hip import HIPMatMul
    A = np.load(SUITES[0])['p2-hex-m460']
    seen = 0
    for cls in (HIPMatMul, CUDAMatMul):
        for n in (None, 96):
            for dtype in (np.float64, np.float32):
                for src, meta in cls(A, n=n, ldb=n, ldc=n).kernels(dtype):
                    check_source(src, meta)
                    # ... and each declares its shape: one row more is not
                    with pytest.raises(ValueError, match='declares'):
                        check_source(src, {**meta, 'm': meta['m'] + 1})
                    seen += 1
    assert seen > 40


# -- 11, 12: tune()'s caller panels ------------------------------------------
def _tune_operator():
    """A small fixed operator: its C kernels are built once per process."""
    rng = np.random.default_rng(11)
    A = rng.standard_normal((6, 5))
    A[rng.random((6, 5)) < 0.4] = 0.0
    A[:, 0] = 1.0
    return A


def test_tune_refuses_read_only_c_before_tuning(tmp_path, monkeypatch):
    """Defect 11: a read-only c is refused up front, naming c, not after a
    whole tuning run that then fails restoring it."""
    from types import SimpleNamespace
    from gimmik import tune as tune_mod
    monkeypatch.setenv('GIMMIK_CACHE_DIR', str(tmp_path))
    runs = []

    def fake_tune(*args):
        runs.append(args)
        return SimpleNamespace(unstable=None)
    monkeypatch.setattr(tune_mod, '_tune', fake_tune)
    A = _tune_operator()
    c = np.ones((6, 64))
    c.flags.writeable = False
    with pytest.raises(ValueError, match='c is read-only'):
        tune_mod.tune(A, beta=1.0, n=64, platform='c', use_cache=False,
                      b=np.ones((5, 64)), c=c)
    assert not runs, 'tuned before refusing c'


def _scaling_runtime():
    """The C runtime with one candidate that doubles its output: right
    only where B and C are zero."""
    from gimmik.runtime.c import Runtime

    class Doubling(Runtime):
        WRONG = None

        def compile(self, src, meta):
            good = super().compile(src, meta)
            if Doubling.WRONG is None:
                Doubling.WRONG = meta['variant']
            if meta['variant'] != Doubling.WRONG:
                return good

            def launch(b, c, n, ldb, ldc):
                good(b, c, n, ldb, ldc)
                c[:, :n] *= 2.0
            return launch
    return Doubling()


@pytest.mark.parametrize('beta', [0.0, 1.0])
def test_tune_with_zero_panels_still_catches_a_wrong_kernel(
        tmp_path, monkeypatch, beta):
    """Defect 12: zeros for b (and c) make every output zero; the check
    must still catch a kernel that doubles C (it checks its own random
    panels), and so the verdict cached under the operator's key holds."""
    from gimmik.tune import tune
    monkeypatch.setenv('GIMMIK_CACHE_DIR', str(tmp_path))
    monkeypatch.setattr('gimmik.tune.WARMUP', 1)
    monkeypatch.setattr('gimmik.tune.REPEATS', 3)
    monkeypatch.setattr('gimmik.tune.COPY_BYTES', (1 << 20, 1 << 20))
    rt = _scaling_runtime()
    n = 256
    b, c = np.zeros((5, n)), np.zeros((6, n))
    res = tune(_tune_operator(), beta=beta, n=n, runtime=rt, b=b, c=c)
    by = {x['variant']: x for x in res.candidates}
    wrong = by[type(rt).WRONG]
    assert not wrong['correct'] and 'relative error' in wrong['error']
    assert res.best is not None and res.best['variant'] != type(rt).WRONG
    assert not b.any() and not c.any()


# -- 13: messages and parsing ------------------------------------------------
def test_non_zip_npz_says_so_naming_the_file(tmp_path):
    """Defect 13: an .npz that is no zip file is 'not a valid .npz',
    naming the file, not NumPy's advice about pickled data."""
    from gimmik.operators import load_operator, suite_names
    path = tmp_path / 'ops.npz'
    path.write_text('op0 = [[1, 2], [3, 4]]\n')
    for call in (lambda: load_operator(f'{path}:op0'),
                 lambda: suite_names(path=str(path))):
        with pytest.raises(ValueError) as e:
            call()
        msg = str(e.value)
        assert 'not a valid .npz' in msg and str(path) in msg, msg
        assert 'pickle' not in msg, msg


def test_folder_named_mtx_is_a_directory(tmp_path):
    """Defect 13: a folder named x.mtx (or x.npz) is reported as a
    directory, not as missing."""
    from gimmik.operators import load_operator
    for name, spec in (('x.mtx', 'x.mtx'), ('y.npz', 'y.npz:op0')):
        (tmp_path / name).mkdir()
        with pytest.raises(IsADirectoryError, match='is a directory'):
            load_operator(str(tmp_path / spec))


_MTX_INT = '%%MatrixMarket matrix coordinate integer general\n'
_MTX_REAL = '%%MatrixMarket matrix coordinate real general\n'


def test_mtx_with_a_utf8_bom_reads(tmp_path):
    """Defect 13: a UTF-8 byte-order mark (as some editors write) before
    the header is accepted; the matrix is the one without it."""
    from gimmik.operators import read_mtx
    text = _MTX_REAL + '% a comment\n2 3 2\n1 1 2.5\n2 3 -1\n'
    (tmp_path / 'plain.mtx').write_text(text)
    (tmp_path / 'bom.mtx').write_bytes(b'\xef\xbb\xbf' + text.encode())
    want = read_mtx(tmp_path / 'plain.mtx')
    assert np.array_equal(read_mtx(tmp_path / 'bom.mtx'), want)
    assert want[0, 0] == 2.5 and want[1, 2] == -1


@pytest.mark.parametrize('body, line, what', [
    # Python's int() and float() read digit separators: 1_0 would be 10
    (_MTX_INT + '2 2 2\n1 1 3\n2 2 1_0\n', 4, '1_0'),
    (_MTX_REAL + '2 2 1\n1 1 1_0.5\n', 3, '1_0.5'),
    (_MTX_REAL + '2 2 1\n1_0 1 1.0\n', 3, '1_0'),
    (_MTX_REAL + '2 2 1_0\n', 2, '1_0'),
    # an integer field holds integers
    (_MTX_INT + '2 2 2\n1 1 3\n\n2 2 1.5\n', 5, '1.5'),
    (_MTX_INT + '2 2 1\n1 1 1e3\n', 3, '1e3'),
    # words float() reads that are no MatrixMarket numbers
    (_MTX_REAL + '2 2 1\n1 1 infinity\n', 3, 'infinity'),
    (_MTX_REAL + '2 2 1\n1 1 nan\n', 3, 'nan'),
    ('%%MatrixMarket matrix array integer general\n1 2\n4\n2.5\n', 4,
     '2.5'),
])
def test_mtx_numbers_are_strict_with_a_line_number(tmp_path, body, line,
                                                    what):
    """Defect 13: '1_0' (read as 10) and '1.5' in an integer file are
    refused, naming the value and its line."""
    from gimmik.operators import read_mtx
    path = tmp_path / 'a.mtx'
    path.write_text(body)
    with pytest.raises(ValueError, match=rf'line {line}\b.*{what}'):
        read_mtx(path)


def test_mtx_value_beyond_float64_overflows(tmp_path):
    """Defect 13: 1e400 in a real file overflows float64 (said so, with
    its line), not 'contains NaN or Inf'."""
    from gimmik.operators import read_mtx
    path = tmp_path / 'a.mtx'
    path.write_text(_MTX_REAL + '2 2 2\n1 1 1.0\n2 2 -1e400\n')
    with pytest.raises(ValueError, match=r'line 4\b.*overflows float64'):
        read_mtx(path)


def test_long_double_beyond_float64_overflows():
    """Defect 13: a long double matrix with a finite value beyond float64's
    range is refused as overflowing float64, not as NaN or Inf."""
    from gimmik.validate import check_matrix
    if np.finfo(np.longdouble).max <= np.finfo(np.float64).max:
        pytest.skip('long double is float64 on this platform')
    A = np.ones((2, 2), dtype=np.longdouble)
    A[1, 0] = np.longdouble('1e400')
    with pytest.raises(ValueError, match='overflows float64') as e:
        check_matrix(A)
    assert 'NaN' not in str(e.value)
    A[1, 0] = np.longdouble('inf')
    with pytest.raises(ValueError, match='NaN or Inf'):
        check_matrix(A)


def test_integers_beyond_2_53_are_refused(tmp_path):
    """Defect 13: integers float64 cannot hold exactly (2**53 + 1) are
    refused, in an integer .mtx (with the line) and in an integer array
    or a beta, not rounded silently; 2**60 (exact) is taken."""
    from gimmik.operators import read_mtx
    from gimmik.validate import check_matrix, check_scalar
    big = 2**53 + 1
    path = tmp_path / 'a.mtx'
    path.write_text(_MTX_INT + f'2 2 2\n1 1 1\n2 2 {big}\n')
    with pytest.raises(ValueError, match=rf'line 4\b.*{big}.*float64'):
        read_mtx(path)
    for A in (np.array([[1, 0], [0, big]]), [[1, 0], [0, -big]],
              np.array([[1, 0], [0, big]], dtype=np.uint64)):
        with pytest.raises(ValueError, match=r'round-trip as float64'):
            check_matrix(A)
    with pytest.raises(ValueError, match=r'round-trip as float64'):
        check_scalar(big, 'beta')
    assert check_matrix([[1, 2**60]])[0, 1] == 2.0**60
    assert check_scalar(2**60, 'beta') == 2.0**60
    path.write_text(_MTX_INT + f'1 2 2\n1 1 1\n1 2 {2**60}\n')
    assert read_mtx(path)[0, 1] == 2.0**60


_DTYPE_NAMES = ['f64', 'float64', 'double', 'f32', 'float32', 'single']


def test_dtype_vocabulary_is_shared_by_the_subcommands():
    """Defect 13: isa, tune and sweep read --dtype alike (isa did not
    know f64, tune and sweep not float64) and refuse the same names."""
    import argparse
    from gimmik import isa, sweep, tune
    parsers = {}
    for mod in (isa, tune, sweep):
        ap = argparse.ArgumentParser(exit_on_error=False)
        mod.add_arguments(ap)
        parsers[mod.__name__] = ap
    extra = {'gimmik.isa': ['x.mtx'], 'gimmik.tune': [],
             'gimmik.sweep': []}
    for name in _DTYPE_NAMES:
        got = {m: ap.parse_args(extra[m] + ['--dtype', name]).dtype
               for m, ap in parsers.items()}
        want = 'float64' if name in ('f64', 'float64', 'double') \
            else 'float32'
        assert set(got.values()) == {want}, (name, got)
    for m, ap in parsers.items():
        assert ap.parse_args(extra[m]).dtype == 'float64', m
        with pytest.raises((argparse.ArgumentError, SystemExit)):
            ap.parse_args(extra[m] + ['--dtype', 'f16'])


def test_isa_reads_f64(tmp_path, capsys, monkeypatch):
    """Defect 13, end to end: `gimmik isa --dtype f64` reports float64
    (it stopped at "data type 'f64' not understood")."""
    from gimmik import isa
    from gimmik.cli import main
    from gimmik.errors import RuntimeUnavailable
    try:
        isa.find_clang()
    except RuntimeUnavailable as e:
        pytest.skip(str(e))
    monkeypatch.setenv('GIMMIK_CACHE_DIR', str(tmp_path / 'cache'))
    np.savez(tmp_path / 'ops.npz', small=_tune_operator())
    rc = main(['isa', f'{tmp_path / "ops.npz"}:small', '--arch', 'gfx942',
               '--dtype', 'f64', '--family', 'cstream'])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert 'small: 6x5, float64' in cap.out


if __name__ == '__main__':
    if sys.argv[1:] != ['--write-plans']:
        sys.exit(__doc__)
    with open(PLANS, 'w') as f:
        json.dump({name: _digest(sorted(plan_digests(A).items()))
                   for name, A in suite_operators()},
                  f, indent=0, sort_keys=True)
        f.write('\n')
