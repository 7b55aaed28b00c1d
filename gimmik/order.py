"""The order candidates are offered in, from properties of A alone.

PyFR times only the first 8 candidates of kernels() and keeps a later one
only when it is more than 5 % faster than the pick so far, so the order
decides what a PyFR run gets: the likely best must come first, the other
families' best guesses soon after (the 1.5x family pruning then drops the
slow families and frees their slots).

The rules name table rows by their ids (gimmik.base.Row.id) and
order_candidates(info, cands, platform, beta, n) sorts a platform's table
output by them: the rows a rule names for the operator first, in the
rule's order; the others after them, in table order.  Every row of a
platform with rules is named by some rule (RULE_ROWS, or a family whose
rows a rule sorts by a key: SORTED_FAMILIES) or says tail=True, and every
id named here is a row of its table: gimmik.base.check_table, run when
the platform's module is imported.

The regime of A is decided from its shape (m, k), its density, the
non-zeros per row and beta (whether C is read); n is the panel width when
the generator bakes it (PyFR always passes it), None otherwise:

- cstream-kparts, where offered (its parts read each used B row about
  once: CstreamKparts.adapt): first where m > 64, else after the first
  two rows of the rules below (KPARTS_ORDER);
- dense (density >= 0.5 and mma-gemm offered): mma-gemm first, its tiles
  in the order measured best most often (the transposed 64 x 64 tile
  first, held to four blocks an SM, then without; then for beta != 0 its
  8-warp twin); with beta != 0, k < 32 and m >= 2k the m-split bstream
  (8 row groups) before them;
- many rows (m > 64, cstream-mblock offered): cstream-mblock, its groups
  by shared B rows first where they are offered (smallest budget first:
  H100, n = 110080, 0.89-0.94 of copy on hex and prism operators whose
  rows are lines of points, 1.07-1.18x faster than the contiguous groups
  and the sparse tensor-core tiles, bench/results/pyfr-walk-h100-shared*
  and -twin-bounded-3*), then its contiguous group counts sorted by
  distance from a predicted count (m/24 rows for beta = 0; m/4 for beta
  != 0 with < 8 non-zeros a row, else m/8; at least 8), after the plain
  cstream where k <= 64 and beta = 0, and with the sparse mma-gemm tiles
  (the transposed 64 x 64 and 32 x 64 ones; the 32-row one first where
  beta != 0) first, after the shared groups, where they are offered for
  A's non-zeros (sparse_gemm_worth_it; offered for beta != 0 alone, they
  keep their place at the end); where their compact twins are offered
  (each m-block's k loop over its own used columns), those go first and
  the reordered tiles after five cstream-mblock rows; its partitioned
  groups (analysis.partition_rows; larger groups first) first where no
  shared groups are offered, else after PART_AFTER rows;
- few rows, wide (k > m): cstream-ksplit first (4 k-groups first where
  each gets at least 4 columns of A), then cstream;
- few rows, tall (m >= 2k) and density >= 0.4: bstream-msplit first
  (2, 4, then 8 row groups; deepest first when beta != 0);
- otherwise the plain cstream (one, then two columns a thread) first.

With n baked (the kernel PyFR gets, timed at its panel sizes) five rules
change, all of them towards the simpler streaming kernels:

- dense with fewer than FEW_FLOPS = 24 non-zeros per value moved (nnz /
  (m + rows of B used)): the streaming family's guess first (m <= 64: the
  m-split bstream with 4 row groups, then 2 groups two columns a thread;
  m > 64: cstream-mblock with 8 groups), the mma-gemm tiles after it (a
  tile then needs to be 5 % faster to be kept);
- many rows: the predicted cstream-mblock group count is m/32 whatever
  beta (at PyFR's panel, 8 to 16 groups are within 1 % of the best count
  on the operators that read C, where 512 MiB panels want m/4 to m/8);
  bstream-warprows (4, then 8 warps; 8 first where rows have fewer than 8
  non-zeros) goes first where A is sparser than 0.4 and 8 row groups
  would read each used row of B at least 4 times (group_reads: face
  interpolation and lifting operators, whose rows each touch a line of
  points), else after three cstream-mblock group counts; where k > m the
  plain cstream comes third;
- wide and sparser than 0.4: cstream then bstream (one column a thread)
  before the k-split;
- few rows (m <= 64, not tall and dense as above) and a B panel of
  B_FIRST_MIN_VALUES to B_FIRST_MAX_VALUES values (the rows of B used
  times n: 12 to 64 MiB in f64, a quarter of an H100's L2 to about one):
  the families that load B evict-first (bstream, the m-split bstream)
  fill the first 8 places, the plain cstream and the k-split come after
  them.  PyFR times its candidates in a loop of its own, where a B panel
  read evict-first has left L2 before the next repetition and one read
  through the read-only path is still there; in a step B was just
  written by the kernel before and C is read by the one after, and there
  the evict-first loads, which leave L2 to C, were the faster
  (bench/results/cuda-h100-context*.csv, docs/in-context.md).  Smaller
  panels stay in L2 whatever the loads (the rule lost there); with
  larger ones PyFR itself was slower (hex p3, 84 and 168 MiB: 2.8 % a
  step, pyfr-e2e-h100-bfirst-ab-*.csv).  Operators of at most
  B_FIRST_ANY_M = 32 rows keep the rule on larger panels too: at n =
  550400 (B panels of 67-134 MiB, plain loads beyond
  gimmik.cuda.PLAIN_B_MIN_VALUES) their picks were the plain cstream and
  the evict-first bstream came ahead in context by up to 8 %
  (cuda-h100-context-bfirst-5-550k.csv); no end-to-end case has so few
  rows at such panels;
- more than CHUNKED_MIN_M = 32 rows, outside the B-first bounds and
  where the tensor cores do not go first: the k-split in passes of rows
  (2 warps and 24 rows a pass, then 4 and 16; offered on wide operators
  sparser than cstream_ksplit.CHUNKED_MAX_DENSITY, at least
  CHUNKED_MIN_WIDTH = 2 rows of B used a row of C) first.  Upstream's
  k-split (the same passes) was the fastest kernel of such operators,
  ours of one pass spilled; in passes ours was the fastest of the first
  8 in context and in the hot loop (cuda-h100-context-chunked*.csv:
  p4-hex-m132 at n = 550400 1.034 -> 0.997 of upstream's time,
  p4-pri-m132 0.940 -> 0.887).

HIP (_order_hip): the order of gimmik.cost's estimate for the target
arch (cost.hip_arch of the candidates' gcn_arch) and n (the baked n,
else cost.DEFAULT_N), from the plans and the families' register
estimates (no compiler at generation time), with cost.rank's family
diversity among the first cost.FIRST: nothing on AMD can be timed here,
and the estimate is the one ordering validated (on the CUDA twin of the
same templates, bench/model/cost_validate.py; docs/cost-model.md).  Every HIP
row is placed by it (none says tail).

The CUDA rules follow the H100 times of every candidate: at 512 MiB panels, n
not baked (bench/results/cuda-h100-candidates.csv), and at PyFR's panel
for a 22k-element hex mesh, n = 110080 baked
(bench/results/pyfr-walk-h100-candidates.csv).  bench/model/order_analysis.py
replays PyFR's walk on both (bench/results/order-replay.{csv,log}).
"""

