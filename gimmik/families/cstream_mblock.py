"""cstream-mblock: the rows of A split into row groups, one group per block,
cstream within it; groups contiguous, by shared B rows (`shared`) or
partitioned (`part`), since a B row several groups use is read from L2 once
a group; `stack` groups a block share B rows through L1."""

from functools import cached_property

import numpy as np

from gimmik import cost, plans
from gimmik.analysis import (partition_rows, shared_row_groups,
                             sparse_gemm_worth_it)
from gimmik.families import FREE_REGISTER_ESTIMATE, Family, Geometry


# Shared and partitioned row groups are offered where they read at most this
# fraction of the B rows contiguous groups of as many would (shared groups on
# tensor-product gradients 0.2-0.5; where rows share little, as on the
# divergence-like wide operators, 0.85 and more: contiguous groups with more
# rows do as well there; partitioned groups on the hex divergence 0.7)
SHARED_MAX_READS = 0.75

# Groups a block where a client launches one block a column tile
# (MatMul.runtime_client_grid) and a row stacks none: stacked they run at
# once (cuda-h200-grid-rules*.csv); two on HIP, where clang-19 spilled four
RUNTIME_STACK = 2

# CUDA, n baked: partitioned groups reusing each B value little are bounded by
# terms, not the estimate's live values, which overcounted ptxas
# (cuda-spill-audit-part*.csv)
PART_MAX_TERMS = 640
PART_MAX_REUSE = 4

# CUDA f64: the most B and C values (times the width) a thread loads over its
# row group; ptxas hoists a group's loads: past this 6 of 14 spilled, at or
# below 1 of 201 (cuda-spill-audit-mblock-loads.csv)
MAX_GROUP_LOADS = 256


def group_used_rows(A, rows):
    """[B rows each of the row groups `rows` uses]."""
    S = np.asarray(A) != 0
    return [int(S[g].any(axis=0).sum()) for g in rows]


def group_reads(A, rows):
    """B rows the row groups `rows` read in all (each group its used B
    rows once)."""
    return sum(group_used_rows(A, rows))


