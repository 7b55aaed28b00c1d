"""mma-gemm (CUDA, f64): a GEMM with 2-D block tiling on the FP64 tensor cores
(m8n8k4, Hopper's m16n8k4/k8/k16), zero slabs of A skipped; `blocks` rows
are dropped for one full m-block with k > ONE_BLOCK_MAX_K, where ptxas
spilled the capped 64 x 64 tile (cuda-spill-audit.csv)."""

import numpy as np

from gimmik import cost
from gimmik.analysis import reordered
from gimmik.fragments import mma
from gimmik.families import Family, Geometry

# Registers beyond the accumulators and two k-steps' fragments
GEMM_REGISTER_MARGIN = 32

_TILING = ('shape', 'mwarps', 'nwarps', 'wm', 'wn', 'kstage', 'nbuf')

# the longest k a row naming blocks is offered for where A fills one
# m-block (see the module docstring)
ONE_BLOCK_MAX_K = 40


class MmaGemm(Family):
    name = 'mma-gemm'
    arch_specific = True
    max_registers = {'cuda': 232}
    # evict-first C where the row names no store: the dense operators' 1.2x
    # over the vendor on 512 MiB panels was measured with it
    c_store = 'cs'

    @classmethod
    def adapt(cls, mm, params):
        """Without the options that change nothing for this operator; None
        for a `blocks` row ptxas would spill."""
        p = dict(params)
        if p.get('blocks'):
            wm, nmb = mma.gemm_geometry(mm.info.m, mm.info.k,
                                        *[p[k] for k in _TILING])[:2]
            if nmb == 1 and wm == p['wm'] and mm.info.k > ONE_BLOCK_MAX_K:
                return None
        if p.get('preload_c') and mm.beta == 0:
            del p['preload_c']
        tiling = {k: p[k] for k in _TILING}
        A = mm.A
        if p.get('compact'):
            p.pop('reorder', None)
            p.pop('skip', None)
            return p if mma.gemm_compact_worth_it(A, **tiling) else None
        if p.get('reorder'):
            order = mma.gemm_order(A, **tiling)
            if order is None:
                del p['reorder']
            else:
                A = reordered(A, order.rows, order.cols)
        if p.get('skip') and mma.gemm_live_stages(A, **tiling).all():
            del p['skip']
        return p

    def tiling(self):
        """(effective wm, m-blocks, stages, BM, BN, BK)."""
        p = self.params
        return mma.gemm_geometry(self.info.m, self.info.k,
                                 *[p[k] for k in _TILING])

    def geometry(self):
        p = self.params
        _, nmb, _, BM, BN, BK = self.tiling()
        nthreads = mma.WARP*p['mwarps']*p['nwarps']
        return Geometry((nthreads, 1, 1), 8*p['nbuf']*(BM + BN)*BK, 1,
                        cols_per_block=BN*p.get('tiles', 1), row_groups=nmb)

    def build_plan(self):
        p = {k: v for k, v in self.params.items() if k not in ('blocks', 'st')}
        late = mma.gemm_issue_late(self.info.m, self.info.k, self.mm.beta,
                                   p['kstage'], p['nbuf'])
        return mma.gemm_plan(self.A, late_issue=late, **p)

    def registers(self):
        # accumulators and two k-steps' A and B fragments (f64: the next
        # k-step's load while the mmas of one issue)
        wm, wn = self.tiling()[0], self.params['wn']
        na, nb, nc = mma.gemm_fragment_sizes(self.params['shape'])
        return GEMM_REGISTER_MARGIN + 2*(wm*wn*nc + 2*(wm*na + wn*nb))

    def work(self):
        p = self.params
        _, nmb, _, BM, BN, BK = self.tiling()
        live = self.plan.cnt
        live_rows = np.minimum(live*BK, self.info.k)
        stage = (p['nbuf'] - 1)*BK*(BM + BN)*self.itemsize
        return cost.gemm_work(self, nmb, live_rows, BM, BK, stage,
                              BM*BK*float(np.mean(live))*self.itemsize,
                              depth=p['nbuf'] - 1)
