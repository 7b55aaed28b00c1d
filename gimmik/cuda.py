"""CUDA generator for NVIDIA GPUs (Ampere sm_80 and later; Hopper sm_90): the
HIP streaming families for a 32-wide warp, with C stored cached in L2 (the
next kernel reads it), and mma-gemm on the FP64 tensor cores."""

import numpy as np

from gimmik.analysis import DENSE_DENSITY, sparse_gemm_worth_it
from gimmik.base import MatMul, Row, check_table
from gimmik.families.bstream import Bstream
from gimmik.families.bstream_mgroup import BstreamMgroup
from gimmik.families.bstream_msplit import BstreamMsplit
from gimmik.families.bstream_warprows import BstreamWarpRows
from gimmik.families.cstream import Cstream
from gimmik.families.cstream_kparts import CstreamKparts
from gimmik.families.cstream_ksplit import CstreamKsplit
from gimmik.families.cstream_mblock import (CstreamMblock, group_terms,
                                             grouped)
from gimmik.families.mma_gemm import MmaGemm
from gimmik.fragments.mma import gemm_compute_bound
from gimmik.order import order_candidates, panels_fit_l2
from gimmik.targets import ARCHES, CUDA

# The launch bounds never cap a thread below this many registers (the
# estimates are rough; ptxas takes what it needs below the cap).
MIN_REGISTER_CAP = 168

# The launch bounds: a candidate whose family's free_registers is at least its
# register estimate gets no minimum of blocks per SM on sm_90
# (gimmik.families.FREE_REGISTER_ESTIMATE says why); the others ask for as many
# as the register budget allows, or as the row names

# Unrolled kernels holding their values in registers whose code is long (at
# least LONG_KERNEL_TERMS multiply-adds a thread: Family.long_kernel, the
# families' register_resident and thread_terms) need up to nearly three times
# their estimate, as ptxas hoists loads: budgeted LONG_REGISTER_FACTOR times it
# (cuda-spill-audit*.csv)
LONG_KERNEL_TERMS = 800
LONG_REGISTER_FACTOR = 2.75

# SHARED_ROWS (mblock-s*, mblock-p*): ptxas hoists loads across a group's rows,
# so beta 0 and groups under LONG_KERNEL_TERMS only, budgeted as long kernels

# 'cg' keeps C in L2 for the kernel that reads it next (docs/in-context.md)
C_STORE = 'cg'


def _sparse_gemm(tiling):
    """A sparse mma-gemm row's parameters (gate gemmsparse): slabs skipped,
    A reordered on the transposed tiles (cuda-h100-context-reorder*.csv)."""
    p = dict(tiling, skip=True, preload_c=True)
    if tiling['shape'].endswith('t'):
        p['reorder'] = True
    return p


