"""The vendor baseline: the fastest right formulation of the vendor library
is the baseline and is named; a formulation that raises, is wrong or writes
the padding is recorded and never chosen.  The row-major to column-major
mapping every BLAS formulation uses, the cuBLASLt binding (against a
stand-in library on host memory), the cuda runtime's formulations and
device-side checks (against stand-ins for CuPy and cuBLAS) and a sweep's
summary against its vendor (gimmik.report.vendor_lines) are checked on the
CPU."""

import ctypes

import numpy as np
import pytest

from conftest import Panels, random_operator
from gimmik.runtime import blas, cublaslt, failed_launch, pick_vendor
from gimmik.runtime.c import Runtime as CRuntime
from gimmik.tune import format_table, tune


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv('GIMMIK_CACHE_DIR', str(tmp_path / 'cache'))
    monkeypatch.setattr('gimmik.tune.WARMUP', 0)
    monkeypatch.setattr('gimmik.tune.REPEATS', 1)
    monkeypatch.setattr('gimmik.tune.COPY_BYTES', (1 << 16, 1 << 16))


# -- pick_vendor --------------------------------------------------------------

def test_pick_vendor_takes_the_fastest_right_one():
    def launch(tag):
        def f(b, c, n, ldb, ldc):
            pass
        f.tag = tag
        return f
    forms = [('slow', launch('slow')), ('wrong', launch('wrong')),
             ('raises', failed_launch(RuntimeError('no library'))),
             ('fast', launch('fast')), ('zero', launch('zero')),
             ('also-slow', launch('also-slow'))]
    times = {'slow': 3.0, 'wrong': 0.1, 'fast': 1.0, 'zero': 0.0,
             'also-slow': 2.0}

    def check(f):
        f(None, None, 1, 1, 1)
        return 'wrong on purpose' if f.tag == 'wrong' else None
    best, recs = pick_vendor(forms, check, lambda f: times[f.tag])
    assert best[0] == 'fast' and best[1].tag == 'fast' and best[2] == 1.0
    by = {r['name']: r for r in recs}
    assert [r['name'] for r in recs] == [n for n, _ in forms]
    assert by['wrong']['error'] == 'wrong on purpose' \
        and by['wrong']['time_s'] is None
    assert 'no library' in by['raises']['error']
    assert 'timed at' in by['zero']['error']
    assert by['slow'] == {'name': 'slow', 'time_s': 3.0, 'error': None}
    # none right: no best, every failure recorded
    best, recs = pick_vendor(forms[1:3], check, lambda f: 1.0)
    assert best is None and all(r['error'] for r in recs)


# -- the tuner with several formulations (a stand-in c runtime) ---------------

class Formulations(CRuntime):
    """A c runtime whose vendor offers several formulations with stand-in
    times (NumPy's gemm underneath): one wrong and fastest, one writing the
    padding of C, one failing to set up, one raising when run, and right
    ones at 3 ms, 1 ms and 2 ms."""

    TIMES = {'wrong': 1e-6, 'pads': 1e-6, 'slow': 3e-3, 'fast': 1e-3,
             'middle': 2e-3}

    def __init__(self, names=None):
        super().__init__()
        self._device += ' (stand-in vendor)'
        self.names = names
        self.last = None

    def vendor_formulations(self, A, alpha, beta, dtype, n=None, ldb=None,
                            ldc=None):
        assert (n, ldb, ldc) == (self.sizes if hasattr(self, 'sizes')
                                 else (n, ldb, ldc))
        good = self.vendor_gemm(A, alpha, beta, dtype)

        def make(name):
            def launch(b, c, n, ldb, ldc):
                self.last = name
                if name == 'raises':
                    raise RuntimeError('launch failed on purpose')
                good(b, c, n, ldb, ldc)
                if name == 'wrong':
                    c[0, 0] += 1e-6*max(1.0, abs(c[0, 0]))
                if name == 'pads' and ldc > n:
                    c[:, n] = 0.0
            return launch
        forms = [(name, make(name)) for name in
                 ('wrong', 'pads', 'slow', 'raises', 'fast', 'middle')]
        forms.insert(2, ('no-setup', failed_launch(
            OSError('libvendor.so not found (on purpose)'))))
        if self.names is not None:
            forms = [f for f in forms if f[0] in self.names]
        return forms

    def time(self, launch, args, *, warmup=2, repeats=10):
        self.last = None
        t = super().time(launch, args, warmup=warmup, repeats=repeats)
        return self.TIMES.get(self.last, t)