import math

from gimmik import cost
from gimmik.analysis import DENSE_DENSITY, sparse_gemm_worth_it
from gimmik.families.bstream_msplit import BstreamMsplit
from gimmik.families.bstream_warprows import BstreamWarpRows
from gimmik.families.cstream_mblock import CstreamMblock
from gimmik.families.mma_gemm import MmaGemm
from gimmik.targets import target

# Rows beyond which the row-blocked families are offered (cuda 'bigm')
BIG_M = 64

# Tall operators (m >= 2k) at least this dense offer the m-split bstream
# first: a B value loaded once feeds many rows
MSPLIT_DENSITY = 0.4

# Columns of A each k-group of cstream-ksplit should get at least
KSPLIT_MIN_COLS = 4

# Dense operators with fewer columns than this and beta != 0 offer the
# m-split bstream before the tensor cores
SMALL_K = 32


# With n baked (PyFR's panels): dense operators with fewer multiply-adds
# than this per value of B read and C written offer the streaming families
# before the tensor cores
FEW_FLOPS = 24

# With n baked: the predicted cstream-mblock group count is m / this,
# whatever beta
BAKED_MBLOCK_ROWS = 32

# With n baked, many rows, sparser than MSPLIT_DENSITY: the per-warp
# m-split bstream (B read once a block) first where the row groups of
# cstream-mblock would read each used B value at least this many times
# (OperatorInfo.group_reads), else after WARPROWS_AFTER of cstream-mblock's
# group counts
WARPROWS_GROUP_READS = 4
WARPROWS_AFTER = 3
# ... with 8 warps before 4 where rows have fewer non-zeros than this
WARPROWS_FEW_TERMS = 8

