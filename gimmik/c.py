"""C generator for CPUs: OpenMP over blocks of columns, a vectorisable loop
over the columns of one block; a kernel is called once a panel and walks its
blocks itself."""

import numpy as np

from gimmik.base import MatMul, Row, check_table
from gimmik.families.bstream import Bstream
from gimmik.families.cstream import Cstream
from gimmik.families.cstream_row import CstreamRow
from gimmik.families.rowblock import Rowblock
from gimmik.targets import C

# Largest per-thread scratch a candidate may keep on the stack (bstream's
# accumulators, m rows by `width` columns).
MAX_SCRATCH = 64*1024

# GCC's compile time of the unrolled families grows with the non-zeros of A
# (measured at -O3 on a 2-core machine: cstream 2.3 s at 768 non-zeros, 8.6 s
# at 1800; cstream-row 15 s at 768, 38 s at 1800; bstream 245 s at 768);
# beyond, the looped rowblock compiles in under a second and is as fast
BSTREAM_MAX_NNZ = 256
CSTREAM_ROW_MAX_NNZ = 512
UNROLLED_MAX_NNZ = 1500

# The C candidate table (gimmik.base.Row), in offer order (no rules for C)
CANDIDATES = [
    Row(Rowblock, dict(rows=6, vw=8, width=256)),
    Row(Rowblock, dict(rows=3, vw=16, width=256)),
    Row(Rowblock, dict(rows=2, vw=16, width=64)),
    Row(Rowblock, dict(rows=1, vw=16, width=256)),
    Row(Cstream, dict(width=64), 'unrolled'),
    Row(Cstream, dict(width=512), 'unrolled'),
    Row(CstreamRow, dict(width=512), 'row'),
    Row(Bstream, dict(width=64), 'small'),
    Row(Bstream, dict(width=16), 'small'),
]

GATES = ('small', 'row', 'unrolled')

check_table(CANDIDATES, GATES, 'c')


class CMatMul(MatMul):
    """C = A*B + beta*C kernels in C99 with OpenMP, same API as HIPMatMul:
    ``kernels(dtype, kname='gimmik_mm')`` yields (src, meta) candidates and
    takes send() feedback."""

    platform = 'c'
    target = C
    table = CANDIDATES
    shared_templates = None
    grid_launch = False     # a function of n called by the client
    gate_names = GATES

    def _check_opts(self):
        return {}

    def _candidates(self, dtype):
        size = np.dtype(dtype).itemsize
        nrows = self.info.m - len(self.info.zero_rows)
        nnz = self.info.nnz
        gates = {'small': nnz <= BSTREAM_MAX_NNZ,
                 'row': nnz <= CSTREAM_ROW_MAX_NNZ,
                 'unrolled': nnz <= UNROLLED_MAX_NNZ}
        # bstream's accumulators must fit MAX_SCRATCH per thread
        return self._from_table(
            self.table, gates, dtype,
            adapt=lambda row, params: (
                None if row.family is Bstream
                and nrows*params['width']*size > MAX_SCRATCH else params))
