"""The ``opencl`` runtime: OpenCLMatMul's kernels on an OpenCL device through
pyopencl (the extra `gimmik[opencl]`; PoCL's CPU device where no GPU has a
driver); the baseline is CLBlast through pyclblast, else NumPy on the host
('numpy-host')."""

import statistics
import time as _time

import numpy as np

from gimmik.emulate import check_source, client_grid, panel_sizes
from gimmik.errors import MissingExtra, RuntimeUnavailable
from gimmik.runtime import Runtime as _Runtime, blas, failed_launch
from gimmik.validate import check_kname


def load_opencl():
    """The pyopencl module, or MissingExtra naming the extra."""
    try:
        import pyopencl
    except ImportError as e:
        raise MissingExtra('pyopencl', 'opencl', 'the OpenCL runtime',
                           str(e)) from e
    return pyopencl


def load_clblast():
    """pyclblast (CLBlast's Python bindings), or RuntimeUnavailable."""
    try:
        import pyclblast
    except ImportError as e:
        raise RuntimeUnavailable(f'no CLBlast: pyclblast is not importable '
                                 f'({e})') from e
    return pyclblast


_contexts = {}


def device_context(fp64=True):
    """(context, queue) of the first OpenCL device (with cl_khr_fp64 where
    fp64), one per process; RuntimeUnavailable where there is none."""
    cl = load_opencl()
    key = bool(fp64)
    if key not in _contexts:
        try:
            devs = [d for p in cl.get_platforms() for d in p.get_devices()]
        except cl.Error as e:
            raise RuntimeUnavailable(f'no OpenCL platform: {e}') from e
        if fp64:
            devs = [d for d in devs if d.double_fp_config]
        if not devs:
            raise RuntimeUnavailable('no OpenCL device'
                                     + (' with fp64' if fp64 else ''))
        ctx = cl.Context([devs[0]])
        _contexts[key] = ctx, cl.CommandQueue(ctx)
    return _contexts[key]


def run_opencl(src, meta, b, c, *, grid=None):
    """Run a generated OpenCL kernel on the first OpenCL device, updating c (m
    x n) in place from b (k x n)."""
    from gimmik.opencl import OpenCLMatMul
    cl = load_opencl()
    check_source(src, meta)
    n, ldb, ldc = panel_sizes(meta, b, c)
    ctx, queue = device_context(np.dtype(meta['dtype']) == np.float64)
    try:
        prg = cl.Program(ctx, src).build()
    except cl.RuntimeError as e:
        raise RuntimeError(f'the OpenCL compiler rejected the kernel: '
                           f'{e}') from e
    kern = getattr(prg, meta['kname'])
    mf = cl.mem_flags
    # whole rows (stride ld) from the first element of each panel
    bbuf = np.lib.stride_tricks.as_strided(b, (b.shape[0], ldb), b.strides)
    cbuf = np.lib.stride_tricks.as_strided(c, (c.shape[0], ldc), c.strides)
    span_b = (b.shape[0] - 1)*ldb + n
    span_c = (c.shape[0] - 1)*ldc + n
    flat_b = np.ascontiguousarray(bbuf).ravel()[:span_b]
    flat_c = np.ascontiguousarray(cbuf).ravel()[:span_c].copy()
    db = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=flat_b)
    dc = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=flat_c)
    vals = {'n': np.int32(n), 'ldb': np.int32(ldb), 'ldc': np.int32(ldc),
            'b': db, 'c': dc}
    sizes = OpenCLMatMul.work_sizes(meta, n)
    if grid is not None:
        grid = client_grid(grid)
        sizes['global_work_size'] = tuple(
            g*w for g, w in zip(grid, sizes['local_work_size']))
    kern(queue, sizes['global_work_size'], sizes['local_work_size'],
         *[vals[a] for a in meta['args']])
    cl.enqueue_copy(queue, flat_c, dc)
    queue.finish()
    # whole rows back (but the last's tail past n): a kernel that wrote
    # past n shows in the padding
    m = c.shape[0]
    for i in range(m):
        stop = ldc if i + 1 < m else n
        cbuf[i, :stop] = flat_c[i*ldc:i*ldc + stop]


def _devices(cl):
    """Every OpenCL device, platform by platform."""
    try:
        return [d for p in cl.get_platforms() for d in p.get_devices()]
    except cl.Error as e:
        raise RuntimeUnavailable(f'no OpenCL platform: {e}') from e


