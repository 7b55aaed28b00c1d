"""mfma-dense (HIP, f64): A densified into 16x4 tiles baked in the fragment
order of v_mfma_f64_16x16x4f64 (gimmik.fragments.mfma); each block is
(64, msplit) lanes covering 64 columns, B read directly (msplit 1) or
staged through LDS chunks."""

from gimmik.fragments import mfma
from gimmik.families import Family, Geometry


class MfmaDense(Family):
    name = 'mfma-dense'

    @classmethod
    def adapt(cls, mm, params):
        """msplit capped at the m-tiles (one wavefront is the direct path,
        without LDS parameters); None when a wavefront would hold too many
        accumulators."""
        p = dict(params)
        mtiles = -(-mm.info.m // mfma.MFMA_M)
        p['msplit'] = min(p['msplit'], mtiles)
        if p['msplit'] == 1:
            p = dict(msplit=1, pipe=min(p['pipe'], 1), vec=p['vec'])
        if -(-mtiles // p['msplit']) > mfma.MAX_MTILES_PER_WAVE:
            return None
        return p

    def geometry(self):
        # 64 lanes x 64 columns per wavefront, msplit wavefronts in y; LDS:
        # nbuf buffers of the largest chunk's rows x 64 columns
        p = self.params
        ms = p['msplit']
        shared = 0
        if ms > 1:
            kact = -(-len(self.info.bix) // mfma.MFMA_K)
            rows = mfma.MFMA_K*min(p['kchunk'], kact)
            shared = p['nbuf']*rows*mfma.WAVE*self.itemsize
        return Geometry((mfma.WAVE, ms, 1), shared, 1)

    def build_plan(self):
        p = self.params
        bake = self.mm.memo('mfma-bake', lambda: mfma.bake_mfma(self.A))
        return mfma.mfma_plan(bake, p['msplit'], p.get('kchunk', 1),
                              p['vec'], p.get('nbuf', 1))

    def context(self):
        plan, g = self.plan, self.geometry()
        if plan.lds_bytes != g.shared or plan.msplit != g.block[1]:
            raise ValueError(f'mfma-dense {self.params}: the plan and the '
                             'launch geometry disagree')
        return {'plan': plan, 'vec': self.params['vec'],
                'pipe': self.params['pipe']}
