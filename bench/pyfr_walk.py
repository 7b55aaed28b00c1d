"""Replay PyFR 3.1's CUDA GiMMiK provider over this project's CUDAMatMul and
over upstream GiMMiK 4.0's, on the PyFR operator suite at PyFR's panel
sizes, and time every candidate of ours as well.

What PyFR 3.1 does (pyfr/backends/cuda/gimmik.py and provider.py), and
what is replayed here:
- an operator goes to cuBLAS, not the generator, when it has more than 28
  distinct |values| (zero counted) and more than 15 % non-zeros;
- `CUDAMatMul(alpha*A, beta=, aligne=alignb//itemsize, n=, ldb=, ldc=)`
  with alignb = 128 bytes, n = nvars x neles rounded up to 32 (the SoA
  size), ldb = ldc = n;
- at most 8 candidates from `kernels()` (the first send() is None), each
  compiled by NVRTC (`--gpu-architecture=sm_XY --ftz=true --fmad=true`,
  the source wrapped in `extern "C" { }`), the L1 carveout preferred for a
  kernel with local but no shared memory, timed as one event pair around
  5 launches after 1 warm-up (mean), the runtime in ms sent back with the
  registers, local and shared memory;
- a candidate replaces the best so far only when it is faster than 0.95 of
  it (autotune-ifac).

Per operator and n: the walk's pick for ours and upstream, every candidate
of ours (at the --all-n sizes only: compiling them all at every n does not
fit the run's budget), each result checked once against cuBLAS (f64, per
row max |c - ref| / max |ref| <= 1e-12, output NaN-poisoned for beta = 0),
and the compile seconds of the candidates each walk built.  The walk's
pick, the best candidate of all and upstream's pick are timed again
together (median of --repeats launches each, interleaved) for the ratios;
with --vendor the fastest vendor formulation of the cuda runtime (cuBLAS,
CuPy, cuBLASLt; checked to TOL like the candidates) is timed with them
(ours_over_vendor, up_over_vendor: time ratios).

Render and compile run in a process pool ahead of the device; the main
process replays the walks with each generator's own kernels() and _walk,
its render step served from the pool's output.  Resumable: (op, n) rows
already in the CSV are skipped; no new operator starts after --budget s.

    PYTHONPATH=. python3 bench/pyfr_walk.py --out "$OUT"
"""

import argparse
import concurrent.futures as cf
import csv
import fnmatch
import hashlib
import math
import multiprocessing as mp
import os
import sys
import time
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from upstream import load_upstream  # noqa: E402

# PyFR 3.1's provider constants
PYFR_NKERNS = 8          # backend-cuda gimmik-nkerns
PYFR_NBENCH = 5          # backend-cuda gimmik-nbench
PYFR_NWARMUP = 1         # provider _benchmark
PYFR_IFAC = 0.95         # backend autotune-ifac
PYFR_ALIGNB = 128        # cuda backend alignb (bytes)
PYFR_SOASZ = 32          # cuda backend soasz = csubsz
PYFR_MAX_UNIQUE = 28     # dense filter
PYFR_MAX_DENSITY = 0.15
PYFR_FLAGS = ('--ftz=true', '--fmad=true')

TOL = 1e-12              # per-row relative error against cuBLAS (f64)

# n targets: ~2e4, the hex case (~1.1e5) and ~1e6 columns
N_TARGETS = (20480, 110080, 1000000)
ALL_N_DEFAULT = (110080,)

# candidates of ours rendered and compiled ahead for a walk-only n (the
# walk sees 8; pruning may skip some)
WALK_AHEAD = 10
# candidates per pool task (1 for operators with more non-zeros than
# CHUNK_MAX_NNZ: their unrolled kernels take many seconds each)
CHUNK = 4
CHUNK_MAX_NNZ = 512

