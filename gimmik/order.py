"""The order candidates are offered in, from properties of A alone.

PyFR times only the first 8 candidates of kernels() and keeps a later one
only when it is more than 5 % faster than the pick so far, so the order
decides what a PyFR run gets: the likely best must come first, the other
families' best guesses soon after (the 1.5x family pruning then drops the
slow families and frees their slots).

order_candidates(info, cands, platform, beta, n) sorts a platform's table
output (a stable sort: candidates no rule names keep their table order,
after the named ones).  The regime of A is decided from its shape (m, k),
its density, the non-zeros per row and beta (whether C is read); n is the
panel width when the generator bakes it (PyFR always passes it), None
otherwise:

- dense (density >= 0.5 and mma-gemm offered): mma-gemm first, its tiles
  in the order measured best most often (the transposed 64 x 64 tile
  first, held to four blocks an SM, then without; then for beta != 0 its
  8-warp twin); with beta != 0, k < 32 and m >= 2k the m-split bstream
  (8 row groups) before them;
- many rows (m > 64, cstream-mblock offered): cstream-mblock, its group
  counts sorted by distance from a predicted count (m/24 rows for beta =
  0; m/4 for beta != 0 with < 8 non-zeros a row, else m/8; at least 8),
  after the plain cstream where k <= 64 and beta = 0, and with the sparse
  mma-gemm tile (the transposed 64 x 64 one) first where it is offered
  for A's non-zeros (sparse_gemm_worth_it; offered for beta != 0 alone,
  it keeps its place at the end);
- few rows, wide (k > m): cstream-ksplit first (4 k-groups first where
  each gets at least 4 columns of A), then cstream;
- few rows, tall (m >= 2k) and density >= 0.4: bstream-msplit first
  (2, 4, then 8 row groups; deepest first when beta != 0);
- otherwise the plain cstream (one, then two columns a thread) first.

With n baked (the kernel PyFR gets, timed at its panel sizes) three rules
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
  before the k-split.

HIP (_prefs_hip): the operators mfma-dense takes keep the table order;
the others get the regime's lead family from the CUDA evidence of the
families both share, ordered within by the waves per SIMD the gfx90a ISA
gives them (its docstring has the numbers).

The CUDA rules follow the H100 times of every candidate: at 512 MiB panels, n
not baked (bench/results/cuda-h100-candidates.csv), and at PyFR's panel
for a 22k-element hex mesh, n = 110080 baked
(bench/results/pyfr-walk-h100-candidates.csv).  bench/order_analysis.py
replays PyFR's walk on both (bench/results/order-replay.{csv,log}).
"""

import math

from gimmik.analysis import DENSE_DENSITY, sparse_gemm_worth_it

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

# With n baked: wide (k > m) operators sparser than MSPLIT_DENSITY offer
# these first (one column a thread, C then B streamed)
BAKED_WIDE_FIRST = (('cstream', dict(width=1, ld='nc')),
                    ('bstream', dict(width=1)))


def _match(cand, family, **params):
    if cand.family != family:
        return False
    return all(cand.params.get(k) == v for k, v in params.items())


