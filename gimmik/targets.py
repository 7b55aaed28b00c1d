"""One record a platform: every number of a platform that code outside
its module reads (the families, gimmik.base, gimmik.cost, gimmik.order),
and the cost constants of its devices (:class:`Arch`).  A new platform is
its module, its base template, its runtime and one :class:`Target` here."""

from dataclasses import dataclass

# Launch limits of a block unless a platform's record lowers them
MAX_THREADS = 1024
MAX_SHARED = 64*1024

# -- per-architecture constants (gimmik.cost) --------------------------------


@dataclass(frozen=True)
class Arch:
    """Constants of one GPU (one GCD of a multi-die package).  Rates are
    per compute unit (CU / SM) and clock unless named otherwise."""
    name: str
    platform: str          # 'hip' or 'cuda'
    units: int             # CUs or SMs
    clock_hz: float
    peak_bw: float         # DRAM bytes/s, the vendor's peak
    copy_bw: float         # DRAM bytes/s a device copy reaches
    latency_s: float       # DRAM load latency under load
    l2_latency_s: float    # L2 hit latency
    l2_bw: float           # L2 bytes/s, whole device
    l2_size: int           # L2 bytes, whole device
    l1_size: int           # L1 data cache bytes a unit (beside shared)
    l1_shared_path: bool   # global loads share the shared-memory path
    lds_bytes_clk: int     # LDS / shared-memory bytes per clock
    valu_flop_clk: int     # FP64 vector flops per clock (FMA = 2)
    valu_reach: float      # fraction of it unrolled baked-A code reaches
    matrix_flop_clk: int   # FP64 matrix flops per clock
    issue_clk: float       # wave/warp instructions issued per clock
    icache_instr: int      # instructions the instruction cache holds
    lanes: int             # threads of a wave/warp
    simds: int             # SIMDs (AMD) or sub-partitions (NVIDIA)
    max_waves: int         # resident waves/warps per unit
    max_blocks: int        # resident blocks per unit
    regs_per_lane: int     # 32-bit registers a SIMD has per lane
    reg_granule: int       # allocation granule (registers per lane)
    shared_bytes: int      # LDS / shared memory per unit
    shared_reserved: int   # bytes the driver reserves per block
    launch_s: float        # launch and drain of one kernel


# What gfx90a (CDNA2) and gfx942 (CDNA3) share, per CU
_CDNA = dict(
    # the vector L1 is its own path, beside the LDS
    l1_shared_path=False,
    # 128 bytes/clock/CU: ROCm Compute Profiler, LDS speed-of-light
    lds_bytes_clk=128,
    # 128 vector and 256 matrix FP64 flops a clock (the data sheets' rates
    # over CUs and clock, below; the matrix rate is also the facts doc's,
    # v_mfma_f64_16x16x4: 256 FLOP/cycle/CU)
    valu_flop_clk=128, matrix_flop_clk=256,
    # ASSUMED: as the H100's (sm_90)
    valu_reach=0.4,
    # one VALU instruction per SIMD every 4 clocks (a wave64 on a 16-lane
    # SIMD), 4 SIMDs: 1 wave instruction a clock per CU (ROCm Compute
    # Profiler, pipeline descriptions)
    issue_clk=1.0,
    # 64 KB instruction cache shared by 2 CUs (ROCm "AMD GPU
    # specifications"), ~8 bytes an instruction
    icache_instr=8192,
    # wave64, 4 SIMDs, 8 waves/SIMD, 512 VGPRs a lane, granule 8: facts
    # doc section 5 (LLVM AMDGPUBaseInfo)
    lanes=64, simds=4, max_waves=32, max_blocks=32,
    regs_per_lane=512, reg_granule=8,
    # 64 KiB LDS a CU: ROCm "AMD GPU specifications"
    shared_bytes=64*1024, shared_reserved=0,
    # ASSUMED: as the H100's
    launch_s=3e-6)

