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
        min_loads, beta = BATCH_LOADS[self.mm.platform], self.mm.beta
        if (min_loads is None or beta == 0
                or self.params.get('preload_c', False)):
            return None
        plan, out = self.plan, []
        for y in range(self.params['ksplit']):
            rows = [i for i, owner in enumerate(plan.owner) if owner == y
                    and plans.reads_c_value(
                        any(terms[i] for terms in plan.terms), beta)]
            out.append([rows[a:b] for a, b in
                        plans.load_runs([1]*len(rows), min_loads)])
        return out

    def context(self):
        return {'plan': self.plan,
                'preload_c': self.params.get('preload_c', False),
                'crows': self.crows()}

    def live_values(self):
        # a warp's B values and the partial sums of the rows it owns (in
        # the finish, a run of C's old values with them)
        plan = self.plan
        nown = max(plan.owner.count(y) for y in range(self.params['ksplit']))
        crun = max([len(run) for runs in self.crows() or [] for run in runs]
                   or [0])
        return max(max(len(ld) for ld in plan.loads) + nown, nown + crun)
