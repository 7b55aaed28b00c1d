"""mma-dense (CUDA, f64): m8n8k4 on the FP64 tensor cores, A fragments from
a global table (gimmik.fragments.mma), B staged through shared memory."""

from gimmik.fragments import mma
from gimmik.families import REGISTER_MARGIN, Family, Geometry


class MmaDense(Family):
    name = 'mma-dense'

    def geometry(self):
        p = self.params
        g = mma.mma_geometry(self.A, p['mwarps'], p['nwarps'], p['ntile'],
                             p['kstage'])
        return Geometry(g['block'], g['shared'], 1,
                        cols_per_block=mma.MMA_N*p['nwarps']*p['ntile'])

    def build_plan(self):
        p = self.params
        return mma.mma_plan(self.A, p['mwarps'], p['nwarps'], p['ntile'],
                            p['kstage'])

    def registers(self):
        return (REGISTER_MARGIN + 2*mma.mma_accumulators(self.A, self.params)
                + 2*self.params['ntile'])