# MI250X, one GCD (gfx90a, CDNA2)
GFX90A = Arch(
    name='gfx90a', platform='hip',
    # 110 CUs a GCD: ROCm "AMD GPU specifications" (MI250X: 220 CUs,
    # two GCDs)
    units=110,
    # 1700 MHz peak engine clock: AMD MI250X data sheet
    clock_hz=1.7e9,
    # 3.2768 TB/s HBM2e a package, half a GCD: MI250X data sheet
    peak_bw=1.6384e12,
    # ASSUMED: 0.80 of peak (no AMD device here; the H100's copy
    # reaches 0.88 of its peak, see sm_90); replace with a measured
    # copy (gimmik.runtime.hip copy_bandwidth) when one is made
    copy_bw=0.80*1.6384e12,
    # ASSUMED: the loaded round trip, 2.5x an idle ~0.7 us (the ratio
    # calibrated on the H100, see sm_90)
    latency_s=1.75e-6,
    # ASSUMED: ~0.2 us L2 hit (a few hundred clocks, CDNA2
    # microbenchmark reports)
    l2_latency_s=0.2e-6,
    # 32 L2 channels (ROCm Compute Profiler, L2 cache (TCC): 32 on
    # MI2XX) x 128 bytes a clock each (its L2 speed-of-light table)
    l2_bw=32*128*1.7e9,
    # 8 MB L2 a GCD, 16 KB vector L1 a CU: ROCm "AMD GPU
    # specifications" (MI250X)
    l2_size=8 << 20, l1_size=16 << 10,
    # 47.9 TF vector / 95.7 TF matrix FP64 a package (MI250X data
    # sheet) over 220 CUs at 1.7 GHz: 128 and 256 flops a clock
    **_CDNA)


# MI300X (gfx942, CDNA3)
GFX942 = Arch(
    name='gfx942', platform='hip',
    # 304 CUs (38 a XCD): ROCm "AMD GPU specifications"
    units=304,
    # 2100 MHz peak engine clock: AMD MI300X data sheet
    clock_hz=2.1e9,
    # 5.3 TB/s HBM3: MI300X data sheet
    peak_bw=5.3e12,
    # ASSUMED: 0.80 of peak, as gfx90a
    copy_bw=0.80*5.3e12,
    # ASSUMED: the loaded round trip, 2.5x an idle ~0.8 us (HBM behind
    # the IODs' Infinity Fabric; the ratio as on the H100)
    latency_s=2.0e-6,
    # ASSUMED: ~0.25 us L2 hit
    l2_latency_s=0.25e-6,
    # 16 L2 channels a XCD x 128 bytes a clock x 8 XCDs (CDNA3 white
    # paper: 4 MB, 16 channels a XCD; Compute Profiler L2 table)
    l2_bw=8*16*128*2.1e9,
    # 4 MB L2 a XCD (32 MB), 32 KB vector L1 a CU: ROCm "AMD GPU
    # specifications" (MI300X); the 256 MB Infinity Cache behind them
    # is not counted
    l2_size=32 << 20, l1_size=32 << 10,
    # 81.7 TF vector / 163.4 TF matrix FP64 (MI300X data sheet) over
    # 304 CUs at 2.1 GHz: 128 and 256 flops a clock
    **_CDNA)


