"""bstream-msplit (HIP, CUDA): the rows of A split across a block's
msplit warps, the used rows of B staged through a double-buffered chunk of
bsz rows in shared memory."""

from gimmik import plans
from gimmik.families import Family, Geometry


class BstreamMsplit(Family):
    name = 'bstream-msplit'

    @property
    def msplit(self):
        return min(self.params['msplit'], self.info.m)

    def geometry(self):
        w = self.params.get('width', 1)
        return Geometry((self.warp, self.msplit, 1),
                        2*self.params['bsz']*self.warp*w*self.itemsize, w)

    def build_plan(self):
        return plans.msplit_plan(self.A, self.msplit, self.params['bsz'])

    def context(self):
        p = self.params
        return {'plan': self.plan, 'bsz': p['bsz'],
                'ntload': p.get('ntload', False),
                'preload_c': p.get('preload_c', False)}

    def live_values(self):
        # the accumulators of the largest row group and the staged B values
        nstage = max(len(ld) for per_q in self.plan.loads for ld in per_q)
        return self.plan.nacc + nstage
