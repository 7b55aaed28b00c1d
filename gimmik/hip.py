"""HIP generator for AMD CDNA GPUs (MI250X gfx90a, MI300X gfx942, MI355X
gfx950)."""

import numbers
import re

import numpy as np

from gimmik.analysis import DENSE_DENSITY
from gimmik.base import MAX_SHARED, MatMul
from gimmik import fragments, plans

# gfx arch names (with optional feature suffixes such as :sramecc+:xnack-)
from gimmik.validate import GFX_ARCH as _ARCH  # noqa: E402

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

# A streaming candidate whose live values (plans.live_values, in 32-bit
# words, plus a margin for addresses and indices) exceed this many VGPRs is
# not offered: the compiler would spill it to scratch (clang-19 spilled
# cstream/width2 of p3-pyr-m132, 90 live B rows, on gfx942).  When no
# streaming candidate fits, the one that needs the fewest is still offered.
MAX_EST_VGPRS = 200
EST_MARGIN = 24
STREAMING = ('cstream', 'bstream', 'bstream-msplit', 'cstream-ksplit')

# The HIP candidate table.  Each row: family, parameters, and the condition
# (on the generator and the requested dtype/arch) under which it is offered.
# Order is the order of offering: PyFR only times the first few.
CANDIDATES = [
    # family            parameters                                 gate
    # mfma-dense: msplit wavefronts per block (1: direct from global, more:
    # B staged in LDS chunks of kchunk k-tiles in nbuf buffers), pipe 0/1/2
    # (see the template), vec 2: 16-byte B/C accesses (needs even aligne).
    ('mfma-dense', dict(msplit=4, pipe=2, nbuf=2, kchunk=4, vec=2),
     'mfma w2'),
    ('mfma-dense', dict(msplit=4, pipe=2, nbuf=2, kchunk=4, vec=1),
     'mfma scalar'),
    ('mfma-dense', dict(msplit=2, pipe=2, nbuf=2, kchunk=4, vec=2),
     'mfma w2'),
    ('mfma-dense', dict(msplit=2, pipe=2, nbuf=2, kchunk=4, vec=1),
     'mfma scalar'),
    ('mfma-dense', dict(msplit=4, pipe=1, nbuf=2, kchunk=4, vec=2),
     'mfma w2'),
    ('mfma-dense', dict(msplit=4, pipe=1, nbuf=2, kchunk=4, vec=1),
     'mfma scalar'),
    ('mfma-dense', dict(msplit=1, pipe=1, vec=2), 'mfma w2'),
    ('mfma-dense', dict(msplit=1, pipe=1, vec=1), 'mfma scalar'),
    ('mfma-dense', dict(msplit=4, pipe=0, nbuf=1, kchunk=8, vec=2),
     'mfma w2'),
    ('mfma-dense', dict(msplit=4, pipe=0, nbuf=1, kchunk=8, vec=1),
     'mfma scalar'),
    ('mfma-dense', dict(msplit=2, pipe=0, nbuf=1, kchunk=8, vec=2),
     'mfma w2'),
    ('mfma-dense', dict(msplit=2, pipe=0, nbuf=1, kchunk=8, vec=1),
     'mfma scalar'),
    ('mfma-dense', dict(msplit=1, pipe=0, vec=2), 'mfma w2'),
    ('mfma-dense', dict(msplit=1, pipe=0, vec=1), 'mfma scalar'),
    # bstream-msplit: bsz B rows per LDS stage (two stages); width 2 with
    # bsz 16 takes 32 KiB of LDS per block, one block per 2 SIMDs of a CU
    # (1 wave/SIMD at msplit 2), bsz 8 half that (2 waves/SIMD)
    ('bstream-msplit', dict(width=2, msplit=2, bsz=16, ntload=True), 'w2'),
    ('bstream-msplit', dict(width=2, msplit=2, bsz=8, ntload=True), 'w2'),
    ('bstream-msplit', dict(width=1, msplit=2, bsz=16, ntload=True), ''),
    ('bstream-msplit', dict(width=2, msplit=4, bsz=16, ntload=True), 'w2'),
    ('bstream-msplit', dict(width=2, msplit=2, bsz=16, ntload=True,
                            preload_c=True), 'w2 beta'),
    ('bstream-msplit', dict(width=1, msplit=4, bsz=16, ntload=False), ''),
    ('bstream', dict(width=2), 'w2'),
    ('bstream', dict(width=1), ''),
    ('cstream', dict(width=2), 'w2'),
    ('cstream', dict(width=1), ''),
    ('cstream-ksplit', dict(ksplit=2), ''),
    ('cstream-ksplit', dict(ksplit=4), ''),
    ('cstream-ksplit', dict(ksplit=2, preload_c=True), 'beta'),
    ('bstream-msplit', dict(width=1, msplit=2, bsz=16, ntload=False,
                            preload_c=True), 'beta'),
]


def _gates(mm, dtype, arch, warp_size=64):
    """The named conditions a candidate row may require."""
    return {
        'w2': mm.width2_ok(),
        'scalar': not mm.width2_ok(),
        'beta': mm.beta != 0,
        'f64': dtype == np.float64,
        'mfma': mfma_ok(mm.info, dtype, arch, warp_size),
    }


def mfma_ok(info, dtype, arch, warp_size=64):
    """The gate of the mfma-dense family (see MFMA_ARCHS)."""
    return (dtype == np.float64 and arch.split(':')[0] in MFMA_ARCHS
            and warp_size == 64 and info.density >= DENSE_DENSITY)