# The CUDA candidate table (gimmik.base.Row), ordered by gimmik.order
CANDIDATES = [
    # mma-gemm: the H100's winning tiles (cuda-h100-gemm-transposed.csv);
    # blocks=4 holds a tile to four blocks an SM (cuda-h100-gemm-blocks*)
    *[Row(MmaGemm, dict(p, skip=True, preload_c=True), gates)
      for p, gates in [
        (dict(shape='m16n8k4t', mwarps=2, nwarps=2, wm=4, wn=2, kstage=2,
              nbuf=6, blocks=4), 'mma90 w2'),
        (dict(shape='m16n8k4t', mwarps=2, nwarps=2, wm=4, wn=2, kstage=2,
              nbuf=6), 'mma90 w2'),
        (dict(shape='m16n8k4t', mwarps=2, nwarps=2, wm=8, wn=2, kstage=2,
              nbuf=4), 'mma90 w2'),
        (dict(shape='m16n8k8t', mwarps=2, nwarps=2, wm=4, wn=2, kstage=2,
              nbuf=3), 'mma90 w2'),
        (dict(shape='m16n8k4t', mwarps=4, nwarps=2, wm=2, wn=2, kstage=2,
              nbuf=6), 'mma90 w2'),
        (dict(shape='m16n8k4t', mwarps=2, nwarps=2, wm=4, wn=2, kstage=4,
              nbuf=3), 'mma90 w2'),
        (dict(shape='m16n8k8t', mwarps=2, nwarps=1, wm=4, wn=2, kstage=2,
              nbuf=4), 'mma90 w2'),
        (dict(shape='m16n8k4', mwarps=2, nwarps=2, wm=2, wn=4, kstage=2,
              nbuf=6), 'mma90 w2'),
        (dict(shape='m16n8k4', mwarps=2, nwarps=2, wm=2, wn=4, kstage=4,
              nbuf=3), 'mma90 w2'),
        (dict(shape='m16n8k4', mwarps=4, nwarps=2, wm=2, wn=4, kstage=2,
              nbuf=4), 'mma90 w2'),
        (dict(shape='m16n8k4', mwarps=3, nwarps=2, wm=3, wn=4, kstage=2,
              nbuf=3), 'mma90 w2'),
        (dict(shape='m8n8k4', mwarps=2, nwarps=2, wm=4, wn=4, kstage=2,
              nbuf=3), 'mma w2'),
        (dict(shape='m8n8k4', mwarps=4, nwarps=2, wm=4, wn=4, kstage=2,
              nbuf=3), 'mma w2')]],
    Row(Cstream, dict(width=2, ld='nc'), 'w2 stream'),
    Row(Bstream, dict(width=2, ld='cs'), 'w2 stream'),
    Row(Cstream, dict(width=1, ld='nc'), 'stream'),
    Row(Bstream, dict(width=1, ld='cs'), 'stream'),
    Row(BstreamMsplit,
        dict(width=2, msplit=2, bsz=16, ld='cs'), 'w2 stream'),
    Row(BstreamMsplit,
        dict(width=2, msplit=4, bsz=16, ld='cs'), 'w2 stream'),
    Row(BstreamMsplit,
        dict(width=1, msplit=4, bsz=16, ld='cs'), 'stream'),
    *[Row(BstreamMsplit,
          dict(width=1, msplit=ms, bsz=16, ld='cs'), 'stream')
      for ms in (8, 16)],
    Row(BstreamMsplit,
        dict(width=1, msplit=32, bsz=16, ld='cs'), 'stream'),
    Row(BstreamMsplit,
        dict(width=1, msplit=8, bsz=32, ld='cs'), 'stream'),
    Row(BstreamMsplit,
        dict(width=1, msplit=16, bsz=32, ld='cs'), 'stream'),
    Row(Cstream, dict(width=2, ld='cs'), 'w2 stream'),
    Row(BstreamWarpRows,
        dict(msplit=4, bsz=24, ld='cg', st='cg'), 'stream'),
    Row(BstreamWarpRows,
        dict(msplit=8, bsz=24, ld='cg', st='cg'), 'bigm stream'),
    Row(Cstream, dict(width=1, ld='reload'),
        'bigk stream'),
    *[Row(CstreamMblock, dict(width=1, groups=g, ld='nc'),
          'bigm stream') for g in (8, 16, 32, 64, 128)],
    *[Row(CstreamMblock, dict(width=2, groups=g, ld='nc'),
          'w2 bigm stream') for g in (16, 32)],
    # the rows grouped by the B rows they share, at most 32, 48, 64 a group
    # (SHARED_ROWS)
    *[Row(CstreamMblock, dict(width=1, shared=u, ld='nc'),
          'bigm stream beta0') for u in (32, 48, 64)],
    # partitioned groups, two a block sharing B rows through L1
    # (pyfr-walk-h100-part22.csv)
    *[Row(CstreamMblock,
          dict(width=1, part=r, stack=2, ld='nc'), 'bigm stream beta0')
      for r in (22, 16)],
    Row(CstreamKsplit, dict(ksplit=2), 'stream'),
    Row(CstreamKsplit, dict(ksplit=4), 'stream'),
    # k split into parts; blocks=4 let ptxas hoist loads, faster (sm_90 only)
    *[Row(CstreamKparts,
          dict(parts=3, groups=g, shared=32, warps=w, blocks=4),
          'stream sm90')
      for g, w in ((2, 2), (1, 4), (1, 8), (2, 4))],
    # the k-split in passes of rows (B loaded at first use): per thread a
    # pass's sums and the B values between their first and last use
    Row(CstreamKsplit, dict(ksplit=2, chunk=24), 'stream'),
    Row(CstreamKsplit, dict(ksplit=4, chunk=16), 'stream'),
    # the register-bounded row-group family of the HIP table, two wave64
    # shapes in warps (the twin of the HIP rows, timed beside the CUDA
    # families)
    Row(BstreamMgroup,
        dict(msplit=4, rows=16, bsz=64, nbuf=1), 'bigm stream'),
    Row(BstreamMgroup,
        dict(msplit=8, rows=8, bsz=64, nbuf=1), 'bigm stream'),
    # the sparser big operators (prisms): the tensor cores skip A's zero
    # slabs
    *[Row(MmaGemm, _sparse_gemm(p), 'gemmsparse')
      for p in [
        dict(shape='m16n8k4t', mwarps=2, nwarps=2, wm=4, wn=2, kstage=2,
              nbuf=6),
        dict(shape='m16n8k4', mwarps=2, nwarps=2, wm=4, wn=4, kstage=2,
              nbuf=3),
        dict(shape='m16n8k4', mwarps=4, nwarps=2, wm=2, wn=4, kstage=2,
              nbuf=4),
        dict(shape='m16n8k4', mwarps=2, nwarps=4, wm=4, wn=4, kstage=2,
              nbuf=3),
        dict(shape='m16n8k4', mwarps=2, nwarps=2, wm=2, wn=4, kstage=4,
              nbuf=3),
        dict(shape='m16n8k4t', mwarps=2, nwarps=2, wm=2, wn=2, kstage=2,
              nbuf=6)]],
    # the same two transposed tiles, compact (each m-block's own used columns)
    *[Row(MmaGemm, dict(p, preload_c=True, compact=True), 'gemmsparse')
      for p in [
        dict(shape='m16n8k4t', mwarps=2, nwarps=2, wm=4, wn=2, kstage=2,
              nbuf=6),
        dict(shape='m16n8k4t', mwarps=2, nwarps=2, wm=2, wn=2, kstage=2,
              nbuf=6)]],
]

