"""Plain-Python analysis of a constant operator matrix A: everything a
template needs about A, so that templates only walk lists."""

import functools
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
# and from this many non-zeros where slab_order leaves at most
# SPARSE_GEMM_MAX_LIVE of the SPARSE_GEMM_SLAB slabs of the GEMM's sparse
# tile (BM x BK) holding a non-zero (H100, n = 110080: 2520 non-zeros,
# 0.65 of the slabs, 0.95x the streaming families' time in context;
# bench/results/cuda-h100-context-reorder-exp.csv)
SPARSE_GEMM_REORDERED_MIN_NNZ = 2048
SPARSE_GEMM_MAX_LIVE = 0.75
SPARSE_GEMM_SLAB = (64, 8)
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
    # the fraction of A's SPARSE_GEMM_SLAB slabs holding a non-zero in
    # slab_order's order (in A's own where it finds none better); computed
    # only where sparse_gemm_worth_it needs it, else None
    slab_live: float = None


def sparse_gemm_worth_it(info):
    """Whether an operator below DENSE_DENSITY has the non-zeros and density
    for a tensor-core GEMM skipping A's zero slabs."""
    if info.density < SPARSE_GEMM_MIN_DENSITY:
        return False
    return (info.nnz >= SPARSE_GEMM_MIN_NNZ
            or (info.nnz >= SPARSE_GEMM_REORDERED_MIN_NNZ
                and info.slab_live <= SPARSE_GEMM_MAX_LIVE))


def _by_pattern(fn):
    """fn(S, *args) of a matrix's boolean pattern S, called as fn(A,
    *args) and remembered for the pattern (the last 64 calls)."""
    @functools.lru_cache(maxsize=64)
    def remembered(shape, packed, *args):
        m, k = shape
        S = np.unpackbits(np.frombuffer(packed, dtype=np.uint8),
                          count=m*k).reshape(m, k).astype(bool)
        return fn(S, *args)

    @functools.wraps(fn)
    def call(A, *args):
        S = np.asarray(A) != 0
        return remembered(S.shape, np.packbits(S).tobytes(), *args)
    return call


def _slab_live(S):
    """OperatorInfo.slab_live of the pattern S."""
    order = slab_order(S, *SPARSE_GEMM_SLAB)
    live = live_slabs(S, *SPARSE_GEMM_SLAB)
    return (order.live if order else int(live.sum())) / live.size


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
        slab_live=(_slab_live(nzmask)
                   if (SPARSE_GEMM_REORDERED_MIN_NNZ <= nnz
                       < SPARSE_GEMM_MIN_NNZ
                       and nnz >= SPARSE_GEMM_MIN_DENSITY*m*k) else None),
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


