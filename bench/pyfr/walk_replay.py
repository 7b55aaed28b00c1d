"""PyFR 3.1's CUDA GiMMiK provider, replayed without a device: the
generators built as PyFR builds them (gimmik.pyfr holds the provider's
filter, constants and walk), their launches, and Served, which lets a
generator's own kernels() run over sources rendered elsewhere (the timing
pool of bench/pyfr/pyfr_walk.py)."""

import os

import numpy as np

from gimmik.pyfr import PROTOCOLS

PYFR_CUDA = PROTOCOLS['3.1', 'cuda']
PYFR_FLAGS = ('--ftz=true', '--fmad=true')     # PyFR's NVRTC options


def pyfr_aligne():
    """The aligne PyFR's CUDA backend passes for f64 panels."""
    return PYFR_CUDA.aligne(np.float64)


def pyfr_nuq(A):
    """Distinct |values| of A, zero counted (PyFR's filter counts so)."""
    return len(np.unique(np.abs(np.asarray(A))))


# GIMMIK_BENCH_RUNTIME_N=1: the replays build the generators with n at run
# time and launch PyFR main's HIP grid, ceil(n/block[0]) (the CUDA twin of
# PyFR main's HIP provider); read at each call, so spawned workers follow
RUNTIME_N_ENV = 'GIMMIK_BENCH_RUNTIME_N'


def runtime_n():
    return os.environ.get(RUNTIME_N_ENV) == '1'


def ours_mm(A, beta, n):
    """This package's generator as PyFR builds it for a panel of n (n at
    run time under runtime_n())."""
    from gimmik.cuda import CUDAMatMul
    if runtime_n():
        return twin_mm(A, beta)
    return CUDAMatMul(A, beta=beta, aligne=pyfr_aligne(), n=n, ldb=n, ldc=n)


def twin_mm(A, beta):
    """Our CUDA generator as the twin of PyFR main's HIP provider."""
    from gimmik.pyfr import twin_generator
    return twin_generator(A, beta, pyfr_aligne())


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
    kernels() runs unchanged in this process: the k-th render returns the
    pool's k-th source's hash as the source.  A render the pool did not
    do (a walk beyond the prefetched candidates) is done here and
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
