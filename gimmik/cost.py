"""A cost estimate per candidate kernel from what the toolchain says
without a GPU: the plan (:func:`work`), the compiler's facts
(:class:`Facts`) and the arch's constants (gimmik.targets), blended as a
roofline with latency hiding (:func:`estimate`; docs/cost-model.md).
:func:`rank` orders candidates by it, with family diversity."""

from dataclasses import dataclass
import math

import numpy as np

from gimmik.targets import ARCHES, HIP, Arch  # noqa: F401 (Arch: the API)

# wave instructions besides loads, FMAs and stores (addresses, barriers)
WARP_OVERHEAD = 40

# resident waves a SIMD that keep its vector pipe busy
BUSY_WAVES = 4

# most slowdown of unrolled code beyond the icache (it streams in from L2)
ICACHE_MISS_SLOWDOWN = 2.0

# the non-valu terms overlap imperfectly: a p-norm blends max and sum
OVERLAP_P = 2

# DRAM share L2 serves when panels fit in it, back to back
# (calibrated on pyfr-walk-h100-candidates.csv)
L2_RESIDENT = 0.5

# LDS-fed FMAs between chunk barriers vs register-fed; CALIBRATED on the
# twin (pyfr-walk-h100-twin-bounded-candidates.csv), ASSUMED on AMD
LDS_FED_SLOWDOWN = 8

# registers a thread keeps besides its loads in flight
ADDRESS_REGISTERS = 24


def arch(name):
    """The :class:`Arch` of a name (feature suffixes allowed); ValueError
    for an unknown one, TypeError for a non-str."""
    if not isinstance(name, str):
        raise TypeError(f'arch must be a str, not {type(name).__name__}')
    try:
        return ARCHES[name.split(':')[0]]
    except KeyError:
        raise ValueError(f'no cost constants for arch {name!r} (known: '
                         f'{", ".join(ARCHES)})') from None


HIP_ARCH_NEAREST = dict(HIP.nearest_arch)
DEFAULT_HIP_ARCH = HIP.default_arch


def hip_arch(gcn_arch):
    """The ARCHES name a HIP gcn_arch is estimated with."""
    if not isinstance(gcn_arch, str):
        raise TypeError(f'gcn_arch must be a str, not '
                        f'{type(gcn_arch).__name__}')
    return HIP.cost_arch(gcn_arch)


def moved_bytes(info, beta, n, itemsize):
    """Least bytes C = A*B + beta*C must move."""
    return itemsize*n*(len(info.bix) + info.m*(2 if beta else 1))


# -- what the plan says ------------------------------------------------------


@dataclass(frozen=True)
class Work:
    """What a candidate does per column, and how it is launched."""
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
    # B bytes a block re-reads: must stay cached for the re-reads to hit
    reread_set: float = 0.0
    # re-reads are a thread's own, so L1 can serve them
    reread_local: bool = False
    # unrolled instructions the waves walk (0: a loop in the icache)
    code: float = 0.0
    # FMAs take B from LDS between barriers (LDS_FED_SLOWDOWN)
    lds_fed: bool = False
    # disjoint paths a block's waves take through the unrolled code
    wave_paths: int = 1


def stream_work(kern, b_rows, lds=0.0, stage=None, waits=1, loads=None,
                reread=None, stack=1, l2_rows=None):
    """Work of the one-thread-per-column families reading b_rows B rows a
    column (stage: bytes a thread where B is staged in `waits` chunks)."""
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
    """Work of the 2-D tiled tensor-core families (live_rows[mb]: B rows
    row group mb reads a column)."""
    mm, info, size = kern.mm, kern.info, kern.itemsize
    g = kern.geometry()
    threads = g.block[0]*g.block[1]*g.block[2]
    c_rw = info.m*size*(2 if mm.beta else 1)
    rows = float(np.sum(live_rows))
    dram = len(info.bix)*size + c_rw
    l2 = rows*size + c_rw
    # B through LDS twice; A's slabs amortised over a block's columns
    lds = rows*size*2 + a_bytes / (g.cols_per_block or 1)
    mflops = 2.0*block_m*rows
    instr = mflops / (2*16*16*4) + rows / kern.warp
    stages = float(np.max(live_rows)) / block_k
    waits = 1 + int(math.ceil(stages / max(1, depth)))
    rset = rows / m_blocks*g.cols_per_block*size
    return Work(dram, l2, lds, 0.0, mflops, instr, stage_bytes / threads,
                threads, g.cols_per_block, m_blocks, False, waits, rset)


def work(mm, cand, dtype):
    """The :class:`Work` of candidate `cand` of generator `mm`."""
    return mm.kernel(cand, dtype).work()


# -- what the compiler says --------------------------------------------------


@dataclass(frozen=True)
class Facts:
    """A compiled kernel's facts (None: unknown; waves: per SIMD)."""
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
    """Facts from the family's own estimates, for want of a compiler; HIP
    adds C's row waits (nvcc's code does not pay them)."""
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
    """HIP full waits for C's loads: one a finished row, as clang-19 does
    not hoist them above earlier stores (hip-family-waits.csv)."""
    if not kern.mm.beta or kern.params.get('preload_c'):
        return 0
    return kern.finish_rows() or 0


# -- the estimate ------------------------------------------------------------


