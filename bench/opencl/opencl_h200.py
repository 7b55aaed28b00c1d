"""PyFR 3.1's OpenCL GiMMiK provider replayed on an OpenCL device over this
project's OpenCLMatMul and over upstream GiMMiK 4.0's, for every operator of
the PyFR suite its filter sends (nnz <= gimmik-max-nnz, gimmik.pyfr), and
the two picks timed side by side.

What PyFR 3.1 does (pyfr/backends/opencl/gimmik.py and provider.py) and is
replayed: `OpenCLMatMul(alpha*A, beta=, aligne=alignb//itemsize, n=, ldb=,
ldc=)` with alignb the device's CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes;
`kernels(float64, kname='gimmik_mm_MxK', local_mem_size=<device's>)`; at
most 8 candidates, each built with `-cl-fast-relaxed-math -cl-std=CL2.0`,
launched with meta['global_work_size'] / meta['local_work_size'] on (b, c)
and timed on a profiling queue as 1 warm-up then 5 launches, (end of the
last - start of the first) / 5; feedback {'runtime': seconds}; a candidate
replaces the pick only below 0.95 x its time (autotune-ifac).

With --control upstream walks a second time and its second pick is timed
against its first (control_ratio): how far two walks of one package land
apart by chance, the yardstick for ours/upstream.

Then, per operator, each package's pick is checked once against float64
NumPy (C NaN-poisoned where beta = 0; max error relative to each element's
scale) and both picks and a device-to-device copy moving the bytes the
product moves (B read, C written, and read where beta != 0) are timed in
turn, --repeats rounds (each WARM launches, then the mean of TIMED launches'
own start-to-end times), reporting the median and the spread (max - min over
median).  An operator's kernels are built in a thread pool before its
walks (none while one is timed); each walk starts on a device kept busy
for WALK_WARM seconds, and the packages walk first in turn.  Rows are
appended as each operator finishes; no operator starts after --budget
seconds.

Device (NVIDIA's OpenCL, python 3.12, no network; from the project root):
    python3 -m venv /tmp/clv && /tmp/clv/bin/pip install -q --no-index \\
        --find-links .whl/pyfr --find-links .whl/mako pyopencl mako numpy tqdm
    PYTHONPATH=. /tmp/clv/bin/python bench/opencl/opencl_h200.py \\
        --icd nvidia --budget 480 --out "$OUT"
Here (PoCL's CPU device):

    PYTHONPATH=. python bench/opencl/opencl_h200.py --quick
"""

import argparse
import atexit
import concurrent.futures as cf
import csv
import ctypes.util
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from gimmik import pyfr as gpyfr  # noqa: E402 (no OpenCL loaded yet)

# PyFR 3.1's OpenCL provider: its filter, constants and walk, and options
PYFR_OPENCL = gpyfr.PROTOCOLS['3.1', 'opencl']
PYFR_FLAGS = ['-cl-fast-relaxed-math', '-cl-std=CL2.0']
NWARMUP, NBENCH = gpyfr.NWARMUP, PYFR_OPENCL.nbench
# the timing of the picks: launches before, then timed launches enough for
# ROUND seconds (at least TIMED)
WARM, TIMED, ROUND = 3, 20, 2e-3
# each walk starts on a device kept busy this long, the packages first in
# turn: neither walks on a GPU left idle by the builds (which did not explain
# the picks: opencl-h200-walk-warm.csv)
WALK_WARM = 0.05
# checked against float64 NumPy, relative to each element's scale
TOL = 1e-12
# quick: two small operators, one with beta = 1, at a CPU-sized n
QUICK_OPS = 'p1-hex-m0,p2-tet-m3'
QUICK_N = 8192

FIELDS = ['op', 'm', 'k', 'nnz', 'beta', 'n', 'aligne', 'ours_variant',
          'up_pick', 'ours_us', 'up_us', 'ratio', 'ours_spread',
          'up_spread', 'copy_us', 'copy_gbps', 'ours_copy_fraction',
          'up_copy_fraction', 'ours_err', 'up_err', 'ours_walk', 'up_walk',
          'ours_each', 'up_each', 'first_walk', 'control_pick',
          'control_us', 'control_ratio', 'device']

