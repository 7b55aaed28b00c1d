"""cstream: one thread per column group; each row of C in turn, loading
each row of B the first time a row needs it (HIP, CUDA and C); on the GPUs
in load batches (gimmik.plans.load_batches) where C is read."""

from gimmik import cost, plans
from gimmik.families import REGISTER_MARGIN, ColumnStream

# ld 'reload' room: ptxas hoists and merges the loads anyway
RELOAD_REGISTERS = 72

# Loads a cstream with loads at every use (ld 'reload') has in flight
RELOAD_INFLIGHT = 4


class Cstream(ColumnStream):
    name = 'cstream'

    def build_plan(self):
        return self.mm.memo('cstream', lambda: plans.cstream_plan(self.A))

    def batches(self):
        """The plan in load batches (Family.cstream_batches)."""
        return self.cstream_batches(self.plan)

    def context(self):
        return {'plan': self.plan, 'batches': self.batches()}

    def live_values(self):
        return plans.batched_live_values(self.batches())

    def work(self):
        info = self.info
        if self.params.get('ld') != 'reload':
            return super().work()
        # a load at every use: L1 hits after the first, through the shared
        # data path (NVIDIA)
        return cost.stream_work(self, len(info.bix), loads=info.nnz,
                                lds=(info.nnz - len(info.bix))*self.itemsize,
                                stage=RELOAD_INFLIGHT*self.itemsize,
                                waits=-(-info.nnz // RELOAD_INFLIGHT),
                                reread=info.nnz)

    def finish_rows(self):
        return self.info.m

    def registers(self):
        if self.params.get('ld') == 'reload':
            return max(REGISTER_MARGIN + RELOAD_REGISTERS,
                       super().registers())
        return super().registers()
