"""Per-family plans: which terms of A each thread evaluates, in which order,
and where B is staged, so that every platform's templates only walk lists."""

from dataclasses import dataclass
import functools

import numpy as np

from gimmik.analysis import (balanced_row_groups, chunks, ksplit_ranges,
                             split_even)


@dataclass
class RowPlan:
    """cstream: row i of C from the B rows in `terms`; `loads` are the B rows
    that row i is the first to need."""
    i: int
    terms: list        # [(j, value)]
    loads: list        # [j]


def cstream_plan(A):
    seen, plan = set(), []
    for i in range(A.shape[0]):
        cols = np.flatnonzero(A[i])
        terms = [(int(j), A[i, j]) for j in cols]
        loads = [int(j) for j in cols if j not in seen]
        seen.update(loads)
        plan.append(RowPlan(i, terms, loads))
    return plan


@dataclass
class ColPlan:
    """bstream: B row j updates the accumulators of rows `terms`; `first`
    marks the first update of an accumulator (an assignment)."""
    j: int
    terms: list        # [(i, value, first)]


def bstream_plan(A):
    started, plan = set(), []
    for j in np.flatnonzero((A != 0).any(axis=0)):
        terms = []
        for i in np.flatnonzero(A[:, j]):
            terms.append((int(i), A[i, j], int(i) not in started))
            started.add(int(i))
        plan.append(ColPlan(int(j), terms))
    return plan


@dataclass
class MsplitPlan:
    """bstream-msplit: wavefront y owns rows groups[y]; B staged through LDS
    in `chunks`, loaded in `batches` so a wave waits once a batch."""
    groups: list       # [(start, stop)] per wavefront
    chunks: list       # [[j, ...]] per chunk
    updates: list      # [q][y] -> [(a, value, r, first)]
    nacc: int          # accumulators per thread (largest group)
    loads: list        # [q][y] -> [chunk_row r] this wavefront stages
    batches: list = None   # [[q, ...]] chunks loaded together
    slots: list = None     # [q][y] -> [staging register of each load]

    def batch_at(self, q):
        """The batch whose first chunk is q, else None."""
        for batch in self.batches:
            if batch[0] == q:
                return batch
        return None

    @property
    def nstage(self):
        """Staging registers a thread needs: wavefront 0's (the fullest)
        loads of a batch."""
        return max([sum(len(self.loads[q][0]) for q in batch)
                    for batch in self.batches] or [0])


def msplit_plan(A, msplit, bsz, even=False, min_loads=None):
    """even: the wavefronts get near-equal numbers of rows (bounding the
    accumulators of each) instead of near-equal work; min_loads: loads a
    batch (None: one chunk a batch)."""
    groups = (split_even(A.shape[0], msplit) if even
              else balanced_row_groups(A, msplit))
    bix = np.flatnonzero((A != 0).any(axis=0))
    chs = chunks([int(j) for j in bix], bsz)
    # each used column's non-zero rows, ascending: a group's terms of a
    # column are a slice of them (a scan of every row of every group per
    # column made the plan cost m x k Python steps)
    nzrows = {int(j): np.flatnonzero(A[:, j]) for j in bix}
    started = set()
    updates, loads = [], []
    for ch in chs:
        per_y, load_y = [], []
        for y, (r0, r1) in enumerate(groups):
            ups = []
            for r, j in enumerate(ch):
                rows = nzrows[j]
                lo, hi = np.searchsorted(rows, (r0, r1))
                for i in rows[lo:hi].tolist():
                    ups.append((i - r0, A[i, j], r, i not in started))
                    started.add(i)
            per_y.append(ups)
            load_y.append(list(range(y, len(ch), msplit)))
        updates.append(per_y)
        loads.append(load_y)
    nacc = max(r1 - r0 for r0, r1 in groups)
    if min_loads is None:
        batches = [[q] for q in range(len(chs))]
    else:
        per_chunk = [max(len(ld) for ld in load_y) for load_y in loads]
        batches = [list(range(q0, q1))
                   for q0, q1 in load_runs(per_chunk, min_loads)]
    # the s-th load of a chunk has the same register in every wavefront
    # (wavefront 0 loads the most rows of a chunk)
    slots = [None]*len(chs)
    for batch in batches:
        used = 0
        for q in batch:
            slots[q] = [list(range(used, used + len(ld))) for ld in loads[q]]
            used += len(loads[q][0])
    return MsplitPlan(groups, chs, updates, nacc, loads, batches, slots)


@dataclass
class WarpRowsPlan:
    """bstream-warprows: warp y owns the rows rows[y] of C (every msplit-th row
    from y)."""
    rows: list         # [y] -> [i]
    chunks: list       # [q] -> [j]
    loads: list        # [q][y] -> [r]
    steps: list        # [q][y] -> [(r, [(i, value, first)], [i])]
    idle: list         # [y] -> [i]
    live: int

    @functools.cached_property
    def ends(self):
        """[q][y] -> the rows of warp y whose last term is in chunk q."""
        return [[[i for _, _, done in walk for i in done]
                 for walk in per_y] for per_y in self.steps]