@pytest.mark.parametrize('beta', [0.0, 0.5])
def test_tune_takes_the_fastest_right_formulation(rng, beta):
    A = random_operator(rng, 6, 5, 0.6)
    A[0, 0] = 1.0
    rt = Formulations()
    rt.sizes = (300, 301, 304)
    res = tune(A, beta=beta, n=300, ldb=301, ldc=304, runtime=rt,
               use_cache=False)
    v = res.vendor
    assert v['formulation'] == 'fast' and v['time_s'] == 1e-3
    by = {f['name']: f for f in v['formulations']}
    assert list(by) == ['wrong', 'pads', 'no-setup', 'slow', 'raises',
                        'fast', 'middle']
    assert 'disagrees with NumPy' in by['wrong']['error']
    assert 'padding' in by['pads']['error']
    assert 'not found (on purpose)' in by['no-setup']['error']
    assert 'on purpose' in by['raises']['error']
    for name in ('wrong', 'pads', 'no-setup', 'raises'):
        assert by[name]['time_s'] is None
    assert [by[x]['time_s'] for x in ('slow', 'fast', 'middle')] == \
        [3e-3, 1e-3, 2e-3]
    assert res.vendor_error <= 1e-13
    # use_vendor compares the best candidate with the best formulation
    assert res.use_vendor == (1e-3 < res.best['time_s'])
    js = res.to_json()
    assert js['vendor']['formulation'] == 'fast'
    assert len(js['vendor']['formulations']) == 7
    assert 'fast, the fastest of 7 formulations' in format_table(res)
    # the sweep's row names it
    from gimmik.sweep import result_row
    assert result_row('op', A, beta, res, 1.0)['vendor_formulation'] == \
        'fast'


def test_every_formulation_failing_is_an_error(rng):
    A = random_operator(rng, 4, 3, 0.8)
    A[0, 0] = 1.0
    rt = Formulations(names={'wrong', 'raises', 'no-setup'})
    with pytest.raises(RuntimeError, match='vendor BLAS') as e:
        tune(A, n=64, runtime=rt, use_cache=False)
    for name in ('wrong', 'raises', 'no-setup'):
        assert name in str(e.value)


# -- row-major panels as a column-major gemm ----------------------------------

def colmajor_gemm_ref(dtype, transa, transb, M, N, K, alpha, x, ldx, y, ldy,
                      beta, c, ldc):
    """A reference column-major gemm on flat arrays (C is M x N, ld ldc)."""
    def view(flat, rows, cols, ld, op='N'):
        if op == 'T':
            return view(flat, cols, rows, ld).T
        assert ld >= rows and flat.size >= (cols - 1)*ld + rows
        return np.lib.stride_tricks.as_strided(
            flat, (rows, cols), (flat.itemsize, ld*flat.itemsize))
    X = view(x, M, K, ldx, transa)
    Y = view(y, K, N, ldy, transb)
    C = view(c, M, N, ldc)
    C[...] = alpha*(X.astype(np.float64) @ Y) + (beta*C if beta else 0)


@pytest.mark.parametrize('form', blas.FORMS)
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_colmajor_forms(rng, form, dtype):
    m, k = int(rng.integers(1, 9)), int(rng.integers(1, 9))
    n = int(rng.integers(1, 50))
    ldb, ldc = n + int(rng.integers(0, 4)), n + int(rng.integers(0, 4))
    A = rng.standard_normal((m, k))
    beta = float(rng.choice([0.0, -0.5, 1.0]))
    p = Panels(rng, A, beta, dtype, n, ldb, ldc)
    p.ref *= 1.0     # alpha folded into the stored A below
    g = blas.colmajor_gemm(form, m, k, n, ldb, ldc)
    a = blas.stored_a(A, 1.0, dtype, form)
    assert a.flags.c_contiguous and a.dtype == dtype
    assert a.shape == ((k, m) if form == 'nt' else (m, k))
    assert (g.M, g.N, g.K, g.ldx, g.ldc) == (n, m, k, ldb, ldc)
    assert g.a_transposed == (form == 'nt')
    (xr, xc, xl), (yr, yc, yl), (cr, cc, cl) = g.layouts()
    assert (xr, xc, xl) == (n, k, ldb) and (cr, cc, cl) == (n, m, ldc)
    assert yl >= yr and yr*yc == m*k
    colmajor_gemm_ref(dtype, g.transa, g.transb, g.M, g.N, g.K, 1.0,
                      p.bfull.reshape(-1), g.ldx, a.reshape(-1), g.ldy,
                      beta, p.cfull.reshape(-1), g.ldc)
    p.check(f'form {form}')