FIELDS = ['op', 'etype', 'order', 'mat', 'm', 'k', 'nnz', 'density', 'nuq',
          'pyfr_sends', 'beta', 'neles', 'n', 'walk_pick', 'walk_time_s',
          'all_best', 'all_best_time_s', 'walk_over_all', 'up_walk_pick',
          'up_walk_time_s', 'ours_over_up', 'ours_compile_s',
          'up_compile_s', 'ncand', 'nwalk', 'up_nwalk', 'walk_seen',
          'ord_walk_pick', 'ord_walk_over_all', 'ord_over_up',
          'vendor_formulation', 'vendor_time_s', 'ours_over_vendor',
          'up_over_vendor', 'nfail', 'device']
CAND_FIELDS = ['op', 'n', 'kind', 'rank', 'variant', 'time_s', 'walk_seen',
               'registers', 'local_mem', 'shared_mem', 'compile_s', 'error',
               'status']


# -- pure parts (unit-tested without a GPU) --------------------------------

def pyfr_sends(A):
    """Whether PyFR 3.1 hands A to the generator (else to cuBLAS): it
    refuses A with more than 28 distinct |values| (zero included, as
    np.unique(np.abs(A)) counts it) and more than 15 % non-zeros."""
    A = np.asarray(A)
    nnz, nuq = np.count_nonzero(A), len(np.unique(np.abs(A)))
    return not (nuq > PYFR_MAX_UNIQUE and nnz / A.size > PYFR_MAX_DENSITY)


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


def geomean(x):
    x = [float(v) for v in x]
    return math.exp(sum(math.log(v) for v in x) / len(x)) if x else math.nan


# -- the render/compile pool -----------------------------------------------

def nvrtc_compile(src, arch):
    """NVRTC as PyFR compiles a kernel: (cubin bytes, seconds)."""
    from cupy_backends.cuda.libs import nvrtc
    src = f'extern "C"\n{{\n{src}\n}}'
    t0 = time.perf_counter()
    prog = nvrtc.createProgram(src, 'kernel.cu', [], [])
    try:
        try:
            nvrtc.compileProgram(prog, [f'--gpu-architecture={arch}',
                                        *PYFR_FLAGS])
        except Exception as e:
            log = nvrtc.getProgramLog(prog)
            raise RuntimeError(f'NVRTC: {e}: {log[-2000:]}') from None
        cubin = nvrtc.getCUBIN(prog)
    finally:
        nvrtc.destroyProgram(prog)
    return cubin, time.perf_counter() - t0


def src_key(src):
    return hashlib.sha1(src.encode()).hexdigest()


def _ours_mm(A, beta, n):
    from gimmik.cuda import CUDAMatMul
    return CUDAMatMul(A, beta=beta, aligne=pyfr_aligne(), n=n, ldb=n, ldc=n)


def kname_of(A):
    return f'gimmik_mm_{A.shape[0]}x{A.shape[1]}'


_worker_cache = {}


def _task_ours(A, beta, n, cc, indices):
    """Render and compile candidates `indices` of ours for (A, beta, n)."""
    key = (A.tobytes(), A.shape, beta, n, cc)
    if key not in _worker_cache:
        if len(_worker_cache) >= 4:
            _worker_cache.pop(next(iter(_worker_cache)))
        mm = _ours_mm(A, beta, n)
        _worker_cache[key] = mm, mm.candidates(np.float64,
                                               compute_capability=cc)
    mm, cands = _worker_cache[key]
    out = []
    for i in indices:
        if i >= len(cands):
            break
        out.append(_render_compile(lambda c=cands[i]: mm.render(
            c, np.float64, kname_of(A)), cc))
    return out


def _task_up(up_path, A, beta, n, cc):
    """Render and compile every candidate of upstream's for (A, beta, n)
    (upstream's CUDA generator takes no notice of feedback)."""
    up = load_upstream(up_path)
    mm = up.CUDAMatMul(A, beta=beta, aligne=pyfr_aligne(), n=n, ldb=n, ldc=n)
    gen = mm.kernels(np.float64, kname=kname_of(A), compute_capability=cc)
    items = []
    try:
        while True:
            items.append(gen.send(None))
    except StopIteration:
        pass
    return [_render_compile(lambda it=it: it, cc) for it in items]


