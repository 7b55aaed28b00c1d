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
from gimmik.order import order_candidates
from gimmik.targets import HIP
from gimmik.validate import GFX_ARCH

# mfma-dense (gate 'mfma'): f64, wave64, dense A, and an arch with f64 MFMA
# (gfx908 has none; sparse A is mostly useless whole-tile work)
MFMA_ARCHS = frozenset({'gfx90a', 'gfx940', 'gfx941', 'gfx942', 'gfx950'})

# no fallback past register_limit(): clang-19 would spill to scratch, and the
# register-bounded rows below are offered instead

# padded-tail loads only below this many B rows: beyond, the ragged pair's
# store tests made clang-19 keep the whole body live (Family.padded_tail)
PADDED_TAIL_MAX_ROWS = 16

# mfma-gemm rows (gimmik.fragments.mfma_tiled): wavefronts mwaves x nwaves,
# each with wm x wn 16x16 accumulator tiles, stages of 4*kstage columns of A;
# vec 2: 16-byte B/C accesses
MFMA_GEMM_ROWS = [
    Row(MfmaGemm, dict(p, vec=vec), gate)
    for p in (dict(mwaves=2, nwaves=2, wm=4, wn=4, kstage=1),
              dict(mwaves=2, nwaves=2, wm=2, wn=4, kstage=2),
              dict(mwaves=2, nwaves=2, wm=2, wn=4, kstage=1),
              dict(mwaves=4, nwaves=1, wm=2, wn=4, kstage=2),
              dict(mwaves=2, nwaves=2, wm=4, wn=2, kstage=2))
    for vec, gate in ((2, 'mfma gemm w2'), (1, 'mfma gemm scalar'))]

# mfma-gemm on reordered sparse A, C not read: with beta the epilogue waits a
# row and the twin gained little (cuda-h100-context-reorder3.csv)
MFMA_SPARSE_ROWS = [
    Row(MfmaGemm, dict(p, vec=vec, reorder=True),
        gate)
    for p in (dict(mwaves=2, nwaves=2, wm=2, wn=4, kstage=2),
              dict(mwaves=4, nwaves=1, wm=2, wn=4, kstage=2),
              dict(mwaves=2, nwaves=2, wm=4, wn=2, kstage=2))
    for vec, gate in ((2, 'mfmasparse w2'), (1, 'mfmasparse scalar'))]

# compact: each m-block over its own used columns (pyfr-walk-h100-compact.csv)
MFMA_COMPACT_ROWS = [
    Row(MfmaGemm,
        {**{x: v for x, v in r.params.items() if x != 'reorder'},
         'compact': True}, ' '.join(r.gates))
    for r in MFMA_SPARSE_ROWS]


# Rows of A beyond which the register-bounded rows are offered (gate
# 'bigm')
BIG_M = 64

# gate 'bigm': per-lane state bounded whatever m and k (docs/design.md); no
# bstream-warprows: it spilled at 16 waves a block
BOUNDED_ROWS = [
    Row(CstreamMblock, dict(width=1, groups=32), 'bigm'),
    Row(BstreamMgroup,
        dict(msplit=4, rows=16, bsz=64, nbuf=1, ld='cs'), 'bigm'),
    Row(CstreamMblock, dict(width=1, groups=64), 'bigm'),
    Row(CstreamMblock, dict(width=1, groups=16), 'bigm'),
    Row(BstreamMgroup,
        dict(msplit=2, rows=16, bsz=32, nbuf=1, ld='cs'), 'bigm'),
    Row(CstreamMblock, dict(width=1, groups=128), 'bigm'),
    Row(BstreamMgroup,
        dict(msplit=4, rows=8, bsz=64, nbuf=1), 'bigm'),
    Row(CstreamMblock, dict(width=2, groups=64),
        'bigm w2'),
    Row(CstreamMblock, dict(width=1, groups=8), 'bigm'),
    Row(CstreamMblock, dict(width=1, groups=6), 'bigm'),
    Row(CstreamMblock, dict(width=1, groups=12), 'bigm'),
    Row(CstreamMblock, dict(width=2, groups=128),
        'bigm w2'),
    Row(CstreamMblock, dict(width=1, shared=32), 'bigm'),
    Row(CstreamMblock, dict(width=1, shared=64), 'bigm'),
    Row(CstreamMblock, dict(width=1, part=22), 'bigm'),
    Row(CstreamMblock, dict(width=1, part=16), 'bigm'),
    # cstream-kparts, eight waves a block: a CU's LDS holds one block's slots
    Row(CstreamKparts,
        dict(parts=3, groups=1, shared=32, warps=8), 'bigm'),
    Row(CstreamKparts,
        dict(parts=3, groups=2, shared=32, warps=8), 'bigm'),
]
# cstream-mblock needs at least this many rows a group on HIP (a group of
# one row waits for its B values as soon as it loads them)
MBLOCK_MIN_ROWS = 2