def test_alpha_is_folded_into_a():
    A = np.arange(6.0).reshape(2, 3)
    assert np.array_equal(blas.stored_a(A, 2.0, np.float64, 'nn'), 2*A)
    assert np.array_equal(blas.stored_a(A, -1.0, np.float32, 'nt'),
                          (-A.T).astype(np.float32))


@pytest.mark.parametrize('args,match', [
    (('tn', 2, 2, 2, 2, 2), 'form'), (('nn', 0, 2, 2, 2, 2), 'm must'),
    (('nn', 2, 2, 8, 7, 8), 'at least n'), (('nt', 2, True, 2, 2, 2), 'k')])
def test_colmajor_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        blas.colmajor_gemm(*args)


# -- the cuBLASLt binding against a stand-in library --------------------------

class FakeLt:
    """cuBLASLt's entry points on host memory: descriptors are dicts, the
    heuristic offers `offer` algorithms (algo.data[0] = index, one of them
    failing its state), and cublasLtMatmul runs the reference column-major
    gemm on the addresses it is given."""

    def __init__(self, offer=3):
        self.offer, self.objs, self.ran, self.destroyed = offer, {}, [], []

    def _new(self, out, **kw):
        key = len(self.objs) + 1
        self.objs[key] = kw
        out._obj.value = key
        return 0

    def cublasLtCreate(self, out):
        return self._new(out, kind='handle')

    def cublasLtMatmulDescCreate(self, out, compute, scale):
        return self._new(out, kind='desc', compute=compute.value,
                         scale=scale.value, trans={})

    def cublasLtMatmulDescSetAttribute(self, desc, attr, buf, size):
        v = ctypes.cast(buf, ctypes.POINTER(ctypes.c_int32))[0]
        assert size == 4
        self.objs[desc.value]['trans'][attr] = v
        return 0

    def cublasLtMatrixLayoutCreate(self, out, dtype, rows, cols, ld):
        return self._new(out, kind='layout', dtype=dtype.value,
                         rows=rows.value, cols=cols.value, ld=ld.value)

    def cublasLtMatmulPreferenceCreate(self, out):
        return self._new(out, kind='pref')

    def cublasLtMatmulPreferenceSetAttribute(self, pref, attr, buf, size):
        assert attr == cublaslt.MATMUL_PREF_MAX_WORKSPACE_BYTES and size == 8
        self.objs[pref.value]['ws'] = ctypes.cast(
            buf, ctypes.POINTER(ctypes.c_uint64))[0]
        return 0

    def cublasLtMatmulAlgoGetHeuristic(self, h, desc, a, b, c, d, pref,
                                       count, results, got):
        assert c.value == d.value
        n = min(count, self.offer)
        for i in range(n):
            results[i].algo.data[0] = i
            results[i].state = 15 if i == 1 else 0   # one not supported
            results[i].workspaceSize = 1024
        got._obj.value = n
        return 0

    def cublasLtMatmul(self, h, desc, alpha, x, xd, y, yd, beta, c, cd, d,
                       dd, algo, ws, wsbytes, stream):
        assert c == d and cd.value == dd.value
        desc = self.objs[desc.value]
        dtype = {cublaslt.CUDA_R_64F: np.float64,
                 cublaslt.CUDA_R_32F: np.float32}[desc['scale']]
        ct = np.ctypeslib.as_ctypes_type(dtype)
        scal = ctypes.cast(alpha, ctypes.POINTER(ct))[0], \
            ctypes.cast(beta, ctypes.POINTER(ct))[0]
        ops = {v: 'NT'[desc['trans'][a]] for a, v in
               ((cublaslt.MATMUL_DESC_TRANSA, 'a'),
                (cublaslt.MATMUL_DESC_TRANSB, 'b'))}

        def flat(ptr, lay):
            lay = self.objs[lay.value]
            size = (lay['cols'] - 1)*lay['ld'] + lay['rows']
            return np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ct)),
                                         (size,)), lay
        xf, xl = flat(x, xd)
        yf, yl = flat(y, yd)
        cf, cl = flat(c, cd)
        M, N = cl['rows'], cl['cols']
        K = xl['cols'] if ops['a'] == 'N' else xl['rows']
        colmajor_gemm_ref(dtype, ops['a'], ops['b'], M, N, K, scal[0], xf,
                          xl['ld'], yf, yl['ld'], scal[1], cf, cl['ld'])
        self.ran.append(algo._obj.data[0])
        return 0

    def __getattr__(self, name):
        if name.endswith('Destroy'):
            return lambda obj: self.destroyed.append(obj.value) or 0
        raise AttributeError(name)


