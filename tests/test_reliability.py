"""Each class of defect an outside audit found (issue #16): kernel names
that clash, malformed send() feedback, malformed or unwritable tuning
caches, torn sweep tables and reports, input conversion, limits, errors
that point elsewhere, a correctness check that could be fooled, and timing
outliers."""

import io
import json
import os
import re
import warnings

import numpy as np
import pytest

import gimmik.operators  # also binds gimmik
from gimmik.cli import main
from gimmik.runtime import moved_bytes
from gimmik.runtime.c import Runtime as CRuntime
from gimmik.validate import check_kname, check_matrix, reserved_names
from gimmik.verify import Panels, rel_error

PLATFORM_OPTS = {'c': {}, 'hip': {'gcn_arch': 'gfx90a'},
                 'cuda': {'compute_capability': (9, 0)}}

A_SMALL = np.array([[0.5, 0, 2.0], [0, -1.0, 0], [1.5, 0, 0.25],
                    [0, 3.0, 0]])


@pytest.fixture(params=sorted(PLATFORM_OPTS))
def platform(request):
    return request.param


# -- 1. kernel names ------------------------------------------------------------
CLASHING = [
    # macros and constants of math.h, stdio.h, limits.h, the GPU headers
    'NAN', 'INFINITY', 'HUGE_VAL', 'M_PI', 'EOF', 'NULL', 'FLT_MAX',
    'INT_MAX', 'CUDART_INF',
    # vector and standard types
    'double2', 'float4', 'int3', 'uint4', 'half2', 'dim3', 'size_t',
    'int32_t', 'ptrdiff_t', 'uintptr_t',
    # libc, libm (both precisions), C++ overloads
    'printf', 'malloc', 'free', 'memcpy', 'strlen', 'exit', 'abort', 'fma',
    'fmaf', 'sin', 'sinf', 'sqrt', 'rsqrt', 'exp2', 'pow', 'min', 'max',
    'abs', 'fabs', 'isnan', 'signbit',
    # OpenMP and its runtimes
    'omp_get_num_threads', 'omp_get_thread_num', 'GOMP_parallel',
    'GOMP_barrier', 'gomp_team', 'kmp_set_defaults', 'ompt_start_tool',
    # CUDA and HIP builtins and APIs
    'threadIdx', 'blockIdx', 'warpSize', 'atomicAdd', 'make_double2',
    'hipMalloc', 'cudaMalloc', 'cuLaunchKernel', 'tex1Dfetch',
    # the implementation's name space
    '_x', '__global__', '__syncthreads', '_Float16',
    # names gimmik's templates and CPU executor define
    'gimmik_v2', 'gimmik_v4d', 'gimmik_emu', 'gimmik_emu_entry',
    'gimmik_emu_call', 'gimmik_lds',
    # keywords
    'int', 'class', 'restrict', 'main', 'operator',
]

ORDINARY = ['gimmik_mm', 'gimmik_mm_3x4', 'gimmik_mm_openmp', 'my_mm', 'mm',
            'kernel1', 'p3_hex_m0', 'gimmik_fast', 'stream_mm', 'total',
            'b', 'c', 'n', 'ldb', 'copy_kernel', 'dgemm_like', 'hip_mm',
            'cuda_mm', 'cu_mm']


@pytest.mark.parametrize('kname', CLASHING)
def test_clashing_kname_refused_everywhere(platform, kname):
    mm = gimmik.matmul_class(platform)(A_SMALL)
    with pytest.raises(ValueError, match=rf"kname '{kname}' is reserved"):
        mm.kernels(np.float64, kname=kname, **PLATFORM_OPTS[platform])
    with pytest.raises(ValueError, match='funcn'):
        gimmik.generate_mm(A_SMALL, 'float64', platform, funcn=kname)


@pytest.mark.parametrize('kname', ORDINARY)
def test_ordinary_kname_accepted(platform, kname):
    mm = gimmik.matmul_class(platform)(A_SMALL)
    src, meta = next(mm.kernels(np.float64, kname=kname,
                                **PLATFORM_OPTS[platform]))
    assert re.search(rf'\b{kname}\s*\(', src) and meta['kname'] == kname


