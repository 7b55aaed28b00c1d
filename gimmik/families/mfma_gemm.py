"""mfma-gemm (HIP, f64): a 2-D tiled GEMM on v_mfma_f64_16x16x4f64 for dense
operators too large for mfma-dense (gimmik.fragments.mfma_tiled: a workgroup
owns an m-block x n-block of C, A's slices and B's tiles double-buffered
through LDS, zero slabs of A skipped)."""

import numpy as np

from gimmik import cost
from gimmik.fragments import mfma_tiled as mt
from gimmik.fragments.mfma import MFMA_M, WAVE
from gimmik.families import Family, Geometry


class MfmaGemm(Family):
    name = 'mfma-gemm'
    arch_specific = True
    # adapt holds a candidate to mt.MIN_WAVES waves per SIMD by its own
    # VGPR and LDS estimate: no platform limit
    max_registers = {'hip': None}

    @classmethod
    def adapt(cls, mm, params):
        """wm cut down so that the m-tiles spread evenly over the fewest
        m-blocks, mwaves capped at the m-tiles; None where the row gains
        nothing (too few waves, no better order, compact not worth it)."""
        m, k = mm.info.m, mm.info.k
        p = dict(params)
        p['mwaves'] = min(p['mwaves'], -(-m // MFMA_M))
        p['wm'] = mt.geometry_of(m, k, **_tiling(p))['wm']
        if mt.waves_estimate(_tiling(p), m, k) < mt.MIN_WAVES:
            return None
        if p.get('compact'):
            p.pop('reorder', None)
            return p if mt.compact_worth_it(mm.A, **_tiling(p)) else None
        if p.get('reorder') and mt.gemm_order(mm.A, **_tiling(p)) is None:
            return None
        return p

    def tiling(self):
        """The parameters that set the tiling (all but reorder and
        compact)."""
        return _tiling(self.params)

    def geometry(self):
        p = self.params
        g = mt.geometry_of(self.info.m, self.info.k, **self.tiling())
        return Geometry((WAVE, p['mwaves']*p['nwaves'], 1),
                        self.plan.lds_bytes,
                        1, cols_per_block=g['block_n'],
                        row_groups=g['m_blocks'])

    def build_plan(self):
        return mt.plan(self.A, **self.params)

    def context(self):
        return {'plan': self.plan, 'waves': mt.MIN_WAVES}

    def registers(self):
        vgprs, agprs = mt.register_estimate(self.tiling(), self.info.m,
                                            self.info.k)
        return vgprs + agprs

    def work(self):
        P = self.plan
        live_rows = np.minimum(P.live_count*P.block_k, self.info.k)
        stage = P.block_k*(P.block_m + P.block_n)*self.itemsize
        return cost.gemm_work(self, P.m_blocks, live_rows, P.block_m,
                              P.block_k, stage,
                              P.slot_size*float(np.mean(P.live_count))*8)


def _tiling(params):
    return {x: v for x, v in params.items()
            if x not in ('reorder', 'compact')}