NVIDIA_DIRS = ('/usr/lib/x86_64-linux-gnu', '/usr/lib64', '/usr/lib',
               '/usr/local/nvidia/lib64', '/usr/local/cuda/lib64',
               '/usr/lib/wsl/lib')


def register_icd(lib):
    """Point the OpenCL loader at `lib` (a path, or 'nvidia': NVIDIA's
    libnvidia-opencl.so.1 found on this machine) through an ICD file in a
    temporary folder named by OCL_ICD_VENDORS; before pyopencl loads."""
    if lib == 'nvidia':
        found = [p for d in NVIDIA_DIRS
                 for p in sorted(glob.glob(f'{d}/libnvidia-opencl.so*'))]
        name = ctypes.util.find_library('nvidia-opencl')
        lib = found[0] if found else name
        if not lib:
            sys.exit('libnvidia-opencl.so.1 not found (pass --icd PATH)')
    if os.path.sep in lib:
        if not os.path.isfile(lib):
            sys.exit(f'--icd {lib}: no such file')
        lib = os.path.abspath(lib)
    d = tempfile.mkdtemp(prefix='gimmik-icd-')
    atexit.register(shutil.rmtree, d, True)
    with open(os.path.join(d, 'gimmik.icd'), 'w') as f:
        f.write(lib + '\n')
    os.environ['OCL_ICD_VENDORS'] = d
    return lib


def load_up(path):
    """Upstream GiMMiK from a wheel (installed with pip --target into a
    temporary folder) or a folder, imported beside ours (bench.upstream)."""
    from bench.upstream import load_upstream
    if path in _UP:
        return _UP[path]
    key = path
    if os.path.isfile(path):
        target = tempfile.mkdtemp(prefix='gimmik-up-')
        atexit.register(shutil.rmtree, target, True)
        r = subprocess.run([sys.executable, '-m', 'pip', 'install', '-q',
                            '--no-deps', '--no-index', '--target', target,
                            path], capture_output=True, text=True)
        if r.returncode == 0:
            path = target
    _UP[key] = load_upstream(path)
    return _UP[key]


_UP = {}     # the path given -> upstream loaded from it (once a process)


