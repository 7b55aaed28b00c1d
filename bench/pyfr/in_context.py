"""Time CUDA kernels in PyFR's place: ours against upstream GiMMiK 4.0's
pick, with the rest of a PyFR step around them.

In a PyFR step the panel B of an operator was usually just written by the
kernel before (an RK update, an interpolation) and C is read by the kernel
after; between two calls of the same operator the rest of the step's
working set passes through L2.  Which lines a kernel finds in L2, and
which it leaves there for the next kernel, decide its time as much as its
own loop does.  Per repetition and contender this harness runs, in one
stream:

    traffic   reads and writes the flush buffer (the rest of the step's
              working set, see step_working_set; capped at --flush-cap-mib,
              a few L2s: beyond that more traffic evicts nothing more)
    producer  writes B (write-only: each element a hash of its index)
    kernel    the contender
    consumer  reads C (a sum into one value)

and times producer + kernel + consumer (ctx_*) and the kernel inside that
sequence (kctx_*), medians over the repetitions (--repeats, more for short
sequences: each contender timed --min-timed-ms in all, at most
--max-repeats); contenders alternate, each repetition starting at the
next one.  The hot loop (hot_*: PyFR's own timing, nbench launches after a
warm-up, mean; median over the repetitions) is the second column.

Contenders per (operator, n): the pick of PyFR 3.1's provider walk over our
CUDAMatMul and over upstream's (replayed as bench/pyfr/pyfr_walk.py does, every
output checked against cuBLAS before it is timed); with --first8 every
candidate our walk saw; with --policies, our pick rendered with other
memory policies (policy_variant: plain or other cache-hinted loads of B and
stores of C, 32-bit row strides, no or other launch bounds), each checked
like the others.

Sizes.  n ~ 1.1e5 and ~ 5.5e5 columns (n = nvars x neles, PyFR's padding);
the working set of the step around it is that of an Euler RK4 step on the
same number of elements of the operator's element type and order
(step_working_set: solution registers, flux, flux-point values, geometry),
from the operator suite's point counts.  The meshes of bench/pyfr/pyfr_e2e.sh
(order 4: hex 28^3 = 21952, pri 2 x 22^3 = 21296, pyr 6 x 16^3 = 24576,
tet 6 x 18^3 = 34992 elements) are n ~ 1.1e5 to 1.75e5; for example hex p4
at n = 110080 (22016 elements): a working set of 1193 MiB, far above the
H100's 50 MiB L2, so the flush runs at its cap.

Output (--out, --name): NAME.csv, one row per (operator, n), with
ours_over_up (in-context time ratio, the criterion), kctx_ours_over_up and
hot_ours_over_up; NAME-candidates.csv, one row per contender.  Resumable;
no new operator after --budget s.

    pip download gimmik==4.0 --no-deps -d .whl        # upstream's wheel
    PYTHONPATH=. python3 bench/pyfr/in_context.py --up .whl/gimmik-4.0-*.whl \\
        --n 110080 550400 --ops 'p[1-6]-*' --budget 420 \\
        [--first8] [--policies default] [--suite bench/operators/...]

The pure parts (sizes, policies, sequencing, ratios, CSV) are unit-tested
with a fake timer in bench/tests/test_in_context.py.
"""

import argparse
import collections
import csv
import math
import os
import re
import statistics
import sys
import time
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench import OPERATORS, RESULTS  # noqa: E402
from bench.pyfr import pyfr_walk as pw  # noqa: E402
from bench.pyfr import walk_replay as replay  # noqa: E402
from bench.pyfr import walk_report as report  # noqa: E402
from bench.pyfr import walk_timing as timing  # noqa: E402
from bench.upstream import load_upstream  # noqa: E402
from gimmik import pyfr as gpyfr  # noqa: E402
from gimmik.operators import default_beta, parse_name  # noqa: E402

N_TARGETS = (110080, 550400)
# PyFR's RK4 ('scheme = rk4', bench/pyfr/pyfr_e2e.sh's cases) keeps three
# solution registers
RK4_REGISTERS = 3
FLUSH_CAP_MIB = 256
REPEATS = 30
WARMUP = 2
# in-context repetitions: each contender timed at least MIN_TIMED_S in all
# (traffic included), at most MAX_REPEATS times
MIN_TIMED_S = 0.05
MAX_REPEATS = 300
# candidates of ours compiled ahead for the walk (it sees 8; pruning may
# skip some)
WALK_AHEAD = 10

# -- sizes ------------------------------------------------------------------


def ndims_of(etype):
    return 2 if etype in ('quad', 'tri') else 3


