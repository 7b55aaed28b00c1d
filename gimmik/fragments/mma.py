"""The bake of a constant operator A into the fragments of NVIDIA's f64
tensor-core MMAs for the mma-gemm family, and NumPy models of those MMAs to
check it without a GPU: mma.sync m8n8k4 (sm_80) and Hopper's
m16n8k4/k8/k16 (sm_90).

Plain Python over a float64 A; the CUDA families (gimmik/families/) build
their plans here and the templates only walk them.
"""

from dataclasses import dataclass

import numpy as np

WARP = 32              # lanes of a CUDA warp

# The MMAs' N: columns of the panels per MMA tile.
MMA_N = 8


def mma_row_stride(cols):
    """Shared-memory row stride (doubles) of a B stage: the B fragment
    reads of a half warp (4 rows x 4 columns) hit 16 distinct bank pairs
    when the stride is 4 mod 16."""
    return cols + (4 - cols) % 16


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
# Fragment layouts (PTX ISA, "Matrix fragments for mma.m8n8k4 / m16n8k4 /
# m16n8k8 / m16n8k16" with .f64), g = lane/4, t = lane%4:
#   m8n8k4:   A: a0 = A[g][t];  B: b0 = B[t][g];  C: c_i = C[g][2t + i]
#   m16n8kK:  A: a_i = A[g + 8(i%2)][t + 4(i/2)], i < K/2;
#             B: b_i = B[t + 4i][g], i < K/4;
#             C: c_i = C[g + 8(i/2)][2t + i%2], i < 4.
# The m16n8k* shapes are sm_90 (PTX ISA 7.8).

GEMM_SHAPES = {'m8n8k4': (8, 4), 'm16n8k4': (16, 4), 'm16n8k8': (16, 8),
               'm16n8k16': (16, 16)}
GEMM_SM90 = frozenset({'m16n8k4', 'm16n8k8', 'm16n8k16'})


def gemm_coords(shape):
    """Per-lane (row, column) of each fragment value of an MMA shape:
    three int arrays (32, na, 2), (32, nb, 2), (32, nc, 2) for A, B, C."""
    mt, kt = GEMM_SHAPES[shape]
    lanes = np.arange(32)
    g, t = lanes // 4, lanes % 4
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
    ac, bc, cc = gemm_coords(shape)
    a = np.zeros((mt, kt))
    b = np.zeros((kt, MMA_N))
    c = np.zeros((mt, MMA_N))
    a[ac[..., 0], ac[..., 1]] = afrag
    b[bc[..., 0], bc[..., 1]] = bfrag
    c[cc[..., 0], cc[..., 1]] = cfrag
    d = a @ b + c
    return d[cc[..., 0], cc[..., 1]]


