"""CUDA generator for NVIDIA GPUs (Ampere sm_80 and later; Hopper sm_90).

The streaming families are the HIP ones for a 32-wide warp, with read-only
(`ld.global.nc`) or evict-first (`ld.global.cs`) loads of B and evict-first
stores of C.  Two families run f64 operators on the FP64 tensor cores:
`mma-gemm` (a GEMM with 2-D block tiling, A and B staged through shared
memory by cp.async, m8n8k4 or Hopper's m16n8k4/k8/k16; zero slabs of A
skipped) and the older `mma-dense` (m8n8k4, A fragments from a global
table).  Their fragment bakes (plain Python, unit-tested against NumPy
models of the MMAs) are at the end of this module.
"""

from dataclasses import dataclass

import numpy as np

from gimmik.base import MatMul
from gimmik import plans
from gimmik.analysis import DENSE_DENSITY

WARP = 32

# Static __shared__ arrays are limited to 48 KiB in CUDA.
MAX_STATIC_SHARED = 48*1024

# A candidate whose estimated live values (32-bit registers per thread, see
# register_estimate) exceed its family's limit here is not offered: it
# would spill to local memory (a thread has at most 255).  The limits are
# set from ptxas reports on the PyFR suite: ptxas hoists the loads of the
# unrolled cstream/bstream further than the estimate assumes.
MAX_EST_REGISTERS = {'cstream-mblock': 200, 'mma-dense': 200,
                     'mma-gemm': 232}
MAX_EST_REGISTERS_DEFAULT = 160

# The launch bounds never cap a thread below this many registers (the
# estimates are rough; ptxas takes what it needs below the cap).
MIN_REGISTER_CAP = 168

# Registers of one SM: a block of t threads may use 64K/t per thread at most.
SM_REGISTERS = 65536

