"""HIP generator for AMD CDNA GPUs (MI250X gfx90a, MI300X gfx942, MI355X
gfx950)."""

import numbers

import numpy as np

from gimmik.analysis import DENSE_DENSITY, sparse_gemm_worth_it
from gimmik.base import MatMul, Row, check_table
from gimmik.families.bstream import Bstream
from gimmik.families.bstream_mgroup import BstreamMgroup
from gimmik.families.bstream_msplit import BstreamMsplit
from gimmik.families.cstream import Cstream
from gimmik.families.cstream_kparts import CstreamKparts
from gimmik.families.cstream_ksplit import CstreamKsplit
from gimmik.families.cstream_mblock import CstreamMblock, mblock_rows
from gimmik.families.mfma_dense import MfmaDense
from gimmik.families.mfma_gemm import MfmaGemm
from gimmik.fragments import mfma_tiled
from gimmik.order import order_candidates, placed_rows
from gimmik.targets import HIP
from gimmik.validate import GFX_ARCH

# The mfma-dense family (gate 'mfma') is offered only where all of these hold:
# - dtype float64: it is built on v_mfma_f64_16x16x4f64 (f32 would need a
#   different instruction and output layout);
# - gcn_arch (feature suffixes stripped) in MFMA_ARCHS, the CDNA2/3/4 parts
#   with that instruction: gfx908 has matrix cores but no f64 MFMA (its back
#   end cannot select it) and RDNA has no MFMA at all;
# - wavefronts of 64 lanes: the fragment layout is that of a wave64;
# - A dense, density >= analysis.DENSE_DENSITY: the MFMA multiplies whole
#   16x4 tiles, so for sparse A it does mostly useless work and the
#   streaming families, which skip every zero, move the same bytes.
MFMA_ARCHS = frozenset({'gfx90a', 'gfx940', 'gfx941', 'gfx942', 'gfx950'})

# A candidate whose register estimate (its family's registers(): live
# values in 32-bit words plus a margin for addresses and indices) exceeds
# its family's register_limit() (200 VGPRs) is not offered: the compiler
# would spill it to scratch (clang-19 spills cstream/width2 of
# p3-pyr-m132, 90 live B rows, on gfx942) or run it at one wave per SIMD.
# A block of w wavefronts gets at most 512/ceil(w/4) VGPRs a lane (a CU's
# four SIMDs share its waves), so larger blocks have a lower limit
# (Target.lane_registers, simds).  No fallback: where
# nothing fits, the register-bounded rows below are what is offered.

# The families whose two-column threads load both columns even where the
# second is past n (Family.padded_tail; kernels/hip/base.mako, per_column)
# do so where no pair can be ragged (n baked and even) or A uses fewer rows
# of B than this (two load batches): with more, the per-row test of the ragged
# pair's stores made clang-19 keep the whole body live (cstream/width2 of
# p4-tet-m0, 35 rows, n at run time: 256 VGPRs + 256 AGPRs and 412 bytes of
# scratch), and each copy has batches enough
PADDED_TAIL_MAX_ROWS = 16

# mfma-gemm rows (gimmik.fragments.mfma_tiled): wavefronts mwaves x nwaves,
# each with wm x wn 16x16 accumulator tiles, stages of 4*kstage columns of
# A; vec 2: 16-byte B/C accesses.  Offered (gate 'gemm') where the MFMA gate
# holds and m or k exceeds mfma_tiled.MIN_DIM.
MFMA_GEMM_ROWS = [
    Row(f'gemm-{p["mwaves"]}x{p["nwaves"]}-{p["wm"]}x{p["wn"]}'
        f'-k{p["kstage"]}-vec{vec}', MfmaGemm, dict(p, vec=vec), gate)
    for p in (dict(mwaves=2, nwaves=2, wm=4, wn=4, kstage=1),
              dict(mwaves=2, nwaves=2, wm=2, wn=4, kstage=2),
              dict(mwaves=2, nwaves=2, wm=2, wn=4, kstage=1),
              dict(mwaves=4, nwaves=1, wm=2, wn=4, kstage=2),
              dict(mwaves=2, nwaves=2, wm=4, wn=2, kstage=2))
    for vec, gate in ((2, 'mfma gemm w2'), (1, 'mfma gemm scalar'))]

