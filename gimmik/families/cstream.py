"""cstream: one thread per column group; each row of C in turn, loading
each row of B the first time a row needs it (HIP, CUDA and C); on the GPUs
in load batches (gimmik.plans.load_batches) where C is read."""

from gimmik import plans
from gimmik.families import (FREE_REGISTER_ESTIMATE, REGISTER_MARGIN,
                             Family, Geometry)

# Registers a CUDA cstream with loads at every use (ld 'reload') is given
# room for at least: ptxas hoists the loads anyway, merging repeated loads
# of a B row, so it holds at least what the cstream holding B does.
RELOAD_REGISTERS = 72


class Cstream(Family):
    name = 'cstream'
    free_registers = FREE_REGISTER_ESTIMATE

    def geometry(self):
        return Geometry((self.mm.stream_threads(self.opts), 1, 1), 0,
                        self.params.get('width', 1))

    def build_plan(self):
        return self.mm.memo('cstream', lambda: plans.cstream_plan(self.A))

    def batches(self):
        """The plan in load batches (Family.cstream_batches)."""
        return self.cstream_batches(self.plan)

    def context(self):
        return {'plan': self.plan, 'batches': self.batches()}

    def live_values(self):
        return plans.batched_live_values(self.batches())

    def registers(self):
        if self.params.get('ld') == 'reload':
            return max(REGISTER_MARGIN + RELOAD_REGISTERS,
                       super().registers())
        return super().registers()
