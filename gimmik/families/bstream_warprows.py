"""bstream-warprows (CUDA, HIP): a block of msplit warps shares a tile of
columns; warp y owns every msplit-th row of C from y and runs its own
unrolled code.  The used rows of B go straight from global memory into a
double-buffered shared chunk of bsz rows (each warp fetching a share), the
next chunk's loads issued before the current chunk is consumed; with beta
!= 0 the old C values of the rows a chunk ends are loaded with it; a row
of C is stored, its old value added, as soon as its last term is added,
so a warp holds only the accumulators of the rows under way
(plans.warprows_plan)."""

from dataclasses import replace
import math

from gimmik import cost, plans
from gimmik.families import Family, Geometry, recurring


# ptxas keeps the f64 values of A a warp's code uses more than once in
# registers (two each), which no estimate counts (docs/cuda-spills.md)
HOISTED_VALUES = 320


class BstreamWarpRows(Family):
    name = 'bstream-warprows'
    # No minimum of blocks per SM on sm_90, whatever the estimate: the
    # accumulators live only while their rows are under way and ptxas
    # (CUDA 13, sm_90) keeps it below its estimate without (48 registers
    # on a 150 x 125 operator with 4 warps, 136 with 3 blocks a SM asked
    # for).
    free_registers = math.inf
    # ... but where it is long (cuda.LONG_KERNEL_TERMS a warp) one block a
    # SM: left free ptxas capped it at 80 (256 threads) or 168 (128)
    # registers and spilled (808 terms a warp); a thread may use 255
    long_min_blocks = 1
    # long, it is budgeted as the register-resident kernels: at one block a
    # SM ptxas spilled it from estimates of 114-156, never 52-92
    # (cuda-spill-audit-runtime-heavy.csv, cuda-spill-audit-baked.csv)
    register_resident = True
    # and where a warp's code reuses HOISTED_VALUES of A's values
    hoisted_bound = (HOISTED_VALUES, 1)
    # CUDA: at most half a thread's 255 registers estimated; the five free
    # builds above it ran 1.54-2.09x their operators' best, one spilled at
    # every bound (cuda-h200-all-candidates.csv, docs/cuda-spills.md)
    max_registers = {'cuda': 128}

    @classmethod
    def adapt(cls, mm, params):
        # one warp per row at most; the block's warps must share some rows
        if mm.info.m < 2:
            return None
        return dict(params, msplit=min(params['msplit'], mm.info.m))

    def geometry(self):
        return Geometry((self.warp, self.params['msplit'], 1),
                        2*self.params['bsz']*self.warp*self.itemsize, 1)

    def build_plan(self):
        return plans.warprows_plan(self.A, self.params['msplit'],
                                   self.params['bsz'])

    def context(self):
        return {'plan': self.plan, 'bsz': self.params['bsz']}

    def live_values(self):
        # the open accumulators, the B value in use and one loaded value;
        # with beta != 0 the old C values of the rows a chunk ends, loaded
        # with its B
        ahead = 0
        if self.mm.beta != 0:
            ahead = max((len(s) for per_q in self.plan.ends for s in per_q),
                        default=0)
        return self.plan.live + 2 + ahead

    def thread_terms(self):
        # a warp's rows
        return self.info.nnz / self.params['msplit']

    def recurring_values(self):
        # warp y's code: rows y, y + msplit, ...
        ms = self.params['msplit']
        return max(recurring(self.A[y::ms]) for y in range(ms))

    def work(self):
        g, size = self.geometry(), self.itemsize
        ms = g.block[1]
        nb = len(self.info.bix)
        bsz = self.params['bsz']
        stage = 2*bsz*size / ms
        return replace(cost.stream_work(self, nb, lds=nb*size*(1 + ms),
                                        stage=stage, waits=-(-nb // bsz)),
                       wave_paths=ms)

    def finish_rows(self):
        return -(-self.info.m // max(1, self.geometry().block[1]))