def _render_compile(render, cc):
    r = {'cubin': None, 'compile_s': None, 'error': None}
    try:
        src, meta = render()
        r.update(key=src_key(src), meta=meta)
        r['cubin'], r['compile_s'] = nvrtc_compile(src, f'sm_{cc[0]}{cc[1]}')
    except Exception as e:
        r['error'] = f'{type(e).__name__}: {e}'[:1500]
    return r


# -- the device side ---------------------------------------------------------

class Device:
    def __init__(self):
        import cupy
        from cupy_backends.cuda.api import driver
        self.cupy, self.driver = cupy, driver
        dev = cupy.cuda.Device(0)
        dev.use()
        props = cupy.cuda.runtime.getDeviceProperties(0)
        self.cc = (int(props['major']), int(props['minor']))
        self.name = f'{props["name"].decode()} (sm_{self.cc[0]}{self.cc[1]})'
        self.stream = cupy.cuda.Stream(non_blocking=False)

    def load(self, cubin, kname):
        """(function, attributes) of a cubin; the L1 carveout preferred
        when the kernel spills and has no shared memory, as PyFR does."""
        d = self.driver
        mod = self.cupy.cuda.function.Module()
        mod.load(cubin)
        fn = mod.get_function(kname)
        attrs = {'registers': d.funcGetAttribute(
                     d.CU_FUNC_ATTRIBUTE_NUM_REGS, fn.ptr),
                 'local_mem': d.funcGetAttribute(
                     d.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn.ptr),
                 'shared_mem': d.funcGetAttribute(
                     d.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn.ptr)}
        if attrs['local_mem'] and not attrs['shared_mem']:
            d.funcSetAttribute(
                fn.ptr, d.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                0)
        return fn, attrs

    def launch(self, fn, meta, b, c):
        fn(tuple(meta['grid']), tuple(meta['block']), (b, c), 0,
           self.stream)

    def time_pyfr(self, fn, meta, b, c):
        """PyFR's _benchmark: events around nbench launches after the
        warm-up ones, mean, in seconds."""
        cp = self.cupy
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        for i in range(PYFR_NBENCH + PYFR_NWARMUP):
            if i == PYFR_NWARMUP:
                start.record(self.stream)
            self.launch(fn, meta, b, c)
        stop.record(self.stream)
        stop.synchronize()
        return cp.cuda.get_elapsed_time(start, stop)*1e-3 / PYFR_NBENCH

    def time_median(self, launches, repeats):
        """Median seconds of each launch function, interleaved."""
        cp = self.cupy
        out = [[] for _ in launches]
        for f in launches:
            f()
        for _ in range(repeats):
            for j, f in enumerate(launches):
                s, e = cp.cuda.Event(), cp.cuda.Event()
                s.record(self.stream)
                f()
                e.record(self.stream)
                e.synchronize()
                out[j].append(cp.cuda.get_elapsed_time(s, e)*1e-3)
        return [float(np.median(t)) for t in out]


