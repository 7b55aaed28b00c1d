"""The autotuner and ``gimmik tune``: candidates checked against the vendor
BLAS, timed and compared with it; n, ldb and ldc stay run-time arguments so
the chosen source serves its whole n class (the cache key)."""

from dataclasses import dataclass, field
import math
import numbers
import os
import sys

import numpy as np

import gimmik
from gimmik import cache
from gimmik.analysis import analyse
from gimmik.errors import EnvironmentFault
from gimmik.runtime import (Runtime, RuntimeUnavailable, get_runtime,
                            moved_bytes, pick_vendor)
from gimmik.verify import Panels
from gimmik.validate import add_dtype_argument, check_dtype, check_matrix, \
    check_product_range, check_representable, check_scalar, check_sizes

# Default number of columns per platform: small enough on the CPU that
# tuning one operator takes seconds, large enough on GPUs to fill them.
DEFAULT_N = {'c': 2**15, 'hip': 2**20, 'cuda': 2**20, 'opencl': 2**20}

# Largest relative error of a candidate's output against the vendor BLAS's
# output, by dtype: each element's error relative to its own scale
# sum_j |A_ij B_jn| + |beta C_in| (gimmik.verify.rel_error).
TOLERANCE = {'float64': 1e-12, 'float32': 1e-5}

# Timing: launches before timing, and launches timed (their median counts)
WARMUP, REPEATS = 2, 15

# A measurement far outside the others of the same operator is taken again (up
# to RETIMES more times, the fastest kept), as a busy machine can slow a whole
# median
OUTLIER_FACTOR = 4.0
MIN_COPY_FRACTION = 0.1
RETIMES = 2

# A verdict is confirmed by timing the best candidate and the vendor BLAS again
# (up to CONFIRMS times); an unconfirmed one is marked unstable, not cached
UNSTABLE_FACTOR = 4.0
CONFIRMS = 3

# Text of a failure that comes from the machine, not the kernel: a
# candidate failing with it (or with an OSError) means the run has no
# verdict (EnvironmentFault), whatever the other candidates did.
ENVIRONMENT_ERRORS = (
    'No space left on device', 'Disk quota exceeded',
    'Read-only file system', 'Permission denied', 'Cannot allocate memory',
    'Too many open files', 'cannot execute', 'error trying to exec',
    'cannot find', 'signal terminated program',
    # GCC's cc1 (`out of memory allocating N bytes`, `virtual memory
    # exhausted`), LLVM's `out of memory`, a device's allocation failure
    'out of memory', 'memory exhausted')

# Host memory the tuner may allocate for its panels, references and buffer
# sets, as a fraction of the machine's physical memory
MAX_MEMORY_FRACTION = 0.5

# Buffer rotation: when one set of B and C fits in the last-level cache,
# enough sets to cover twice the cache are cycled through, at most this many.
MAX_SETS = 256

# Bytes copied to measure the copy bandwidth: the traffic of the problem or
# twice the last-level cache, within these bounds
COPY_BYTES = (16 << 20, 1 << 30)

KNAME = 'gimmik_mm'

# A tuning's verdict (TuneResult.verdict), as the table, --json, a sweep's
# verdict column and report say it
VERDICT_VENDOR = 'use vendor'
VERDICT_GIMMIK = 'use gimmik'
VERDICT_UNCOMPARED = 'use gimmik (no vendor BLAS timed)'


def default_n(platform):
    """Default number of columns of B and C for a platform's tuning."""
    if platform not in DEFAULT_N:
        raise ValueError(f'platform must be one of {", ".join(DEFAULT_N)}, '
                         f'not {platform!r}')
    return DEFAULT_N[platform]