def mblock_rows(A, params):
    """[rows of A of each group] of a cstream-mblock row's parameters
    (`groups` contiguous groups, empty ones dropped; `shared`; or `part`
    groups of partition_rows, reading few B rows together)."""
    if 'shared' in params:
        return [list(g) for g in shared_row_groups(A, params['shared'])]
    if 'part' in params:
        return [list(g) for g in partition_rows(
            A, -(-A.shape[0] // params['part']))]
    return [list(range(r0, r1))
            for r0, r1 in plans.balanced_row_groups(A, params['groups'])
            if r1 > r0]


def grouped(params):
    """Whether a cstream-mblock row's groups are found from A's pattern
    (shared or partitioned), not contiguous."""
    return 'shared' in params or 'part' in params


def group_terms(A, params):
    """[non-zeros of A in each row group] of a cstream-mblock row."""
    S = np.asarray(A) != 0
    return [int(S[rows].sum()) for rows in mblock_rows(A, params)]


def stack_groups(A, rows, stack):
    """The groups `rows` reordered so that each run of `stack` consecutive
    groups (one block's) shares many B rows."""
    S = np.asarray(A) != 0
    used = [S[g].any(axis=0) for g in rows]
    left = list(range(len(rows)))
    out = []
    while left:
        run = [left.pop(0)]
        union = used[run[0]].copy()
        while left and len(run) < stack:
            best = max(left, key=lambda i: int((used[i] & union).sum()))
            left.remove(best)
            run.append(best)
            union |= used[best]
        out.extend(run)
    return [rows[i] for i in out]


def mblock_groups(A, rows, batches):
    """[(rows of A, batches(cstream plan of those rows))] of the groups
    `rows` (each plan's row indices are positions in its rows)."""
    return [(g, batches(plans.cstream_plan(A[g]))) for g in rows]


class CstreamMblock(Family):
    name = 'cstream-mblock'
    # CUDA: ptxas keeps a row group's unrolled loads closer to the estimate
    max_registers = {'cuda': 200}
    # left free ptxas spills a few (8-72 bytes at its own 32-56 registers),
    # yet a bound on every free one costs more (cuda-h200-mblock-bounds.csv)
    free_registers = FREE_REGISTER_ESTIMATE
    register_resident = True
    max_thread_loads = {'cuda': MAX_GROUP_LOADS}

    @classmethod
    def adapt(cls, mm, params):
        if mm.runtime_client_grid and 'stack' not in params:
            params = dict(params, stack=RUNTIME_STACK)
        # shared and partitioned groups: only where they read markedly
        # fewer B rows than contiguous groups of as many (SHARED_MAX_READS)
        if 'shared' not in params and 'part' not in params:
            return params
        # partitioned groups not where A's rows come in blocks of one
        # support that the sparse tensor-core tiles run (prism operators:
        # H100, n = 110080, p6-pri-m460's groups of 20-30 rows ran at
        # 0.29-0.33 of copy, the tiles at 0.92-0.95)
        if 'part' in params and sparse_gemm_worth_it(mm.info):
            return None
        rows = mblock_rows(mm.A, params)
        contiguous = mblock_rows(mm.A, dict(groups=len(rows)))
        if (group_reads(mm.A, rows)
                > SHARED_MAX_READS*group_reads(mm.A, contiguous)):
            return None
        return params

    @cached_property
    def group_rows(self):
        """[rows of A of each group], in runs of `stack` a block."""
        rows = mblock_rows(self.A, self.params)
        stack = self.params.get('stack', 1)
        return stack_groups(self.A, rows, stack) if stack > 1 else rows

    @property
    def stack(self):
        """Groups a block (at most the groups there are)."""
        return min(self.params.get('stack', 1), len(self.group_rows))

    @cached_property
    def block_rows(self):
        """[rows of A of each block's groups together]."""
        stack = self.stack
        rows = self.group_rows
        return [sum(rows[i:i + stack], [])
                for i in range(0, len(rows), stack)]

    def kernel_key(self):
        # the groups, not the parameters that chose them: budgets that
        # find the same groups make the same kernel
        rest = {k: v for k, v in self.params.items()
                if k not in ('groups', 'shared', 'part')}
        return (repr(sorted(rest.items())),
                tuple(map(tuple, self.group_rows)))

    def geometry(self):
        # a stack's groups along y: block[0] threads over a column tile
        threads = self.mm.stream_threads(self.opts)
        width = self.params.get('width', 1)
        return Geometry((threads, self.stack, 1), 0, width,
                        row_groups=len(self.block_rows))

    def build_plan(self):
        return mblock_groups(self.A, self.group_rows, self.cstream_batches)

    def context(self):
        # with stack > 1: `sets` blocks a column tile, a block's groups
        # along y
        return {'groups': self.plan, 'stack': self.stack,
                'sets': len(self.block_rows)}

    def live_values(self):
        return max(plans.batched_live_values(batches)
                   for _, batches in self.plan)

    def thread_loads(self):
        # each group's used B rows, and its rows of C where beta != 0
        c = self.mm.beta != 0
        rows = self.group_rows
        return self.params.get('width', 1)*max(
            u + c*len(g) for u, g in zip(group_used_rows(self.A, rows), rows))

    def thread_terms(self):
        # a group's share (contiguous groups)
        return self.info.nnz / (self.params.get('groups') or 1)

    def long_kernel(self, min_terms):
        # groups by shared or partitioned B rows always (cuda.SHARED_ROWS)
        return grouped(self.params) or super().long_kernel(min_terms)

    def terms_bound(self):
        """Partitioned groups whose registers their terms bound (n baked,
        every group of fewer than PART_MAX_TERMS non-zeros and at most
        PART_MAX_REUSE of them on average a B row it uses)."""
        if 'part' not in self.params or self.mm.n is None:
            return False
        S = np.asarray(self.A) != 0
        for rows in self.group_rows:
            terms = int(S[rows].sum())
            if (terms >= PART_MAX_TERMS
                    or terms > PART_MAX_REUSE*int(S[rows].any(axis=0).sum())):
                return False
        return True

    def work(self):
        # with stack groups a block, a B row the block's groups share comes
        # from L2 once a block (L1 after); a thread loads its own group's rows
        return cost.stream_work(self, group_reads(self.A, self.group_rows),
                                stack=self.params.get('stack', 1),
                                l2_rows=group_reads(self.A, self.block_rows))
