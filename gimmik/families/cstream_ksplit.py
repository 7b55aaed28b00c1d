"""cstream-ksplit (HIP, CUDA, OpenCL): the used columns of A split across a
block's ksplit warps; partial sums handed to each row's owner through shared
memory.  Where loads are not batched a row may name `chunk`, rows in passes,
so a thread holds one pass's sums: the k-split of operators whose one pass
spills."""

from dataclasses import replace
from functools import cached_property

from gimmik import cost, plans
from gimmik.families import Family, Geometry


# k-split in passes: under this estimate ptxas never spilled it (CUDA); on
# the H200's OpenCL upstream's passes of 32 rows ran near copy speed where our
# estimate is 272 (opencl-h200-walk-chunked.csv, p5-hex-m0)
CHUNKED_MAX_REGISTERS = {'cuda': 216, 'opencl': 280}
# On CUDA offered only sparser than max_density (denser, ptxas spilled under
# the estimate) and where at least min_width used B rows a row of C (on square
# ones it was no faster than cstream-mblock, and ptxas spilled it on pyramid
# and prism operators of beta 1 at estimates 126-210); OpenCL on the H200 runs
# it on square operators too (opencl-h200-walk-chunked.csv)
CHUNKED_GATES = {'cuda': {'max_density': 0.25, 'min_width': 2}}
# Used columns of A a part must hold on average, more than this: on the H200's
# OpenCL a k-split of at most 2 a part was never its operator's fastest own
# launch (0 of 89, opencl-h200-walk-{warm,quiet,staged}.csv `_each`)
MIN_PART_COLUMNS = {'opencl': 2}