def test_heuristic_result_layout():
    R = cublaslt.HeuristicResult
    assert ctypes.sizeof(cublaslt.MatmulAlgo) == 64
    assert (R.algo.offset, R.workspaceSize.offset, R.state.offset,
            R.wavesCount.offset, R.reserved.offset) == (0, 64, 72, 76, 80)
    assert ctypes.sizeof(R) == 96


@pytest.mark.parametrize('form', blas.FORMS)
def test_cublaslt_matmul_with_stand_in(rng, form):
    lib = FakeLt()
    for fname in cublaslt._SIGNATURES:    # bind() on the stand-in
        getattr(lib, fname)
    handle = cublaslt.Handle.__new__(cublaslt.Handle)
    handle.lib, handle.ptr = lib, ctypes.c_void_p()
    assert lib.cublasLtCreate(ctypes.byref(handle.ptr)) == 0
    m, k, n, ldb, ldc = 5, 4, 37, 39, 40
    A = rng.standard_normal((m, k))
    p = Panels(rng, A, 0.5, np.float64, n, ldb, ldc)
    g = blas.colmajor_gemm(form, m, k, n, ldb, ldc)
    mm = cublaslt.Matmul(handle, g, np.float64, 4096)
    desc = lib.objs[mm.desc.value]
    assert desc['compute'] == cublaslt.CUBLAS_COMPUTE_64F
    assert desc['trans'] == {cublaslt.MATMUL_DESC_TRANSA: 0,
                             cublaslt.MATMUL_DESC_TRANSB:
                             int(form == 'nt')}
    algos = mm.heuristics(8)
    assert [a.algo.data[0] for a in algos] == [0, 2]   # state 15 left out
    a = blas.stored_a(A, 1.0, np.float64, form)
    scal = np.array([1.0, 0.5])
    ws = np.empty(4096, np.uint8)
    mm.run(algos[1], scal.ctypes.data, p.bfull.ctypes.data, a.ctypes.data,
           scal.ctypes.data + 8, p.cfull.ctypes.data, ws.ctypes.data, 0)
    assert lib.ran == [2]
    p.check(f'cuBLASLt stand-in, form {form}')
    owned = [o.value for _, o in mm._owned]
    del mm
    assert sorted(lib.destroyed) == sorted(owned)


def test_cublaslt_missing_library_is_named(monkeypatch):
    monkeypatch.setattr(cublaslt, '_libs', {})
    monkeypatch.setattr(cublaslt, 'candidate_paths',
                        lambda: ['/nonexistent/libcublasLt.so.13',
                                 'libcublasLt-not-here.so'])
    with pytest.raises(OSError, match='libcublasLt not found'):
        cublaslt.load_library()


# -- a sweep's summary against its vendor (bench/cuda/cuda_bench.py's) -------

def test_vendor_lines(tmp_path):
    from gimmik.sweep import COLUMNS, write_candidates, write_tables
    ops = [('p1-hex-m0', 'cublaslt-nn/h0', 1e-3, 1.2e-3, 0.9, 0.6, 2.0),
           ('p2-hex-m0', 'cublas-nt', 2e-3, 2e-3, 0.8, 0.4, 0.5),
           ('p3-hex-m0', 'cublaslt-nn/h0', 3e-3, 2e-3, 0.7, 0.3, 1.5),
           ('p4-hex-m0', 'cublas-nn', 3e-3, None, 0.7, 0.3, 1.5)]
    rows, cands = [], []
    for op, form, vt, ct, bc, vc, sp in ops:
        row = dict.fromkeys(COLUMNS)
        row.update(operator=op, dtype='float64', n=256, error='',
                   candidate='cstream/width1', time_s=vt/sp,
                   vendor_formulation=form, vendor_time_s=vt,
                   copy_fraction=bc, vendor_copy_fraction=vc, speedup=sp)
        rows.append(row)
        cands.append([{'operator': op, 'kind': 'vendor', 'name': 'cupy-gemm',
                       'time_s': ct, 'error': '' if ct else 'failed'}])
    write_tables(str(tmp_path), rows, {})
    write_candidates(str(tmp_path), cands)
    from gimmik.report import vendor_lines
    lines = vendor_lines(str(tmp_path))
    assert lines[0].startswith('4 operators') and '(1 slower' in lines[0]
    assert lines[1] == ('vendor formulations that won: cublaslt-nn/h0 2, '
                        'cublas-nt 1, cublas-nn 1')
    assert lines[2].endswith(': 1 of 3 with one (p3-hex-m0)')


