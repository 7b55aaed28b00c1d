"""PyFR 3.1's CUDA GiMMiK provider, replayed without a device: which
operators PyFR sends to a generator, how it builds the generator and its
panels, and its walk over the first candidates of kernels() (first send()
None, feedback in ms, a new pick only below ifac times the pick so far).
Served lets a generator's own kernels() and _walk run over sources that
were rendered elsewhere (the timing pool of bench/pyfr/pyfr_walk.py)."""

import numpy as np

from gimmik.pyfr import ALIGNB, IFAC, NWARMUP, PROTOCOLS, walk

_CUDA = PROTOCOLS['3.1', 'cuda']

# PyFR 3.1's provider constants (gimmik.pyfr)
PYFR_NKERNS = _CUDA.nkerns     # backend-cuda gimmik-nkerns
PYFR_NBENCH = _CUDA.nbench     # backend-cuda gimmik-nbench
PYFR_NWARMUP = NWARMUP         # provider _benchmark
PYFR_IFAC = IFAC               # backend autotune-ifac
PYFR_ALIGNB = ALIGNB           # cuda backend alignb (bytes)
PYFR_SOASZ = 32                # cuda backend soasz = csubsz
PYFR_FLAGS = ('--ftz=true', '--fmad=true')


def pyfr_sends(A):
    """Whether PyFR 3.1's CUDA backend hands A to the generator."""
    return _CUDA.sends(A)


def pyfr_hip_sends(A):
    """Whether PyFR's HIP backend (3.1 and main alike) hands A over."""
    return PROTOCOLS['main', 'hip'].sends(A)


def pyfr_nuq(A):
    return len(np.unique(np.abs(np.asarray(A))))


def pyfr_aligne(itemsize=8):
    return PYFR_ALIGNB // itemsize


def pyfr_panel(n_target, nvars):
    """(neles, n) for a mesh of about n_target / nvars elements: PyFR pads
    the elements to a multiple of the SoA size, n = nvars x that."""
    neles = -(-int(n_target) // (nvars*PYFR_SOASZ))*PYFR_SOASZ
    return neles, nvars*neles


def nvars_of(etype):
    """Euler: 4 variables in 2-D, 5 in 3-D."""
    return 4 if etype in ('quad', 'tri') else 5


def beta_of(name):
    return 1.0 if name.rsplit('-', 1)[-1] in ('m3', 'm6') else 0.0


def split_name(name):
    p, etype, mat = name.split('-')
    return int(p[1:]), etype, mat


def replay_walk(kgen, time_candidate, nkerns=PYFR_NKERNS, ifac=PYFR_IFAC):
    """PyFR 3.1's CUDA provider loop over a kernels() generator
    (gimmik.pyfr.walk): time_candidate(src, meta) returns seconds, or
    (seconds, {registers, local_mem, shared_mem})."""
    return walk(_CUDA, kgen, time_candidate, ifac=ifac, nkerns=nkerns)


def walk_pick(walk):
    """(variant, seconds) of a replay's pick, or (None, None)."""
    if walk['pick'] is None:
        return None, None
    return walk['seen'][walk['pick']]


# GIMMIK_BENCH_RUNTIME_N=1: the replays build the generators with n at run
# time and launch PyFR main's HIP grid, ceil(n/block[0]) (the CUDA twin of
# PyFR main's HIP provider); read at each call, so spawned workers follow
RUNTIME_N_ENV = 'GIMMIK_BENCH_RUNTIME_N'


def runtime_n():
    import os
    return os.environ.get(RUNTIME_N_ENV) == '1'


def ours_mm(A, beta, n):
    """This package's generator as PyFR builds it for a panel of n (n at
    run time under runtime_n())."""
    from gimmik.cuda import CUDAMatMul
    if runtime_n():
        return twin_mm(A, beta)
    return CUDAMatMul(A, beta=beta, aligne=pyfr_aligne(), n=n, ldb=n, ldc=n)


def twin_mm(A, beta):
    """Our CUDA generator as the twin of PyFR main's HIP provider: n at
    run time, its offer and order for a client that launches
    ceil(n/block[0]) blocks (client_grid_x, HIP's)."""
    from gimmik.cuda import CUDAMatMul
    mm = CUDAMatMul(A, beta=beta, aligne=pyfr_aligne())
    mm.client_grid_x = True
    return mm


def up_mm(up, A, beta, n):
    """Upstream's CUDA generator, built as ours_mm builds ours."""
    if runtime_n():
        return up.CUDAMatMul(A, beta=beta, aligne=pyfr_aligne())
    return up.CUDAMatMul(A, beta=beta, aligne=pyfr_aligne(), n=n, ldb=n,
                         ldc=n)


def launch_args(meta, b, c):
    """(grid, block, args) a provider launches a candidate with on panels
    b, c (ldb = ldc = n): meta['grid'] and (b, c) with n baked; PyFR
    main's HIP grid and (n, b, ldb, c, ldc) at run time."""
    block = tuple(meta['block'])
    if 'n' not in meta['args']:
        return tuple(meta['grid']), block, (b, c)
    n = np.int32(c.shape[1])
    grid, _ = PROTOCOLS['main', 'hip'].launch(meta, int(n))
    return grid, block, (n, b, n, c, n)


def kname_of(A):
    return f'gimmik_mm_{A.shape[0]}x{A.shape[1]}'


class Served:
    """Replaces a generator's render step by the pool's output, so that
    kernels() and its _walk run unchanged in this process: the k-th render
    returns the pool's k-th source's hash as the source.  A render the pool
    did not do (a walk beyond the prefetched candidates) is done here and
    compiled through `extra`."""

    def __init__(self, results, extra):
        self.by_variant = {r['meta']['variant']: r for r in results
                           if 'meta' in r}
        self.extra = extra

    def ours(self, mm, orig_render):
        def render(cand, dtype, kname='gimmik_mm'):
            r = self.by_variant.get(cand.variant)
            if r is None:
                r = self.extra(lambda: orig_render(cand, dtype, kname))
                if 'key' not in r:
                    raise RuntimeError(f'render of {cand.variant} failed: '
                                       f'{r["error"]}')
                self.by_variant[cand.variant] = r
            return r['key'], r['meta']
        mm.render = render