def warprows_plan(A, msplit, bsz):
    m = A.shape[0]
    msplit = min(msplit, m)
    rows = [list(range(y, m, msplit)) for y in range(msplit)]
    bix = [int(j) for j in np.flatnonzero((A != 0).any(axis=0))]
    chs = chunks(bix, bsz)
    pos = {j: q*bsz + r for q, ch in enumerate(chs) for r, j in enumerate(ch)}
    # the B position (chunk-major) of each row's first and last term
    nz = [[pos[int(j)] for j in np.flatnonzero(A[i])] for i in range(m)]
    last = {i: max(p) for i, p in enumerate(nz) if p}
    # each used column's non-zero rows of each warp, ascending (as
    # msplit_plan: not a scan of every row per column)
    nzrows = {}
    for j in bix:
        col = np.flatnonzero(A[:, j])
        nzrows[j] = [col[col % msplit == y].tolist() for y in range(msplit)]
    steps, loads, live = [], [], 0
    started = set()
    for q, ch in enumerate(chs):
        per_y = []
        for y in range(msplit):
            walk = []
            for r, j in enumerate(ch):
                ups = []
                for i in nzrows[j][y]:
                    ups.append((i, A[i, j], i not in started))
                    started.add(i)
                if ups:
                    done = [i for i, _, _ in ups if last[i] == q*bsz + r]
                    walk.append((r, ups, done))
            per_y.append(walk)
        steps.append(per_y)
        loads.append([list(range(y, len(ch), msplit))
                      for y in range(msplit)])
    for y in range(msplit):
        # accumulators open at each B position: started and not yet stored
        events = sorted([(min(nz[i]), 1) for i in rows[y] if nz[i]]
                        + [(last[i] + 1, -1) for i in rows[y] if nz[i]],
                        key=lambda e: (e[0], e[1]))
        open_ = 0
        for _, d in events:
            open_ += d
            live = max(live, open_)
    idle = [[i for i in rows[y] if not nz[i]] for y in range(msplit)]
    return WarpRowsPlan(rows, chs, loads, steps, idle, live)


@dataclass
class KsplitPlan:
    """cstream-ksplit: wavefront y sums the columns kcols[y] of every row into
    partial sums; row i is finished by wavefront owner[i], which adds the other
    wavefronts' partials from LDS slot slot[y][i]."""
    kcols: list        # [y] -> [j]
    terms: list        # [y][i] -> [(j, value)]
    loads: list        # [y] -> [j] in load order
    owner: list        # [i] -> y
    slot: list         # [y][i] -> LDS slot of y's partial of row i, or None
    passes: list       # [(r0, r1)]

    def fetch(self, y):
        """[i] -> the B rows wavefront y first needs at row i (loaded
        there when B values are loaded on first use)."""
        seen, out = set(), []
        for terms in self.terms[y]:
            new = [j for j, _ in terms if j not in seen]
            seen.update(new)
            out.append(new)
        return out

    def live_b(self, y):
        """The most B values wavefront y holds at once when each is loaded
        at its first use and held to its last (rows in order)."""
        return max_live([[j for j, _ in t] for t in self.terms[y]],
                        self.fetch(y))


def ksplit_plan(A, ksplit, chunk=None):
    """The plan of cstream-ksplit; chunk: rows a pass (None: one pass),
    columns dealt out in turn so a B value is held across fewer rows."""
    m = A.shape[0]
    if chunk is None:
        kcols = ksplit_ranges(A, ksplit)
    else:
        bix = [int(j) for j in np.flatnonzero((A != 0).any(axis=0))]
        kcols = [bix[y::ksplit] for y in range(ksplit)]
    passes = [(r0, min(r0 + (chunk or m), m))
              for r0 in range(0, m, chunk or max(m, 1))]
    owner = [y for r0, r1 in passes
             for y, (a, b) in enumerate(split_even(r1 - r0, ksplit))
             for _ in range(a, b)]
    terms = [[[(j, A[i, j]) for j in cols if A[i, j] != 0]
              for i in range(m)] for cols in kcols]
    slot = [[None if owner[i] == y else (y if y < owner[i] else y - 1)
             for i in range(m)] for y in range(ksplit)]
    return KsplitPlan(kcols, terms, [list(c) for c in kcols], owner, slot,
                      passes)


def max_live(uses, loads):
    """The most values held at once over steps in turn where step s loads
    the values loads[s] and uses uses[s] (keys), each value held from its
    load to the last step using it."""
    last = {}
    for s, keys in enumerate(uses):
        for j in keys:
            last[j] = s
    live = best = 0
    for s, new in enumerate(loads):
        live += len(new)
        best = max(best, live)
        live -= sum(1 for j in set(uses[s]) if last[j] == s)
    return best


def cstream_live_b(plan):
    """cstream: the most B values live at once when the rows of C are
    computed in turn and each B row is held from its first to last use."""
    return max_live([[j for j, _ in row.terms] for row in plan],
                    [row.loads for row in plan])


