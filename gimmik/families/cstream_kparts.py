"""cstream-kparts: A's used columns in `parts` parts, its rows in `groups`
row groups, one a block; a part's rows grouped by shared B rows, partial
sums kept in shared memory.  So each B row is read once a row group: on
tensor-product gradients' transposes a part's groups are lines sharing no
B row, where any grouping of whole rows reads it several times."""

from dataclasses import dataclass

import numpy as np

from gimmik import cost
from gimmik.analysis import ksplit_ranges, shared_row_groups
from gimmik.families import Family, Geometry
from gimmik.families.cstream_mblock import group_reads, mblock_rows
from gimmik.plans import balanced_row_groups

# Offered where the row groups' parts read each used B row at most this
# often on average (on the hex gradients' transposes: 1 with one row
# group, 4/3 with two, the z-lines read once per group)
KPARTS_MAX_READS = 1.5
# ... and at most this fraction of the B rows that A's whole rows grouped
# by shared B rows (with the same budget) read (on the hex gradients'
# transposes 0.2-0.3; where whole rows share their B rows as well, as on
# small or dense operators, 1: cstream-mblock's groups do)
KPARTS_MAX_READS_SHARED = 0.5
# ... and at most this many non-zeros: beyond, every warp's own long unrolled
# code a part made it slow (H100)
KPARTS_MAX_NNZ = 4096


@dataclass(frozen=True)
class KpartsRow:
    """Row i of C in one part: its terms ((B row, value), ...), its role
    ('only': its one part, stores C; 'first': stores its partial sum in
    slot; 'add': adds to it; 'last': stores the slot's sum plus its own
    in C) and its exchange slot (None for 'only')."""
    i: int
    terms: tuple
    role: str
    slot: int = None


@dataclass(frozen=True)
class KpartsGroup:
    """Rows computed from one load of the B rows `loads`."""
    loads: tuple
    rows: tuple


@dataclass(frozen=True)
class KpartsBlock:
    """The plan of one row group: parts[p][w] -> warp w's groups of part
    p, zero_rows (rows of C without terms, warp 0 of the first part), and
    the exchange slots it uses."""
    parts: tuple
    zero_rows: tuple
    slots: int


def kparts_plan(A, groups, parts, shared, warps, min_loads=None):
    """[KpartsBlock of each of A's `groups` contiguous row groups (empty ones
    dropped)]: see the module docstring."""
    S = np.asarray(A) != 0
    cols = [c for c in ksplit_ranges(A, parts) if c]
    out = []
    for r0, r1 in balanced_row_groups(A, groups):
        if r1 <= r0:
            continue
        rows = range(r0, r1)
        touched = {i: [p for p, c in enumerate(cols) if S[i, c].any()]
                   for i in rows}
        crossing = [i for i in rows if len(touched[i]) > 1]
        slot = {i: s for s, i in enumerate(crossing)}
        block = []
        for p, c in enumerate(cols):
            live = [i for i in rows if p in touched[i]]
            if not live:
                continue
            sub = np.zeros((len(live), A.shape[1]))
            sub[:, c] = np.asarray(A)[np.ix_(live, c)]
            Sc = S[:, c]
            found = [_group(A, Sc, [live[g] for g in grp], c, p, touched,
                            slot)
                     for grp in shared_row_groups(sub, shared)]
            block.append(tuple(_batched(own, min_loads)
                               for own in _deal(found, warps)))
        zero = tuple(i for i in rows if not touched[i])
        if not block:
            block.append(tuple(() for _ in range(warps)))
        out.append(KpartsBlock(tuple(block), zero, len(crossing)))
    return out


