"""The `cuda` runtime: CuPy for memory, kernels (NVRTC, or nvcc when it is on
the PATH) and events; the baseline is the fastest of cuBLAS, CuPy's gemm and
cuBLASLt's heuristic algorithms."""

import concurrent.futures as cf
import os
import re
import shutil
import subprocess
import tempfile
import threading

import numpy as np

from gimmik.util import tool_identity
from gimmik.runtime import Runtime as _Runtime, RuntimeUnavailable, \
    blas, failed_launch

# prepare(): candidates are built in nvcc runs of at most this much source,
# this many runs at once, each given this many seconds
BATCH_CHARS = 300_000
JOBS = os.cpu_count() or 4
COMPILE_TIMEOUT = 600

# cuBLASLt: heuristic algorithms timed per storage of A, and the workspace
# they may use
LT_ALGOS = {'nn': 8, 'nt': 4}
LT_WORKSPACE = 32 << 20

try:
    import cupy
    from cupy_backends.cuda.libs import cublas as _cublas
except Exception as e:  # ImportError, or a broken CUDA install
    cupy = None
    _IMPORT_ERROR = e


def prefer_l1(fn_ptr, local_mem, shared_mem):
    """As PyFR's CUDA backend does (3.1 and main): a kernel that spills
    (local_mem bytes) and has no static shared memory prefers the largest
    L1 (shared carveout 0), so its spills are timed as PyFR runs them.
    Whether it did."""
    if not local_mem or shared_mem:
        return False
    from cupy_backends.cuda.api import driver
    driver.funcSetAttribute(
        fn_ptr, driver.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 0)
    return True


