"""cstream-ksplit (HIP, CUDA): the used columns of A split across a
block's ksplit warps; partial sums handed to each row's owner through
shared memory.

Where the platform batches loads (BATCH_LOADS) and C's old values are read
in the finish, an owner loads them in runs of that many rows (crows)
before it stores them: on HIP a wave then waits for all its loads once a
run, not once a row."""

from gimmik import plans
from gimmik.families import BATCH_LOADS, Family, Geometry


class CstreamKsplit(Family):
    name = 'cstream-ksplit'

    def geometry(self):
        ks = self.params['ksplit']
        return Geometry((self.warp, ks, 1),
                        (ks - 1)*self.info.m*self.warp*self.itemsize, 1)

    def build_plan(self):
        return plans.ksplit_plan(self.A, self.params['ksplit'])

    def crows(self):
        """[y] -> runs of the rows warp y owns whose old C values are loaded
        together in the finish, or None: each row reads its own (no
        batching, C preloaded or beta 0)."""
        min_loads = BATCH_LOADS[self.mm.platform]
        if not self.reads_c_in_runs(min_loads):
            return None
        plan = self.plan
        return plans.c_runs(
            [[i for i, owner in enumerate(plan.owner) if owner == y
              and plans.reads_c_value(any(terms[i] for terms in plan.terms),
                                      self.mm.beta)]
             for y in range(self.params['ksplit'])], min_loads)

    def context(self):
        return {'plan': self.plan,
                'preload_c': self.params.get('preload_c', False),
                'crows': self.crows()}

    def live_values(self):
        # a warp's B values and the partial sums of the rows it owns (in
        # the finish, a run of C's old values with them)
        plan = self.plan
        nown = max(plan.owner.count(y) for y in range(self.params['ksplit']))
        return max(max(len(ld) for ld in plan.loads) + nown,
                   nown + plans.longest_run(self.crows()))
