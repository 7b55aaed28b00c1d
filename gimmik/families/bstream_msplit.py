"""bstream-msplit (HIP, CUDA): the rows of A split across a block's
msplit warps, the used rows of B staged through a double-buffered chunk of
bsz rows in shared memory.

Where the platform batches loads (BATCH_LOADS), a warp's share of several
chunks is loaded at once (plans.msplit_plan's load batches of at least
that many loads a thread), written to LDS by one code for every warp (not
a case of the warps' switch: clang-19 waited for all loads again on the
path that takes no case), and C's old values, read after the last chunk,
in runs of that many rows (crows): on HIP a wave then waits for all its
loads once a batch, not once a chunk or a row.  Batches and runs are
held only within the register limit: where they would take the estimate
past it, one chunk a batch and C read a row at a time."""

from functools import cached_property

from gimmik import plans
from gimmik.families import BATCH_LOADS, Family, Geometry


class BstreamMsplit(Family):
    name = 'bstream-msplit'

    @property
    def msplit(self):
        return min(self.params['msplit'], self.info.m)

    @property
    def batched(self):
        """Whether the platform batches loads (the LDS writes are then one
        code for every warp)."""
        return BATCH_LOADS[self.mm.platform] is not None

    @cached_property
    def min_loads(self):
        """The loads a warp issues a batch (BATCH_LOADS), or None: one
        chunk a batch and no runs of C, where the platform does not batch
        or batches would take the register estimate past the limit."""
        size, limit = BATCH_LOADS[self.mm.platform], self.register_limit()
        if size is None or limit is None:
            return size
        plan = self._plan(size)
        if self.registers_of(self._live(plan, self._crows(plan, size))) \
                > limit:
            return None
        return size

    def geometry(self):
        w = self.params.get('width', 1)
        return Geometry((self.warp, self.msplit, 1),
                        2*self.params['bsz']*self.warp*w*self.itemsize, w)

    def _plan(self, min_loads):
        return plans.msplit_plan(self.A, self.msplit, self.params['bsz'],
                                 min_loads=min_loads)

    def build_plan(self):
        return self._plan(self.min_loads)

    def _crows(self, plan, min_loads):
        if not self.reads_c_in_runs(min_loads):
            return None
        rows = []
        for y, (r0, r1) in enumerate(plan.groups):
            touched = {a for per_q in plan.updates for a, _, _, _
                       in per_q[y]}
            rows.append([i for i in range(r0, r1) if plans.reads_c_value(
                i - r0 in touched, self.mm.beta)])
        return plans.c_runs(rows, min_loads)

    def crows(self):
        """[y] -> runs of the rows of warp y whose old C values are loaded
        together after the last chunk, or None: each row reads its own (no
        batching, C preloaded or beta 0)."""
        return self._crows(self.plan, self.min_loads)

    def context(self):
        p = self.params
        return {'plan': self.plan, 'bsz': p['bsz'],
                'ntload': p.get('ntload', False),
                'preload_c': p.get('preload_c', False),
                'crows': self.crows(),
                'batched': self.batched}

    @staticmethod
    def _live(plan, crows):
        # the accumulators of the largest row group and the staged B values
        # of a load batch (or, after the last chunk, a run of C's values)
        return plan.nacc + max(plan.nstage, plans.longest_run(crows))

    def live_values(self):
        return self._live(self.plan, self.crows())
