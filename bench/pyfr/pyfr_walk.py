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
pick, upstream's pick and the BEST_RETIMED fastest candidates of ours by
PyFR's timing are timed again together (median of --repeats launches
each, interleaved) for the ratios; the best candidate of all (all_best)
is the fastest of ours there, the walk's pick among them (one PyFR-style
timing of a short kernel varies by up to 17 %: the fastest by it alone
was at times slower than the walk's pick timed again),
with a device-to-device copy moving the bytes the product moves at least
(B read, C written, and read where beta is not 0) timed among them: the
copy fractions are that copy's time over a pick's, both timed the same
way, one launch per event pair right after an untimed one of its own (warm,
as PyFR's walk; the order rotated each repetition);
with --vendor the fastest vendor formulation of the cuda runtime (cuBLAS,
CuPy, cuBLASLt; checked to TOL like the candidates) is timed with them
(ours_over_vendor, up_over_vendor: time ratios).

Render and compile run in a process pool ahead of the device; the main
process replays the walks with each generator's own kernels(), its render
step served from the pool's output.  Resumable: (op, n) rows
already in the CSV are skipped; no new operator starts after --budget s.

    PYTHONPATH=. python3 bench/pyfr/pyfr_walk.py --out "$OUT"
"""
import argparse
import fnmatch
import math
import os
import sys
import time
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench import OPERATORS, RESULTS  # noqa: E402
from bench.pyfr.walk_replay import (  # noqa: E402
    PYFR_CUDA, Served, kname_of, ours_mm, pyfr_nuq, up_mm)
from bench.pyfr.walk_report import (  # noqa: E402
    CAND_FIELDS, FIELDS, append, cand_row, fmt, read_done, summarise)
from bench.pyfr.walk_timing import (  # noqa: E402
    Device, DevicePanels, Timed, _render_compile, _task_ours, _task_up,
    compile_pool, vendor_best)
from bench.upstream import load_upstream  # noqa: E402
from gimmik import pyfr as gpyfr  # noqa: E402
from gimmik.analysis import analyse  # noqa: E402
from gimmik.operators import default_beta, parse_name  # noqa: E402
from gimmik.runtime import moved_bytes  # noqa: E402

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
# candidates of ours, the fastest by PyFR's timing, timed again with the
# picks for the best of all
BEST_RETIMED = 3


def load_suite(path, patterns):
    with np.load(path) as f:
        ops = {k: f[k] for k in f.files if k != 'provenance'}
    names = [k for k in ops if any(fnmatch.fnmatch(k, p) for p in patterns)]
    return {k: ops[k] for k in sorted(
        names, key=parse_name)}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--ops', nargs='+', default=['*'],
                    help='fnmatch globs of operator names')
    ap.add_argument('--suite', default=os.path.join(OPERATORS,
                                                    'pyfr-ops.npz'))
    ap.add_argument('--out', default=os.environ.get('OUT') or
                    RESULTS,
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
    ap.add_argument('--jobs', type=int,
                    default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument('--ahead', type=int, default=40,
                    help='(operator, n) rendered and compiled ahead')
    ap.add_argument('--repeats', type=int, default=20)
    ap.add_argument('--vendor', action='store_true',
                    help="also time the vendor's best formulation (the cuda "
                    "runtime's, checked like the candidates) with the picks")
    return ap.parse_args(argv)


def panel_n(name, t):
    """PyFR's panel width for operator `name` at the n target t."""
    return gpyfr.panel(t, gpyfr.euler_nvars(parse_name(name)[1]))[1]


def work_list(ops, n_targets, all_n, done):
    """(operator, n target) pairs not in `done`, n-major: every operator at
    the all-candidates n targets first, then at the others, so that a run
    cut short by the budget leaves whole sweeps at the first n targets."""
    targets = sorted(n_targets, key=lambda t: (t not in all_n, t))
    return [(name, t) for t in targets for name in ops
            if (name, panel_n(name, t)) not in done]


class Prefetch:
    """Renders and compiles the candidates of the next `ahead` (operator,
    n target) pairs of `work` in the process pool: ours (all at the
    all-candidates n, else the first WALK_AHEAD) and upstream's."""

    def __init__(self, pool, work, ops, all_n, up_path, cc, ahead):
        self.pool, self.work, self.ops = pool, work, ops
        self.all_n, self.up_path, self.cc = all_n, up_path, cc
        self.ahead, self.queued, self.nxt = ahead, {}, 0

    def submit(self, name, t):
        A, beta, cc = self.ops[name], default_beta(name), self.cc
        n = panel_n(name, t)
        mm = ours_mm(A, beta, n)
        ncand = len(mm.candidates(np.float64, compute_capability=cc))
        upto = ncand if t in self.all_n else min(ncand, WALK_AHEAD)
        # one candidate a task where they are slow to compile
        chunk = CHUNK if np.count_nonzero(A) <= CHUNK_MAX_NNZ else 1
        futs = [self.pool.submit(_task_ours, A, beta, n, cc,
                                 list(range(i, min(i + chunk, upto))))
                for i in range(0, upto, chunk)]
        up = self.pool.submit(_task_up, self.up_path, A, beta, n, cc)
        return n, ncand, futs, up

    def take(self, i):
        """The i-th pair's (n, ncand, our futures, upstream's future),
        queueing the pairs up to `ahead` beyond it."""
        while self.nxt < min(i + 1 + self.ahead, len(self.work)):
            self.queued[self.work[self.nxt]] = self.submit(
                *self.work[self.nxt])
            self.nxt += 1
        return self.queued.pop(self.work[i])


def main(argv=None):
    args = parse_args(argv)
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
    work = work_list(ops, args.n, all_n, done)
    print(f'{dev.name}; {len(work)} (operator, n) to do, {len(done)} done; '
          f'{args.jobs} compile processes', flush=True)

    pool = compile_pool(args.jobs)
    prefetch = Prefetch(pool, work, ops, all_n, up_path, dev.cc, args.ahead)
    for i, (name, t) in enumerate(work):
        if time.time() - t0 > args.budget:
            print(f'budget of {args.budget:.0f} s spent; stopping before '
                  f'{name} n~{t}', flush=True)
            break
        n, ncand, futs, upfut = prefetch.take(i)
        try:
            row = run_one(dev, name, ops[name], n, ncand, futs, upfut,
                          t in all_n, dev.cc, args, cand_out)
        except Exception as e:     # recorded; the run goes on
            msg = f'{type(e).__name__}: {e}'[:300].replace('\n', ' ')
            print(f'{name} n={n}: FAILED {msg}', flush=True)
            row = {'op': name, 'n': n, 'ncand': ncand, 'nfail': -1,
                   'walk_seen': f'ERROR {msg}', 'device': dev.name}
        append(out, FIELDS, [row])
        print(f'{name:13s} n={n:<8d} walk {row["walk_pick"]} '
              f'x{row["walk_over_all"] or "-"} of all; vs up '
              f'{row["ours_over_up"] or "-"} ({row["up_walk_pick"] or "-"}) '
              f'[{time.time() - t0:.0f} s]', flush=True)

    pool.shutdown(wait=False, cancel_futures=True)
    summarise(out)
    sys.stdout.flush()
    os._exit(0)      # compiles still running for work not reached


def operator_row(dev, name, A, n, ncand):
    """The (operator, n) row's description of A and the panel."""
    order, etype, mat = parse_name(name)
    info = analyse(A)
    return {'op': name, 'etype': etype, 'order': order, 'mat': mat,
            'm': info.m, 'k': info.k, 'nnz': info.nnz,
            'density': f'{info.density:.4f}', 'nuq': pyfr_nuq(A),
            'pyfr_sends': PYFR_CUDA.sends(A), 'beta': default_beta(name),
            'neles': n // gpyfr.euler_nvars(etype), 'n': n, 'ncand': ncand,
            'device': dev.name}


def walk_ours(A, beta, n, kname, results, ours, all_cands, cc):
    """PyFR's walk over our kernels() (every candidate timed first where
    all_cands) and, where all_cands, the walk over every ranked candidate
    (the order without CUDAMatMul.offered's start-up cut) from the same
    measurements.  Returns (served, walk, ord_walk)."""
    def extra(render):      # a walk beyond the prefetched candidates
        r = _render_compile(render, cc)
        ours.add([r])
        results.append(r)
        return r

    served = Served(results, extra)
    mm = ours_mm(A, beta, n)
    served.ours(mm, mm.render)
    if all_cands:       # every candidate, in offer order
        for r in results:
            if 'key' in r:
                ours.measure(r['key'])
    walk = gpyfr.walk(
        PYFR_CUDA, mm.kernels(np.float64, kname=kname, compute_capability=cc),
        ours.time_candidate)
    ord_walk = None
    if all_cands:       # every candidate is timed at these n only
        omm = ours_mm(A, beta, n)
        served.ours(omm, omm.render)
        omm.offered = lambda cands: cands       # no start-up cut
        ord_walk = gpyfr.walk(
            PYFR_CUDA,
            omm.kernels(np.float64, kname=kname, compute_capability=cc),
            ours.time_candidate)
    return served, walk, ord_walk


def walk_upstream(A, beta, n, kname, up_results, up, cc):
    """PyFR's walk over upstream's kernels(), its renders served from the
    pool's results in order.  Returns (walk, keys of the walked)."""
    up.add(up_results)
    upmod = sys.modules['gimmik_up']
    upmm = up_mm(upmod, A, beta, n)
    up_srcs = iter([r.get('key') for r in up_results])
    upmm._render_kernel = lambda dtype, tplname, tplargs: next(up_srcs)
    up_walk = gpyfr.walk(
        PYFR_CUDA,
        upmm.kernels(np.float64, kname=kname, compute_capability=cc),
        up.time_candidate)
    return up_walk, [r['key'] for r in up_results][:len(up_walk['seen'])]


def retime(dev, panels, picks, vend, n, repeats, copy=None):
    """Median seconds of each pick (None or not timed: None), of the
    vendor's launch (None without one) and of the copy launch (None
    without one), timed together, interleaved."""
    uniq = list({id(x): x for x in picks if x is not None and
                 math.isfinite(x.get('time_s', math.inf))}.values())
    p = panels
    launches = [lambda x=x: dev.launch(x['fn'], x['meta'], p.b, p.c)
                for x in uniq]
    if vend is not None:
        launches.append(lambda: vend[1](p.b, p.c, n, n, n))
    if copy is not None:
        launches.append(copy)
    with dev.stream:
        ts = dev.time_median(launches, repeats) if launches else []
    ct = ts.pop() if copy is not None else None
    vt = ts.pop() if vend is not None else None
    retimed = {id(x): s for x, s in zip(uniq, ts)}
    return [retimed.get(id(x)) if x is not None else None
            for x in picks], vt, ct


def best_contenders(timed, pick):
    """The candidates timed again for the best of all: the BEST_RETIMED
    first of `timed` (sorted by PyFR's timing) and the walk's pick (None:
    no pick; left out where not timed)."""
    out = list(timed[:BEST_RETIMED])
    if (pick is not None and math.isfinite(pick.get('time_s', math.inf))
            and all(r is not pick for r in out)):
        out.append(pick)
    return out


def ratio(a, b):
    return fmt(a / b, '.4f') if a and b else ''


def run_one(dev, name, A, n, ncand, futs, upfut, all_cands, cc, args,
            cand_out):
    beta = default_beta(name)
    kname = kname_of(A)
    row = operator_row(dev, name, A, n, ncand)
    panels = DevicePanels(dev, A, beta, n,
                          seed=zlib.crc32(f'{name} {n}'.encode()))
    try:
        ours = Timed(dev, panels, kname)
        results = [r for f in futs for r in f.result()]
        ours.add(results)
        served, walk, ord_walk = walk_ours(A, beta, n, kname, results, ours,
                                           all_cands, cc)
        seen_keys = [served.by_variant[v]['key'] for v, _ in walk['seen']]

        up = Timed(dev, panels, kname)
        up_results = upfut.result()
        up_walk, up_keys = walk_upstream(A, beta, n, kname, up_results, up,
                                         cc)

        walked = set(seen_keys)
        append(cand_out, CAND_FIELDS,
               [cand_row(name, n, 'ours', rank, r, r.get('key') in walked)
                for rank, r in enumerate(results)] +
               [cand_row(name, n, 'up', rank, r, True)
                for rank, r in enumerate(up_results)])

        timed = sorted((r for r in ours.items.values()
                        if math.isfinite(r.get('time_s', math.inf))),
                       key=lambda r: r['time_s'])
        wv, _ = gpyfr.picked(walk)
        uv, _ = gpyfr.picked(up_walk)
        ov = gpyfr.picked(ord_walk)[0] if ord_walk else None
        wr = served.by_variant.get(wv) if wv else None
        ur = up.items[up_keys[up_walk['pick']]] if uv else None
        orr = served.by_variant.get(ov) if ov else None
        # the picks (with the vendor's best and a same-bytes copy) timed
        # again together
        vend = vendor_best(dev, panels, A, beta, n, args.runtime,
                           args.repeats) if args.runtime is not None else None
        copy = dev.copy_launch(moved_bytes(analyse(A), beta, n, 8))
        contenders = best_contenders(timed, wr) if all_cands else []
        (wt2, ut2, ot2, *cts), vt2, ct2 = retime(
            dev, panels, [wr, ur, orr] + contenders, vend, n, args.repeats,
            copy)
        del copy
        best, bt2 = min(((r, t) for r, t in zip(contenders, cts)
                         if t is not None), key=lambda x: x[1],
                        default=(None, None))
        row.update(
            walk_pick=wv or '', walk_time_s=fmt(wt2),
            all_best=best['meta']['variant'] if best else '',
            all_best_time_s=fmt(bt2), walk_over_all=ratio(wt2, bt2),
            up_walk_pick=uv or '', up_walk_time_s=fmt(ut2),
            ours_over_up=ratio(wt2, ut2),
            ours_compile_s=fmt(sum(served.by_variant[v].get('compile_s') or 0
                                   for v, _ in walk['seen']), '.3f'),
            up_compile_s=fmt(sum(up.items[k].get('compile_s') or 0
                                 for k in up_keys), '.3f')
            if up_keys else '',
            nwalk=len(walk['seen']), up_nwalk=len(up_walk['seen']),
            walk_seen=' '.join(v for v, _ in walk['seen']),
            ord_walk_pick=ov or '', ord_walk_over_all=ratio(ot2, bt2),
            ord_over_up=ratio(ot2, ut2),
            vendor_formulation=vend[0] if vend else '',
            vendor_time_s=fmt(vt2), ours_over_vendor=ratio(wt2, vt2),
            up_over_vendor=ratio(ut2, vt2),
            copy_time_s=fmt(ct2), walk_copy_fraction=ratio(ct2, wt2),
            all_best_copy_fraction=ratio(ct2, bt2),
            up_copy_fraction=ratio(ct2, ut2),
            nfail=ours.fail + up.fail)
        return row
    finally:
        panels.free()


if __name__ == '__main__':
    sys.exit(main())