def points_of(ops, order, etype):
    """(nupts, nfpts) of an element type and order: M0 maps the solution
    points to the flux points, so its shape is (nfpts, nupts)."""
    key = f'p{order}-{etype}-m0'
    if key not in ops:
        raise KeyError(f'no {key} in the suite for the point counts')
    nfpts, nupts = np.shape(ops[key])
    return nupts, nfpts


def step_working_set(etype, nupts, nfpts, neles, nregs=RK4_REGISTERS,
                     itemsize=8):
    """Bytes an Euler RK stage of PyFR touches on neles elements: per
    element nregs solution registers and the flux (ndims x nvars) at the
    solution points, the solution and the common flux at the flux points,
    the metric terms (ndims^2 + 1 Jacobian terms a solution point) and the
    normals and their magnitudes at the flux points."""
    nd, nv = ndims_of(etype), gpyfr.euler_nvars(etype)
    per_ele = ((nregs*nv + nd*nv + nd*nd + 1)*nupts
               + (2*nv + nd + 1)*nfpts)
    return itemsize*neles*per_ele


def flush_bytes(working_set, b_bytes, c_bytes, cap=FLUSH_CAP_MIB << 20):
    """Traffic between two calls: the working set less this kernel's B and
    C, at most cap, never negative."""
    return max(0, min(working_set - b_bytes - c_bytes, cap))


# -- memory policies: source variants of a rendered CUDA kernel ------------

# a B load: one of the cache-hinted intrinsics on a pointer into b (a
# scalar `(b + ...)` or a vector `(const double2*)(b + ...)`)
_B_LOAD = re.compile(r'__ld(?:g|cs|cg|ca|lu)\((?=\((?:const \w+\*\))?\(?b\b)')
# a load of C's old values (beta != 0): `(c + ...)`, `c + ...` or a vector
# `(const double2*)(cr + ...)` of the tiles
_C_LOAD = re.compile(r'__ld(?:g|cs|cg|ca|lu)\((?=\(?(?:const \w+\*\))?\(?cr?\b)')
_C_STORE = re.compile(r'__st(?:cs|cg|wb|wt)\((?=\(?(?:\w+\*\))?\(?c)')
_STRIDES = re.compile(r'const long ldbl = ([^,;]+), ldcl = ([^;]+);')
_BOUNDS = re.compile(r'__launch_bounds__\((\d+)(?:, *\d+)?\)')

# plain accesses as macros: PyFR (and pyfr_walk.nvrtc_compile) wrap the
# source in extern "C", where templates and overloads are not allowed; the
# stored value may hold commas (double2{x, y})
PLAIN_HELPERS = '''\
#define gimmik_ctx_ld(p) (*(p))
#define gimmik_ctx_st(p, ...) (*(p) = (__VA_ARGS__))
'''

# each policy: the B loads' intrinsic (None: plain), the C stores', the
# row strides' type, the launch bounds (keep, 'threads': no minimum of
# blocks, 'none')
POLICIES = {
    'ldplain': ('ld', None), 'ldnc': ('ld', '__ldg'),
    'ldcg': ('ld', '__ldcg'), 'ldcs': ('ld', '__ldcs'),
    'ldcplain': ('ldc', None), 'ldccg': ('ldc', '__ldcg'),
    'stplain': ('st', None), 'stcg': ('st', '__stcg'),
    'stcs': ('st', '__stcs'), 'stwb': ('st', '__stwb'),
    'idx32': ('idx', 'int'),
    'nominblocks': ('bounds', 'threads'), 'nobounds': ('bounds', 'none'),
}
# what --policies default times: each change alone and upstream's way
# (plain loads and stores, 32-bit strides, no launch bounds)
DEFAULT_POLICIES = ('ldplain', 'stplain', 'ldplain+stplain', 'stcg', 'stcs',
                    'idx32', 'nominblocks',
                    'ldplain+stplain+idx32+nobounds')


def parse_policies(spec):
    """'default' or a comma-separated list of '+'-joined POLICIES names ->
    tuple of canonical specs; ValueError naming an unknown one."""
    if spec in (None, ''):
        return ()
    specs = DEFAULT_POLICIES if spec == 'default' else spec.split(',')
    out = []
    for s in specs:
        parts = s.split('+')
        bad = [p for p in parts if p not in POLICIES]
        if bad:
            raise ValueError(f'unknown memory policy {bad[0]!r} (one of '
                             f'{", ".join(POLICIES)})')
        kinds = [POLICIES[p][0] for p in parts]
        if len(set(kinds)) != len(kinds):
            raise ValueError(f'policy {s!r} sets one thing twice')
        out.append('+'.join(parts))
    return tuple(dict.fromkeys(out))