# The CUDA candidate table.  Each row: family, parameters, and the named
# conditions (see _gates) under which it is offered.  Order is the order of
# offering: PyFR only times the first few.
CANDIDATES = [
    # family            parameters                                 gate
    # mma-gemm: skip and cpre are dropped where they change nothing (beta
    # 0, no zero slab: see _gemm_params); the rows marked * were measured on
    # the H100 without them (bench/results/cuda-h100-mma-gemm.*), the others
    # (128 x 128 and 256 x 64 tiles: less A and B traffic from L2; tiles:
    # a block's pipeline runs on over several column tiles) not yet.
    *[('mma-gemm', dict(p, skip=True, cpre=True), gate) for p, gate in [
        (dict(shape='m16n8k8', mwarps=2, nwarps=2, wm=4, wn=4, kstage=1,
              nbuf=3), 'mma90 w2'),                                  # *
        (dict(shape='m16n8k4', mwarps=2, nwarps=4, wm=4, wn=4, kstage=1,
              nbuf=4), 'mma90 w2'),
        (dict(shape='m16n8k8', mwarps=2, nwarps=2, wm=4, wn=4, kstage=1,
              nbuf=3, tiles=4), 'mma90 w2'),
        (dict(shape='m16n8k4', mwarps=2, nwarps=4, wm=4, wn=4, kstage=1,
              nbuf=4, tiles=2), 'mma90 w2'),
        (dict(shape='m16n8k8', mwarps=2, nwarps=4, wm=2, wn=4, kstage=1,
              nbuf=3), 'mma90 w2'),                                  # *
        (dict(shape='m16n8k8', mwarps=2, nwarps=4, wm=2, wn=4, kstage=1,
              nbuf=3, tiles=4), 'mma90 w2'),
        (dict(shape='m16n8k8', mwarps=4, nwarps=2, wm=2, wn=4, kstage=1,
              nbuf=3), 'mma90 w2'),                                  # *
        (dict(shape='m16n8k4', mwarps=2, nwarps=2, wm=4, wn=4, kstage=2,
              nbuf=3), 'mma90 w2'),                                  # *
        (dict(shape='m8n8k4', mwarps=2, nwarps=2, wm=4, wn=4, kstage=2,
              nbuf=3), 'mma w2'),                                    # *
        (dict(shape='m16n8k8', mwarps=2, nwarps=2, wm=2, wn=4, kstage=2,
              nbuf=2), 'mma90 w2'),                                  # *
        (dict(shape='m16n8k4', mwarps=4, nwarps=4, wm=2, wn=4, kstage=1,
              nbuf=4), 'mma90 w2'),
        (dict(shape='m16n8k8', mwarps=2, nwarps=4, wm=4, wn=4, kstage=1,
              nbuf=2), 'mma90 w2'),
        (dict(shape='m16n8k4', mwarps=4, nwarps=2, wm=4, wn=4, kstage=1,
              nbuf=4), 'mma90 w2'),
        (dict(shape='m16n8k16', mwarps=2, nwarps=2, wm=2, wn=4, kstage=1,
              nbuf=2), 'mma90 w2'),                                  # *
        (dict(shape='m8n8k4', mwarps=4, nwarps=2, wm=4, wn=4, kstage=2,
              nbuf=3), 'mma w2')]],                                  # *
    ('mma-dense', dict(mwarps=2, nwarps=2, ntile=4, kstage=4), 'mma w2'),
    ('mma-dense', dict(mwarps=4, nwarps=1, ntile=4, kstage=4), 'mma w2'),
    ('mma-dense', dict(mwarps=4, nwarps=2, ntile=2, kstage=4), 'mma w2'),
    ('mma-dense', dict(mwarps=8, nwarps=1, ntile=4, kstage=4), 'mma w2'),
    ('mma-dense', dict(mwarps=8, nwarps=1, ntile=2, kstage=8), 'mma w2'),
    ('mma-dense', dict(mwarps=1, nwarps=4, ntile=1, kstage=4), 'mma w2'),
    ('mma-dense', dict(mwarps=1, nwarps=4, ntile=2, kstage=4), 'mma w2'),
    ('mma-dense', dict(mwarps=2, nwarps=4, ntile=1, kstage=8), 'mma w2'),
    ('mma-dense', dict(mwarps=2, nwarps=2, ntile=2, kstage=8), 'mma w2'),
    ('mma-dense', dict(mwarps=4, nwarps=1, ntile=8, kstage=4), 'mma w2'),
    ('cstream', dict(width=2, ld='nc'), 'w2 stream'),
    ('bstream', dict(width=2, ld='cs'), 'w2 stream'),
    ('cstream', dict(width=1, ld='nc'), 'stream'),
    ('bstream', dict(width=1, ld='cs'), 'stream'),
    ('bstream-msplit', dict(width=2, msplit=2, bsz=16, ld='cs'), 'w2 stream'),
    ('bstream-msplit', dict(width=2, msplit=4, bsz=16, ld='cs'), 'w2 stream'),
    ('bstream-msplit', dict(width=1, msplit=4, bsz=16, ld='cs'), 'stream'),
    ('bstream-msplit', dict(width=1, msplit=8, bsz=16, ld='cs'), 'stream'),
    ('bstream-msplit', dict(width=1, msplit=16, bsz=16, ld='cs'), 'stream'),
    ('bstream-msplit', dict(width=1, msplit=32, bsz=16, ld='cs'), 'stream'),
    ('bstream-msplit', dict(width=1, msplit=8, bsz=32, ld='cs'), 'stream'),
    ('bstream-msplit', dict(width=1, msplit=16, bsz=32, ld='cs'), 'stream'),
    ('cstream', dict(width=2, ld='cs'), 'w2 stream'),
    ('cstream', dict(width=1, ld='reload'), 'bigk stream'),
    ('cstream-mblock', dict(width=1, groups=8, ld='nc'), 'bigm stream'),
    ('cstream-mblock', dict(width=1, groups=16, ld='nc'), 'bigm stream'),
    ('cstream-mblock', dict(width=1, groups=32, ld='nc'), 'bigm stream'),
    ('cstream-mblock', dict(width=1, groups=64, ld='nc'), 'bigm stream'),
    ('cstream-mblock', dict(width=1, groups=128, ld='nc'), 'bigm stream'),
    ('cstream-mblock', dict(width=2, groups=16, ld='nc'), 'w2 bigm stream'),
    ('cstream-mblock', dict(width=2, groups=32, ld='nc'), 'w2 bigm stream'),
    ('cstream-ksplit', dict(ksplit=2), 'stream'),
    ('cstream-ksplit', dict(ksplit=4), 'stream'),
    # the sparser big operators (prisms): the tensor cores skip A's zero
    # slabs; offered after the streaming families
    *[('mma-gemm', p, 'gemmsparse sm90 w2') for p in [
        dict(shape='m16n8k8', mwarps=2, nwarps=2, wm=4, wn=4, kstage=1,
             nbuf=3, skip=True, cpre=True),
        dict(shape='m16n8k4', mwarps=2, nwarps=4, wm=4, wn=4, kstage=1,
             nbuf=4, skip=True, cpre=True),
        dict(shape='m16n8k8', mwarps=2, nwarps=4, wm=2, wn=4, kstage=1,
             nbuf=3, skip=True, cpre=True)]],
]