@dataclass
class TuneResult:
    platform: str
    device: str
    dtype: str
    beta: float
    n: int
    best: dict            # variant, time_s, gbps, src, meta (None: no winner)
    vendor: dict          # time_s, gbps
    copy_gbps: float
    candidates: list      # [{variant, time_s, gbps, correct, error}]
    use_vendor: bool
    operator: str = None
    m: int = 0
    k: int = 0
    ldb: int = 0
    ldc: int = 0
    vendor_error: float = 0.0   # vendor BLAS vs float64 NumPy (None: none)
    unstable: str = None  # why the timings cannot rank (then not cached)
    cached: bool = field(default=False, compare=False)

    @property
    def verdict(self):
        """VERDICT_VENDOR where the vendor BLAS's best beats gimmik's
        best (or no candidate is correct), else VERDICT_GIMMIK, or
        VERDICT_UNCOMPARED where no vendor BLAS was timed."""
        if self.use_vendor or self.best is None:
            return VERDICT_VENDOR
        return VERDICT_GIMMIK if self.vendor.get('time_s') \
            else VERDICT_UNCOMPARED

    def message(self):
        """The verdict in one line, naming the operator, both kernels and
        their ratio."""
        who = f'{self.operator or "operator"} ({self.m}x{self.k}, ' \
            f'{self.dtype}, n = {self.n}): {self.verdict}'
        vendor = 'the vendor BLAS' + (
            f' ({self.vendor["formulation"]})'
            if self.vendor.get('formulation') else '')
        if self.best is None:
            text = f'{who}: no correct candidate; {vendor} computes it'
        elif self.speedup is None:
            why = self.vendor.get('error')
            text = f'{who}: {self.best["variant"]}' + (
                f' ({" ".join(str(why).split())[:120]})' if why else '')
        elif self.use_vendor:
            text = (f'{who}: {vendor} is faster; gimmik\'s best, '
                    f'{self.best["variant"]}, takes {1/self.speedup:.2f}x '
                    f'its time')
        else:
            text = (f'{who}: {self.best["variant"]} takes '
                    f'{1/self.speedup:.2f}x the time of {vendor}')
        if self.unstable:
            text += '; timings unstable, not cached'
        return text

    @property
    def speedup(self):
        """Vendor time over best time (> 1: gimmik is faster)."""
        if not self.best or not self.vendor.get('time_s'):
            return None
        return self.vendor['time_s'] / self.best['time_s']

    def to_json(self):
        """The ``gimmik tune --json`` object."""
        best = None
        if self.best:
            best = {k: self.best[k] for k in ('variant', 'time_s', 'gbps')}
        return {
            'operator': self.operator, 'platform': self.platform,
            'device': self.device, 'dtype': self.dtype, 'beta': self.beta,
            'm': self.m, 'k': self.k, 'n': self.n, 'ldb': self.ldb,
            'ldc': self.ldc, 'best': best,
            'vendor': {'time_s': self.vendor.get('time_s'),
                       'gbps': self.vendor.get('gbps'),
                       **{k: self.vendor[k] for k in
                          ('error', 'formulation', 'formulations')
                          if self.vendor.get(k)}},
            'vendor_error': self.vendor_error,
            'copy_gbps': self.copy_gbps, 'speedup': self.speedup,
            'use_vendor': self.use_vendor, 'verdict': self.verdict,
            'message': self.message(), 'unstable': self.unstable,
            'candidates': [{k: c.get(k) for k in ('variant', 'time_s', 'gbps',
                                                  'correct', 'error',
                                                  'retimed')}
                           for c in self.candidates],
            'cached': self.cached,
        }

    def _to_cache(self):
        obj = self.to_json()
        obj['best'] = self.best
        return obj

    @classmethod
    def _from_cache(cls, obj, name, expect):
        """The result a cache entry holds; ValueError when the entry is not
        a complete, sane result with the values of `expect` (a dict)."""
        _check_entry(obj, expect)
        fields = ('platform', 'device', 'dtype', 'beta', 'n', 'best',
                  'vendor', 'copy_gbps', 'candidates', 'use_vendor', 'm',
                  'k', 'ldb', 'ldc', 'vendor_error')
        res = cls(**{f: obj[f] for f in fields}, cached=True)
        res.operator = name if name is not None else obj.get('operator')
        return res


def _positive(x):
    return isinstance(x, numbers.Real) and not isinstance(x, bool) \
        and math.isfinite(x) and x > 0


def _opt(check):
    """check, also passing None."""
    return lambda x: x is None or check(x)


def _natural(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, bool) \
        and x >= 0


def _is_str(x):
    return isinstance(x, str)


# How deep a candidate's meta may nest (a kernel's is 3 or 4 levels)
MAX_META_DEPTH = 8


def _plain_json(x, depth=MAX_META_DEPTH):
    """Whether x is JSON data (dicts with str keys, lists, str, numbers,
    bools, None) nested at most `depth` deep; walked without recursion."""
    todo = [(x, 0)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, (dict, list)):
            if d >= depth:
                return False
            if isinstance(v, dict):
                if not all(isinstance(k, str) for k in v):
                    return False
                v = v.values()
            todo.extend((w, d + 1) for w in v)
        elif not (v is None or isinstance(v, (str, bool, numbers.Real))):
            return False
    return True


