"""HIP generator for AMD CDNA GPUs (MI250X gfx90a, MI300X gfx942, MI355X
gfx950)."""

import numbers

import numpy as np

from gimmik.analysis import DENSE_DENSITY
from gimmik.base import MatMul, Row, check_table
from gimmik.families.bstream import Bstream
from gimmik.families.bstream_msplit import BstreamMsplit
from gimmik.families.cstream import Cstream
from gimmik.families.cstream_ksplit import CstreamKsplit
from gimmik.families.mfma_dense import MfmaDense
from gimmik.families.mfma_gemm import MfmaGemm
from gimmik.fragments import mfma_tiled
from gimmik.order import order_candidates, placed_rows
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

# mfma-gemm rows (gimmik.fragments.mfma_tiled): wavefronts mwaves x nwaves,
# each with wm x wn 16x16 accumulator tiles, stages of 4*kstage columns of
# A; vec 2: 16-byte B/C accesses.  Offered (gate 'gemm') where the MFMA gate
# holds and m or k exceeds mfma_tiled.MIN_DIM, after the mfma-dense rows
# (first of the two where mfma-dense's rows do not reach
# mfma_tiled.MIN_WAVES waves per SIMD: then gimmik.order's rules for the
# streaming families place theirs before them).
MFMA_GEMM_ROWS = [
    Row(f'gemm-{p["mwaves"]}x{p["nwaves"]}-{p["wm"]}x{p["wn"]}'
        f'-k{p["kstage"]}-vec{vec}', MfmaGemm, dict(p, vec=vec), gate,
        tail=True)
    for p in (dict(mwaves=2, nwaves=2, wm=4, wn=4, kstage=1),
              dict(mwaves=2, nwaves=2, wm=2, wn=4, kstage=2),
              dict(mwaves=2, nwaves=2, wm=2, wn=4, kstage=1),
              dict(mwaves=4, nwaves=1, wm=2, wn=4, kstage=2),
              dict(mwaves=2, nwaves=2, wm=4, wn=2, kstage=2))
    for vec, gate in ((2, 'mfma gemm w2'), (1, 'mfma gemm scalar'))]


# The HIP candidate table (gimmik.base.Row: id, family, parameters, the
# names of the conditions of _gates that must hold).  gimmik.order's rules
# place the rows they name (by id) first; the tail rows follow in table
# order.  The operators mfma-dense takes are offered the table order.
CANDIDATES = [
    # id                 family          parameters                  gates
    # mfma-dense: msplit wavefronts per block (1: direct from global, more:
    # B staged in LDS chunks of kchunk k-tiles in nbuf buffers), pipe 0/1/2
    # (see the template), vec 2: 16-byte B/C accesses (needs even aligne).
    Row('mfma-ms4-pipe2-vec2', MfmaDense,
        dict(msplit=4, pipe=2, nbuf=2, kchunk=4, vec=2),
        'mfma w2', tail=True),
    Row('mfma-ms4-pipe2-vec1', MfmaDense,
        dict(msplit=4, pipe=2, nbuf=2, kchunk=4, vec=1),
        'mfma scalar', tail=True),
    Row('mfma-ms2-pipe2-vec2', MfmaDense,
        dict(msplit=2, pipe=2, nbuf=2, kchunk=4, vec=2),
        'mfma w2', tail=True),
    Row('mfma-ms2-pipe2-vec1', MfmaDense,
        dict(msplit=2, pipe=2, nbuf=2, kchunk=4, vec=1),
        'mfma scalar', tail=True),
    Row('mfma-ms4-pipe1-vec2', MfmaDense,
        dict(msplit=4, pipe=1, nbuf=2, kchunk=4, vec=2),
        'mfma w2', tail=True),
    Row('mfma-ms4-pipe1-vec1', MfmaDense,
        dict(msplit=4, pipe=1, nbuf=2, kchunk=4, vec=1),
        'mfma scalar', tail=True),
    Row('mfma-ms1-pipe1-vec2', MfmaDense,
        dict(msplit=1, pipe=1, vec=2),
        'mfma w2', tail=True),
    Row('mfma-ms1-pipe1-vec1', MfmaDense,
        dict(msplit=1, pipe=1, vec=1),
        'mfma scalar', tail=True),
    Row('mfma-ms4-pipe0-vec2', MfmaDense,
        dict(msplit=4, pipe=0, nbuf=1, kchunk=8, vec=2),
        'mfma w2', tail=True),
    Row('mfma-ms4-pipe0-vec1', MfmaDense,
        dict(msplit=4, pipe=0, nbuf=1, kchunk=8, vec=1),
        'mfma scalar', tail=True),
    Row('mfma-ms2-pipe0-vec2', MfmaDense,
        dict(msplit=2, pipe=0, nbuf=1, kchunk=8, vec=2),
        'mfma w2', tail=True),
    Row('mfma-ms2-pipe0-vec1', MfmaDense,
        dict(msplit=2, pipe=0, nbuf=1, kchunk=8, vec=1),
        'mfma scalar', tail=True),
    Row('mfma-ms1-pipe0-vec2', MfmaDense,
        dict(msplit=1, pipe=0, vec=2),
        'mfma w2', tail=True),
    Row('mfma-ms1-pipe0-vec1', MfmaDense,
        dict(msplit=1, pipe=0, vec=1),
        'mfma scalar', tail=True),
    *MFMA_GEMM_ROWS,
    # bstream-msplit: bsz B rows per LDS stage (two stages); width 2 with
    # bsz 16 takes 32 KiB of LDS per block, one block per 2 SIMDs of a CU
    # (1 wave/SIMD at msplit 2), bsz 8 half that (2 waves/SIMD)
    Row('msplit2-w2', BstreamMsplit,
        dict(width=2, msplit=2, bsz=16, ntload=True), 'w2', tail=True),
    Row('msplit2-w2-bsz8', BstreamMsplit,
        dict(width=2, msplit=2, bsz=8, ntload=True), 'w2', tail=True),
    Row('msplit2-w1', BstreamMsplit,
        dict(width=1, msplit=2, bsz=16, ntload=True)),
    Row('msplit4-w2', BstreamMsplit,
        dict(width=2, msplit=4, bsz=16, ntload=True), 'w2', tail=True),
    Row('msplit2-w2-preload', BstreamMsplit,
        dict(width=2, msplit=2, bsz=16, ntload=True, preload_c=True),
        'w2 beta', tail=True),
    Row('msplit4-w1', BstreamMsplit,
        dict(width=1, msplit=4, bsz=16, ntload=False)),
    Row('bstream-w2', Bstream, dict(width=2), 'w2', tail=True),
    Row('bstream-w1', Bstream, dict(width=1)),
    Row('cstream-w2', Cstream, dict(width=2), 'w2', tail=True),
    Row('cstream-w1', Cstream, dict(width=1)),
    Row('ksplit2', CstreamKsplit, dict(ksplit=2)),
    Row('ksplit4', CstreamKsplit, dict(ksplit=4)),
    Row('ksplit2-preload', CstreamKsplit, dict(ksplit=2, preload_c=True),
        'beta'),
    Row('msplit2-w1-preload', BstreamMsplit,
        dict(width=1, msplit=2, bsz=16, ntload=False, preload_c=True),
        'beta', tail=True),
]

