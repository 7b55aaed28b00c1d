"""bstream-mgroup (HIP, CUDA): the rows of C cut into contiguous row
groups of at most msplit*rows rows, one group a block (row_groups blocks
per column tile); within a block, wave y owns at most `rows` rows of the
group.  The used rows of B the group needs go through a double-buffered
LDS chunk of bsz rows: each wave loads its share of the next chunk into
registers before the current chunk is consumed and writes it to LDS after,
so one barrier ends each chunk.  A lane's registers are its rows'
accumulators plus its share of a chunk, whatever m and k are: the price is
that B rows several groups use are read once a group (from cache when the
groups of a column tile run together)."""

from dataclasses import dataclass

from gimmik import plans
from gimmik.analysis import split_even
from gimmik.families import Family, Geometry


@dataclass
class MgroupPlan:
    """groups[g] = (r0, r1, plans.MsplitPlan of rows r0:r1 of A): block
    group g's rows and their m-split bstream plan (accumulator indices
    relative to each wave's first row, B rows absolute).  nacc: the most
    accumulators one wave holds; nstage: the most B values one lane stages
    a chunk."""
    groups: list
    nacc: int
    nstage: int


def group_rows(m, msplit, rows):
    """[(r0, r1)]: m rows cut into contiguous groups of at most
    msplit*rows rows, sizes as even as that allows."""
    ngroups = -(-m // (msplit*rows))
    return split_even(m, ngroups)


def mgroup_plan(A, msplit, rows, bsz):
    groups = []
    for r0, r1 in group_rows(A.shape[0], msplit, rows):
        sub = plans.msplit_plan(A[r0:r1], min(msplit, r1 - r0), bsz,
                                even=True)
        groups.append((r0, r1, sub))
    nacc = max(sub.nacc for _, _, sub in groups)
    nstage = max([len(ld) for _, _, sub in groups for per_q in sub.loads
                  for ld in per_q] or [0])
    return MgroupPlan(groups, nacc, nstage)


class BstreamMgroup(Family):
    name = 'bstream-mgroup'

    @classmethod
    def adapt(cls, mm, params):
        # a block's waves must each get a row; one group is bstream-msplit
        m = mm.info.m
        ms = min(params['msplit'], m)
        if len(group_rows(m, ms, params['rows'])) < 2:
            return None
        return dict(params, msplit=ms)

    @property
    def ngroups(self):
        return len(group_rows(self.info.m, self.params['msplit'],
                              self.params['rows']))

    def geometry(self):
        p = self.params
        w = p.get('width', 1)
        return Geometry((self.warp, p['msplit'], 1),
                        2*p['bsz']*self.warp*w*self.itemsize, w,
                        row_groups=self.ngroups)

    def build_plan(self):
        p = self.params
        return mgroup_plan(self.A, p['msplit'], p['rows'], p['bsz'])

    def context(self):
        p = self.params
        return {'plan': self.plan, 'bsz': p['bsz'],
                'ntload': p.get('ntload', False)}

    def live_values(self):
        # one wave's accumulators and its staged share of a chunk
        return self.plan.nacc + self.plan.nstage