@dataclass
class GemmPlan:
    """mma-gemm: see the comment above.  The MMA tile is mma_m x 8 x mma_k;
    a lane holds a_per_lane values of A's fragment, b_per_lane of B's and
    c_per_lane accumulators, and reads A's in vectors of a_vec values.  The
    k range is cut in stages of BK columns of A; m-block mb runs only its
    cnt[mb] stages where its BM x BK slab of A has a non-zero, the stage
    indices kidx[mb][:cnt[mb]] (full: every m-block runs every stage), held
    in nslots slots.  table is A baked as
    [m-block][slot][wy][k-step][m-tile][vector j][lane][a_vec]: a slot's
    slice of an m-block is contiguous (one linear cp.async copy) and each
    warp-wide fragment load reads 32 consecutive vectors (no bank
    conflicts).  Rows beyond m and columns beyond k are zero."""
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
    stride: int
    skip: bool
    cpre: bool
    tiles: int
    nslots: int
    cnt: np.ndarray
    kidx: np.ndarray
    table: np.ndarray

    @property
    def nthreads(self):
        return WARP*self.mwarps*self.nwarps

    @property
    def shared(self):
        return 8*self.nbuf*(self.BM*self.BK + self.BK*self.stride)

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
    """(effective wm, m-blocks, stages, BM, BN, BK, B row stride): wm is
    cut down to spread A's m-tiles evenly over the fewest m-blocks."""
    mt, kt = GEMM_SHAPES[shape]
    nmt = -(-m // mt)
    nmb = -(-nmt // (mwarps*wm))
    wm = -(-nmt // (nmb*mwarps))
    BK = kt*kstage
    BN = MMA_N*nwarps*wn
    return (wm, nmb, -(-k // BK), mwarps*wm*mt, BN, BK, mma_row_stride(BN))


def _gemm_pad(A, rows, cols):
    pad = np.zeros((rows, cols))
    pad[:A.shape[0], :A.shape[1]] = A
    return pad


def gemm_live_stages(A, shape, mwarps, nwarps, wm, wn, kstage, nbuf,
                     pad=None):
    """(m-blocks, stages) mask of the stages where an m-block's BM x BK slab
    of A has a non-zero: the stages it runs with skip."""
    m, k = A.shape
    _, nmb, nst, BM, _, BK, _ = gemm_geometry(m, k, shape, mwarps, nwarps,
                                              wm, wn, kstage, nbuf)
    if pad is None:
        pad = _gemm_pad(A, nmb*BM, nst*BK)
    return (pad != 0).reshape(nmb, BM, nst, BK).any(axis=(1, 3))


def gemm_fragment_sizes(shape):
    """Values per lane of the A, B and C fragments of an MMA shape."""
    mt, kt = GEMM_SHAPES[shape]
    return mt*kt // 32, kt // 4, mt*MMA_N // 32


def gemm_plan(A, shape, mwarps, nwarps, wm, wn, kstage, nbuf, skip=False,
              cpre=False, tiles=1):
    """The mma-gemm plan: skip, run only the stages where an m-block's
    slab of A has a non-zero; cpre, start the accumulators from beta*C
    (read before the k loop) instead of adding it at the end; tiles, the
    column tiles of BN a block computes in turn."""
    m, k = A.shape
    MT, KT = GEMM_SHAPES[shape]
    wm, nmb, nst, BM, BN, BK, S = gemm_geometry(m, k, shape, mwarps, nwarps,
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
    F = T[..., ac[..., 0], ac[..., 1]]          # [..., lane, na]
    F = F.reshape(F.shape[:-1] + (na // v, v))  # [..., lane, j, v]
    F = np.swapaxes(F, -3, -2)                  # [..., j, lane, v]
    # keep each m-block's live stages, in order, in its slots
    Fc = np.zeros((nmb, nslot) + F.shape[2:])
    for mb in range(nmb):
        Fc[mb, :cnt[mb]] = F[mb, kidx[mb, :cnt[mb]]]
    return GemmPlan(shape, MT, KT, na, nb, nc, v, mwarps, nwarps, wm, wn,
                    kstage, nbuf, nmb, nst, BM, BN, BK, S, skip, cpre, tiles,
                    nslot, cnt, kidx, Fc.reshape(-1))


def gemm_reference(plan, A, B):
    """Evaluate A @ B (B of any width) the way the mma-gemm kernel does: per
    block, warp, stage and k-step, fragments read from plan.table and from B
    at the kernel's offsets, one NumPy-modelled mma at a time; for tests."""
    P = plan
    m, k = A.shape
    n = B.shape[1]
    lanes = np.arange(32)
    g, t = lanes // 4, lanes % 4
    nnb = -(-n // P.BN)
    Bp = np.zeros((P.nstages*P.BK, nnb*P.BN))
    Bp[:k, :n] = B
    _, _, cc = gemm_coords(P.shape)
    C = np.zeros((P.nmb*P.BM, nnb*P.BN))
    per_mb = P.nslots*P.BM*P.BK
    nvec = P.a_per_lane // P.a_vec
    for mb in range(P.nmb):
        tab = P.table[mb*per_mb:(mb + 1)*per_mb]
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
                            row = kst*P.BK + ks*P.mma_k + t
                            for nt in range(P.wn):
                                col = col0 + (wx*P.wn + nt)*MMA_N + g
                                bf = np.stack([Bp[row + 4*i, col]
                                               for i in range(P.b_per_lane)],
                                              axis=1)
                                for mt in range(P.wm):
                                    acc[mt, nt] = gemm_model(
                                        P.shape, af[mt], bf, acc[mt, nt])
                    for mt in range(P.wm):
                        r0 = mb*P.BM + (wy*P.wm + mt)*P.mma_m
                        for nt in range(P.wn):
                            c0 = col0 + (wx*P.wn + nt)*MMA_N
                            C[r0 + cc[..., 0], c0 + cc[..., 1]] = acc[mt, nt]
    return C[:m, :n]