# H100 SXM5 (sm_90)
SM_90 = Arch(
    name='sm_90', platform='cuda',
    # 132 SMs; FP64 at 1.98 GHz: NVIDIA H100 data sheet / Hopper
    # white paper
    units=132, clock_hz=1.98e9,
    # 3.35 TB/s HBM3: H100 SXM data sheet
    peak_bw=3.35e12,
    # MEASURED here: the runtime's 512 MiB device copy, median over
    # the 6102 rows of bench/results/cuda-h100-all-candidates.csv
    # (gbps / copy_fraction): 2962 GB/s
    copy_bw=2.962e12,
    # CALIBRATED: the round trip of a load while the memory streams
    # at full bandwidth (queues at the memory controllers): 1.5 us,
    # 2.5x the idle ~0.6 us of Hopper microbenchmark papers.  First
    # pick within 5 % of the best on the PyFR-walk H100 times
    # (bench/model/cost_validate.py; gemm / ordered / walk files): 59/57/61
    # % at 0.65 us, 73/63/66 % at 1.0, 80/65/66 % at 1.2, 92/66/68 %
    # at 1.5, 90/66/68 % at 2.0
    latency_s=1.5e-6,
    # ~0.2 us L2 hit (Chips and Cheese, H100: ~260 clocks near, more
    # across the two partitions)
    l2_latency_s=0.2e-6,
    # L2 read bandwidth: Chips and Cheese measured ~5.5 TB/s on the
    # H100 PCIe (114 SMs, 1.755 GHz); scaled to the SXM's 132 SMs at
    # 1.98 GHz, ~7.2 TB/s
    l2_bw=7.2e12,
    # 50 MB L2: H100 data sheet; L1 and shared memory are one 256 KB
    # array a SM (Hopper tuning guide), ~128 KB left as L1 beside a
    # typical carve-out, and global loads go through its data path
    l2_size=50 << 20, l1_size=128 << 10, l1_shared_path=True,
    # 32 banks x 4 bytes a clock: CUDA programming guide, shared
    # memory
    lds_bytes_clk=128,
    # 33.5 TF vector / 66.9 TF tensor FP64 over 132 SMs at 1.98 GHz:
    # 128 and 256 flops a clock (64 FP64 lanes a SM)
    valu_flop_clk=128, matrix_flop_clk=256,
    # MEASURED: the fastest streaming kernel of each operator of the
    # PyFR walk (bench/results/pyfr-walk-h100-candidates.csv, n =
    # 110080) reaches at most 26 of the 64 FP64 lanes a clock (p4-tet-
    # m0), 18-26 on the compute-heavy ones: unrolled code with A's
    # values as constant operands issues at about 0.4 of the peak
    valu_reach=0.4,
    # 4 warp schedulers a SM, one instruction a clock each
    issue_clk=4.0,
    # ASSUMED: ~128 KB L1.5 instruction/constant cache a SM
    # (Volta-to-Hopper microbenchmark papers), 16 bytes a SASS
    # instruction
    icache_instr=8192,
    # warp 32, 4 sub-partitions, 64 warps and 32 blocks a SM, 64K
    # 32-bit registers a SM (512 a lane of each sub-partition),
    # allocated 256 a warp (8 a lane): CUDA programming guide,
    # compute capability 9.0
    lanes=32, simds=4, max_waves=64, max_blocks=32,
    regs_per_lane=512, reg_granule=8,
    # 228 KiB shared memory a SM, 1 KiB reserved a block: CUDA
    # programming guide (the CUDA record's unit_shared)
    shared_bytes=228*1024, shared_reserved=1024,
    # ASSUMED: launch, ramp and drain; the same for every candidate
    # of an operator, it moves the copy fraction, not the ranking
    launch_s=3e-6)


@dataclass(frozen=True)
class Target:
    """The numbers of one platform (see the module docstring)."""
    platform: str
    # threads of a warp (wave) unless the options name one, and warps of a
    # block of the one-thread-per-column families
    warp: int = 1
    stream_warps: int = 1
    # launch limits of a block: threads, bytes of shared memory (LDS, local
    # or threadgroup memory)
    max_threads: int = MAX_THREADS
    max_shared: int = MAX_SHARED
    # the register estimate (Family.registers) a candidate may need to be
    # offered, unless its family's max_registers names another; None: none
    max_registers: int = None
    # 32-bit registers a SIMD (NVIDIA: sub-partition) has per lane, SIMDs
    # a unit (CU / SM), the most one thread may use
    lane_registers: int = None
    simds: int = 1
    thread_registers: int = None
    # shared bytes of a unit and the driver's reservation per block (the
    # blocks per unit a row asks for)
    unit_shared: int = None
    shared_reserved: int = 0
    # global loads a thread issues before it consumes any of them (the
    # families' load batches and runs); None: no batches
    batch_loads: int = None
    # how the offer is ordered: 'cost' (gimmik.cost.rank), 'rules'
    # (gimmik.order's rules) or 'table' (table order)
    order: str = 'table'
    # the cost constants of its devices, the device each other device name
    # is estimated as ((name, arch name) pairs), and the default device
    arches: tuple = ()
    nearest_arch: tuple = ()
    default_arch: str = None

    @property
    def unit_registers(self):
        """32-bit registers of one unit (CU / SM)."""
        return self.lane_registers*self.simds*self.warp

    def cost_arch(self, name):
        """The name of the Arch a device name (feature suffixes allowed)
        is estimated with: its own, else nearest_arch's, else
        default_arch."""
        base = name.split(':')[0]
        if any(a.name == base for a in self.arches):
            return base
        return dict(self.nearest_arch).get(base, self.default_arch)