def _check_entry(obj, expect):
    """Raise ValueError unless obj is a well-formed cached TuneResult: every
    field that is read back (the table, --json, a sweep's rows) of its
    type, consistent with the others."""
    def need(cond, what):
        if not cond:
            raise ValueError(f'cache entry: {what}')

    def record(x, what, **fields):
        need(isinstance(x, dict), f'{what} is not an object')
        for key, check in fields.items():
            need(check(x.get(key)), f'{what}: {key} is {x.get(key)!r:.60}')

    need(isinstance(obj, dict), 'not an object')
    for key, want in expect.items():
        need(obj.get(key) == want, f'{key} is {obj.get(key)!r}, not {want!r}')
    record(obj, 'the result', operator=_opt(_is_str), device=_is_str,
           n=_positive_int, m=_positive_int, k=_positive_int,
           ldb=_positive_int, ldc=_positive_int, copy_gbps=_positive,
           use_vendor=lambda x: isinstance(x, bool),
           unstable=lambda x: x is None,
           vendor_error=_opt(lambda x: isinstance(x, numbers.Real)
                             and not isinstance(x, bool) and x >= 0))
    need(obj['ldb'] >= obj['n'] and obj['ldc'] >= obj['n'], 'ldb, ldc < n')
    vendor = obj.get('vendor')
    record(vendor, 'vendor', time_s=_opt(_positive), gbps=_opt(_positive),
           error=_opt(_is_str), formulation=_opt(_is_str),
           formulations=_opt(lambda x: isinstance(x, list)))
    vt = vendor['time_s']
    need((vt is None) == (vendor['gbps'] is None), 'vendor gbps')
    need(vt is not None or vendor.get('error'), 'vendor without time_s')
    for f in vendor.get('formulations') or ():
        record(f, 'a vendor formulation', name=_is_str,
               time_s=_opt(_positive), gbps=_opt(_positive),
               error=_opt(_is_str))
    cands = obj.get('candidates')
    need(isinstance(cands, list), 'candidates')
    for c in cands:
        record(c, 'a candidate', variant=_is_str,
               correct=lambda x: isinstance(x, bool), error=_opt(_is_str),
               retimed=_opt(_natural))
        timed = _positive if c['correct'] else (lambda x: x is None)
        record(c, f'candidate {c["variant"]}', time_s=timed, gbps=timed)
    best = obj.get('best')
    if best is not None:
        record(best, 'best', variant=_is_str, time_s=_positive,
               gbps=_positive, src=_is_str,
               meta=lambda x: isinstance(x, dict) and _plain_json(x))
        need(any(c['correct'] and c['variant'] == best['variant']
                 for c in cands), 'best is no correct candidate')
    need(obj['use_vendor'] == (vt is not None and (best is None
                                                   or vt < best['time_s'])),
         'use_vendor disagrees with the times')


def _positive_int(x):
    return _natural(x) and x > 0


def environmental(exc):
    """Whether a candidate's failure comes from the machine rather than
    its kernel: an OSError, or an error whose text (e.g. the compiler's
    log) names one of ENVIRONMENT_ERRORS."""
    if isinstance(exc, OSError):
        return True
    text = str(exc).lower()
    return any(marker.lower() in text for marker in ENVIRONMENT_ERRORS)