def _group(A, S, rows, cols, p, touched, slot):
    # S: A's pattern at cols, made once a part (here per group, it made
    # the plan cubic in m: a 1024 x 1024 identity took seconds)
    loads = tuple(int(cols[j]) for j in np.flatnonzero(S[rows].any(axis=0)))
    out = []
    for i in rows:
        terms = tuple((int(cols[j]), float(A[i, cols[j]]))
                      for j in np.flatnonzero(S[i]))
        t = touched[i]
        role = ('only' if len(t) == 1 else 'first' if p == t[0]
                else 'last' if p == t[-1] else 'add')
        out.append(KpartsRow(i, terms, role, slot.get(i)))
    return KpartsGroup(loads, tuple(out))


def _deal(groups, warps):
    """groups dealt to warps, the costliest first to the least loaded
    (cost: loads plus terms); each warp's in their original order."""
    load, own = [0]*warps, [[] for _ in range(warps)]
    cost = [len(g.loads) + sum(len(r.terms) for r in g.rows) for g in groups]
    for g in sorted(range(len(groups)), key=lambda g: (-cost[g], g)):
        w = load.index(min(load))
        own[w].append(g)
        load[w] += cost[g]
    return tuple(tuple(groups[g] for g in sorted(o)) for o in own)


def _batched(groups, min_loads):
    """groups merged in runs until each loads at least min_loads B rows
    (the last run may load fewer); groups as they are for None."""
    if not min_loads:
        return groups
    out, loads, rows = [], [], []
    for g in groups:
        loads += [j for j in g.loads if j not in loads]
        rows += g.rows
        if len(loads) >= min_loads:
            out.append(KpartsGroup(tuple(loads), tuple(rows)))
            loads, rows = [], []
    if rows:
        out.append(KpartsGroup(tuple(loads), tuple(rows)))
    return tuple(out)


def kparts_reads(plan):
    """B rows the plan loads in all (each group its loads once)."""
    return sum(len(g.loads) for blk in plan for part in blk.parts
               for warp in part for g in warp)


def _bound_plan(mm, params):
    """kparts_plan of generator mm's operator for a row's parameters, on
    its platform's load batches; built once per generator (adapt and the
    kernel share it)."""
    key = ('cstream-kparts plan', params['groups'], params['parts'],
           params['shared'], params['warps'])
    return mm.memo(key, lambda: kparts_plan(
        mm.A, params['groups'], params['parts'], params['shared'],
        params['warps'], mm.target.batch_loads))


class CstreamKparts(Family):
    name = 'cstream-kparts'

    @classmethod
    def adapt(cls, mm, params):
        # on operators of at most KPARTS_MAX_NNZ non-zeros where some row
        # crosses parts, every warp has groups in every part and B rows are
        # read at most KPARTS_MAX_READS times and KPARTS_MAX_READS_SHARED
        # as often as whole rows grouped would
        info = mm.info
        if info.nnz > KPARTS_MAX_NNZ or not len(info.bix):
            return None
        plan = _bound_plan(mm, params)
        reads = kparts_reads(plan)
        whole = group_reads(mm.A, mblock_rows(
            mm.A, {'shared': params['shared']}))
        if (not any(blk.slots for blk in plan)
                or not all(all(part) for blk in plan for part in blk.parts)
                or reads > KPARTS_MAX_READS*len(info.bix)
                or reads > KPARTS_MAX_READS_SHARED*whole):
            return None
        return params

    def geometry(self):
        slots = max(blk.slots for blk in self.plan)
        return Geometry((self.warp, self.params['warps'], 1),
                        slots*self.warp*self.itemsize, 1,
                        row_groups=len(self.plan))

    def build_plan(self):
        return _bound_plan(self.mm, self.params)

    def context(self):
        return {'rowgroups': self.plan,
                'slots': max(blk.slots for blk in self.plan)}

    def live_values(self):
        # a group's B values and the sum of one row
        return max(len(g.loads) + 1 for blk in self.plan
                   for part in blk.parts for warp in part for g in warp)

    def work(self):
        # each group's B rows read once; the partial sums of the rows crossing
        # parts go through shared memory (a write, reads and a last read)
        slots = sum(blk.slots for blk in self.plan)
        return cost.stream_work(self, kparts_reads(self.plan),
                                lds=3*slots*self.itemsize)