# Where mma-dense is offered, the unrolled streaming families are not for
# operators with more non-zeros than this: they lose to the tensor cores
# there and take minutes each to compile.
MAX_STREAM_NNZ_DENSE = 8192

# mma-gemm is also offered (after the streaming families) for f64 operators
# below the dense threshold with at least this many non-zeros and density.
GEMM_SPARSE_MIN_NNZ = 4096
GEMM_SPARSE_MIN_DENSITY = 0.04

# Streaming families run this many threads per block.
STREAM_BLOCK = 128


def _gates(mm, dtype, cc):
    """The named conditions a candidate row may require."""
    mma_offered = (dtype == np.float64 and cc >= (8, 0)
                   and mma_worth_it(mm.info) and mm.width2_ok())
    return {
        'w2': mm.width2_ok(),
        'beta': mm.beta != 0,
        'bigk': len(mm.info.bix) > 64,
        'bigm': mm.info.m > 64,
        'stream': not (mma_offered and mm.info.nnz > MAX_STREAM_NNZ_DENSE),
        'mma': mma_offered,
        'mma90': mma_offered and cc >= (9, 0),
        'sm90': cc >= (9, 0),
        'gemmsparse': (dtype == np.float64 and cc >= (8, 0)
                       and not mma_worth_it(mm.info)
                       and mm.info.nnz >= GEMM_SPARSE_MIN_NNZ
                       and mm.info.density >= GEMM_SPARSE_MIN_DENSITY),
    }