@_by_pattern
def shared_row_groups(S, budget):
    """A's rows grouped by the B rows they share, within `budget` B rows a
    group: a tensor-product plane's lines stay together where contiguous
    groups cut them apart (deterministic, cached by pattern)."""
    m, k = S.shape
    if budget < 1:
        raise ValueError(f'shared_row_groups: budget {budget} < 1')
    live = np.flatnonzero(S.any(axis=1))
    if not live.size:
        return (tuple(range(m)),)
    # the distinct supports, as np.unique(S[live], axis=0) orders them
    # (big-endian packed bits sort as the rows do), 8x fewer bytes to sort
    packed, inv = np.unique(np.packbits(S[live], axis=1), axis=0,
                            return_inverse=True)
    sup = np.unpackbits(packed, axis=1, count=k).astype(bool)
    inv = np.asarray(inv).ravel()
    members = [list(live[inv == c]) for c in range(len(sup))]
    # counts as floats: BLAS products, exact far beyond any k
    P = sup.astype(np.float64)
    size = P.sum(axis=1)
    O = P @ P.T
    # a merge's score: shared B rows first, then the smaller union (< 0:
    # none shared, or over the budget)
    union = size[:, None] + size[None, :] - O
    score = np.where(union <= budget, O*(2*k + 1) - union, -1)
    np.fill_diagonal(score, -1)
    dead = np.zeros(len(sup), dtype=bool)
    # each row's best score and its first column: the first best pair in
    # row-major order without a scan of the whole matrix each merge
    rbest, rarg = score.max(axis=1), score.argmax(axis=1)
    while True:
        a = int(np.argmax(rbest))
        b = int(rarg[a])
        if rbest[a] < 0:
            break
        P[a] = np.maximum(P[a], P[b])
        size[a] = P[a].sum()
        members[a] += members[b]
        members[b] = None
        dead[b] = True
        score[b, :] = score[:, b] = -1
        # overlaps with the merged group, from its columns alone (within
        # the budget), not a product with all of P
        over = P[:, np.flatnonzero(P[a])].sum(axis=1)
        union = size + size[a] - over
        row = np.where(union <= budget, over*(2*k + 1) - union, -1)
        row[dead] = -1
        row[a] = -1
        score[a, :] = score[:, a] = row
        # rows whose best was at a or b rescan; the rest compare column a
        redo = (rarg == a) | (rarg == b)
        redo[a] = True
        rbest[b], rarg[b], redo[b] = -1, 0, False
        up = ~redo & ((row > rbest) | ((row == rbest) & (a < rarg)))
        rbest[up], rarg[up] = row[up], a
        idx = np.flatnonzero(redo)
        rbest[idx] = score[idx].max(axis=1)
        rarg[idx] = score[idx].argmax(axis=1)
    groups = sorted((sorted(int(i) for i in g) for g in members
                     if g is not None), key=lambda g: g[0])
    for i in np.flatnonzero(~S.any(axis=1)):
        min(groups, key=len).append(int(i))
    return tuple(tuple(sorted(g)) for g in sorted(groups, key=min))


@_by_pattern
def union_row_blocks(S, size):
    """A's rows (a tuple, every row once) in blocks of `size` (the last one
    short), each block's union of used columns kept small."""
    m = S.shape[0]
    if size < 1:
        raise ValueError(f'union_row_blocks: size {size} < 1')
    left = np.ones(m, dtype=bool)
    order = []
    while left.any():
        order += _union_block(S, left, size)
    return tuple(order)


def _union_block(S, left, size):
    """union_row_blocks' next block of the rows `left` (a mask, cleared
    for the rows taken): a list of at most size rows."""
    m, k = S.shape
    rowsize = S.sum(axis=1).astype(np.int64)
    idx = np.flatnonzero(left)
    seed = int(idx[np.argmax(rowsize[idx])])
    left[seed] = False
    block = [seed]
    union = S[seed].copy()
    # each row's columns in the union, updated by the columns each pick
    # adds: a step costs O(m) plus its new columns, not a matrix product
    shared = S[:, union].sum(axis=1).astype(np.int64)
    # the pick: fewest new columns, then most shared, then lowest index,
    # as one integer key (k, m <= MAX_DIM: far inside int64)
    rank = np.arange(m, dtype=np.int64)
    taken = np.iinfo(np.int64).max
    for _ in range(size - 1):
        if not left.any():
            break
        key = ((rowsize - shared)*(k + 1) + (k - shared))*m + rank
        best = int(np.argmin(np.where(left, key, taken)))
        left[best] = False
        block.append(best)
        added = S[best] & ~union
        if added.any():
            shared += S[:, added].sum(axis=1)
            union |= added
    return block


# partition_rows: a group holds at most this many times its share of the
# rows (its sums and registers) and at least half of it
PARTITION_MAX_SHARE = 1.25
# Fiduccia-Mattheyses passes a bisection runs at most; a pass stops after
# this many moves past its best prefix (at least 1 in 10 of the rows)
PARTITION_PASSES = 8
PARTITION_STALL = 48