# Where mma-gemm is offered (gate mma), the unrolled streaming
# families are not for operators with more non-zeros than this: they lose
# to the tensor cores there and take minutes each to compile.
MAX_STREAM_NNZ_DENSE = 8192

# gate gemmsparse: mma-gemm for prism-like sparse A, and for memory-bound beta
# != 0, where C moves in whole lines (cuda-h100-gemm-sparse-beta*)

# Where it is (gate gemmsparse), the unrolled streaming families are not for
# operators with more non-zeros than this: far slower than mma-gemm and slow
# to compile (cuda-h100-p7*)
MAX_STREAM_NNZ_SPARSE = 16384

# With n baked, operators with at least BAKED_OFFER_MIN_NNZ non-zeros are
# offered no two-columns-a-thread variant (twice the unrolled body: 2-3x
# the NVRTC time of its one-column twin) and only their first BAKED_OFFER
# candidates, dense ones (density >= DENSE_DENSITY) their first
# BAKED_OFFER_DENSE, only tensor-core tiles where they have BAKED_MMA_ONLY_NNZ
# non-zeros or more, as PyFR compiles every candidate it times at start-up
# (pyfr-startup-analysis.md, pyfr-e2e-h100-startup.csv)
BAKED_OFFER = 3
BAKED_OFFER_DENSE = 2
# ... and where those are of one family the best of another, up to this many
# non-zeros: on 5 of 36 operators it was faster hot and in context
# (cuda-h200-context-cut2.csv); beyond, the warp-rows it adds spilled
# (cuda-spill-audit-baked.csv: 7056 and 12288 non-zeros)
BAKED_SECOND_FAMILY_MAX_NNZ = 6144
BAKED_OFFER_MIN_NNZ = 512
BAKED_MMA_ONLY_NNZ = 1500

# Evict-first B loads (ld 'cs': the bstream, m-split bstream and cstream-cs
# rows) keep L2 for C where the B panel is about one to two L2s; far larger,
# nothing stays, and baked n loads B plainly
# (cuda-h100-context-ldtwin*-candidates.csv)
PLAIN_B_MIN_VALUES = 25*2**20

# mma-gemm is f64 only: the bytes of a C element; the L2 its stores judge
# C's panel against (the estimate's device: sm_90's 50 MiB, H100 and H200)
MMA_ITEMSIZE = 8
CUDA_L2 = ARCHES[CUDA.default_arch].l2_size

# The most used B rows an m-split stages in one chunk at run-time n
# (CUDAMatMul._adapt).
RUNTIME_ONE_CHUNK = 24


GATES = ('w2', 'bigk', 'bigm', 'stream', 'sm90', 'mma', 'mma90',
         'gemmsparse', 'beta0')


