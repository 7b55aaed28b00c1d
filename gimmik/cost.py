"""A cost estimate per candidate kernel, from what the toolchain says
without a GPU: the estimated time for n columns and the fraction of the
device's copy bandwidth that time reaches.

Three inputs:

- the plan (:func:`work`): bytes of B read, C written (and read when
  beta != 0) per column from DRAM; bytes asked of L2 (B rows re-read by
  the blocks of several row groups, spills); bytes through LDS / shared
  memory; vector and matrix flops (A's non-zeros, or the whole tiles an
  MFMA/MMA family multiplies); the bytes a thread can have in flight from
  memory before it must wait; the launch geometry;
- the compiler's facts (:class:`Facts`): registers, shared bytes, spill
  bytes, and where known the waves per SIMD, the instruction count and
  the full waits on memory (HIP: gimmik.isa's clang report,
  :func:`facts_from_isa`; CUDA: ptxas -v, :func:`facts_from_ptxas`;
  without either, the family's register estimate, :func:`plan_facts`);
- the architecture's constants (:data:`ARCHES`, gimmik.targets, each
  with its source).

The shape is a roofline with latency hiding (:func:`estimate`):

    t = launch + valu + (sum of the other terms**p)**(1/p),  p = 2

valu, the vector flops over the peak rate (unrolled baked-A code at
valu_reach of it), adds: an unrolled streaming kernel's warp issues its
FMAs after its loads return, in order (adding it rather than blending it
raised the H100 first picks within 5 % by 2-10 points on every file,
the 512 MiB holdout with plan facts from 74 to 84 %).  The other terms:
dram (bytes / min(copy bandwidth, bytes in flight / latency), Little's
law, round by round of resident blocks, the last partial round at its
own rate; panels that fit in L2 partly served from it), l2 (bytes asked
of L2: re-reads the resident blocks' working sets leave there, spills),
lds (LDS/shared bytes, on NVIDIA with the global loads that share its
data path), matrix (matrix flops over the peak rate), issue
(instructions over the issue rate) and latency (rounds of resident
blocks times the memory round trips a block waits for in turn); their
p-norm blends the largest with the others: they overlap imperfectly.
The per-unit terms (lds, valu, issue) count the busiest unit's blocks
(grid imbalance) and slow down with fewer than BUSY_WAVES resident waves
a SIMD or unrolled code beyond the instruction cache.  Each term is
monotone: more bytes, fewer resident waves or more full waits never
make a candidate faster.

:func:`rank` orders candidates by the estimate, with at most
MAX_PER_FAMILY of one family among the first FIRST candidates while other
families are offered.
"""

from dataclasses import dataclass
import math

import numpy as np

from gimmik.targets import ARCHES, HIP, Arch  # noqa: F401 (Arch: the API)

# -- per-architecture constants (gimmik.targets) ------------------------------

# Wave instructions a wave spends besides its loads, FMAs and stores
# (indices, addresses, bounds checks, barriers)
WARP_OVERHEAD = 40

# Resident waves/warps per SIMD that keep its vector pipe busy: fewer
# issue their instructions at that fraction of the peak rate
BUSY_WAVES = 4

# Unrolled code beyond the instruction cache issues at most this many
# times slower (instructions stream in from L2 in whole lines, ahead of
# use; the H100 streaming kernels of 6-12k instructions ran 1.5-3x below
# their compute estimate)
ICACHE_MISS_SLOWDOWN = 2.0

# The terms besides the vector compute overlap imperfectly: their
# (sum of term**p)**(1/p) blends the largest (p large) with the sum (p = 1)
OVERLAP_P = 2

# Share of the DRAM traffic L2 serves when a launch's panels (B and C) fit
# in it, as in back-to-back launches on the same panels (PyFR's steps, the
# benchmarks): H100, PyFR walk at n = 110080, operators whose panels take
# 20-40 MB of the 50 MB reach up to 1.5x the copy bandwidth
# (bench/results/pyfr-walk-h100-candidates.csv); calibrated there
L2_RESIDENT = 0.5

