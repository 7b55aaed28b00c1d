"""cstream-mblock: the rows of A split into `groups` contiguous groups of
similar work, one group per block (row_groups blocks per column tile);
within a group it is cstream, its rows computed in load batches
(Family.cstream_batches: batched where C is read or where one row a batch
would wait too often)."""

from gimmik import plans
from gimmik.families import (FREE_REGISTER_ESTIMATE, MAX_REGISTERS,
                             Family, Geometry)

def mblock_groups(A, groups, batches):
    """[(first row, batches(cstream plan of the group))] for `groups`
    contiguous row groups of similar work (empty ones dropped)."""
    return [(r0, batches(plans.cstream_plan(A[r0:r1])))
            for r0, r1 in plans.balanced_row_groups(A, groups) if r1 > r0]


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
        return mblock_groups(self.A, self.params['groups'],
                             self.cstream_batches)

    def context(self):
        return {'groups': self.plan}

    def live_values(self):
        return max(plans.batched_live_values(batches)
                   for _, batches in self.plan)
