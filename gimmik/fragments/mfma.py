"""Tiling of a constant operator A for matrix-core kernels, and the bake of A
into the fragments of AMD's f64 MFMA (lane layout: the MFMA facts document,
section 1; :func:`mfma_f64_16x16x4` models one instruction in NumPy)."""

from dataclasses import dataclass

import numpy as np

from gimmik.analysis import chunks

WAVE = 64              # lanes of a CDNA wavefront
MFMA_M = 16            # rows of A (and C) per MFMA tile
MFMA_K = 4             # columns of A (rows of B) per MFMA tile
MFMA_N = 16            # columns of B (and C) per MFMA tile
N_TILES = WAVE // MFMA_N   # a wavefront covers 64 columns as 4 N-tiles

# k-tiles staged through LDS per chunk at most (8 k-tiles = 32 rows of B x
# 64 columns x 8 bytes = 16 KiB), so that any k fits in LDS.
MAX_CHUNK_KTILES = 8

# Rows of C a lane finishes a run at a time (a row: two or four loads of
# C's old values where beta != 0, 8 VGPRs); two runs are in flight at once.
C_RUN_ROWS = 2

# Accumulators a wavefront may keep live: 4 N-tiles x 4 doubles per m-tile
# is 32 registers, and the accumulation register file (AGPRs) holds 256.
MAX_MTILES_PER_WAVE = 8


