"""The bake behind HIP's mfma-gemm family: a 2-D tiled f64 GEMM on AMD's matrix
cores (``__builtin_amdgcn_mfma_f64_16x16x4f64``) for the dense operators whose
m or k is too large for mfma-dense to keep every accumulator of a wavefront's
m-tiles in registers.  Stages of A's slice and B's tile go through two LDS
buffers a stage ahead; lane columns are paired for 16-byte B reads and C
stores; B past n and k is staged as zeros so every MFMA runs wave-uniform."""

from dataclasses import dataclass, replace

import numpy as np

from gimmik import analysis
from gimmik.analysis import reordered, useful_slab_order
from gimmik.fragments.mfma import (MFMA_K, MFMA_M, MFMA_N, WAVE,
                                   lane_coords, mfma_f64_16x16x4)

# Where the MFMA gate holds, the family is offered for the operators whose
# m or k exceeds this (gimmik.hip).
MIN_DIM = 128

# Registers (per lane) of a CDNA2/3 SIMD: VGPRs and AGPRs share 512; a
# wavefront's total is roundup4(arch VGPRs) + AGPRs, allocated in granules of 8
# (facts section 5)
SIMD_REGISTERS = 512
REGISTER_GRANULE = 8
CU_LDS = 64*1024
SIMDS_PER_CU = 4

# A candidate must reach this many waves per SIMD by its register and LDS
# estimate (and does, by clang-19's report, on the PyFR suite).
MIN_WAVES = 2

# Extra VGPRs of a candidate beyond its live data: addresses, indices,
# loop counters, the epilogue's C values (calibrated on clang-19 reports of
# the PyFR suite, see bench/results/hip-mfma-isa.csv).
EST_MARGIN = 32

# Doubles of padding after each staged B row, so that the four rows g a
# wavefront reads at once start on different LDS banks.
B_ROW_PAD = 4