# Unrolled FMAs fed from LDS between the barriers of a one-buffer chunk
# pipeline (bstream-mgroup) issue this many times slower than the
# register-fed unrolled code valu_reach describes.  CALIBRATED on the
# H100 twin (bench/results/pyfr-walk-h100-twin-bounded-candidates.csv,
# n = 110080): its FMAs ran at 1.0-4.8 of the 64 FP64 lanes a clock
# (0.02-0.075 of the peak, 0.4/8 = 0.05 in the middle of the
# compute-bound ones) where the register-fed streams reach 0.4; any
# factor from 6 to 16 ranks it below cstream-mblock on all 14 operators
# the twin measured so.  Not measured on AMD: assumed the same there.
LDS_FED_SLOWDOWN = 8

# Registers a thread keeps besides the values it has in flight
# (addresses, indices, loop counters): the in-flight loads get the rest
ADDRESS_REGISTERS = 24


def arch(name):
    """The :class:`Arch` of a name ('gfx90a', 'gfx942', 'sm_90'; a gfx name
    with feature suffixes is cut at the first ':')."""
    if not isinstance(name, str):
        raise TypeError(f'arch must be a str, not {type(name).__name__}')
    try:
        return ARCHES[name.split(':')[0]]
    except KeyError:
        raise ValueError(f'no cost constants for arch {name!r} (known: '
                         f'{", ".join(ARCHES)})') from None


# The constants a HIP gcn_arch is estimated with (gimmik.targets.HIP:
# its own, else nearest_arch's, else default_arch)
HIP_ARCH_NEAREST = dict(HIP.nearest_arch)
DEFAULT_HIP_ARCH = HIP.default_arch


def hip_arch(gcn_arch):
    """The name of the ARCHES entry a HIP gcn_arch (feature suffixes
    allowed) is estimated with (see HIP_ARCH_NEAREST)."""
    if not isinstance(gcn_arch, str):
        raise TypeError(f'gcn_arch must be a str, not '
                        f'{type(gcn_arch).__name__}')
    return HIP.cost_arch(gcn_arch)


def moved_bytes(info, beta, n, itemsize):
    """Bytes a C = A*B + beta*C kernel must move at the least: the used rows
    of B read once, C written once and, when beta != 0, read once."""
    return itemsize*n*(len(info.bix) + info.m*(2 if beta else 1))


# -- what the plan says ------------------------------------------------------


@dataclass(frozen=True)
class Work:
    """What a candidate does per column of B and C, and how it is
    launched."""
    dram_bytes: float      # bytes from/to DRAM a column (B once, C)
    l2_bytes: float        # bytes asked of L2 a column (re-reads too)
    lds_bytes: float       # bytes through LDS/shared memory a column
    valu_flops: float      # FP64 vector flops a column
    matrix_flops: float    # FP64 matrix flops a column
    instructions: float    # wave instructions a column (plan estimate)
    inflight: float        # bytes a thread may have outstanding
    block_threads: int
    cols_per_block: int
    row_groups: int
    straight: bool         # one pass per thread (no loop over k or tiles)
    waits: float = 1       # memory round trips a block waits for in turn
    # bytes of B a block reads more than once (beyond dram_bytes): its
    # working set, which must stay in cache for the re-reads to hit
    reread_set: float = 0.0
    # the re-reads are a thread's own (L1 can serve them), not other
    # blocks' (L2 at best)
    reread_local: bool = False
    # instructions of the unrolled code the unit's waves walk (0: a loop
    # that stays in the instruction cache)
    code: float = 0.0
    # the FMAs take their B operands from LDS between a chunk's barriers
    # (issued LDS_FED_SLOWDOWN times slower than register-fed code)
    lds_fed: bool = False
    # the waves of a block take this many disjoint paths through the
    # unrolled code (a switch over the wave's rows: each runs ~1/paths)
    wave_paths: int = 1