# -- the cuda runtime's formulations against stand-ins for CuPy and cuBLAS ---

class DevArray(np.ndarray):
    """A host array posing as a CuPy array (data.ptr is its address)."""

    @property
    def data(self):
        return type('Mem', (), {'ptr': self.ctypes.data})()


def _dev(x):
    return np.array(x).view(DevArray)


def _from_address(ptr, dtype):
    ct = np.ctypeslib.as_ctypes_type(dtype)
    return ctypes.cast(ptr, ctypes.POINTER(ct))[0]


class FakeCublas:
    """cupy_backends' cublas: ?gemm on host addresses, column-major."""
    CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_POINTER_MODE_HOST = 0, 1, 0

    def __init__(self):
        self.calls = []

    def setStream(self, handle, stream):
        pass

    def setPointerMode(self, handle, mode):
        assert mode == 0

    def _gemm(self, dtype, h, opa, opb, M, N, K, alpha, x, ldx, y, ldy, beta,
              c, ldc):
        self.calls.append('NT'[opa] + 'NT'[opb])

        def flat(ptr, rows, cols, ld, op=0):
            r, cl = (rows, cols) if op == 0 else (cols, rows)
            return np.ctypeslib.as_array(ctypes.cast(
                ptr, ctypes.POINTER(np.ctypeslib.as_ctypes_type(dtype))),
                ((cl - 1)*ld + r,))
        colmajor_gemm_ref(dtype, 'NT'[opa], 'NT'[opb], M, N, K,
                          _from_address(alpha, dtype),
                          flat(x, M, K, ldx, opa), ldx,
                          flat(y, K, N, ldy, opb), ldy,
                          _from_address(beta, dtype),
                          flat(c, M, N, ldc), ldc)

    def dgemm(self, *a):
        self._gemm(np.float64, *a)

    def sgemm(self, *a):
        self._gemm(np.float32, *a)


@pytest.fixture
def fake_cupy(monkeypatch):
    import sys
    from types import ModuleType, SimpleNamespace
    import gimmik.runtime.cuda as cudart
    calls = []

    def gemm(ta, tb, a, b, out, alpha=1.0, beta=0.0):
        assert (ta, tb) == ('N', 'N')
        calls.append('cupy')
        out[...] = alpha*(np.asarray(a) @ np.asarray(b)) + \
            (beta*np.asarray(out) if beta else 0)
    cp = ModuleType('cupy')
    cp.asarray = _dev
    cp.empty = lambda n, dtype: _dev(np.empty(n, dtype))
    cp.cuda = SimpleNamespace(
        get_current_stream=lambda: SimpleNamespace(ptr=0),
        device=SimpleNamespace(get_cublas_handle=lambda: 'handle'))
    cp.isfinite, cp.abs, cp.where = np.isfinite, np.abs, np.where
    cp.array_equal = np.array_equal
    cp.cublas = ModuleType('cupy.cublas')
    cp.cublas.gemm = gemm
    monkeypatch.setitem(sys.modules, 'cupy', cp)
    monkeypatch.setitem(sys.modules, 'cupy.cublas', cp.cublas)
    monkeypatch.setattr(cudart, 'cupy', cp)
    blas_ = FakeCublas()
    monkeypatch.setattr(cudart, '_cublas', blas_, raising=False)
    lt = FakeLt(offer=3)
    monkeypatch.setattr(cublaslt, 'load_library', lambda: lt)
    rt = cudart.Runtime.__new__(cudart.Runtime)
    rt._init_state()
    return SimpleNamespace(rt=rt, blas=blas_, lt=lt, cupy_calls=calls)


@pytest.mark.parametrize('dtype,beta', [(np.float64, 0.0),
                                        (np.float64, 1.0),
                                        (np.float32, -0.5)])
