"""PyFR 3.1's CUDA GiMMiK provider, replayed without a device: which
operators PyFR sends to a generator, how it builds the generator and its
panels, and its walk over the first candidates of kernels() (first send()
None, feedback in ms, a new pick only below ifac times the pick so far).
Served lets a generator's own kernels() and _walk run over sources that
were rendered elsewhere (the timing pool of bench/pyfr_walk.py)."""

import numpy as np

# PyFR 3.1's provider constants
PYFR_NKERNS = 8          # backend-cuda gimmik-nkerns
PYFR_NBENCH = 5          # backend-cuda gimmik-nbench
PYFR_NWARMUP = 1         # provider _benchmark
PYFR_IFAC = 0.95         # backend autotune-ifac
PYFR_ALIGNB = 128        # cuda backend alignb (bytes)
PYFR_SOASZ = 32          # cuda backend soasz = csubsz
PYFR_MAX_UNIQUE = 28     # dense filter (CUDA backend)
PYFR_HIP_MAX_UNIQUE = 128  # the HIP backend's (rocBLAS beyond it)
PYFR_MAX_DENSITY = 0.15
PYFR_FLAGS = ('--ftz=true', '--fmad=true')


def pyfr_sends(A, max_unique=PYFR_MAX_UNIQUE):
    """Whether PyFR 3.1 hands A to the generator (else to the vendor
    BLAS): it refuses A with more than max_unique distinct |values| (zero
    included, as np.unique(np.abs(A)) counts it; 28 on CUDA) and more than
    15 % non-zeros."""
    A = np.asarray(A)
    nnz, nuq = np.count_nonzero(A), len(np.unique(np.abs(A)))
    return not (nuq > max_unique and nnz / A.size > PYFR_MAX_DENSITY)


def pyfr_hip_sends(A):
    """pyfr_sends of PyFR's HIP backend (128 distinct |values|)."""
    return pyfr_sends(A, PYFR_HIP_MAX_UNIQUE)


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
    """PyFR 3.1's provider loop over a kernels() generator.

    time_candidate(src, meta) returns the runtime in seconds, or (seconds,
    attributes) with attributes a dict of registers, local_mem, shared_mem.
    PyFR sends back {'runtime' (ms), 'registers', 'local_mem',
    'shared_mem'}; a candidate becomes the pick only when it is faster than
    ifac times the pick so far.  Returns a dict: seen, the list of
    (variant, seconds) in the order offered; pick, the index into seen of
    the kept candidate (None when nothing was offered)."""
    kdata, seen, pick = None, [], None
    try:
        for _ in range(nkerns):
            src, meta = kgen.send(kdata)
            res = time_candidate(src, meta)
            t, attrs = res if isinstance(res, tuple) else (res, {})
            if pick is None or t < ifac*seen[pick][1]:
                pick = len(seen)
            seen.append((meta.get('variant', meta.get('tplname')), t))
            kdata = {'runtime': t*1e3,
                     'registers': attrs.get('registers'),
                     'local_mem': attrs.get('local_mem'),
                     'shared_mem': attrs.get('shared_mem')}
    except StopIteration:
        pass
    return {'seen': seen, 'pick': pick}


def walk_pick(walk):
    """(variant, seconds) of a replay's pick, or (None, None)."""
    if walk['pick'] is None:
        return None, None
    return walk['seen'][walk['pick']]


def ours_mm(A, beta, n):
    """This package's generator as PyFR builds it for a panel of n."""
    from gimmik.cuda import CUDAMatMul
    return CUDAMatMul(A, beta=beta, aligne=pyfr_aligne(), n=n, ldb=n, ldc=n)


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