def stream_work(kern, b_rows, lds=0.0, stage=None, waits=1, loads=None,
                reread=None, stack=1, l2_rows=None):
    """Work of the one-thread-per-column families: b_rows rows of B read
    a column; a thread's loads of B all in flight (unrolled, hoisted)
    up to its registers, or `stage` bytes a thread where B is staged in
    `waits` chunks one after the other; loads: load instructions a thread
    (default b_rows); stack: row groups a block, each taking its own path
    through the unrolled code; l2_rows: B rows a column read from L2
    where a block's groups share them through L1 (default b_rows)."""
    mm, info, size = kern.mm, kern.info, kern.itemsize
    g = kern.geometry()
    w = g.width
    c_rw = info.m*size*(2 if mm.beta else 1)
    threads = g.block[0]*g.block[1]*g.block[2]
    cols = g.cols_per_block or g.block[0]*w
    groups = g.row_groups or 1
    inflight = (stage if stage is not None
                else b_rows / (groups*stack)*w*size)
    dram = len(info.bix)*size + c_rw
    l2 = (reread if reread is not None
          else b_rows if l2_rows is None else l2_rows)*size + c_rw
    # an FMA a non-zero, a load a used B row and a store a row of C, per
    # thread; a wave does `lanes` columns (width each)
    loads = b_rows if loads is None else loads
    warps_col = threads / cols*groups / kern.warp
    instr = ((info.nnz + loads + info.m) / kern.warp
             + WARP_OVERHEAD*warps_col)
    rset = (b_rows if l2_rows is None else l2_rows) / groups*cols*size
    code = info.nnz + b_rows + info.m
    return Work(dram, l2, lds, 2.0*info.nnz, 0.0, instr, inflight, threads,
                cols, groups, True, waits, rset, reread is not None, code,
                wave_paths=stack)


def gemm_work(kern, m_blocks, live_rows, block_m, block_k, stage_bytes,
              a_bytes, depth=1):
    """Work of the 2-D tiled tensor-core families: m_blocks row groups,
    live_rows[mb] rows of B each reads a column (whole stages), tiles of
    block_m x block_k multiplied on the matrix units; stage_bytes of B
    and A a block has in flight."""
    mm, info, size = kern.mm, kern.info, kern.itemsize
    g = kern.geometry()
    threads = g.block[0]*g.block[1]*g.block[2]
    c_rw = info.m*size*(2 if mm.beta else 1)
    rows = float(np.sum(live_rows))
    dram = len(info.bix)*size + c_rw
    l2 = rows*size + c_rw
    # B written to LDS once and read by each wave row; A's slabs a block
    # amortised over its columns
    lds = rows*size*2 + a_bytes / (g.cols_per_block or 1)
    mflops = 2.0*block_m*rows
    instr = mflops / (2*16*16*4) + rows / kern.warp
    stages = float(np.max(live_rows)) / block_k
    waits = 1 + int(math.ceil(stages / max(1, depth)))
    rset = rows / m_blocks*g.cols_per_block*size
    return Work(dram, l2, lds, 0.0, mflops, instr, stage_bytes / threads,
                threads, g.cols_per_block, m_blocks, False, waits, rset)


def work(mm, cand, dtype):
    """The :class:`Work` of candidate `cand` of generator `mm` (its
    family's, Family.work)."""
    return mm.kernel(cand, dtype).work()


# -- what the compiler says --------------------------------------------------


@dataclass(frozen=True)
class Facts:
    """A compiled kernel's facts.  registers: 32-bit registers a thread
    (HIP: arch VGPRs + AGPRs); waves: resident waves per SIMD where the
    compiler says (clang's Occupancy), else None (computed from
    registers and shared bytes); instructions: the kernel's static
    instruction count, None where unknown; full_waits: waits for every
    outstanding memory operation (HIP vmcnt(0)), None where unknown."""
    registers: int
    shared: int = 0
    spill_bytes: int = 0
    waves: int = None
    instructions: int = None
    full_waits: int = None
    source: str = 'plan'


def facts_from_isa(rep):
    """Facts of a gimmik.isa report (clang-19, one arch)."""
    return Facts(registers=int(rep.get('total_vgprs', rep['vgprs'])),
                 shared=int(rep['lds_bytes']),
                 spill_bytes=int(rep['scratch_bytes']),
                 waves=int(rep['occupancy']),
                 instructions=int(rep['instructions']),
                 full_waits=int(rep['vmcnt0']), source='isa')


def facts_from_ptxas(registers, shared=0, local=0, instructions=None):
    """Facts of a ptxas -v line (registers, shared and local bytes)."""
    return Facts(registers=int(registers), shared=int(shared),
                 spill_bytes=int(local), instructions=instructions,
                 source='ptxas')