# The HIP candidate table (gimmik.base.Row), ordered by gimmik.cost, not here
CANDIDATES = [
    # mfma-dense: vec 2 (16-byte B/C accesses) needs an even aligne
    *[Row(MfmaDense,
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
    # bstream-msplit: bsz 8 halves bsz 16's LDS, for 2 waves a SIMD
    Row(BstreamMsplit,
        dict(width=2, msplit=2, bsz=16, ld='cs'), 'w2'),
    Row(BstreamMsplit,
        dict(width=2, msplit=2, bsz=8, ld='cs'), 'w2'),
    Row(BstreamMsplit,
        dict(width=1, msplit=2, bsz=16, ld='cs')),
    Row(BstreamMsplit,
        dict(width=2, msplit=4, bsz=16, ld='cs'), 'w2'),
    Row(BstreamMsplit,
        dict(width=2, msplit=2, bsz=16, ld='cs', preload_c=True),
        'w2 beta'),
    Row(BstreamMsplit,
        dict(width=1, msplit=4, bsz=16)),
    Row(Bstream, dict(width=2), 'w2'),
    Row(Bstream, dict(width=1)),
    Row(Cstream, dict(width=2), 'w2'),
    Row(Cstream, dict(width=1)),
    Row(CstreamKsplit, dict(ksplit=2)),
    Row(CstreamKsplit, dict(ksplit=4)),
    Row(CstreamKsplit, dict(ksplit=2, preload_c=True),
        'beta'),
    Row(BstreamMsplit,
        dict(width=1, msplit=2, bsz=16, preload_c=True),
        'beta'),
    # gate 'w1only': the two-column rows' m-splits where those are not offered
    Row(BstreamMsplit,
        dict(width=1, msplit=8, bsz=16, ld='cs'), 'w1only'),
    Row(BstreamMsplit,
        dict(width=1, msplit=4, bsz=16, ld='cs'), 'w1only'),
    Row(BstreamMsplit,
        dict(width=1, msplit=2, bsz=8, ld='cs'), 'w1only'),
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


check_table(CANDIDATES, GATES, 'hip')


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
        return order_candidates(self, out, dtype)

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
        return {'ld': kern.params.get('ld', 'plain'),
                'no_packed_f32': (kern.no_packed_f32 and kern.itemsize == 4
                                  and kern.geometry().width == 1),
                'padded_tail': (kern.padded_tail
                                and kern.geometry().width == 2
                                and (even_n or few_rows))}

    def registers_fit(self, kern):
        """Whether a candidate's register estimate fits its family's limit
        and its block's share of a SIMD's registers."""
        est, limit = kern.registers(), kern.register_limit()
        if est is None or limit is None:
            return True
        block = kern.geometry().block
        waves = -(-block[0]*block[1]*block[2] // kern.warp)
        t = self.target
        return est <= min(limit, t.lane_registers // -(-waves // t.simds))
