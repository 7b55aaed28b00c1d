"""The ``c`` runtime: CMatMul's C source built by the system C compiler, loaded
with ctypes and run on NumPy buffers; NumPy's BLAS is the baseline.  Options:
``cc``, ``march``, ``cflags`` (and ``GIMMIK_CFLAGS``); builds are cached by
source, compiler identity, flags and, for ``native``, the CPU."""

import concurrent.futures as cf
import ctypes
import hashlib
import os
import platform as _platform
import resource
import shlex
import shutil
import statistics
import subprocess
import tempfile
import threading
import time

import numpy as np

from gimmik import cache
from gimmik.runtime import Runtime as _Runtime, RuntimeUnavailable
from gimmik.util import tool_identity
from gimmik.validate import check_kname

# -std=c11 alone turns off FMA contraction (ISO mode); -ffp-contract=fast
# lets the multiply-adds of every kernel become FMAs again.
BASE_CFLAGS = ['-O3', '-std=c11', '-ffp-contract=fast', '-fopenmp',
               '-shared', '-fPIC']
_MARCH_OK = set('abcdefghijklmnopqrstuvwxyz0123456789-_.')

_lock = threading.Lock()
_loaded = {}   # hash of source, compiler and flags -> ctypes.CDLL

# A timing measured the scheduler, not the kernel (a saturated CPU: every
# launch waits out other processes' time slices) when more than half of its
# launches were preempted and the process's threads waited for a CPU at least
# STARVED_WAIT of the time the launches took (or, where the kernel does not say
# how long they waited, got less than 1 - STARVED_WAIT of a CPU)
STARVED_WAIT = 0.5