def plan_facts(mm, cand, dtype):
    """Facts from the family's own estimates, for want of a compiler; on
    HIP also the full waits clang-19 gives the loads of C (c_row_waits)."""
    kern = mm.kernel(cand, dtype)
    regs = kern.registers()
    if regs is None:
        regs = ADDRESS_REGISTERS
    waits = None
    if mm.platform == 'hip':
        waits = c_row_waits(kern)*(kern.geometry().row_groups or 1)
    return Facts(registers=int(min(regs, 255)),
                 shared=int(kern.geometry().shared), full_waits=waits,
                 source='plan')


def c_row_waits(kern):
    """Full waits a thread makes for loads of C where C is read (beta !=
    0, not preloaded): one a row it finishes (Family.finish_rows),
    clang-19 not hoisting the load above the stores of earlier rows.  A
    cstream of m rows with beta != 0 waits for all loads about m times
    (p4-hex-m6: 391 for 375 rows; p5-hex-m6: 658 for 648; p6-pri-m6:
    577 for 588; bstream-msplit with 4 waves, p5-hex-m3: 81 for 54 rows
    a wave).  nvcc's code does not pay it on the H100 (the CUDA
    validation loses 7 points on the ordered walk file with it), so the
    CUDA facts have none."""
    if not kern.mm.beta or kern.params.get('preload_c'):
        return 0
    return kern.finish_rows() or 0


# -- the estimate ------------------------------------------------------------