@dataclass
class LoadBatch:
    """cstream in load batches: rows of C computed after one batch of
    loads, of the B rows they are the first of the plan to need (`loads`)
    and of the old values of rows `crows` of C (row indices of the plan)."""
    loads: list        # [j]
    crows: list        # [i]
    rows: list         # [RowPlan]


def reads_c_value(has_terms, beta):
    """Whether a row of C with (has_terms) or without terms of A reads its
    old value: C = A*B + beta*C leaves a zero row alone where beta = 1."""
    return beta != 0 and (has_terms or beta != 1)


def reads_c(row, beta):
    """Whether computing row `row` of a cstream plan reads C's old value."""
    return reads_c_value(bool(row.terms), beta)


def load_batches(plan, beta, min_loads):
    """A cstream plan cut into consecutive batches of rows, each issuing at
    least min_loads global loads (B rows first needed there and, where beta !=
    0, the C values read ahead) before its rows consume them; None: one row
    a batch."""
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


def row_batches_wait_often(plan, min_loads):
    """Whether a cstream plan computed one row a batch (each row that
    loads B waits for its loads) waits more than once per min_loads of its
    loads (at least once allowed)."""
    loading = sum(1 for row in plan if row.loads)
    loads = sum(len(row.loads) for row in plan)
    return loading > max(1, loads // min_loads)


def load_runs(loads, min_loads):
    """Consecutive runs of items (as (start, stop) index pairs) whose
    loads (a count per item) add up to at least min_loads each; a short
    last run joins the one before."""
    runs, start, count = [], 0, 0
    for idx, n in enumerate(loads):
        count += n
        if count >= min_loads:
            runs.append((start, idx + 1))
            start, count = idx + 1, 0
    if start < len(loads):
        if runs:
            runs[-1] = (runs[-1][0], len(loads))
        else:
            runs.append((start, len(loads)))
    return runs


def c_runs(rows, min_loads):
    """rows: [y] -> the rows of C whose old values warp y reads; returns
    [y] -> those rows in runs of at least min_loads (load_runs, one load a
    row), read together."""
    return [[r[a:b] for a, b in load_runs([1]*len(r), min_loads)]
            for r in rows]


def longest_run(runs):
    """The most rows one run of c_runs holds (0 for None)."""
    return max([len(run) for per_y in runs or [] for run in per_y] or [0])


def batched_live_values(batches):
    """The most values a thread holds at once: the B values from their
    batch to the batch of their last use plus a batch's C values."""
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


@dataclass
class RowBlockPlan:
    """rowblock (looped, not unrolled): the used rows of B, `bix`, are packed
    per column block into a contiguous buffer, packed row p holding B row
    bix[p]."""
    rows: int
    bix: list          # [NB] B row of each packed row
    ptr: list          # [G + 1]
    cols: list         # [T] packed row index
    vals: list         # [T][rows]


def rowblock_plan(A, rows):
    m = A.shape[0]
    bix = [int(j) for j in np.flatnonzero((A != 0).any(axis=0))]
    packed = {j: p for p, j in enumerate(bix)}
    ptr, cols, vals = [0], [], []
    for r0 in range(0, m, rows):
        blk = np.zeros((rows, A.shape[1]))
        blk[:min(rows, m - r0)] = A[r0:r0 + rows]
        for j in np.flatnonzero((blk != 0).any(axis=0)):
            cols.append(packed[int(j)])
            vals.append([blk[r, j] for r in range(rows)])
        ptr.append(len(cols))
    return RowBlockPlan(rows, bix, ptr, cols, vals)


def wave_select(values, var='wave'):
    """C expression of values[var], var a wave-uniform int in
    range(len(values)) (a register the same in every lane, so the expression is
    scalar)."""
    values = [int(v) for v in values]
    if len(set(values)) == 1:
        return str(values[0])
    step = values[1] - values[0]
    if all(b - a == step for a, b in zip(values, values[1:])):
        return f'({values[0]} + {step}*{var})'
    expr = str(values[-1])
    for y in range(len(values) - 2, -1, -1):
        expr = f'{var} == {y} ? {values[y]} : {expr}'
    return f'({expr})'


def wave_positions(rows, count, fill=0):
    """[p] -> the row each wave loads for position p (one code for every
    wave; a wave short of rows loads its last, or fill)."""
    return [[r[min(p, len(r) - 1)] if r else fill for r in rows]
            for p in range(count)]


def wave_runs(reads, min_loads):
    """reads: [y] -> the positions whose values wave y reads; returns the
    positions any wave reads, in runs of at least min_loads (load_runs,
    one load a position) loaded by one code for every wave."""
    union = sorted(set().union(*map(set, reads))) if reads else []
    return [union[a:b] for a, b in load_runs([1]*len(union), min_loads)]


def msplit_stage_rows(plan):
    """[q][s] -> the chunk row each wave loads into the s-th staging register
    of chunk q and writes to LDS (one code for every wave; a wave without
    one repeats the chunk's last row, as its owner writes it)."""
    ms = len(plan.groups)
    return [[[min(y + s*ms, len(ch) - 1) for y in range(ms)]
             for s in range(len(plan.loads[q][0]))]
            for q, ch in enumerate(plan.chunks)]
