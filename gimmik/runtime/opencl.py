"""OpenCL kernels on a real OpenCL device through pyopencl (the extra
`gimmik[opencl]`; PoCL's CPU device where no GPU has a driver): run_opencl
runs one generated kernel on NumPy panels, as a client launches it."""

import numpy as np

from gimmik.emulate import client_grid, panel_sizes
from gimmik.errors import MissingExtra, RuntimeUnavailable


def load_opencl():
    """The pyopencl module, or MissingExtra naming the extra."""
    try:
        import pyopencl
    except ImportError as e:
        raise MissingExtra("the OpenCL runtime needs pyopencl: pip install "
                           "'gimmik[opencl]'") from e
    return pyopencl


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
    """Run a generated OpenCL kernel on the first OpenCL device, updating
    c (m x n) in place from b (k x n): b and c as for
    gimmik.emulate.run_hip; grid: the work-groups a client launches
    (default the meta's contract)."""
    from gimmik.opencl import OpenCLMatMul
    cl = load_opencl()
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