# -- generic tiling ------------------------------------------------------
@dataclass
class Tiling:
    """A padded, column-compacted and tiled copy of an operator."""
    m: int
    k: int
    tm: int
    tk: int
    kcols: tuple
    Apad: np.ndarray
    nonzero: np.ndarray

    @property
    def m_tiles(self):
        return self.Apad.shape[0] // self.tm

    @property
    def k_tiles(self):
        """k-tiles of the uncompacted A."""
        return -(-self.k // self.tk)

    @property
    def active_k_tiles(self):
        """k-tiles after compaction: the ones a kernel iterates over."""
        return self.Apad.shape[1] // self.tk

    def ktile_rows(self, kt):
        """The tk rows of B (or -1 for padding) that k-tile kt reads."""
        return self.kcols[kt*self.tk:(kt + 1)*self.tk]

    def tile(self, mt, kt):
        return self.Apad[mt*self.tm:(mt + 1)*self.tm,
                         kt*self.tk:(kt + 1)*self.tk]


def tile_operator(A, tm=MFMA_M, tk=MFMA_K):
    """Compact the used columns of A, pad to whole tm x tk tiles and mark
    the all-zero tiles."""
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2 or not A.any():
        raise ValueError('A must be a non-zero 2-D array')
    m, k = A.shape
    bix = np.flatnonzero((A != 0).any(axis=0))
    mt, kt = -(-m // tm), -(-len(bix) // tk)
    Apad = np.zeros((mt*tm, kt*tk))
    Apad[:m, :len(bix)] = A[:, bix]
    kcols = tuple(int(j) for j in bix) + (-1,)*(kt*tk - len(bix))
    nonzero = (Apad.reshape(mt, tm, kt, tk) != 0).any(axis=(1, 3))
    return Tiling(m, k, tm, tk, kcols, Apad, nonzero)


# -- the MFMA f64 16x16x4 fragment bake ----------------------------------
def lane_coords():
    """(g, t) of every lane: g = L // 16, t = L % 16."""
    L = np.arange(WAVE)
    return L // MFMA_N, L % MFMA_N


@dataclass
class MfmaBake:
    """A in fragment order: ``frags[s, L]`` is the value lane L feeds to the
    MFMA of tile s; ``tiles[s]`` is that tile's (m-tile, k-tile); ``index``
    maps (m-tile, k-tile) to s, or -1 for an all-zero tile (no MFMA)."""
    tiling: Tiling
    frags: np.ndarray      # (ntiles, 64)
    tiles: list            # [(mt, kt)]
    index: np.ndarray      # (m_tiles, active_k_tiles) -> s or -1


def bake_mfma(A):
    """Bake A (or a Tiling of it with 16 x 4 tiles) into MFMA fragments,
    k-tile major (the order the kernels consume them in)."""
    tl = A if isinstance(A, Tiling) else tile_operator(A, MFMA_M, MFMA_K)
    if (tl.tm, tl.tk) != (MFMA_M, MFMA_K):
        raise ValueError('the MFMA bake needs 16 x 4 tiles')
    g, t = lane_coords()
    index = np.full(tl.nonzero.shape, -1, dtype=int)
    tiles, frags = [], []
    for kt in range(tl.active_k_tiles):
        for mt in range(tl.m_tiles):
            if tl.nonzero[mt, kt]:
                index[mt, kt] = len(tiles)
                tiles.append((mt, kt))
                # lane L supplies A[row t][k g] of the tile
                frags.append(tl.tile(mt, kt)[t, g])
    return MfmaBake(tl, np.array(frags).reshape(-1, WAVE), tiles, index)


def mfma_count(A, msplit=1):
    """The number of v_mfma instructions an mfma-dense kernel for A with msplit
    wavefronts contains (whatever the pipelining): one per N-tile for every
    MFMA slot."""
    bake = A if isinstance(A, MfmaBake) else bake_mfma(A)
    return mfma_plan(bake, min(msplit, bake.tiling.m_tiles)).mfma_count


# -- a NumPy model of one MFMA, for checking bakes and the executor -------
def mfma_f64_16x16x4(a, b, c):
    """One v_mfma_f64_16x16x4f64 of a wavefront: a, b are the 64 lanes'
    operands, c (64, 4) their accumulators; returns d (64, 4) with
    d[L][v] = c[L][v] + sum_k a[16k + 4v + g] * b[16k + t]."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    Am = a.reshape(MFMA_K, MFMA_M).T      # Am[row, kk] = a[16kk + row]
    Bm = b.reshape(MFMA_K, MFMA_N)        # Bm[kk, col] = b[16kk + col]
    D = Am @ Bm                           # 16 x 16
    g, t = lane_coords()
    v = np.arange(4)
    return np.asarray(c, float) + D[4*v[None, :] + g[:, None], t[:, None]]


def b_fragment(tiling, kt, B, cols):
    """Lane values of B for k-tile kt and the 16 columns `cols` of B:
    lane L supplies B[row g of the k-tile][cols[t]] (zero for padding)."""
    g, t = lane_coords()
    rows = np.array(tiling.ktile_rows(kt))[g]
    out = np.zeros(WAVE)
    ok = rows >= 0
    out[ok] = B[rows[ok], np.asarray(cols)[t[ok]]]
    return out


def model_product(bake, B):
    """A @ B computed tile by tile with the baked fragments and the MFMA
    model (B has a multiple of 16 columns); rows of C come from the
    accumulator layout D[4v + g][t]."""
    tl = bake.tiling
    n = B.shape[1]
    C = np.zeros((tl.m_tiles*MFMA_M, n))
    g, t = lane_coords()
    for c0 in range(0, n, MFMA_N):
        cols = np.arange(c0, c0 + MFMA_N)
        for mt in range(tl.m_tiles):
            acc = np.zeros((WAVE, 4))
            for kt in range(tl.active_k_tiles):
                s = bake.index[mt, kt]
                if s >= 0:
                    acc = mfma_f64_16x16x4(bake.frags[s],
                                           b_fragment(tl, kt, B, cols), acc)
            for v in range(4):
                C[mt*MFMA_M + 4*v + g, c0 + t] = acc[:, v]
    return C[:tl.m]


# -- the per-wavefront plan of the mfma-dense family ----------------------
@dataclass
class MfmaPlan:
    """mfma-dense: wavefront y owns m-tiles ``groups[y]``, all run the same
    code; ``steps`` (:func:`mfma_steps`) is what the template walks."""
    bake: MfmaBake
    msplit: int
    lds: bool
    vec: int
    nbuf: int
    per: int
    groups: list
    frags: np.ndarray      # (msplit, nslots, 64)
    chunks: list
    work: list
    stage: list
    pipe: int = 1
    steps: list = None
    crun: list = None

    @property
    def ntiles_per_wave(self):
        return self.per

    @property
    def nslots(self):
        return self.frags.shape[1]

    @property
    def chunk_rows(self):
        """B rows in the largest chunk (the LDS buffer height)."""
        return MFMA_K*max(len(c) for c in self.chunks)

    @property
    def lds_bytes(self):
        return self.nbuf*self.chunk_rows*WAVE*8 if self.lds else 0

    @property
    def mfma_count(self):
        """v_mfma instructions in the kernel: one per slot and N-tile."""
        return N_TILES*self.nslots

    def chunk_of(self, kt):
        """The chunk holding k-tile kt."""
        return next(q for q, ch in enumerate(self.chunks) if kt in ch)


# A kernel with n not baked at a multiple of WAVE keeps a copy of its steps for
# full blocks (unguarded loads and stores) only where a block issues at least
# this many global loads (twice the HIP load batch)
MIN_SPLIT_LOADS = 16


def block_loads(plan, beta):
    """Global load instructions a full block's wavefront issues: its
    fragments, B (two 16-byte or four 8-byte loads a row of four columns
    pairs), its staging slots and C's old values (beta != 0)."""
    per_row = 2 if plan.vec == 2 else 4
    count = 0
    for st in plan.steps:
        if st[0] == 'a':
            count += len(st[2])
        elif st[0] == 'b':
            count += per_row
        elif st[0] == 's':
            count += len(plan.stage[st[1]])
        elif st[0] == 'l' and beta != 0:
            count += per_row*len(plan.crun[st[1]])
    return count


def code_paths(n, plan, beta):
    """The copies of its steps an mfma-dense kernel for n columns (None: n at
    run time) holds, as the kind of block each serves (True: full, its 64
    columns inside n; False: the block holding column n - 1, or every
    block)."""
    if n is not None and n % WAVE == 0:
        return (True,)
    if block_loads(plan, beta) < MIN_SPLIT_LOADS:
        return (False,)
    return (True, False)


def split_steps(steps, beta):
    """(head, tail) of an mfma-dense kernel's steps: the tail, from the
    last load on (C's old values loaded only where beta != 0), is one code
    for both copies of the head (code_paths), so its waits are one wait."""
    loads = [j for j, st in enumerate(steps)
             if st[0] in 'abs' or (st[0] == 'l' and beta != 0)]
    return steps[:loads[-1] + 1], steps[loads[-1] + 1:]


def kernel_mfmas(plan, n, beta):
    """v_mfma instructions in an mfma-dense kernel for n columns (None: at
    run time): with two copies (code_paths) the head's twice, the tail's
    once."""
    per_kt = {kt: N_TILES*len(ts) for items in plan.work for kt, ts in items}

    def count(steps):
        return sum(per_kt[st[1]] for st in steps if st[0] == 'm')
    if len(code_paths(n, plan, beta)) == 1:
        return count(plan.steps)
    head, tail = split_steps(plan.steps, beta)
    return 2*count(head) + count(tail)


def wave_groups(m_tiles, msplit):
    """m-tiles of each of the msplit wavefronts: ceil(m_tiles/msplit) each,
    the last ones possibly fewer."""
    per = -(-m_tiles // msplit)
    return [(min(y*per, m_tiles), min((y + 1)*per, m_tiles))
            for y in range(msplit)]


def mfma_steps(work, lds, pipe, nbuf=1, nruns=1):
    """The kernel as steps in code order: ('a', kt, slots) fragments, ('b', kt)
    B direct, ('s', q) stage, ('w', q, buf) LDS write, ('sync',), ('r', kt,
    buf) LDS read, ('m', kt) MFMAs, ('l', r) / ('f', r) C's run r; no step
    waits for the newest load before it, at the least register cost."""
    kts = [kt for items in work for kt, _ in items]
    slots = {kt: tuple(s for _, s in ts) for items in work for kt, ts in items}
    nxt = dict(zip(kts, kts[1:]))

    def head(kt):
        return [('a', kt, slots[kt][:1])]

    def tail(kt):
        return [('a', kt, slots[kt][1:])] if len(slots[kt]) > 1 else []

    def frags_before(kt):
        """The fragment loads right before the MFMAs of k-tile kt."""
        return tail(kt) + (head(nxt[kt]) if kt in nxt else [])

    steps = []
    if not lds:
        if pipe >= 1:
            steps.append(('b', kts[0]))
            for kt in kts:
                steps.append(('a', kt, slots[kt]))
                if kt in nxt:
                    steps.append(('b', nxt[kt]))
                steps.append(('m', kt))
        else:
            steps += head(kts[0])
            for kt in kts:
                steps += tail(kt) + [('b', kt)]
                if kt in nxt:
                    steps += head(nxt[kt])
                steps.append(('m', kt))
        return c_steps(steps, nruns)

    nq = len(work)
    buf = (lambda q: q % 2) if nbuf == 2 else (lambda q: 0)
    steps += [('s', 0)] + head(kts[0]) + [('w', 0, 0), ('sync',)]
    for q, items in enumerate(work):
        ks = [kt for kt, _ in items]
        if pipe >= 1 and q + 1 < nq:
            steps.append(('s', q + 1))
        if pipe == 2:
            steps.append(('r', ks[0], buf(q)))
        for j, kt in enumerate(ks):
            if pipe == 2 and j + 1 < len(ks):
                steps.append(('r', ks[j + 1], buf(q)))
            elif pipe < 2:
                steps.append(('r', kt, buf(q)))
            if pipe >= 1 or j or not q:
                steps += frags_before(kt)
            steps.append(('m', kt))
        if q + 1 < nq:
            if pipe == 0:
                steps += [('sync',), ('s', q + 1)]
                steps += frags_before(work[q + 1][0][0])
            steps += [('w', q + 1, buf(q + 1)), ('sync',)]
    return c_steps(steps, nruns)


def c_steps(steps, nruns):
    """steps with C's runs: run 0 loaded before the last MFMAs, run r + 1
    before the final values of run r."""
    last = max(j for j, st in enumerate(steps) if st[0] == 'm')
    out = steps[:last] + [('l', 0)] + steps[last:]
    for r in range(nruns):
        if r + 1 < nruns:
            out.append(('l', r + 1))
        out.append(('f', r))
    return out


def c_runs(m, per, rows=2):
    """The rows of C a wavefront finishes, as runs of `rows` (i, v): its
    m-tile i's accumulator element v, C row 16i + 4v + g of its first
    (the rows of wavefront 0 that exist)."""
    iv = [(i, v) for i in range(per) for v in range(4) if 16*i + 4*v < m]
    return [iv[j:j + rows] for j in range(0, len(iv), rows)]


def stage_slots(rows, vec, msplit):
    """The staging slots of a chunk whose buffer rows hold B rows `rows`
    (-1: padding): slot s lists, per wavefront y that loads in it, (first
    buffer row, B rows) of load y + s*msplit."""
    loads = [(j*vec, tuple(rows[j*vec:j*vec + vec]))
             for j in range(len(rows) // vec)]
    return [loads[j0:j0 + msplit] for j0 in range(0, len(loads), msplit)]


def index_expr(values, var, vmax, offset=0):
    """A C expression for values[min(var + offset, len(values) - 1)], var
    an int expression in 0 .. vmax: linear where the values are
    consecutive, else a chain of selects."""
    vals = list(values)
    last = len(vals) - 1
    if offset >= last:
        return str(vals[last])
    if vals == list(range(vals[0], vals[0] + len(vals))):
        base = vals[0] + offset
        lin = f'{var} + {base}' if base else var
        if vmax + offset <= last:
            return f'({lin})'
        return f'({var} < {last - offset} ? {lin} : {vals[last]})'
    expr = str(vals[last])
    for i in reversed(range(offset, min(last, vmax + offset + 1))):
        expr = f'{var} == {i - offset} ? {vals[i]} : {expr}'
    return f'({expr})'


def mfma_plan(A, msplit, kchunk=MAX_CHUNK_KTILES, vec=1, nbuf=1, pipe=None):
    """The mfma-dense plan for msplit wavefronts (1: the direct path, B read
    straight into registers; more: B staged in LDS chunks of at most kchunk
    k-tiles, in nbuf buffers)."""
    bake = A if isinstance(A, MfmaBake) else bake_mfma(A)
    tl = bake.tiling
    if msplit not in range(1, 5) or msplit > tl.m_tiles:
        raise ValueError(f'msplit must be 1..4 and at most the number of '
                         f'm-tiles ({tl.m_tiles}), not {msplit!r}')
    if not 1 <= kchunk <= MAX_CHUNK_KTILES:
        raise ValueError(f'kchunk must be in 1..{MAX_CHUNK_KTILES}')
    if vec not in (1, 2) or nbuf not in (1, 2):
        raise ValueError('vec and nbuf must be 1 or 2')
    if pipe is None:
        pipe = 0 if msplit > 1 and nbuf == 1 else 1
    if pipe not in (0, 1, 2) or (msplit > 1 and pipe >= 1 and nbuf != 2):
        raise ValueError('pipe must be 0, 1 or 2, and 0 with one buffer')
    lds = msplit > 1
    groups = wave_groups(tl.m_tiles, msplit)
    per = groups[0][1] - groups[0][0]
    kts = list(range(tl.active_k_tiles))
    if not lds and -1 in tl.kcols:
        # the k-tile with padding rows first: its lanes of those rows take
        # zeros where its B is used, while later k-tiles' loads are in flight
        kts = kts[-1:] + kts[:-1]
    chs = chunks(kts, kchunk) if lds else [[kt] for kt in kts]

    def tile_of(y, i, kt):
        mt = y*per + i
        return int(bake.index[mt, kt]) if mt < tl.m_tiles else -1

    frags, work = [], []
    for ch in chs:
        items = []
        for kt in ch:
            ts = []
            for i in range(per):
                ss = [tile_of(y, i, kt) for y in range(msplit)]
                if max(ss) >= 0:
                    ts.append((i, len(frags)))
                    frags.append([bake.frags[s] if s >= 0 else np.zeros(WAVE)
                                  for s in ss])
            if ts:
                items.append((kt, ts))
        work.append(items)
    frags = np.array(frags).reshape(-1, msplit, WAVE).transpose(1, 0, 2)

    stage = []
    if lds:
        for ch in chs:
            rows = [r for kt in ch for r in tl.ktile_rows(kt)]
            stage.append(stage_slots(rows, vec, msplit))
    crun = c_runs(tl.m, per, C_RUN_ROWS)
    steps = mfma_steps(work, lds, pipe, nbuf if lds else 1, len(crun))
    return MfmaPlan(bake, msplit, lds, vec, nbuf if lds else 1, per, groups,
                    np.ascontiguousarray(frags), chs, work, stage, pipe,
                    steps, crun)