@_by_pattern
def partition_rows(S, parts):
    """A's rows in `parts` groups that together read few B rows, by
    Fiduccia-Mattheyses bisection (deterministic, cached by pattern)."""
    m = S.shape[0]
    if parts < 1:
        raise ValueError(f'partition_rows: parts {parts} < 1')
    parts = min(parts, m)
    share = m / parts
    cap = max(1, int(np.ceil(PARTITION_MAX_SHARE*share)))
    low = max(1, int(share // 2))
    groups = []

    def split(rows, p):
        if p == 1:
            groups.append(tuple(rows))
            return
        p1 = p // 2
        a, b = _bisect(S[rows], p1, p - p1, cap, low)
        split([rows[i] for i in a], p1)
        split([rows[i] for i in b], p - p1)

    split(list(range(m)), parts)
    return tuple(sorted(groups, key=lambda g: g[0]))


def _bisect(S, p1, p2, cap, low):
    """(rows of side 0, rows of side 1) of the rows of S, side 0 to hold
    p1 groups and side 1 p2 (each p*low to p*cap rows), cutting few
    columns."""
    n = S.shape[0]
    lo = max(p1*low, n - p2*cap)
    hi = min(n - p2*low, p1*cap)
    size0 = min(max(round(n*p1/(p1 + p2)), lo), hi)
    nets = [np.flatnonzero(S[:, j]).tolist()
            for j in np.flatnonzero(S.any(axis=0))]
    rnets = [[] for _ in range(n)]
    for j, pins in enumerate(nets):
        for v in pins:
            rnets[v].append(j)
    best = None
    grown = _union_block(S, np.ones(n, dtype=bool), size0)
    P = S[:, S.any(axis=0)].astype(np.float64)
    for order in (range(n), grown):
        side = [1]*n
        for v in list(order)[:size0]:
            side[v] = 0
        side = _fm(P, nets, rnets, side, lo, hi)
        cut = sum(len({side[v] for v in pins}) > 1 for pins in nets)
        if best is None or cut < best[0]:
            best = (cut, side)
    side = best[1]
    return ([v for v in range(n) if side[v] == 0],
            [v for v in range(n) if side[v] == 1])


def _fm(P, nets, rnets, side, lo, hi):
    """side (0/1 of each row) improved by Fiduccia-Mattheyses passes on the cut
    columns (P: the rows' used columns as floats; nets: the rows of each
    column, rnets: the columns of each row), side 0 kept within lo..hi rows."""
    n = len(side)
    side = list(side)
    for _ in range(PARTITION_PASSES):
        sides = np.array(side)
        c1 = (sides.astype(np.float64) @ P).astype(np.int64)
        c0 = ((1.0 - sides) @ P).astype(np.int64)
        # a row's gain: the cut columns its move to the other side removes
        g0 = P @ ((c0 == 1).astype(np.float64) - (c1 == 0))
        g1 = P @ ((c1 == 1).astype(np.float64) - (c0 == 0))
        gain = np.where(sides == 0, g0, g1).astype(np.int64)
        cnt = [c0.tolist(), c1.tolist()]
        free = np.ones(n, dtype=bool)
        size0 = n - int(sides.sum())
        moves, run, best, best_at = [], 0, 0, 0
        for _ in range(n):
            ok = free.copy()
            if size0 - 1 < lo:
                ok &= sides != 0
            if size0 + 1 > hi:
                ok &= sides != 1
            if not ok.any():
                break
            v = int(np.argmax(np.where(ok, gain, -n - 1)))
            s = side[v]
            t = 1 - s
            run += int(gain[v])
            free[v] = False
            for j in rnets[v]:
                F, T = cnt[s], cnt[t]
                if T[j] == 0:
                    for u in nets[j]:
                        gain[u] += free[u]
                elif T[j] == 1:
                    for u in nets[j]:
                        if side[u] == t:
                            gain[u] -= free[u]
                F[j] -= 1
                T[j] += 1
                if F[j] == 0:
                    for u in nets[j]:
                        gain[u] -= free[u]
                elif F[j] == 1:
                    for u in nets[j]:
                        if side[u] == s:
                            gain[u] += free[u]
            side[v] = t
            sides[v] = t
            size0 += 1 if t == 0 else -1
            moves.append(v)
            if run > best:
                best, best_at = run, len(moves)
            elif len(moves) - best_at > max(PARTITION_STALL, n // 10):
                break
        for v in moves[best_at:]:
            side[v] = 1 - side[v]
        if best <= 0:
            break
    return side


# compact kernels (mma-gemm, mfma-gemm) are offered where their m-blocks
# run at most this fraction of the stages the skipping kernel runs in the
# better of A's order and useful_slab_order's
COMPACT_MAX_STAGES = 0.9


def compact_blocks(A, rows, block_m, block_k):
    """(bcols, Ac): A's rows in the order rows cut in m-blocks of block_m,
    each m-block's used columns in A's order, -1 past them, in slots of
    block_k (m-blocks x slots*block_k), and A's values there (m-blocks x
    block_m x slots*block_k, zero past m and past the used columns)."""
    A = np.asarray(A, dtype=np.float64)[list(rows)]
    m, k = A.shape
    nmb = -(-m // block_m)
    pad = np.zeros((nmb*block_m, k))
    pad[:m] = A
    blocks = pad.reshape(nmb, block_m, k)
    used = [np.flatnonzero((blk != 0).any(axis=0)) for blk in blocks]
    slots = max(1, max(-(-len(u) // block_k) for u in used))
    bcols = np.full((nmb, slots*block_k), -1, dtype=np.int64)
    Ac = np.zeros((nmb, block_m, slots*block_k))
    for mb, u in enumerate(used):
        bcols[mb, :len(u)] = u
        Ac[mb, :, :len(u)] = blocks[mb][:, u]
    return bcols, Ac


def compact_counts(bcols, block_k):
    """The stages each m-block of compact_blocks' bcols runs."""
    return -(-(bcols >= 0).sum(axis=1) // block_k)


def compact_stages(bcols, block_k):
    """Stages all m-blocks of compact_blocks' bcols run."""
    return int(compact_counts(bcols, block_k).sum())


def compact_b_rows(B, bcols, width):
    """For models of compact kernels: per m-block, the rows of B (k x n,
    zero-padded to `width` columns) at its k indices bcols[mb], a zero row
    where bcols is -1."""
    B = np.asarray(B, dtype=np.float64)
    k, n = B.shape
    Bz = np.zeros((k + 1, width))
    Bz[:k, :n] = B
    return [Bz[np.where(c >= 0, c, k)] for c in bcols]


def compact_order(A, block_m, block_k):
    """(rows, bcols, Ac, stages) of a compact kernel's m-blocks: A's rows
    in union_row_blocks' order or useful_slab_order's (A's own where it
    has none), whichever runs fewer stages."""
    m = np.shape(A)[0]
    order = useful_slab_order(A, block_m, block_k)
    best = None
    for rows in (union_row_blocks(A, block_m),
                 order.rows if order is not None else range(m)):
        bcols, Ac = compact_blocks(A, rows, block_m, block_k)
        stages = compact_stages(bcols, block_k)
        if best is None or stages < best[3]:
            best = (tuple(rows), bcols, Ac, stages)
    return best


def compact_worth_it(A, block_m, block_k):
    """Whether compact_order runs at most COMPACT_MAX_STAGES of the live
    block_m x block_k slabs of A's order or of useful_slab_order's."""
    live = int(live_slabs(np.asarray(A) != 0, block_m, block_k).sum())
    order = useful_slab_order(A, block_m, block_k)
    if order is not None:
        live = min(live, order.live)
    return compact_order(A, block_m, block_k)[3] <= COMPACT_MAX_STAGES*live


def split_even(count, parts):
    """Split range(count) into `parts` contiguous, near-equal ranges."""
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
    """Split the used columns of A into `parts` groups of near-equal nnz."""
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


# slab_order's rounds: sorts by barycentre, then by the slabs' pattern
SLAB_ORDER_BARY_ROUNDS = 30
SLAB_ORDER_PATTERN_ROUNDS = 20


def live_slabs(S, block_m, block_k):
    """(m-blocks, k-blocks) mask of the block_m x block_k slabs of the
    boolean pattern S (zero-padded) that hold a non-zero."""
    m, k = S.shape
    nmb, nkb = -(-m // block_m), -(-k // block_k)
    P = np.zeros((nmb*block_m, nkb*block_k), dtype=bool)
    P[:m, :k] = S
    return P.reshape(nmb, block_m, nkb, block_k).any(axis=(1, 3))


@dataclass(frozen=True)
class SlabOrder:
    """An order of A's rows and of its used columns for a GEMM that skips A's
    zero block_m x block_k slabs."""
    rows: tuple
    cols: tuple
    live: int
    natural: int


def _barycentres(T, axis):
    # mean position of the non-zeros of each row (axis 1) or column
    # (axis 0) of T; 0 where there are none
    pos = np.arange(T.shape[axis])
    w = T.sum(axis=axis)
    s = (T*(pos if axis == 1 else pos[:, None])).sum(axis=axis)
    return s / np.maximum(w, 1)


def _by_slab_pattern(T, block_m, block_k):
    """Column order grouping the columns that the same m-blocks use (by
    the first m-block using them, then their whole pattern), and row order
    by the first and last k-block each row uses, both stable."""
    m, k = T.shape
    nmb = -(-m // block_m)
    P = np.zeros((nmb*block_m, k), dtype=bool)
    P[:m] = T
    blk = P.reshape(nmb, block_m, k).any(axis=1)
    first = np.where(blk.any(axis=0), blk.argmax(axis=0), nmb)
    cols = np.lexsort((np.arange(k),) + tuple(~blk[::-1]) + (first,))
    T = T[:, cols]
    kb = np.arange(k) // block_k
    anyr = T.any(axis=1)
    lo = np.where(anyr, kb[T.argmax(axis=1)], 0)
    hi = np.where(anyr, kb[k - 1 - T[:, ::-1].argmax(axis=1)], 0)
    rows = np.lexsort((np.arange(m), hi, lo))
    return rows, cols


@_by_pattern
def slab_order(S, block_m, block_k):
    """A SlabOrder with few live block_m x block_k slabs (barycentre sorts
    gather kron-like patterns), or None where none beats A's own order."""
    m, k = S.shape
    natural = int(live_slabs(S, block_m, block_k).sum())
    used = np.flatnonzero(S.any(axis=0))
    if not used.size:
        return None
    S = S[:, used]
    r, c = np.arange(m), np.arange(len(used))

    def count(r, c):
        return int(live_slabs(S[r][:, c], block_m, block_k).sum())

    best = (count(r, c), r, c)
    for _ in range(SLAB_ORDER_BARY_ROUNDS):
        r = r[np.argsort(_barycentres(S[r][:, c], 1), kind='stable')]
        c = c[np.argsort(_barycentres(S[r][:, c], 0), kind='stable')]
        best = min(best, (count(r, c), r, c), key=lambda x: x[0])
    r, c = best[1:]
    for _ in range(SLAB_ORDER_PATTERN_ROUNDS):
        rr, cc = _by_slab_pattern(S[r][:, c], block_m, block_k)
        c = c[cc]
        best = min(best, (count(r, c), r, c), key=lambda x: x[0])
        r = r[rr]
        best = min(best, (count(r, c), r, c), key=lambda x: x[0])
    live, r, c = best
    if live >= natural:
        return None
    return SlabOrder(tuple(int(i) for i in r), tuple(int(used[j]) for j in c),
                     live, natural)


# reorder A only below this fraction of live slabs: gathering B and scattering
# C cost a little (cuda-h100-context-reorder.csv)
REORDER_MAX_LIVE = 0.9


def useful_slab_order(A, block_m, block_k):
    """slab_order(A, block_m, block_k) where it keeps at most
    REORDER_MAX_LIVE of the live slabs of A's order, else None."""
    order = slab_order(A, block_m, block_k)
    if order is None or order.live > REORDER_MAX_LIVE*order.natural:
        return None
    return order


def reordered(A, rows, cols):
    """A in a kernel's order: its rows rows, its columns cols (a
    SlabOrder's, a plan's)."""
    return np.asarray(A)[list(rows)][:, list(cols)]
