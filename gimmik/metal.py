"""Metal generator for Apple GPUs: f32 (Apple GPUs have no f64), the streaming
families of the OpenCL table in the Metal Shading Language through the shared
GPU templates (kernels/metal/base.mako), n baked; run here by the CPU
executor (gimmik.emulate.run_metal), no Apple GPU being reachable."""

import numpy as np

from gimmik.base import MatMul
from gimmik.opencl import CANDIDATES, GATES, table_gates
from gimmik.targets import METAL


class MetalMatMul(MatMul):
    """C = A*B + beta*C kernels in the Metal Shading Language, f32, n, ldb
    and ldc baked: ``kernels(np.float32, kname='gimmik_mm')`` yields (src,
    meta) with meta['grid'] (threadgroups) and meta['threadgroup']."""

    platform = 'metal'
    target = METAL
    table = CANDIDATES
    gate_names = GATES

    def __init__(self, A, beta=0.0, aligne=None, n=None, ldb=None,
                 ldc=None):
        super().__init__(A, beta=beta, aligne=aligne, n=n, ldb=ldb, ldc=ldc)
        if self.n is None:
            raise ValueError('MetalMatMul needs n, ldb and ldc: its kernels '
                             'take only the buffers B and C')

    def _check_opts(self):
        return {}

    def _candidates(self, dtype):
        if dtype != np.float32:
            raise ValueError(f'MetalMatMul generates float32 kernels only '
                             f'(Apple GPUs have no float64), not '
                             f'{np.dtype(dtype).name}')
        return self._from_table(self.table, table_gates(self), dtype)

    def render(self, cand, dtype, kname='gimmik_mm'):
        src, meta = super().render(cand, dtype, kname)
        meta['threadgroup'] = meta['block']
        meta['threadgroup_mem_size'] = meta['shared']
        return src, meta
