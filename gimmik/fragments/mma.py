"""The bake of a constant operator A into the fragments of NVIDIA's f64
tensor-core MMAs for the mma-gemm family, and NumPy models of those MMAs to
check it without a GPU."""

from dataclasses import dataclass, replace

import numpy as np

from gimmik.analysis import (compact_b_rows, compact_counts,
                             compact_order, compact_worth_it, reordered,
                             useful_slab_order)

WARP = 32              # lanes of a CUDA warp

# The MMAs' N: columns of the panels per MMA tile.
MMA_N = 8


# -- mma-gemm: 2-D block tiling on the FP64 tensor cores ---------------------
#
# A block computes a BM x BN tile of C: its m-block of A's rows (blockIdx.x
# modulo the m-block count, so the blocks sharing a B tile run together) and
# BN columns.  The k loop runs over stages of BK rows; each stage's slice of
# A (from a baked table) and of B is copied to shared memory with cp.async,
# nbuf stages deep.  Warp (wy, wx) of the mwarps x nwarps grid owns wm MMA
# m-tiles and wn 8-column n-tiles of the block's tile, with register
# accumulators.
#
# Columns: the MMA column j (0-7) of warp wx's n-tile nt is the block's
# column wx*8*wn + j*wn + (nt ^ 2*(j % 2)) (GemmPlan.column; without the
# XOR where wn is not a multiple of 4), so that a lane's B fragment values
# of all wn n-tiles are wn adjacent columns of a row of B, read from
# shared memory two n-tiles a vector, and its accumulators of a row of C
# are 2*wn adjacent columns.  A B stage is held row after row, BN doubles
# a row, with the 16-byte chunks of row r permuted by chunk ^ 2*(r % 4)
# (gemm_b_offset): the chunks of a 128-byte line of B stay in one 128-byte
# line (cp.async copies whole sectors), and the warp-wide vector reads,
# lanes of odd and even g reading the two halves of a sector (the XOR in
# the column map), are free of bank conflicts.
#
# Fragment layouts (PTX ISA, "Matrix fragments for mma.m8n8k4 / m16n8k4 /
# m16n8k8 / m16n8k16" with .f64), g = lane/4, t = lane%4:
#   m8n8k4:   A: a0 = A[g][t];  B: b0 = B[t][g];  C: c_i = C[g][2t + i]
#   m16n8kK:  A: a_i = A[g + 8(i%2)][t + 4(i/2)], i < K/2;
#             B: b_i = B[t + 4i][g], i < K/4;
#             C: c_i = C[g + 8(i/2)][2t + i%2], i < 4.
# The m16n8k* shapes are sm_90 (PTX ISA 7.8).

# Transposed shapes (m16n8k4t, ...) swap the operands' roles so B's reads and
# C's stores are adjacent pairs: 16-byte shared reads, whole-line stores

# shape -> (rows of A per m-tile, k per MMA)
GEMM_SHAPES = {'m8n8k4': (8, 4), 'm16n8k4': (16, 4), 'm16n8k8': (16, 8),
               'm16n8k16': (16, 16), 'm16n8k4t': (8, 4), 'm16n8k8t': (8, 8),
               'm16n8k16t': (8, 16)}
GEMM_SM90 = frozenset({'m16n8k4', 'm16n8k8', 'm16n8k16', 'm16n8k4t',
                       'm16n8k8t', 'm16n8k16t'})


def gemm_transposed(shape):
    """Whether an MMA shape swaps the operands' roles (see above)."""
    return shape.endswith('t')


def gemm_instr(shape):
    """The PTX mma shape of an MMA shape name."""
    return shape[:-1] if gemm_transposed(shape) else shape


def gemm_ntile(shape):
    """Columns of B and C per MMA tile."""
    return 2*MMA_N if gemm_transposed(shape) else MMA_N