# mfma-gemm for sparse operators whose non-zeros fill few slabs once A's
# rows and used columns are reordered (gate 'mfmasparse': the MFMA arch
# gate, A sparser than DENSE_DENSITY, analysis.sparse_gemm_worth_it and C
# not read: prisms of orders 4 and up); a row is dropped where gemm_order
# finds no better order (MfmaGemm.adapt).  With beta*C read its epilogue
# waits for each row's loads of C before its stores (clang-19, the prisms'
# M3/M6: 5-11 full waits in 23-43 loads, over the offer audit's batching
# bound), and the twin gained little there (CUDA in context, pri m3/m6:
# -1.1 % to +1.3 %, bench/results/cuda-h100-context-reorder3.csv)
MFMA_SPARSE_ROWS = [
    Row(f'sparse-{p["mwaves"]}x{p["nwaves"]}-{p["wm"]}x{p["wn"]}'
        f'-k{p["kstage"]}-vec{vec}', MfmaGemm, dict(p, vec=vec, reorder=True),
        gate)
    for p in (dict(mwaves=2, nwaves=2, wm=2, wn=4, kstage=2),
              dict(mwaves=4, nwaves=1, wm=2, wn=4, kstage=2),
              dict(mwaves=2, nwaves=2, wm=4, wn=2, kstage=2))
    for vec, gate in ((2, 'mfmasparse w2'), (1, 'mfmasparse scalar'))]

# the same tilings with each m-block's stages over its own used columns
# only (compact; a row dropped where that saves too little:
# analysis.compact_worth_it).  The CUDA twin, H100, n = 110080:
# p6-pri-m460 0.80 -> 0.91 of copy, p5-pri-m460 0.88 -> 0.915
# (bench/results/pyfr-walk-h100-compact.csv)
MFMA_COMPACT_ROWS = [
    Row(f'{r.id}-compact', MfmaGemm,
        {**{x: v for x, v in r.params.items() if x != 'reorder'},
         'compact': True}, ' '.join(r.gates))
    for r in MFMA_SPARSE_ROWS]


# Rows of A beyond which the register-bounded rows are offered (gate
# 'bigm')
BIG_M = 64

# Register-bounded rows for operators with many rows (gate 'bigm': m >
# BIG_M), whose per-lane state does not grow with m and k:
# - bstream-mgroup: row groups of at most msplit*rows rows, one a block,
#   B staged through LDS in chunks of bsz rows (bsz/msplit loads a wave a
#   chunk, one wait for all of them), one buffer of bsz*64 values
#   (clang-19, p4-hex-m460: 70-114 VGPRs, no scratch, 2 waves a SIMD,
#   one vmcnt(0) per 11-13 loads);
# - cstream-mblock: `groups` row groups, one a block, B read directly into
#   registers (the register filter drops the group counts whose groups
#   hold too many B values; clang-19: 28-126 VGPRs, mostly 8 waves a
#   SIMD, a few vmcnt(0) waits in all); 6 and 12 groups besides the
#   powers of two (groups along a tensor-product operator's planes of
#   points: 6 groups of p5-hex-m132 read each B row 2.7 times, 8 and 16
#   3.0 and 3.5 times; not on CUDA, where ptxas spilled 9 of their 173
#   candidates on the suites); `shared`: the rows grouped by the B rows
#   they share (analysis.shared_row_groups); `part`: groups of about 22
#   and 16 rows cut to read few B rows together (analysis.partition_rows;
#   on the CUDA twin 0.90-0.91 of copy on the hex divergence of 343 rows,
#   where contiguous groups run at 0.80); one group a block, not CUDA's
#   two (`stack`): the pair gains by L1 serving the B rows both read, and
#   a CU's vector L1 (16 KB gfx90a, 32 KB gfx942) holds 16-32 of the ~270
#   B rows of 128 columns such a pair reads (docs/design.md).
# (bstream-warprows is not offered on HIP: at 16 waves a block, 128 VGPRs
# a lane, it spilled on a p5-hex-m3-shaped operator, and its stores of
# loads straight into LDS wait once every 1-3 loads.)
BOUNDED_ROWS = [
    Row('mblock-g32', CstreamMblock, dict(width=1, groups=32), 'bigm'),
    Row('mgroup-4x16-b64', BstreamMgroup,
        dict(msplit=4, rows=16, bsz=64, nbuf=1, ntload=True), 'bigm'),
    Row('mblock-g64', CstreamMblock, dict(width=1, groups=64), 'bigm'),
    Row('mblock-g16', CstreamMblock, dict(width=1, groups=16), 'bigm'),
    Row('mgroup-2x16-b32', BstreamMgroup,
        dict(msplit=2, rows=16, bsz=32, nbuf=1, ntload=True), 'bigm'),
    Row('mblock-g128', CstreamMblock, dict(width=1, groups=128), 'bigm'),
    Row('mgroup-4x8-b64', BstreamMgroup,
        dict(msplit=4, rows=8, bsz=64, nbuf=1), 'bigm'),
    Row('mblock-g64-w2', CstreamMblock, dict(width=2, groups=64),
        'bigm w2'),
    Row('mblock-g8', CstreamMblock, dict(width=1, groups=8), 'bigm'),
    Row('mblock-g6', CstreamMblock, dict(width=1, groups=6), 'bigm'),
    Row('mblock-g12', CstreamMblock, dict(width=1, groups=12), 'bigm'),
    Row('mblock-g128-w2', CstreamMblock, dict(width=2, groups=128),
        'bigm w2'),
    Row('mblock-s32', CstreamMblock, dict(width=1, shared=32), 'bigm'),
    Row('mblock-s64', CstreamMblock, dict(width=1, shared=64), 'bigm'),
    Row('mblock-p22', CstreamMblock, dict(width=1, part=22), 'bigm'),
    Row('mblock-p16', CstreamMblock, dict(width=1, part=16), 'bigm'),
    # cstream-kparts (CstreamKparts.adapt: where its parts read each B row
    # about once), eight waves a block: a slot of 64 columns, so a CU's
    # 64 KiB of LDS holds 128 slots, one block (clang-19, gfx90a and
    # gfx942, the hex m132 of 125 and 216 rows: 56-70 VGPRs, no scratch,
    # 2-4 waves a SIMD, one vmcnt(0) per 8.5-43 loads, a warp's groups
    # loaded in batches of at least Target.batch_loads B rows)
    Row('kparts3-g1-w8', CstreamKparts,
        dict(parts=3, groups=1, shared=32, warps=8), 'bigm'),
    Row('kparts3-g2-w8', CstreamKparts,
        dict(parts=3, groups=2, shared=32, warps=8), 'bigm'),
]
# cstream-mblock needs at least this many rows a group on HIP (a group of
# one row waits for its B values as soon as it loads them)
MBLOCK_MIN_ROWS = 2

