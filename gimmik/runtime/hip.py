"""The ``hip`` runtime: hip-python on an AMD GPU, kernels by hiprtc, the
baseline hipBLAS; a missing piece raises RuntimeUnavailable naming it, and
compiling (:func:`build`) needs no GPU."""

import ctypes
import os
import statistics
import threading

import numpy as np

from gimmik.runtime import Runtime as _Runtime, RuntimeUnavailable, \
    blas, failed_launch


_lock = threading.Lock()
_state = {}


# -- loading hip-python and the HIP runtime library --------------------------
def _find_amdhip():
    """A libamdhip64.so* on the paths hiprtc searches too, or None."""
    from gimmik.hiprtc import find_rocm_library
    return find_rocm_library('libamdhip64.so')


def load_hip():
    """hip-python's `hip` module with libamdhip64 loaded, or raise
    RuntimeUnavailable saying which is missing."""
    with _lock:
        if 'hip' in _state:
            return _state['hip']
        from gimmik.hiprtc import hip_python
        hip, own = hip_python('hip', 'amdhip64')
        rocm = None
        if not (os.path.isabs(own) and os.path.isfile(own)):
            lib = _find_amdhip()
            if lib is None:
                raise RuntimeUnavailable(
                    'no HIP runtime library: libamdhip64.so not found in '
                    'ROCM_PATH, LD_LIBRARY_PATH or the system library '
                    'directories; install ROCm (Debian: libamdhip64-5)')
            from gimmik.hiprtc import rocm_link_dir
            rocm = rocm_link_dir(lib)
        from gimmik.hiprtc import rocm_path
        try:
            with rocm_path(rocm):
                err, _ = hip.hipRuntimeGetVersion()  # the first call loads it
        except RuntimeError as e:
            raise RuntimeUnavailable(f'cannot load the HIP runtime library '
                                     f'libamdhip64: {e}') from e
        if int(err) != 0:
            raise RuntimeUnavailable(f'the HIP runtime library does not '
                                     f'work: hipRuntimeGetVersion returned '
                                     f'{_name(err)}')
        _state['hip'] = hip
        return hip


def _load_hipblas():
    for modname in ('hip.hipblas', 'rocm.bindings.hipblas'):
        try:
            mod = __import__(modname, fromlist=['hipblas'])
            return mod
        except ImportError:
            continue
    raise RuntimeUnavailable('no hipBLAS bindings for the vendor baseline: '
                             'pip install rocm-bindings-libraries '
                             '(hip-python[libraries])')


def _name(err):
    return getattr(err, 'name', None) or str(err)


def _check(result, what):
    """Unpack a hip-python (error, values...) tuple, raising on failure."""
    if not isinstance(result, tuple):
        result = (result,)
    err, rest = result[0], result[1:]
    if int(err) != 0:
        raise RuntimeError(f'{what} failed: {_name(err)}')
    return rest[0] if len(rest) == 1 else (rest or None)


def build(src, meta, arch):
    """Compile a generated HIP kernel with hiprtc; returns the code object.
    Needs hiprtc, not a GPU."""
    from gimmik.hiprtc import compile_hip
    return compile_hip(src, arch=arch, kname=meta.get('kname', 'gimmik_mm'))


# -- device buffers -----------------------------------------------------------
class DeviceArray:
    """A rows x ld panel in GPU memory (freed with the object)."""

    def __init__(self, hip, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape))*self.dtype.itemsize
        self._hip = hip
        self.ptr = _check(hip.hipMalloc(max(self.nbytes, 1)), 'hipMalloc')

    def __del__(self):
        ptr, self.ptr = getattr(self, 'ptr', None), None
        if ptr is not None:
            try:
                self._hip.hipFree(ptr)
            except Exception:
                pass


