"""cuBLASLt through ctypes: a column-major matmul and its heuristic algorithm
candidates, for the CUDA vendor baseline; the library is the one CuPy
loaded, else the first found."""

import ctypes
import ctypes.util
import os
import threading

import numpy as np

# cublasOperation_t
OP = {'N': 0, 'T': 1}
# cudaDataType_t and cublasComputeType_t per dtype
CUDA_R_32F, CUDA_R_64F = 0, 1
CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_64F = 68, 70
TYPES = {np.dtype(np.float64): (CUDA_R_64F, CUBLAS_COMPUTE_64F),
         np.dtype(np.float32): (CUDA_R_32F, CUBLAS_COMPUTE_32F)}
# cublasLtMatmulDescAttributes_t (int32_t values)
MATMUL_DESC_TRANSA, MATMUL_DESC_TRANSB = 3, 4
# cublasLtMatmulPreferenceAttributes_t (uint64_t value)
MATMUL_PREF_MAX_WORKSPACE_BYTES = 1

# Library names tried after the one already loaded, newest first
SONAMES = ('libcublasLt.so.13', 'libcublasLt.so.12', 'libcublasLt.so.11',
           'libcublasLt.so')


class MatmulAlgo(ctypes.Structure):
    """cublasLtMatmulAlgo_t: uint64_t data[8]."""
    _fields_ = [('data', ctypes.c_uint64*8)]


class HeuristicResult(ctypes.Structure):
    """cublasLtMatmulHeuristicResult_t."""
    _fields_ = [('algo', MatmulAlgo),
                ('workspaceSize', ctypes.c_size_t),
                ('state', ctypes.c_int),          # cublasStatus_t
                ('wavesCount', ctypes.c_float),
                ('reserved', ctypes.c_int*4)]


assert ctypes.sizeof(MatmulAlgo) == 64
assert ctypes.sizeof(HeuristicResult) == 96

_P = ctypes.c_void_p
_SIGNATURES = {
    'cublasLtCreate': [ctypes.POINTER(_P)],
    'cublasLtMatmulDescCreate': [ctypes.POINTER(_P), ctypes.c_int,
                                 ctypes.c_int],
    'cublasLtMatmulDescSetAttribute': [_P, ctypes.c_int, _P,
                                       ctypes.c_size_t],
    'cublasLtMatmulDescDestroy': [_P],
    'cublasLtMatrixLayoutCreate': [ctypes.POINTER(_P), ctypes.c_int,
                                   ctypes.c_uint64, ctypes.c_uint64,
                                   ctypes.c_int64],
    'cublasLtMatrixLayoutDestroy': [_P],
    'cublasLtMatmulPreferenceCreate': [ctypes.POINTER(_P)],
    'cublasLtMatmulPreferenceSetAttribute': [_P, ctypes.c_int, _P,
                                             ctypes.c_size_t],
    'cublasLtMatmulPreferenceDestroy': [_P],
    'cublasLtMatmulAlgoGetHeuristic': [
        _P, _P, _P, _P, _P, _P, _P, ctypes.c_int,
        ctypes.POINTER(HeuristicResult), ctypes.POINTER(ctypes.c_int)],
    # handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc,
    # algo, workspace, workspace bytes, stream
    'cublasLtMatmul': [_P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P,
                       ctypes.POINTER(MatmulAlgo), _P, ctypes.c_size_t, _P],
}

_lock = threading.Lock()
_libs = {}


def _loaded_paths(name='libcublasLt.so'):
    """Paths of already-loaded libraries whose file name starts with
    `name` (from /proc/self/maps; none where that does not exist)."""
    try:
        with open('/proc/self/maps') as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    seen = []
    for line in lines:
        path = line.split(None, 5)[-1] if line.count(' ') >= 5 else ''
        if os.path.basename(path).startswith(name) and path not in seen:
            seen.append(path)
    return seen


def candidate_paths():
    """Where libcublasLt may be, in the order tried: loaded already (by
    CuPy's cuBLAS), the nvidia-cublas wheel, $CUDA_PATH/$CUDA_HOME, the
    default toolkit, then the loader's search by soname."""
    paths = list(_loaded_paths())
    try:
        import nvidia.cublas
        for d in nvidia.cublas.__path__:
            paths += [os.path.join(d, 'lib', s) for s in SONAMES]
    except Exception:
        pass
    for env in ('CUDA_PATH', 'CUDA_HOME'):
        root = os.environ.get(env)
        if root:
            for sub in ('lib64', 'lib', 'targets/x86_64-linux/lib'):
                paths += [os.path.join(root, sub, s) for s in SONAMES]
    paths += [os.path.join('/usr/local/cuda/lib64', s) for s in SONAMES]
    found = ctypes.util.find_library('cublasLt')
    if found:
        paths.append(found)
    paths += list(SONAMES)
    return list(dict.fromkeys(paths))


