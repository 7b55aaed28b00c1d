"""Run generated Metal Shading Language source on the CPU."""

import os

from gimmik.emulate import (_CXXFLAGS, check_source, compile_kernel, launch,
                             panel_sizes)

_SHIM = os.path.join(os.path.dirname(__file__), 'metal_shim.h')
_POSITION = ('threadIdx', 'blockIdx', 'blockDim', 'gridDim')


def run_metal(src, meta, b, c, *, kname=None, grid=None):
    """Run a generated Metal kernel on the CPU, updating c in place; b, c,
    grid (threadgroups) and the checks as for gimmik.emulate.run_hip."""
    check_source(src, meta)
    n, ldb, ldc = panel_sizes(meta, b, c)
    if kname is None:
        kname = meta.get('kname', 'gimmik_mm')
    lib = compile_kernel(src, meta, kname, _SHIM, _CXXFLAGS, 'kernel.metal',
                         _POSITION)
    launch(lib, meta, b, c, n, ldb, ldc, grid)