def policy_variant(src, spec, max_offset):
    """src with the memory policy spec ('+'-joined POLICIES) applied, or
    None where it changes nothing (e.g. no B load of that kind: mma-gemm
    stages B by cp.async).  max_offset: the largest element offset a
    kernel forms (max((k - 1)*ldb, (m - 1)*ldc) + n); idx32 raises
    ValueError where it does not fit 31 bits."""
    out = src
    for name in spec.split('+'):
        kind, val = POLICIES[name]
        if kind == 'ld':
            out = _B_LOAD.sub((val or 'gimmik_ctx_ld') + '(', out)
        elif kind == 'ldc':
            out = _C_LOAD.sub((val or 'gimmik_ctx_ld') + '(', out)
        elif kind == 'st':
            out = _C_STORE.sub((val or 'gimmik_ctx_st') + '(', out)
        elif kind == 'idx':
            if max_offset >= 2**31:
                raise ValueError(f'idx32: offsets up to {max_offset} do not '
                                 'fit 32-bit strides')
            out = _STRIDES.sub(r'const int ldbl = \1, ldcl = \2;', out)
        elif val == 'threads':
            out = _BOUNDS.sub(r'__launch_bounds__(\1)', out)
        else:
            out = _BOUNDS.sub('', out)
    if out == src:
        return None
    if 'gimmik_ctx_' in out:
        out = PLAIN_HELPERS + out
    return out


# -- the timing, over an injectable timer -----------------------------------

Stage = collections.namedtuple('Stage', 'name launch')


def repeats_for(warm_s, repeats, min_timed_s=0.0, max_repeats=None):
    """Timed repetitions: at least `repeats`, more where one sequence of
    the slowest contender (warm_s seconds, from the warm-up) times that
    many fall short of min_timed_s, at most max_repeats.  Short kernels
    differ by a few per cent in context; their medians need more samples
    than the long ones' to rank them."""
    if not min_timed_s or warm_s <= 0:
        return repeats
    want = math.ceil(min_timed_s / warm_s)
    if max_repeats is not None:
        want = min(want, max_repeats)
    return max(repeats, want)


def measure_in_context(timer, contenders, traffic, producer, consumer,
                       repeats=REPEATS, warmup=WARMUP, min_timed_s=0.0,
                       max_repeats=MAX_REPEATS):
    """{name: {'ctx_s', 'kctx_s'}}: medians over the repetitions of
    producer + kernel + consumer and of the kernel alone, each sequence
    traffic, producer, kernel, consumer timed by timer.sequence (a list of
    Stages -> seconds each).  Repetition r runs the contenders in turn
    from the r-th; the first `warmup` repetitions are not counted.  With
    min_timed_s the count of timed repetitions is repeats_for the
    slowest contender's last warm-up sequence (traffic included)."""
    tot = {c.name: [] for c in contenders}
    ker = {c.name: [] for c in contenders}
    warm = {}
    rep = 0
    while rep < warmup + repeats:
        for c in timing.rotated(list(contenders), rep):
            ts = timer.sequence([traffic, producer, c, consumer])
            if len(ts) != 4:
                raise RuntimeError(f'timer gave {len(ts)} times for 4 '
                                   'stages')
            if rep >= warmup:
                tot[c.name].append(ts[1] + ts[2] + ts[3])
                ker[c.name].append(ts[2])
            else:
                warm[c.name] = sum(ts)
        rep += 1
        if rep == warmup and warm:
            repeats = repeats_for(max(warm.values()), repeats, min_timed_s,
                                  max_repeats)
    return {k: {'ctx_s': statistics.median(tot[k]),
                'kctx_s': statistics.median(ker[k])} for k in tot}


def measure_hot(timer, contenders, repeats=REPEATS,
                nbench=replay.PYFR_CUDA.nbench, nwarmup=gpyfr.NWARMUP):
    """{name: seconds}: PyFR's timing (nbench launches after nwarmup, back
    to back, mean), median over the repetitions, contenders in turn."""
    out = {c.name: [] for c in contenders}
    for rep in range(repeats):
        for c in timing.rotated(list(contenders), rep):
            ts = timer.sequence([c]*(nwarmup + nbench))
            out[c.name].append(sum(ts[nwarmup:]) / nbench)
    return {k: statistics.median(v) for k, v in out.items()}


class EventTimer:
    """timer.sequence on a device: CUDA events around each launch of one
    stream, one synchronisation at the end."""

    def __init__(self, cupy, stream):
        self.cupy, self.stream = cupy, stream

    def sequence(self, stages):
        cp = self.cupy
        ev = [cp.cuda.Event() for _ in range(len(stages) + 1)]
        ev[0].record(self.stream)
        for s, e in zip(stages, ev[1:]):
            s.launch()
            e.record(self.stream)
        ev[-1].synchronize()
        return [cp.cuda.get_elapsed_time(a, b)*1e-3
                for a, b in zip(ev, ev[1:])]


# -- rows --------------------------------------------------------------------