# The CUDA rows the rules name (ids of gimmik.cuda.CANDIDATES).  The
# mma-gemm tiles in order of preference (H100: the transposed 64 x 64 tile
# of six 8-deep stages first for either beta, held to four blocks an SM
# before the same tile without; a tile offered both for dense operators
# and, under gate gemmsparse, for sparse ones is named by both its rows,
# of which at most one is offered)
GEMM_ORDER = ('gemm-t4-blocks4', 'gemm-t4', 'sparse-t4', 'gemm-t4-wm8',
              'gemm-t8', 'gemm-t4-8warps', 'gemm-k4', 'gemm-k4-8warps',
              'sparse-k4-8warps', 'gemm-m8')
GEMM_ORDER_BETA = ('gemm-t4-blocks4', 'gemm-t4', 'sparse-t4',
                   'gemm-t4-8warps', 'gemm-t4-wm8', 'gemm-t8', 'gemm-k4',
                   'gemm-k4-8warps', 'sparse-k4-8warps', 'gemm-m8')
# the sparse tensor-core rows (prism-like operators): the first two before
# the streaming families, the others after five of them.  The 32-row tile
# first where beta*C is read (H100 in context, bench/results/
# cuda-h100-context-reorder2*.csv: 0.97-1.0x the 64-row tile's time with
# beta 1, 1.0-1.02x with beta 0 but p7-pri-m0's 0.98x)
SPARSE_GEMM_FIRST = ('sparse-t4', 'sparse-t4-wm2')
SPARSE_GEMM_FIRST_BETA = SPARSE_GEMM_FIRST[::-1]
SPARSE_GEMM_NEXT = ('sparse-k4-8warps', 'sparse-k4-wn4')
# where their compact twins are offered (each m-block over its own used
# columns), those go first and the reordered tiles join the next ones
# (H100, n = 110080: compact 1.0-1.13x faster on the prism operators)
SPARSE_GEMM_COMPACT = ('sparse-t4-compact', 'sparse-t4-wm2-compact')
SPARSE_GEMM_COMPACT_BETA = SPARSE_GEMM_COMPACT[::-1]
# the m-split bstream: 2, 4, then 8 row groups
MSPLIT_ORDER = ('msplit2-w2', 'msplit4-w2', 'msplit8-w1-bsz32')
# dense, beta != 0, few columns
MSPLIT_SMALL_K = ('msplit8-w1-bsz32',)
# dense, n baked, few multiply-adds per value moved: m > BIG_M, m <= BIG_M
FEW_FLOPS_BIG_M = ('mblock8', 'msplit4-w1')
FEW_FLOPS_SMALL_M = ('msplit4-w1', 'msplit2-w2')
# bstream-warprows, 4 then 8 warps
WARPROWS_ORDER = ('warprows4', 'warprows8')
STREAM_W1, STREAM_W2 = 'cstream-w1-nc', 'cstream-w2-nc'
KSPLIT2, KSPLIT4 = 'ksplit2', 'ksplit4'
# With n baked: wide (k > m) operators sparser than MSPLIT_DENSITY offer
# these first (one column a thread, C then B streamed)
BAKED_WIDE_FIRST = ('cstream-w1-nc', 'bstream-w1-cs')