class CstreamKsplit(Family):
    name = 'cstream-ksplit'
    register_resident = True

    @classmethod
    def adapt(cls, mm, params):
        # passes of chunk rows: only where loads are not batched, where
        # they are more than one and inside the platform's gates
        chunk, info = params.get('chunk'), mm.info
        if len(info.bix) <= MIN_PART_COLUMNS.get(mm.platform, 0)*params[
                'ksplit']:
            return None
        if chunk is None:
            return params
        gates = CHUNKED_GATES.get(mm.platform, {})
        if (mm.target.batch_loads is not None or chunk >= info.m
                or info.density >= gates.get('max_density', 1.0)
                or len(info.bix) < gates.get('min_width', 0)*info.m):
            return None
        return params

    def geometry(self):
        ks = self.params['ksplit']
        chunk = self.params.get('chunk')
        rows = self.info.m if chunk is None else 2*min(chunk, self.info.m)
        return Geometry((self.warp, ks, 1),
                        (ks - 1)*rows*self.warp*self.itemsize, 1)

    def build_plan(self):
        chunk = self.params.get('chunk')
        if chunk is not None and self.batched:
            raise ValueError('cstream-ksplit: chunk needs unbatched loads')
        return plans.ksplit_plan(self.A, self.params['ksplit'], chunk)

    @property
    def batched(self):
        """Whether the platform batches loads (the loads are then one
        code for every warp)."""
        return self.mm.target.batch_loads is not None

    def owned(self):
        """[y] -> the rows of C warp y owns (finishes)."""
        plan = self.plan
        return [[i for i, o in enumerate(plan.owner) if o == y]
                for y in range(self.params['ksplit'])]

    def _c_reads(self):
        # [y] -> the positions in owned()[y] of the rows that read C
        plan = self.plan
        return [[o for o, i in enumerate(rows) if plans.reads_c_value(
            any(terms[i] for terms in plan.terms), self.mm.beta)]
            for rows in self.owned()]

    def _cruns(self):
        min_loads = self.mm.target.batch_loads
        if not self.reads_c_in_runs(min_loads):
            return None
        return plans.wave_runs(self._c_reads(), min_loads)

    def stage_rows(self):
        """[s] -> the B row each warp loads into its s-th value
        (plans.wave_positions of plan.loads)."""
        loads = self.plan.loads
        fill = next((ld[0] for ld in loads if ld), 0)
        return plans.wave_positions(loads, max(map(len, loads)), fill)

    def c_positions(self):
        """[o] -> the row of C each warp loads for its o-th owned row."""
        owned = self.owned()
        return plans.wave_positions(owned, max(map(len, owned)))

    @cached_property
    def _joins(self):
        cruns, size = self._cruns(), self.mm.target.batch_loads
        if not cruns:
            return False
        nc = sum(map(len, cruns))
        nb = max(map(len, self.plan.loads))
        if nc >= size and nb >= size:
            return False
        limit = self.register_limit()
        return limit is None or \
            self.registers_of(self._live(True)) <= limit

    def c_joins(self):
        """Whether C's old values are loaded with B's (one wait for both):
        where either are fewer than a batch (alone they would wait for
        fewer than batch_loads loads) and the register estimate allows."""
        return self._joins

    def cruns(self):
        """Runs of owned-row positions whose old C values every warp loads
        together in the finish (where C joins B's loads, one run), or None:
        each row reads its own (no batching, C preloaded or beta 0)."""
        cruns = self._cruns()
        if cruns and self.c_joins():
            return [[o for run in cruns for o in run]]
        return cruns

    def crows(self):
        """[y] -> runs of the rows warp y owns whose old C values are loaded
        together in the finish (cruns, the rows warp y reads), or None."""
        cruns = self.cruns()
        if cruns is None:
            return None
        reads = self._c_reads()
        return [[[rows[o] for o in run if o in reads[y]] for run in cruns]
                for y, rows in enumerate(self.owned())]

    def walk_group(self):
        # in passes its registers and speed are another kernel's
        return self.name + ('/passes' if 'chunk' in self.params else '')

    def register_limit(self):
        limit = super().register_limit()
        if self.params.get('chunk') is None:
            return limit
        return CHUNKED_MAX_REGISTERS.get(self.mm.platform, limit)

    def pass_owned(self):
        """[p][y] -> the rows of pass p warp y owns."""
        plan = self.plan
        return [[[i for i in range(r0, r1) if plan.owner[i] == y]
                 for y in range(self.params['ksplit'])]
                for r0, r1 in plan.passes]

    def context(self):
        batched = self.batched
        chunked = self.params.get('chunk') is not None
        return {'plan': self.plan,
                'chunked': chunked,
                'fetch': [self.plan.fetch(y) for y in
                          range(self.params['ksplit'])] if chunked else None,
                'pass_owned': self.pass_owned() if chunked else None,
                'preload_c': self.params.get('preload_c', False),
                'batched': batched,
                'cruns': self.cruns(),
                'c_joins': batched and self.c_joins(),
                'c_reads': self._c_reads(),
                'c_positions': self.c_positions(),
                'stage_rows': self.stage_rows()}

    def _live(self, joined):
        # a warp's B values and the partial sums of the rows it owns (in
        # the finish, a run of C's old values with them; joined: all of
        # C's old values with the B values)
        plan = self.plan
        if self.params.get('chunk') is not None:
            return (max(map(len, sum(self.pass_owned(), [])))
                    + max(plan.live_b(y)
                          for y in range(self.params['ksplit'])))
        nown = max(plan.owner.count(y) for y in range(self.params['ksplit']))
        nb = max(len(ld) for ld in plan.loads)
        cruns = self._cruns()
        if joined:
            return nb + nown + sum(map(len, cruns))
        return max(nb + nown, nown + plans.longest_run(
            [cruns] if cruns else None))

    def live_values(self):
        return self._live(self.c_joins())

    def long_kernel(self, min_terms):
        # not in passes of rows: that estimate follows its loads at first
        # use (its 1680-term k-halves in one pass spilled at 168 registers)
        return 'chunk' not in self.params and super().long_kernel(min_terms)

    def work(self):
        # partial sums of (ksplit - 1) groups through shared memory, two
        # waits a pass of rows (the loads, the barrier)
        ks, size = self.params['ksplit'], self.itemsize
        passes = len(self.plan.passes) if self.params.get('chunk') else 1
        w = cost.stream_work(self, len(self.info.bix),
                             lds=2*(ks - 1)*self.info.m*size, waits=2*passes)
        return replace(w, inflight=len(self.info.bix) / ks*size)

    def finish_rows(self):
        return -(-self.info.m // max(1, self.params['ksplit']))
