"""bstream: one thread per column group; the used rows of B are walked
once, each updating every row of C it touches in registers (HIP, CUDA and
C)."""

from gimmik import plans
from gimmik.families import FREE_REGISTER_ESTIMATE, Family, Geometry


class Bstream(Family):
    name = 'bstream'
    free_registers = FREE_REGISTER_ESTIMATE

    def geometry(self):
        return Geometry((self.mm.stream_threads(self.opts), 1, 1), 0,
                        self.params.get('width', 1))

    def build_plan(self):
        return self.mm.memo('bstream', lambda: plans.bstream_plan(self.A))

    def live_values(self):
        # an accumulator per non-zero row of A and the B value
        return self.info.m - len(self.info.zero_rows) + 1
