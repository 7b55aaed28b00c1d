"""mfma-gemm (HIP, f64): a 2-D tiled GEMM on v_mfma_f64_16x16x4f64 for
dense operators too large for mfma-dense (gimmik.fragments.mfma_tiled: a
workgroup owns an m-block x n-block of C, A's slices and B's tiles
double-buffered through LDS, zero slabs of A skipped)."""

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
        m-blocks, mwaves capped at the m-tiles; None below mt.MIN_WAVES
        waves per SIMD by the estimate."""
        m, k = mm.info.m, mm.info.k
        p = dict(params)
        p['mwaves'] = min(p['mwaves'], -(-m // MFMA_M))
        p['wm'] = mt.geometry_of(m, k, **p)['wm']
        if mt.waves_estimate(p, m, k) < mt.MIN_WAVES:
            return None
        return p

    def geometry(self):
        p = self.params
        g = mt.geometry_of(self.info.m, self.info.k, **p)
        return Geometry((WAVE, p['mwaves']*p['nwaves'], 1), g['lds_bytes'],
                        1, cols_per_block=g['block_n'],
                        row_groups=g['m_blocks'])

    def build_plan(self):
        return mt.plan(self.A, **self.params)

    def context(self):
        return {'plan': self.plan, 'waves': mt.MIN_WAVES}

    def registers(self):
        vgprs, agprs = mt.register_estimate(self.params, self.info.m,
                                            self.info.k)
        return vgprs + agprs