def gemm_coords(shape):
    """Per-lane (row, column) of each fragment value of an MMA shape, in the
    tiles of A (rows x k), B (k x ntile) and C (rows x ntile)."""
    mt, kt = GEMM_SHAPES[shape]
    lanes = np.arange(32)
    g, t = lanes // 4, lanes % 4
    if gemm_transposed(shape):
        a = [(g, t + 4*i) for i in range(kt // 4)]
        b = [(t + 4*(i // 2), g + 8*(i % 2)) for i in range(kt // 2)]
        c = [(2*t + i % 2, g + 8*(i // 2)) for i in range(4)]
    else:
        if mt == 8:
            a = [(g, t)]
            c = [(g, 2*t), (g, 2*t + 1)]
        else:
            a = [(g + 8*(i % 2), t + 4*(i // 2)) for i in range(kt // 2)]
            c = [(g + 8*(i // 2), 2*t + i % 2) for i in range(4)]
        b = [(t + 4*i, g) for i in range(kt // 4)]

    def pack(rc):
        return np.stack([np.stack(x, axis=1) for x in rc], axis=1)
    return pack(a), pack(b), pack(c)


def gemm_model(shape, afrag, bfrag, cfrag):
    """NumPy model of one f64 mma of `shape` on per-lane fragments afrag
    (32, na), bfrag (32, nb), cfrag (32, nc); returns dfrag (32, nc)."""
    mt, kt = GEMM_SHAPES[shape]
    nt = gemm_ntile(shape)
    ac, bc, cc = gemm_coords(shape)
    a = np.zeros((mt, kt))
    b = np.zeros((kt, nt))
    c = np.zeros((mt, nt))
    a[ac[..., 0], ac[..., 1]] = afrag
    b[bc[..., 0], bc[..., 1]] = bfrag
    c[cc[..., 0], cc[..., 1]] = cfrag
    d = a @ b + c
    return d[cc[..., 0], cc[..., 1]]


@dataclass
class GemmPlan:
    """mma-gemm: A baked in ``table`` a live slab a slot (one linear
    cp.async copy, conflict-free fragment loads); m-block mb runs its
    cnt[mb] live stages."""
    shape: str
    mma_m: int
    mma_k: int
    a_per_lane: int
    b_per_lane: int
    c_per_lane: int
    a_vec: int
    mwarps: int
    nwarps: int
    wm: int
    wn: int
    kstage: int
    nbuf: int
    nmb: int
    nstages: int
    BM: int
    BN: int
    BK: int
    skip: bool
    preload_c: bool
    tiles: int
    nslots: int
    cnt: np.ndarray
    kidx: np.ndarray
    table: np.ndarray
    late_issue: bool = False
    # reorder: the plan's row i is A's row rows[i] and its k index j
    # A's column cols[j] (gemm_order); None: A's own order
    rows: tuple = None
    cols: tuple = None
    # compact: k index j of m-block mb's slots is A's column bcols[mb, j] (its
    # used columns in order, -1 past them); None: stages of A's columns
    bcols: np.ndarray = None

    @property
    def nthreads(self):
        return WARP*self.mwarps*self.nwarps

    @property
    def shared(self):
        return 8*self.nbuf*(self.BM + self.BN)*self.BK

    @property
    def transposed(self):
        return gemm_transposed(self.shape)

    @property
    def ntile(self):
        return gemm_ntile(self.shape)

    @property
    def instr(self):
        return gemm_instr(self.shape)

    def column(self, wx, nt, j):
        """The block's column of column j of warp wx's n-tile nt (the MMA's
        column, or its row for transposed shapes)."""
        if self.transposed:
            return (wx*self.wn + nt)*2*MMA_N + 2*(j % 8) + j // 8
        swap = 2*(j % 2) if self.wn % 4 == 0 else 0
        return wx*MMA_N*self.wn + j*self.wn + (nt ^ swap)

    def c_local(self, lc):
        """(n-tile, value e) of a lane's local column lc of C (the 2*wn
        columns from 2*wn*t of a fragment row: MMA columns 2t + e)."""
        e = lc // self.wn
        swap = 2*e if self.wn % 4 == 0 else 0
        return (lc % self.wn) ^ swap, e

    def c_pairs(self):
        """gemm_c_pairs of this plan's wn."""
        return gemm_c_pairs(self.wn)

    @property
    def full(self):
        return bool((self.cnt == self.nstages).all())

    def a_offset(self, s, wy, ks, mt, j):
        """Offset in one m-block's table (and, less s*BM*BK, in a shared
        stage) of the fragment vectors j of lane 0 for slot s, warp row wy,
        k-step ks and m-tile mt; lane l's vector is at + l*a_vec."""
        nvec = self.a_per_lane // self.a_vec
        return (s*self.BM*self.BK
                + (((wy*self.kstage + ks)*self.wm + mt)*nvec + j)
                * 32*self.a_vec)


def gemm_geometry(m, k, shape, mwarps, nwarps, wm, wn, kstage, nbuf):
    """(effective wm, m-blocks, stages, BM, BN, BK): wm is cut down to
    spread A's m-tiles evenly over the fewest m-blocks."""
    if wn % 2:
        raise ValueError(f'mma-gemm needs an even wn, not {wn}')
    mt, kt = GEMM_SHAPES[shape]
    nmt = -(-m // mt)
    nmb = -(-nmt // (mwarps*wm))
    wm = -(-nmt // (nmb*mwarps))
    BK = kt*kstage
    BN = gemm_ntile(shape)*nwarps*wn
    return (wm, nmb, -(-k // BK), mwarps*wm*mt, BN, BK)


def gemm_b_offset(BN, r, c):
    """Offset (doubles) in a B stage of BN columns of row r, column c (ints
    or NumPy int arrays): see the comment above."""
    ch = c // 2
    return r*BN + 2*(ch ^ (2*(r % 4))) + c % 2


def gemm_b_read(BN, wn, wx, g, t, v):
    """Offset (doubles) in a B stage of the vector lane (g, t) of warp wx reads
    in its v-th B read of rows 0-3 (add 4q*BN for rows 4q to 4q + 3)."""
    h = v ^ (g % 2) if wn % 4 == 0 else v
    return gemm_b_offset(BN, t, wx*MMA_N*wn + g*wn + 2*h)


def gemm_c_pairs(wn):
    """How a pair of lanes (t = 2P, 2P + 1 of a fragment row) writes its 4*wn
    columns of a row of C (lane t holds the 2*wn from 2*wn*t, local column lc =
    e*wn + nt its accumulator of n-tile nt, value e) so that each store fills
    whole 32-byte sectors; returns (sent, stores) of the shuffle."""
    half = wn // 2
    sent = ([lc for lc in range(2*wn) if lc & 2],
            [lc for lc in range(2*wn) if not lc & 2])
    stores = []
    for s in range(wn):
        sl = s % half
        if s < half:      # the even lane's columns
            stores.append(((True, 4*sl), (False, 2*sl)))
        else:             # the odd lane's
            stores.append(((False, 2*sl), (True, 4*sl + 2)))
    return sent, stores


def _gemm_pad(A, rows, cols):
    pad = np.zeros((rows, cols))
    pad[:A.shape[0], :A.shape[1]] = A
    return pad


def gemm_order(A, shape, mwarps, nwarps, wm, wn, kstage, nbuf):
    """The order of A's rows and used columns this tiling's kernel runs
    A in (gimmik.analysis.useful_slab_order of its BM x BK slabs), or
    None."""
    m, k = A.shape
    _, _, _, BM, _, BK = gemm_geometry(m, k, shape, mwarps, nwarps, wm, wn,
                                       kstage, nbuf)
    return useful_slab_order(A, BM, BK)


def gemm_live_stages(A, shape, mwarps, nwarps, wm, wn, kstage, nbuf,
                     pad=None):
    """(m-blocks, stages) mask of the stages where an m-block's BM x BK slab
    of A has a non-zero: the stages it runs with skip."""
    m, k = A.shape
    _, nmb, nst, BM, _, BK = gemm_geometry(m, k, shape, mwarps, nwarps,
                                           wm, wn, kstage, nbuf)
    if pad is None:
        pad = _gemm_pad(A, nmb*BM, nst*BK)
    return (pad != 0).reshape(nmb, BM, nst, BK).any(axis=(1, 3))


def gemm_fragment_sizes(shape):
    """Values per lane of the A, B and C fragments of an MMA shape."""
    mt, kt = GEMM_SHAPES[shape]
    nt = gemm_ntile(shape)
    return mt*kt // 32, kt*nt // 32, mt*nt // 32


# compute-bound from this flop/byte: late issue hides the loads' address
# arithmetic under the MMAs (cuda-h100-gemm-issue-before)
GEMM_LATE_ISSUE_FLOP_PER_BYTE = 16


def gemm_intensity(m, k, beta):
    """Flops per byte of B and C moved of the dense m x k product in f64:
    2*m*k flops a column for k + m words, 2*m with beta*C."""
    return 2*m*k / (8*(k + m*(2 if beta else 1)))


def gemm_compute_bound(m, k, beta):
    """Whether the dense product is compute-bound on the tensor cores (at
    least GEMM_LATE_ISSUE_FLOP_PER_BYTE flops per byte)."""
    return gemm_intensity(m, k, beta) >= GEMM_LATE_ISSUE_FLOP_PER_BYTE


def _late_issue_fits(kstage, nbuf):
    """Whether a stage has more than one k-step and there are more than
    two buffers: the next stage is waited for before the late loads
    issue."""
    return kstage > 1 and nbuf > 2


def gemm_issue_late(m, k, beta, kstage, nbuf):
    """Whether mma-gemm issues a stage's loads after the first k-step's
    mmas (compute-bound operators; else early, to have a stage to land)."""
    return _late_issue_fits(kstage, nbuf) and gemm_compute_bound(m, k, beta)


def gemm_compact_order(A, shape, mwarps, nwarps, wm, wn, kstage, nbuf):
    """gimmik.analysis.compact_order of this tiling's m-blocks and stages:
    (rows, bcols, Ac, stages)."""
    m, k = A.shape
    _, _, _, BM, _, BK = gemm_geometry(m, k, shape, mwarps, nwarps, wm, wn,
                                       kstage, nbuf)
    return compact_order(A, BM, BK)


def gemm_compact_stages(A, shape, mwarps, nwarps, wm, wn, kstage, nbuf):
    """Stages all m-blocks run with compact."""
    return gemm_compact_order(A, shape, mwarps, nwarps, wm, wn, kstage,
                              nbuf)[3]


def gemm_compact_worth_it(A, shape, mwarps, nwarps, wm, wn, kstage, nbuf):
    """gimmik.analysis.compact_worth_it for this tiling's slabs."""
    m, k = A.shape
    _, _, _, BM, _, BK = gemm_geometry(m, k, shape, mwarps, nwarps, wm, wn,
                                       kstage, nbuf)
    return compact_worth_it(A, BM, BK)


def gemm_plan(A, shape, mwarps, nwarps, wm, wn, kstage, nbuf, skip=False,
              preload_c=False, tiles=1, late_issue=False, reorder=False,
              compact=False):
    """The mma-gemm plan (skip: only live stages; preload_c: start from beta*C;
    reorder, compact: B gathered and C scattered by the plan's tables)."""
    if late_issue and not _late_issue_fits(kstage, nbuf):
        raise ValueError('late_issue needs kstage >= 2 and nbuf >= 3 (the '
                         'next stage waited for before its loads issue)')
    if compact:
        return _gemm_compact_plan(A, shape, mwarps, nwarps, wm, wn, kstage,
                                  nbuf, preload_c, tiles, late_issue)
    rows = cols = None
    if reorder:
        order = gemm_order(A, shape, mwarps, nwarps, wm, wn, kstage, nbuf)
        if order is not None:
            rows, cols = order.rows, order.cols
            A = reordered(A, rows, cols)
    m, k = A.shape
    MT, KT = GEMM_SHAPES[shape]
    wm, nmb, nst, BM, BN, BK = gemm_geometry(m, k, shape, mwarps, nwarps,
                                             wm, wn, kstage, nbuf)
    ac, bc, cc = gemm_coords(shape)
    na, nb, nc = ac.shape[1], bc.shape[1], cc.shape[1]
    v = min(na, 2)
    pad = _gemm_pad(A, nmb*BM, nst*BK)
    live = gemm_live_stages(A, shape, mwarps, nwarps, wm, wn, kstage, nbuf,
                            pad)
    if not skip:
        live[...] = True
    cnt = live.sum(axis=1)
    nslot = max(1, int(cnt.max()))
    kidx = np.zeros((nmb, nslot), dtype=np.int64)
    for mb in range(nmb):
        kidx[mb, :cnt[mb]] = np.flatnonzero(live[mb])
    # [mb, wy, mt, r, s, ks, c] -> [mb, s, wy, ks, mt, r, c]
    T = pad.reshape(nmb, mwarps, wm, MT, nst, kstage, KT) \
        .transpose(0, 4, 1, 5, 2, 3, 6)
    F = _fragment_table(T, ac, v)
    # keep each m-block's live stages, in order, in its slots
    Fc = np.zeros((nmb, nslot) + F.shape[2:])
    for mb in range(nmb):
        Fc[mb, :cnt[mb]] = F[mb, kidx[mb, :cnt[mb]]]
    return GemmPlan(shape, MT, KT, na, nb, nc, v, mwarps, nwarps, wm, wn,
                    kstage, nbuf, nmb, nst, BM, BN, BK, skip, preload_c, tiles,
                    nslot, cnt, kidx, Fc.reshape(-1), late_issue, rows, cols)


def _fragment_table(T, ac, v):
    """A's slices T [mb, s, wy, ks, mt, r, c] as the fragment table
    [mb, s, wy, ks, mt, vector j, lane, v] (see GemmPlan)."""
    na = ac.shape[1]
    F = T[..., ac[..., 0], ac[..., 1]]          # [..., lane, na]
    F = F.reshape(F.shape[:-1] + (na // v, v))  # [..., lane, j, v]
    return np.swapaxes(F, -3, -2)               # [..., j, lane, v]


def _gemm_compact_plan(A, shape, mwarps, nwarps, wm, wn, kstage, nbuf,
                       preload_c, tiles, late_issue):
    m, k = A.shape
    rows, bcols, Ac, _ = gemm_compact_order(A, shape, mwarps, nwarps, wm,
                                            wn, kstage, nbuf)
    MT, KT = GEMM_SHAPES[shape]
    wm, nmb, _, BM, BN, BK = gemm_geometry(m, k, shape, mwarps, nwarps, wm,
                                           wn, kstage, nbuf)
    nslot = bcols.shape[1] // BK
    cnt = compact_counts(bcols, BK)
    kidx = np.tile(np.arange(nslot), (nmb, 1))
    ac, _, _ = gemm_coords(shape)
    na, nb, nc = gemm_fragment_sizes(shape)
    v = min(na, 2)
    T = Ac.reshape(nmb, mwarps, wm, MT, nslot, kstage, KT) \
        .transpose(0, 4, 1, 5, 2, 3, 6)
    F = _fragment_table(T, ac, v)
    return GemmPlan(shape, MT, KT, na, nb, nc, v, mwarps, nwarps, wm, wn,
                    kstage, nbuf, nmb, nslot, BM, BN, BK, True, preload_c,
                    tiles, nslot, cnt, kidx, F.reshape(-1), late_issue, rows,
                    None, bcols)


def _unordered(plan):
    return replace(plan, rows=None, cols=None)


def gemm_reference(plan, A, B):
    """Evaluate A @ B (B of any width) the way the mma-gemm kernel does."""
    P = plan
    if P.rows is not None:
        cols = range(A.shape[1]) if P.cols is None else P.cols
        Ak = reordered(A, P.rows, cols)
        C = np.zeros((A.shape[0], B.shape[1]))
        C[list(P.rows)] = gemm_reference(
            _unordered(P), Ak, np.asarray(B)[list(cols)])
        return C
    m, k = A.shape
    n = B.shape[1]
    lanes = np.arange(32)
    nnb = -(-n // P.BN)
    if P.bcols is not None:
        Bmb = compact_b_rows(B, P.bcols, nnb*P.BN)
    else:
        Bp = np.zeros((P.nstages*P.BK, nnb*P.BN))
        Bp[:k, :n] = B
    _, bc, cc = gemm_coords(P.shape)
    C = np.zeros((P.nmb*P.BM, nnb*P.BN))
    per_mb = P.nslots*P.BM*P.BK
    nvec = P.a_per_lane // P.a_vec
    for mb in range(P.nmb):
        tab = P.table[mb*per_mb:(mb + 1)*per_mb]
        if P.bcols is not None:
            Bp = Bmb[mb]
        for nbk in range(nnb):
            col0 = nbk*P.BN
            for wy in range(P.mwarps):
                for wx in range(P.nwarps):
                    acc = np.zeros((P.wm, P.wn, 32, P.c_per_lane))
                    for s in range(P.cnt[mb]):
                        kst = P.kidx[mb, s]
                        for ks in range(P.kstage):
                            af = [np.concatenate(
                                [tab[P.a_offset(s, wy, ks, mt, j)
                                     + lanes[:, None]*P.a_vec
                                     + np.arange(P.a_vec)]
                                 for j in range(nvec)], axis=1)
                                for mt in range(P.wm)]
                            row = kst*P.BK + ks*P.mma_k + bc[..., 0]
                            for nt in range(P.wn):
                                bf = Bp[row, col0 + P.column(wx, nt,
                                                             bc[..., 1])]
                                for mt in range(P.wm):
                                    acc[mt, nt] = gemm_model(
                                        P.shape, af[mt], bf, acc[mt, nt])
                    for mt in range(P.wm):
                        r0 = mb*P.BM + (wy*P.wm + mt)*P.mma_m
                        for nt in range(P.wn):
                            C[r0 + cc[..., 0],
                              col0 + P.column(wx, nt, cc[..., 1])] = \
                                acc[mt, nt]
    return C[:m, :n]