def _check_panel(x, name, rows, n, dtype, writable=False):
    """A caller's host panel: a 2-D array of rows x (>= n); writable where
    tune() restores it."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f'{name} must be a NumPy array, not '
                        f'{type(x).__name__}')
    if x.ndim != 2 or x.shape[0] != rows or x.shape[1] < n:
        raise ValueError(f'{name} must have shape ({rows}, >= {n}), not '
                         f'{x.shape}')
    if x.dtype != dtype:
        raise TypeError(f'{name} has dtype {x.dtype}, tuning is for '
                        f'{np.dtype(dtype).name}')
    # refused here, not when the run ends restoring it
    if writable and not x.flags.writeable:
        raise ValueError(f'{name} is read-only: tune() restores {name} when '
                         f'it ends; pass a writable array (or a copy)')


def _ld_align(ldb, ldc, cap=16):
    g = math.gcd(ldb, ldc)
    a = 1
    while a < cap and g % (2*a) == 0:
        a *= 2
    return a


def check_memory(m, k, n, ldb, ldc, itemsize, sets=1, arg='n'):
    """Refuse (ValueError naming `arg`) a tuning run whose host arrays would
    not fit in MAX_MEMORY_FRACTION of the physical memory: B, C and their
    copies, the float64 reference and its scale, and the buffer sets."""
    need = itemsize*(k*ldb + m*ldc)*(3 + sets) + 8*2*m*n
    try:
        total = os.sysconf('SC_PHYS_PAGES')*os.sysconf('SC_PAGE_SIZE')
    except (ValueError, OSError, AttributeError):
        return
    if need > MAX_MEMORY_FRACTION*total:
        raise ValueError(
            f'{arg} = {n}: tuning a {m} x {k} operator on {n} columns needs '
            f'about {need/2**30:.1f} GiB of memory, more than '
            f'{MAX_MEMORY_FRACTION:.0%} of this machine\'s '
            f'{total/2**30:.1f} GiB; choose a smaller {arg}')


def tune(A, *, beta=0.0, dtype='float64', n=None, ldb=None, ldc=None,
         platform='auto', runtime=None, use_cache=True, progress=None,
         name=None, b=None, c=None):
    """Autotune C = A*B + beta*C for one operator; returns a TuneResult.
    `b`, `c`: panels timed where finite (checks use fresh random values);
    `c` is restored before returning."""
    A = check_matrix(A)
    beta = check_scalar(beta, 'beta')
    dt = check_dtype(dtype)
    dname = np.dtype(dt).name
    # A value beyond the dtype's range would only show up later as a
    # disagreement with the vendor BLAS
    check_representable(A, beta, dt)
    if runtime is None:
        if not isinstance(platform, str):
            raise TypeError(f'platform must be a str, not '
                            f'{type(platform).__name__}')
        runtime = get_runtime(platform)
    elif not isinstance(runtime, Runtime):
        raise TypeError(f'runtime must be a gimmik.runtime.Runtime, not '
                        f'{type(runtime).__name__}')
    elif platform not in ('auto', runtime.name):
        raise ValueError(f'platform {platform!r} does not match the runtime '
                         f'({runtime.name})')
    if n is None:
        n = c.shape[1] if isinstance(c, np.ndarray) and c.ndim == 2 \
            else default_n(runtime.name)
    n, ldb, ldc, _ = check_sizes(n, ldb if ldb is not None else n,
                                 ldc if ldc is not None else n, None)
    if progress is not None and not callable(progress):
        raise TypeError('progress must be callable')
    if name is not None and not isinstance(name, str):
        raise TypeError(f'name must be a str, not {type(name).__name__}')
    info = analyse(A)
    m, k = info.m, info.k
    if b is not None:
        _check_panel(b, 'b', k, n, dt)
    if c is not None:
        _check_panel(c, 'c', m, n, dt, writable=True)
    check_memory(m, k, n, ldb, ldc, np.dtype(dt).itemsize)

    key = cache.tune_key(A, beta=beta, dtype=dname, platform=runtime.name,
                         device=str(runtime.device),
                         options=runtime.kernel_options(), n=n, ldb=ldb,
                         ldc=ldc, version=gimmik.__version__,
                         build=runtime.build_identity())
    # the entry of another n in the same n class is shared
    expect = {'platform': runtime.name, 'dtype': dname, 'beta': beta,
              'm': m, 'k': k}

    def run():
        saved = None if c is None else c.copy()
        try:
            res = _tune(A, info, beta, dt, n, ldb, ldc, runtime, progress, b,
                        c)
        finally:
            if saved is not None:
                np.copyto(c, saved)
        res.operator = name
        return res

    if not use_cache:
        return run()
    hit = _cached(key, name, expect, say=True)
    if hit is not None:
        return hit
    # One process tunes a key at a time; the others wait and read its
    # result (unless it could not be cached: then they tune in turn)
    with cache.lock('tune', key, on_wait=lambda: _waiting(name)):
        hit = _cached(key, name, expect)
        if hit is not None:
            return hit
        res = run()
        if res.unstable is None:
            cache.store(key, res._to_cache())   # unwritable: a warning
    return res


def _cached(key, name, expect, say=False):
    """The cached TuneResult for key, or None (also for an entry that is
    not a complete, sane result: it is tuned again, and with `say` a
    warning says why)."""
    problems = []
    hit = cache.load(key, problems)
    if hit is not None:
        try:
            return TuneResult._from_cache(hit, name, expect)
        except ValueError as e:
            problems.append(str(e))
    if problems and say:
        import warnings
        warnings.warn(f'malformed cache entry {cache.entry_path("tune", key)}'
                      f' ({problems[0]}): tuning again', RuntimeWarning,
                      stacklevel=3)
    return None


def _waiting(name):
    import warnings
    warnings.warn(f'another process is tuning {name or "this operator"} '
                  f'for the same problem: waiting for its result',
                  RuntimeWarning, stacklevel=2)


def clear_cache():
    """Remove every cached tuning result; returns how many were removed."""
    return cache.clear('tune')


def _tune(A, info, beta, dt, n, ldb, ldc, runtime, progress, b, c):
    """One tuning run: the vendor baseline, every candidate, the final
    figures (see _Tuning's steps)."""
    run = _Tuning(A, info, beta, dt, n, ldb, ldc, runtime, b, c)
    run.time_vendor()
    run.walk_candidates(progress)
    return run.result()


class _Tuning:
    """The state of one tuning run, its steps as methods."""

    def __init__(self, A, info, beta, dt, n, ldb, ldc, runtime, b, c):
        self.A, self.info, self.beta, self.dt = A, info, beta, dt
        self.n, self.ldb, self.ldc, self.runtime = n, ldb, ldc, runtime
        m, k = info.m, info.k
        itemsize = np.dtype(dt).itemsize
        rng = np.random.default_rng()

        # Host panels with sentinel padding; checks on fresh random values
        # (the verdict is cached), with beta = 0 on NaN-poisoned outputs
        b, c = _finite_or(b, n), _finite_or(c, n)
        with np.errstate(over='ignore', invalid='ignore'):
            p = t = Panels(rng, A, beta, dt, n, ldb, ldc)
            if b is not None or c is not None:
                t = Panels(rng, A, beta, dt, n, ldb, ldc, b=b, c=c)
        for x in {id(p): p, id(t): t}.values():
            check_product_range(x.ref, x.scale, dt)
        self.tol = TOLERANCE[np.dtype(dt).name]

        # Buffer sets to rotate through when one set fits in the cache
        setbytes = (k*ldb + m*ldc)*itemsize
        self.llc = int(runtime.cache_bytes() or 0)
        self.nsets = 1 if setbytes > self.llc else min(
            MAX_SETS, -(-2*self.llc // max(setbytes, 1)))
        # (the check's panels a set more where the timings' are the caller's)
        check_memory(m, k, n, ldb, ldc, itemsize,
                     self.nsets + (t is not p))
        self.bufs = [(runtime.upload(t.bfull), runtime.upload(t.c0))
                     for _ in range(self.nsets)]
        self.moved = moved_bytes(info, beta, n, itemsize)

        # Checks compare on the device where the runtime can (compare()): B, a
        # copy of it, the start of C and the exact result are put there once
        self.bcheck = runtime.upload(p.bfull)
        self.cstart = runtime.upload(p.cfull)
        self.b_copy = runtime.clone(self.bcheck)
        self.exact = runtime.reference(p.ref, p.scale)

        self.cands, self.best, self.launches = [], None, {}
        self.vendor = self.vref = self.verr = None
        self.vtime = self.vlaunch = None
        self.failures = []      # (variant, exception) of candidates raising
        self.starved = []       # why timings measured the scheduler

    # -- measuring -------------------------------------------------------
    def check(self, launch, ref):
        """A launch's first output on a fresh copy of the start of C: (buffer,
        error, why it cannot be right beyond its values or '')."""
        rt = self.runtime
        cbuf = rt.clone(self.cstart)
        launch(self.bcheck, cbuf, self.n, self.ldb, self.ldc)
        err, padok = rt.compare(cbuf, ref, self.cstart, self.n)
        if not rt.same(self.bcheck, self.b_copy):
            self.bcheck = rt.clone(self.b_copy)
            return cbuf, err, 'modified B'
        return cbuf, err, '' if padok else 'wrote the padding of C beyond n'

    def timed(self, launch):
        """The runtime's median time of launch, cycling the buffer sets; taken
        again (up to RETIMES times) while the runtime says the process was
        starved of CPU, and noted in self.starved if it stays so."""
        state = {'i': 0}

        def rotating():
            bb, cb = self.bufs[state['i'] % self.nsets]
            state['i'] += 1
            launch(bb, cb, self.n, self.ldb, self.ldc)
        rt = self.runtime
        for _ in range(RETIMES + 1):
            t = rt.time(rotating, (), warmup=WARMUP, repeats=REPEATS)
            why = rt.starved()
            if why is None:
                return t
        self.starved.append(why)
        return t

    def retimed(self, launch, t, floor):
        """t, or the fastest of up to RETIMES new measurements while the
        throughput stays below `floor` bytes/s; (time, retimes)."""
        tries = 0
        while self.moved / t < floor and tries < RETIMES:
            t = min(t, self.timed(launch))
            tries += 1
        return t, tries

    def typical(self):
        """Median throughput (bytes/s) of the measurements so far."""
        rates = [self.moved / r['time_s'] for r in self.cands
                 if r['correct']]
        if self.vtime is not None:
            rates.append(self.moved / self.vtime)
        return float(np.median(rates)) if rates else 0.0

    # -- step 1: the vendor BLAS -----------------------------------------
    def time_vendor(self):
        """The vendor BLAS: the fastest of the library's formulations that
        agree with NumPy, and the reference every candidate is checked
        against (NumPy float64 where the platform has no vendor BLAS)."""
        rt, n = self.runtime, self.n
        try:
            forms = rt.vendor_formulations(self.A, 1.0, self.beta, self.dt,
                                           n=n, ldb=self.ldb, ldc=self.ldc)
        except RuntimeUnavailable as e:
            self.vendor = {'time_s': None, 'gbps': None, 'error': str(e)}
            self.vref = self.exact
            return
        # candidates are checked against the first right formulation's
        # output (one copy kept), with the exact result's element scales;
        # every right one is within tol of NumPy
        errs, first = {}, []

        def vcheck(launch):
            out, err, bad = self.check(launch, self.exact)
            if bad or err > self.tol:
                return (f'disagrees with NumPy (relative error {err:.3g}'
                        f'{", " + bad if bad else ""})')
            errs[launch] = err
            if not first:
                first.append(out)
        vbest, vrecs = pick_vendor(forms, vcheck, self.timed)
        if vbest is None:
            raise RuntimeError(
                f'the vendor BLAS on {rt.name} disagrees with NumPy or '
                f'fails in every formulation: '
                + '; '.join(f'{r["name"]}: {r["error"]}' for r in vrecs))
        vname, self.vlaunch, self.vtime = vbest
        self.vref, self.verr = (first[0], self.exact[1]), errs[self.vlaunch]
        moved = self.moved
        self.vendor = {
            'time_s': self.vtime, 'gbps': moved / self.vtime / 1e9,
            'formulation': vname,
            'formulations': [{**r, 'gbps': (moved / r['time_s'] / 1e9
                                            if r['time_s'] else None)}
                             for r in vrecs]}

    # -- step 2: the candidates ------------------------------------------
    def walk_candidates(self, progress):
        """Check and time every candidate kernels() offers, feeding each
        correct one's time back."""
        rt, dt = self.runtime, self.dt
        mm = rt.matmul(self.A, self.beta, aligne=_ld_align(self.ldb,
                                                           self.ldc))
        opts = rt.kernel_options()
        total = _count(mm, dt, opts)
        _prepare(rt, mm, dt)
        kgen = mm.kernels(dt, kname=KNAME, **opts)
        feedback = None
        while True:
            try:
                src, meta = kgen.send(feedback)
            except StopIteration:
                break
            rec, feedback = self.try_candidate(src, meta)
            self.cands.append(rec)
            if progress is not None:
                progress(len(self.cands), max(total or 0, len(self.cands)),
                         rec['variant'])
        self.check_environment()

    def try_candidate(self, src, meta):
        """Build, check and time one candidate: (its record, the feedback
        for kernels())."""
        rec = {'variant': meta['variant'], 'time_s': None, 'gbps': None,
               'correct': False, 'error': None, 'retimed': 0}
        feedback = {'runtime': None}
        try:
            launch = self.runtime.compile(src, meta)
            _, err, bad = self.check(launch, self.vref)
            if err > self.tol or bad:
                rec['error'] = (
                    f'relative error {err:.3g} against the '
                    f'{"vendor BLAS" if self.vlaunch else "reference"}'
                    if err > self.tol else bad)
                return rec, feedback
            rec['correct'] = True
            t, rec['retimed'] = self.retimed(
                launch, self.timed(launch), self.typical() / OUTLIER_FACTOR)
            rec.update(time_s=t, gbps=self.moved / t / 1e9)
            self.launches[meta['variant']] = launch
            feedback = {'runtime': t,
                        **self.runtime.launch_feedback(src, meta)}
            if self.best is None or t < self.best['time_s']:
                self.best = {'variant': meta['variant'], 'time_s': t,
                             'gbps': rec['gbps'], 'src': src,
                             'meta': _plain(meta)}
        except RuntimeUnavailable:
            raise
        except Exception as e:  # a failing candidate is reported, not fatal
            rec['error'] = f'{type(e).__name__}: {e}'[:2000]
            self.failures.append((meta['variant'], e))
        return rec, feedback

    def check_environment(self):
        """Raise EnvironmentFault when a candidate failed for a reason outside
        its kernel (an OSError, a compiler that could not write or run a tool),
        or when every candidate failed to build or run: then no verdict."""
        env = [(v, e) for v, e in self.failures if environmental(e)]
        if not env and len(self.failures) < max(len(self.cands), 1):
            return
        variant, e = (env or self.failures)[0]
        what = (f'{len(env)} of {len(self.cands)} candidates failed for a '
                f'reason outside the kernel' if env else
                f'all {len(self.cands)} candidates failed to build or run')
        raise EnvironmentFault(
            f'{what} (first, {variant}: {type(e).__name__}: '
            f'{" ".join(str(e).split())[:300]}); check the toolchain, '
            f'TMPDIR and the cache disk; nothing was cached') from e

    # -- step 3: the figures reported --------------------------------------
    def result(self):
        """The TuneResult: the best candidate's and the vendor's times
        retaken where far below the copy bandwidth, then each taken once
        more to confirm the verdict."""
        lo, hi = COPY_BYTES
        cbytes = min(max(self.moved, 2*self.llc, lo), hi)
        copy_gbps = self.runtime.copy_bandwidth(cbytes) / 1e9

        floor = MIN_COPY_FRACTION*copy_gbps*1e9
        best, vendor = self.best, self.vendor
        if best is not None:
            rec = next(r for r in self.cands
                       if r['variant'] == best['variant'])
            t, tries = self.retimed(self.launches[best['variant']],
                                    best['time_s'], floor)
            if tries:
                rec['retimed'] += tries
                rec.update(time_s=t, gbps=self.moved / t / 1e9)
                best.update(time_s=t, gbps=rec['gbps'])
        if self.vtime is not None:
            self.vtime = self.retimed(self.vlaunch, self.vtime, floor)[0]
            vendor.update(time_s=self.vtime,
                          gbps=self.moved / self.vtime / 1e9)
        return TuneResult(
            platform=self.runtime.name, device=str(self.runtime.device),
            dtype=np.dtype(self.dt).name, beta=self.beta, n=self.n,
            best=best, vendor=vendor, copy_gbps=copy_gbps,
            candidates=self.cands,
            use_vendor=self.vtime is not None and (
                best is None or self.vtime < best['time_s']),
            m=self.info.m, k=self.info.k, ldb=self.ldb, ldc=self.ldc,
            vendor_error=self.verr, unstable=self.unstable())

    def unstable(self):
        """Why the times cannot rank the candidates, or None: timings taken
        on a saturated CPU (the runtime's starved()), or a verdict that
        does not hold when timed again (confirm())."""
        confirm = self.confirm()
        why = [f'the CPU was saturated: {len(self.starved)} timings measured '
               f'the scheduler, not the kernel (first: {self.starved[0]})'
               ] if self.starved else []
        return '; '.join(why + ([confirm] if confirm else [])) or None

    def confirm(self):
        """Why the verdict is not to be trusted (no retime within
        UNSTABLE_FACTOR of the reported time), or None."""
        why = []
        best = self.best
        for label, launch, t in (
                ('best candidate', best and self.launches[best['variant']],
                 best and best['time_s']),
                ('vendor BLAS', self.vlaunch, self.vtime)):
            if launch is None:
                continue
            seen = []
            while len(seen) < CONFIRMS:
                seen.append(self.timed(launch))
                if max(seen[-1], t) <= UNSTABLE_FACTOR*min(seen[-1], t):
                    break
            else:
                why.append(f'{label} timed at {t*1e6:.3g} us, then at '
                           + ', '.join(f'{x*1e6:.3g}' for x in seen)
                           + ' us')
        return '; '.join(why) or None


def prepare(A, *, beta=0.0, dtype='float64', n, ldb=None, ldc=None,
            runtime):
    """Hand the candidates tune() would build for this problem to
    runtime.prepare() (the cuda runtime starts building them in the
    background), so a sweep can build the next operator's candidates while it
    times this one's; failures are left for tune() to report."""
    mm = runtime.matmul(check_matrix(A), check_scalar(beta, 'beta'),
                        aligne=_ld_align(ldb or n, ldc or n))
    _prepare(runtime, mm, check_dtype(dtype))


def _prepare(runtime, mm, dt):
    if type(runtime).prepare is Runtime.prepare:
        return
    try:
        runtime.prepare([mm.render(cand, dt, KNAME) for cand in
                         mm.candidates(dt, **runtime.kernel_options())])
    except Exception:   # each candidate's own failure is reported by tune()
        pass


def _finite_or(x, n):
    """The first n columns of a caller's panel when all finite, else None
    (fresh random values)."""
    if x is not None:
        x = x[:, :n]
        if np.isfinite(x).all():
            return x
    return None


def _count(mm, dt, opts):
    """How many candidates kernels() may offer (pruning can offer fewer)."""
    try:
        return len(mm.candidates(dt, **opts))
    except Exception:
        return None


def _plain(obj):
    """meta as JSON-able values (tuples to lists, NumPy scalars to Python)."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, (str, bool, numbers.Number)):
        return obj
    return str(obj)


# -- command line ------------------------------------------------------------


def add_arguments(ap):
    ap.add_argument('operator', nargs='?', metavar='OPERATOR',
                    help='a MatrixMarket .mtx file or FILE.npz:KEY')
    ap.add_argument('--platform', choices=('auto',) + tuple(gimmik.PLATFORMS),
                    default='auto',
                    help='where to tune (auto: hip, then cuda, then c)')
    add_dtype_argument(ap)
    ap.add_argument('--beta', type=float, default=0.0,
                    help='C = A*B + beta*C (default 0)')
    ap.add_argument('--n', type=int, default=None,
                    help='columns of B and C (default: per platform, '
                    + ', '.join(f'{p} {v}' for p, v in DEFAULT_N.items())
                    + ')')
    ap.add_argument('--json', action='store_true',
                    help='print one JSON object instead of the table')
    ap.add_argument('--no-cache', action='store_true',
                    help='tune again even if a cached result exists')
    ap.add_argument('--clear-cache', action='store_true',
                    help='remove every cached tuning result first')
    ap.add_argument('--clear-builds', action='store_true',
                    help='remove every cached build (C libraries, the CPU '
                         'executor\'s libraries, ISA reports) first')


def run(args):
    import json

    cleared = [(what, cache.clear(kind)) for flag, kind, what in (
        (args.clear_cache, 'tune', 'cached tuning results'),
        (args.clear_builds, 'builds', 'cached builds')) if flag]
    if cleared and args.operator is None:
        for what, removed in cleared:
            print(f'removed {removed} {what}')
        return 0
    if args.operator is None:
        raise ValueError('OPERATOR is required (a .mtx file or FILE.npz:KEY)')

    from gimmik.progress import TuneBar
    from gimmik.operators import load_operator
    name, A = load_operator(args.operator)
    bar = TuneBar()
    try:
        res = tune(A, beta=args.beta, dtype=args.dtype,
                   n=args.n, platform=args.platform,
                   use_cache=not args.no_cache, name=name,
                   progress=bar.update)
    finally:
        bar.close()
    if args.json:
        print(json.dumps(res.to_json(), indent=1))
        # the verdict where a reader of the JSON's shell also sees it
        print(res.message(), file=sys.stderr)
    else:
        print(format_table(res))
    return 0


def format_table(res):
    """A ranked, human-readable table of a TuneResult."""
    lines = [
        f'operator {res.operator or "(unnamed)"}: {res.m}x{res.k}, '
        f'{res.dtype}, beta = {res.beta:g}, n = {res.n}',
        f'platform {res.platform}: {res.device}'
        + (' (cached result)' if res.cached else ''),
        f'copy bandwidth {res.copy_gbps:.1f} GB/s; vendor BLAS '
        + (f'{res.vendor["time_s"]*1e6:.1f} us, {res.vendor["gbps"]:.1f} GB/s'
           + (f' ({res.vendor["formulation"]}, the fastest of '
              f'{len(res.vendor.get("formulations") or ())} formulations)'
              if res.vendor.get('formulation') else '')
           if res.vendor.get('time_s') else
           f'unavailable ({res.vendor.get("error")})'),
        '',
        f'{"#":>3}  {"candidate":<32} {"time/us":>10} {"GB/s":>8} '
        f'{"vs BLAS":>8}  status',
    ]
    vt = res.vendor['time_s']
    ok = sorted((c for c in res.candidates if c['correct']),
                key=lambda c: c['time_s'])
    bad = [c for c in res.candidates if not c['correct']]
    # the vendor BLAS ranked among the candidates: what beats it shows
    vname = ('vendor BLAS ' + (res.vendor.get('formulation') or ''))[:32]
    vrow = None if not vt else (
        f'{"V":>3}  {vname:<32} {vt*1e6:>10.1f} {res.vendor["gbps"]:>8.1f} '
        f'{1:>7.2f}x  vendor')
    for r, c in enumerate(ok, 1):
        if vrow and vt < c['time_s']:
            lines.append(vrow)
            vrow = None
        ratio = f'{vt / c["time_s"]:>7.2f}x' if vt else f'{"-":>8}'
        lines.append(f'{r:>3}  {c["variant"]:<32} {c["time_s"]*1e6:>10.1f} '
                     f'{c["gbps"]:>8.1f} {ratio}  ok')
    if vrow:
        lines.append(vrow)
    for c in bad:
        err = ' '.join(str(c['error']).split())[:60]
        lines.append(f'{"-":>3}  {c["variant"]:<32} {"":>10} {"":>8} '
                     f'{"":>8}  FAILED: {err}')
    lines.append('')
    if res.best is None:
        lines.append('no correct candidate: use the vendor BLAS')
    elif res.speedup is None:
        lines.append(f'best {res.best["variant"]} (no vendor BLAS to compare '
                     f'with)')
    elif res.use_vendor:
        lines.append(f'best {res.best["variant"]} is {1/res.speedup:.2f}x '
                     f'slower than the vendor BLAS: use the vendor BLAS')
    else:
        lines.append(f'best {res.best["variant"]} is {res.speedup:.2f}x '
                     f'faster than the vendor BLAS')
    lines.append('verdict: ' + (res.verdict.upper() if res.use_vendor
                                else res.verdict))
    if res.unstable:
        lines.append(f'warning: timings unstable ({res.unstable}): the '
                     f'ranking may be chance on a busy machine; not cached, '
                     f'tune again on a quieter one')
    return '\n'.join(lines)
