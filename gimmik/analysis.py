"""Plain-Python analysis of a constant operator matrix A.

Everything a template needs to know about A is computed here, so that the
Mako templates only walk lists and never decide anything about the matrix.
"""

from dataclasses import dataclass

import numpy as np

# Viability heuristics.  A family is only offered when A looks like the kind
# of operator it was built for.
DENSE_DENSITY = 0.5        # mfma/mma dense families: fraction of non-zeros
MAX_UNROLLED_NNZ = 250_000  # beyond this the unrolled kernels become absurd
MAX_DIM = 10_000            # m or k beyond this is rejected as absurd
# m*k beyond this is rejected: A is held densely (the analysis, the vendor
# BLAS reference), and the generated code has lines per row whatever nnz is
MAX_ENTRIES = 1 << 24


@dataclass(frozen=True)
class OperatorInfo:
    m: int
    k: int
    nnz: int
    density: float
    unique: int
    first: tuple      # first non-zero column per row, -1 for an all-zero row
    last: tuple       # last non-zero column per row, -1 for an all-zero row
    bix: tuple        # rows of B that A uses (columns of A with a non-zero)
    zero_rows: tuple  # rows of A that are entirely zero


def analyse(A):
    """Return an :class:`OperatorInfo` for a validated 2-D float array A."""
    A = np.asarray(A)
    m, k = A.shape
    nzmask = A != 0
    nnz = int(nzmask.sum())

    anyrow = nzmask.any(axis=1)
    first = np.where(anyrow, nzmask.argmax(axis=1), -1)
    last = np.where(anyrow, k - 1 - nzmask[:, ::-1].argmax(axis=1), -1)
    bix = np.flatnonzero(nzmask.any(axis=0))

    return OperatorInfo(
        m=m, k=k, nnz=nnz, density=nnz / (m*k),
        unique=int(np.unique(np.abs(A[nzmask])).size),
        first=tuple(int(x) for x in first),
        last=tuple(int(x) for x in last),
        bix=tuple(int(x) for x in bix),
        zero_rows=tuple(int(x) for x in np.flatnonzero(~anyrow)),
    )


def split_even(count, parts):
    """Split range(count) into `parts` contiguous, near-equal ranges.

    Returns a list of (start, stop) pairs; trailing ranges may be empty.
    """
    base, extra = divmod(count, parts)
    out, start = [], 0
    for p in range(parts):
        stop = start + base + (p < extra)
        out.append((start, stop))
        start = stop
    return out


def chunks(seq, size):
    """Consecutive chunks of at most `size` items of seq."""
    seq = list(seq)
    return [seq[i:i + size] for i in range(0, len(seq), size)]


def ksplit_ranges(A, parts):
    """Split the used columns of A into `parts` groups of near-equal nnz.

    Returns a list of lists of column indices (some may be empty).
    """
    bix = np.flatnonzero((A != 0).any(axis=0))
    colnnz = (A[:, bix] != 0).sum(axis=0)
    target = colnnz.sum() / parts
    groups, cur, acc = [], [], 0
    for j, c in zip(bix, colnnz):
        if acc >= target*(len(groups) + 1) and len(groups) < parts - 1:
            groups.append(cur)
            cur = []
        cur.append(int(j))
        acc += c
    groups.append(cur)
    groups += [[] for _ in range(parts - len(groups))]
    return groups
