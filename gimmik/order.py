"""The order candidates are offered in, from properties of A alone.

PyFR times only the first 8 of kernels() and keeps a later one only when
it is > 5 % faster, so the likely best goes first and each family's best
guess soon after.  CUDA: hand rules name table rows by id
(gimmik.base.Row.id; gimmik.base.check_table checks every row is named,
sorted by key (SORTED_FAMILIES) or tail=True), measured on H100 in
bench/results/cuda-h100-candidates.csv, pyfr-walk-h100-candidates.csv and
replayed in order-replay.{csv,log}; the rules with n baked follow PyFR's
panels in context (cuda-h100-context*.csv, docs/in-context.md).  HIP: the
order of gimmik.cost's estimate (nothing on AMD can be timed here;
docs/cost-model.md).
"""

import math

from gimmik import cost
from gimmik.analysis import DENSE_DENSITY, sparse_gemm_worth_it
from gimmik.families.bstream_msplit import BstreamMsplit
from gimmik.families.bstream_warprows import BstreamWarpRows
from gimmik.families.cstream_mblock import CstreamMblock
from gimmik.families.mma_gemm import MmaGemm
from gimmik.targets import target

# rows beyond which the row-blocked families are offered (cuda 'bigm')
BIG_M = 64

# tall (m >= 2k) and this dense: m-split bstream first (one B load, many rows)
MSPLIT_DENSITY = 0.4

# columns of A each k-group of cstream-ksplit should get at least
KSPLIT_MIN_COLS = 4

# dense, beta != 0, fewer columns: m-split bstream before the tensor cores
SMALL_K = 32

# n baked, dense, < this many FMAs a value moved: streaming before tensor cores
FEW_FLOPS = 24

# n baked: cstream-mblock's predicted group count is m / this, whatever beta
BAKED_MBLOCK_ROWS = 32

# n baked, sparse: warprows first where mblock's groups re-read B this often
WARPROWS_GROUP_READS = 4
WARPROWS_AFTER = 3
# ... 8 warps before 4 below this many non-zeros a row
WARPROWS_FEW_TERMS = 8

# CUDA row ids (gimmik.cuda.CANDIDATES) the rules name; tiles best first
GEMM_ORDER = ('gemm-t4-blocks4', 'gemm-t4', 'sparse-t4', 'gemm-t4-wm8',
              'gemm-t8', 'gemm-t4-8warps', 'gemm-k4', 'gemm-k4-8warps',
              'sparse-k4-8warps', 'gemm-m8')
GEMM_ORDER_BETA = ('gemm-t4-blocks4', 'gemm-t4', 'sparse-t4',
                   'gemm-t4-8warps', 'gemm-t4-wm8', 'gemm-t8', 'gemm-k4',
                   'gemm-k4-8warps', 'sparse-k4-8warps', 'gemm-m8')
# sparse tensor-core tiles; 32-row first with beta
# (cuda-h100-context-reorder2*.csv)
SPARSE_GEMM_FIRST = ('sparse-t4', 'sparse-t4-wm2')
SPARSE_GEMM_FIRST_BETA = SPARSE_GEMM_FIRST[::-1]
SPARSE_GEMM_NEXT = ('sparse-k4-8warps', 'sparse-k4-wn4')
# compact twins (each m-block over its own used columns) first where offered
SPARSE_GEMM_COMPACT = ('sparse-t4-compact', 'sparse-t4-wm2-compact')
SPARSE_GEMM_COMPACT_BETA = SPARSE_GEMM_COMPACT[::-1]
MSPLIT_ORDER = ('msplit2-w2', 'msplit4-w2', 'msplit8-w1-bsz32')
MSPLIT_SMALL_K = ('msplit8-w1-bsz32',)
FEW_FLOPS_BIG_M = ('mblock8', 'msplit4-w1')
FEW_FLOPS_SMALL_M = ('msplit4-w1', 'msplit2-w2')
WARPROWS_ORDER = ('warprows4', 'warprows8')
STREAM_W1, STREAM_W2 = 'cstream-w1-nc', 'cstream-w2-nc'
KSPLIT2, KSPLIT4 = 'ksplit2', 'ksplit4'
# n baked, wide and sparse: the plain streams first
BAKED_WIDE_FIRST = ('cstream-w1-nc', 'bstream-w1-cs')

# n baked, > CHUNKED_MIN_M rows: k-split in passes first, one pass spilled
# (cuda-h100-context-chunked*.csv)
CHUNKED_MIN_M = 32
KSPLIT_CHUNKED = ('ksplit2-c24', 'ksplit4-c16')