HIP = Target(
    'hip', warp=64, stream_warps=2,
    # a candidate needing more VGPRs by its estimate would be spilt to
    # scratch by the compiler (clang-19 spills cstream/width2 of
    # p3-pyr-m132, 90 live B rows, on gfx942); where no candidate with a
    # limit fits, gimmik.hip still offers the one that needs the fewest
    max_registers=200,
    lane_registers=_CDNA['regs_per_lane'], simds=_CDNA['simds'],
    # The unrolled cstream families (cstream, cstream-mblock): the global
    # loads a thread issues before it consumes any of them where beta !=
    # 0 (gimmik.plans.load_batches).  A wave then waits for all its loads
    # (s_waitcnt vmcnt(0)) once a batch, not once a row: clang-19 keeps
    # loads where the source puts them, and a row's beta*C load, consumed
    # at once, drained the memory pipe every row (p4-pri-m6, beta 1, 16
    # groups: 65 full waits on 490 loads, 15 in batches; cstream of
    # p4-hex-m6: 391 on 525, 18 in batches).  Batches cost registers: the
    # C values of up to 8 rows and what clang-19 hoists with them
    # (cstream of p3-pri-m3, beta 1: 74 to 130 VGPRs).  With beta 0
    # clang-19 mostly waits at most once per 8 loads on one row a batch,
    # and batching B alone there only costs registers (p4-hex-m460, 16
    # groups: 64 to 88 VGPRs, 8 to 5 waves a SIMD); cstream batches B at
    # beta 0 only where one row a batch would wait more often than that
    # (plans.row_batches_wait_often: cstream of p3-pri-m460, rows loading
    # 8 and 2 B rows in turn, 8 full waits on 40 loads, none in batches at
    # the same 168 VGPRs).  bstream (gimmik.plans.load_runs) loads B's
    # rows, whatever beta, and C's old values in runs of this many: one B
    # row at a time it waited for each (p4-pri-m3, beta 1: 165 full waits
    # on 180 loads, 1 in runs, at 156 to 256 VGPRs, 3 waves to 1).
    batch_loads=8,
    order='cost',
    arches=(GFX90A, GFX942),
    # the other MI300 dies; MI355X (gfx950) as the MI300X, ASSUMED: no
    # constants of its own yet; else the MI300X, the platform's main target
    nearest_arch=(('gfx940', 'gfx942'), ('gfx941', 'gfx942'),
                  ('gfx950', 'gfx942'), ('gfx908', 'gfx90a')),
    default_arch='gfx942')

CUDA = Target(
    'cuda', warp=32, stream_warps=4,
    # static __shared__ arrays are limited to 48 KiB
    max_shared=48*1024,
    # a thread has at most 255 registers; the limit is set from ptxas
    # reports on the PyFR suite, where ptxas hoists the loads of the
    # unrolled cstream/bstream further than the estimate assumes
    max_registers=160,
    # 64K registers an SM: a block of t threads may use 64K/t a thread
    lane_registers=SM_90.regs_per_lane, simds=SM_90.simds,
    thread_registers=255,
    unit_shared=SM_90.shared_bytes, shared_reserved=SM_90.shared_reserved,
    order='rules',
    arches=(SM_90,), default_arch='sm_90')

C = Target('c')

OPENCL = Target(
    # work-items a row of a work-group runs (the LDS-staged families' x
    # extent); a streaming work-group runs two such rows
    'opencl', warp=64, stream_warps=2,
    # the unrolled kernels keep their values in registers, and beyond
    # this the devices' compilers (255 registers on NVIDIA, 256 VGPRs on
    # AMD) spill
    max_registers=200)

METAL = Target(
    'metal', warp=32, stream_warps=4,
    # threadgroup memory a kernel may use (Apple GPUs: 32 KiB)
    max_shared=32*1024,
    max_registers=OPENCL.max_registers)

TARGETS = {t.platform: t for t in (HIP, CUDA, C, OPENCL, METAL)}

# every device's cost constants by name
ARCHES = {a.name: a for t in TARGETS.values() for a in t.arches}


def target(platform):
    """The :class:`Target` of a platform name."""
    try:
        return TARGETS[platform]
    except (KeyError, TypeError):
        raise ValueError(f'no target record for platform {platform!r} '
                         f'(known: {", ".join(TARGETS)})') from None