# With n baked: operators of more than CHUNKED_MIN_M rows offer the k-split
# in passes of rows first where it is offered (wide sparse operators, see
# CstreamKsplit.adapt) and the tensor cores do not go first
CHUNKED_MIN_M = 32
KSPLIT_CHUNKED = ('ksplit2-c24', 'ksplit4-c16')

# With n baked: few rows, a B panel (rows of B used times n) of
# B_FIRST_MIN_VALUES to B_FIRST_MAX_VALUES values (12 to 64 MiB in f64):
# these rows (B loaded evict-first) first, the plain cstream and the
# k-split after them
B_FIRST_MIN_VALUES = 3*2**19
B_FIRST_MAX_VALUES = 8*2**20
# ... with no upper bound for operators of at most this many rows
B_FIRST_ANY_M = 32
B_FIRST = ('bstream-w1-cs', 'msplit4-w1', 'msplit2-w2', 'msplit4-w2',
           'msplit8-w1-bsz32', 'bstream-w2-cs', 'msplit8-w1',
           'cstream-w2-cs', 'msplit16-w1-bsz32', 'msplit16-w1')

# cstream-mblock's partitioned groups, where shared groups are offered
# too, come after this many rows (where none are, first: the hex
# divergence of 343 rows, H100, n = 110080, 0.88 of the same-bytes copy
# against 0.80 for the contiguous groups; beside shared groups, on the
# hex gradients and face interpolations, within 0.5 % of them by PyFR's
# timing, bench/results/pyfr-walk-h100-part*)
PART_AFTER = 5

# cstream-kparts (offered where its parts read each B row about once,
# CstreamKparts.adapt), in this order: first where m > BIG_M, else after
# the first KPARTS_AFTER rows (H100, n = 110080, the transposed hex
# gradients of 125 and 216 rows: 0.90-0.97 of copy, the best other
# candidate 0.89-0.96; unmeasured on fewer rows)
KPARTS_ORDER = ('kparts3-g2-w2', 'kparts3-g1-w4', 'kparts3-g1-w8',
                'kparts3-g2-w4')
KPARTS_AFTER = 2

# Every row id a platform's rules name ...
RULE_ROWS = {
    'cuda': frozenset(GEMM_ORDER + GEMM_ORDER_BETA + SPARSE_GEMM_FIRST
                      + SPARSE_GEMM_NEXT + SPARSE_GEMM_COMPACT
                      + MSPLIT_ORDER + MSPLIT_SMALL_K
                      + FEW_FLOPS_BIG_M + FEW_FLOPS_SMALL_M + WARPROWS_ORDER
                      + (STREAM_W1, STREAM_W2, KSPLIT2, KSPLIT4)
                      + BAKED_WIDE_FIRST + B_FIRST + KSPLIT_CHUNKED
                      + KPARTS_ORDER),
}
# ... and the families whose every row a rule places by a key computed
# from its parameters
SORTED_FAMILIES = {'cuda': (CstreamMblock,)}


def placed_rows(platform, table):
    """The ids of the rows of a platform's table its rules place (every
    row where the estimate orders the platform); None where the platform
    has no rules (its table order is the offer)."""
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
    """Predicted best row-group count of cstream-mblock (a power of two,
    at least 8): 24 rows a group for beta = 0; with C read, 4 rows a group
    where rows have fewer than 8 non-zeros, else 8."""
    rows = 24 if not beta else (4 if _nnz_per_row(info) < 8 else 8)
    if n is not None and BAKED_MBLOCK_ROWS:
        rows = BAKED_MBLOCK_ROWS
    g = max(8, info.m / rows)
    return 2**round(math.log2(g))


