"""cstream-mblock (CUDA): the rows of A split into `groups` contiguous
groups of similar work, one group per block (row_groups blocks per column
tile); within a group it is cstream."""

from gimmik import plans
from gimmik.families import (FREE_REGISTER_ESTIMATE, MAX_REGISTERS,
                             Family, Geometry)


def mblock_groups(A, groups):
    """[(first row, cstream plan of the rows)] for `groups` contiguous row
    groups of similar work (empty ones dropped)."""
    out = []
    for r0, r1 in plans.balanced_row_groups(A, groups):
        if r1 > r0:
            out.append((r0, plans.cstream_plan(A[r0:r1])))
    return out


class CstreamMblock(Family):
    name = 'cstream-mblock'
    # CUDA: ptxas keeps a row group's unrolled loads closer to the estimate
    max_registers = dict(MAX_REGISTERS, cuda=200)
    free_registers = FREE_REGISTER_ESTIMATE

    def geometry(self):
        return Geometry((self.mm.stream_threads(self.opts), 1, 1), 0,
                        self.params.get('width', 1),
                        row_groups=self.params['groups'])

    def build_plan(self):
        return mblock_groups(self.A, self.params['groups'])

    def context(self):
        return {'groups': self.plan}

    def live_values(self):
        return max(plans.cstream_live_b(plan) for _, plan in self.plan)
