"""HIP generator for AMD CDNA GPUs (MI250X gfx90a, MI300X gfx942, MI355X
gfx950)."""

import re

import numpy as np

from gimmik.base import MAX_SHARED, Candidate, MatMul
from gimmik import plans

# gfx arch names (with optional feature suffixes such as :sramecc+:xnack-)
_ARCH = re.compile(r'gfx[0-9a-f]{3,4}(:[a-z0-9_-]+[+-])*\Z')

# The HIP candidate table.  Each row: family, parameters, and the condition
# (on the generator and the requested dtype/arch) under which it is offered.
# Order is the order of offering: PyFR only times the first few.
CANDIDATES = [
    # family            parameters                                 gate
    ('bstream-msplit', dict(width=2, msplit=2, bsz=16, ntload=True), 'w2'),
    ('bstream-msplit', dict(width=1, msplit=2, bsz=16, ntload=True), ''),
    ('bstream-msplit', dict(width=2, msplit=4, bsz=16, ntload=True), 'w2'),
    ('bstream-msplit', dict(width=2, msplit=2, bsz=16, ntload=True,
                            preload_c=True), 'w2 beta'),
    ('bstream-msplit', dict(width=1, msplit=4, bsz=16, ntload=False), ''),
    ('bstream', dict(width=2), 'w2'),
    ('bstream', dict(width=1), ''),
    ('cstream', dict(width=2), 'w2'),
    ('cstream', dict(width=1), ''),
    ('cstream-ksplit', dict(ksplit=2), ''),
    ('cstream-ksplit', dict(ksplit=4), ''),
    ('cstream-ksplit', dict(ksplit=2, preload_c=True), 'beta'),
    ('bstream-msplit', dict(width=1, msplit=2, bsz=16, ntload=False,
                            preload_c=True), 'beta'),
]


def _gates(mm, dtype, arch):
    """The named conditions a candidate row may require."""
    return {
        'w2': mm.width2_ok(),
        'beta': mm.beta != 0,
        'f64': dtype == np.float64,
    }


class HIPMatMul(MatMul):
    platform = 'hip'

    def _check_opts(self, gcn_arch='gfx942', warp_size=64):
        if not isinstance(gcn_arch, str) or not _ARCH.match(gcn_arch):
            raise ValueError(f'gcn_arch {gcn_arch!r} is not a gfx arch name')
        if isinstance(warp_size, bool) or warp_size not in (32, 64):
            raise ValueError(f'warp_size must be 32 or 64, not {warp_size!r}')
        return {'gcn_arch': gcn_arch, 'warp_size': warp_size}

    def _candidates(self, dtype, gcn_arch, warp_size):
        gates = _gates(self, dtype, gcn_arch)
        out = []
        for family, params, need in CANDIDATES:
            if not all(gates[g] for g in need.split()):
                continue
            cand = Candidate(family, params,
                             {'gcn_arch': gcn_arch, 'warp_size': warp_size})
            if self._fits(cand, dtype) and cand not in out:
                out.append(cand)
        return out

    def _fits(self, cand, dtype):
        _, block, shared, _ = self._geometry(cand, dtype)
        return block[0]*block[1] <= 1024 and shared <= MAX_SHARED

    # -- geometry and template contexts per family -----------------------
    def _geometry(self, cand, dtype):
        """(block, shared bytes, width) without building the plan."""
        p, ws = cand.params, cand.opts['warp_size']
        size = np.dtype(dtype).itemsize
        w = p.get('width', 1)
        if cand.family in ('cstream', 'bstream'):
            return None, (2*ws, 1, 1), 0, w
        if cand.family == 'bstream-msplit':
            ms = min(p['msplit'], self.info.m)
            return None, (ws, ms, 1), 2*p['bsz']*ws*w*size, w
        if cand.family == 'cstream-ksplit':
            ks = p['ksplit']
            return None, (ws, ks, 1), (ks - 1)*self.info.m*ws*size, 1
        raise ValueError(f'unknown HIP family {cand.family!r}')

    def _context(self, cand, dtype):
        _, block, shared, width = self._geometry(cand, dtype)
        lit = lambda x: self.lit(x, dtype)  # noqa: E731
        ctx = {'lit': lit, 'zero_rows': set(self.info.zero_rows)}
        p = cand.params
        if cand.family == 'cstream':
            ctx['plan'] = plans.cstream_plan(self.A)
        elif cand.family == 'bstream':
            ctx['plan'] = plans.bstream_plan(self.A)
        elif cand.family == 'bstream-msplit':
            ctx['plan'] = plans.msplit_plan(self.A, block[1], p['bsz'])
            ctx.update(bsz=p['bsz'], ntload=p.get('ntload', False),
                       preload_c=p.get('preload_c', False))
        elif cand.family == 'cstream-ksplit':
            ctx['plan'] = plans.ksplit_plan(self.A, block[1])
            ctx.update(preload_c=p.get('preload_c', False))
        return ctx, block, shared, width