class Panels:
    """B, C (k x n, m x n, f64, ldb = ldc = n) and the cuBLAS reference."""

    def __init__(self, dev, A, beta, n, seed):
        cp = dev.cupy
        rng = cp.random.default_rng(seed)
        m, k = A.shape
        self.dev, self.beta = dev, beta
        self.b = rng.standard_normal((k, n))
        self.c = cp.empty((m, n))
        self.c0 = rng.standard_normal((m, n)) if beta else None
        a = cp.asarray(A, dtype=np.float64)
        self.ref = a @ self.b          # cuBLAS dgemm
        if beta:
            self.ref += beta*self.c0
        self.rowmax = cp.abs(self.ref).max(axis=1)
        del a

    def reset(self):
        if self.beta:
            self.c[...] = self.c0
        else:
            self.c.fill(np.nan)

    def check(self, run):
        """Worst per-row relative error of one run (inf for NaN or for a
        non-zero where the reference row is zero)."""
        cp = self.dev.cupy
        self.reset()
        run()
        m, n = self.c.shape
        err = cp.zeros(m)
        step = max(1, (1 << 27) // max(m, 1))
        for j in range(0, n, step):
            d = cp.abs(self.c[:, j:j + step] - self.ref[:, j:j + step])
            err = cp.maximum(err, d.max(axis=1))
            bad = ~cp.isfinite(self.c[:, j:j + step]).all(axis=1)
            err[bad] = cp.inf
        rel = cp.where(self.rowmax > 0, err / cp.where(self.rowmax > 0,
                                                       self.rowmax, 1),
                       cp.where(err > 0, cp.inf, 0))
        return float(rel.max())

    def free(self):
        self.b = self.c = self.c0 = self.ref = self.rowmax = None
        self.dev.cupy.get_default_memory_pool().free_all_blocks()


class Timed:
    """Compiled candidates of one (op, n, kind), by source hash: loaded,
    checked once, timed PyFR's way once."""

    def __init__(self, dev, panels, kname):
        self.dev, self.panels, self.kname = dev, panels, kname
        self.items = {}       # key -> pool result (+ fn, attrs, time)
        self.fail = 0

    def add(self, results):
        for r in results:
            if 'key' in r:
                self.items.setdefault(r['key'], r)

    def measure(self, key):
        r = self.items[key]
        if 'time_s' in r:
            return r
        r['time_s'] = math.inf
        try:
            if r['error']:
                raise RuntimeError(r['error'])
            fn, attrs = self.dev.load(r['cubin'], self.kname)
            r.update(attrs, fn=fn)
            meta, p = r['meta'], self.panels
            err = p.check(lambda: self.dev.launch(fn, meta, p.b, p.c))
            r['err'] = err
            if not err <= TOL:
                raise RuntimeError(f'wrong result: row error {err:.3g}')
            r['time_s'] = self.dev.time_pyfr(fn, meta, p.b, p.c)
            r['status'] = 'ok'
        except Exception as e:
            self.fail += 1
            r['status'] = f'{type(e).__name__}: {e}'[:300].replace('\n', ' ')
            print(f'    {r.get("meta", {}).get("variant", "?")}: '
                  f'{r["status"]}', flush=True)
        r['cubin'] = None
        return r

    def time_candidate(self, src, meta):
        r = self.measure(src)
        return r['time_s'], {k: r.get(k) for k in
                             ('registers', 'local_mem', 'shared_mem')}


# -- the run -----------------------------------------------------------------

def load_suite(path, patterns):
    with np.load(path) as f:
        ops = {k: f[k] for k in f.files if k != 'provenance'}
    names = [k for k in ops if any(fnmatch.fnmatch(k, p) for p in patterns)]
    return {k: ops[k] for k in sorted(
        names, key=lambda s: (split_name(s)[0], split_name(s)[1],
                              split_name(s)[2]))}


def read_done(path):
    if not os.path.exists(path):
        return set()
    with open(path) as f:
        return {(r['op'], int(r['n'])) for r in csv.DictReader(f)}


def append(path, fields, rows):
    new = not os.path.exists(path)
    with open(path, 'a', newline='') as f:
        w = csv.DictWriter(f, fieldnames=fields)
        if new:
            w.writeheader()
        for row in rows:
            w.writerow(row)


def fmt(x, spec='.6e'):
    return '' if x is None or (isinstance(x, float) and math.isnan(x)) \
        else format(x, spec)


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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--ops', nargs='+', default=['*'],
                    help='fnmatch globs of operator names')
    ap.add_argument('--suite', default=os.path.join(HERE, 'operators',
                                                    'pyfr-ops.npz'))
    ap.add_argument('--out', default=os.environ.get('OUT') or
                    os.path.join(HERE, 'results'),
                    help='output folder (default $OUT)')
    ap.add_argument('--name', default='pyfr-walk',
                    help='CSV base name in --out')
    ap.add_argument('--up', default='.whl/pyfr/gimmik-4.0-py3-none-any.whl',
                    help="upstream GiMMiK's wheel or unpacked folder")
    ap.add_argument('--n', type=int, nargs='+', default=list(N_TARGETS),
                    help='n targets (columns; rounded to PyFR padding)')
    ap.add_argument('--all-n', type=int, nargs='*',
                    default=list(ALL_N_DEFAULT),
                    help='n targets at which every candidate is timed')
    ap.add_argument('--budget', type=float, default=390,
                    help='start no new operator after this many seconds')
    ap.add_argument('--jobs', type=int, default=max(1, (os.cpu_count() or 2)
                                                     - 1))
    ap.add_argument('--ahead', type=int, default=40,
                    help='(operator, n) rendered and compiled ahead')
    ap.add_argument('--repeats', type=int, default=20)
    ap.add_argument('--vendor', action='store_true',
                    help="also time the vendor's best formulation (the cuda "
                    "runtime's, checked like the candidates) with the picks")
    args = ap.parse_args(argv)

    t0 = time.time()
    dev = Device()
    if args.vendor:
        from gimmik.runtime.cuda import Runtime
        args.runtime = Runtime()
    else:
        args.runtime = None
    up_path = os.path.abspath(args.up)
    load_upstream(up_path)
    os.makedirs(args.out, exist_ok=True)
    out = os.path.join(args.out, f'{args.name}.csv')
    cand_out = os.path.join(args.out, f'{args.name}-candidates.csv')
    done = read_done(out)
    ops = load_suite(args.suite, args.ops)
    all_n = set(args.all_n)
    # n-major: every operator at the all-candidates n targets first, then
    # at the others, so that a run cut short by the budget leaves whole
    # sweeps at the first n targets
    targets = sorted(args.n, key=lambda t: (t not in all_n, t))
    work = [(name, t) for t in targets for name in ops]

    def todo(name, t):
        return (name, pyfr_panel(t, nvars_of(split_name(name)[1]))[1]) \
            not in done
    work = [w for w in work if todo(*w)]
    print(f'{dev.name}; {len(work)} (operator, n) to do, {len(done)} done; '
          f'{args.jobs} compile processes', flush=True)

    pool = cf.ProcessPoolExecutor(args.jobs,
                                  mp_context=mp.get_context('spawn'))
    cc = dev.cc

    def submit(name, t):
        A, beta = ops[name], beta_of(name)
        n = pyfr_panel(t, nvars_of(split_name(name)[1]))[1]
        mm = _ours_mm(A, beta, n)
        ncand = len(mm.candidates(np.float64, compute_capability=cc))
        upto = ncand if t in all_n else min(ncand, WALK_AHEAD)
        # one candidate a task where they are slow to compile
        chunk = CHUNK if np.count_nonzero(A) <= CHUNK_MAX_NNZ else 1
        futs = [pool.submit(_task_ours, A, beta, n, cc,
                            list(range(i, min(i + chunk, upto))))
                for i in range(0, upto, chunk)]
        up = pool.submit(_task_up, up_path, A, beta, n, cc)
        return n, ncand, futs, up

    queued = {}
    nxt = 0

    def fill(upto):
        nonlocal nxt
        while nxt < min(upto, len(work)):
            queued[work[nxt]] = submit(*work[nxt])
            nxt += 1

    stats = []
    for i, (name, t) in enumerate(work):
        if time.time() - t0 > args.budget:
            print(f'budget of {args.budget:.0f} s spent; stopping before '
                  f'{name} n~{t}', flush=True)
            break
        fill(i + 1 + args.ahead)
        n, ncand, futs, upfut = queued.pop((name, t))
        try:
            row = run_one(dev, name, ops[name], t, n, ncand, futs, upfut,
                          t in all_n, pool, cc, args, cand_out)
        except Exception as e:     # recorded; the run goes on
            msg = f'{type(e).__name__}: {e}'[:300].replace('\n', ' ')
            print(f'{name} n={n}: FAILED {msg}', flush=True)
            row = {'op': name, 'n': n, 'ncand': ncand, 'nfail': -1,
                   'walk_seen': f'ERROR {msg}', 'device': dev.name}
        append(out, FIELDS, [row])
        stats.append(row)
        print(f'{name:13s} n={n:<8d} walk {row["walk_pick"]} '
              f'x{row["walk_over_all"] or "-"} of all; vs up '
              f'{row["ours_over_up"] or "-"} ({row["up_walk_pick"] or "-"}) '
              f'[{time.time() - t0:.0f} s]', flush=True)

    pool.shutdown(wait=False, cancel_futures=True)
    summarise(out)
    sys.stdout.flush()
    os._exit(0)      # compiles still running for work not reached