class Device:
    """The OpenCL device, its queue (profiling) and kernels built ahead."""

    def __init__(self, device, jobs):
        from gimmik.runtime.opencl import Runtime
        import pyopencl as cl
        self.cl = cl
        self.rt = Runtime(device=device)
        self.dev, self.ctx, self.queue = self.rt.dev, self.rt.ctx, \
            self.rt.queue
        if not self.dev.double_fp_config:
            sys.exit(f'{self.rt.device} has no float64')
        self.alignb = self.dev.mem_base_addr_align // 8
        self.local_mem_size = int(self.dev.local_mem_size)
        self.pool = cf.ThreadPoolExecutor(jobs)
        self.flags = list(PYFR_FLAGS)
        self.built = {}     # source -> future of the built program
        self.kernels = {}

    def build_ahead(self, sources):
        for src in sources:
            if src not in self.built:
                self.built[src] = self.pool.submit(self._build, src)

    def _build(self, src):
        t = time.perf_counter()
        try:
            prg = self.cl.Program(self.ctx, src).build(options=self.flags)
        except self.cl.Error as e:
            # a driver refusing PyFR's -cl-std: the same kernel without it
            if 'BUILD_OPTIONS' not in str(e) or '-cl-std=CL2.0' not in \
                    self.flags:
                raise
            self.flags = [f for f in self.flags if f != '-cl-std=CL2.0']
            print(f'the driver refuses -cl-std=CL2.0 ({e}); building with '
                  f'{self.flags}', flush=True)
            prg = self.cl.Program(self.ctx, src).build(options=self.flags)
        return prg, time.perf_counter() - t

    def kernel(self, src, kname):
        """The kernel of src (one instance a source: the walk sets its
        arguments before each use)."""
        kern = self.kernels.get(src)
        if kern is None:
            self.build_ahead([src])
            prg, _ = self.built[src].result()
            kern = self.kernels[src] = self.cl.Kernel(prg, kname)
        return kern

    def launch(self, kern, meta, b, c, n):
        """One launch as PyFR's provider makes it; returns the event."""
        cl = self.cl
        args = {'b': b, 'c': c}
        if set(meta['args']) - set(args):
            raise ValueError(f"PyFR passes (b, c), not {meta['args']}")
        kern.set_args(*[args[a] for a in meta['args']])
        ls = meta.get('local_work_size')
        return cl.enqueue_nd_range_kernel(
            self.queue, kern, tuple(meta['global_work_size']),
            None if ls is None else tuple(ls))

    def pyfr_time(self, fn):
        """PyFR's _benchmark: 1 warm-up, 5 timed, (end - start) / 5."""
        start = end = None
        for i in range(NBENCH + NWARMUP):
            evt = fn()
            if i == NWARMUP:
                start = evt
            end = evt
        self.queue.finish()
        return (end.profile.end - start.profile.start)*1e-9 / NBENCH

    def busy(self, fn, seconds):
        """Launch fn back to back for `seconds` of device time (the
        clocks up before a walk)."""
        t = time.perf_counter()
        while time.perf_counter() - t < seconds:
            for _ in range(10):
                fn()
            self.queue.finish()

    def mean_time(self, fn, launches=TIMED):
        # each launch's own start-to-end: the gaps between launches are the
        # host's enqueue rate, not the kernel (small kernels run ~10 us)
        for _ in range(WARM):
            fn()
        evts = [fn() for _ in range(launches)]
        self.queue.finish()
        return (sum(e.profile.end - e.profile.start for e in evts)*1e-9
                / launches)


def render_ahead(gen_cls, A, beta, aligne, n, ld, kname, lmem, limit=10):
    """The sources a walk of gen_cls is likely to build (the first
    `limit` of kernels() without feedback), to build ahead."""
    try:
        mm = gen_cls(A, beta=beta, aligne=aligne, n=n, ldb=ld, ldc=ld)
        out = []
        for src, _ in mm.kernels(np.float64, kname=kname,
                                 local_mem_size=lmem):
            out.append(src)
            if len(out) >= limit:
                break
        return out
    except Exception:
        return []      # the walk reports it


def walk(dev, gen_cls, A, beta, aligne, n, ld, kname, b, c, nkerns):
    """PyFR 3.1's provider loop (gimmik.pyfr.walk); (pick (src, meta,
    seconds) or None, [(variant, seconds)])."""
    mm = gen_cls(A, beta=beta, aligne=aligne, n=n, ldb=ld, ldc=ld)
    kgen = PYFR_OPENCL.kernels(mm, np.float64, kname,
                               local_mem_size=dev.local_mem_size)
    timed = []

    def time_candidate(src, meta):
        kern = dev.kernel(src, kname)
        timed.append((src, meta,
                      dev.pyfr_time(lambda: dev.launch(kern, meta, b, c, n))))
        return timed[-1][2]
    w = gpyfr.walk(PYFR_OPENCL, kgen, time_candidate, nkerns=nkerns)
    return (timed[w['pick']] if w['pick'] is not None else None), timed


def check(dev, kern, meta, A, beta, b_host, c_host, n, ld):
    """The pick's max error relative to each element's scale, on a fresh
    C (NaN where beta = 0)."""
    from pyopencl import array as cla
    from gimmik.verify import reference, rel_error
    c0 = c_host.copy()
    if not beta:
        c0[:, :n] = np.nan
    cbuf = cla.to_device(dev.queue, c0)
    bbuf = cla.to_device(dev.queue, b_host)
    dev.launch(kern, meta, bbuf.data, cbuf.data, n)
    out = cbuf.get(dev.queue)
    ref, scale = reference(A, b_host[:, :n], beta, c_host[:, :n])
    return rel_error(out[:, :n], ref, scale)


