"""bstream-mgroup (HIP, CUDA): the rows of C cut into contiguous row
groups of at most msplit*rows rows, one group a block (row_groups blocks
per column tile); within a block, wave y owns at most `rows` rows of the
group.  The used rows of B the group needs go through LDS in chunks of bsz
rows, in nbuf buffers (default 2): each wave loads its share of the next
chunk (chunk rows y, y + msplit, ...) into registers before the current
chunk is consumed and writes it to LDS after (one barrier a chunk with two
buffers, two with one).  A lane's registers are its rows' accumulators
plus its share of a chunk, whatever m and k are: the price is that B rows
several groups use are read once a group (from cache when the groups of a
column tile run together)."""

from dataclasses import dataclass, replace

from gimmik import cost, plans
from gimmik.analysis import split_even
from gimmik.families import Family, Geometry
from gimmik.families.cstream_mblock import group_reads


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


def mgroup_plan(A, msplit, rows, bsz, min_loads=None):
    """min_loads: the global loads a wave issues a load batch of a
    group's chunks (plans.msplit_plan); None: one chunk a batch."""
    groups = []
    for r0, r1 in group_rows(A.shape[0], msplit, rows):
        sub = plans.msplit_plan(A[r0:r1], msplit, bsz, even=True,
                                min_loads=min_loads)
        groups.append((r0, r1, sub))
    nacc = max(sub.nacc for _, _, sub in groups)
    nstage = max(sub.nstage for _, _, sub in groups)
    return MgroupPlan(groups, nacc, nstage)


class BstreamMgroup(Family):
    name = 'bstream-mgroup'
    # HIP (as bstream-msplit's, measured on both)
    no_packed_f32 = True

    @classmethod
    def adapt(cls, mm, params):
        # one group is bstream-msplit; every wave of a block gets a row of
        # each group and the same share of a chunk (bsz a multiple of
        # msplit: the chunk slots a wave writes stay inside the buffer)
        groups = group_rows(mm.info.m, params['msplit'], params['rows'])
        if (len(groups) < 2 or params['bsz'] % params['msplit']
                or min(r1 - r0 for r0, r1 in groups) < params['msplit']):
            return None
        return params

    @property
    def ngroups(self):
        return len(group_rows(self.info.m, self.params['msplit'],
                              self.params['rows']))

    def geometry(self):
        p = self.params
        w = p.get('width', 1)
        return Geometry((self.warp, p['msplit'], 1),
                        p.get('nbuf', 2)*p['bsz']*self.warp*w*self.itemsize,
                        w,
                        row_groups=self.ngroups)

    def build_plan(self):
        p = self.params
        return mgroup_plan(self.A, p['msplit'], p['rows'], p['bsz'],
                           self.mm.target.batch_loads)

    def context(self):
        p = self.params
        return {'plan': self.plan, 'bsz': p['bsz'],
                'nbuf': p.get('nbuf', 2),
                'c_ahead': self.c_ahead, 'c_joins': self.c_joins()}

    @property
    def c_ahead(self):
        """Whether the old C values of a wave's rows are loaded by code
        the same in every wave, ahead of the waves' cases (the platform
        batches loads and beta != 0)."""
        return (self.mm.target.batch_loads is not None
                and self.mm.beta != 0)

    def c_joins(self):
        """[g] -> whether group g's old C values are loaded with its last
        load batch (one wait for both): C read ahead, one column a thread
        (its loads clamped to a column inside n need no guard), and the
        last batch's B loads or the C loads (the most rows a wave has)
        fewer than a batch (Target.batch_loads), which would wait alone."""
        size = self.mm.target.batch_loads
        if not self.c_ahead or self.params.get('width', 1) != 1:
            return [False]*len(self.plan.groups)
        return [bool(sub.chunks) and min(self._last_loads(sub),
                                         self._c_loads(sub)) < size
                for _, _, sub in self.plan.groups]

    @staticmethod
    def _last_loads(sub):
        ms = len(sub.groups)
        return sum(-(-len(sub.chunks[q]) // ms) for q in sub.batches[-1])

    @staticmethod
    def _c_loads(sub):
        return max(s1 - s0 for s0, s1 in sub.groups)

    def long_kernel(self, min_terms):
        # CUDA f64: ptxas needed up to twice the estimate, spilling at 3
        # blocks a SM (168) on 4 of 75 operators (docs/cuda-spills.md)
        return self.itemsize == 8

    def live_values(self):
        # one wave's accumulators and its staged share of a chunk, or,
        # with C read ahead, a C value per accumulator (joined: with the
        # last batch's staged values)
        held = max(self.plan.nstage, self.plan.nacc if self.c_ahead else 0)
        for (_, _, sub), joined in zip(self.plan.groups, self.c_joins()):
            if joined:
                held = max(held, self._last_loads(sub) + self._c_loads(sub))
        return self.plan.nacc + held

    def work(self):
        # one row group a block (as cstream-mblock: the B rows several
        # groups use are read once a group), its B rows staged through LDS
        # chunks of bsz rows, one wait a chunk of the block's group; a wave
        # reads each B row its rows use from LDS once a chunk and feeds its
        # FMAs from LDS (lds_fed)
        g, size, P = self.geometry(), self.itemsize, self.plan
        rows = group_reads(self.A, [range(r0, r1) for r0, r1, _ in P.groups])
        reads = sum(len({r for _, _, r, _ in ups}) for _, _, sub in P.groups
                    for per_q in sub.updates for ups in per_q)
        chunks = max(len(sub.chunks) for _, _, sub in P.groups)
        ms, bsz = g.block[1], self.params['bsz']
        stage = self.params.get('nbuf', 2)*bsz*g.width*size / ms
        w = cost.stream_work(self, rows, lds=(rows + reads)*size,
                             stage=stage, waits=max(1, chunks))
        return replace(w, lds_fed=True, wave_paths=ms)

    def finish_rows(self):
        # all its rows' C loaded first: one wait
        return 1
