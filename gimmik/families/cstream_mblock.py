"""cstream-mblock: the rows of A split into `groups` contiguous groups of
similar work, one group per block (row_groups blocks per column tile);
within a group it is cstream, its rows computed in load batches."""

from dataclasses import dataclass

from gimmik import plans
from gimmik.families import (FREE_REGISTER_ESTIMATE, MAX_REGISTERS,
                             Family, Geometry)

# Global loads a thread issues before it consumes any of them where beta
# != 0, per platform (None: each row of C loads its own B rows just before
# it, C's old value inside its update).  On HIP a wave then waits for all
# its loads (s_waitcnt vmcnt(0)) once a batch, not once a row: clang-19
# keeps loads where the source puts them, and a row's beta*C load,
# consumed at once, drained the memory pipe every row (p4-pri-m6, beta 1,
# 16 groups: 65 full waits on 490 loads, 15 in batches).  With beta 0
# clang-19 already waits at most once per 8 loads on one row a batch, and
# batching B alone only costs registers (p4-hex-m460, 16 groups: 64 to 88
# VGPRs, 8 to 5 waves a SIMD).
BATCH_LOADS = {'hip': 8, 'cuda': None}


@dataclass
class LoadBatch:
    """Rows of C computed after one batch of loads: the B rows they are
    the first of their group to need (`loads`) and the rows of C whose
    old values are loaded ahead (`crows`, group-local row indices)."""
    loads: list        # [j]
    crows: list        # [i]
    rows: list         # [plans.RowPlan], i group-local


def reads_c(row, beta):
    """Whether computing row `row` of C reads its old value."""
    return beta != 0 and (bool(row.terms) or beta != 1)


def load_batches(plan, beta, min_loads):
    """A group's cstream plan cut into consecutive batches of rows, each
    issuing at least min_loads global loads (B rows first needed there and,
    where beta != 0, the C values read ahead) before its rows consume them;
    a short last batch joins the one before.  min_loads None: one row a
    batch, its C value read in its update (crows empty)."""
    if min_loads is None:
        return [LoadBatch(list(row.loads), [], [row]) for row in plan]
    out, cur = [], None
    for row in plan:
        if cur is None or count >= min_loads:
            cur, count = LoadBatch([], [], []), 0
            out.append(cur)
        cur.loads += row.loads
        cur.rows.append(row)
        if reads_c(row, beta):
            cur.crows.append(row.i)
        count = len(cur.loads) + len(cur.crows)
    if len(out) > 1 and count < min_loads:
        last = out.pop()
        for name in ('loads', 'crows', 'rows'):
            getattr(out[-1], name).extend(getattr(last, name))
    return out


def batched_live_values(batches):
    """The most values a thread holds at once: the B values of its group
    from their batch to their last use plus a batch's C values."""
    last = {}
    for q, batch in enumerate(batches):
        for row in batch.rows:
            for j, _ in row.terms:
                last[j] = q
    live = best = 0
    for q, batch in enumerate(batches):
        live += len(batch.loads)
        best = max(best, live + len(batch.crows))
        live -= sum(1 for lq in last.values() if lq == q)
    return best


def mblock_groups(A, groups, beta=0.0, min_loads=None):
    """[(first row, [LoadBatch])] for `groups` contiguous row groups of
    similar work (empty ones dropped)."""
    out = []
    for r0, r1 in plans.balanced_row_groups(A, groups):
        if r1 > r0:
            out.append((r0, load_batches(plans.cstream_plan(A[r0:r1]),
                                         beta, min_loads)))
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
        beta = self.mm.beta
        return mblock_groups(self.A, self.params['groups'], beta,
                             BATCH_LOADS[self.mm.platform] if beta else None)

    def context(self):
        return {'groups': self.plan}

    def live_values(self):
        return max(batched_live_values(batches) for _, batches in self.plan)