def _prefs_gemm(beta):
    """mma-gemm rows in order of preference (H100: the transposed 64 x 64
    tile of six 8-deep stages first for either beta, held to four blocks
    an SM before the same tile without)."""
    g = 'mma-gemm'
    t4 = dict(shape='m16n8k4t', mwarps=2, nwarps=2, wm=4, wn=2, kstage=2,
              nbuf=6, blocks=None)
    t4b4 = dict(t4, blocks=4)                      # four blocks an SM
    t4w8 = dict(t4, wm=8, nbuf=4)                  # 128 x 64
    t8 = dict(t4, shape='m16n8k8t', nbuf=3)        # 16-deep stages
    t4m4 = dict(t4, mwarps=4, wm=2)                # 8 warps
    k4 = dict(shape='m16n8k4', mwarps=2, nwarps=2, wm=2, wn=4, kstage=2,
              nbuf=6)
    k4m4 = dict(k4, mwarps=4, nbuf=4)
    m8 = dict(shape='m8n8k4', mwarps=2, nwarps=2, wm=4, wn=4, kstage=2,
              nbuf=3)
    order = [t4b4, t4, t4w8, t8, t4m4, k4, k4m4, m8] if not beta else \
        [t4b4, t4, t4m4, t4w8, t8, k4, k4m4, m8]
    return [(g, dict(p, tiles=None)) for p in order]   # tiles: not set


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
    """cstream-mblock candidates sorted by distance of their group count
    from the predicted one (one column a thread first)."""
    g0 = _mblock_groups(info, beta, n)
    mb = [c for c in cands if c.family == 'cstream-mblock']
    mb.sort(key=lambda c: (abs(math.log2(c.params['groups'] / g0)),
                           c.params.get('width', 1), c.params['groups']))
    return [(c.family, dict(c.params)) for c in mb]


def _prefs(info, cands, beta, n=None):
    m, k = info.m, info.k
    families = {c.family for c in cands}
    dense = 'mma-gemm' in families and info.density >= DENSE_DENSITY
    if dense and beta and m >= 2*k and k < SMALL_K and \
            'bstream-msplit' in families:
        # few columns and C read: the m-split bstream loads each B value
        # once for all rows
        return [('bstream-msplit', dict(width=1, msplit=8, bsz=32))] + \
            _prefs_gemm(beta)
    if dense:
        if n is not None and _few_flops(info):
            # baked n (PyFR's panels) and little work per loaded value:
            # the streaming families first, the tensor cores after them
            if m > BIG_M:
                sp = [('cstream-mblock', dict(groups=8, width=1)),
                      ('bstream-msplit', dict(width=1, msplit=4, bsz=16))]
            else:
                sp = [('bstream-msplit', dict(width=1, msplit=4, bsz=16)),
                      ('bstream-msplit', dict(width=2, msplit=2, bsz=16))]
            return sp + _prefs_gemm(beta)
        return _prefs_gemm(beta)
    return _prefs_stream(info, cands, beta, n)


def _few_flops(info):
    """Whether A has fewer than FEW_FLOPS non-zeros per row of B used
    plus row of C written (the multiply-adds per value moved)."""
    return info.nnz / (info.m + len(info.bix)) < FEW_FLOPS


def _prefs_stream(info, cands, beta, n=None):
    m, k = info.m, info.k
    families = {c.family for c in cands}
    stream_w1 = ('cstream', dict(width=1, ld='nc'))
    stream_w2 = ('cstream', dict(width=2, ld='nc'))
    ks2 = ('cstream-ksplit', dict(ksplit=2))
    ks4 = ('cstream-ksplit', dict(ksplit=4))
    if m > BIG_M and 'cstream-mblock' in families:
        mb = _prefs_mblock(info, beta, cands, n)
        if n is not None and 'bstream-warprows' in families:
            wr = [('bstream-warprows', dict(msplit=4)),
                  ('bstream-warprows', dict(msplit=8))]
            if _nnz_per_row(info) < WARPROWS_FEW_TERMS:
                wr = wr[::-1]
            if k > m:     # wide: the plain stream among the first
                mb = mb[:2] + [stream_w1] + mb[2:]
            if (info.group_reads >= WARPROWS_GROUP_READS
                    and info.density < MSPLIT_DENSITY):
                mb = wr + mb
            else:
                mb = mb[:WARPROWS_AFTER] + wr + mb[WARPROWS_AFTER:]
        if 'mma-gemm' in families and sparse_gemm_worth_it(info):
            # the sparse tensor-core rows (prism-like operators)
            gs = [('mma-gemm', dict(shape='m16n8k4t', mwarps=2, nwarps=2,
                                    wm=4, wn=2)),
                  ('mma-gemm', dict(shape='m16n8k4', mwarps=4, nwarps=2,
                                    wm=2, wn=4)),
                  ('mma-gemm', dict(shape='m16n8k4', mwarps=2, nwarps=2,
                                    wm=4, wn=4))]
            return gs[:1] + mb[:5] + gs[1:] + mb[5:] + [stream_w1]
        if k <= BIG_M and not beta:   # few rows of B: one group does
            return [stream_w1] + mb + [stream_w2]
        return mb + [stream_w1, stream_w2]
    ms = [('bstream-msplit', dict(width=2, msplit=2)),
          ('bstream-msplit', dict(width=2, msplit=4)),
          ('bstream-msplit', dict(width=1, msplit=8, bsz=32))]
    if beta:     # C read too: the deeper split first
        ms = ms[::-1]
    if k > m:    # four k-groups only where each gets a few columns
        ks = [ks4, ks2] if k >= 4*KSPLIT_MIN_COLS else [ks2, ks4]
        if n is not None and info.density < MSPLIT_DENSITY:
            # baked n, sparse: the plain streams before the k-split
            return list(BAKED_WIDE_FIRST) + ks + [stream_w1, stream_w2] + ms
        return ks + [stream_w1, stream_w2] + ms
    if m >= 2*k and info.density >= MSPLIT_DENSITY:
        return ms + [stream_w1, stream_w2, ks2]
    return [stream_w1, stream_w2, ms[1], ks2, ms[2], ks4]


