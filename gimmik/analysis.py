"""Plain-Python analysis of a constant operator matrix A.

Everything a template needs to know about A is computed here, so that the
Mako templates only walk lists and never decide anything about the matrix.
"""

from dataclasses import dataclass

import numpy as np

# Row groups of OperatorInfo.group_reads
GROUP_READS = 8

# Viability heuristics.  A family is only offered when A looks like the kind
# of operator it was built for.
DENSE_DENSITY = 0.5        # mfma/mma dense families: fraction of non-zeros
# Below it, operators with at least this many non-zeros and this density
# (prism-like: blocks of non-zeros) still pay for a tensor-core GEMM that
# skips A's zero slabs (sparse_gemm_worth_it)
SPARSE_GEMM_MIN_NNZ = 4096
SPARSE_GEMM_MIN_DENSITY = 0.04
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
    # B rows the GROUP_READS contiguous row groups of similar work read in
    # all, over the B rows used: how often a row-blocked kernel reads each
    # used value of B (1 where the groups use disjoint rows of B)
    group_reads: float


def sparse_gemm_worth_it(info):
    """Whether an operator below DENSE_DENSITY has the non-zeros and
    density for a tensor-core GEMM skipping A's zero slabs."""
    return (info.nnz >= SPARSE_GEMM_MIN_NNZ
            and info.density >= SPARSE_GEMM_MIN_DENSITY)


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
        group_reads=(sum(int(nzmask[r0:r1].any(axis=0).sum())
                         for r0, r1 in balanced_row_groups(A, GROUP_READS))
                     / max(1, len(bix))),
    )


def balanced_row_groups(A, parts):
    """Split the rows of A into `parts` contiguous groups of similar nnz
    (each group's cost is its loads of B plus its FMAs)."""
    m = A.shape[0]
    if parts >= m:
        return [(i, i + 1) if i < m else (m, m) for i in range(parts)]
    cost = (A != 0).sum(axis=1) + 1
    cum = np.concatenate([[0], np.cumsum(cost)])
    bounds = [0]
    for p in range(1, parts):
        b = int(np.searchsorted(cum, cum[-1]*p/parts))
        bounds.append(min(max(b, bounds[-1] + 1), m - (parts - p)))
    bounds.append(m)
    return list(zip(bounds[:-1], bounds[1:]))


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