def load_library():
    """The cuBLASLt library with its argument types set; raises OSError
    listing where it looked."""
    with _lock:
        if 'lib' in _libs:
            return _libs['lib']
        tried = []
        for path in candidate_paths():
            if os.path.isabs(path) and not os.path.exists(path):
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                tried.append(f'{path}: {e}')
                continue
            bind(lib)
            _libs['lib'] = lib
            return lib
        raise OSError('libcublasLt not found (tried '
                      + ('; '.join(tried) or 'no existing path') + ')')


def bind(lib):
    """Set restype and argtypes of every function used (missing: raises
    AttributeError naming it)."""
    for fname, args in _SIGNATURES.items():
        fn = getattr(lib, fname)
        fn.restype = ctypes.c_int
        fn.argtypes = args
    name = getattr(lib, 'cublasLtGetStatusName', None)
    if name is not None:
        name.restype = ctypes.c_char_p
        name.argtypes = [ctypes.c_int]
    return lib


class CublasLtError(RuntimeError):
    pass


def _check(lib, status, what):
    if status != 0:
        name = ''
        fn = getattr(lib, 'cublasLtGetStatusName', None)
        if fn is not None:
            try:
                name = f' ({fn(status).decode()})'
            except Exception:
                pass
        raise CublasLtError(f'{what} failed: status {status}{name}')


class Handle:
    """A cublasLtHandle_t (one per runtime)."""

    def __init__(self, lib=None):
        self.lib = lib or load_library()
        self.ptr = _P()
        _check(self.lib, self.lib.cublasLtCreate(ctypes.byref(self.ptr)),
               'cublasLtCreate')


class Matmul:
    """One column-major D = op(X) op(Y) + beta C problem (D is C): its
    descriptors, heuristic algorithms and launches."""

    def __init__(self, handle, gemm, dtype, workspace_bytes):
        lib = self.lib = handle.lib
        self.handle, self.gemm = handle, gemm
        self.dtype = np.dtype(dtype)
        if self.dtype not in TYPES:
            raise TypeError(f'cuBLASLt matmul for {self.dtype} is not bound')
        dtype_id, compute = TYPES[self.dtype]
        self.workspace_bytes = int(workspace_bytes)
        self._owned = []
        self.desc = self._create('cublasLtMatmulDescCreate',
                                 'cublasLtMatmulDescDestroy',
                                 ctypes.c_int(compute),
                                 ctypes.c_int(dtype_id))
        for attr, op in ((MATMUL_DESC_TRANSA, gemm.transa),
                         (MATMUL_DESC_TRANSB, gemm.transb)):
            v = ctypes.c_int32(OP[op])
            _check(lib, lib.cublasLtMatmulDescSetAttribute(
                self.desc, attr, ctypes.byref(v), ctypes.sizeof(v)),
                'cublasLtMatmulDescSetAttribute')
        x, y, c = gemm.layouts()
        self.xdesc, self.ydesc, self.cdesc = (
            self._create('cublasLtMatrixLayoutCreate',
                         'cublasLtMatrixLayoutDestroy',
                         ctypes.c_int(dtype_id), ctypes.c_uint64(rows),
                         ctypes.c_uint64(cols), ctypes.c_int64(ld))
            for rows, cols, ld in (x, y, c))
        self.pref = self._create('cublasLtMatmulPreferenceCreate',
                                 'cublasLtMatmulPreferenceDestroy')
        ws = ctypes.c_uint64(self.workspace_bytes)
        _check(lib, lib.cublasLtMatmulPreferenceSetAttribute(
            self.pref, MATMUL_PREF_MAX_WORKSPACE_BYTES, ctypes.byref(ws),
            ctypes.sizeof(ws)), 'cublasLtMatmulPreferenceSetAttribute')

    def _create(self, create, destroy, *args):
        obj = _P()
        _check(self.lib, getattr(self.lib, create)(ctypes.byref(obj), *args),
               create)
        self._owned.append((destroy, obj))
        return obj

    def heuristics(self, count):
        """Up to `count` algorithms the heuristic offers, fastest expected
        first (those whose state is not success are left out)."""
        results = (HeuristicResult*count)()
        got = ctypes.c_int(0)
        _check(self.lib, self.lib.cublasLtMatmulAlgoGetHeuristic(
            self.handle.ptr, self.desc, self.xdesc, self.ydesc, self.cdesc,
            self.cdesc, self.pref, count, results, ctypes.byref(got)),
            'cublasLtMatmulAlgoGetHeuristic')
        return [results[i] for i in range(got.value)
                if results[i].state == 0
                and results[i].workspaceSize <= self.workspace_bytes]

    def run(self, result, alpha, x, y, beta, c, workspace, stream):
        """D = C = alpha op(X) op(Y) + beta C with one heuristic result;
        alpha and beta are host pointers, the rest device pointers."""
        _check(self.lib, self.lib.cublasLtMatmul(
            self.handle.ptr, self.desc, alpha, x, self.xdesc, y, self.ydesc,
            beta, c, self.cdesc, c, self.cdesc, ctypes.byref(result.algo),
            workspace, self.workspace_bytes, stream), 'cublasLtMatmul')

    def __del__(self):
        for destroy, obj in reversed(getattr(self, '_owned', ())):
            try:
                getattr(self.lib, destroy)(obj)
            except Exception:
                pass