def resident_blocks(a, facts, block_threads):
    """Blocks of block_threads threads resident on one unit of arch a,
    from the registers, the shared bytes, the wave and block limits (and
    the compiler's waves per SIMD where it gives them)."""
    waves_block = -(-block_threads // a.lanes)
    regs = max(1, -(-facts.registers // a.reg_granule)*a.reg_granule)
    waves_simd = a.max_waves // a.simds
    by_regs = min(waves_simd, a.regs_per_lane // regs)
    if facts.waves is not None:
        by_regs = min(by_regs, facts.waves)
    # the waves of a block spread over the SIMDs
    blocks = min(a.max_blocks, by_regs*a.simds // waves_block,
                 a.max_waves // waves_block)
    if facts.shared:
        blocks = min(blocks, a.shared_bytes
                     // (facts.shared + a.shared_reserved))
    return max(0, blocks)


@dataclass(frozen=True)
class Estimate:
    seconds: float
    copy_frac: float       # copy-bandwidth time of the bytes / seconds
    bound: str             # the term that sets the time
    terms: dict            # every term, seconds
    blocks_per_unit: int


def estimate(w, facts, a, n, moved_bytes=None, client_div=None):
    """The :class:`Estimate` of a candidate doing :class:`Work` w with
    :class:`Facts` facts on :class:`Arch` a for n columns.  moved_bytes:
    the least bytes the product must move (default w.dram_bytes*n), for
    the copy fraction.  client_div: the client launches ceil(n/client_div)
    blocks whatever the contract (PyFR main's HIP grid; a block walks the
    contract's blocks in turn), else the contract's grid."""
    if n <= 0:
        raise ValueError(f'n must be positive, not {n}')
    nblk_cols = -(-int(n) // max(1, w.cols_per_block))
    grid = nblk_cols*max(1, w.row_groups)
    per_unit = resident_blocks(a, facts, w.block_threads)
    if per_unit == 0:
        return Estimate(math.inf, 0.0, 'does not fit', {}, 0)
    launched = -(-int(n) // client_div) if client_div else grid
    concurrent = min(grid, launched, per_unit*a.units)
    rounds = -(-grid // concurrent)

    # registers left for loads in flight cap what the plan would have out
    room = max(1, facts.registers - ADDRESS_REGISTERS)*4
    inflight = min(w.inflight, room) if w.straight else w.inflight
    inflight = max(inflight, 8.0)
    spill = 2.0*facts.spill_bytes*w.block_threads*grid / n
    reread = _reread_split(w, a, per_unit, concurrent)
    # a thread waits once for each registers' worth of its loads; a
    # straight kernel of row groups (one a block, a switch over them) runs
    # 1/row_groups of the full waits the compiler counts in it
    waits = max(w.waits, (facts.full_waits or 0)
                / (max(1, w.row_groups) if w.straight else 1))
    if w.straight and w.inflight > room:
        waits = max(waits, -(-int(w.inflight) // room))
    # the busiest unit gets ceil(grid / units) blocks: the terms of a
    # unit's own pipes scale with it, not with the mean
    imbalance = -(-grid // a.units) / (grid / a.units)
    clock = a.clock_hz*a.units / imbalance
    waves_simd = per_unit*-(-w.block_threads // a.lanes) / a.simds
    busy = min(1.0, waves_simd / BUSY_WAVES)
    # unrolled code beyond the instruction cache issues at the rate its
    # misses are served
    code = facts.instructions if facts.instructions else w.code
    busy /= min(ICACHE_MISS_SLOWDOWN, max(1.0, code / a.icache_instr))
    dram = n*(w.dram_bytes + reread['dram'])
    # panels that fit in L2 are partly served from it
    resident = L2_RESIDENT*min(1.0, a.l2_size / dram)
    dram *= 1 - resident + resident*a.copy_bw / a.l2_bw
    terms = {
        'dram': _dram_time(dram, grid, concurrent,
                           w.block_threads*inflight / a.latency_s, a),
        'l2': n*(w.dram_bytes + reread['l2'] + reread['dram'] + spill)
        / a.l2_bw,
        'lds': n*(w.lds_bytes + (w.l2_bytes + spill if a.l1_shared_path
                                 else 0)) / (a.lds_bytes_clk*clock),
        'valu': n*w.valu_flops*(LDS_FED_SLOWDOWN if w.lds_fed else 1)
        / (a.valu_flop_clk*a.valu_reach*clock*busy),
        'matrix': n*w.matrix_flops / (a.matrix_flop_clk*clock),
        'issue': n*_instructions(w, facts, a, grid, n)
        / (a.issue_clk*clock*busy),
        'latency': rounds*waits*_round_trip(w, a),
    }
    bound = max(terms, key=terms.get)
    t = a.launch_s + terms['valu'] + sum(
        v**OVERLAP_P for k, v in terms.items() if k != 'valu') \
        ** (1.0 / OVERLAP_P)
    moved = moved_bytes if moved_bytes is not None else n*w.dram_bytes
    return Estimate(t, moved / a.copy_bw / t, bound, terms, per_unit)


def _dram_time(nbytes, grid, concurrent, block_bw, a):
    """Seconds to move nbytes over DRAM in rounds of `concurrent` blocks
    of the grid's `grid`, each block at most block_bw bytes/s (its bytes
    in flight over one latency, Little's law): full rounds at
    min(copy bandwidth, concurrent*block_bw), the last partial round at
    its own blocks' rate."""
    per_block = nbytes / grid
    full, rest = divmod(grid, concurrent)
    t = full*concurrent*per_block / min(a.copy_bw, concurrent*block_bw)
    if rest:
        t += rest*per_block / min(a.copy_bw, rest*block_bw)
    return t


def _round_trip(w, a):
    """The mean latency of a block's loads: DRAM for the bytes first read,
    L2 for the re-reads."""
    first = w.dram_bytes / max(w.l2_bytes, w.dram_bytes)
    return first*a.latency_s + (1 - first)*a.l2_latency_s


def _reread_split(w, a, per_unit, concurrent):
    """Where a column's re-read bytes (w.l2_bytes beyond w.dram_bytes) are
    served: L1 where they are a thread's own and the unit's resident
    blocks' working sets fit its L1; else L2 for the part of the
    concurrent blocks' working sets L2 holds, DRAM for the rest."""
    reread = max(0.0, w.l2_bytes - w.dram_bytes)
    if not reread or not w.reread_set:
        return {'l2': reread, 'dram': 0.0}
    if w.reread_local and per_unit*w.reread_set <= a.l1_size:
        return {'l2': 0.0, 'dram': 0.0}
    held = min(1.0, a.l2_size / (concurrent*w.reread_set))
    return {'l2': reread*held, 'dram': reread*(1 - held)}


def _instructions(w, facts, a, grid, n):
    """Wave instructions a column: the compiler's count (the share a wave
    runs: 1/row_groups of a kernel switching over row groups, of that
    1/wave_paths where its waves switch over their rows) times the waves
    of the grid for straight-line kernels, else the plan's estimate."""
    if facts.instructions is not None and w.straight:
        waves = grid*-(-w.block_threads // a.lanes)
        per_wave = facts.instructions / (max(1, w.row_groups)
                                         * max(1, w.wave_paths))
        return max(w.instructions, per_wave*waves / n)
    return w.instructions


def estimate_candidate(mm, cand, dtype, arch_name, n, facts=None):
    """The :class:`Estimate` of one candidate of generator mm for n
    columns on arch_name (facts: the compiler's, else the plan's)."""
    a = arch(arch_name)
    if facts is None:
        facts = plan_facts(mm, cand, dtype)
    w = work(mm, cand, dtype)
    size = np.dtype(dtype).itemsize
    # n at run time: the grid PyFR main's HIP provider launches
    div = (mm.kernel(cand, dtype).geometry().block[0]
           if mm.runtime_client_grid else None)
    return estimate(w, facts, a, n, moved_bytes(mm.info, mm.beta, n, size),
                    div)


# -- the order ---------------------------------------------------------------

# Among the first FIRST candidates at most MAX_PER_FAMILY of one family
# while candidates of other families are left (PyFR times 8) whose
# estimate is within DIVERSE_WITHIN of the best: a family the estimate
# puts that far behind is no hedge against its errors
FIRST = 8
MAX_PER_FAMILY = 3
DIVERSE_WITHIN = 2.0


def diverse(items, family_of, first=FIRST, per_family=MAX_PER_FAMILY,
            eligible=None):
    """items (best first) reordered so that among the first `first` no
    family has more than per_family while another family still has an
    eligible item (eligible(x), default every item); the rest keep their
    order."""
    eligible = eligible or (lambda x: True)
    left, out, count = list(items), [], {}
    while left and len(out) < first:
        def capped(x):
            f = family_of(x)
            return count.get(f, 0) >= per_family and any(
                family_of(y) != f and eligible(y)
                and count.get(family_of(y), 0) < per_family for y in left)
        pick = next((x for x in left if not capped(x)), left[0])
        left.remove(pick)
        out.append(pick)
        count[family_of(pick)] = count.get(family_of(pick), 0) + 1
    return out + left


# Columns estimated where neither the caller nor the generator gives n:
# PyFR's panel of a 22k-element hex mesh (bench/pyfr/pyfr_walk.py)
DEFAULT_N = 110080


def rank(mm, cands, dtype, arch_name, n=None, facts=None):
    """cands ordered by estimated time on arch_name for n columns (default
    the generator's n, else DEFAULT_N), with family diversity among the
    first FIRST.  facts: {variant: Facts} or a callable(cand) -> Facts;
    missing ones come from the plan.  Returns [(cand, Estimate)]."""
    n = n or mm.n or DEFAULT_N
    out = []
    for i, c in enumerate(cands):
        f = facts(c) if callable(facts) else (facts or {}).get(c.variant)
        out.append((estimate_candidate(mm, c, dtype, arch_name, n, f), i, c))
    out.sort(key=lambda x: (x[0].seconds, x[1]))
    best = out[0][0].seconds if out else 0.0
    ordered = diverse(out, lambda x: x[2].family,
                      eligible=lambda x: x[0].seconds
                      <= DIVERSE_WITHIN*best)
    return [(c, e) for e, _, c in ordered]


def add_isa_estimates(mm, rows, dtype, n=None):
    """Add est_us, est_copy_frac and est_bound to gimmik.isa report rows
    (each with 'variant' and 'arch') of HIP generator mm's candidates,
    estimated from their reports for n columns (default as rank) with
    the constants of hip_arch(arch), as the offering order is."""
    n = n or mm.n or DEFAULT_N
    by_arch = {}
    for r in rows:
        if 'error' in r:
            continue
        if r['arch'] not in by_arch:
            by_arch[r['arch']] = {c.variant: c for c in mm.candidates(
                dtype, gcn_arch=r['arch'])}
        cand = by_arch[r['arch']].get(r['variant'])
        if cand is None:
            continue
        e = estimate_candidate(mm, cand, dtype, hip_arch(r['arch']), n,
                               facts_from_isa(r))
        r.update(est_us=round(e.seconds*1e6, 2),
                 est_copy_frac=round(e.copy_frac, 3), est_bound=e.bound)
    return rows