def _prefs_hip(info, cands):
    """HIP: operators the tensor cores take (mfma-dense offered) keep the
    table order; for the others the streaming candidates of the most
    waves per SIMD come first.  gfx90a ISA (clang-19, gimmik isa, n
    baked): cstream and bstream one column a thread run 5-8 waves a SIMD
    in about 400-600 instructions, the m-split bstream with 4 row groups
    and plain loads 3-4 waves, the LDS-heavy ones (two columns a thread,
    16-row stages, non-temporal loads) 1-2 waves in 1.3-6.5k
    instructions.  Which family leads follows the H100 evidence of the
    families both platforms share (the CUDA rules for n baked): tall and
    dense the m-split bstream, wide and dense the k-split, else the plain
    streams."""
    m, k = info.m, info.k
    if any(c.family == 'mfma-dense' for c in cands):
        return []
    cs1, bs1 = ('cstream', dict(width=1)), ('bstream', dict(width=1))
    ks2, ks4 = ('cstream-ksplit', dict(ksplit=2)), \
        ('cstream-ksplit', dict(ksplit=4))
    ms4 = ('bstream-msplit', dict(width=1, msplit=4, ntload=False))
    ms2 = ('bstream-msplit', dict(width=1, msplit=2, ntload=True))
    dense = info.density >= MSPLIT_DENSITY
    if k > m:
        ks = [ks4, ks2] if k >= 4*KSPLIT_MIN_COLS else [ks2, ks4]
        return ks + [cs1, bs1, ms4] if dense else [cs1, bs1] + ks + [ms4]
    if m >= 2*k and dense:
        return [ms4, ms2, cs1, bs1, ks2]
    return [cs1, bs1, ks2, ms4]


def order_candidates(info, cands, platform, beta=0.0, n=None):
    """`cands` (a platform table's output for the operator `info`
    describes) in the order to offer them; n: the panel width where the
    generator bakes it (the generator's own n), else None.  The 'cuda'
    and 'hip' platforms have rules (HIP's do not use n or beta); others
    keep the table order."""
    cands = list(cands)
    if platform == 'cuda':
        prefs = _prefs(info, cands, beta, n)
    elif platform == 'hip':
        prefs = _prefs_hip(info, cands)
    else:
        return cands

    def rank(item):
        i, c = item
        for r, (family, params) in enumerate(prefs):
            if _match(c, family, **params):
                return (r, i)
        return (len(prefs), i)
    return [c for _, c in sorted(enumerate(cands), key=rank)]