def _gates(mm, dtype, cc):
    """The named conditions a candidate row may require (GATES)."""
    w2 = mm.width2_ok()
    info = mm.info
    mma_offered = (dtype == np.float64 and cc >= (8, 0)
                   and mma_worth_it(info) and w2)
    gemm_sparse = (dtype == np.float64 and cc >= (9, 0) and w2
                   and not mma_worth_it(info)
                   and (sparse_gemm_worth_it(info)
                        # not under a client's grid: the tile walk
                        # costs more (cuda-h200-grid-rules.csv) than this
                        # branch gains (at most 1.045x, baked n)
                        or mm.beta != 0 and not mm.runtime_client_grid
                        and not panels_fit_l2(mm)
                        and not gemm_compute_bound(info.m, info.k, mm.beta)))
    return {
        'w2': w2,
        'bigk': len(info.bix) > 64,
        'bigm': info.m > 64,
        'stream': not ((mma_offered and info.nnz > MAX_STREAM_NNZ_DENSE)
                       or (gemm_sparse
                           and info.nnz > MAX_STREAM_NNZ_SPARSE)),
        'sm90': cc >= (9, 0),
        'mma': mma_offered,
        'mma90': mma_offered and cc >= (9, 0),
        'gemmsparse': gemm_sparse,
        'beta0': mm.beta == 0,
    }