def _rendered_names(platform):
    """Identifiers the rendered sources of a platform call, define as
    macros or typedef, over a sparse and a dense operator."""
    rng = np.random.default_rng(1)
    sparse = np.where(rng.random((12, 9)) < 0.5,
                      rng.standard_normal((12, 9)), 0)
    dense = rng.standard_normal((32, 32))
    names = set()
    for A in (sparse, dense):
        for dt in (np.float32, np.float64):
            mm = gimmik.matmul_class(platform)(A, beta=0.5, aligne=2)
            for cand in mm.candidates(dt, **PLATFORM_OPTS[platform]):
                src, _ = mm.render(cand, dt, 'probe')
                src = re.sub(r'//[^\n]*|/\*.*?\*/', ' ', src, flags=re.S)
                names |= set(re.findall(r'\b([A-Za-z_]\w*)\s*\(', src))
                names |= set(re.findall(r'#\s*define\s+(\w+)', src))
                names |= set(re.findall(r'\btypedef\b[^;]*?(\w+)\s*;', src))
    # helpers named after the kernel (probe_tail...) follow its name
    return {n for n in names if n != 'probe' and not n.startswith('probe_')}


def test_every_name_the_sources_use_is_reserved(platform):
    names = _rendered_names(platform)
    assert names
    accepted = []
    for name in sorted(names):
        try:
            check_kname(name)
            accepted.append(name)
        except ValueError:
            pass
    assert not accepted, f'{platform} sources use {accepted}'


def test_shim_names_are_reserved():
    # everything the CPU executor's shim declares or defines at file scope
    shim = os.path.join(os.path.dirname(gimmik.__file__), 'emulate',
                        'hip_shim.h')
    text = open(shim).read()
    declared = set(re.findall(r'#\s*define\s+(\w+)', text)) \
        | set(re.findall(r'\bstruct\s+(\w+)', text)) \
        | set(re.findall(r'\bnamespace\s+(\w+)', text))
    assert declared and declared <= reserved_names() | {
        n for n in declared if n.startswith('_') or n.isupper()}
    for name in declared:
        with pytest.raises(ValueError):
            check_kname(name)


@pytest.mark.parametrize('kname', ['b', 'n', 'ldc', 'copy_kernel'])
def test_ordinary_knames_build_and_run_on_c(rng, kname):
    """Names that happen to match a kernel's parameters or locals still
    build and compute the right thing."""
    rt = CRuntime()
    mm = gimmik.CMatMul(A_SMALL)
    for src, meta in mm.kernels(np.float64, kname=kname):
        p = Panels(rng, A_SMALL, 0.0, np.float64, 37, 40, 41)
        rt.compile(src, meta)(p.bfull, p.cfull, 37, 40, 41)
        p.check(f'{kname} {meta["variant"]}')


# -- 2. send() feedback ------------------------------------------------------------
BAD_FEEDBACK = [
    ({'runtime': -1.0}, 'runtime'), ({'runtime': 0}, 'runtime'),
    ({'runtime': 0.0}, 'runtime'), ({'runtime': float('nan')}, 'runtime'),
    ({'runtime': -float('inf')}, 'runtime'), ({'runtime': 'fast'}, 'runtime'),
    ({'runtime': 1e-3 + 1j}, 'runtime'), ({'runtime': True}, 'runtime'),
    ({'runtime': [1e-3]}, 'runtime'), ({'runtime': b'1'}, 'runtime'),
    (0.001, 'feedback'), ([1e-3], 'feedback'), ('1e-3', 'feedback'),
    ((1e-3,), 'feedback'), (1, 'feedback'),
]


def _walk(mm, platform, feedback):
    """Variants offered when every send() carries `feedback`."""
    kgen = mm.kernels(np.float64, **PLATFORM_OPTS[platform])
    seen = [next(kgen)[1]['variant']]
    while True:
        try:
            seen.append(kgen.send(feedback)[1]['variant'])
        except StopIteration:
            return seen


@pytest.mark.parametrize('feedback,word', BAD_FEEDBACK,
                         ids=[repr(f) for f, _ in BAD_FEEDBACK])