def run_one(dev, name, A, t, n, ncand, futs, upfut, all_cands, pool, cc,
            args, cand_out):
    from gimmik.analysis import analyse
    order, etype, mat = split_name(name)
    beta = beta_of(name)
    info = analyse(A)
    kname = kname_of(A)
    row = {'op': name, 'etype': etype, 'order': order, 'mat': mat,
           'm': info.m, 'k': info.k, 'nnz': info.nnz,
           'density': f'{info.density:.4f}', 'nuq': pyfr_nuq(A),
           'pyfr_sends': pyfr_sends(A), 'beta': beta,
           'neles': n // nvars_of(etype), 'n': n, 'ncand': ncand,
           'device': dev.name}
    panels = Panels(dev, A, beta, n, seed=zlib.crc32(f'{name} {n}'.encode()))
    try:
        ours = Timed(dev, panels, kname)
        results = [r for f in futs for r in f.result()]
        ours.add(results)

        def extra(render):      # a walk beyond the prefetched candidates
            r = _render_compile(render, cc)
            ours.add([r])
            results.append(r)
            return r

        served = Served(results, extra)
        mm = _ours_mm(A, beta, n)
        served.ours(mm, mm.render)
        if all_cands:       # every candidate, in offer order
            for r in results:
                if 'key' in r:
                    ours.measure(r['key'])
        walk = replay_walk(
            mm.kernels(np.float64, kname=kname, compute_capability=cc),
            ours.time_candidate)
        seen_keys = [served.by_variant[v]['key'] for v, _ in walk['seen']]
        # the walk over gimmik.order's order, from the same measurements
        # (every candidate is timed at these n only)
        ord_walk = None
        if all_cands:
            from gimmik.order import order_candidates
            omm = _ours_mm(A, beta, n)
            served.ours(omm, omm.render)
            cands = order_candidates(
                omm.info, omm.candidates(np.float64, compute_capability=cc),
                'cuda', beta=beta, n=n)
            ord_walk = replay_walk(omm._walk(cands, np.float64, kname),
                                   ours.time_candidate)

        up = Timed(dev, panels, kname)
        up_results = upfut.result()
        up.add(up_results)
        upmod = sys.modules['gimmik_up']
        upmm = upmod.CUDAMatMul(A, beta=beta, aligne=pyfr_aligne(), n=n,
                                ldb=n, ldc=n)
        up_srcs = iter([r.get('key') for r in up_results])
        upmm._render_kernel = lambda dtype, tplname, tplargs: next(up_srcs)
        up_walk = replay_walk(
            upmm.kernels(np.float64, kname=kname, compute_capability=cc),
            up.time_candidate)
        up_keys = [r['key'] for r in up_results][:len(up_walk['seen'])]

        # candidates' rows
        walked = set(seen_keys)
        rows = []
        for rank, r in enumerate(results):
            rows.append(cand_row(name, n, 'ours', rank, r, r.get('key')
                                 in walked))
        for rank, r in enumerate(up_results):
            rows.append(cand_row(name, n, 'up', rank, r, True))
        append(cand_out, CAND_FIELDS, rows)

        timed = [r for r in ours.items.values()
                 if math.isfinite(r.get('time_s', math.inf))]
        best = min(timed, key=lambda r: r['time_s']) if all_cands and timed \
            else None
        wv, wt = walk_pick(walk)
        uv, ut = walk_pick(up_walk)
        wr = served.by_variant.get(wv) if wv else None
        ur = up.items[up_keys[up_walk['pick']]] if uv else None
        # the picks (and the vendor's best) timed again together
        ov = walk_pick(ord_walk)[0] if ord_walk else None
        orr = served.by_variant.get(ov) if ov else None
        again = [x for x in (wr, best, ur, orr) if x is not None and
                 math.isfinite(x.get('time_s', math.inf))]
        uniq = list({id(x): x for x in again}.values())
        p = panels
        launches = [lambda x=x: dev.launch(x['fn'], x['meta'], p.b, p.c)
                    for x in uniq]
        vend = vendor_best(dev, p, A, beta, n, args) \
            if args.runtime is not None else None
        if vend is not None:
            launches.append(lambda: vend[1](p.b, p.c, n, n, n))
        with dev.stream:
            ts = dev.time_median(launches, args.repeats) if launches else []
        vt2 = ts.pop() if vend is not None else None
        retimed = {id(x): s for x, s in zip(uniq, ts)}
        wt2 = retimed.get(id(wr)) if wr is not None else None
        bt2 = retimed.get(id(best)) if best is not None else None
        ut2 = retimed.get(id(ur)) if ur is not None else None
        ot2 = retimed.get(id(orr)) if orr is not None else None
        row.update(
            walk_pick=wv or '', walk_time_s=fmt(wt2),
            all_best=best['meta']['variant'] if best else '',
            all_best_time_s=fmt(bt2),
            walk_over_all=fmt(wt2 / bt2, '.4f') if wt2 and bt2 else '',
            up_walk_pick=uv or '', up_walk_time_s=fmt(ut2),
            ours_over_up=fmt(wt2 / ut2, '.4f') if wt2 and ut2 else '',
            ours_compile_s=fmt(sum(served.by_variant[v].get('compile_s') or 0
                                   for v, _ in walk['seen']), '.3f'),
            up_compile_s=fmt(sum(up.items[k].get('compile_s') or 0
                                 for k in up_keys), '.3f')
            if up_keys else '',
            nwalk=len(walk['seen']), up_nwalk=len(up_walk['seen']),
            walk_seen=' '.join(v for v, _ in walk['seen']),
            ord_walk_pick=ov or '',
            ord_walk_over_all=fmt(ot2 / bt2, '.4f') if ot2 and bt2 else '',
            ord_over_up=fmt(ot2 / ut2, '.4f') if ot2 and ut2 else '',
            vendor_formulation=vend[0] if vend else '',
            vendor_time_s=fmt(vt2),
            ours_over_vendor=fmt(wt2 / vt2, '.4f') if wt2 and vt2 else '',
            up_over_vendor=fmt(ut2 / vt2, '.4f') if ut2 and vt2 else '',
            nfail=ours.fail + up.fail)
        return row
    finally:
        panels.free()


