"""bstream-msplit (HIP, CUDA): the rows of A split across a block's msplit
warps, the used rows of B staged through a double-buffered chunk of bsz rows in
shared memory; on HIP loaded in batches so a wave waits once a batch."""

from dataclasses import replace
from functools import cached_property

from gimmik import cost, plans
from gimmik.families import Family, Geometry


class BstreamMsplit(Family):
    name = 'bstream-msplit'
    # HIP, one column a thread, f32: compiled without packed f32 math
    # (kernels/hip/base.mako): pairs held registers of loads in flight
    no_packed_f32 = True
    # ptxas took up to 1.67x the estimate; 32-warp blocks (64 registers a
    # thread) spilled from estimates of 40 (cuda-spill-audit-runtime-heavy.csv)
    register_factor = {'cuda': 1.67}

    @property
    def msplit(self):
        return min(self.params['msplit'], self.info.m)

    @property
    def batched(self):
        """Whether the platform batches loads (the LDS writes are then one
        code for every warp)."""
        return self.mm.target.batch_loads is not None

    @property
    def min_loads(self):
        """The loads a warp issues a batch (Target.batch_loads), or None where
        the platform does not batch; one chunk a batch would wait every few
        loads."""
        return self.mm.target.batch_loads

    def geometry(self):
        w = self.params.get('width', 1)
        return Geometry((self.warp, self.msplit, 1),
                        2*self.params['bsz']*self.warp*w*self.itemsize, w)

    def _plan(self, min_loads):
        return plans.msplit_plan(self.A, self.msplit, self.params['bsz'],
                                 min_loads=min_loads)

    def build_plan(self):
        return self._plan(self.min_loads)

    def _c_reads(self, plan):
        # [y] -> the positions (accumulator indices) of wave y's rows
        # that read C's old value
        out = []
        for y, (r0, r1) in enumerate(plan.groups):
            touched = {a for per_q in plan.updates for a, _, _, _
                       in per_q[y]}
            out.append([a for a in range(r1 - r0) if plans.reads_c_value(
                a in touched, self.mm.beta)])
        return out

    def _cruns(self, plan, min_loads):
        if not self.reads_c_in_runs(min_loads):
            return None
        return plans.wave_runs(self._c_reads(plan), min_loads)

    def cruns(self):
        """Runs of accumulator positions whose old C values every wave loads
        together (one code for every wave: position a of wave y is row
        groups[y][0] + a) after the last chunk, or None."""
        cruns = self._cruns(self.plan, self.min_loads)
        if cruns and self.c_joins():
            return [[a for run in cruns for a in run]]
        return cruns

    @cached_property
    def _joins(self):
        plan, size = self.plan, self.min_loads
        cruns = self._cruns(plan, size)
        if not cruns:
            return False
        nc = sum(map(len, cruns))
        nb = sum(len(plan.loads[q][0]) for batch in plan.batches
                 for q in batch)
        if nc >= size and nb >= size:
            return False
        limit = self.register_limit()
        return limit is None or \
            self.registers_of(self._live(plan, cruns, True)) <= limit

    def c_joins(self):
        """Whether C's old values are loaded with the last load batch (so that
        a wave waits once for both)."""
        return self._joins

    def c_positions(self):
        """[a] -> the row of C each wave loads for accumulator position a
        (plans.wave_positions of the row groups)."""
        plan = self.plan
        return plans.wave_positions(
            [list(range(r0, r1)) for r0, r1 in plan.groups], plan.nacc)

    def crows(self):
        """[y] -> runs of the rows of warp y whose old C values are loaded
        together after the last chunk (cruns, the rows warp y reads), or
        None."""
        cruns = self.cruns()
        if cruns is None:
            return None
        reads = self._c_reads(self.plan)
        return [[[r0 + a for a in run if a in reads[y]] for run in cruns]
                for y, (r0, r1) in enumerate(self.plan.groups)]

    def context(self):
        p = self.params
        return {'plan': self.plan, 'bsz': p['bsz'],
                'preload_c': p.get('preload_c', False),
                'cruns': self.cruns(),
                'c_joins': self.batched and self.c_joins(),
                'c_positions': self.c_positions(),
                'c_reads': self._c_reads(self.plan),
                'stage_rows': plans.msplit_stage_rows(self.plan),
                'batched': self.batched}

    @staticmethod
    def _live(plan, cruns, joined):
        # the accumulators of the largest row group and the staged B values
        # of a load batch (or, after the last chunk, a run of C's values;
        # joined: all C's values with the last batch's)
        nc = sum(map(len, cruns or []))
        if joined:
            last = sum(len(plan.loads[q][0]) for q in plan.batches[-1])
            return plan.nacc + max(plan.nstage, last + nc)
        return plan.nacc + max(plan.nstage, plans.longest_run(
            [cruns] if cruns else None))

    def live_values(self):
        return self._live(self.plan, self._cruns(self.plan, self.min_loads),
                          self.c_joins())

    def work(self):
        # B staged through two chunks of bsz rows; every wave of the block
        # reads the chunk back
        g, size = self.geometry(), self.itemsize
        ms, w = g.block[1], g.width
        nb = len(self.info.bix)
        bsz = self.params['bsz']
        stage = 2*bsz*w*size / ms
        return replace(cost.stream_work(self, nb, lds=nb*size*(1 + ms),
                                        stage=stage, waits=-(-nb // bsz)),
                       wave_paths=ms)

    def finish_rows(self):
        return -(-self.info.m // max(1, self.geometry().block[1]))