# n baked, few rows, B panel in these bounds: evict-first B leaves L2 to C
# (cuda-h100-context*.csv; larger: pyfr-e2e-h100-bfirst-ab-*.csv)
B_FIRST_MIN_VALUES = 3*2**19
B_FIRST_MAX_VALUES = 8*2**20
# ... unbounded for this few rows (cuda-h100-context-bfirst-5-550k.csv)
B_FIRST_ANY_M = 32
B_FIRST = ('bstream-w1-cs', 'msplit4-w1', 'msplit2-w2', 'msplit4-w2',
           'msplit8-w1-bsz32', 'bstream-w2-cs', 'msplit8-w1',
           'cstream-w2-cs', 'msplit16-w1-bsz32', 'msplit16-w1')

# partitioned groups after this many rows beside shared groups, else first
# (pyfr-walk-h100-part*)
PART_AFTER = 5

# cstream-kparts first where m > BIG_M, else after KPARTS_AFTER rows
KPARTS_ORDER = ('kparts3-g2-w2', 'kparts3-g1-w4', 'kparts3-g1-w8',
                'kparts3-g2-w4')
KPARTS_AFTER = 2

RULE_ROWS = {
    'cuda': frozenset(GEMM_ORDER + GEMM_ORDER_BETA + SPARSE_GEMM_FIRST
                      + SPARSE_GEMM_NEXT + SPARSE_GEMM_COMPACT
                      + MSPLIT_ORDER + MSPLIT_SMALL_K
                      + FEW_FLOPS_BIG_M + FEW_FLOPS_SMALL_M + WARPROWS_ORDER
                      + (STREAM_W1, STREAM_W2, KSPLIT2, KSPLIT4)
                      + BAKED_WIDE_FIRST + B_FIRST + KSPLIT_CHUNKED
                      + KPARTS_ORDER),
}
# families whose rows a rule sorts by a key of their parameters
SORTED_FAMILIES = {'cuda': (CstreamMblock,)}


def placed_rows(platform, table):
    """Ids of the rows the order places; None: the table order stands."""
    how = target(platform).order
    if how == 'cost':
        return {row.id for row in table}
    if how != 'rules':
        return None
    return RULE_ROWS[platform] | {row.id for row in table
                                  if row.family in SORTED_FAMILIES[platform]}


def _nnz_per_row(info):
    return info.nnz / max(1, info.m - len(info.zero_rows))


def _mblock_groups(info, beta, n=None):
    """Predicted best cstream-mblock group count (a power of two >= 8)."""
    rows = 24 if not beta else (4 if _nnz_per_row(info) < 8 else 8)
    if n is not None and BAKED_MBLOCK_ROWS:
        rows = BAKED_MBLOCK_ROWS
    g = max(8, info.m / rows)
    return 2**round(math.log2(g))


def _prefs_mblock(info, beta, cands, n=None):
    """cstream-mblock rows by distance from the predicted group count."""
    g0 = _mblock_groups(info, beta, n)
    mb = [c for c in cands if c.family == CstreamMblock.name
          and 'groups' in c.params]
    mb.sort(key=lambda c: (abs(math.log2(c.params['groups'] / g0)),
                           c.params.get('width', 1), c.params['groups']))
    return [c.row for c in mb]


def _prefs_grouped(cands, param, reverse=False):
    """cstream-mblock rows with pattern-found groups, sorted by `param`."""
    rows = [c for c in cands if c.family == CstreamMblock.name
            and param in c.params]
    rows.sort(key=lambda c: c.params[param], reverse=reverse)
    return [c.row for c in rows]


def _prefs(info, cands, beta, n=None):
    prefs = _prefs_by_regime(info, cands, beta, n)
    if info.m > BIG_M:
        return list(KPARTS_ORDER) + prefs
    return prefs[:KPARTS_AFTER] + list(KPARTS_ORDER) + prefs[KPARTS_AFTER:]


def _prefs_by_regime(info, cands, beta, n=None):
    m, k = info.m, info.k
    families = {c.family for c in cands}
    gemm = list(GEMM_ORDER_BETA if beta else GEMM_ORDER)
    dense = MmaGemm.name in families and info.density >= DENSE_DENSITY
    if dense and beta and m >= 2*k and k < SMALL_K and \
            BstreamMsplit.name in families:
        # few columns, C read: one B load serves all rows
        return list(MSPLIT_SMALL_K) + gemm
    if dense:
        if n is not None and _few_flops(info):
            sp = FEW_FLOPS_BIG_M if m > BIG_M else FEW_FLOPS_SMALL_M
            return list(sp) + gemm
        return gemm
    prefs = _prefs_stream(info, cands, beta, n)
    if (n is not None and info.m > CHUNKED_MIN_M
            and prefs[0] not in SPARSE_GEMM_FIRST
            and not _b_first(info, n)):
        return list(KSPLIT_CHUNKED) + prefs
    return prefs