def vendor_best(dev, panels, A, beta, n, args):
    """(name, launch) of the fastest vendor formulation whose output
    passes the candidates' check (TOL), on dev's stream; None if none."""
    from gimmik.runtime import pick_vendor
    forms = args.runtime.vendor_formulations(A, 1.0, beta, np.float64, n=n,
                                             ldb=n, ldc=n)
    p = panels

    def check(launch):
        with dev.stream:
            err = p.check(lambda: launch(p.b, p.c, n, n, n))
        return None if err <= TOL else f'error {err:.2e}'

    def timed(launch):
        with dev.stream:
            return dev.time_median([lambda: launch(p.b, p.c, n, n, n)],
                                   max(3, args.repeats // 4))[0]
    best, _ = pick_vendor(forms, check, timed)
    return best[:2] if best else None


def cand_row(name, n, kind, rank, r, seen):
    meta = r.get('meta', {})
    return {'op': name, 'n': n, 'kind': kind, 'rank': rank,
            'variant': meta.get('variant', meta.get('tplname', '')),
            'time_s': fmt(r.get('time_s')) if 'time_s' in r and
            math.isfinite(r['time_s']) else '',
            'walk_seen': seen, 'registers': r.get('registers', ''),
            'local_mem': r.get('local_mem', ''),
            'shared_mem': r.get('shared_mem', ''),
            'compile_s': fmt(r.get('compile_s'), '.3f'),
            'error': fmt(r.get('err'), '.2e'),
            'status': r.get('status', 'not timed' if not r.get('error')
                            else r['error'][:300].replace('\n', ' '))}


def summarise(path):
    """Print: (op, n) with walk_over_all > 1.03; geomean ours_over_up over
    the operators PyFR sends; compile seconds per element type and order
    at the largest-population n."""
    if not os.path.exists(path):
        return
    with open(path) as f:
        rows = list(csv.DictReader(f))
    woa = [r for r in rows if r['walk_over_all']]
    miss = [r for r in woa if float(r['walk_over_all']) > 1.03]
    print(f'\n{len(rows)} (operator, n) rows; walk_over_all measured on '
          f'{len(woa)}, > 1.03 on {len(miss)}:')
    for r in sorted(miss, key=lambda r: -float(r['walk_over_all'])):
        print(f'  {r["op"]:13s} n={r["n"]:>8s} {r["walk_over_all"]} walk '
              f'{r["walk_pick"]} best {r["all_best"]}')
    owa = [r for r in rows if r.get('ord_walk_over_all')]
    if owa:
        om = [r for r in owa if float(r['ord_walk_over_all']) > 1.03]
        print(f'with gimmik.order: ord_walk_over_all > 1.03 on {len(om)} of '
              f'{len(owa)}, geomean '
              f'{geomean(r["ord_walk_over_all"] for r in owa):.4f} '
              f'(table order: '
              f'{geomean(r["walk_over_all"] for r in owa if r["walk_over_all"]):.4f})')
        for r in sorted(om, key=lambda r: -float(r['ord_walk_over_all'])):
            print(f'  {r["op"]:13s} n={r["n"]:>8s} {r["ord_walk_over_all"]} '
                  f'walk {r["ord_walk_pick"]} best {r["all_best"]}')
    sent = [r for r in rows if r['pyfr_sends'] == 'True' and
            r['ours_over_up']]
    for n in sorted({int(r['n']) for r in sent}):
        x = [float(r['ours_over_up']) for r in sent if int(r['n']) == n]
        worse = sum(v > 1 for v in x)
        print(f'n={n}: ours/upstream walk pick over {len(x)} operators PyFR '
              f'sends: geomean {geomean(x):.3f}, max {max(x):.3f}, '
              f'{worse} slower')
    x = [float(r['ours_over_up']) for r in sent]
    if x:
        print(f'all n: geomean {geomean(x):.3f} over {len(x)}')
    for col in ('ours_over_vendor', 'up_over_vendor'):
        x = [float(r[col]) for r in rows if r.get(col)]
        if x:
            print(f'{col} (time ratio, < 1 faster than the vendor): '
                  f'geomean {geomean(x):.3f} over {len(x)}, '
                  f'{sum(v > 1 for v in x)} above 1')
    # compile seconds per (etype, order): the first n target's rows
    comp = {}
    for r in rows:
        if r['pyfr_sends'] != 'True' or not r['up_compile_s']:
            continue
        key = (r['etype'], int(r['order']), int(r['n']))
        o, u = comp.get(key, (0.0, 0.0))
        comp[key] = (o + float(r['ours_compile_s'] or 0),
                     u + float(r['up_compile_s']))
    if comp:
        print('NVRTC seconds of the walk\'s candidates (operators PyFR sends;'
              ' ours / upstream), per element type, order and n:')
        for (e, p, n), (o, u) in sorted(comp.items()):
            print(f'  {e:5s} p{p} n={n:<8d} {o:7.2f} / {u:7.2f}')


if __name__ == '__main__':
    sys.exit(main())