def test_cuda_formulations_with_stand_ins(fake_cupy, rng, dtype, beta):
    m, k, n, ldb, ldc = 7, 5, 45, 46, 48
    A = random_operator(rng, m, k, 0.6)
    A[0, 0] = 1.0
    forms = fake_cupy.rt.vendor_formulations(A, 2.0, beta, dtype, n=n,
                                             ldb=ldb, ldc=ldc)
    names = [name for name, _ in forms]
    # 3 algorithms offered per storage, one of them not supported
    assert names == ['cublas-nn', 'cublas-nt', 'cupy-gemm',
                     'cublaslt-nn/h0', 'cublaslt-nn/h1',
                     'cublaslt-nt/h0', 'cublaslt-nt/h1']
    for name, launch in forms:
        p = Panels(rng, 2.0*A, beta, dtype, n, ldb, ldc)
        b, c = _dev(p.bfull), _dev(p.cfull)
        launch(b, c, n, ldb, ldc)
        p.cfull[...] = c
        p.check(name)
    assert fake_cupy.blas.calls == ['NN', 'NT']
    assert fake_cupy.cupy_calls == ['cupy'] and fake_cupy.lt.ran == [
        0, 2, 0, 2]
    # a cuBLASLt plan is for the sizes it was made for
    with pytest.raises(ValueError, match='cuBLASLt plan'):
        forms[3][1](b, c, n - 1, ldb, ldc)
    # without sizes no cuBLASLt; vendor_gemm is the cublas-nn formulation
    assert [f for f, _ in fake_cupy.rt.vendor_formulations(
        A, 1.0, beta, dtype)] == ['cublas-nn', 'cublas-nt', 'cupy-gemm']
    assert fake_cupy.rt.vendor_name == 'cublas-nn'
    fake_cupy.rt.cublaslt = False       # Runtime(cublaslt=False)
    assert len(fake_cupy.rt.vendor_formulations(A, 1.0, beta, dtype, n=n,
                                                ldb=ldb, ldc=ldc)) == 3


def test_cuda_formulation_setup_failures_are_listed(fake_cupy, monkeypatch,
                                                    rng):
    def no_lt():
        raise OSError('libcublasLt not found (on purpose)')
    monkeypatch.setattr(cublaslt, 'load_library', no_lt)

    def not_supported(*a):
        raise RuntimeError('CUBLAS_STATUS_NOT_SUPPORTED (on purpose)')
    monkeypatch.setattr(fake_cupy.blas, 'dgemm', not_supported,
                        raising=False)
    A = random_operator(rng, 3, 3, 0.9)
    A[0, 0] = 1.0
    forms = dict(fake_cupy.rt.vendor_formulations(A, 1.0, 0.0, np.float64,
                                                  n=8, ldb=8, ldc=8))
    assert list(forms) == ['cublas-nn', 'cublas-nt', 'cupy-gemm',
                           'cublaslt-nn', 'cublaslt-nt']
    for name in ('cublas-nn', 'cublas-nt', 'cublaslt-nn', 'cublaslt-nt'):
        with pytest.raises((OSError, RuntimeError), match='on purpose'):
            forms[name](_dev(np.zeros((3, 8))), _dev(np.zeros((3, 8))), 8,
                        8, 8)


def test_cuda_compare_on_the_device(fake_cupy, rng):
    rt = fake_cupy.rt
    start = _dev(np.full((3, 10), 7.0))
    values = rng.standard_normal((3, 8))
    scale = np.abs(values) + 1.0
    ref = rt.reference(values, scale)
    buf = rt.clone(start)
    assert isinstance(buf, DevArray) and buf is not start
    buf[:, :8] = values
    assert rt.compare(buf, ref, start, 8) == (0.0, True)
    # each element against its own scale
    buf[1, 2] += 1e-9*scale[1, 2]
    err, pad = rt.compare(buf, ref, start, 8)
    assert 0.9e-9 < err < 1.1e-9 and pad
    assert rt.same(buf, buf) and not rt.same(buf, start)
    buf[0, 9] = 0.0
    assert rt.compare(buf, ref, start, 8)[1] is False
    buf[2, 0] = np.nan
    assert rt.compare(buf, ref, start, 8)[0] == np.inf
    f32 = _dev(np.zeros((3, 8), np.float32))
    assert rt.compare(f32, rt.reference(np.zeros((3, 8)), np.ones((3, 8))),
                      f32, 8) == (0.0, True)