def resident_blocks(a, facts, block_threads):
    """Blocks of block_threads threads resident on one unit of arch a."""
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
    """The :class:`Estimate` of :class:`Work` w with facts on arch a for n
    columns (client_div: the client launches ceil(n/client_div) blocks);
    ValueError for n <= 0."""
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
    # a block runs only its row group's share of the kernel's waits
    waits = max(w.waits, (facts.full_waits or 0)
                / (max(1, w.row_groups) if w.straight else 1))
    if w.straight and w.inflight > room:
        waits = max(waits, -(-int(w.inflight) // room))
    # per-unit pipes scale with the busiest unit, not the mean
    imbalance = -(-grid // a.units) / (grid / a.units)
    clock = a.clock_hz*a.units / imbalance
    waves_simd = per_unit*-(-w.block_threads // a.lanes) / a.simds
    busy = min(1.0, waves_simd / BUSY_WAVES)
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
    """DRAM seconds in rounds of `concurrent` blocks (Little's law)."""
    per_block = nbytes / grid
    full, rest = divmod(grid, concurrent)
    t = full*concurrent*per_block / min(a.copy_bw, concurrent*block_bw)
    if rest:
        t += rest*per_block / min(a.copy_bw, rest*block_bw)
    return t


def _round_trip(w, a):
    """Mean latency of a block's loads."""
    first = w.dram_bytes / max(w.l2_bytes, w.dram_bytes)
    return first*a.latency_s + (1 - first)*a.l2_latency_s


def _reread_split(w, a, per_unit, concurrent):
    """Where a column's re-read bytes are served: L1, L2 or DRAM."""
    reread = max(0.0, w.l2_bytes - w.dram_bytes)
    if not reread or not w.reread_set:
        return {'l2': reread, 'dram': 0.0}
    if w.reread_local and per_unit*w.reread_set <= a.l1_size:
        return {'l2': 0.0, 'dram': 0.0}
    held = min(1.0, a.l2_size / (concurrent*w.reread_set))
    return {'l2': reread*held, 'dram': reread*(1 - held)}


def _instructions(w, facts, a, grid, n):
    """Wave instructions a column: the compiler's share a wave runs, else
    the plan's."""
    if facts.instructions is not None and w.straight:
        waves = grid*-(-w.block_threads // a.lanes)
        per_wave = facts.instructions / (max(1, w.row_groups)
                                         * max(1, w.wave_paths))
        return max(w.instructions, per_wave*waves / n)
    return w.instructions


def estimate_candidate(mm, cand, dtype, arch_name, n, facts=None):
    """The :class:`Estimate` of one candidate of mm (facts: else the
    plan's)."""
    a = arch(arch_name)
    if facts is None:
        facts = plan_facts(mm, cand, dtype)
    w = work(mm, cand, dtype)
    size = np.dtype(dtype).itemsize
    div = (mm.kernel(cand, dtype).geometry().block[0]
           if mm.runtime_client_grid else None)
    return estimate(w, facts, a, n, moved_bytes(mm.info, mm.beta, n, size),
                    div)


# -- the order ---------------------------------------------------------------

# a family per FIRST (PyFR times 8) hedges the estimate's errors, unless
# DIVERSE_WITHIN times slower
FIRST = 8
MAX_PER_FAMILY = 3
DIVERSE_WITHIN = 2.0


def diverse(items, family_of, first=FIRST, per_family=MAX_PER_FAMILY,
            eligible=None, spread=False):
    """items (best first) with at most per_family of a family among the
    first `first` while an eligible other is left; spread: each family's
    best eligible item among them too."""
    eligible = eligible or (lambda x: True)
    if spread:
        lead, fams = [], set()
        for x in items:
            if len(lead) < first and eligible(x) and family_of(x) not in fams:
                lead.append(x)
                fams.add(family_of(x))
        ids = {id(x) for x in lead}
        rest = diverse([x for x in items if id(x) not in ids], family_of,
                       first - len(lead), per_family - 1, eligible)
        where = {id(x): i for i, x in enumerate(items)}
        head = sorted(lead + rest[:first - len(lead)],
                      key=lambda x: where[id(x)])
        return head + rest[first - len(lead):]
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


# n where none is given: PyFR's panel of a 22k-element hex mesh
DEFAULT_N = 110080


def rank(mm, cands, dtype, arch_name, n=None, facts=None):
    """[(cand, Estimate)] by estimated time, with family diversity (facts:
    {variant: Facts} or callable(cand), else the plan's)."""
    n = n or mm.n or DEFAULT_N
    out = []
    for i, c in enumerate(cands):
        f = facts(c) if callable(facts) else (facts or {}).get(c.variant)
        out.append((estimate_candidate(mm, c, dtype, arch_name, n, f), i, c))
    out.sort(key=lambda x: (x[0].seconds, x[1]))
    best = out[0][0].seconds if out else 0.0
    ordered = diverse(out, lambda x: x[2].family,
                      eligible=lambda x: x[0].seconds
                      <= DIVERSE_WITHIN*best,
                      spread=mm.target.spread_families)
    return [(c, e) for e, _, c in ordered]


def add_isa_estimates(mm, rows, dtype, n=None):
    """Add est_us, est_copy_frac and est_bound to gimmik.isa report rows."""
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
