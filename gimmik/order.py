"""The order candidates are offered in.

PyFR times only the first 8 of kernels() and keeps a later one only when it
is > 5 % faster, so the likely best goes first and each family's best guess
soon after.  Platforms with cost constants (gimmik.targets: HIP, CUDA) rank
by gimmik.cost's estimate; an :class:`Override` then corrects it where a
measurement, cited by it, says the estimate errs.  Other platforms keep
their table's order.
"""

from dataclasses import dataclass
import math
from typing import Callable

from gimmik import cost
from gimmik.analysis import DENSE_DENSITY, sparse_gemm_worth_it
from gimmik.families.cstream_kparts import CstreamKparts
from gimmik.families.cstream_ksplit import CstreamKsplit
from gimmik.families.cstream_mblock import CstreamMblock
from gimmik.targets import ARCHES


@dataclass(frozen=True)
class Override:
    """A measured correction of the estimate's order: where `when(mm)`, the
    candidates `first(mm, cand)` picks lead in the estimate's order, and a
    family's members take its places sorted by `within(mm, members)(cand)`."""
    name: str
    cite: str
    when: Callable
    first: Callable = None
    within: tuple = None      # (family name, key maker)

    def apply(self, mm, ranked):
        if not self.when(mm):
            return ranked
        if self.within is not None:
            name, key = self.within
            pos = [i for i, c in enumerate(ranked) if c.family == name]
            mine = [ranked[i] for i in pos]
            mine = sorted(mine, key=key(mm, mine))
            ranked = list(ranked)
            for i, c in zip(pos, mine):
                ranked[i] = c
        if self.first is not None:
            leads = [self.first(mm, c) for c in ranked]
            ranked = ([c for c, x in zip(ranked, leads) if x]
                      + [c for c, x in zip(ranked, leads) if not x])
        return ranked


# -- many rows: cstream-kparts, then groups by shared B rows lead; the
# contiguous cstream-mblock groups by their count ----------------------------

# rows beyond which (gate bigm) the row-grouped families lead
BIG_M = 64

# rows a group: run-time n beta 0, beta with few / many non-zeros a row,
# baked n (any beta)
MBLOCK_ROWS, MBLOCK_ROWS_BETA_FEW, MBLOCK_ROWS_BETA, MBLOCK_ROWS_BAKED = \
    24, 4, 8, 32
# ... few: below this many non-zeros a row
MBLOCK_FEW_TERMS = 8


def mblock_groups(mm):
    """Predicted best cstream-mblock group count (a power of two >= 8)."""
    info = mm.info
    per_row = info.nnz / max(1, info.m - len(info.zero_rows))
    if mm.n is not None:
        rows = MBLOCK_ROWS_BAKED
    elif not mm.beta:
        rows = MBLOCK_ROWS
    else:
        rows = (MBLOCK_ROWS_BETA_FEW if per_row < MBLOCK_FEW_TERMS
                else MBLOCK_ROWS_BETA)
    return 2**round(math.log2(max(8, info.m / rows)))


# partitioned groups after this many members beside shared groups, else first
# (pyfr-walk-h100-part22.csv)
PART_AFTER = 5


def _by_groups(mm, members):
    """Groups by shared B rows first (smallest budget first: they re-read B
    least), contiguous ones by distance from mblock_groups, partitioned ones
    (larger first) after PART_AFTER members, or first without shared ones."""
    g0 = mblock_groups(mm)
    shared = sorted((c for c in members if 'shared' in c.params),
                    key=lambda c: c.params['shared'])
    part = sorted((c for c in members if 'part' in c.params),
                  key=lambda c: -c.params['part'])
    contig = sorted((c for c in members if 'groups' in c.params),
                    key=lambda c: (abs(math.log2(c.params['groups'] / g0)),
                                   c.params.get('width', 1),
                                   c.params['groups']))
    if shared:
        cut = max(0, PART_AFTER - len(shared))
        out = shared + contig[:cut] + part + contig[cut:]
    else:
        out = part + contig
    where = {id(c): i for i, c in enumerate(out)}
    return lambda c: where.get(id(c), len(out))


def _shared_groups(mm, c):
    return c.family == CstreamMblock.name and 'shared' in c.params


def _kparts(mm, c):
    return c.family == CstreamKparts.name


def _big_m(mm):
    return mm.info.m > BIG_M


# -- the one-pass k-split on wide operators -----------------------------------

# columns of A each k-group should get at least
KSPLIT_MIN_COLS = 4


def _wide(mm):
    return mm.info.k > mm.info.m <= BIG_M


def _ksplit_lead(mm, c):
    """The one-pass k-splits lead on wide A."""
    return c.family == CstreamKsplit.name and 'chunk' not in c.params


