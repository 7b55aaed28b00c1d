"""The device side of bench/pyfr/pyfr_walk.py: NVRTC compiles in a process
pool (as PyFR compiles), the device, the panels on it with gimmik.verify's
reference, each candidate checked once and timed PyFR's way, and the
vendor's best."""

import concurrent.futures as cf
import ctypes
import hashlib
import math
import multiprocessing as mp
import signal
import time

import numpy as np

from bench.pyfr.walk_replay import (PYFR_CUDA, PYFR_FLAGS, kname_of,
                                    launch_args, ours_mm, up_mm)
from bench.upstream import load_upstream
from gimmik.pyfr import NWARMUP
from gimmik.verify import reference, rel_error

TOL = 1e-12              # gimmik.verify's error of an f64 result


# -- the render/compile pool -----------------------------------------------

def _die_with_parent():
    # Linux: a worker gets SIGKILL when the run ends (os._exit, `timeout`'s
    # SIGTERM); orphaned, spawned workers wait for work forever and hold the
    # run's stdout open, so a `| tail` never ended
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)    # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def compile_pool(jobs):
    """The runs' process pool: spawned workers that end with the run."""
    return cf.ProcessPoolExecutor(jobs, mp_context=mp.get_context('spawn'),
                                  initializer=_die_with_parent)


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


_worker_cache = {}


def _task_ours(A, beta, n, cc, indices):
    """Render and compile candidates `indices` of ours for (A, beta, n)."""
    key = (A.tobytes(), A.shape, beta, n, cc)
    if key not in _worker_cache:
        if len(_worker_cache) >= 4:
            _worker_cache.pop(next(iter(_worker_cache)))
        mm = ours_mm(A, beta, n)
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
    mm = up_mm(up, A, beta, n)
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

def rotated(items, start):
    """items from index start (mod their number) round to the one before."""
    start %= max(1, len(items))
    return items[start:] + items[:start]


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
        from gimmik.runtime.cuda import prefer_l1
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
        prefer_l1(fn.ptr, attrs['local_mem'], attrs['shared_mem'])
        return fn, attrs

    def launch(self, fn, meta, b, c):
        grid, block, args = launch_args(meta, b, c)
        fn(grid, block, args, 0, self.stream)

    def copy_launch(self, nbytes):
        """A launch function of a device-to-device copy moving nbytes
        (nbytes/2 read and written) on this stream, the reference a kernel
        moving as many bytes is measured against."""
        cp = self.cupy
        half = int(nbytes) // 2 // 16 * 16
        src = cp.zeros(half, dtype=np.uint8)
        dst = cp.empty_like(src)

        def copy():
            cp.cuda.runtime.memcpyAsync(
                dst.data.ptr, src.data.ptr, half,
                cp.cuda.runtime.memcpyDeviceToDevice, self.stream.ptr)
        return copy

    def time_pyfr(self, fn, meta, b, c):
        """PyFR's _benchmark: events around nbench launches after the
        warm-up ones, mean, in seconds."""
        cp = self.cupy
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        for i in range(PYFR_CUDA.nbench + NWARMUP):
            if i == NWARMUP:
                start.record(self.stream)
            self.launch(fn, meta, b, c)
        stop.record(self.stream)
        stop.synchronize()
        return cp.cuda.get_elapsed_time(start, stop)*1e-3 / PYFR_CUDA.nbench

    def time_median(self, launches, repeats):
        """Median seconds of each launch function, interleaved in an order
        rotated every repetition, each timed launch right after an untimed
        one of its own: warm, as PyFR's walk times, whatever ran before it
        (in a fixed order the first launch always ran after the copy had
        pushed its panels out of L2)."""
        cp = self.cupy
        out = [[] for _ in launches]
        for rep in range(repeats):
            for j in rotated(list(range(len(launches))), rep):
                f = launches[j]
                f()
                s, e = cp.cuda.Event(), cp.cuda.Event()
                s.record(self.stream)
                f()
                e.record(self.stream)
                e.synchronize()
                out[j].append(cp.cuda.get_elapsed_time(s, e)*1e-3)
        return [float(np.median(t)) for t in out]


class DevicePanels:
    """B, C (k x n, m x n, f64, ldb = ldc = n) on the device, C poisoned
    with NaN where beta is 0, and gimmik.verify's float64 reference and
    per-element scale computed there (cuBLAS)."""

    def __init__(self, dev, A, beta, n, seed):
        cp = dev.cupy
        rng = cp.random.default_rng(seed)
        m, k = A.shape
        self.dev, self.A, self.beta = dev, np.asarray(A, np.float64), beta
        self.b = rng.standard_normal((k, n))
        self.c = cp.empty((m, n))
        self.c0 = rng.standard_normal((m, n)) if beta else None
        self.rereference()

    def rereference(self):
        """The reference of B as it is now (after a kernel wrote it)."""
        self.ref, self.scale = reference(self.A, self.b, self.beta, self.c0)

    def reset(self):
        if self.beta:
            self.c[...] = self.c0
        else:
            self.c.fill(np.nan)

    def check(self, run):
        """gimmik.verify.rel_error of one run's C (inf for a NaN)."""
        self.reset()
        run()
        return rel_error(self.c, self.ref, self.scale)

    def free(self):
        self.b = self.c = self.c0 = self.ref = self.scale = None
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


def vendor_best(dev, panels, A, beta, n, runtime, repeats):
    """(name, launch) of the fastest vendor formulation whose output
    passes the candidates' check (TOL), on dev's stream; None if none."""
    from gimmik.runtime import pick_vendor
    forms = runtime.vendor_formulations(A, 1.0, beta, np.float64, n=n,
                                        ldb=n, ldc=n)
    p = panels

    def check(launch):
        with dev.stream:
            err = p.check(lambda: launch(p.b, p.c, n, n, n))
        return None if err <= TOL else f'error {err:.2e}'

    def timed(launch):
        with dev.stream:
            return dev.time_median([lambda: launch(p.b, p.c, n, n, n)],
                                   max(3, repeats // 4))[0]
    best, _ = pick_vendor(forms, check, timed)
    return best[:2] if best else None