def _preemptions():
    """Involuntary context switches of the process's threads so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw


def _run_queue_wait():
    """Seconds the process's threads have waited on a run queue so far, or
    None where /proc/self/task/TID/schedstat does not say."""
    try:
        tids = os.listdir('/proc/self/task')
    except OSError:
        return None
    wait = 0
    for tid in tids:
        try:
            with open(f'/proc/self/task/{tid}/schedstat') as f:
                wait += int(f.read().split()[1])
        except FileNotFoundError:   # a thread that has just ended
            continue
        except (OSError, ValueError, IndexError):
            return None
    return wait / 1e9


def _cpuinfo(field):
    """The value of the first `field` line of /proc/cpuinfo, or None."""
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.split(':', 1)[0].strip() == field:
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return None


def _cpu_name():
    return (_cpuinfo('model name') or _platform.processor()
            or _platform.machine() or 'unknown CPU')


def native_cpu():
    """What -march=native resolves from: this CPU's model and its feature
    flags (x86 'flags', Arm 'Features'), sorted."""
    feats = _cpuinfo('flags') or _cpuinfo('Features') or ''
    return f'{_cpu_name()} [{" ".join(sorted(feats.split()))}]'


def llc_bytes():
    """Size of the largest CPU cache in bytes (0 when unknown)."""
    best = 0
    base = '/sys/devices/system/cpu/cpu0/cache'
    try:
        entries = os.listdir(base)
    except OSError:
        return 0
    for e in entries:
        try:
            with open(os.path.join(base, e, 'size')) as f:
                s = f.read().strip()
        except OSError:
            continue
        mult = {'K': 1024, 'M': 1024**2, 'G': 1024**3}.get(s[-1:], 1)
        try:
            best = max(best, int(s.rstrip('KMG'))*mult)
        except ValueError:
            continue
    return best


class Runtime(_Runtime):
    name = 'c'

    def __init__(self, cc=None, march='native', cflags=None):
        cc = cc or os.environ.get('CC') or 'cc'
        if not isinstance(cc, str):
            raise TypeError(f'cc must be a str, not {type(cc).__name__}')
        try:
            argv = shlex.split(cc)
        except ValueError as e:
            raise ValueError(f'the C compiler command {cc!r}: {e}') from e
        if not argv or shutil.which(argv[0]) is None:
            raise RuntimeUnavailable(f'no C compiler: {cc!r} is not on PATH '
                                     f'(set CC or pass cc=)')
        if march is not None and (not isinstance(march, str) or not march
                                  or not set(march) <= _MARCH_OK):
            raise ValueError(f'march must be a CPU name such as native, '
                             f'not {march!r}')
        if cflags is None:
            cflags = []
        if isinstance(cflags, str) or not all(isinstance(f, str)
                                              for f in cflags):
            raise TypeError('cflags must be a list of str')
        self.cc = cc
        self.cc_argv = argv
        self.flags = (BASE_CFLAGS
                      + ([f'-march={march}'] if march else [])
                      + list(cflags)
                      + shlex.split(os.environ.get('GIMMIK_CFLAGS', '')))
        self.march = march
        threads = os.environ.get('OMP_NUM_THREADS') or os.cpu_count()
        self._device = (f'{_cpu_name()}, {threads} threads'
                        + (f', -march={march}' if march else ''))

    # -- description -----------------------------------------------------
    @property
    def device(self):
        return self._device

    def kernel_options(self):
        return {}

    def build_identity(self):
        """The compiler's identity, the flags and, when a flag asks for
        the native CPU, that CPU: what the built code depends on."""
        ident = self.__dict__.get('_identity')
        if ident is None:
            parts = [tool_identity(tuple(self.cc_argv)), *self.cc_argv,
                     *self.flags]
            if any('native' in f for f in self.flags):
                parts.append(native_cpu())
            ident = self._identity = '\0'.join(parts)
        return ident

    def cache_bytes(self):
        return llc_bytes()

    def matmul(self, A, beta, **sizes):
        from gimmik.c import CMatMul
        return CMatMul(A, beta=beta, **sizes)

    # -- buffers ---------------------------------------------------------
    def upload(self, host):
        return np.array(host, order='C', copy=True)

    def download(self, buf, out):
        np.copyto(out, buf)

    def clone(self, buf):
        return np.array(buf, order='C', copy=True)

    # -- building and launching ------------------------------------------
    def build(self, src, kname='gimmik_mm'):
        """Compile C source to a shared library (cached on disk by a hash of
        the source, compiler and flags); returns the loaded ctypes.CDLL."""
        check_kname(kname)
        key = self._key(src)
        with _lock:
            if key in _loaded:
                return _loaded[key]
            sopath = cache.find_build('c', key) or self._compile_to(src, key)
            lib = ctypes.CDLL(sopath)
            _loaded[key] = lib
            return lib

    def _compile_to(self, src, key):
        """Build src into the cache under key; returns the library's path."""
        with tempfile.TemporaryDirectory() as tmp:
            cpath = os.path.join(tmp, 'kernel.c')
            with open(cpath, 'w') as f:
                f.write(src)
            out = os.path.join(tmp, 'kernel.so')
            try:
                r = subprocess.run([*self.cc_argv, *self.flags, cpath, '-o',
                                    out],
                                   capture_output=True, text=True)
            except OSError as e:
                raise RuntimeUnavailable(f'cannot run the C compiler '
                                         f'{self.cc!r}: {e}') from e
            if r.returncode:
                raise RuntimeError(f'the C compiler ({self.cc}) rejected the '
                                   f'kernel:\n{r.stderr[-4000:]}')
            return cache.store_build('c', key, out)

    def prepare(self, kernels):
        """Compile the sources not yet in the cache, os.cpu_count() at a
        time (compiling dominates tuning on the CPU)."""
        todo = {}
        for src, meta in kernels:
            key = self._key(src)
            if key not in _loaded and not cache.find_build('c', key):
                todo[key] = src
        if len(todo) < 2:
            return
        workers = min(len(todo), os.cpu_count() or 1)
        with cf.ThreadPoolExecutor(workers) as pool:
            futures = [pool.submit(self._compile_to, src, key)
                       for key, src in todo.items()]
            for f in futures:
                try:
                    f.result()
                except Exception:   # compile() reports it with the log
                    pass

    def _key(self, src):
        return hashlib.sha256('\0'.join([src, self.build_identity()])
                              .encode()).hexdigest()[:24]

    def compile(self, src, meta):
        from gimmik.emulate import check_source
        # the launch checks the buffers against meta: meta must be src's
        check_source(src, meta)
        kname = meta.get('kname', 'gimmik_mm')
        lib = self.build(src, kname)
        fn = getattr(lib, kname)
        fn.restype = None
        dtype = np.dtype(meta['dtype'])
        baked = meta.get('n') is not None
        if baked:
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        else:
            fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                           ctypes.c_void_p, ctypes.c_int]
        m, k = meta['m'], meta['k']

        def launch(b, c, n, ldb, ldc):
            _check_buffers(b, c, dtype, m, k, n, ldb, ldc)
            if baked:
                if (n, ldb, ldc) != (meta['n'], meta['ldb'], meta['ldc']):
                    raise ValueError(
                        f'kernel baked for n, ldb, ldc = {meta["n"]}, '
                        f'{meta["ldb"]}, {meta["ldc"]}; called with '
                        f'{n}, {ldb}, {ldc}')
                fn(b.ctypes.data, c.ctypes.data)
            else:
                fn(n, b.ctypes.data, ldb, c.ctypes.data, ldc)
        return launch

    vendor_name = 'numpy-gemm'

    def vendor_gemm(self, A, alpha, beta, dtype):
        """NumPy's BLAS: one ?gemm with beta through SciPy's BLAS wrappers
        when the panels are contiguous, otherwise NumPy's matmul into the
        strided output followed by the beta update."""
        dtype = np.dtype(dtype)
        Ad = np.ascontiguousarray(alpha*np.asarray(A, np.float64), dtype)
        m, k = Ad.shape
        gemm = _scipy_gemm(dtype)
        tmp = {}

        def launch(b, c, n, ldb, ldc):
            _check_buffers(b, c, dtype, m, k, n, ldb, ldc)
            bv, cv = b[:, :n], c[:, :n]
            if gemm is not None and ldb == n and ldc == n and beta != 0:
                # row-major C = AB + beta C is column-major C' = B'A' + beta C'
                gemm(1.0, bv.T, Ad.T, beta=beta, c=cv.T, overwrite_c=True)
            elif beta == 0:
                np.matmul(Ad, bv, out=cv)
            else:
                t = tmp.get(n)
                if t is None:
                    t = tmp[n] = np.empty((m, n), dtype)
                np.matmul(Ad, bv, out=t)
                cv *= beta
                cv += t
        return launch

    # -- timing ----------------------------------------------------------
    def time(self, launch, args, *, warmup=2, repeats=10):
        """Median wall time of launch(*args); whether the process was
        starved of CPU meanwhile is left for starved()."""
        for _ in range(warmup):
            launch(*args)
        times, preempted = [], 0
        switches = _preemptions
        w0, cpu0 = _run_queue_wait(), time.process_time()
        for _ in range(repeats):
            before = switches()
            t0 = time.perf_counter()
            launch(*args)
            times.append(time.perf_counter() - t0)
            preempted += switches() > before
        w1, cpu1 = _run_queue_wait(), time.process_time()
        self._starved = _starvation(
            times, preempted, None if None in (w0, w1) else w1 - w0,
            cpu1 - cpu0)
        return statistics.median(times)

    def starved(self):
        return self.__dict__.get('_starved')

    def copy_bandwidth(self, nbytes):
        """Bytes read plus bytes written per second by a copy of nbytes
        (the convention moved_bytes uses), with the same compiler, flags and
        OpenMP threads as the kernels, so that the ratio to it is fair."""
        n = max(1, int(nbytes) // 8)
        src = np.ones((1, n))
        dst = np.empty_like(src)
        fn = self.build(COPY_SRC, 'gimmik_copy').gimmik_copy
        fn.restype = None
        fn.argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        t = self.time(fn, (n, src.ctypes.data, dst.ctypes.data), warmup=1,
                      repeats=5)
        return 2*src.nbytes / t


def _starvation(times, preempted, wait, cpu):
    """Why launches of these wall times, `preempted` of them preempted,
    their threads having waited `wait` seconds for a CPU (None: unknown)
    and used `cpu` seconds of it, timed the scheduler; or None."""
    wall = sum(times)
    if 2*preempted <= len(times) or wall <= 0:
        return None
    if wait is not None:
        if wait < STARVED_WAIT*wall:
            return None
        how = f'its threads waited for a CPU {wait/wall:.0%} of the time'
    else:
        if cpu >= (1 - STARVED_WAIT)*wall:
            return None
        how = f'it got {cpu/wall:.0%} of a CPU'
    return (f'{preempted} of {len(times)} launches preempted, {how} '
            f'(median {statistics.median(times)*1e3:.3g} ms)')


# The copy that copy_bandwidth times
COPY_SRC = """\
void gimmik_copy(long n, const double* restrict src, double* restrict dst)
{
    #pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++)
        dst[i] = src[i];
}
"""


def _scipy_gemm(dtype):
    try:
        from scipy.linalg import blas
    except ImportError:
        return None
    return blas.dgemm if dtype == np.float64 else blas.sgemm


def _check_buffers(b, c, dtype, m, k, n, ldb, ldc):
    """The buffers must be (rows, ld) C-contiguous arrays of the kernel's
    dtype with n <= ld: nothing else reaches the compiled code."""
    for name, x, rows, ld in (('b', b, k, ldb), ('c', c, m, ldc)):
        if not isinstance(x, np.ndarray):
            raise TypeError(f'{name} must be a NumPy array, not '
                            f'{type(x).__name__}')
        if x.dtype != dtype:
            raise TypeError(f'{name} has dtype {x.dtype}, the kernel is '
                            f'{dtype}')
        if x.ndim != 2 or x.shape[0] != rows or x.shape[1] != ld \
                or not x.flags.c_contiguous:
            raise ValueError(f'{name} must be a C-contiguous {rows} x {ld} '
                             f'array, not {x.shape}')
    if not 1 <= n <= min(ldb, ldc):
        raise ValueError(f'n ({n}) must be between 1 and min(ldb, ldc)')
    if not c.flags.writeable:
        raise ValueError('c is read-only')
