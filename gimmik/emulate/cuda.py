"""Run generated CUDA source, unchanged, on the CPU: compiled by the host C++
compiler (C++20) against cuda_shim.h, each block's threads as OS threads."""

import os

from gimmik.emulate import check_source, compile_kernel, launch, panel_sizes

_SHIM = os.path.join(os.path.dirname(__file__), 'cuda_shim.h')
_CXXFLAGS = ['-O1', '-std=c++20', '-pthread', '-shared', '-fPIC', '-w',
             '-Wl,-Bsymbolic', '-fno-strict-aliasing']


def run_cuda(src, meta, b, c, *, kname=None, grid=None):
    """Run a generated CUDA kernel on the CPU, updating c in place; b, c,
    grid and the checks as for gimmik.emulate.run_hip."""
    check_source(src, meta)
    n, ldb, ldc = panel_sizes(meta, b, c)
    if kname is None:
        kname = meta.get('kname', 'gimmik_mm')
    lib = compile_kernel(src, meta, kname, _SHIM, _CXXFLAGS, 'kernel.cu')
    launch(lib, meta, b, c, n, ldb, ldc, grid)