def _few_flops(info):
    """Whether A does < FEW_FLOPS multiply-adds per value moved."""
    return info.nnz / (info.m + len(info.bix)) < FEW_FLOPS


def _b_first(info, n):
    """Whether n is baked and A's B panel is in the B-first bounds."""
    if n is None:
        return False
    values = len(info.bix)*n
    return values >= B_FIRST_MIN_VALUES and (
        values <= B_FIRST_MAX_VALUES or info.m <= B_FIRST_ANY_M)


def _prefs_stream(info, cands, beta, n=None):
    m, k = info.m, info.k
    families = {c.family for c in cands}
    if m > BIG_M and CstreamMblock.name in families:
        mb = _prefs_mblock(info, beta, cands, n)
        if n is not None and BstreamWarpRows.name in families:
            wr = list(WARPROWS_ORDER)
            if _nnz_per_row(info) < WARPROWS_FEW_TERMS:
                wr = wr[::-1]
            if k > m:     # wide: the plain stream among the first
                mb = mb[:2] + [STREAM_W1] + mb[2:]
            if (info.group_reads >= WARPROWS_GROUP_READS
                    and info.density < MSPLIT_DENSITY):
                mb = wr + mb
            else:
                mb = mb[:WARPROWS_AFTER] + wr + mb[WARPROWS_AFTER:]
        # shared groups re-read B least (pyfr-walk-h100-shared*,
        # pyfr-walk-h100-twin-bounded-3*)
        shared = _prefs_grouped(cands, 'shared')
        part = _prefs_grouped(cands, 'part', reverse=True)
        if MmaGemm.name in families and sparse_gemm_worth_it(info):
            first = list(SPARSE_GEMM_FIRST_BETA if beta
                         else SPARSE_GEMM_FIRST)
            nxt = list(SPARSE_GEMM_NEXT)
            ids = {c.row for c in cands}
            compact = [r for r in (SPARSE_GEMM_COMPACT_BETA if beta
                                   else SPARSE_GEMM_COMPACT) if r in ids]
            if compact:
                first, nxt = compact, first + nxt
            return shared + first + mb[:5] + nxt + mb[5:] + [STREAM_W1]
        mb = shared + mb
        mb = mb[:PART_AFTER] + part + mb[PART_AFTER:] if shared else \
            part + mb
        if k <= BIG_M and not beta:   # few rows of B: one group does
            return [STREAM_W1] + mb + [STREAM_W2]
        return mb + [STREAM_W1, STREAM_W2]
    ms = list(MSPLIT_ORDER)
    if beta:     # C read too: the deeper split first
        ms = ms[::-1]
    tall = m >= 2*k and info.density >= MSPLIT_DENSITY
    if _b_first(info, n) and not tall:
        return list(B_FIRST) + [STREAM_W1, STREAM_W2, KSPLIT4, KSPLIT2]
    if k > m:    # four k-groups only where each gets a few columns
        ks = [KSPLIT4, KSPLIT2] if k >= 4*KSPLIT_MIN_COLS else \
            [KSPLIT2, KSPLIT4]
        if n is not None and info.density < MSPLIT_DENSITY:
            return list(BAKED_WIDE_FIRST) + ks + [STREAM_W1, STREAM_W2] + ms
        return ks + [STREAM_W1, STREAM_W2] + ms
    if tall:
        return ms + [STREAM_W1, STREAM_W2, KSPLIT2]
    return [STREAM_W1, STREAM_W2, ms[1], KSPLIT2, ms[2], KSPLIT4]


def _order_hip(mm, cands, dtype):
    """HIP: cands by gimmik.cost's estimate on their gcn_arch."""
    if not cands:
        return []
    arch = cost.hip_arch(cands[0].opts.get('gcn_arch',
                                           cost.DEFAULT_HIP_ARCH))
    return [c for c, _ in cost.rank(mm, cands, dtype, arch, mm.n)]


def order_candidates(info, cands, platform, beta=0.0, n=None, mm=None,
                     dtype=None):
    """`cands` in offer order (n: the baked panel width or None); the cost
    order needs `mm` and `dtype` (ValueError without them)."""
    cands = list(cands)
    how = target(platform).order
    if how == 'cost':
        if mm is None or dtype is None:
            raise ValueError(f'the {platform} order is estimated: it needs '
                             'the generator (mm) and the dtype')
        return _order_hip(mm, cands, dtype)
    if how != 'rules':
        return cands
    prefs = _prefs(info, cands, beta, n)
    rank = {}
    for r, row in enumerate(prefs):
        rank.setdefault(row, r)
    return [c for _, c in sorted(
        enumerate(cands),
        key=lambda item: (rank.get(item[1].row, len(prefs)), item[0]))]
