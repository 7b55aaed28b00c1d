"""C generator for CPUs: OpenMP over blocks of columns, a vectorisable loop
over the columns of one block.

How a C kernel splits the work: the n columns are cut into blocks of
``meta['width']`` columns; block q covers columns [q*width, min(n,
(q+1)*width)).  The blocks are shared out among the OpenMP threads
(``schedule(static)``), and the loop over the columns of one block is an
``omp simd`` loop.  ``meta['block']`` is (1, 1, 1) and the launch geometry
of the base class gives the number of blocks as ``grid[0]``; a C kernel is
called once for the whole panel and walks its blocks itself.

Signature, mirroring the HIP kernels:
``void kname(int n, const T* restrict b, int ldb, T* restrict c, int ldc)``
or, with n, ldb and ldc baked in, ``void kname(const T* restrict b,
T* restrict c)``.
"""

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
# at 1800; cstream-row 15 s at 768, 38 s at 1800; bstream 245 s at 768).
# Beyond these only the looped rowblock family is offered, which compiles in
# under a second for any A of the PyFR suite and is as fast on large ones.
BSTREAM_MAX_NNZ = 256
CSTREAM_ROW_MAX_NNZ = 512
UNROLLED_MAX_NNZ = 1500

# The C candidate table (gimmik.base.Row: id, family, parameters, the
# names of the conditions of GATES that must hold).  Its order is the order
# of offering (gimmik.order has no rules for C).
#   rowblock     looped: A as tables; B's used rows packed per block of
#                columns; `rows` rows of C by `vw` columns of accumulators
#                in registers (rows 1 is a plain sparse row loop)
#   cstream      unrolled: every row of C for one column at a time (all rows
#                inside the simd loop over the block's columns)
#   cstream-row  unrolled: row by row over one block, a simd loop per row of
#                C; B's block stays in cache between rows
#   bstream      unrolled: B's used rows streamed once per block into an
#                m x width accumulator array, then C written row by row
CANDIDATES = [
    # id                family      parameters                      gates
    Row('rowblock6x8', Rowblock, dict(rows=6, vw=8, width=256)),
    Row('rowblock3x16', Rowblock, dict(rows=3, vw=16, width=256)),
    Row('rowblock2x16', Rowblock, dict(rows=2, vw=16, width=64)),
    Row('rowblock1x16', Rowblock, dict(rows=1, vw=16, width=256)),
    Row('cstream64', Cstream, dict(width=64), 'unrolled'),
    Row('cstream512', Cstream, dict(width=512), 'unrolled'),
    Row('cstream-row512', CstreamRow, dict(width=512), 'row'),
    Row('bstream64', Bstream, dict(width=64), 'small'),
    Row('bstream16', Bstream, dict(width=16), 'small'),
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