def test_malformed_feedback_never_hides_candidates(platform, feedback, word):
    A = np.random.default_rng(3).standard_normal((24, 24))
    mm = gimmik.matmul_class(platform)(A, aligne=2)
    everything = [c.variant for c in
                  mm.candidates(np.float64, **PLATFORM_OPTS[platform])]
    assert _walk(mm, platform, None) == everything
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        assert _walk(mm, platform, feedback) == everything
    msgs = [str(w.message) for w in caught
            if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == len(everything)      # one per send()
    assert all(f"'{word}'" in m or word in m for m in msgs), msgs[:1]


def test_good_feedback_still_prunes():
    A = np.random.default_rng(3).standard_normal((24, 24))
    mm = gimmik.CMatMul(A, aligne=2)
    everything = _walk(mm, 'c', None)
    kgen = mm.kernels(np.float64)
    src, meta = next(kgen)
    seen = [meta['variant']]
    first = meta['tplname']
    while True:
        t = 1e-3 if meta['tplname'] == first else 1.0
        try:
            # numbers of any real type, other keys ignored
            src, meta = kgen.send({'runtime': np.float32(t), 'regs': 'x'})
        except StopIteration:
            break
        seen.append(meta['variant'])
    assert len(seen) < len(everything)


def test_inf_runtime_means_no_time():
    mm = gimmik.CMatMul(A_SMALL)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert _walk(mm, 'c', {'runtime': float('inf')}) == \
            _walk(mm, 'c', {'runtime': None}) == _walk(mm, 'c', {})


# -- the real tuner on the c platform, fast ------------------------------------
@pytest.fixture
def fast_tune(tmp_path, monkeypatch):
    monkeypatch.setenv('GIMMIK_CACHE_DIR', str(tmp_path / 'cache'))
    monkeypatch.setattr('gimmik.tune.WARMUP', 1)
    monkeypatch.setattr('gimmik.tune.REPEATS', 3)
    monkeypatch.setattr('gimmik.tune.COPY_BYTES', (1 << 20, 1 << 20))
    return tmp_path / 'cache'


# -- 3. the tuning cache -------------------------------------------------------------
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


# -- 4. sweep tables and reports ----------------------------------------------
class _Rt:
    name = 'fake'
    device = 'Fake Device'


def _fake_tune(calls):
    from types import SimpleNamespace

    def tune(A, *, beta, dtype, n, platform, runtime, use_cache, name,
             progress=None):
        calls.append(name)
        t = 1e-6*(1 + np.count_nonzero(A))
        best = {'variant': 'cstream', 'time_s': t, 'gbps': 1.0}
        return SimpleNamespace(
            platform=platform, device=runtime.device, dtype=dtype, beta=beta,
            n=n, best=best, vendor={'time_s': 2*t}, copy_gbps=50.0,
            candidates=[{'variant': 'cstream', 'time_s': t,
                         'correct': True}], use_vendor=False,
            to_json=lambda: {'name': name})
    return tune


OPS3 = 'p1-quad-m0,p1-quad-m3,p1-tri-m0'


def _sweep(out, calls):
    from gimmik.sweep import sweep
    return sweep(out, ops=OPS3, n=64, runtime=_Rt(), tune=_fake_tune(calls))


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


@pytest.mark.parametrize('col,value', [('time_s', 'nan'), ('gbps', 'inf'),
                                       ('speedup', 'NaN'), ('m', 'x'),
                                       ('use_vendor', 'maybe'),
                                       ('time_s', '')])
def test_report_skips_and_names_unusable_rows(tmp_path, col, value):
    from gimmik.report import report
    from gimmik.sweep import COLUMNS
    _sweep(tmp_path, [])
    csv_path = tmp_path / 'sweep.csv'
    lines = csv_path.read_text().splitlines()
    cells = lines[2].split(',')
    cells[COLUMNS.index(col)] = value
    lines[2] = ','.join(cells)
    csv_path.write_text('\n'.join(lines) + '\n')
    problems = []
    (md, *_) = report(tmp_path, plots=False, problems=problems)
    text = open(md).read()
    assert '## Table rows not used' in text and '- line 3:' in text
    assert '2 tuned' in text and [ln for ln, _ in problems] == [3]


def test_report_is_written_atomically(tmp_path, monkeypatch):
    from gimmik import report as report_mod
    _sweep(tmp_path, [])
    (md, *_) = report_mod.report(tmp_path, plots=False)
    before = open(md).read()
    assert before

    def broken(*a, **k):
        raise RuntimeError('formatting failed')
    monkeypatch.setattr(report_mod, 'markdown', broken)
    with pytest.raises(RuntimeError):
        report_mod.report(tmp_path, plots=False)
    assert open(md).read() == before
    assert sorted(f for f in os.listdir(tmp_path)    # .sweep.lock aside
                  if not f.startswith('.')) == ['candidates.csv', 'report.md', 'sweep.csv',
                                             'sweep.json', 'tune']


def test_report_of_nothing_usable(tmp_path):
    from gimmik.report import report
    _sweep(tmp_path, [])
    csv_path = tmp_path / 'sweep.csv'
    header = csv_path.read_text().splitlines()[0]
    csv_path.write_text(header + '\np1-quad-m0,4,4\n')
    with pytest.raises(ValueError, match='no usable rows.*line 2'):
        report(tmp_path, plots=False)


# -- 5. input conversion ---------------------------------------------------------
def test_masked_arrays():
    masked = np.ma.masked_array(A_SMALL, mask=A_SMALL > 1)
    with pytest.raises(ValueError, match='A is a masked array with 3 masked'):
        check_matrix(masked)
    with pytest.raises(ValueError, match='masked'):
        gimmik.CMatMul(masked)
    assert np.array_equal(check_matrix(np.ma.masked_array(A_SMALL)), A_SMALL)
    assert np.array_equal(check_matrix(masked.filled(0)),
                          np.where(A_SMALL > 1, 0, A_SMALL))


def test_scipy_sparse_accepted():
    sp = pytest.importorskip('scipy.sparse')
    for conv in (sp.csr_matrix, sp.csc_matrix, sp.coo_matrix, sp.csr_array,
                 sp.lil_matrix, sp.dok_matrix):
        A = check_matrix(conv(A_SMALL))
        assert type(A) is np.ndarray and np.array_equal(A, A_SMALL)
    src = gimmik.generate_mm(sp.csr_matrix(A_SMALL), 'float64', 'c')
    assert src == gimmik.generate_mm(A_SMALL, 'float64', 'c')
    with pytest.raises(ValueError, match='at most'):
        check_matrix(sp.csr_matrix((1, 10**6)))
    with pytest.raises(TypeError, match='complex'):
        check_matrix(sp.csr_matrix(A_SMALL*1j))


@pytest.mark.parametrize('bad', [[[1, 'a']], [[1.0, None]], [[{}, 1.0]],
                                 np.array([[1, 2]], dtype=object)])
def test_object_arrays_message(bad):
    with pytest.raises(TypeError, match='real floats.*sparse'):
        check_matrix(bad)


def test_unconvertible_array_named():
    class DeviceArray:
        def __array__(self, *args, **kwargs):
            raise TypeError('Implicit conversion to a NumPy array is not '
                            'allowed')
    with pytest.raises(TypeError, match='A .DeviceArray. cannot be '
                                        'converted to a NumPy array'):
        check_matrix(DeviceArray())
    with pytest.raises(ValueError, match='rectangular'):
        check_matrix([[1.0, 2.0], [3.0]])


@pytest.mark.parametrize('body, match', [
    ('coordinate real symmetric\n2 3 1\n2 1 1.0\n', 'square'),
    ('coordinate real symmetric\n3 2 1\n3 1 1.0\n', 'square'),
    ('coordinate real skew-symmetric\n2 3 1\n2 1 1.0\n', 'square'),
    ('coordinate real skew-symmetric\n3 2 1\n3 2 1.0\n', 'square'),
    ('coordinate real symmetric\n2 2 1\n1 2 1.0\n', 'below the diagonal'),
    ('coordinate real skew-symmetric\n2 2 1\n1 1 1.0\n',
     'below the diagonal'),
    ('array real skew-symmetric\n2 3\n1\n', 'square'),
])
def test_mtx_symmetry_needs_a_square_lower_triangle(tmp_path, body, match):
    from gimmik.operators import read_mtx
    path = tmp_path / 'a.mtx'
    path.write_text('%%MatrixMarket matrix ' + body)
    with pytest.raises(ValueError, match=match):
        read_mtx(path)


# -- 6. limits -------------------------------------------------------------------
def test_huge_n_refused_clearly(tmp_path, capsys, fast_tune):
    mtx = tmp_path / 'op.mtx'
    gimmik.operators.write_mtx(mtx, A_SMALL)
    rc = main(['tune', str(mtx), '--platform', 'c', '--n', '2147483647'])
    err = capsys.readouterr().err
    assert rc == 2 and 'n = 2147483647' in err and 'GiB' in err
    assert 'Traceback' not in err


def test_memory_bound(monkeypatch, fast_tune):
    from gimmik.tune import tune
    monkeypatch.setattr('gimmik.tune.MAX_MEMORY_FRACTION', 1e-9)
    with pytest.raises(ValueError, match='n = 300.*smaller n'):
        tune(A_SMALL, n=300, platform='c')


def test_absurd_mtx_refused(tmp_path):
    from gimmik.operators import read_mtx
    path = tmp_path / 'a.mtx'
    path.write_text('%%MatrixMarket matrix coordinate real general\n'
                    '20000 3 1\n1 1 1.0\n')
    with pytest.raises(ValueError, match='at most'):
        read_mtx(path)


# -- 7. errors that name the real problem -------------------------------------------
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


# -- 8. the correctness check --------------------------------------------------------
def test_rel_error_is_per_element():
    ref = np.array([[1e9, 2e9], [1e-9, -2e-9]])
    scale = np.abs(ref)
    assert rel_error(ref, ref, scale) == 0
    zeroed = ref.copy()
    zeroed[1] = 0
    flipped = ref.copy()
    flipped[1] *= -1
    for bad in (zeroed, flipped):
        assert rel_error(bad, ref) >= 1            # per-row default scale
        assert rel_error(bad, ref, scale) >= 1
    nudged = ref*(1 + 1e-15)
    assert rel_error(nudged, ref, scale) < 1e-14
    # where the reference and its scale are zero, only zero passes
    z = np.zeros((2, 2))
    assert rel_error(z, z, z) == 0 and rel_error(z + 1e-300, z, z) == np.inf
    assert rel_error(np.full((2, 2), np.nan), ref) == np.inf


class SmallRowSaboteur(CRuntime):
    """One candidate zeroes, another flips the sign of, the small row 0 of
    C (A's row 0 is 1e12 times smaller than its row 1)."""

    def __init__(self, how):
        super().__init__()
        self._device += ' (saboteur)'
        self.how, self.victims = how, set()

    def compile(self, src, meta):
        good = super().compile(src, meta)
        if meta['tplname'] != 'cstream':
            return good
        self.victims.add(meta['variant'])

        def launch(b, c, n, ldb, ldc):
            good(b, c, n, ldb, ldc)
            if self.how == 'zero':
                c[0, :n] = 0
            else:
                c[0, :n] *= -1
        return launch


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


class BScribbler(CRuntime):
    """Its cstream candidates compute C right, then overwrite B (which
    would make every later candidate look wrong)."""

    def __init__(self):
        super().__init__()
        self._device += ' (scribbler)'
        self.victims = set()

    def compile(self, src, meta):
        good = super().compile(src, meta)
        if meta['tplname'] != 'cstream':
            return good
        self.victims.add(meta['variant'])

        def launch(b, c, n, ldb, ldc):
            good(b, c, n, ldb, ldc)
            b[:, :n] = 0
        return launch


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


# -- 9. timing outliers --------------------------------------------------------------
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


def test_progress_bar_on_a_terminal():
    from gimmik.progress import TuneBar

    class TTY(io.StringIO):
        def isatty(self):
            return True
    tty = TTY()
    bar = TuneBar(tty)
    bar.update(1, 3, 'cstream/width64')
    bar.update(2, 3, 'bstream/width64')
    bar.close()
    assert 'bstream/width64' in tty.getvalue() and '2/3' in tty.getvalue()
    plain = io.StringIO()
    bar = TuneBar(plain)
    bar.update(1, 3, 'x')
    bar.close()
    assert plain.getvalue() == ''
