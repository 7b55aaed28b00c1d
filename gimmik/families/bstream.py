"""bstream: one thread per column group; the used rows of B are walked once,
each updating every row of C it touches in registers (HIP, CUDA and C); on
HIP loaded in runs of batch_loads, so a wave waits once a run."""

from gimmik import plans
from gimmik.families import ColumnStream


class Bstream(ColumnStream):
    name = 'bstream'

    def build_plan(self):
        return self.mm.memo('bstream', lambda: plans.bstream_plan(self.A))

    def runs(self):
        """(B runs, C runs) where the platform loads in runs (None, None
        elsewhere)."""
        size = self.mm.target.batch_loads
        if size is None:
            return None, None
        bruns = [self.plan[a:b] for a, b in
                 plans.load_runs([1]*len(self.plan), size)]
        if self.mm.beta == 0:
            return bruns, None
        zero = set(self.info.zero_rows)
        reads = [int(i not in zero or self.mm.beta != 1)
                 for i in range(self.info.m)]
        cruns = [(list(range(a, b)), [i for i in range(a, b) if reads[i]])
                 for a, b in plans.load_runs(reads, size)]
        return bruns, cruns

    def context(self):
        bruns, cruns = self.runs()
        return {'plan': self.plan, 'bruns': bruns, 'cruns': cruns}

    def live_values(self):
        # an accumulator per non-zero row of A and the B values of a run
        # (or a run's C values)
        bruns, cruns = self.runs()
        held = max([len(r) for r in bruns or [[None]]]
                   + [len(c) for _, c in cruns or []])
        return self.info.m - len(self.info.zero_rows) + held

    def finish_rows(self):
        return self.info.m
