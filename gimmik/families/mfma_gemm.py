"""mfma-gemm (HIP, f64): a 2-D tiled GEMM on v_mfma_f64_16x16x4f64 for
dense operators too large for mfma-dense (gimmik.fragments.mfma_gemm: a
workgroup owns an m-block x n-block of C, A's slices and B's tiles
double-buffered through LDS, zero slabs of A skipped)."""

from gimmik.fragments import mfma_gemm as mg
from gimmik.families import Family, Geometry


class MfmaGemm(Family):
    name = 'mfma-gemm'

    @classmethod
    def adapt(cls, mm, params):
        """wm spread evenly over the fewest m-blocks, mwaves capped at the
        m-tiles; None below mg.MIN_WAVES waves per SIMD by the estimate."""
        return mg.adapt(params, mm.info.m, mm.info.k)

    def geometry(self):
        block, shared, width, cols, groups = mg.launch_geometry(
            self.info.m, self.info.k, self.params)
        return Geometry(block, shared, width, cols_per_block=cols,
                        row_groups=groups)

    def build_plan(self):
        return mg.plan(self.A, **self.params)

    def context(self):
        return {'plan': self.plan, 'waves': mg.MIN_WAVES}