def _ksplit_groups(mm, members):
    """The one-pass k-split whose groups each get KSPLIT_MIN_COLS columns
    first (else two groups)."""
    want = 4 if mm.info.k >= 4*KSPLIT_MIN_COLS else 2
    return lambda c: (c.params.get('chunk', 0), c.params['ksplit'] != want,
                      c.params['ksplit'])


# -- n baked: B loaded evict-first where its panel is about an L2 or two -----

B_FIRST_MIN_VALUES = 3*2**19
B_FIRST_MAX_VALUES = 8*2**20
# ... unbounded for this few rows (cuda-h100-context-bfirst-5-550k.csv)
B_FIRST_ANY_M = 32
# tall (m >= 2k) and this dense: not B-first (the m-split's own rule)
TALL_DENSITY = 0.4


def panels_fit_l2(mm):
    """Whether A's used rows of B and C at the baked n (f64) fit the L2 of
    the estimate's device: a hot walk then times kernels on panels in L2,
    where in a step they come from DRAM."""
    l2 = ARCHES[mm.target.default_arch].l2_size
    return (mm.n is not None
            and (len(mm.info.bix) + mm.info.m)*mm.n*8 <= l2)


def b_first(mm):
    """Whether n is baked, A's B panel is in the B-first bounds and A's
    panels do not fit the L2 (A not dense, nor tall and this dense: their
    own families lead)."""
    info, n = mm.info, mm.n
    # beyond BIG_M rows the row-grouped families lead instead; where the
    # panels fit the L2 the B-first picks tied upstream's in context and
    # ran up to 1.26x hot, beyond it they gained 3.5 % in context
    # (cuda-h200-context-o123-cahead*.csv; after: -bfirst-fit*.csv)
    if (n is None or info.m > BIG_M or info.density >= DENSE_DENSITY
            or info.m >= 2*info.k and info.density >= TALL_DENSITY
            or panels_fit_l2(mm)):
        return False
    values = len(info.bix)*n
    return values >= B_FIRST_MIN_VALUES and (
        values <= B_FIRST_MAX_VALUES or info.m <= B_FIRST_ANY_M)


def _loads_b_first(mm, c):
    # 'plain': the evict-first rows beyond PLAIN_B_MIN_VALUES (cuda._adapt)
    return c.params.get('ld') in ('cs', 'plain')


# -- n baked, many rows: the k-split in passes leads -------------------------

CHUNKED_MIN_M = 32


def _chunked_first(mm):
    info = mm.info
    return (mm.n is not None and info.m > CHUNKED_MIN_M
            and info.density < DENSE_DENSITY and not b_first(mm)
            and not sparse_gemm_worth_it(info))


def _chunked(mm, c):
    return c.family == CstreamKsplit.name and 'chunk' in c.params


def _by_chunk(mm, members):
    """More rows a pass first (fewer passes, one spilled at most)."""
    return lambda c: (-c.params.get('chunk', 0), c.params['ksplit'])


OVERRIDES = {
    'cuda': (
        Override('mblock-groups', 'cuda-h100-candidates.csv, '
                 'pyfr-walk-h100-candidates.csv', when=lambda mm: True,
                 within=(CstreamMblock.name, _by_groups)),
        Override('wide-ksplit', 'cuda-h100-candidates.csv', when=_wide,
                 within=(CstreamKsplit.name, _ksplit_groups),
                 first=_ksplit_lead),
        Override('shared-groups', 'pyfr-walk-h100-shared, '
                 'cuda-h200-context-twin-rules.csv', when=_big_m,
                 first=_shared_groups),
        Override('kparts', 'archive/cuda-h100-context-kparts.csv, '
                 'cuda-h200-context-twin-rules.csv', when=_big_m,
                 first=_kparts),
        Override('b-first', 'cuda-h100-context-bfirst-*.csv, '
                 'pyfr-e2e-h100-bfirst-ab-*.csv', when=b_first,
                 first=_loads_b_first),
        Override('chunked', 'cuda-h100-context-chunked*.csv',
                 when=_chunked_first, within=(CstreamKsplit.name, _by_chunk),
                 first=_chunked),
    ),
}


def order_candidates(mm, cands, dtype):
    """`cands` of generator mm in offer order."""
    cands = list(cands)
    t = mm.target
    if not t.arches or not cands:
        return cands
    arch = cands[0].opts.get('gcn_arch', t.default_arch) \
        if mm.platform == 'hip' else t.default_arch
    ranked = [c for c, _ in cost.rank(mm, cands, dtype, t.cost_arch(arch),
                                      mm.n)]
    for o in OVERRIDES.get(mm.platform, ()):
        ranked = o.apply(mm, ranked)
    return ranked
