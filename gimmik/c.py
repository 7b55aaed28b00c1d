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

from gimmik.base import Candidate, MatMul
from gimmik import plans

# Largest per-thread scratch a candidate may keep on the stack (bstream's
# accumulators, m rows by `width` columns).
MAX_SCRATCH = 64*1024

# bstream's one loop per used row of B takes GCC minutes to compile once A
# has a few hundred non-zeros (seen: 245 s at -O3 for 768); beyond this it
# is not offered.
BSTREAM_MAX_NNZ = 256

# The C candidate table: family, parameters, gate (as in gimmik.hip).
# Order is the order of offering.
#   cstream      every row of C for one column at a time (all rows inside
#                the simd loop over the block's columns)
#   cstream-row  row by row over one block: a simd loop per row of C, B's
#                block stays in cache between rows
#   bstream      B's used rows streamed once per block into an m x width
#                accumulator array, then C written row by row
CANDIDATES = [
    # family        parameters         gate
    ('cstream', dict(width=64), ''),
    ('bstream', dict(width=64), 'scratch small'),
    ('cstream-row', dict(width=64), ''),
    ('cstream', dict(width=512), ''),
    ('bstream', dict(width=256), 'scratch small'),
    ('cstream-row', dict(width=512), ''),
    ('bstream', dict(width=16), 'scratch small'),
]


class CMatMul(MatMul):
    """C = A*B + beta*C kernels in C99 with OpenMP, same API as HIPMatMul:
    ``kernels(dtype, kname='gimmik_mm')`` yields (src, meta) candidates and
    takes send() feedback."""

    platform = 'c'

    def _check_opts(self):
        return {}

    def _candidates(self, dtype):
        size = np.dtype(dtype).itemsize
        nrows = self.info.m - len(self.info.zero_rows)
        out = []
        for family, params, need in CANDIDATES:
            gates = {'scratch': nrows*params['width']*size <= MAX_SCRATCH,
                     'small': self.info.nnz <= BSTREAM_MAX_NNZ,
                     'beta': self.beta != 0}
            if all(gates[g] for g in need.split()):
                cand = Candidate(family, params)
                if cand not in out:
                    out.append(cand)
        return out

    def _context(self, cand, dtype):
        width = cand.params['width']
        ctx = {'lit': lambda x: self.lit(x, dtype),
               'zero_rows': set(self.info.zero_rows)}
        if cand.family in ('cstream', 'cstream-row'):
            ctx['plan'] = plans.cstream_plan(self.A)
        elif cand.family == 'bstream':
            ctx['plan'] = plans.bstream_plan(self.A)
        else:
            raise ValueError(f'unknown C family {cand.family!r}')
        return ctx, (1, 1, 1), 0, width
