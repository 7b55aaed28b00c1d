"""rowblock (C): looped, not unrolled, so it compiles in under a second
for any operator."""

from gimmik import plans
from gimmik.families import Family, Geometry

# The packed block of B (bytes, per thread, on the stack): well inside a
# core's L2 and any OpenMP thread's stack.
ROWBLOCK_PACK = 192*1024

# The accumulators are vectors of this many bytes (the template's VBYTES):
# AVX2's ymm; GCC splits them on narrower machines.
ROWBLOCK_VECTOR = 32


def rowblock_width(nb, width, vw, itemsize):
    """The block of columns: at most `width`, a multiple of `vw`, and small
    enough that the packed B block (nb rows) fits in ROWBLOCK_PACK."""
    fit = ROWBLOCK_PACK // (max(1, nb)*itemsize) - 64 // itemsize
    return max(vw, min(width, fit) // vw * vw)


class Rowblock(Family):
    name = 'rowblock'

    def geometry(self):
        p = self.params
        width = rowblock_width(len(self.info.bix), p['width'], p['vw'],
                               self.itemsize)
        return Geometry((1, 1, 1), 0, width)

    def build_plan(self):
        return plans.rowblock_plan(self.A, self.params['rows'])

    def context(self):
        vw = self.params['vw']
        if vw*self.itemsize % ROWBLOCK_VECTOR:
            raise ValueError(f'rowblock vw {vw} does not fill whole '
                             f'{ROWBLOCK_VECTOR}-byte vectors')
        return {'plan': self.plan, 'vw': vw,
                'pstride': self.geometry().width + 64 // self.itemsize,
                'vbytes': ROWBLOCK_VECTOR}