FIELDS = ['op', 'etype', 'order', 'mat', 'm', 'k', 'nnz', 'density', 'nuq',
          'pyfr_sends', 'beta', 'neles', 'n', 'ws_mib', 'flush_mib',
          'walk_pick', 'up_pick', 'ctx_ours_s', 'ctx_up_s', 'ours_over_up',
          'kctx_ours_s', 'kctx_up_s', 'kctx_ours_over_up', 'hot_ours_s',
          'hot_up_s', 'hot_ours_over_up', 'best8', 'walk_over_best8',
          'best_policy', 'best_policy_over_up', 'nfail', 'device', 'offer']
CAND_FIELDS = ['op', 'n', 'contender', 'variant', 'policy', 'ctx_s',
               'kctx_s', 'hot_s', 'ctx_over_up', 'kctx_over_up',
               'hot_over_up', 'registers', 'local_mem', 'status']

OURS, UP = 'ours', 'up'

# offer_key: how many of our candidates (in the order kernels() offers
# them) identify the offer a row was timed with
OFFER_FIRST = 8


def offer_key(variants):
    """A short key of the first OFFER_FIRST variants of an offer (the
    candidates PyFR's walk can see): rows of runs with the same key timed
    the same kernels."""
    text = ';'.join(variants[:OFFER_FIRST])
    return format(zlib.crc32(text.encode()), '08x')


def offer_of(mm, cc):
    """offer_key of the f64 candidates generator mm offers for compute
    capability cc."""
    return offer_key([c.variant for c in mm.offered(
        mm.candidates(np.float64, compute_capability=cc))])


def merge_runs(runs, current_offer):
    """Rows of several runs (runs: [(name, rows)], newest first) valid
    for today's code: per (op, n) the newest row whose offer column equals
    current_offer(op, n), with its run's name in column 'run'.  Returns
    (rows, missing): missing the (op, n) no run timed with today's offer."""
    keys = {}
    for _, rows in runs:
        for r in rows:
            keys.setdefault((r['op'], int(r['n'])), None)
    out, missing = [], []
    for op, n in keys:
        want = current_offer(op, n)
        for name, rows in runs:
            row = next((r for r in rows if r['op'] == op and int(r['n']) == n
                        and r.get('ours_over_up') and r.get('offer') == want),
                       None)
            if row is not None:
                out.append(dict(row, run=name))
                break
        else:
            missing.append((op, n))
    return out, missing


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt(x, spec='.6e'):
    return report.fmt(x, spec)


def contender_rows(op, n, ctx, hot, info):
    """NAME-candidates rows: each contender's times and its ratios to
    upstream's pick.  info: {name: dict(variant, policy, registers,
    local_mem, status)}."""
    up_c, up_h = ctx.get(UP, {}), hot.get(UP)
    rows = []
    for name in info:
        c, h = ctx.get(name, {}), hot.get(name)
        rows.append(dict(
            op=op, n=n, contender=name, **{k: info[name].get(k, '') for k in
                                          ('variant', 'policy', 'registers',
                                           'local_mem', 'status')},
            ctx_s=fmt(c.get('ctx_s')), kctx_s=fmt(c.get('kctx_s')),
            hot_s=fmt(h),
            ctx_over_up=fmt(ratio(c.get('ctx_s'), up_c.get('ctx_s')), '.4f'),
            kctx_over_up=fmt(ratio(c.get('kctx_s'), up_c.get('kctx_s')),
                             '.4f'),
            hot_over_up=fmt(ratio(h, up_h), '.4f')))
    return rows


def summary_row(base, ctx, hot, first8, policies):
    """The NAME.csv row: base (operator facts) with the picks' in-context,
    in-sequence and hot times and ratios; best8: the fastest in context of
    first8 (the contender names of the candidates our walk saw) and the
    pick's ratio to it; best_policy: the fastest in context of policies
    (contender names) and its ratio to upstream's pick."""
    row = dict(base)
    o, u = ctx.get(OURS, {}), ctx.get(UP, {})
    row.update(
        ctx_ours_s=fmt(o.get('ctx_s')), ctx_up_s=fmt(u.get('ctx_s')),
        ours_over_up=fmt(ratio(o.get('ctx_s'), u.get('ctx_s')), '.4f'),
        kctx_ours_s=fmt(o.get('kctx_s')), kctx_up_s=fmt(u.get('kctx_s')),
        kctx_ours_over_up=fmt(ratio(o.get('kctx_s'), u.get('kctx_s')),
                              '.4f'),
        hot_ours_s=fmt(hot.get(OURS)), hot_up_s=fmt(hot.get(UP)),
        hot_ours_over_up=fmt(ratio(hot.get(OURS), hot.get(UP)), '.4f'))
    timed8 = [x for x in first8 if x in ctx]
    if timed8 and OURS in ctx:
        best = min(timed8, key=lambda x: ctx[x]['ctx_s'])
        row.update(best8=best, walk_over_best8=fmt(
            ratio(o['ctx_s'], ctx[best]['ctx_s']), '.4f'))
    timedp = [x for x in policies if x in ctx]
    if timedp and UP in ctx:
        best = min(timedp, key=lambda x: ctx[x]['ctx_s'])
        row.update(best_policy=best, best_policy_over_up=fmt(
            ratio(ctx[best]['ctx_s'], u['ctx_s']), '.4f'))
    return row


