"""OpenCL generator: the streaming families through the shared GPU templates
(kernels/opencl/base.mako spells them in OpenCL C), for any OpenCL device with
the work-group sizes below (GPUs of every vendor, CPUs through PoCL); f64
needs cl_khr_fp64."""

import numbers

from gimmik.base import MatMul, Row, check_table
from gimmik.families.bstream import Bstream
from gimmik.families.bstream_msplit import BstreamMsplit
from gimmik.families.cstream import Cstream
from gimmik.families.cstream_ksplit import CstreamKsplit
from gimmik.families.cstream_mblock import CstreamMblock
from gimmik.targets import OPENCL

# Local memory assumed where the client names none (most GPUs have 32-64
# KiB a work-group)
DEFAULT_LOCAL_MEM = 32*1024

# The candidate table (gimmik.base.Row), offered in this order: on the H200
# the plain streams and the k-splits were the fastest own launches, the row
# splits mostly not, msplit2 two columns wide never (opencl-h200-walk-each.csv)
CANDIDATES = [
    Row(Cstream, dict(width=1)),
    Row(Bstream, dict(width=1)),
    Row(CstreamKsplit, dict(ksplit=2)),
    # rows in passes: a work-item holds one pass's sums (many rows)
    Row(CstreamKsplit, dict(ksplit=2, chunk=32)),
    Row(Cstream, dict(width=2), 'w2'),
    Row(Bstream, dict(width=2), 'w2'),
    Row(BstreamMsplit, dict(width=1, msplit=2, bsz=16),
        'staged'),
    Row(BstreamMsplit, dict(width=1, msplit=4, bsz=16),
        'staged'),
    # (not four parts in passes of 16 rows: the best own launch in 1 of 251
    # timings, by 0.02 %, opencl-h200-walk-{warm,quiet,staged,control}.csv)
    Row(CstreamKsplit, dict(ksplit=2, chunk=16)),
    Row(CstreamKsplit, dict(ksplit=4)),
    Row(CstreamKsplit, dict(ksplit=2, preload_c=True),
        'beta'),
    # many rows: row groups across work-groups, a work-item's registers
    # bounded by its group's rows
    Row(CstreamMblock, dict(width=1, groups=8), 'bigm'),
    Row(CstreamMblock, dict(width=1, groups=16), 'bigm'),
    Row(CstreamMblock, dict(width=1, groups=32), 'bigm'),
]

# Rows of A beyond which the row-group rows are offered (gate 'bigm')
BIG_M = 64
# Rows x used columns of A beyond which the row splits are offered (gate
# 'staged'): at or below, their local-memory stage cost 1.09-1.13x the best
# own launch on the H200 (opencl-h200-walk-each.csv, operators of <= 400)
STAGED_MIN = 400

GATES = ('w2', 'beta', 'bigm', 'staged')

check_table(CANDIDATES, GATES, 'opencl')


def table_gates(mm):
    """The gates of CANDIDATES for a generator of A (OpenCL's, Metal's)."""
    return {'w2': mm.width2_ok(), 'beta': mm.beta != 0,
            'bigm': mm.info.m > BIG_M,
            'staged': mm.info.m*len(mm.info.bix) > STAGED_MIN}


class OpenCLMatMul(MatMul):
    """C = A*B + beta*C kernels in OpenCL C: ``kernels(dtype,
    kname='gimmik_mm', local_mem_size=None)`` yields (src, meta)
    candidates (meta['global_work_size'] and meta['local_work_size'] where
    n is baked) and takes send() feedback."""

    platform = 'opencl'
    target = OPENCL
    table = CANDIDATES
    gate_names = GATES

    def _check_opts(self, local_mem_size=None):
        if local_mem_size is None:
            local_mem_size = DEFAULT_LOCAL_MEM
        if (isinstance(local_mem_size, bool)
                or not isinstance(local_mem_size, numbers.Integral)
                or local_mem_size < 0):
            raise ValueError('local_mem_size must be a non-negative number '
                             f'of bytes, not {local_mem_size!r}')
        return {'local_mem_size': int(local_mem_size)}

    def _candidates(self, dtype, local_mem_size):
        out = self._from_table(self.table, table_gates(self), dtype,
                               {'local_mem_size': local_mem_size})
        return [c for c in out
                if self.kernel(c, dtype).geometry().shared <= local_mem_size]

    def render(self, cand, dtype, kname='gimmik_mm'):
        src, meta = super().render(cand, dtype, kname)
        meta['local_mem_size'] = meta['shared']
        if self.baked_n:
            meta.update(self.work_sizes(meta, self.n))
        return src, meta

    @staticmethod
    def work_sizes(meta, n):
        """{'global_work_size', 'local_work_size'}: work-items of the
        launch of meta's contract for n columns, and a group's."""
        grid, block = MatMul.launch_config(meta, n)
        return {'global_work_size': tuple(g*b for g, b in zip(grid, block)),
                'local_work_size': tuple(block)}