class HIPMatMul(MatMul):
    platform = 'hip'

    def _check_opts(self, gcn_arch='gfx942', warp_size=64):
        if not isinstance(gcn_arch, str) or not _ARCH.match(gcn_arch):
            raise ValueError(f'gcn_arch {gcn_arch!r} is not a gfx arch name')
        # reliability: 64.0 used to pass and put floats into the launch bounds
        if isinstance(warp_size, bool) or not isinstance(
                warp_size, numbers.Integral) or warp_size not in (32, 64):
            raise ValueError(f'warp_size must be 32 or 64, not {warp_size!r}')
        return {'gcn_arch': gcn_arch, 'warp_size': warp_size}

    def _candidates(self, dtype, gcn_arch, warp_size):
        out = self._from_table(
            CANDIDATES, _gates(self, dtype, gcn_arch, warp_size), dtype,
            {'gcn_arch': gcn_arch, 'warp_size': warp_size},
            lambda family, params: (self._mfma_params(params)
                                    if family == 'mfma-dense' else params))

        # drop the streaming candidates that would spill, keeping at least
        # the least demanding one
        est = [self.vgpr_estimate(c, dtype) if c.family in STREAMING
               else None for c in out]
        fits = [e is None or e <= MAX_EST_VGPRS for e in est]
        if not any(f for f, e in zip(fits, est) if e is not None):
            least = min((e, i) for i, e in enumerate(est) if e is not None)
            fits[least[1]] = True
        return [c for c, f in zip(out, fits) if f]

    def _fits(self, cand, dtype):
        _, block, shared, _ = self._geometry(cand, dtype)
        return block[0]*block[1] <= 1024 and shared <= MAX_SHARED

    def vgpr_estimate(self, cand, dtype):
        """VGPRs a streaming candidate needs by plans.live_values."""
        words = np.dtype(dtype).itemsize//4*cand.params.get('width', 1)
        return EST_MARGIN + words*plans.live_values(self.A, cand.family,
                                                    cand.params)

    def _mfma_params(self, params):
        """An mfma-dense row bound to A: msplit capped at the m-tiles (one
        wavefront is the direct path, without LDS parameters); None when a
        wavefront would hold too many accumulators."""
        p = dict(params)
        mtiles = -(-self.info.m // fragments.MFMA_M)
        p['msplit'] = min(p['msplit'], mtiles)
        if p['msplit'] == 1:
            p = dict(msplit=1, pipe=min(p['pipe'], 1), vec=p['vec'])
        if -(-mtiles // p['msplit']) > fragments.MAX_MTILES_PER_WAVE:
            return None
        return p

    def mfma_plan(self, params):
        """The fragments.MfmaPlan of an mfma-dense parameter dict."""
        if getattr(self, '_mfma_bake', None) is None:
            self._mfma_bake = fragments.bake_mfma(self.A)
        return fragments.mfma_plan(self._mfma_bake, params['msplit'],
                                   params.get('kchunk', 1), params['vec'],
                                   params.get('nbuf', 1))

    # -- geometry and template contexts per family -----------------------
    def _geometry(self, cand, dtype):
        """(block, shared bytes, width) without building the plan."""
        p, ws = cand.params, cand.opts['warp_size']
        size = np.dtype(dtype).itemsize
        w = p.get('width', 1)
        if cand.family in ('cstream', 'bstream'):
            return None, (2*ws, 1, 1), 0, w
        if cand.family == 'bstream-msplit':
            ms = min(p['msplit'], self.info.m)
            return None, (ws, ms, 1), 2*p['bsz']*ws*w*size, w
        if cand.family == 'cstream-ksplit':
            ks = p['ksplit']
            return None, (ws, ks, 1), (ks - 1)*self.info.m*ws*size, 1
        if cand.family == 'mfma-dense':
            # 64 lanes x 64 columns per wavefront, msplit wavefronts in y;
            # LDS: nbuf buffers of the largest chunk's rows x 64 columns
            ms = p['msplit']
            shared = 0
            if ms > 1:
                kact = -(-len(self.info.bix) // fragments.MFMA_K)
                rows = fragments.MFMA_K*min(p['kchunk'], kact)
                shared = p['nbuf']*rows*fragments.WAVE*size
            return None, (fragments.WAVE, ms, 1), shared, 1
        raise ValueError(f'unknown HIP family {cand.family!r}')

    def _context(self, cand, dtype):
        _, block, shared, width = self._geometry(cand, dtype)
        lit = lambda x: self.lit(x, dtype)  # noqa: E731
        ctx = {'lit': lit, 'zero_rows': set(self.info.zero_rows)}
        p = cand.params
        if cand.family == 'cstream':
            ctx['plan'] = plans.cstream_plan(self.A)
        elif cand.family == 'bstream':
            ctx['plan'] = plans.bstream_plan(self.A)
        elif cand.family == 'bstream-msplit':
            ctx['plan'] = plans.msplit_plan(self.A, block[1], p['bsz'])
            ctx.update(bsz=p['bsz'], ntload=p.get('ntload', False),
                       preload_c=p.get('preload_c', False))
        elif cand.family == 'cstream-ksplit':
            ctx['plan'] = plans.ksplit_plan(self.A, block[1])
            ctx.update(preload_c=p.get('preload_c', False))
        elif cand.family == 'mfma-dense':
            ctx['plan'] = plan = self.mfma_plan(p)
            ctx.update(vec=p['vec'], pipe=p['pipe'])
            assert plan.lds_bytes == shared and plan.msplit == block[1]
        return ctx, block, shared, width