def summarise(path):
    """Lines: per n, the geomean and worst of ours_over_up (the operators
    PyFR sends), how many more than 3 % slower, the hot-loop geomean, and
    how often the walk's pick is within 3 % of the best of the first 8."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        rows = [r for r in csv.DictReader(f) if r.get('ours_over_up')]
    lines = []
    for n in sorted({int(r['n']) for r in rows}):
        rs = [r for r in rows if int(r['n']) == n
              and r['pyfr_sends'] == 'True']
        if not rs:
            continue
        x = [float(r['ours_over_up']) for r in rs]
        h = [float(r['hot_ours_over_up']) for r in rs
             if r['hot_ours_over_up']]
        worst = max(rs, key=lambda r: float(r['ours_over_up']))
        lines.append(
            f'n={n}: {len(x)} operators, in context ours/up geomean '
            f'{report.geomean(x):.4f}, {sum(v > 1.03 for v in x)} > 1.03, '
            'worst '
            f'{worst["ours_over_up"]} ({worst["op"]}); hot loop geomean '
            f'{report.geomean(h) if h else math.nan:.4f}')
        b8 = [float(r['walk_over_best8']) for r in rs
              if r.get('walk_over_best8')]
        if b8:
            lines.append(f'  walk pick within 3 % of the best of the first '
                         f'8 in context: {sum(v <= 1.03 for v in b8)} of '
                         f'{len(b8)}')
        bp = [float(r['best_policy_over_up']) for r in rs
              if r.get('best_policy_over_up')]
        if bp:
            lines.append(f'  best memory policy of the pick over up: '
                         f'geomean {report.geomean(bp):.4f}')
    return lines


# -- the device side ---------------------------------------------------------

HELPERS_SRC = r'''
extern "C" __global__ void ctx_produce(double* __restrict__ b, long len)
{
    for (long i = blockIdx.x*(long) blockDim.x + threadIdx.x; i < len;
         i += (long) gridDim.x*blockDim.x)
    {
        unsigned h = (unsigned) i*2654435761u;
        b[i] = (double) (h >> 8)*(1.0/8388608.0) - 1.0;
    }
}

extern "C" __global__ void ctx_consume(const double* __restrict__ c,
                                       long len, double* __restrict__ sink)
{
    double s = 0.0;
    for (long i = blockIdx.x*(long) blockDim.x + threadIdx.x; i < len;
         i += (long) gridDim.x*blockDim.x)
        s += c[i];
    for (int o = 16; o > 0; o /= 2)
        s += __shfl_down_sync(0xffffffffu, s, o);
    if (threadIdx.x % 32 == 0)
        atomicAdd(sink, s);
}

extern "C" __global__ void ctx_traffic(const double* __restrict__ src,
                                       double* __restrict__ dst, long len)
{
    for (long i = blockIdx.x*(long) blockDim.x + threadIdx.x; i < len;
         i += (long) gridDim.x*blockDim.x)
        dst[i] = src[i] + 1.0;
}
'''


class Around:
    """The producer, consumer and traffic kernels on dev's stream."""

    def __init__(self, dev, flush_cap):
        cp = dev.cupy
        self.dev = dev
        mod = cp.RawModule(code=HELPERS_SRC)
        self.produce = mod.get_function('ctx_produce')
        self.consume = mod.get_function('ctx_consume')
        self.traffic = mod.get_function('ctx_traffic')
        nsm = cp.cuda.runtime.getDeviceProperties(0)['multiProcessorCount']
        self.grid = (8*nsm,)
        half = max(1, flush_cap // 16)
        self.src = cp.zeros(half)
        self.dst = cp.empty(half)
        self.sink = cp.zeros(1)

    def stages(self, b, c, flush):
        st = self.dev.stream
        nf = np.int64(max(1, flush // 16))
        return (Stage('traffic', lambda: self.traffic(
                    self.grid, (256,), (self.src, self.dst, nf), stream=st)),
                Stage('producer', lambda: self.produce(
                    self.grid, (256,), (b, np.int64(b.size)), stream=st)),
                Stage('consumer', lambda: self.consume(
                    self.grid, (256,), (c, np.int64(c.size), self.sink),
                    stream=st)))

    def refresh(self, panels):
        """B as the producer writes it, and the reference from it."""
        with self.dev.stream:
            self.produce(self.grid, (256,), (panels.b, np.int64(
                panels.b.size)), stream=self.dev.stream)
            panels.rereference()
        self.dev.stream.synchronize()


def compile_checked(dev, panels, kname, src, meta, cc):
    """(function, attributes) of a source, its output checked against the
    reference; RuntimeError where it does not compile or is wrong."""
    cubin, _ = timing.nvrtc_compile(src, f'sm_{cc[0]}{cc[1]}')
    fn, attrs = dev.load(cubin, kname)
    with dev.stream:
        err = panels.check(lambda: dev.launch(fn, meta, panels.b, panels.c))
    if not err <= timing.TOL:
        raise RuntimeError(f'wrong result: row error {err:.3g}')
    return fn, attrs


def run_one(dev, around, name, A, n, futs, upfut, ops, cc, args):
    from gimmik.analysis import analyse
    order, etype, mat = parse_name(name)
    beta = default_beta(name)
    info = analyse(A)
    kname = replay.kname_of(A)
    nupts, nfpts = points_of(ops, order, etype)
    neles = n // gpyfr.euler_nvars(etype)
    ws = step_working_set(etype, nupts, nfpts, neles)
    flush = flush_bytes(ws, 8*info.k*n, 8*info.m*n, args.flush_cap)
    base = {'op': name, 'etype': etype, 'order': order, 'mat': mat,
            'm': info.m, 'k': info.k, 'nnz': info.nnz,
            'density': f'{info.density:.4f}', 'nuq': replay.pyfr_nuq(A),
            'pyfr_sends': replay.PYFR_CUDA.sends(A), 'beta': beta,
            'neles': neles,
            'n': n, 'ws_mib': f'{ws/2**20:.1f}',
            'flush_mib': f'{flush/2**20:.1f}', 'device': dev.name}
    mm = replay.ours_mm(A, beta, n)
    base['offer'] = offer_of(mm, cc)
    panels = timing.DevicePanels(dev, A, beta, n,
                                 seed=zlib.crc32(f'{name} {n}'.encode()))
    try:
        around.refresh(panels)
        # the walks, PyFR's way (hot timing), as bench/pyfr/pyfr_walk.py
        ours = timing.Timed(dev, panels, kname)
        results = [r for f in futs for r in f.result()]
        ours.add(results)

        def extra(render):
            r = timing._render_compile(render, cc)
            ours.add([r])
            results.append(r)
            return r

        served = replay.Served(results, extra)
        served.ours(mm, mm.render)
        walk = gpyfr.walk(
            replay.PYFR_CUDA,
            mm.kernels(np.float64, kname=kname, compute_capability=cc),
            ours.time_candidate)
        up = timing.Timed(dev, panels, kname)
        up_results = upfut.result()
        up.add(up_results)
        upmm = replay.up_mm(sys.modules['gimmik_up'], A, beta, n)
        up_srcs = iter([r.get('key') for r in up_results])
        upmm._render_kernel = lambda dtype, tplname, tplargs: next(up_srcs)
        up_walk = gpyfr.walk(
            replay.PYFR_CUDA,
            upmm.kernels(np.float64, kname=kname, compute_capability=cc),
            up.time_candidate)
        up_keys = [r.get('key') for r in up_results]
        wv, _ = gpyfr.picked(walk)
        uv, _ = gpyfr.picked(up_walk)
        if wv is None or uv is None:
            raise RuntimeError('a walk picked nothing')
        wr = served.by_variant[wv]
        ur = up.items[up_keys[up_walk['pick']]]

        # the contenders
        cont = {OURS: wr, UP: ur}
        cinfo = {OURS: {'variant': wv}, UP: {'variant': uv}}
        first8 = []
        if args.first8:
            for v, _ in walk['seen']:
                r = served.by_variant[v]
                if math.isfinite(r.get('time_s', math.inf)):
                    cont[f'ours@{v}'] = r
                    cinfo[f'ours@{v}'] = {'variant': v}
                    first8.append(f'ours@{v}')
        pol = []
        src = wr.get('src') or source_of(A, beta, n, cc, wv)
        max_off = max((info.k - 1)*n, (info.m - 1)*n) + n
        for spec in args.policies:
            cname = f'ours+{spec}'
            try:
                vsrc = policy_variant(src, spec, max_off)
            except ValueError as e:
                cinfo[cname] = {'variant': wv, 'policy': spec,
                                'status': str(e)}
                continue
            if vsrc is None:
                continue
            cinfo[cname] = {'variant': wv, 'policy': spec}
            try:
                fn, attrs = compile_checked(dev, panels, kname, vsrc,
                                            wr['meta'], cc)
                cont[cname] = {'fn': fn, 'meta': wr['meta'], **attrs}
                pol.append(cname)
            except Exception as e:
                cinfo[cname]['status'] = \
                    f'{type(e).__name__}: {e}'[:300].replace('\n', ' ')
        for k, r in cont.items():
            cinfo[k].update(registers=r.get('registers', ''),
                            local_mem=r.get('local_mem', ''),
                            status=cinfo[k].get('status', 'ok'))

        stages = [Stage(k, lambda r=r: dev.launch(r['fn'], r['meta'],
                                                  panels.b, panels.c))
                  for k, r in cont.items()]
        traffic, producer, consumer = around.stages(panels.b, panels.c,
                                                    flush)
        timer = EventTimer(dev.cupy, dev.stream)
        with dev.stream:
            ctx = measure_in_context(timer, stages, traffic, producer,
                                     consumer, args.repeats,
                                     min_timed_s=args.min_timed_ms/1e3,
                                     max_repeats=args.max_repeats)
            hot = measure_hot(timer, stages, args.repeats)
        row = summary_row(base, ctx, hot, first8, pol)
        row.update(walk_pick=wv, up_pick=uv, nfail=ours.fail + up.fail)
        return row, contender_rows(name, n, ctx, hot, cinfo)
    finally:
        panels.free()


# the compute capability merged runs were timed on (the H100)
MERGE_CC = (9, 0)


def current_offer(ops, cc=MERGE_CC):
    """(op, n) -> offer_key of today's CUDAMatMul for that operator."""
    def key(op, n):
        return offer_of(replay.ours_mm(ops[op], default_beta(op), n), cc)
    return key


def merge_main(args, ops):
    runs = []
    for path in args.merge:
        with open(path) as f:
            runs.append((os.path.basename(path), list(csv.DictReader(f))))
    rows, missing = merge_runs(runs, current_offer(ops))
    rows.sort(key=lambda r: (int(r['n']), r['op']))
    out = os.path.join(args.out, f'{args.name}.csv')
    os.makedirs(args.out, exist_ok=True)
    with open(out, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=FIELDS + ['run'])
        w.writeheader()
        w.writerows(rows)
    for op, n in missing:
        print(f'{op} n={n}: no run timed today\'s offer', flush=True)
    for line in summarise(out):
        print(line)
    return 0


def source_of(A, beta, n, cc, variant):
    """Our source of one candidate (by variant) at PyFR's sizes."""
    mm = replay.ours_mm(A, beta, n)
    for cand in mm.candidates(np.float64, compute_capability=cc):
        if cand.variant == variant:
            return mm.render(cand, np.float64, replay.kname_of(A))[0]
    raise KeyError(f'no candidate {variant}')


def _task_ours_src(A, beta, n, cc, indices):
    """pyfr_walk._task_ours, with each candidate's source kept."""
    mm = replay.ours_mm(A, beta, n)
    cands = mm.candidates(np.float64, compute_capability=cc)
    out = []
    for i in indices:
        if i >= len(cands):
            break
        src, meta = mm.render(cands[i], np.float64, replay.kname_of(A))
        r = timing._render_compile(lambda: (src, meta), cc)
        r['src'] = src
        out.append(r)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--ops', nargs='+', default=['*'],
                    help='fnmatch globs of operator names')
    ap.add_argument('--suite', nargs='+', default=[
        os.path.join(OPERATORS, 'pyfr-ops.npz'),
        os.path.join(OPERATORS, 'pyfr-ops-p7.npz')],
        help='operator suites (.npz; their m0 give the point counts)')
    ap.add_argument('--out', default=os.environ.get('OUT') or
                    RESULTS)
    ap.add_argument('--name', default='cuda-h100-context',
                    help='CSV base name in --out')
    ap.add_argument('--up', default='.whl/pyfr/gimmik-4.0-py3-none-any.whl',
                    help="upstream GiMMiK's wheel or unpacked folder")
    ap.add_argument('--n', type=int, nargs='+', default=list(N_TARGETS),
                    help='n targets (columns; rounded to PyFR padding)')
    ap.add_argument('--budget', type=float, default=420,
                    help='start no new operator after this many seconds')
    ap.add_argument('--repeats', type=int, default=REPEATS,
                    help='timed repetitions (at least)')
    ap.add_argument('--min-timed-ms', type=float, default=MIN_TIMED_S*1e3,
                    help='in context, more repetitions (up to '
                    '--max-repeats) until each contender is timed this '
                    'long in all; 0: --repeats')
    ap.add_argument('--max-repeats', type=int, default=MAX_REPEATS)
    ap.add_argument('--flush-cap-mib', type=float, default=FLUSH_CAP_MIB)
    ap.add_argument('--first8', action='store_true',
                    help='also time every candidate our walk saw')
    ap.add_argument('--policies', default='',
                    help="memory policies of our pick to time: 'default' "
                    "or a comma-separated list of '+'-joined "
                    f"{', '.join(POLICIES)}")
    ap.add_argument('--jobs', type=int, default=max(1, (os.cpu_count() or 2)
                                                     - 1))
    ap.add_argument('--ahead', type=int, default=24,
                    help='(operator, n) compiled ahead')
    ap.add_argument('--merge', nargs='+', metavar='RUN.csv',
                    help='no timing: write --out/--name.csv from these '
                    'runs (newest first), per (operator, n) the newest row '
                    "timed with today's offer (merge_runs)")
    ap.add_argument('--runtime-n', action='store_true',
                    help="both packages' kernels with n at run time, "
                    "launched as PyFR main's HIP provider launches "
                    '(ceil(n/block[0]) blocks; the CUDA twin of it)')
    ap.add_argument('--unsent', action='store_true',
                    help="also operators PyFR's CUDA backend sends to "
                    "cuBLAS (no generator runs on them in PyFR)")
    args = ap.parse_args(argv)
    try:
        args.policies = parse_policies(args.policies)
    except ValueError as e:
        ap.error(str(e))
    args.flush_cap = int(args.flush_cap_mib*2**20)
    if args.runtime_n:      # before the pool: spawned workers inherit it
        os.environ[replay.RUNTIME_N_ENV] = '1'

    t0 = time.time()
    ops = {}
    for path in args.suite:
        ops.update(pw.load_suite(path, args.ops))
    if args.merge:
        return merge_main(args, ops)
    if not args.unsent:
        ops = {k: A for k, A in ops.items() if replay.PYFR_CUDA.sends(A)}
    allops = {}
    for path in args.suite:
        allops.update(pw.load_suite(path, ['*-m0']))
    dev = timing.Device()
    around = Around(dev, args.flush_cap)
    up_path = os.path.abspath(args.up)
    load_upstream(up_path)
    os.makedirs(args.out, exist_ok=True)
    out = os.path.join(args.out, f'{args.name}.csv')
    cand_out = os.path.join(args.out, f'{args.name}-candidates.csv')
    done = report.read_done(out)

    def panel(name, t):
        nvars = gpyfr.euler_nvars(parse_name(name)[1])
        return gpyfr.panel(t, nvars)[1]

    work = [(name, panel(name, t)) for t in sorted(args.n) for name in ops]
    work = [w for w in work if w not in done]
    print(f'{dev.name}; {len(work)} (operator, n) to do, {len(done)} done',
          flush=True)
    pool = timing.compile_pool(args.jobs)
    cc = dev.cc

    def submit(name, n):
        A, beta = ops[name], default_beta(name)
        chunk = pw.CHUNK if np.count_nonzero(A) <= pw.CHUNK_MAX_NNZ else 1
        futs = [pool.submit(_task_ours_src, A, beta, n, cc,
                            list(range(i, i + chunk)))
                for i in range(0, WALK_AHEAD, chunk)]
        return futs, pool.submit(timing._task_up, up_path, A, beta, n, cc)

    queued, nxt = {}, 0
    for i, (name, n) in enumerate(work):
        if time.time() - t0 > args.budget:
            print(f'budget of {args.budget:.0f} s spent; stopping before '
                  f'{name} n={n}', flush=True)
            break
        while nxt < min(i + 1 + args.ahead, len(work)):
            queued[work[nxt]] = submit(*work[nxt])
            nxt += 1
        futs, upfut = queued.pop((name, n))
        try:
            row, crows = run_one(dev, around, name, ops[name], n, futs,
                                 upfut, allops, cc, args)
        except Exception as e:     # recorded; the run goes on
            msg = f'{type(e).__name__}: {e}'[:300].replace('\n', ' ')
            print(f'{name} n={n}: FAILED {msg}', flush=True)
            row, crows = {'op': name, 'n': n, 'nfail': -1,
                          'walk_pick': f'ERROR {msg}',
                          'device': dev.name}, []
        report.append(out, FIELDS, [row])
        report.append(cand_out, CAND_FIELDS, crows)
        print(f'{name:13s} n={n:<8d} ctx ours/up {row.get("ours_over_up")}'
              f' hot {row.get("hot_ours_over_up")} ({row.get("walk_pick")}'
              f' vs {row.get("up_pick")}) [{time.time() - t0:.0f} s]',
              flush=True)
    pool.shutdown(wait=False, cancel_futures=True)
    for line in summarise(out):
        print(line)
    sys.stdout.flush()
    os._exit(0)


if __name__ == '__main__':
    sys.exit(main())
