"""CUDA generator for NVIDIA GPUs (Ampere sm_80 and later; Hopper sm_90).

The streaming families are the HIP ones for a 32-wide warp, with read-only
(`ld.global.nc`) or evict-first (`ld.global.cs`) loads of B and evict-first
stores of C.  The dense family `mma-dense` runs f64 operators on the FP64
tensor cores with `mma.sync.aligned.m8n8k4`; its fragment bake (plain
Python, unit-tested against a NumPy model of the MMA) is at the end of this
module.
"""

from dataclasses import dataclass

import numpy as np

from gimmik.base import Candidate, MatMul
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
MAX_EST_REGISTERS = {'cstream-mblock': 200, 'mma-dense': 200}
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
]

# Where mma-dense is offered, the unrolled streaming families are not for
# operators with more non-zeros than this: they lose to the tensor cores
# there and take minutes each to compile.
MAX_STREAM_NNZ_DENSE = 8192

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
        gates = _gates(self, dtype, compute_capability)
        out = []
        for family, params, need in CANDIDATES:
            if not all(gates[g] for g in need.split()):
                continue
            cand = Candidate(family, params,
                             {'compute_capability': compute_capability})
            if self._fits(cand, dtype) and cand not in out:
                out.append(cand)
        return out

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
        return ctx, block, shared, width

    def render(self, cand, dtype, kname='gimmik_mm'):
        src, meta = super().render(cand, dtype, kname)
        meta['compute_capability'] = cand.opts['compute_capability']
        p = cand.params
        if cand.family == 'mma-dense':
            meta['cols_per_block'] = MMA_N*p['nwarps']*p['ntile']
        if cand.family == 'cstream-mblock':
            meta['row_groups'] = p['groups']
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