def run_op(dev, name, A, beta, n, up, repeats, nkerns, each=False,
           turn=0, control=False):
    from pyopencl import array as cla
    from gimmik.analysis import analyse
    from gimmik.opencl import OpenCLMatMul
    from gimmik.runtime import moved_bytes
    m, k = A.shape
    aligne = dev.alignb // 8
    ld = -(-n // aligne)*aligne
    kname = f'gimmik_mm_{m}x{k}'
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    b_host = rng.standard_normal((k, ld))
    c_host = rng.standard_normal((m, ld))
    b = cla.to_device(dev.queue, b_host)
    c = cla.to_device(dev.queue, c_host)
    # the control: upstream walked a second time, its pick timed against
    # the first's (how far two walks of one package differ by chance)
    gens = [('ours', OpenCLMatMul), ('up', up.OpenCLMatMul)] + (
        [('up2', up.OpenCLMatMul)] if control else [])
    turn %= len(gens)
    gens = gens[turn:] + gens[:turn]
    # every source of both walks built before either is timed: PyFR builds
    # each before timing it, so no build may run during a walk (under
    # background builds, of eight walked the first timed 1.39x its own
    # launches, the last three 1.22-1.25x: opencl-h200-walk-staged.csv)
    # (the control walks the generator upstream walks: its sources once)
    srcs = [src for gen in dict.fromkeys(g for _, g in gens)
            for src in render_ahead(gen, A, beta, aligne, n, ld, kname,
                                    dev.local_mem_size, nkerns)]
    dev.build_ahead(srcs)
    cf.wait([dev.built[src] for src in srcs])
    # the copy moving the product's bytes: B read, C written (and read)
    moved = moved_bytes(analyse(A), beta, n, 8)
    half = max(8, moved // 2 // 8 * 8)
    csrc = dev.cl.Buffer(dev.ctx, dev.cl.mem_flags.READ_WRITE, half)
    cdst = dev.cl.Buffer(dev.ctx, dev.cl.mem_flags.READ_WRITE, half)
    dev.cl.enqueue_fill_buffer(dev.queue, csrc, np.float64(1.0), 0, half)

    def copy():
        return dev.cl.enqueue_copy(dev.queue, cdst, csrc)
    picks, walks = {}, {}
    for label, gen in gens:
        dev.busy(copy, WALK_WARM)
        pick, timed = walk(dev, gen, A, beta, aligne, n, ld, kname, b.data,
                           c.data, nkerns)
        picks[label], walks[label] = pick, timed
    errs = {}
    kerns = {}
    for label, pick in picks.items():
        if pick is None:
            errs[label] = None
            continue
        kerns[label] = dev.kernel(pick[0], kname)
        errs[label] = check(dev, kerns[label], pick[1], A, beta, b_host,
                            c_host, n, ld)
    timers = {label: (lambda kern=kerns[label], meta=picks[label][1]:
                      dev.launch(kern, meta, b.data, c.data, n))
              for label in kerns}
    timers['copy'] = copy
    times = {label: [] for label in timers}
    walked = [p[2] for p in picks.values() if p] or [ROUND]
    launches = int(min(500, max(TIMED, ROUND / min(walked))))
    for _ in range(repeats):
        for label, fn in timers.items():
            times[label].append(dev.mean_time(fn, launches))
    med = {label: statistics.median(t) for label, t in times.items()}
    spread = {label: (max(t) - min(t))/med[label] for label, t in
              times.items()}

    def ratio(label):
        return (f'{med[label]/med["up"]:.4f}'
                if label in med and 'up' in med else '')

    def us(label):
        return f'{med[label]*1e6:.2f}' if label in med else ''

    def frac(label):
        return f'{med["copy"]/med[label]:.4f}' if label in med else ''

    return {
        'op': name, 'm': m, 'k': k, 'nnz': int(np.count_nonzero(A)),
        'beta': beta, 'n': n, 'aligne': aligne,
        'ours_variant': picks['ours'][1]['variant'] if picks['ours'] else '',
        'up_pick': picked_name(picks['up']),
        'ours_us': us('ours'), 'up_us': us('up'), 'ratio': ratio('ours'),
        'ours_spread': f'{spread.get("ours", float("nan")):.3f}',
        'up_spread': f'{spread.get("up", float("nan")):.3f}',
        'copy_us': us('copy'), 'copy_gbps': f'{2*half/med["copy"]/1e9:.1f}',
        'ours_copy_fraction': frac('ours'), 'up_copy_fraction': frac('up'),
        'ours_err': '' if errs['ours'] is None else f'{errs["ours"]:.2e}',
        'up_err': '' if errs['up'] is None else f'{errs["up"]:.2e}',
        'ours_walk': ' '.join(f'{variant(m)}:{t*1e6:.1f}'
                              for _, m, t in walks['ours']),
        'up_walk': ' '.join(f'{variant(m)}:{t*1e6:.1f}'
                            for _, m, t in walks['up']),
        'ours_each': every(dev, walks['ours'], kname, b, c, n,
                           launches) if each else '',
        'up_each': every(dev, walks['up'], kname, b, c, n,
                         launches) if each else '',
        'first_walk': gens[0][0],
        'control_pick': picked_name(picks.get('up2')),
        'control_us': us('up2'), 'control_ratio': ratio('up2'),
        'device': dev.rt.device,
    }


def picked_name(pick):
    """variant() of a walk's pick, '' where it picked nothing."""
    return variant(pick[1]) if pick else ''


def variant(meta):
    return meta.get('variant') or meta.get('tplname', '?') + (
        f"/width{meta['width']}" if meta.get('width', 1) != 1 else '')


def every(dev, timed, kname, b, c, n, launches, repeats=3):
    """'variant:us ...': each walked candidate's own launch time (the
    median of `repeats` rounds), where the walk's times hold enqueue gaps."""
    out = []
    for src, meta, _ in timed:
        kern = dev.kernel(src, kname)
        ts = [dev.mean_time(lambda: dev.launch(kern, meta, b.data, c.data, n),
                            launches) for _ in range(repeats)]
        out.append(f'{variant(meta)}:{statistics.median(ts)*1e6:.2f}')
    return ' '.join(out)


def operators(globs, path):
    from gimmik.operators import default_beta, suite
    proto = PYFR_OPENCL
    ops = suite(globs, path)
    names = [k for k in ops if proto.sends(ops[k])]
    # smallest first: a run cut by the budget still covers every kind
    names.sort(key=lambda k: (ops[k].size, k))
    return [(k, ops[k], default_beta(k)) for k in names], proto


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', default='.', help='output folder')
    ap.add_argument('--name', default='opencl-walk',
                    help='NAME.csv and NAME-walks.json in --out')
    ap.add_argument('--ops', default='*', help='fnmatch globs, comma-separated')
    ap.add_argument('--suite', default=None, help='operator .npz (default: '
                    "the PyFR suite)")
    ap.add_argument('--n', type=int, default=110080)
    ap.add_argument('--repeats', type=int, default=5)
    ap.add_argument('--budget', type=float, default=None, metavar='S',
                    help='start no operator after S seconds')
    ap.add_argument('--quick', action='store_true',
                    help=f'{QUICK_OPS} at n = {QUICK_N} (a CPU device)')
    ap.add_argument('--icd', default=None, metavar='LIB',
                    help="register an OpenCL driver library first ('nvidia' "
                    'finds libnvidia-opencl.so.1)')
    ap.add_argument('--device', type=int, default=None,
                    help='OpenCL device index over all platforms (default: '
                    'the first GPU, else the first device)')
    ap.add_argument('--upstream', default=None,
                    help='upstream GiMMiK 4.0 wheel or folder (default: '
                    '.whl/pyfr/gimmik-4.0-py3-none-any.whl)')
    ap.add_argument('--jobs', type=int, default=min(8, os.cpu_count() or 1))
    ap.add_argument('--each', action='store_true',
                    help="also time each walked candidate's own launches")
    ap.add_argument('--control', action='store_true',
                    help='walk upstream twice and time its second pick '
                    'against its first (control_ratio: the walk\'s chance)')
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.quick:
        args.ops = QUICK_OPS if args.ops == '*' else args.ops
        args.n = QUICK_N if args.n == 110080 else args.n
    if args.n < 1 or args.repeats < 1:
        ap.error('--n and --repeats must be positive')
    if args.icd:
        print(f'ICD: {register_icd(args.icd)}', flush=True)
    up_path = args.upstream or os.path.join(
        ROOT, '.whl', 'pyfr', 'gimmik-4.0-py3-none-any.whl')
    up = load_up(up_path)
    dev = Device(args.device, args.jobs)
    if args.icd == 'nvidia' and not dev.dev.type & dev.cl.device_type.GPU:
        sys.exit(f'no NVIDIA GPU among the OpenCL devices (chose '
                 f'{dev.rt.device}): is the driver\'s OpenCL library '
                 f'loadable?')
    ops, proto = operators(args.ops, args.suite)
    peak = dev.rt.copy_bandwidth((256 if args.quick else 1024) << 20)/1e9
    print(f'{dev.rt.device}: alignb {dev.alignb} B, local memory '
          f'{dev.local_mem_size} B, copy {peak:.0f} GB/s; {len(ops)} '
          f'operators, n = {args.n}; upstream from {up.__file__}',
          flush=True)
    os.makedirs(args.out, exist_ok=True)
    csv_path = os.path.join(args.out, f'{args.name}.csv')
    json_path = os.path.join(args.out, f'{args.name}-walks.json')
    rows, done = [], []
    last = 0.0
    with open(csv_path, 'w', newline='') as f:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        for i, (name, A, beta) in enumerate(ops):
            el = time.perf_counter() - t0
            if args.budget is not None and el + 1.5*last > args.budget:
                print(f'budget: stopped before {name} at {el:.0f} s '
                      f'({len(ops) - i} operators left)', flush=True)
                break
            t = time.perf_counter()
            try:
                # the packages walk first in turn
                row = run_op(dev, name, A, beta, args.n, up, args.repeats,
                             proto.nkerns, args.each, turn=i,
                             control=args.control)
            except Exception as e:      # one operator's failure is a row
                row = {'op': name, 'ours_walk': f'error: {type(e).__name__}:'
                       f' {e}'[:300], 'device': dev.rt.device}
            last = time.perf_counter() - t
            w.writerow(row)
            f.flush()
            rows.append(row)
            done.append(name)
            print(f"{name}: ours {row.get('ours_variant')} "
                  f"{row.get('ours_us')} us, up {row.get('up_pick')} "
                  f"{row.get('up_us')} us, ratio {row.get('ratio')} "
                  f"({last:.1f} s)", flush=True)
    dev.pool.shutdown(wait=False, cancel_futures=True)
    with open(json_path, 'w') as f:
        json.dump({'device': dev.rt.device, 'n': args.n,
                   'copy_gbps_peak': peak, 'rows': rows}, f, indent=1)
    ratios = [float(r['ratio']) for r in rows if r.get('ratio')]
    if ratios:
        g = float(np.exp(np.mean(np.log(ratios))))
        worst = max(rows, key=lambda r: float(r.get('ratio') or 0))
        bad = [r['op'] for r in rows
               if any(r.get(e) and float(r[e]) > TOL
                      for e in ('ours_err', 'up_err'))]
        print(f'{len(ratios)} of {len(ops)} operators: ours / up geomean '
              f'{g:.3f}, worst {worst["ratio"]} ({worst["op"]}), above '
              f'1.03: {sum(x > 1.03 for x in ratios)}; errors above {TOL}: '
              f'{bad or "none"}; {time.perf_counter() - t0:.0f} s',
              flush=True)
    control = [float(r['control_ratio']) for r in rows
               if r.get('control_ratio')]
    if control:
        print(f'control (upstream walked twice): {len(control)} operators, '
              f'above 1.03: {sum(x > 1.03 for x in control)}, worst '
              f'{max(control):.3f}', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
