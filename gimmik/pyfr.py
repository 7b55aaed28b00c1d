"""How PyFR drives a generator, as data: per PyFR release and backend, which
operators it sends (its filter), how it builds the generator and calls
kernels(), the kernel's arguments, the grid it launches and the feedback it
sends back (pyfr/backends/<backend>/gimmik.py of PyFR 3.1 and of PyFR's main
branch), so that tests and bench replays keep no copy of their own."""

import copy
import csv
from dataclasses import dataclass
import gzip
import importlib
import math

import numpy as np

from gimmik.base import MatMul

# PyFR's backend-wide defaults (pyfr/backends/base/backend.py and the
# backends' base.py)
IFAC = 0.95          # autotune-ifac: a new pick must beat ifac x the pick
NWARMUP = 1          # launches before the timed ones (provider _benchmark)
ALIGNB = 128         # bytes a row of a panel is aligned to (CUDA, HIP, Metal)
MS = 1e3             # feedback 'runtime' is in milliseconds (event timers)
SOASZ = 32           # the CUDA backend pads a panel's elements to this


def _ceil_block_x(meta, n):
    # pyfr.backends.hip.provider.get_grid_for_block(meta['block'], n)
    block = tuple(meta['block'])
    return (-(-int(n) // block[0]), 1, 1), block


def _meta_grid(meta, n):
    return tuple(meta['grid']), tuple(meta['block'])


def _opencl_sizes(meta, n):
    # OpenCL's global size counts work-items, not groups
    gs, ls = tuple(meta['global_work_size']), tuple(meta['local_work_size'])
    return tuple(g // l for g, l in zip(gs, ls)), ls


def _metal_grid(meta, n):
    return tuple(meta['grid']), tuple(meta['threadgroup'])


# how a backend's provider turns a candidate's meta into (grid, block)
LAUNCH_RULES = {
    'ceil(n/block[0])': _ceil_block_x,
    "meta['grid']": _meta_grid,
    "meta['global_work_size']": _opencl_sizes,
    "meta['grid'], meta['threadgroup']": _metal_grid,
}


@dataclass(frozen=True)
class Protocol:
    """One PyFR release's provider for one backend."""
    release: str           # '3.1' or 'main'
    backend: str           # 'cuda', 'hip', 'opencl' or 'metal'
    cls: str               # the generator class PyFR imports from gimmik
    baked_n: bool          # passes n, ldb, ldc to the constructor
    kernels_keywords: tuple  # kernels() keywords besides dtype and kname
    args: tuple            # the kernel's arguments, in order
    launch_rule: str       # a key of LAUNCH_RULES
    feedback_keys: tuple   # what send() gets back
    nkerns: int            # candidates timed at most
    nbench: int            # timed launches each
    max_unique: int = None   # refuses A with > max_unique distinct |values|
    max_density: float = 0.15  # ... and more than this share of non-zeros
    max_nnz: int = None    # refuses A with more non-zeros (OpenCL, Metal)

    @property
    def name(self):
        return f'pyfr-{self.release}-{self.backend}'

    def sends(self, A):
        """Whether PyFR hands A to the generator (else to the vendor
        BLAS).  np.unique counts a zero among the |values|, as PyFR's
        does."""
        A = np.asarray(A)
        nnz = np.count_nonzero(A)
        if self.max_nnz is not None:
            return nnz <= self.max_nnz
        nuq = len(np.unique(np.abs(A)))
        return not (nuq > self.max_unique
                    and nnz / A.size > self.max_density)

    def aligne(self, dtype):
        """The aligne PyFR passes where both panels are aligned."""
        return ALIGNB // np.dtype(dtype).itemsize

    def generator(self, A, beta, aligne, n, ldb, ldc):
        """The generator, built as PyFR builds it (A already alpha*A)."""
        cls = getattr(importlib.import_module('gimmik'), self.cls)
        if self.baked_n:
            return cls(A, beta=beta, aligne=aligne, n=n, ldb=ldb, ldc=ldc)
        return cls(A, beta=beta, aligne=aligne)

    def kernels(self, mm, dtype, kname='gimmik_mm', arch=None,
                warp_size=64, local_mem_size=64*1024):
        """mm.kernels() with the keywords this provider passes: arch is
        the HIP gcn_arch_name (e.g. 'gfx942:sramecc+:xnack-') or the CUDA
        compute capability, as PyFR reads them from the device."""
        values = {'gcn_arch': arch, 'warp_size': warp_size,
                  'compute_capability': arch,
                  'local_mem_size': local_mem_size}
        return mm.kernels(dtype, kname=kname,
                          **{k: values[k] for k in self.kernels_keywords})

    def launch(self, meta, n):
        """(grid, block) this provider launches a candidate with."""
        return LAUNCH_RULES[self.launch_rule](meta, n)

    def feedback(self, runtime, registers=0, local_mem=0, shared_mem=0):
        """The dict PyFR sends back after timing a candidate."""
        values = {'runtime': runtime, 'registers': registers,
                  'local_mem': local_mem, 'shared_mem': shared_mem}
        return {k: values[k] for k in self.feedback_keys}


_GPU_FEEDBACK = ('runtime', 'registers', 'local_mem')

PROTOCOLS = {(p.release, p.backend): p for p in (
    Protocol('3.1', 'cuda', 'CUDAMatMul', True, ('compute_capability',),
             ('b', 'c'), "meta['grid']", _GPU_FEEDBACK + ('shared_mem',),
             8, 5, max_unique=28),
    Protocol('3.1', 'hip', 'HIPMatMul', True, ('gcn_arch', 'warp_size'),
             ('b', 'c'), "meta['grid']", _GPU_FEEDBACK, 8, 5,
             max_unique=128),
    Protocol('3.1', 'opencl', 'OpenCLMatMul', True, ('local_mem_size',),
             ('b', 'c'), "meta['global_work_size']", ('runtime',), 8, 5,
             max_nnz=2048),
    Protocol('3.1', 'metal', 'MetalMatMul', True, (), ('b', 'c'),
             "meta['grid'], meta['threadgroup']", ('runtime',), 18, 40,
             max_nnz=2048),
    Protocol('main', 'cuda', 'CUDAMatMul', True, ('compute_capability',),
             ('b', 'c'), "meta['grid']", _GPU_FEEDBACK + ('shared_mem',),
             8, 5, max_unique=28),
    # n at run time, signature 'iPiPi', and its own grid (2026-03)
    Protocol('main', 'hip', 'HIPMatMul', False, ('gcn_arch', 'warp_size'),
             ('n', 'b', 'ldb', 'c', 'ldc'), 'ceil(n/block[0])',
             _GPU_FEEDBACK, 8, 5, max_unique=128),
    Protocol('main', 'opencl', 'OpenCLMatMul', True, ('local_mem_size',),
             ('b', 'c'), "meta['global_work_size']", ('runtime',), 8, 5,
             max_nnz=2048),
    Protocol('main', 'metal', 'MetalMatMul', True, (), ('b', 'c'),
             "meta['grid'], meta['threadgroup']", ('runtime',), 18, 40,
             max_nnz=2048),
)}

# Our own launch rule (gimmik.base.MatMul.launch_config), beside PyFR's
OURS = MatMul.launch_config


def twin_generator(A, beta, aligne):
    """The CUDA twin of PyFR main's HIP provider: our CUDA generator at
    run-time n, offering and ordering for a client that launches
    ceil(n/block[0]) blocks (client_grid_x, HIP's)."""
    mm = importlib.import_module('gimmik').CUDAMatMul(A, beta=beta,
                                                      aligne=aligne)
    mm.client_grid_x = True
    return mm


def needed_blocks(meta, n):
    """Blocks a candidate's launch contract needs for n columns."""
    grid, _ = MatMul.launch_config(meta, n)
    return grid[0]*grid[1]*grid[2]


def walk(proto, kgen, time_candidate, ifac=IFAC, nkerns=None):
    """PyFR's provider loop over a kernels() generator: a candidate is picked
    only when faster than ifac x the pick so far; returns {'seen', 'pick'}."""
    kdata, seen, pick = None, [], None
    try:
        for _ in range(nkerns or proto.nkerns):
            src, meta = kgen.send(kdata)
            res = time_candidate(src, meta)
            t, attrs = res if isinstance(res, tuple) else (res, {})
            if pick is None or t < ifac*seen[pick][1]:
                pick = len(seen)
            seen.append((meta.get('variant', meta.get('tplname')), t))
            kdata = proto.feedback(t*MS, **{k: v for k, v in attrs.items()
                                             if v is not None})
    except StopIteration:
        pass
    return {'seen': seen, 'pick': pick}


def picked(w):
    """(variant, seconds) of a walk()'s pick, or (None, None)."""
    return w['seen'][w['pick']] if w['pick'] is not None else (None, None)


def euler_nvars(etype):
    """The variables of PyFR's Euler equations: 4 in 2-D, 5 in 3-D."""
    return 4 if etype in ('quad', 'tri') else 5


def panel(n_target, nvars, soasz=SOASZ):
    """(neles, n) of PyFR's panel for about n_target / nvars elements: the
    elements padded to a multiple of soasz, n = nvars x that."""
    neles = -(-int(n_target) // (nvars*soasz))*soasz
    return neles, nvars*neles


# -- recorded walks: the walk replayed over measured candidate times ---------
def read_times(path):
    """{op: [(variant, seconds)]} of our candidates in a candidates CSV in
    offer order ({(op, n): ...} where it has an n column; .gz read too)."""
    out = {}
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rt', newline='') as f:
        for r in csv.DictReader(f):
            if r.get('kind', 'ours') != 'ours' or not r['time_s'] or \
                    r.get('status', 'ok') != 'ok':
                continue
            key = (r['op'], int(r['n'])) if 'n' in r else r['op']
            out.setdefault(key, []).append((r['variant'],
                                            float(r['time_s'])))
    return out


def recorded_name(variant):
    """The name a candidate had before the tensor-core tiles stored C by
    __stcg (the same tile, C evict-first)."""
    return variant.replace('/stcg', '')


def with_twins(times, cands):
    """times ({variant: seconds}, recorded before the stcg stores) with each
    tile's time standing for its stcg twin among cands."""
    out = dict(times)
    for c in cands:
        old = recorded_name(c.variant)
        if c.variant not in out and old in out:
            out[c.variant] = out[old]
    return out


def replay_times(proto, mm, times, dtype=np.float64, arch=None,
                 offer=None, timed_only=False):
    """walk() of `proto` over mm's kernels() with each candidate's time looked
    up in `times` ({variant: seconds}; one without a time counts as infinitely
    slow): what the walk would pick from recorded times; `offer` walks ranked
    candidates instead, `timed_only` only those `times` holds (a recording
    older than the table), and no source is rendered."""
    named = copy.copy(mm)
    named.render = lambda cand, dtype, kname='gimmik_mm': (
        '', {'variant': cand.variant})
    if offer is not None or timed_only:
        named.offered = lambda cands: [
            c for c in (mm.offered(cands) if offer is None else offer)
            if not timed_only or c.variant in times]
    return walk(proto, proto.kernels(named, dtype, arch=arch),
                lambda src, meta: times.get(meta['variant'], math.inf))