# The HIP candidate table (gimmik.base.Row: id, family, parameters, the
# names of the conditions of _gates that must hold).  The rows offered
# are ordered by gimmik.cost's estimate (gimmik.order), not by their place
# here.
CANDIDATES = [
    # id                 family          parameters                  gates
    # mfma-dense: msplit wavefronts per block (1: direct from global, more:
    # B staged in LDS chunks of kchunk k-tiles in nbuf buffers), pipe 0/1/2
    # (see the template), vec 2: 16-byte B/C accesses (needs even aligne).
    *[Row(f'mfma-ms{p["msplit"]}-pipe{p["pipe"]}-vec{vec}', MfmaDense,
          dict(p, vec=vec), gate)
      for p in (dict(msplit=4, pipe=2, nbuf=2, kchunk=4),
                dict(msplit=2, pipe=2, nbuf=2, kchunk=4),
                dict(msplit=4, pipe=1, nbuf=2, kchunk=4),
                dict(msplit=1, pipe=1),
                dict(msplit=4, pipe=0, nbuf=1, kchunk=8),
                dict(msplit=2, pipe=0, nbuf=1, kchunk=8),
                dict(msplit=1, pipe=0))
      for vec, gate in ((2, 'mfma w2'), (1, 'mfma scalar'))],
    *MFMA_GEMM_ROWS,
    *MFMA_SPARSE_ROWS,
    *MFMA_COMPACT_ROWS,
    # bstream-msplit: bsz B rows per LDS stage (two stages); width 2 with
    # bsz 16 takes 32 KiB of LDS per block, one block per 2 SIMDs of a CU
    # (1 wave/SIMD at msplit 2), bsz 8 half that (2 waves/SIMD)
    Row('msplit2-w2', BstreamMsplit,
        dict(width=2, msplit=2, bsz=16, ntload=True), 'w2'),
    Row('msplit2-w2-bsz8', BstreamMsplit,
        dict(width=2, msplit=2, bsz=8, ntload=True), 'w2'),
    Row('msplit2-w1', BstreamMsplit,
        dict(width=1, msplit=2, bsz=16, ntload=True)),
    Row('msplit4-w2', BstreamMsplit,
        dict(width=2, msplit=4, bsz=16, ntload=True), 'w2'),
    Row('msplit2-w2-preload', BstreamMsplit,
        dict(width=2, msplit=2, bsz=16, ntload=True, preload_c=True),
        'w2 beta'),
    Row('msplit4-w1', BstreamMsplit,
        dict(width=1, msplit=4, bsz=16, ntload=False)),
    Row('bstream-w2', Bstream, dict(width=2), 'w2'),
    Row('bstream-w1', Bstream, dict(width=1)),
    Row('cstream-w2', Cstream, dict(width=2), 'w2'),
    Row('cstream-w1', Cstream, dict(width=1)),
    Row('ksplit2', CstreamKsplit, dict(ksplit=2)),
    Row('ksplit4', CstreamKsplit, dict(ksplit=4)),
    Row('ksplit2-preload', CstreamKsplit, dict(ksplit=2, preload_c=True),
        'beta'),
    Row('msplit2-w1-preload', BstreamMsplit,
        dict(width=1, msplit=2, bsz=16, ntload=False, preload_c=True),
        'beta'),
    # where no two-column candidate is offered (gate 'w1only': odd aligne,
    # or n at run time under PyFR main's grid, MAX_OVERLAUNCH) the m-split
    # in the depths and load kinds the two-column rows had
    Row('msplit8-w1', BstreamMsplit,
        dict(width=1, msplit=8, bsz=16, ntload=True), 'w1only'),
    Row('msplit4-w1-nt', BstreamMsplit,
        dict(width=1, msplit=4, bsz=16, ntload=True), 'w1only'),
    Row('msplit2-w1-bsz8', BstreamMsplit,
        dict(width=1, msplit=2, bsz=8, ntload=True), 'w1only'),
    *BOUNDED_ROWS,
]