# -- tiling ------------------------------------------------------------------
def geometry_of(m, k, mwaves, nwaves, wm, wn, kstage, vec=2):
    """The block geometry of a parameter set for an m x k operator."""
    if mwaves < 1 or nwaves < 1 or mwaves*nwaves*WAVE > 1024:
        raise ValueError('mwaves*nwaves wavefronts must be 1..16')
    if wm < 1 or wn < 2 or wn % 2 or kstage < 1:
        raise ValueError('wm >= 1, wn even >= 2 and kstage >= 1 are needed')
    if vec not in (1, 2):
        raise ValueError('vec must be 1 or 2')
    mtiles = -(-m // MFMA_M)
    m_blocks = -(-mtiles // (mwaves*wm))
    wm = -(-mtiles // (m_blocks*mwaves))
    block_m = mwaves*wm*MFMA_M
    block_n = nwaves*wn*MFMA_N
    block_k = kstage*MFMA_K
    stages = -(-k // block_k)
    stride = block_n + B_ROW_PAD
    nthreads = WAVE*mwaves*nwaves
    lds = 2*8*(block_m*block_k + block_k*stride)
    return dict(wm=wm, m_blocks=m_blocks, block_m=block_m, block_n=block_n,
                block_k=block_k, stages=stages, b_stride=stride,
                nthreads=nthreads, lds_bytes=lds,
                a_chunks=block_m*block_k//2, b_chunks=block_k*block_n//2)


# -- registers and occupancy ------------------------------------------------
def register_estimate(params, m, k):
    """(arch VGPRs, AGPRs) a candidate needs: at MIN_WAVES waves a SIMD
    clang-19 keeps the accumulators in arch VGPRs, no AGPRs."""
    g = geometry_of(m, k, **params)
    p = dict(params, wm=g['wm'])
    acc = 8*p['wm']*p['wn']
    chunks = (-(-g['a_chunks'] // g['nthreads'])
              + -(-g['b_chunks'] // g['nthreads']))
    frags = 2*p['kstage']*(p['wm'] + p['wn'])
    return EST_MARGIN + acc + 4*chunks + frags, 0


def waves_per_simd(arch_vgprs, agprs, lds_bytes=0, waves_per_block=1):
    """Waves per SIMD of a kernel by the facts' occupancy rule (registers)
    and by its LDS use (blocks per CU times their wavefronts, spread over
    the 4 SIMDs)."""
    total = -(-arch_vgprs // 4)*4 + agprs
    total = -(-total // REGISTER_GRANULE)*REGISTER_GRANULE
    waves = min(8, SIMD_REGISTERS // max(total, 1))
    if lds_bytes:
        blocks = CU_LDS // lds_bytes
        waves = min(waves, blocks*waves_per_block // SIMDS_PER_CU)
    return waves


def waves_estimate(params, m, k):
    g = geometry_of(m, k, **params)
    vg, ag = register_estimate(params, m, k)
    return waves_per_simd(vg, ag, g['lds_bytes'],
                          params['mwaves']*params['nwaves'])


# -- the plan: A baked in fragment order --------------------------------------
@dataclass
class MfmaGemmPlan:
    """An mfma-gemm kernel for one operator: ``table`` is A in fragment
    order a live slab a slot, one linear copy into LDS."""
    m: int
    k: int
    mwaves: int
    nwaves: int
    wm: int
    wn: int
    kstage: int
    vec: int
    m_blocks: int
    stages: int
    block_m: int
    block_n: int
    block_k: int
    b_stride: int
    slots: int
    live_count: np.ndarray     # (m_blocks,)
    live_stages: np.ndarray    # (m_blocks, slots)
    table: np.ndarray          # flat, m_blocks*slots*block_m*block_k
    # reorder: the plan's row i is A's row rows[i] and its k index j A's
    # column cols[j] (gemm_order); None: A's own order
    rows: tuple = None
    cols: tuple = None
    # compact: k index j of m-block mb's slots is A's column bcols[mb, j] (its
    # used columns in A's order, -1 past them); None: stages of A's columns
    bcols: np.ndarray = None

    @property
    def nwaves_total(self):
        return self.mwaves*self.nwaves

    @property
    def nthreads(self):
        return WAVE*self.nwaves_total

    @property
    def block(self):
        return (WAVE, self.nwaves_total, 1)

    @property
    def lds_bytes(self):
        """Two stages of A and B, and where A is reordered the m-block's
        rows of C (ints)."""
        rows = 4*self.block_m if self.rows is not None else 0
        return 2*8*(self.block_m*self.block_k
                    + self.block_k*self.b_stride) + rows

    @property
    def all_live(self):
        """Every m-block runs every stage (no zero slab in A)."""
        return bool((self.live_count == self.stages).all())

    @property
    def slot_size(self):
        return self.block_m*self.block_k

    @property
    def a_chunks(self):
        return self.slot_size//2

    @property
    def b_chunks(self):
        return self.block_k*self.block_n//2

    @property
    def k_padded(self):
        """The last stage reaches past row k - 1 of B."""
        return self.stages*self.block_k > self.k

    @property
    def mfma_count(self):
        """v_mfma instructions of one stage (a wavefront's)."""
        return self.kstage*self.wm*self.wn

    @property
    def kernel_mfmas(self):
        """v_mfma instructions in the kernel: the stage loop's body and the
        last stage after it."""
        return 2*self.mfma_count

    def a_offset(self, wy, ks, i):
        """Offset in a slot of lane 0's value for (wy, k-step, m-tile)."""
        return ((wy*self.kstage + ks)*self.wm + i)*WAVE

    def column(self, wx, nt):
        """Block columns of n-tile nt of wavefront column wx, per t."""
        t = np.arange(MFMA_N)
        return wx*self.wn*MFMA_N + 32*(nt // 2) + 2*t + nt % 2


def gemm_order(A, mwaves, nwaves, wm, wn, kstage, vec=2):
    """The order of A's rows and used columns this parameter set's kernel
    runs A in (gimmik.analysis.useful_slab_order of its block_m x block_k
    slabs), or None."""
    g = geometry_of(*np.shape(A), mwaves, nwaves, wm, wn, kstage, vec)
    return useful_slab_order(A, g['block_m'], g['block_k'])


def compact_worth_it(A, mwaves, nwaves, wm, wn, kstage, vec=2):
    """gimmik.analysis.compact_worth_it for this parameter set's
    slabs."""
    g = geometry_of(*np.shape(A), mwaves, nwaves, wm, wn, kstage, vec)
    return analysis.compact_worth_it(A, g['block_m'], g['block_k'])


def plan(A, mwaves, nwaves, wm, wn, kstage, vec=2, reorder=False,
         compact=False):
    """The mfma-gemm plan of a parameter set for operator A (reorder,
    compact: B's rows gathered and C's scattered by its tables)."""
    A = np.asarray(A, dtype=np.float64)
    if compact:
        return _compact_plan(A, mwaves, nwaves, wm, wn, kstage, vec)
    rows = cols = None
    if reorder:
        order = gemm_order(A, mwaves, nwaves, wm, wn, kstage, vec)
        if order is not None:
            rows, cols = order.rows, order.cols
            A = reordered(A, rows, cols)
    m, k = A.shape
    g = geometry_of(m, k, mwaves, nwaves, wm, wn, kstage, vec)
    wm, nmb, nst = g['wm'], g['m_blocks'], g['stages']
    BM, BK = g['block_m'], g['block_k']
    pad = np.zeros((nmb*BM, nst*BK))
    pad[:m, :k] = A
    live = (pad != 0).reshape(nmb, BM, nst, BK).any(axis=(1, 3))
    cnt = live.sum(axis=1)
    slots = max(1, int(cnt.max()))
    kidx = np.zeros((nmb, slots), dtype=np.int64)
    for mb in range(nmb):
        kidx[mb, :cnt[mb]] = np.flatnonzero(live[mb])
    F = _fragments(pad, nmb, mwaves, wm, nst, kstage)
    tab = np.zeros((nmb, slots) + F.shape[2:])
    for mb in range(nmb):
        tab[mb, :cnt[mb]] = F[mb, kidx[mb, :cnt[mb]]]
    return MfmaGemmPlan(m, k, mwaves, nwaves, wm, wn, kstage, vec, nmb, nst,
                        BM, g['block_n'], BK, g['b_stride'], slots, cnt, kidx,
                        tab.reshape(-1), rows, cols)


def _fragments(pad, nmb, mwaves, wm, nst, kstage):
    """A padded to m-blocks x stages as [mb, st, wy, ks, i, lane]."""
    gg, t = lane_coords()
    # pad[mb, wy, i, r, st, ks, c] -> [mb, st, wy, ks, i, lane]
    T = pad.reshape(nmb, mwaves, wm, MFMA_M, nst, kstage, MFMA_K)
    F = T[:, :, :, t, :, :, gg]              # [lane, mb, wy, i, st, ks]
    return F.transpose(1, 4, 2, 5, 3, 0)     # [mb, st, wy, ks, i, lane]


def _compact_plan(A, mwaves, nwaves, wm, wn, kstage, vec):
    m, k = A.shape
    g = geometry_of(m, k, mwaves, nwaves, wm, wn, kstage, vec)
    wm, nmb = g['wm'], g['m_blocks']
    BM, BK = g['block_m'], g['block_k']
    rows, bcols, Ac, _ = analysis.compact_order(A, BM, BK)
    slots = bcols.shape[1] // BK
    cnt = analysis.compact_counts(bcols, BK)
    kidx = np.tile(np.arange(slots), (nmb, 1))
    # the m-blocks' compacted columns as one (m-blocks x slots) pattern
    pad = Ac.reshape(nmb*BM, slots*BK)
    F = _fragments(pad, nmb, mwaves, wm, slots, kstage)
    return MfmaGemmPlan(m, k, mwaves, nwaves, wm, wn, kstage, vec, nmb,
                        slots, BM, g['block_n'], BK, g['b_stride'], slots,
                        cnt, kidx, F.reshape(-1), rows, None, bcols)


def model_product(P, B):
    """A @ B the way the kernel computes it: per block, wavefront, live stage
    and k-step, A fragments read from P.table and B fragments from the staged
    tile at the kernel's offsets, one modelled MFMA at a time, and C written
    through the accumulator layout (a reordered plan on B's rows in its order,
    C's rows put back)."""
    B = np.asarray(B, dtype=np.float64)
    if P.rows is not None:
        cols = range(B.shape[0]) if P.cols is None else P.cols
        C = np.zeros((len(P.rows), B.shape[1]))
        C[list(P.rows)] = model_product(replace(P, rows=None, cols=None),
                                        B[list(cols)])
        return C
    n = B.shape[1]
    gg, t = lane_coords()
    nnb = -(-n // P.block_n)
    if P.bcols is not None:
        Bmb = analysis.compact_b_rows(B, P.bcols, nnb*P.block_n)
    else:
        Bp = np.zeros((P.stages*P.block_k, nnb*P.block_n))
        Bp[:P.k, :n] = B
    C = np.zeros((P.m_blocks*P.block_m, nnb*P.block_n))
    for mb in range(P.m_blocks):
        tab = P.table[mb*P.slots*P.slot_size:(mb + 1)*P.slots*P.slot_size]
        if P.bcols is not None:
            Bp = Bmb[mb]
        for cb in range(nnb):
            col0 = cb*P.block_n
            for wy in range(P.mwaves):
                for wx in range(P.nwaves):
                    acc = np.zeros((P.wm, P.wn, WAVE, 4))
                    for s in range(P.live_count[mb]):
                        st = P.live_stages[mb, s]
                        base = s*P.slot_size
                        for ks in range(P.kstage):
                            row = st*P.block_k + ks*MFMA_K + gg
                            for nt in range(P.wn):
                                bf = Bp[row, col0 + P.column(wx, nt)[t]]
                                for i in range(P.wm):
                                    o = base + P.a_offset(wy, ks, i)
                                    acc[i, nt] = mfma_f64_16x16x4(
                                        tab[o:o + WAVE], bf, acc[i, nt])
                    for i in range(P.wm):
                        r0 = mb*P.block_m + (wy*P.wm + i)*MFMA_M
                        for nt in range(P.wn):
                            cols = col0 + P.column(wx, nt)[t]
                            for v in range(4):
                                C[r0 + 4*v + gg, cols] = acc[i, nt, :, v]
    return C[:P.m, :n]