class Runtime(_Runtime):
    name = 'cuda'
    prepare_ahead = True    # nvcc runs on the host while the GPU times
    # prefer_l1 on every kernel loaded (False: the driver's own carveout)
    spill_l1 = True

    def __init__(self, device=0, compiler='auto', cublaslt=True):
        if cupy is None:
            raise RuntimeUnavailable(
                f'cupy is not importable: {_IMPORT_ERROR}')
        try:
            ndev = cupy.cuda.runtime.getDeviceCount()
        except Exception as e:
            raise RuntimeUnavailable(f'no CUDA device: {e}') from e
        if isinstance(device, bool) or not isinstance(device, int) \
                or not 0 <= device < ndev:
            raise ValueError(f'device must be an index below {ndev}, '
                             f'not {device!r}')
        if compiler not in ('auto', 'nvcc', 'nvrtc'):
            raise ValueError(f'compiler must be auto, nvcc or nvrtc, not '
                             f'{compiler!r}')
        self._dev = cupy.cuda.Device(device)
        self._dev.use()
        props = cupy.cuda.runtime.getDeviceProperties(device)
        self._name = props['name'].decode()
        self.cc = (int(props['major']), int(props['minor']))
        self.sms = int(props['multiProcessorCount'])
        nvcc = shutil.which('nvcc')
        self.compiler = ('nvcc' if nvcc and compiler != 'nvrtc' else 'nvrtc')
        self._init_state(cublaslt)

    def _init_state(self, cublaslt=True):
        """The runtime's own state, apart from the device."""
        self._cubin_dir, self._ncubin = None, 0
        self._lt = None       # the cuBLASLt handle, made on first use
        self._prepared = {}   # src -> (_Batch, kernel name in the batch)
        self._prep_lock = threading.Lock()
        self._pool, self._nbatch = None, 0
        self.cublaslt = bool(cublaslt)   # offer cuBLASLt formulations

    # -- description -----------------------------------------------------
    @property
    def device(self):
        return f'{self._name} (sm_{self.cc[0]}{self.cc[1]})'

    def matmul(self, A, beta, **sizes):
        from gimmik.cuda import CUDAMatMul
        return CUDAMatMul(A, beta=beta, **sizes)

    def kernel_options(self):
        return {'compute_capability': self.cc}

    def build_identity(self):
        if self.compiler == 'nvcc':
            return tool_identity(('nvcc',))
        try:
            return 'nvrtc ' + '.'.join(map(str, cupy.cuda.nvrtc.getVersion()))
        except Exception:
            return 'nvrtc'

    # -- memory ----------------------------------------------------------
    def upload(self, host):
        return cupy.asarray(np.ascontiguousarray(host))

    def download(self, buf, out):
        out[...] = cupy.asnumpy(buf)

    # -- checking on the device -----------------------------------------
    def clone(self, buf):
        return buf.copy()

    def same(self, buf, other):
        return bool(cupy.array_equal(buf, other))

    def reference(self, values, scale):
        return (cupy.asarray(values), cupy.asarray(scale))

    def compare(self, buf, ref, start, n):
        values, scale = ref
        x = buf[:, :n].astype(np.float64)
        r = values[:, :n].astype(np.float64)
        if bool(cupy.isfinite(x).all()) and bool(cupy.isfinite(r).all()):
            diff = cupy.abs(x - r)
            err = float(cupy.where(diff == 0, 0.0, diff / scale).max()) \
                if diff.size else 0.0
        else:
            err = float('inf')
        return err, bool(cupy.array_equal(buf[:, n:], start[:, n:]))

    # -- kernels ---------------------------------------------------------
    def arch(self, meta=None):
        cc = (meta or {}).get('compute_capability') or self.cc
        return f'sm_{cc[0]}{cc[1]}'

    def build(self, src, meta, timeout=None):
        """Compile a source to a cubin (bytes) with nvcc; safe to call from
        several threads at once.  Returns None when nvcc is not in use (the
        source is then compiled by NVRTC in load())."""
        if self.compiler != 'nvcc':
            return None
        with tempfile.TemporaryDirectory(prefix='gimmik-cuda-') as tmp:
            cu, cubin = os.path.join(tmp, 'k.cu'), os.path.join(tmp, 'k.cubin')
            with open(cu, 'w') as f:
                f.write(src)
            cmd = ['nvcc', '-cubin', f'-arch={self.arch(meta)}', '-O3',
                   '-Xptxas', '-v', '-o', cubin, cu]
            p = subprocess.run(cmd, capture_output=True, text=True,
                               timeout=timeout)
            if p.returncode:
                raise RuntimeError(f'nvcc failed on {meta.get("variant")}:'
                                   f'\n{p.stderr[-4000:]}')
            with open(cubin, 'rb') as f:
                return f.read()

    def load(self, src, meta, cubin=None, module=None):
        """A launch function from a cubin from build(), from an already
        loaded module holding the kernel (load_module), or from the source
        through NVRTC when both are None."""
        from gimmik.emulate import check_source
        # the launch trusts meta's sizes: meta must be src's
        check_source(src, meta)
        if module is None and cubin is not None:
            module = self.load_module(cubin)
        elif module is None:
            module = cupy.RawModule(code=src, options=(
                '-std=c++17', f'-arch={self.arch(meta)}'))
        kern = module.get_function(meta['kname'])
        if self.spill_l1:
            a = kern.attributes     # a RawKernel; .kernel its Function
            prefer_l1(kern.kernel.ptr, a.get('local_size_bytes'),
                      a.get('shared_size_bytes'))
        return self._launcher(kern, module, meta)

    def load_module(self, cubin):
        """A module from a cubin; CuPy loads it lazily from the file, which
        therefore lives in a folder kept as long as this runtime."""
        if self._cubin_dir is None:
            self._cubin_dir = tempfile.TemporaryDirectory(
                prefix='gimmik-cubin-')
        self._ncubin += 1
        path = os.path.join(self._cubin_dir.name, f'm{self._ncubin}.cubin')
        with open(path, 'wb') as f:
            f.write(cubin)
        return cupy.RawModule(path=path)

    # -- building ahead: batched parallel nvcc runs ----------------------
    def prepare(self, kernels):
        """Build the (src, meta) pairs in nvcc runs of at most BATCH_CHARS of
        source each, JOBS runs at once in the background; compile() then waits
        for its batch; names get a per-source suffix so a batch links."""
        if self.compiler != 'nvcc':
            return
        with self._prep_lock:
            todo = list({src: (src, meta) for src, meta in kernels
                         if src not in self._prepared}.values())
            if self._pool is None:
                self._pool = cf.ThreadPoolExecutor(JOBS)
            for batch in _batches(todo, BATCH_CHARS):
                self._nbatch += 1
                parts, names = [], []
                for i, (src, meta) in enumerate(batch):
                    kname = meta.get('kname', 'gimmik_mm')
                    new = f'{kname}_b{self._nbatch}_{i}'
                    parts.append(rename_kernel(src, kname, new))
                    names.append(new)
                job = _Batch(self._pool.submit(
                    self.build, '\n'.join(parts), batch[0][1],
                    COMPILE_TIMEOUT))
                for (src, meta), new in zip(batch, names):
                    self._prepared[src] = (job, new)

    def compile(self, src, meta):
        with self._prep_lock:
            job, name = self._prepared.get(src, (None, None))
        if job is not None:
            try:
                module = job.module(self)
                return self.load(src, {**meta, 'kname': name}, module=module)
            except Exception:   # the batch failed: build this one alone
                pass
        return self.load(src, meta, self.build(src, meta))

    def _launcher(self, kern, mod, meta):
        from gimmik.cuda import CUDAMatMul
        baked = meta.get('n') is not None

        def launch(b, c, n, ldb, ldc):
            grid, block = CUDAMatMul.launch_config(meta, n)
            if baked:
                kern(grid, block, (b, c))
            else:
                kern(grid, block, (np.int32(n), b, np.int32(ldb), c,
                                   np.int32(ldc)))
        launch.kernel, launch.module = kern, mod
        return launch

    def launch_feedback(self, src, meta):
        return {}

    def kernel_attributes(self, launch):
        """Registers and local memory of a compiled launch function."""
        a = launch.kernel.attributes
        return {'registers': a.get('num_regs'),
                'local_mem': a.get('local_size_bytes')}

    # -- the vendor baseline --------------------------------------------
    vendor_name = 'cublas-nn'

    def vendor_gemm(self, A, alpha, beta, dtype):
        return self._cublas_gemm(A, alpha, beta, dtype, 'nn')

    def vendor_formulations(self, A, alpha, beta, dtype, n=None, ldb=None,
                            ldc=None):
        """cuBLAS ?gemm for both ways of storing A (gimmik.runtime.blas),
        CuPy's cupy.cublas.gemm on the row-major views, and, when the sizes
        are given, cuBLASLt's heuristic algorithms (LT_ALGOS of them per
        storage of A), each a formulation of its own."""
        dtype = np.dtype(dtype)
        forms = []
        for name, make in ((f'cublas-{f}',
                            lambda f=f: self._cublas_gemm(A, alpha, beta,
                                                          dtype, f))
                           for f in blas.FORMS):
            forms.append((name, _setup(make)))
        forms.append(('cupy-gemm',
                      _setup(lambda: self._cupy_gemm(A, alpha, beta, dtype))))
        if n is not None and self.cublaslt:
            ldb, ldc = ldb or n, ldc or n
            for f, count in LT_ALGOS.items():
                forms += self._cublaslt(A, alpha, beta, dtype, f, count, n,
                                        ldb, ldc)
        return forms

    def _cublas_gemm(self, A, alpha, beta, dtype, form):
        """cuBLAS ?gemm, C^T = B^T A^T column-major, A stored as `form`."""
        dtype = np.dtype(dtype)
        m, k = np.shape(A)
        a = cupy.asarray(blas.stored_a(A, alpha, dtype, form))
        scal = np.array([1.0, beta], dtype=dtype)
        gemm = _cublas.dgemm if dtype == np.float64 else _cublas.sgemm
        handle = cupy.cuda.device.get_cublas_handle()
        ops = {'N': _cublas.CUBLAS_OP_N, 'T': _cublas.CUBLAS_OP_T}

        def launch(b, c, n, ldb, ldc):
            g = blas.colmajor_gemm(form, m, k, n, ldb, ldc)
            _cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)
            _cublas.setPointerMode(handle, _cublas.CUBLAS_POINTER_MODE_HOST)
            gemm(handle, ops[g.transa], ops[g.transb], g.M, g.N, g.K,
                 scal.ctypes.data, b.data.ptr, g.ldx, a.data.ptr, g.ldy,
                 scal.ctypes.data + dtype.itemsize, c.data.ptr, g.ldc)
        launch.keep = (a, scal)
        return launch

    def _cupy_gemm(self, A, alpha, beta, dtype):
        """CuPy's own cupy.cublas.gemm('N', 'N', A, B, C) on the row-major
        views of the panels (CuPy maps them to cuBLAS itself)."""
        from cupy import cublas as cupy_cublas
        dtype = np.dtype(dtype)
        a = cupy.asarray(np.ascontiguousarray(A, dtype=dtype))

        def launch(b, c, n, ldb, ldc):
            cupy_cublas.gemm('N', 'N', a, b[:, :n], c[:, :n], alpha=alpha,
                             beta=beta)
        launch.keep = (a,)
        return launch

    def _cublaslt(self, A, alpha, beta, dtype, form, count, n, ldb, ldc):
        """cuBLASLt matmul with each of up to `count` heuristic algorithms
        for the sizes n, ldb, ldc: [(name, launch)]."""
        base = f'cublaslt-{form}'
        try:
            from gimmik.runtime import cublaslt
            if self._lt is None:
                self._lt = cublaslt.Handle()
            m, k = np.shape(A)
            g = blas.colmajor_gemm(form, m, k, n, ldb, ldc)
            mm = cublaslt.Matmul(self._lt, g, dtype, LT_WORKSPACE)
            algos = mm.heuristics(count)
            if not algos:
                raise RuntimeError('the heuristic offered no algorithm')
        except Exception as e:
            return [(base, failed_launch(e))]
        dtype = np.dtype(dtype)
        a = cupy.asarray(blas.stored_a(A, alpha, dtype, form))
        scal = np.array([1.0, beta], dtype=dtype)
        ws = cupy.empty(max(LT_WORKSPACE, 1), dtype=np.uint8)
        sizes = (n, ldb, ldc)

        def make(algo):
            def launch(b, c, n, ldb, ldc):
                if (n, ldb, ldc) != sizes:
                    raise ValueError(f'cuBLASLt plan made for n, ldb, ldc '
                                     f'= {sizes}, called with '
                                     f'{(n, ldb, ldc)}')
                mm.run(algo, scal.ctypes.data, b.data.ptr, a.data.ptr,
                       scal.ctypes.data + dtype.itemsize, c.data.ptr,
                       ws.data.ptr, cupy.cuda.get_current_stream().ptr)
            launch.keep = (mm, a, scal, ws, algo)
            return launch
        return [(f'{base}/h{i}', make(algo)) for i, algo in enumerate(algos)]

    # -- timing ----------------------------------------------------------
    def time(self, launch, args, *, warmup=2, repeats=10):
        for _ in range(warmup):
            launch(*args)
        evs = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(repeats)]
        for start, stop in evs:
            start.record()
            launch(*args)
            stop.record()
        evs[-1][1].synchronize()
        times = [cupy.cuda.get_elapsed_time(s, e)*1e-3 for s, e in evs]
        return float(np.median(times))

    def copy_bandwidth(self, nbytes=1 << 30):
        half = int(nbytes) // 2 // 8 * 8
        src = cupy.empty(half, dtype=np.uint8)
        src.fill(1)
        dst = cupy.empty_like(src)

        def launch():
            cupy.cuda.runtime.memcpyAsync(
                dst.data.ptr, src.data.ptr, half,
                cupy.cuda.runtime.memcpyDeviceToDevice,
                cupy.cuda.get_current_stream().ptr)
        t = self.time(launch, (), warmup=3, repeats=20)
        return 2*half/t

    def synchronize(self):
        cupy.cuda.get_current_stream().synchronize()


def _setup(make):
    """make() or, when setting it up fails, a launch raising why."""
    try:
        return make()
    except Exception as e:
        return failed_launch(e)


def rename_kernel(src, kname, new):
    """src with every identifier starting with kname (the kernel and its
    file-scope tables) starting with `new` instead."""
    return re.sub(rf'\b{re.escape(kname)}(?=\w*\b)', new, src)


def _batches(items, limit):
    """Consecutive (src, meta) items in groups of at most `limit` characters
    of source (a longer source alone)."""
    batch, size = [], 0
    for src, meta in items:
        if batch and size + len(src) > limit:
            yield batch
            batch, size = [], 0
        batch.append((src, meta))
        size += len(src)
    if batch:
        yield batch


class _Batch:
    """One nvcc run of prepare(): its cubin future and the module loaded
    from it once."""

    def __init__(self, future):
        self.future, self._module, self._lock = future, None, \
            threading.Lock()

    def module(self, runtime):
        with self._lock:
            if self._module is None:
                self._module = runtime.load_module(self.future.result())
                self.future = None        # the cubin is loaded: drop it
            return self._module
