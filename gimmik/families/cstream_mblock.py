"""cstream-mblock: the rows of A split into row groups, one group per
block (row_groups blocks per column tile); within a group it is cstream,
its rows computed in load batches (Family.cstream_batches: batched where
C is read or where one row a batch would wait too often).

The groups are either `groups` contiguous groups of similar work
(analysis.balanced_row_groups), or, with `shared`, the rows grouped by the
rows of B they share, at most `shared` B rows a group
(analysis.shared_row_groups), or, with `part`, about `part` rows a group
(m/part groups, rounded up) cut by analysis.partition_rows to read few B
rows together: a B row several groups use is read from L2 once a group,
and on tensor-product operators contiguous groups cut apart the rows that
share B rows.

With `stack`, a block runs that many groups over the same columns, each on
its own stream_threads threads, the groups paired by the B rows they share
(stack_groups): a B row both read comes from L2 once a block and from L1
after (H100, n = 110080, the hex divergence of 343 rows in 16 partitioned
groups: 2.7 reads from L2 a used B row with one group a block, 2.1 with
two; 0.90 -> 0.93 of copy)."""

from functools import cached_property

import numpy as np

from gimmik import cost, plans
from gimmik.analysis import (partition_rows, shared_row_groups,
                             sparse_gemm_worth_it)
from gimmik.families import FREE_REGISTER_ESTIMATE, Family, Geometry


# Shared and partitioned row groups are offered where they read at most
# this fraction of the B rows contiguous groups of as many would (shared
# groups on tensor-product gradients 0.2-0.5; where rows share little, as
# on the divergence-like wide operators, 0.85 and more: contiguous groups
# with more rows do as well there; partitioned groups on the hex
# divergence 0.7)
SHARED_MAX_READS = 0.75

# Groups a block where a client launches one block a column tile
# (MatMul.runtime_client_grid: PyFR main's HIP provider, ceil(n/block[0]))
# and a row stacks none: one group a block, the groups run in a block in
# turn; stacked, `RUNTIME_STACK` of them run at once (CUDA twin, H200,
# n = 110080: one group a block ran 1.03-1.43x its own grid's time, four
# 0.96-1.10x, bench/results/cuda-h200-grid-rules*.csv).  Two on HIP: a
# block of more than 4 waves gets half a lane's VGPRs, and clang-19
# spilled four (shared64 of p7-hex-m460: 256 VGPRs, 28 bytes of scratch)
RUNTIME_STACK = 2

# CUDA (cuda.SHARED_ROWS): the partitioned groups keep more B values live
# than the shared ones (a group's rows share fewer B rows): the estimate's
# live values (every B value from its first use to its last) gave 206-402
# registers where ptxas compiled 254 without spill, so where each B value
# feeds few of a group's terms (at most PART_MAX_REUSE on average) they are
# bounded by their terms instead, with n baked only (PyFR's call): groups of
# up to 684 non-zeros compiled without spill with n baked, from 648 some
# spilled 16-56 bytes and from 727 all of them 152-1160 (p5/p6-hex-m132,
# p6-hex-m460, each at 8-32 groups); with n at run time groups of 604-630
# spilled 32-72 bytes, and so did a group of 19 rows of 570 non-zeros on 35 B
# rows (a denser copy of a tet operator) with n baked
# (bench/results/cuda-spill-audit-part*.csv).  Elsewhere they are budgeted by
# the estimate as the shared groups are.
PART_MAX_TERMS = 640
PART_MAX_REUSE = 4


def group_reads(A, rows):
    """B rows the row groups `rows` read in all (each group its used B
    rows once)."""
    S = np.asarray(A) != 0
    return sum(int(S[g].any(axis=0).sum()) for g in rows)


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
    groups (one block's) shares many B rows: greedily, the first group not
    yet placed, then the one whose used B rows overlap the run's most (the
    first of equals)."""
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
    free_registers = FREE_REGISTER_ESTIMATE
    register_resident = True

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
        # from L2 once a block (L1 after); a thread loads its own group's
        # rows
        return cost.stream_work(self, group_reads(self.A, self.group_rows),
                                stack=self.params.get('stack', 1),
                                l2_rows=group_reads(self.A, self.block_rows))
