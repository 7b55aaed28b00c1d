"""One record a platform (:class:`Target`): every platform number read
outside its module, and its devices' cost constants (:class:`Arch`)."""

from dataclasses import dataclass

MAX_THREADS = 1024
MAX_SHARED = 64*1024

# -- per-architecture constants (gimmik.cost) --------------------------------


@dataclass(frozen=True)
class Arch:
    """Constants of one GPU (one GCD); rates per CU / SM and clock."""
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
    # LDS speed-of-light: ROCm Compute Profiler; vector L1 is its own path
    l1_shared_path=False, lds_bytes_clk=128,
    # the data sheets' FP64 rates over CUs and clock
    valu_flop_clk=128, matrix_flop_clk=256,
    # ASSUMED: as the H100's (sm_90)
    valu_reach=0.4,
    # one wave64 VALU instruction per 16-lane SIMD per 4 clocks, 4 SIMDs (ROCm)
    issue_clk=1.0,
    # 64 KB instruction cache per 2 CUs (ROCm specifications), ~8 B each
    icache_instr=8192,
    # LLVM AMDGPUBaseInfo (facts doc section 5)
    lanes=64, simds=4, max_waves=32, max_blocks=32,
    regs_per_lane=512, reg_granule=8,
    # ROCm "AMD GPU specifications"
    shared_bytes=64*1024, shared_reserved=0,
    # ASSUMED: as the H100's
    launch_s=3e-6)

# MI250X, one GCD (gfx90a, CDNA2)
GFX90A = Arch(
    name='gfx90a', platform='hip',
    # ROCm "AMD GPU specifications"; clock and HBM (half a package): data sheet
    units=110, clock_hz=1.7e9, peak_bw=1.6384e12,
    # ASSUMED: no AMD device here to measure a copy or latency on
    copy_bw=0.80*1.6384e12, latency_s=1.75e-6, l2_latency_s=0.2e-6,
    # 32 L2 channels x 128 B a clock (ROCm Compute Profiler, TCC)
    l2_bw=32*128*1.7e9,
    # ROCm "AMD GPU specifications" (MI250X)
    l2_size=8 << 20, l1_size=16 << 10,
    **_CDNA)


# MI300X (gfx942, CDNA3)
GFX942 = Arch(
    name='gfx942', platform='hip',
    # ROCm "AMD GPU specifications"; clock and HBM3: MI300X data sheet
    units=304, clock_hz=2.1e9, peak_bw=5.3e12,
    # ASSUMED: as gfx90a, latency scaled for the IODs' Infinity Fabric
    copy_bw=0.80*5.3e12, latency_s=2.0e-6, l2_latency_s=0.25e-6,
    # 16 channels a XCD x 128 B a clock x 8 XCDs (CDNA3 white paper)
    l2_bw=8*16*128*2.1e9,
    # ROCm specifications; the Infinity Cache behind L2 is not counted
    l2_size=32 << 20, l1_size=32 << 10,
    **_CDNA)


# H100 SXM5 (sm_90)
SM_90 = Arch(
    name='sm_90', platform='cuda',
    # NVIDIA H100 SXM data sheet / Hopper white paper
    units=132, clock_hz=1.98e9, peak_bw=3.35e12,
    # MEASURED: median 512 MiB copy of cuda-h100-all-candidates.csv
    copy_bw=2.962e12,
    # CALIBRATED: the loaded round trip giving the best first picks
    # (cost-validation-h100-gemm.csv)
    latency_s=1.5e-6,
    # Chips and Cheese's H100 PCIe L2 latency and bandwidth, scaled to the SXM
    l2_latency_s=0.2e-6, l2_bw=7.2e12,
    # data sheet; L1 shares shared memory's array and data path (tuning guide)
    l2_size=50 << 20, l1_size=128 << 10, l1_shared_path=True,
    # 32 banks x 4 B a clock: CUDA programming guide
    lds_bytes_clk=128,
    # the data sheet's FP64 rates over SMs and clock
    valu_flop_clk=128, matrix_flop_clk=256,
    # MEASURED: lanes the best streaming kernels keep busy
    # (pyfr-walk-h100-candidates.csv)
    valu_reach=0.4,
    # 4 warp schedulers a SM
    issue_clk=4.0,
    # ASSUMED: ~128 KB L1.5 cache, 16 B a SASS instruction
    icache_instr=8192,
    # CUDA programming guide, compute capability 9.0
    lanes=32, simds=4, max_waves=64, max_blocks=32,
    regs_per_lane=512, reg_granule=8,
    shared_bytes=228*1024, shared_reserved=1024,
    # ASSUMED: the same for every candidate, it moves no ranking
    launch_s=3e-6)


@dataclass(frozen=True)
class Target:
    """The numbers of one platform (see the module docstring)."""
    platform: str
    # threads a warp; warps a block of the one-thread-per-column families
    warp: int = 1
    stream_warps: int = 1
    max_threads: int = MAX_THREADS
    max_shared: int = MAX_SHARED
    # most registers (Family.registers) an offered candidate may need
    max_registers: int = None
    lane_registers: int = None
    simds: int = 1
    thread_registers: int = None
    unit_shared: int = None
    shared_reserved: int = 0
    # global loads a thread issues before consuming any; None: no batches
    batch_loads: int = None
    arches: tuple = ()
    # cost.rank: each family's best within DIVERSE_WITHIN among the first 8
    spread_families: bool = False
    nearest_arch: tuple = ()
    default_arch: str = None

    @property
    def unit_registers(self):
        """32-bit registers of one unit (CU / SM)."""
        return self.lane_registers*self.simds*self.warp

    def cost_arch(self, name):
        """The Arch name a device name is estimated with."""
        base = name.split(':')[0]
        if any(a.name == base for a in self.arches):
            return base
        return dict(self.nearest_arch).get(base, self.default_arch)


HIP = Target(
    'hip', warp=64, stream_warps=2,
    # beyond this clang-19 spills to scratch (gimmik.hip offers the fewest)
    max_registers=200,
    lane_registers=_CDNA['regs_per_lane'], simds=_CDNA['simds'],
    # clang-19 waits for all loads once a batch, not once a row; more costs
    # registers (plans.load_batches, load_runs; hip-family-waits.csv)
    batch_loads=8,
    arches=(GFX90A, GFX942),
    # ASSUMED: no constants of their own yet
    nearest_arch=(('gfx940', 'gfx942'), ('gfx941', 'gfx942'),
                  ('gfx950', 'gfx942'), ('gfx908', 'gfx90a')),
    default_arch='gfx942')

CUDA = Target(
    'cuda', warp=32, stream_warps=4,
    # static __shared__ arrays are limited to 48 KiB
    max_shared=48*1024,
    # below 255: ptxas hoists unrolled loads further than the estimate assumes
    max_registers=160,
    lane_registers=SM_90.regs_per_lane, simds=SM_90.simds,
    thread_registers=255,
    unit_shared=SM_90.shared_bytes, shared_reserved=SM_90.shared_reserved,
    # the estimate errs most across families on small operators
    # (order-compare-cost.txt)
    spread_families=True,
    arches=(SM_90,), default_arch='sm_90')

C = Target('c')

OPENCL = Target(
    'opencl', warp=64, stream_warps=2,
    # beyond this the devices' compilers spill the unrolled kernels
    max_registers=200)

METAL = Target(
    'metal', warp=32, stream_warps=4,
    max_shared=32*1024,
    max_registers=OPENCL.max_registers)

TARGETS = {t.platform: t for t in (HIP, CUDA, C, OPENCL, METAL)}

ARCHES = {a.name: a for t in TARGETS.values() for a in t.arches}