class Runtime(_Runtime):
    name = 'hip'

    def __init__(self, device=0):
        hip = load_hip()
        err, count = hip.hipGetDeviceCount()
        if int(err) != 0 or count < 1:
            raise RuntimeUnavailable(f'no AMD GPU: hipGetDeviceCount returned '
                                     f'{_name(err)} with {count} devices')
        if isinstance(device, bool) or not isinstance(device, int) \
                or not 0 <= device < count:
            raise ValueError(f'device must be an index below {count}, not '
                             f'{device!r}')
        self._hip = hip
        _check(hip.hipSetDevice(device), 'hipSetDevice')
        props = _check(hip.hipGetDeviceProperties(device),
                       'hipGetDeviceProperties')
        arch = props.gcnArchName
        arch = arch.decode() if isinstance(arch, bytes) else str(arch)
        self.arch = arch.split(':')[0]
        self.warp_size = int(props.warpSize)
        pname = props.name
        pname = pname.decode() if isinstance(pname, bytes) else str(pname)
        self._device = f'{pname} ({self.arch})'
        self._l2 = int(props.l2CacheSize or 0)
        self._modules = []        # keep loaded modules alive
        self._attrs = {}          # src -> feedback of its function
        self._blas = None

    @property
    def device(self):
        return self._device

    def kernel_options(self):
        return {'gcn_arch': self.arch, 'warp_size': self.warp_size}

    def build_identity(self):
        try:
            version = _check(self._hip.hipRuntimeGetVersion(),
                             'hipRuntimeGetVersion')
        except Exception:
            version = None
        return f'hiprtc, HIP runtime {version}'

    def cache_bytes(self):
        # MI300-class parts add a 256 MiB Infinity Cache HIP does not report
        return max(self._l2, 256 << 20 if self.arch.startswith('gfx94')
                   else 0)

    def matmul(self, A, beta, **sizes):
        from gimmik.hip import HIPMatMul
        return HIPMatMul(A, beta=beta, **sizes)

    # -- buffers ---------------------------------------------------------
    def upload(self, host):
        host = np.ascontiguousarray(host)
        buf = DeviceArray(self._hip, host.shape, host.dtype)
        _check(self._hip.hipMemcpy(buf.ptr, host, host.nbytes,
                                   self._hip.hipMemcpyKind
                                   .hipMemcpyHostToDevice), 'hipMemcpy H2D')
        return buf

    def download(self, buf, out):
        if out.shape != buf.shape or out.dtype != buf.dtype \
                or not out.flags.c_contiguous:
            raise ValueError(f'out must be a C-contiguous {buf.shape} array '
                             f'of {buf.dtype}')
        _check(self._hip.hipMemcpy(out, buf.ptr, buf.nbytes,
                                   self._hip.hipMemcpyKind
                                   .hipMemcpyDeviceToHost), 'hipMemcpy D2H')

    def clone(self, buf):
        new = DeviceArray(self._hip, buf.shape, buf.dtype)
        _check(self._hip.hipMemcpy(new.ptr, buf.ptr, buf.nbytes,
                                   self._hip.hipMemcpyKind
                                   .hipMemcpyDeviceToDevice), 'hipMemcpy D2D')
        return new

    # -- kernels ---------------------------------------------------------
    def compile(self, src, meta):
        from gimmik.base import MatMul
        from gimmik.emulate import check_source
        # the launch checks the buffers against meta: meta must be src's
        check_source(src, meta)
        hip = self._hip
        kname = meta.get('kname', 'gimmik_mm')
        code = build(src, meta, self.arch)
        module = _check(hip.hipModuleLoadData(code), 'hipModuleLoadData')
        self._modules.append(module)
        fn = _check(hip.hipModuleGetFunction(module, kname.encode()),
                    'hipModuleGetFunction')
        self._attrs[src] = self._feedback(fn)
        m, k, dtype = meta['m'], meta['k'], np.dtype(meta['dtype'])

        def launch(b, c, n, ldb, ldc):
            _check_buffers(b, c, dtype, m, k, n, ldb, ldc)
            vals = {'n': ctypes.c_int(n), 'ldb': ctypes.c_int(ldb),
                    'ldc': ctypes.c_int(ldc), 'b': b.ptr, 'c': c.ptr}
            if meta.get('n') is not None and \
                    (n, ldb, ldc) != (meta['n'], meta['ldb'], meta['ldc']):
                raise ValueError('the kernel was baked for other n, ldb, '
                                 'ldc')
            grid, block = MatMul.launch_config(meta, n)
            _check(hip.hipModuleLaunchKernel(
                fn, *grid, *block, sharedMemBytes=0, stream=None,
                kernelParams=None,
                extra=tuple(vals[a] for a in meta['args'])),
                'hipModuleLaunchKernel')
        return launch

    def _feedback(self, fn):
        hip = self._hip
        attr = hip.hipFunction_attribute
        out = {}
        for key, a in (('registers', 'HIP_FUNC_ATTRIBUTE_NUM_REGS'),
                       ('local_mem', 'HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES'),
                       ('shared_mem', 'HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES')):
            try:
                err, v = hip.hipFuncGetAttribute(getattr(attr, a), fn)
                if int(err) == 0:
                    out[key] = int(v)
            except Exception:
                continue
        return out

    def launch_feedback(self, src, meta):
        return dict(self._attrs.get(src, {}))

    vendor_name = 'hipblas-nn'

    def vendor_gemm(self, A, alpha, beta, dtype):
        return self._hipblas_gemm(A, alpha, beta, dtype, 'nn')

    def vendor_formulations(self, A, alpha, beta, dtype, n=None, ldb=None,
                            ldc=None):
        """hipBLAS ?gemm for both ways of storing A (gimmik.runtime.blas).
        Missing hipBLAS bindings raise RuntimeUnavailable (no baseline at
        all); a formulation that fails to set up is listed failing."""
        _load_hipblas()
        forms = []
        for f in blas.FORMS:
            try:
                launch = self._hipblas_gemm(A, alpha, beta, dtype, f)
            except RuntimeUnavailable:
                raise
            except Exception as e:
                launch = failed_launch(e)
            forms.append((f'hipblas-{f}', launch))
        return forms

    def _hipblas_gemm(self, A, alpha, beta, dtype, form):
        """hipBLAS ?gemm, C^T = B^T A^T column-major, A stored as `form`
        (gimmik.runtime.blas)."""
        hipblas = _load_hipblas()
        dtype = np.dtype(dtype)
        if self._blas is None:
            self._blas = _check(hipblas.hipblasCreate(), 'hipblasCreate')
        m, k = np.shape(A)
        abuf = self.upload(blas.stored_a(A, alpha, dtype, form))
        if dtype == np.float64:
            gemm, scalar = hipblas.hipblasDgemm, ctypes.c_double
        else:
            gemm, scalar = hipblas.hipblasSgemm, ctypes.c_float
        one, bet = scalar(1.0), scalar(beta)
        ops = {'N': hipblas.hipblasOperation_t.HIPBLAS_OP_N,
               'T': hipblas.hipblasOperation_t.HIPBLAS_OP_T}
        handle = self._blas

        def launch(b, c, n, ldb, ldc):
            _check_buffers(b, c, dtype, m, k, n, ldb, ldc)
            g = blas.colmajor_gemm(form, m, k, n, ldb, ldc)
            _check(gemm(handle, ops[g.transa], ops[g.transb], g.M, g.N, g.K,
                        ctypes.addressof(one), b.ptr, g.ldx, abuf.ptr, g.ldy,
                        ctypes.addressof(bet), c.ptr, g.ldc), 'hipblas gemm')
        launch.keep = (abuf, one, bet)
        return launch

    # -- timing ----------------------------------------------------------
    def time(self, launch, args, *, warmup=2, repeats=10):
        hip = self._hip
        for _ in range(warmup):
            launch(*args)
        start = _check(hip.hipEventCreate(), 'hipEventCreate')
        stop = _check(hip.hipEventCreate(), 'hipEventCreate')
        try:
            times = []
            for _ in range(repeats):
                _check(hip.hipEventRecord(start, None), 'hipEventRecord')
                launch(*args)
                _check(hip.hipEventRecord(stop, None), 'hipEventRecord')
                _check(hip.hipEventSynchronize(stop), 'hipEventSynchronize')
                ms = _check(hip.hipEventElapsedTime(start, stop),
                            'hipEventElapsedTime')
                times.append(float(ms)*1e-3)
        finally:
            hip.hipEventDestroy(start)
            hip.hipEventDestroy(stop)
        return statistics.median(times)

    def copy_bandwidth(self, nbytes):
        """Bytes read plus written per second by a device-to-device copy."""
        hip = self._hip
        n = max(1, int(nbytes) // 8)
        src = DeviceArray(hip, (n,), np.float64)
        dst = DeviceArray(hip, (n,), np.float64)
        kind = hip.hipMemcpyKind.hipMemcpyDeviceToDevice

        def copy():
            _check(hip.hipMemcpyAsync(dst.ptr, src.ptr, src.nbytes, kind,
                                      None), 'hipMemcpyAsync')
        t = self.time(copy, (), warmup=1, repeats=5)
        return 2*src.nbytes / t


def _check_buffers(b, c, dtype, m, k, n, ldb, ldc):
    for name, x, rows, ld in (('b', b, k, ldb), ('c', c, m, ldc)):
        if not isinstance(x, DeviceArray):
            raise TypeError(f'{name} must be a buffer from upload(), not '
                            f'{type(x).__name__}')
        if x.dtype != dtype or x.shape != (rows, ld):
            raise ValueError(f'{name} must be a {rows} x {ld} {dtype} '
                             f'buffer, not {x.shape} {x.dtype}')
    if not 1 <= n <= min(ldb, ldc):
        raise ValueError(f'n ({n}) must be between 1 and min(ldb, ldc)')