def _prefs_mblock(info, beta, cands, n=None):
    """The cstream-mblock rows sorted by distance of their group count
    from the predicted one (one column a thread first)."""
    g0 = _mblock_groups(info, beta, n)
    mb = [c for c in cands if c.family == CstreamMblock.name
          and 'groups' in c.params]
    mb.sort(key=lambda c: (abs(math.log2(c.params['groups'] / g0)),
                           c.params.get('width', 1), c.params['groups']))
    return [c.row for c in mb]


def _prefs_grouped(cands, param, reverse=False):
    """The cstream-mblock rows whose groups a parameter finds from A's
    pattern (`shared`: by shared B rows; `part`: partitioned; each offered
    only where they read markedly fewer B rows than contiguous groups),
    sorted by it (descending with reverse)."""
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
        # few columns and C read: the m-split bstream loads each B value
        # once for all rows
        return list(MSPLIT_SMALL_K) + gemm
    if dense:
        if n is not None and _few_flops(info):
            # baked n (PyFR's panels) and little work per loaded value:
            # the streaming families first, the tensor cores after them
            sp = FEW_FLOPS_BIG_M if m > BIG_M else FEW_FLOPS_SMALL_M
            return list(sp) + gemm
        return gemm
    prefs = _prefs_stream(info, cands, beta, n)
    if (n is not None and info.m > CHUNKED_MIN_M
            and prefs[0] not in SPARSE_GEMM_FIRST
            and not _b_first(info, n)):
        # baked n (see the module's rules)
        return list(KSPLIT_CHUNKED) + prefs
    return prefs


def _few_flops(info):
    """Whether A has fewer than FEW_FLOPS non-zeros per row of B used
    plus row of C written (the multiply-adds per value moved)."""
    return info.nnz / (info.m + len(info.bix)) < FEW_FLOPS


def _b_first(info, n):
    """Whether n is baked and A's B panel is in the B-first bounds
    (B_FIRST_MIN_VALUES and B_FIRST_MAX_VALUES, the latter only for more
    than B_FIRST_ANY_M rows)."""
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
        # groups by shared B rows first where offered (they read B from
        # L2 2-4 times less often than the contiguous groups), before the
        # sparse tensor-core tiles too; the partitioned groups (larger
        # groups first) first where no shared groups are, else after
        # PART_AFTER rows
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
        # baked n: B loaded evict-first first (see the module's rules)
        return list(B_FIRST) + [STREAM_W1, STREAM_W2, KSPLIT4, KSPLIT2]
    if k > m:    # four k-groups only where each gets a few columns
        ks = [KSPLIT4, KSPLIT2] if k >= 4*KSPLIT_MIN_COLS else \
            [KSPLIT2, KSPLIT4]
        if n is not None and info.density < MSPLIT_DENSITY:
            # baked n, sparse: the plain streams before the k-split
            return list(BAKED_WIDE_FIRST) + ks + [STREAM_W1, STREAM_W2] + ms
        return ks + [STREAM_W1, STREAM_W2] + ms
    if tall:
        return ms + [STREAM_W1, STREAM_W2, KSPLIT2]
    return [STREAM_W1, STREAM_W2, ms[1], KSPLIT2, ms[2], KSPLIT4]


def _order_hip(mm, cands, dtype):
    """HIP: cands in the order of gimmik.cost's estimate (plan facts) on
    the arch their gcn_arch names, for mm's baked n (else
    cost.DEFAULT_N), with cost.rank's family diversity."""
    if not cands:
        return []
    arch = cost.hip_arch(cands[0].opts.get('gcn_arch',
                                           cost.DEFAULT_HIP_ARCH))
    return [c for c, _ in cost.rank(mm, cands, dtype, arch, mm.n)]


def order_candidates(info, cands, platform, beta=0.0, n=None, mm=None,
                     dtype=None):
    """`cands` (a platform table's output for the operator `info`
    describes) in the order to offer them; n: the panel width where the
    generator bakes it (the generator's own n), else None.  'cuda' has
    rules: a candidate is placed by its row id (Candidate.row), the rows
    the rules name first, in their order, the others after them in their
    given order.  'hip' is ordered by gimmik.cost's estimate, which needs
    the generator `mm` and the dtype.  Other platforms keep the table
    order."""
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