class CUDAMatMul(MatMul):
    platform = 'cuda'

    def _check_opts(self, compute_capability=(9, 0)):
        cc = compute_capability
        if (not isinstance(cc, (tuple, list)) or len(cc) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool)
                           for x in cc)):
            raise TypeError('compute_capability must be a (major, minor) '
                            f'pair of ints, not {cc!r}')
        cc = tuple(cc)
        if not (7, 0) <= cc < (20, 0) or not 0 <= cc[1] < 10:
            raise ValueError(f'compute_capability {cc} is not a supported '
                             'NVIDIA architecture (7.0 or later)')
        return {'compute_capability': cc}

    def _candidates(self, dtype, compute_capability):
        return self._from_table(
            CANDIDATES, _gates(self, dtype, compute_capability), dtype,
            {'compute_capability': compute_capability},
            lambda family, params: (self._gemm_params(params)
                                    if family == 'mma-gemm' else params))

    def _gemm_params(self, params):
        """mma-gemm parameters without the options that change nothing
        for this operator: cpre where beta is 0, skip where no m-block has
        a zero slab (the kernel is then the one without them)."""
        p = dict(params)
        if p.get('cpre') and self.beta == 0:
            del p['cpre']
        if p.get('skip') and self._gemm_plan(p).full:
            del p['skip']
        return p

    def _fits(self, cand, dtype):
        block, shared, _ = self._geometry(cand, dtype)
        nthreads = block[0]*block[1]*block[2]
        limit = MAX_EST_REGISTERS.get(cand.family,
                                      MAX_EST_REGISTERS_DEFAULT)
        if self.register_estimate(cand, dtype) > min(
                limit, SM_REGISTERS // nthreads):
            return False
        return (block[0]*block[1] <= 1024
                and shared <= MAX_STATIC_SHARED)

    def register_budget(self, cand, dtype):
        """Registers per thread to let ptxas use: the estimate with a
        half more, rounded up to a multiple of 8."""
        est = self.register_estimate(cand, dtype)
        return -(-(est*3//2) // 8)*8

    def register_estimate(self, cand, dtype):
        """32-bit registers per thread the candidate's live values need at
        the most (accumulators, staged or hoisted B values), plus a margin
        for addresses and indices."""
        p = cand.params
        words = np.dtype(dtype).itemsize // 4 * p.get('width', 1)
        margin = 24
        if cand.family == 'cstream':
            if p.get('ld') == 'reload':
                # ptxas hoists the loads anyway; leave it room to
                return margin + 72
            return margin + words*plans.cstream_live_b(plans.cstream_plan(self.A))
        if cand.family == 'cstream-mblock':
            return margin + words*max(plans.cstream_live_b(plan) for _, plan in
                                      mblock_groups(self.A, p['groups']))
        if cand.family == 'bstream':
            nacc = self.info.m - len(self.info.zero_rows)
            return margin + words*(nacc + 1)
        if cand.family == 'bstream-msplit':
            plan = plans.msplit_plan(self.A, min(p['msplit'], self.info.m),
                                     p['bsz'])
            nstage = max(len(ld) for per_q in plan.loads for ld in per_q)
            return margin + words*(plan.nacc + nstage)
        if cand.family == 'cstream-ksplit':
            plan = plans.ksplit_plan(self.A, p['ksplit'])
            nown = max(sum(1 for o in plan.owner if o == y)
                       for y in range(p['ksplit']))
            return margin + words*max(len(ld) + nown for ld in plan.loads)
        if cand.family == 'mma-dense':
            return margin + 2*mma_accumulators(self.A, p) + 2*p['ntile']
        if cand.family == 'mma-gemm':
            # accumulators and one k-step's A and B fragments (f64)
            P = self._gemm_plan(p, table=False)
            return 32 + 2*(P.wm*P.wn*P.nc + P.wm*P.na + P.wn*P.nb)
        raise ValueError(f'unknown CUDA family {cand.family!r}')

    # -- geometry and template contexts per family -----------------------
    def _geometry(self, cand, dtype):
        """(block, shared bytes, columns per thread) without the plan."""
        p = cand.params
        size = np.dtype(dtype).itemsize
        w = p.get('width', 1)
        if cand.family in ('cstream', 'bstream', 'cstream-mblock'):
            return (STREAM_BLOCK, 1, 1), 0, w
        if cand.family == 'bstream-msplit':
            ms = min(p['msplit'], self.info.m)
            return (WARP, ms, 1), 2*p['bsz']*WARP*w*size, w
        if cand.family == 'cstream-ksplit':
            ks = p['ksplit']
            return (WARP, ks, 1), (ks - 1)*self.info.m*WARP*size, 1
        if cand.family == 'mma-dense':
            g = mma_geometry(self.A, p['mwarps'], p['nwarps'], p['ntile'],
                             p['kstage'])
            return g['block'], g['shared'], 1
        if cand.family == 'mma-gemm':
            P = self._gemm_plan(p, table=False)
            return (P.nthreads, 1, 1), P.shared, 1
        raise ValueError(f'unknown CUDA family {cand.family!r}')

    def _context(self, cand, dtype):
        block, shared, width = self._geometry(cand, dtype)
        lit = lambda x: self.lit(x, dtype)  # noqa: E731
        ctx = {'lit': lit, 'zero_rows': set(self.info.zero_rows),
               'ld': cand.params.get('ld', 'nc')}
        # Without a second launch bound ptxas (CUDA 13, sm_90) may cap the
        # registers low enough to spill (seen: 64 for 128 threads, 32 for
        # 1024); ask for as many blocks per SM as the budget allows.
        nthreads = block[0]*block[1]*block[2]
        regs = max(self.register_budget(cand, dtype), MIN_REGISTER_CAP)
        ctx['minblocks'] = max(1, min(2048 // nthreads,
                                      SM_REGISTERS // (nthreads*regs)))
        p = cand.params
        if cand.family == 'cstream':
            ctx['plan'] = plans.cstream_plan(self.A)
        elif cand.family == 'bstream':
            ctx['plan'] = plans.bstream_plan(self.A)
        elif cand.family == 'cstream-mblock':
            ctx['groups'] = mblock_groups(self.A, p['groups'])
        elif cand.family == 'bstream-msplit':
            ctx['plan'] = plans.msplit_plan(self.A, block[1], p['bsz'])
            ctx.update(bsz=p['bsz'], preload_c=p.get('preload_c', False))
        elif cand.family == 'cstream-ksplit':
            ctx['plan'] = plans.ksplit_plan(self.A, block[1])
            ctx.update(preload_c=p.get('preload_c', False))
        elif cand.family == 'mma-dense':
            ctx['plan'] = mma_plan(self.A, p['mwarps'], p['nwarps'],
                                   p['ntile'], p['kstage'])
        elif cand.family == 'mma-gemm':
            ctx['plan'] = self._gemm_plan(p)
        return ctx, block, shared, width

    def _gemm_plan(self, p, table=True):
        """The mma-gemm plan of a candidate's parameters (without the
        baked table where only the geometry is needed)."""
        if table:
            return gemm_plan(self.A, **p)
        return gemm_plan(np.zeros((self.info.m, self.info.k)), **p)

    def render(self, cand, dtype, kname='gimmik_mm'):
        src, meta = super().render(cand, dtype, kname)
        meta['compute_capability'] = cand.opts['compute_capability']
        p = cand.params
        if cand.family == 'mma-dense':
            meta['cols_per_block'] = MMA_N*p['nwarps']*p['ntile']
        if cand.family == 'cstream-mblock':
            meta['row_groups'] = p['groups']
        if cand.family == 'mma-gemm':
            P = self._gemm_plan(p, table=False)
            meta['cols_per_block'] = P.BN*P.tiles
            meta['row_groups'] = P.nmb
        if self.baked_n:   # the extra keys above change the grid
            meta['grid'] = self.launch_config(meta, self.n)[0]
        return src, meta


def mblock_groups(A, groups):
    """cstream-mblock: [(first row, cstream plan of the rows)] for
    `groups` contiguous row groups of similar work (empty ones dropped)."""
    out = []
    for r0, r1 in plans.balanced_row_groups(A, groups):
        if r1 > r0:
            out.append((r0, plans.cstream_plan(A[r0:r1])))
    return out


# -- mma-dense: the FP64 tensor-core bake -----------------------------------
#
# mma.sync.aligned.m8n8k4.row.col.f64 computes D(8x8) = A(8x4)*B(4x8) + C
# over one warp.  With g = lane/4 and t = lane%4 (PTX ISA, "Matrix fragments
# for mma.m8n8k4 with .f64 floating point type"):
#   A: lane holds A[g][t];  B: lane holds B[t][g];
#   C/D: lane holds C[g][2t] and C[g][2t + 1].
# Here the MMA's M is the rows of our A, its N the columns of the panels and
# its K the columns of our A.

MMA_M, MMA_N, MMA_K = 8, 8, 4

# mma-dense is offered for f64 operators at least this dense with at least
# this many multiply-adds per column.
MMA_MIN_MK = 32*32


def mma_worth_it(info):
    return info.density >= DENSE_DENSITY and info.m*info.k >= MMA_MIN_MK


def mma_accumulators(A, params):
    """f64 accumulators per thread: 2 per (m-tile, n-tile) of a warp."""
    nmt = -(-A.shape[0] // MMA_M)
    return 2*params['ntile']*-(-nmt // params['mwarps'])


def mma_tiles(A):
    """A padded with zeros to multiples of the MMA tile, as an array of
    tiles [mt][kt][8][4], and the mask of tiles with a non-zero."""
    m, k = A.shape
    mt, kt = -(-m // MMA_M), -(-k // MMA_K)
    pad = np.zeros((mt*MMA_M, kt*MMA_K))
    pad[:m, :k] = A
    tiles = pad.reshape(mt, MMA_M, kt, MMA_K).transpose(0, 2, 1, 3)
    return tiles, (tiles != 0).any(axis=(2, 3))


def mma_a_fragment(tile):
    """The 32 per-lane A values of one 8x4 tile: lane l holds
    tile[l//4][l%4]."""
    lanes = np.arange(32)
    return tile[lanes // 4, lanes % 4]


def mma_model(afrag, bfrag, cfrag):
    """NumPy model of one mma.m8n8k4 f64 on per-lane fragments: afrag and
    bfrag (32,), cfrag (32, 2); returns dfrag (32, 2)."""
    lanes = np.arange(32)
    a = np.zeros((MMA_M, MMA_K))
    b = np.zeros((MMA_K, MMA_N))
    c = np.zeros((MMA_M, MMA_N))
    a[lanes // 4, lanes % 4] = afrag
    b[lanes % 4, lanes // 4] = bfrag
    c[lanes // 4, 2*(lanes % 4)] = cfrag[:, 0]
    c[lanes // 4, 2*(lanes % 4) + 1] = cfrag[:, 1]
    d = a @ b + c
    return np.stack([d[lanes // 4, 2*(lanes % 4)],
                     d[lanes // 4, 2*(lanes % 4) + 1]], axis=1)


def mma_geometry(A, mwarps, nwarps, ntile, kstage):
    m, k = A.shape
    nthreads = WARP*mwarps*nwarps
    cols = MMA_N*nwarps*ntile
    rows = MMA_K*kstage
    return {'block': (nthreads, 1, 1), 'cols': cols, 'rows': rows,
            'stride': mma_row_stride(cols),
            'shared': 2*rows*mma_row_stride(cols)*8}


def mma_row_stride(cols):
    """Shared-memory row stride (doubles) of a B stage: the B fragment
    reads of a half warp (4 rows x 4 columns) hit 16 distinct bank pairs
    when the stride is 4 mod 16."""
    return cols + (4 - cols) % 16


@dataclass
class MmaPlan:
    """mma-dense: warp w = wy*nwarps + wx owns the mw m-tiles from wy*mw
    and the ntile n-tiles from wx*ntile of the block's columns.  B is
    staged in nstages k-stages of kstage k-tiles (rows beyond k are zero).
    frags[kt][mt] holds the 32 per-lane A values of tile (mt, kt); the
    m-tiles are padded with zero tiles to mwarps*mw."""
    mwarps: int
    nwarps: int
    ntile: int
    kstage: int
    nstages: int
    mw: int
    frags: np.ndarray
    cols: int
    rows: int
    stride: int


def mma_plan(A, mwarps, nwarps, ntile, kstage):
    tiles, mask = mma_tiles(A)
    nmt, nkt = mask.shape
    mw = -(-nmt // mwarps)
    nstages = -(-nkt // kstage)
    frags = np.zeros((nstages*kstage, mwarps*mw, 32))
    for mt in range(nmt):
        for kt in range(nkt):
            frags[kt, mt] = mma_a_fragment(tiles[mt, kt])
    g = mma_geometry(A, mwarps, nwarps, ntile, kstage)
    return MmaPlan(mwarps, nwarps, ntile, kstage, nstages, mw, frags,
                   g['cols'], g['rows'], g['stride'])


def mma_reference(plan, A, B):
    """Evaluate A @ B (B with plan.cols columns) the way the kernel does,
    one mma at a time on fragments, with the NumPy MMA model; for tests."""
    m, k = A.shape
    lanes = np.arange(32)
    Bp = np.zeros((plan.nstages*plan.rows, plan.cols))
    Bp[:k] = B
    C = np.zeros((plan.mwarps*plan.mw*MMA_M, plan.cols))
    for wy in range(plan.mwarps):
        for nt in range(plan.cols // MMA_N):
            acc = np.zeros((plan.mw, 32, 2))
            for kt in range(plan.nstages*plan.kstage):
                bfrag = Bp[kt*MMA_K + lanes % 4, nt*MMA_N + lanes // 4]
                for a in range(plan.mw):
                    acc[a] = mma_model(plan.frags[kt, wy*plan.mw + a],
                                       bfrag, acc[a])
            for a in range(plan.mw):
                rows = (wy*plan.mw + a)*MMA_M + lanes // 4
                C[rows, nt*MMA_N + 2*(lanes % 4)] = acc[a][:, 0]
                C[rows, nt*MMA_N + 2*(lanes % 4) + 1] = acc[a][:, 1]
    return C[:m]


# -- mma-gemm: 2-D block tiling on the FP64 tensor cores ---------------------
#
# A block computes a BM x BN tile of C: its m-block of A's rows (blockIdx.x
# modulo the m-block count, so the blocks sharing a B tile run together) and
# BN columns.  The k loop runs over stages of BK rows; each stage's slice of
# A (from a baked table) and of B is copied to shared memory with cp.async,
# nbuf stages deep.  Warp (wy, wx) of the mwarps x nwarps grid owns wm MMA
# m-tiles and wn 8-column n-tiles of the block's tile, with register
# accumulators.
#
# Fragment layouts (PTX ISA, "Matrix fragments for mma.m8n8k4 / m16n8k4 /
# m16n8k8 / m16n8k16" with .f64), g = lane/4, t = lane%4:
#   m8n8k4:   A: a0 = A[g][t];  B: b0 = B[t][g];  C: c_i = C[g][2t + i]
#   m16n8kK:  A: a_i = A[g + 8(i%2)][t + 4(i/2)], i < K/2;
#             B: b_i = B[t + 4i][g], i < K/4;
#             C: c_i = C[g + 8(i/2)][2t + i%2], i < 4.
# The m16n8k* shapes are sm_90 (PTX ISA 7.8).

GEMM_SHAPES = {'m8n8k4': (8, 4), 'm16n8k4': (16, 4), 'm16n8k8': (16, 8),
               'm16n8k16': (16, 16)}
GEMM_SM90 = frozenset({'m16n8k4', 'm16n8k8', 'm16n8k16'})


def gemm_coords(shape):
    """Per-lane (row, column) of each fragment value of an MMA shape:
    three int arrays (32, na, 2), (32, nb, 2), (32, nc, 2) for A, B, C."""
    mt, kt = GEMM_SHAPES[shape]
    lanes = np.arange(32)
    g, t = lanes // 4, lanes % 4
    if mt == 8:
        a = [(g, t)]
        c = [(g, 2*t), (g, 2*t + 1)]
    else:
        a = [(g + 8*(i % 2), t + 4*(i // 2)) for i in range(kt // 2)]
        c = [(g + 8*(i // 2), 2*t + i % 2) for i in range(4)]
    b = [(t + 4*i, g) for i in range(kt // 4)]

    def pack(rc):
        return np.stack([np.stack(x, axis=1) for x in rc], axis=1)
    return pack(a), pack(b), pack(c)


def gemm_model(shape, afrag, bfrag, cfrag):
    """NumPy model of one f64 mma of `shape` on per-lane fragments afrag
    (32, na), bfrag (32, nb), cfrag (32, nc); returns dfrag (32, nc)."""
    mt, kt = GEMM_SHAPES[shape]
    ac, bc, cc = gemm_coords(shape)
    a = np.zeros((mt, kt))
    b = np.zeros((kt, MMA_N))
    c = np.zeros((mt, MMA_N))
    a[ac[..., 0], ac[..., 1]] = afrag
    b[bc[..., 0], bc[..., 1]] = bfrag
    c[cc[..., 0], cc[..., 1]] = cfrag
    d = a @ b + c
    return d[cc[..., 0], cc[..., 1]]


@dataclass
class GemmPlan:
    """mma-gemm: see the comment above.  The k range is cut in stages of BK
    columns of A; m-block mb runs only its cnt[mb] stages where its BM x BK
    slab of A has a non-zero, the stage indices kidx[mb][:cnt[mb]] (full:
    every m-block runs every stage).  table is A baked as
    [m-block][slot][wy][k-step][m-tile][pair j][lane][v] (v = 2 values,
    1 for m8n8k4): a slot's slice of an m-block is contiguous (one linear
    cp.async copy) and each warp-wide fragment load reads 32 consecutive
    v-vectors (no bank conflicts).  Rows beyond m and columns beyond k are
    zero."""
    shape: str
    MT: int
    KT: int
    na: int
    nb: int
    nc: int
    v: int
    mwarps: int
    nwarps: int
    wm: int
    wn: int
    kstage: int
    nbuf: int
    nmb: int
    nstages: int
    BM: int
    BN: int
    BK: int
    stride: int
    skip: bool
    cpre: bool
    tiles: int
    nslot: int
    cnt: np.ndarray
    kidx: np.ndarray
    table: np.ndarray

    @property
    def nthreads(self):
        return WARP*self.mwarps*self.nwarps

    @property
    def shared(self):
        return 8*self.nbuf*(self.BM*self.BK + self.BK*self.stride)

    @property
    def full(self):
        return bool((self.cnt == self.nstages).all())

    def a_offset(self, s, wy, ks, mt, j):
        """Offset in one m-block's table (and, less s*BM*BK, in a shared
        stage) of the fragment vectors j of lane 0 for slot s, warp row wy,
        k-step ks and m-tile mt; lane l's vector is at + l*v."""
        npair = self.na // self.v
        return (s*self.BM*self.BK
                + (((wy*self.kstage + ks)*self.wm + mt)*npair + j)
                * 32*self.v)


def gemm_geometry(m, k, shape, mwarps, nwarps, wm, wn, kstage, nbuf):
    """(effective wm, m-blocks, stages, BM, BN, BK, B row stride): wm is
    cut down to spread A's m-tiles evenly over the fewest m-blocks."""
    mt, kt = GEMM_SHAPES[shape]
    nmt = -(-m // mt)
    nmb = -(-nmt // (mwarps*wm))
    wm = -(-nmt // (nmb*mwarps))
    BK = kt*kstage
    BN = MMA_N*nwarps*wn
    return (wm, nmb, -(-k // BK), mwarps*wm*mt, BN, BK, mma_row_stride(BN))


def gemm_plan(A, shape, mwarps, nwarps, wm, wn, kstage, nbuf, skip=False,
              cpre=False, tiles=1):
    """The mma-gemm plan: skip, run only the stages where an m-block's
    slab of A has a non-zero; cpre, start the accumulators from beta*C
    (read before the k loop) instead of adding it at the end; tiles, the
    column tiles of BN a block computes in turn."""
    m, k = A.shape
    MT, KT = GEMM_SHAPES[shape]
    wm, nmb, nst, BM, BN, BK, S = gemm_geometry(m, k, shape, mwarps, nwarps,
                                                wm, wn, kstage, nbuf)
    ac, bc, cc = gemm_coords(shape)
    na, nb, nc = ac.shape[1], bc.shape[1], cc.shape[1]
    v = min(na, 2)
    pad = np.zeros((nmb*BM, nst*BK))
    pad[:m, :k] = A
    # the stages each m-block needs: those where its slab has a non-zero
    live = (pad != 0).reshape(nmb, BM, nst, BK).any(axis=(1, 3))
    if not skip:
        live[...] = True
    cnt = live.sum(axis=1)
    nslot = max(1, int(cnt.max()))
    kidx = np.zeros((nmb, nslot), dtype=np.int64)
    for mb in range(nmb):
        kidx[mb, :cnt[mb]] = np.flatnonzero(live[mb])
    # [mb, wy, mt, r, s, ks, c] -> [mb, s, wy, ks, mt, r, c]
    T = pad.reshape(nmb, mwarps, wm, MT, nst, kstage, KT) \
        .transpose(0, 4, 1, 5, 2, 3, 6)
    F = T[..., ac[..., 0], ac[..., 1]]          # [..., lane, na]
    F = F.reshape(F.shape[:-1] + (na // v, v))  # [..., lane, j, v]
    F = np.swapaxes(F, -3, -2)                  # [..., j, lane, v]
    # keep each m-block's live stages, in order, in its slots
    Fc = np.zeros((nmb, nslot) + F.shape[2:])
    for mb in range(nmb):
        Fc[mb, :cnt[mb]] = F[mb, kidx[mb, :cnt[mb]]]
    return GemmPlan(shape, MT, KT, na, nb, nc, v, mwarps, nwarps, wm, wn,
                    kstage, nbuf, nmb, nst, BM, BN, BK, S, skip, cpre, tiles,
                    nslot, cnt, kidx,
                    Fc.reshape(-1))


def gemm_reference(plan, A, B):
    """Evaluate A @ B (B of any width) the way the mma-gemm kernel does: per
    block, warp, stage and k-step, fragments read from plan.table and from B
    at the kernel's offsets, one NumPy-modelled mma at a time; for tests."""
    P = plan
    m, k = A.shape
    n = B.shape[1]
    lanes = np.arange(32)
    g, t = lanes // 4, lanes % 4
    nnb = -(-n // P.BN)
    Bp = np.zeros((P.nstages*P.BK, nnb*P.BN))
    Bp[:k, :n] = B
    _, _, cc = gemm_coords(P.shape)
    C = np.zeros((P.nmb*P.BM, nnb*P.BN))
    per_mb = P.nslot*P.BM*P.BK
    for mb in range(P.nmb):
        tab = P.table[mb*per_mb:(mb + 1)*per_mb]
        for nbk in range(nnb):
            col0 = nbk*P.BN
            for wy in range(P.mwarps):
                for wx in range(P.nwarps):
                    acc = np.zeros((P.wm, P.wn, 32, P.nc))
                    for s in range(P.cnt[mb]):
                        kst = P.kidx[mb, s]
                        for ks in range(P.kstage):
                            af = [np.concatenate(
                                [tab[P.a_offset(s, wy, ks, mt, j)
                                     + lanes[:, None]*P.v
                                     + np.arange(P.v)]
                                 for j in range(P.na // P.v)], axis=1)
                                for mt in range(P.wm)]
                            row = kst*P.BK + ks*P.KT + t
                            for nt in range(P.wn):
                                col = col0 + (wx*P.wn + nt)*MMA_N + g
                                bf = np.stack([Bp[row + 4*i, col]
                                               for i in range(P.nb)], axis=1)
                                for mt in range(P.wm):
                                    acc[mt, nt] = gemm_model(
                                        P.shape, af[mt], bf, acc[mt, nt])
                    for mt in range(P.wm):
                        r0 = mb*P.BM + (wy*P.wm + mt)*P.MT
                        for nt in range(P.wn):
                            c0 = col0 + (wx*P.wn + nt)*MMA_N
                            C[r0 + cc[..., 0], c0 + cc[..., 1]] = acc[mt, nt]
    return C[:m, :n]