GATES = ('w2', 'scalar', 'w1only', 'beta', 'mfma', 'mfmasparse', 'gemm',
         'bigm')


def _gates(mm, dtype, arch, warp_size=64):
    """The named conditions a candidate row may require (GATES)."""
    return {
        'w2': mm.width2_ok(),
        'scalar': not mm.width2_ok(),
        'w1only': not mm.width2_ok() or mm.runtime_client_grid,
        'beta': mm.beta != 0,
        'mfma': mfma_ok(mm.info, dtype, arch, warp_size),
        'mfmasparse': (mfma_arch_ok(dtype, arch, warp_size)
                       and mm.beta == 0 and mm.info.density < DENSE_DENSITY
                       and sparse_gemm_worth_it(mm.info)),
        'gemm': max(mm.info.m, mm.info.k) > mfma_tiled.MIN_DIM,
        'bigm': mm.info.m > BIG_M,
    }


def mfma_arch_ok(dtype, arch, warp_size=64):
    """f64 on an arch with the f64 MFMA, wave64 (see MFMA_ARCHS)."""
    return (dtype == np.float64 and arch.split(':')[0] in MFMA_ARCHS
            and warp_size == 64)


def mfma_ok(info, dtype, arch, warp_size=64):
    """The gate of the mfma-dense family (see MFMA_ARCHS)."""
    return (mfma_arch_ok(dtype, arch, warp_size)
            and info.density >= DENSE_DENSITY)


check_table(CANDIDATES, GATES, 'hip', placed_rows('hip', CANDIDATES))


class HIPMatMul(MatMul):
    platform = 'hip'
    target = HIP
    table = CANDIDATES
    gate_names = GATES
    client_grid_x = True        # PyFR main (gimmik.pyfr)

    def _check_opts(self, gcn_arch='gfx942', warp_size=64):
        if not isinstance(gcn_arch, str) or not GFX_ARCH.match(gcn_arch):
            raise ValueError(f'gcn_arch {gcn_arch!r} is not a gfx arch name')
        # an integral 32 or 64: the launch bounds are printed from it
        if isinstance(warp_size, bool) or not isinstance(
                warp_size, numbers.Integral) or warp_size not in (32, 64):
            raise ValueError(f'warp_size must be 32 or 64, not {warp_size!r}')
        return {'gcn_arch': gcn_arch, 'warp_size': warp_size}

    def _candidates(self, dtype, gcn_arch, warp_size):
        out = self._from_table(
            self.table, _gates(self, dtype, gcn_arch, warp_size), dtype,
            {'gcn_arch': gcn_arch, 'warp_size': warp_size},
            adapt=self._adapt)
        return order_candidates(self.info, out, 'hip', beta=self.beta,
                                n=self.n, mm=self, dtype=dtype)

    def _adapt(self, row, params):
        """HIP's own binding of a row: cstream-mblock only with at least
        MBLOCK_MIN_ROWS rows a group."""
        if (row.family is CstreamMblock and len(mblock_rows(
                self.A, params))*MBLOCK_MIN_ROWS > self.info.m):
            return None
        return params

    def _platform_context(self, kern):
        even_n = self.n is not None and self.n % 2 == 0
        few_rows = len(kern.info.bix) < PADDED_TAIL_MAX_ROWS
        # the families' switches (Family.no_packed_f32, padded_tail)
        return {'no_packed_f32': (kern.no_packed_f32 and kern.itemsize == 4
                                  and kern.geometry().width == 1),
                'padded_tail': (kern.padded_tail
                                and kern.geometry().width == 2
                                and (even_n or few_rows))}

    def registers_fit(self, kern):
        """Whether a candidate's register estimate is within its family's
        limit and what a lane of its block may have (the target's
        lane_registers shared by the block's waves on each SIMD): no
        fallback, a candidate that would spill is never offered."""
        est, limit = kern.registers(), kern.register_limit()
        if est is None or limit is None:
            return True
        block = kern.geometry().block
        waves = -(-block[0]*block[1]*block[2] // kern.warp)
        t = self.target
        return est <= min(limit, t.lane_registers // -(-waves // t.simds))