class Runtime(_Runtime):
    """An OpenCL device: `device` is an index into every device of every
    platform (platform order), default the first GPU, else the first device."""

    name = 'opencl'

    def __init__(self, device=None, options=None):
        cl = load_opencl()
        devs = _devices(cl)
        if not devs:
            raise RuntimeUnavailable('no OpenCL device')
        if device is None:
            gpus = [i for i, d in enumerate(devs)
                    if d.type & cl.device_type.GPU]
            device = gpus[0] if gpus else 0
        if isinstance(device, bool) or not isinstance(device, int) \
                or not 0 <= device < len(devs):
            raise ValueError(f'device must be an index below {len(devs)}, '
                             f'not {device!r}')
        if options is None:
            options = []
        if isinstance(options, str) or not all(
                isinstance(o, str) and o.startswith('-') for o in options):
            raise TypeError('options must be a list of OpenCL compiler '
                            'options (str, each starting with -)')
        self._cl = cl
        self.dev = devs[device]
        self.options = list(options)
        self.ctx = cl.Context([self.dev])
        self.queue = cl.CommandQueue(
            self.ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
        plat = self.dev.platform
        self._device = (f'{self.dev.name.strip()} ({plat.name.strip()}, '
                        f'OpenCL)')
        self._ident = ', '.join([plat.name, plat.version, self.dev.name,
                                 self.dev.driver_version, *self.options])
        self._programs = {}
        self._events = None       # time(): the events a launch enqueued

    # -- description -----------------------------------------------------
    @property
    def device(self):
        return self._device

    def kernel_options(self):
        return {'local_mem_size': int(self.dev.local_mem_size)}

    def build_identity(self):
        return self._ident

    def cache_bytes(self):
        return int(self.dev.global_mem_cache_size or 0)

    def matmul(self, A, beta, **sizes):
        from gimmik.opencl import OpenCLMatMul
        return OpenCLMatMul(A, beta=beta, **sizes)

    # -- buffers: pyopencl arrays (what pyclblast takes) ---------------------
    def upload(self, host):
        from pyopencl import array as cla
        return cla.to_device(self.queue, np.ascontiguousarray(host))

    def download(self, buf, out):
        if out.shape != buf.shape or out.dtype != buf.dtype \
                or not out.flags.c_contiguous:
            raise ValueError(f'out must be a C-contiguous {buf.shape} array '
                             f'of {buf.dtype}')
        buf.get(self.queue, ary=out)

    def clone(self, buf):
        return buf.copy(self.queue)

    def _record(self, evt):
        if self._events is not None:
            self._events.append(evt)
        return evt

    # -- kernels ---------------------------------------------------------
    def _program(self, src):
        prg = self._programs.get(src)
        if prg is None:
            cl = self._cl
            try:
                prg = cl.Program(self.ctx, src).build(options=self.options)
            except cl.RuntimeError as e:
                raise RuntimeError(f'the OpenCL compiler rejected the '
                                   f'kernel: {e}') from e
            self._programs[src] = prg
        return prg

    def compile(self, src, meta):
        from gimmik.opencl import OpenCLMatMul
        # the launch checks the buffers against meta: meta must be src's
        check_source(src, meta)
        cl = self._cl
        dtype = np.dtype(meta['dtype'])
        if dtype == np.float64 and not self.dev.double_fp_config:
            raise RuntimeUnavailable(f'{self.device} has no float64 '
                                     f'(cl_khr_fp64)')
        kname = check_kname(meta.get('kname', 'gimmik_mm'))
        kern = getattr(self._program(src), kname)
        m, k = meta['m'], meta['k']
        ints = {'n', 'ldb', 'ldc'}

        def launch(b, c, n, ldb, ldc):
            _check_buffers(cl, b, c, dtype, m, k, n, ldb, ldc)
            if meta.get('n') is not None and \
                    (n, ldb, ldc) != (meta['n'], meta['ldb'], meta['ldc']):
                raise ValueError('the kernel was baked for other n, ldb, '
                                 'ldc')
            vals = {'n': n, 'ldb': ldb, 'ldc': ldc, 'b': b.data,
                    'c': c.data}
            kern.set_args(*[np.int32(vals[a]) if a in ints else vals[a]
                            for a in meta['args']])
            sizes = OpenCLMatMul.work_sizes(meta, n)
            self._record(cl.enqueue_nd_range_kernel(
                self.queue, kern, sizes['global_work_size'],
                sizes['local_work_size']))
        return launch

    # -- the baseline ----------------------------------------------------
    vendor_name = 'numpy-host'

    def vendor_gemm(self, A, alpha, beta, dtype):
        return self._numpy_gemm(A, alpha, beta, dtype)

    def vendor_formulations(self, A, alpha, beta, dtype, n=None, ldb=None,
                            ldc=None):
        """CLBlast's ?gemm for both storages of A where pyclblast imports
        (a formulation that fails to set up listed failing), else NumPy on
        the host ('numpy-host')."""
        try:
            clblast = load_clblast()
        except RuntimeUnavailable:
            return [('numpy-host', self._numpy_gemm(A, alpha, beta, dtype))]
        forms = []
        for f in blas.FORMS:
            try:
                launch = self._clblast_gemm(clblast, A, alpha, beta, dtype, f)
            except Exception as e:
                launch = failed_launch(e)
            forms.append((f'clblast-{f}', launch))
        return forms

    def _clblast_gemm(self, clblast, A, alpha, beta, dtype, form):
        """CLBlast ?gemm on the row-major panels, A stored as `form`
        (gimmik.runtime.blas): C = op(A) B + beta C."""
        cl = self._cl
        dtype = np.dtype(dtype)
        m, k = np.shape(A)
        a = self.upload(blas.stored_a(A, alpha, dtype, form))
        lda, transp = (k, False) if form == 'nn' else (m, True)

        def launch(b, c, n, ldb, ldc):
            _check_buffers(cl, b, c, dtype, m, k, n, ldb, ldc)
            self._record(clblast.gemm(
                self.queue, m, n, k, a, b, c, a_ld=lda, b_ld=ldb, c_ld=ldc,
                alpha=1.0, beta=beta, a_transp=transp))
        launch.keep = a
        return launch

    def _numpy_gemm(self, A, alpha, beta, dtype):
        """NumPy's matmul on host copies of the panels: the copies are not
        timed, the product is (a host interval in place of an event)."""
        cl = self._cl
        dtype = np.dtype(dtype)
        Ad = np.ascontiguousarray(alpha*np.asarray(A, np.float64), dtype)
        m, k = Ad.shape

        def launch(b, c, n, ldb, ldc):
            _check_buffers(cl, b, c, dtype, m, k, n, ldb, ldc)
            hb, hc = b.get(self.queue), c.get(self.queue)
            t0 = _time.perf_counter_ns()
            prod = Ad @ hb[:, :n]
            if beta:
                prod += beta*hc[:, :n]
            hc[:, :n] = prod
            self._record((t0, _time.perf_counter_ns()))
            c.set(hc, self.queue)
        return launch

    # -- timing ----------------------------------------------------------
    def time(self, launch, args, *, warmup=2, repeats=10):
        """Median over repeats of the span of the events one launch
        enqueued (device clock), or of its host interval."""
        for _ in range(warmup):
            launch(*args)
        self.queue.finish()
        times = []
        for _ in range(repeats):
            self._events = []
            t0 = _time.perf_counter()
            try:
                launch(*args)
                self.queue.finish()
            finally:
                evs, self._events = self._events, None
            times.append(_span(evs) if evs else _time.perf_counter() - t0)
        return statistics.median(times)

    def copy_bandwidth(self, nbytes):
        """Bytes read plus written per second by a device-to-device copy
        of nbytes."""
        cl = self._cl
        size = max(8, int(nbytes) // 8 * 8)
        src = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, size)
        dst = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, size)
        cl.enqueue_fill_buffer(self.queue, src, np.float64(1.0), 0, size)

        def copy():
            self._record(cl.enqueue_copy(self.queue, dst, src))
        return 2*size / self.time(copy, (), warmup=1, repeats=5)


def _span(evs):
    """Seconds from the first event's start to the last one's end (an
    event: a pyopencl Event or a (start, end) host interval in ns)."""
    ivals = [e if isinstance(e, tuple) else (e.profile.start, e.profile.end)
             for e in evs]
    return max(1, max(e for _, e in ivals) - min(s for s, _ in ivals))*1e-9


def _check_buffers(cl, b, c, dtype, m, k, n, ldb, ldc):
    from pyopencl import array as cla
    for name, x, rows, ld in (('b', b, k, ldb), ('c', c, m, ldc)):
        if not isinstance(x, cla.Array):
            raise TypeError(f'{name} must be a buffer from upload(), not '
                            f'{type(x).__name__}')
        if x.dtype != dtype or x.shape != (rows, ld) or x.offset:
            raise ValueError(f'{name} must be a {rows} x {ld} {dtype} '
                             f'buffer, not {x.shape} {x.dtype}')
    if not 1 <= n <= min(ldb, ldc):
        raise ValueError(f'n ({n}) must be between 1 and min(ldb, ldc)')