GATES = ('w2', 'scalar', 'beta', 'mfma', 'gemm')


def _gates(mm, dtype, arch, warp_size=64):
    """The named conditions a candidate row may require (GATES)."""
    return {
        'w2': mm.width2_ok(),
        'scalar': not mm.width2_ok(),
        'beta': mm.beta != 0,
        'mfma': mfma_ok(mm.info, dtype, arch, warp_size),
        'gemm': max(mm.info.m, mm.info.k) > mfma_tiled.MIN_DIM,
    }


def mfma_ok(info, dtype, arch, warp_size=64):
    """The gate of the mfma-dense family (see MFMA_ARCHS)."""
    return (dtype == np.float64 and arch.split(':')[0] in MFMA_ARCHS
            and warp_size == 64 and info.density >= DENSE_DENSITY)


check_table(CANDIDATES, GATES, 'hip', placed_rows('hip', CANDIDATES))


class HIPMatMul(MatMul):
    platform = 'hip'
    gate_names = GATES

    def _check_opts(self, gcn_arch='gfx942', warp_size=64):
        if not isinstance(gcn_arch, str) or not GFX_ARCH.match(gcn_arch):
            raise ValueError(f'gcn_arch {gcn_arch!r} is not a gfx arch name')
        # an integral 32 or 64: the launch bounds are printed from it
        if isinstance(warp_size, bool) or not isinstance(
                warp_size, numbers.Integral) or warp_size not in (32, 64):
            raise ValueError(f'warp_size must be 32 or 64, not {warp_size!r}')
        return {'gcn_arch': gcn_arch, 'warp_size': warp_size}

    def warp_size(self, opts):
        return opts['warp_size']

    def stream_threads(self, opts):
        return 2*opts['warp_size']

    def _candidates(self, dtype, gcn_arch, warp_size):
        out = self._from_table(
            CANDIDATES, _gates(self, dtype, gcn_arch, warp_size), dtype,
            {'gcn_arch': gcn_arch, 'warp_size': warp_size})

        # drop the candidates whose register estimate exceeds their
        # family's limit (they would spill), keeping at least the least
        # demanding of those with a limit
        est = []
        for c in out:
            kern = self.kernel(c, dtype)
            limit = kern.register_limit()
            est.append(None if limit is None else (kern.registers(), limit))
        fits = [e is None or e[0] is None or e[0] <= e[1] for e in est]
        limited = [(e[0], i) for i, e in enumerate(est)
                   if e is not None and e[0] is not None]
        if limited and not any(fits[i] for _, i in limited):
            fits[min(limited)[1]] = True
        return order_candidates(self.info, [c for c, f in zip(out, fits) if f],
                                'hip', beta=self.beta, n=self.n)
