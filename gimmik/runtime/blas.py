"""Row-major C = alpha*A*B + beta*C as a column-major BLAS gemm, C^T = B^T
A^T, with A stored ``nn`` or ``nt``: libraries pick different kernels for
the two, so the vendor baseline times both."""

from dataclasses import dataclass

import numpy as np

FORMS = ('nn', 'nt')


@dataclass(frozen=True)
class ColMajorGemm:
    """Arguments of a column-major gemm(transa, transb, M, N, K, alpha,
    X, ldx, Y, ldy, beta, C, ldc) with X = the B panel and Y = the stored
    A."""
    transa: str        # op on X (always 'N': B^T is B's storage)
    transb: str        # op on Y: 'N' for form nn, 'T' for form nt
    M: int             # rows of C^T: n
    N: int             # columns of C^T: m
    K: int             # k
    ldx: int           # ldb
    ldy: int           # leading dimension of the stored A
    ldc: int
    a_transposed: bool  # A is stored transposed (k x m row-major)

    def layouts(self):
        """(rows, cols, ld) of the column-major X, Y and C as stored."""
        x = (self.M, self.K, self.ldx)
        y = (self.K, self.N, self.ldy) if self.transb == 'N' else \
            (self.N, self.K, self.ldy)
        return x, y, (self.M, self.N, self.ldc)


def colmajor_gemm(form, m, k, n, ldb, ldc):
    """The column-major gemm computing row-major C (m x n) = A (m x k)
    B (k x n) with panel strides ldb and ldc, for form 'nn' or 'nt'."""
    if form not in FORMS:
        raise ValueError(f'form must be one of {", ".join(FORMS)}, not '
                         f'{form!r}')
    for name, v in (('m', m), ('k', k), ('n', n)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) \
                or v < 1:
            raise ValueError(f'{name} must be a positive integer, not {v!r}')
    if ldb < n or ldc < n:
        raise ValueError(f'ldb ({ldb}) and ldc ({ldc}) must be at least n '
                         f'({n})')
    if form == 'nn':
        return ColMajorGemm('N', 'N', n, m, k, ldb, k, ldc, False)
    return ColMajorGemm('N', 'T', n, m, k, ldb, m, ldc, True)


def stored_a(A, alpha, dtype, form):
    """The host copy of alpha*A a formulation uploads: C-contiguous, in
    dtype, transposed for form 'nt'."""
    a = alpha*np.asarray(A, np.float64)
    if form == 'nt':
        a = a.T
    return np.ascontiguousarray(a, dtype=dtype)