class CUDAMatMul(MatMul):
    platform = 'cuda'
    target = CUDA
    table = CANDIDATES
    gate_names = GATES

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
        out = self._from_table(
            self.table, _gates(self, dtype, compute_capability), dtype,
            {'compute_capability': compute_capability}, adapt=self._adapt)
        return order_candidates(self, out, dtype)

    def _adapt(self, row, params):
        # cstream-mblock's groups by shared B rows or partitioned: groups of
        # fewer than LONG_KERNEL_TERMS non-zeros (SHARED_ROWS; beta 0 only:
        # their rows' gate beta0, checked before the groups are found)
        if row.family is CstreamMblock and grouped(params) and max(
                group_terms(self.A, params)) >= LONG_KERNEL_TERMS:
            return None
        # where the tiles are walked in a loop (runtime_client_grid: the twin
        # of PyFR main's HIP launch; gpu-base.mako, tiles_open), its live
        # ranges spilled the mma-gemm tile held to 128 registers by a minimum
        # of blocks (ptxas, sm_90): no minimum there
        if (self.runtime_client_grid and 'blocks' in params
                and row.family in (MmaGemm, CstreamKparts)):
            params = {k: v for k, v in params.items() if k != 'blocks'}
        # at run-time n an m-split stages B's used rows, up to
        # RUNTIME_ONE_CHUNK of them, in one chunk: one barrier a tile, not two
        # (cuda-h200-context-runtime-n-plainb.csv)
        nused = len(self.info.bix)
        if (self.runtime_client_grid and row.family is BstreamMsplit
                and params.get('width', 1) == 1
                and params['bsz'] < nused <= RUNTIME_ONE_CHUNK):
            params = dict(params, bsz=nused)
        # the tensor-core tiles keep C in L2 where the C panel at baked n fits
        # it: the next kernel reads C there (cuda-h200-context-first8*.csv);
        # beyond, and with n at run time, evict-first as measured
        if (row.family is MmaGemm and self.n is not None
                and self.info.m*self.n*MMA_ITEMSIZE <= CUDA_L2):
            params = dict(params, st='cg')
        # evict-first B loads become plain ones on panels of many L2s
        # (PLAIN_B_MIN_VALUES), and bstream's at run-time n, where
        # evict-first won the client's hot walk
        # (cuda-h200-context-runtime-n-probe-candidates.csv)
        if params.get('ld') == 'cs' and (
                self.n is not None and nused*self.n > PLAIN_B_MIN_VALUES
                or row.family is Bstream and self.runtime_client_grid):
            return dict(params, ld='plain')
        return params

    def offered(self, cands):
        # With n baked (PyFR's call, which compiles every candidate it
        # times), operators whose unrolled kernels take seconds to compile
        # are offered fewer (see BAKED_OFFER)
        info = self.info
        if not (self.baked_n and info.nnz >= BAKED_OFFER_MIN_NNZ):
            return cands
        cands = [c for c in cands if c.params.get('width', 1) != 2]
        if info.density < DENSE_DENSITY:
            # first BAKED_OFFER of one family: and the best of another, where
            # the estimate errs most (cuda-h200-context-cut2.csv)
            head = cands[:BAKED_OFFER]
            fams = {c.family for c in head}
            if len(fams) == 1 and info.nnz <= BAKED_SECOND_FAMILY_MAX_NNZ:
                head += [c for c in cands if c.family not in fams][:1]
            return head
        mma = [c for c in cands if c.family == MmaGemm.name]
        if mma and info.nnz >= BAKED_MMA_ONLY_NNZ:
            cands = mma
        return cands[:BAKED_OFFER_DENSE]

    def registers_fit(self, kern):
        # the family's terms a thread (f64), its limit, at most 64K
        # registers a block, and for long unrolled kernels what
        # LONG_REGISTER_FACTOR times the estimate leaves of a thread's 255
        terms = kern.max_thread_terms.get('cuda')
        if (terms is not None and kern.itemsize == 8 and kern.thread_terms()
                * kern.params.get('width', 1) > terms):
            return False
        loads = kern.max_thread_loads.get('cuda')
        if (loads is not None and kern.itemsize == 8
                and kern.thread_loads() > loads):
            return False
        est = kern.registers()
        if est is None or kern.terms_bound():
            return True
        block = kern.geometry().block
        cap = self.target.unit_registers // (block[0]*block[1]*block[2])
        if est*kern.register_factor.get('cuda', 1) > min(
                cap, self.target.thread_registers):
            return False
        limit = kern.register_limit()
        if kern.long_kernel(LONG_KERNEL_TERMS):
            cap = min(cap, int(self.target.thread_registers
                               / LONG_REGISTER_FACTOR))
        return est <= (cap if limit is None else min(limit, cap))

    def _platform_context(self, kern):
        # Without a second launch bound ptxas (CUDA 13, sm_90) may cap the
        # registers low enough to spill (64 for 128 threads, 32 for 1024); ask
        # for as many blocks per SM as the budget allows
        st = kern.params.get('st', kern.c_store or C_STORE)
        # C's store intrinsic: 'cg' caches in L2 only, else evict-first
        ctx = {'ld': kern.params.get('ld', 'nc'),
               'st_fn': '__stcg' if st == 'cg' else '__stcs',
               'minblocks': None}
        block = kern.geometry().block
        nthreads = block[0]*block[1]*block[2]
        est = kern.registers()
        sm90 = tuple(kern.opts.get('compute_capability', (9, 0))) >= (9, 0)
        hoist = kern.hoisted_bound
        if (sm90 and hoist and kern.itemsize == 8
                and (kern.recurring_values() or 0) >= hoist[0]):
            ctx['minblocks'] = hoist[1]
            return ctx
        if (sm90 and kern.long_min_blocks
                and kern.thread_terms() >= LONG_KERNEL_TERMS):
            ctx['minblocks'] = kern.long_min_blocks
            return ctx
        free = kern.free_registers
        if sm90 and free is not None and (est is None or est <= free):
            return ctx
        # the unit's shared bytes are an sm_90 SM's (rows naming blocks are
        # sm_90 rows)
        blocks = kern.launch_blocks(self.target.unit_shared,
                                    self.target.shared_reserved)
        if blocks:
            ctx['minblocks'] = blocks
            return ctx
        if est is None:
            return ctx
        regs = max(register_budget(
            est, LONG_REGISTER_FACTOR if kern.long_kernel(LONG_KERNEL_TERMS)
            else 1.5),
                   MIN_REGISTER_CAP)
        ctx['minblocks'] = max(1, min(2048 // nthreads,
                                      self.target.unit_registers
                                      // (nthreads*regs)))
        return ctx

    def _platform_meta(self, cand):
        return {'compute_capability': cand.opts['compute_capability']}


def register_budget(estimate, factor=1.5):
    """Registers per thread to let ptxas use: an estimate times factor (a
    half more by default), rounded up to a multiple of 8."""
    return -(-int(estimate*factor) // 8)*8


# mma-gemm is offered (gate mma) for f64 operators at least this
# dense with at least this many multiply-adds per column.
MMA_MIN_MK = 32*32


def mma_worth_it(info):
    return info.density >= DENSE_DENSITY and info.m*info.k >= MMA_MIN_MK


check_table(CANDIDATES, GATES, 'cuda')
