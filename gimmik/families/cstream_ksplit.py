"""cstream-ksplit (HIP, CUDA): the used columns of A split across a
block's ksplit warps; partial sums handed to each row's owner through
shared memory."""

from gimmik import plans
from gimmik.families import Family, Geometry


class CstreamKsplit(Family):
    name = 'cstream-ksplit'

    def geometry(self):
        ks = self.params['ksplit']
        return Geometry((self.warp, ks, 1),
                        (ks - 1)*self.info.m*self.warp*self.itemsize, 1)

    def build_plan(self):
        return plans.ksplit_plan(self.A, self.params['ksplit'])

    def context(self):
        return {'plan': self.plan,
                'preload_c': self.params.get('preload_c', False)}

    def live_values(self):
        # a warp's B values and the partial sums of the rows it owns
        plan = self.plan
        nown = max(plan.owner.count(y) for y in range(self.params['ksplit']))
        return max(len(ld) + nown for ld in plan.loads)
