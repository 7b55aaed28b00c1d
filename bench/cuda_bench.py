"""Benchmark the CUDA candidates of gimmik against the vendor's best on the
PyFR suite.

One row per operator (f64; beta = 1 for m3 and m6, else 0; n chosen so that
B + C take at least --mib MiB): the best candidate's time, the vendor
baseline's time and winning formulation, and a device-to-device copy
bandwidth measured at the start of the run.  The vendor baseline is the
fastest of the runtime's vendor formulations (cuBLAS ?gemm with A stored
either way, CuPy's cupy.cublas.gemm('N', 'N', A, B, C), cuBLASLt's heuristic
algorithms), each checked against NumPy on a sample of columns and against
the others in full; a formulation that fails or disagrees is recorded and
skipped.  Every formulation's time goes to OUT-vendor.csv, every
candidate's to OUT-candidates.csv.  Every candidate's result is checked
against the vendor's before it is timed.

Resumable: operators already in the output CSV are skipped, and no new
operator is started once --budget seconds have passed, so the suite can be
split over several runs (--ops takes fnmatch globs).

    python bench/cuda_bench.py --ops 'p[1-3]-*' --out bench/results/h100.csv
"""

import argparse
import concurrent.futures as cf
import csv
import fnmatch
import math
import os
import sys
import time

import numpy as np

from gimmik.cuda import CUDAMatMul
from gimmik.runtime import moved_bytes

# Candidates are built in nvcc runs of at most this much source
BATCH_CHARS = 300_000

# Relative error (max |c - ref| / max |ref|) allowed against cuBLAS
F64_TOL = 1e-12

FIELDS = ['op', 'm', 'k', 'nnz', 'density', 'beta', 'n', 'best', 'time_s',
          'gbps', 'vendor_formulation', 'vendor_time_s', 'vendor_gbps',
          'copy_gbps', 'best_copy', 'vendor_copy', 'cupy_gemm_time_s',
          'cupy_gemm_copy', 'cublas_nn_time_s', 'cublas_nn_copy', 'speedup',
          'ncand', 'nfail', 'nvendor', 'nvendor_fail', 'device']
CAND_FIELDS = ['op', 'variant', 'time_s', 'gbps', 'error', 'registers',
               'local_mem', 'status']
VENDOR_FIELDS = ['op', 'formulation', 'time_s', 'gbps', 'copy_fraction',
                 'won', 'error']

# Columns of every operator's sample checked against NumPy on the host
SAMPLE_COLS = 512


def load_suite(path, patterns):
    try:
        from gimmik.operators import suite
        ops = suite(path=path) if path else suite()
    except ImportError:
        here = os.path.dirname(os.path.abspath(__file__))
        path = path or os.path.join(here, 'operators', 'pyfr-ops.npz')
        with np.load(path) as f:
            ops = {k: f[k] for k in f.files if k != 'provenance'}
    names = [k for k in ops if any(fnmatch.fnmatch(k, p) for p in patterns)]
    return {k: ops[k] for k in sorted(names, key=_op_order)}


def _op_order(name):
    p, el, mat = name.split('-')
    return (int(p[1:]), el, mat)


def beta_of(name):
    return 1.0 if name.rsplit('-', 1)[-1] in ('m3', 'm6') else 0.0


def panel_n(A, mib, itemsize=8, multiple=256):
    m, k = A.shape
    n = math.ceil(mib*2**20 / ((m + k)*itemsize))
    return -(-n // multiple)*multiple


def _xp(a):
    """The array module of a (CuPy for device arrays, else NumPy)."""
    if type(a).__module__.split('.')[0] == 'cupy':
        import cupy
        return cupy
    return np


def to_host(a):
    return _xp(a).asnumpy(a) if _xp(a) is not np else np.asarray(a)


def rel_err(c, ref):
    xp = _xp(c)
    scale = float(xp.abs(ref).max())
    if not bool(xp.isfinite(c).all()):
        return math.inf
    return float(xp.abs(c - ref).max()) / max(scale, 1e-300)


def read_done(path):
    if not os.path.exists(path):
        return set()
    with open(path) as f:
        return {row['op'] for row in csv.DictReader(f)}


def append(path, fields, row):
    new = not os.path.exists(path)
    with open(path, 'a', newline='') as f:
        w = csv.DictWriter(f, fieldnames=fields)
        if new:
            w.writeheader()
        w.writerow(row)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--ops', nargs='+', default=['*'],
                    help='fnmatch globs of operator names')
    ap.add_argument('--suite', default=None, help='npz file of operators')
    ap.add_argument('--out', default='bench/results/cuda-h100.csv',
                    help='results CSV (OUT-candidates.csv and OUT-vendor.csv '
                    'next to it); operators already in it are skipped')
    ap.add_argument('--mib', type=float, default=512)
    ap.add_argument('--budget', type=float, default=500,
                    help='start no new operator after this many seconds')
    ap.add_argument('--jobs', type=int, default=os.cpu_count() or 4)
    ap.add_argument('--compile-timeout', type=float, default=240)
    ap.add_argument('--repeats', type=int, default=10)
    ap.add_argument('--families', default=None,
                    help='comma-separated families to offer (default all)')
    ap.add_argument('--no-cublaslt', action='store_true',
                    help='leave cuBLASLt out of the vendor baseline')
    ap.add_argument('--check', action='store_true',
                    help='check every family on random operators, odd n, '
                    'padded strides, f32 and f64, then exit')
    args = ap.parse_args(argv)
    if args.check:
        return check(args)

    t0 = time.time()
    import cupy
    from gimmik.runtime.cuda import Runtime
    rt = Runtime(cublaslt=not args.no_cublaslt)
    cand_out = os.path.splitext(args.out)[0] + '-candidates.csv'
    vendor_out = os.path.splitext(args.out)[0] + '-vendor.csv'
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)

    done = read_done(args.out)
    ops = {k: v for k, v in load_suite(args.suite, args.ops).items()
           if k not in done}
    copy_bps = rt.copy_bandwidth(1 << 30)
    print(f'{rt.device}: copy {copy_bps/1e9:.0f} GB/s, {len(ops)} operators '
          f'to do ({len(done)} done), compiler {rt.compiler}', flush=True)

    families = args.families.split(',') if args.families else None
    opts = rt.kernel_options()

    # Compile every operator's candidates (batches of kernels named k0,
    # k1, ... per nvcc run) in a pool, in suite order, while the main thread
    # measures operators as their builds finish.
    pool = cf.ThreadPoolExecutor(args.jobs)
    render_pool = cf.ThreadPoolExecutor(2)

    def render(mm):
        return [mm.render(cand, np.float64, f'k{i}') for i, cand in
                enumerate(c for c in mm._candidates(np.float64, **opts)
                          if families is None or c.family in families)]

    def build(cands):
        try:
            src = '\n'.join(s for s, _ in cands)
            return rt.build(src, cands[0][1], args.compile_timeout)
        except Exception as e:
            return e

    def render_and_build(mm):
        """Render the candidates, then build them in batches of at most
        BATCH_CHARS of source, each batch one nvcc run in the pool."""
        cands = render(mm)
        batches, cur, size = [], [], 0
        for s, meta in cands:
            if cur and size + len(s) > BATCH_CHARS:
                batches.append(cur)
                cur, size = [], 0
            cur.append((s, meta))
            size += len(s)
        if cur:
            batches.append(cur)
        return [(b, pool.submit(build, b)) for b in batches]

    jobs = {}
    for name, A in ops.items():
        mm = CUDAMatMul(A, beta=beta_of(name), aligne=2)
        jobs[name] = (mm, render_pool.submit(render_and_build, mm))

    rng = cupy.random.default_rng(42)
    for name, (mm, fut) in jobs.items():
        if time.time() - t0 > args.budget:
            print(f'budget of {args.budget:.0f} s spent; stopping before '
                  f'{name}', flush=True)
            break
        A, beta, info = mm.A, mm.beta, mm.info
        n = panel_n(A, args.mib)
        nbytes = moved_bytes(info, beta, n, 8)
        b = rng.standard_normal((info.k, n))
        c0 = rng.standard_normal((info.m, n))
        c = cupy.empty_like(c0)
        vendor = vendor_baseline(rt, A, beta, b, c0, c, n, args.repeats)
        ref = vendor.pop('ref')
        for rec in vendor['records']:
            t = rec['time_s']
            append(vendor_out, VENDOR_FIELDS, {
                'op': name, 'formulation': rec['name'],
                'time_s': f'{t:.6e}' if t else '',
                'gbps': f'{nbytes/t/1e9:.1f}' if t else '',
                'copy_fraction': f'{nbytes/t/copy_bps:.3f}' if t else '',
                'won': int(rec['name'] == vendor['name']),
                'error': (rec['error'] or '')[:300].replace('\n', ' ')})
        if ref is None:
            print(f'  {name}: no vendor formulation is right: '
                  + '; '.join(f'{r["name"]}: {r["error"]}'
                              for r in vendor['records'])[:600], flush=True)
            ref = cupy.asarray(A) @ b + beta*c0
        vt = vendor['time_s']

        best, nfail = None, 0
        todo = []
        for batch, bfut in fut.result():
            cubin = bfut.result()
            try:
                if isinstance(cubin, Exception):
                    raise cubin
                module = rt.load_module(cubin)
            except Exception as e:
                print(f'  {name}: batch build failed: {str(e)[:300]}',
                      flush=True)
                module = e
            todo += [(s, meta, module) for s, meta in batch]
        cands = todo
        for src, meta, module in cands:
            row = {'op': name, 'variant': meta['variant']}
            try:
                if isinstance(module, Exception):
                    raise module
                launch = rt.load(src, meta, module=module)
                row.update(rt.kernel_attributes(launch))
                if beta == 0:
                    c.fill(np.nan)
                else:
                    c[...] = c0
                launch(b, c, n, n, n)
                err = rel_err(c, ref)
                row['error'] = f'{err:.3g}'
                if not err <= F64_TOL:
                    raise RuntimeError(f'wrong result: error {err:.3g}')
                t = rt.time(launch, (b, c, n, n, n), repeats=args.repeats)
                row.update(time_s=f'{t:.6e}', gbps=f'{nbytes/t/1e9:.1f}',
                           status='ok')
                if best is None or t < best[0]:
                    best = (t, meta['variant'])
            except Exception as e:  # compile failure, timeout, wrong result
                nfail += 1
                row['status'] = f'{type(e).__name__}: {e}'[:300] \
                    .replace('\n', ' ')
                print(f'  {name} {meta["variant"]}: {row["status"]}',
                      flush=True)
            append(cand_out, CAND_FIELDS, row)

        del b, c, c0, ref
        cupy.get_default_memory_pool().free_all_blocks()
        times = {r['name']: r['time_s'] for r in vendor['records']}
        out = {'op': name, 'm': info.m, 'k': info.k, 'nnz': info.nnz,
               'density': f'{info.density:.3f}', 'beta': beta, 'n': n,
               'copy_gbps': f'{copy_bps/1e9:.1f}', 'ncand': len(cands),
               'nfail': nfail, 'nvendor': len(vendor['records']),
               'nvendor_fail': sum(1 for r in vendor['records']
                                   if r['error']),
               'device': rt.device}
        for col, t in (('vendor', vt), ('cupy_gemm', times.get('cupy-gemm')),
                       ('cublas_nn', times.get('cublas-nn'))):
            if t:
                out[f'{col}_time_s'] = f'{t:.6e}'
                out[f'{col}_copy'] = f'{nbytes/t/copy_bps:.3f}'
        if vt:
            out.update(vendor_formulation=vendor['name'],
                       vendor_gbps=f'{nbytes/vt/1e9:.1f}')
        if best:
            t, var = best
            out.update(best=var, time_s=f'{t:.6e}',
                       gbps=f'{nbytes/t/1e9:.1f}',
                       best_copy=f'{nbytes/t/copy_bps:.3f}')
            if vt:
                out['speedup'] = f'{vt/t:.3f}'
        append(args.out, FIELDS, out)
        print(f'{name:16s} {info.m:4d}x{info.k:<4d} '
              f'{out.get("best_copy", "-"):>6s} vs vendor '
              f'{out.get("vendor_copy", "-"):>6s} '
              f'({out.get("vendor_formulation", "NONE")}; cupy '
              f'{out.get("cupy_gemm_copy", "-")}) '
              f'x{out.get("speedup", "-"):>6s} '
              f'{out.get("best", "NONE")}  [{time.time() - t0:.0f} s]',
              flush=True)

    pool.shutdown(wait=False, cancel_futures=True)
    summarise(args.out)
    sys.stdout.flush()
    os._exit(0)     # builds still running for operators not reached


def vendor_baseline(rt, A, beta, b, c0, c, n, repeats):
    """Every vendor formulation checked and timed on panels b (k x n) and
    c0 (m x n) with c as scratch: {'name', 'time_s', 'ref', 'records'} of
    the fastest right one (name, time_s and ref None when none is right;
    ref is a copy of the first right formulation's output)."""
    from gimmik.runtime import failed_launch, pick_vendor
    try:
        forms = rt.vendor_formulations(A, 1.0, beta, np.float64, n=n, ldb=n,
                                       ldc=n)
    except Exception as e:     # the baseline's set-up failing is recorded
        forms = [('vendor', failed_launch(e))]
    rng = np.random.default_rng(n)
    cols = np.unique(np.concatenate([
        rng.integers(0, n, SAMPLE_COLS), [0, n - 1]]))
    cols = _xp(b).asarray(cols)
    exact = A @ to_host(b[:, cols]) + beta*to_host(c0[:, cols])
    ref = []

    def check(launch):
        return check_formulation(launch, b, c0, c, beta, n, cols, exact,
                                 ref[0] if ref else None, ref.append)

    def timed(launch):
        return rt.time(launch, (b, c, n, n, n), warmup=1, repeats=repeats)
    best, records = pick_vendor(forms, check, timed)
    name, _, t = best or (None, None, None)
    return {'name': name, 'time_s': t, 'ref': ref[0] if ref else None,
            'records': records}


def check_formulation(launch, b, c0, c, beta, n, cols, exact, ref, keep):
    """None when launch(b, c, n, n, n) is right: c starts as NaN (beta 0)
    or c0, the sampled columns agree with `exact` (NumPy) and the whole
    output with `ref` (another formulation's, when given); else why not.
    The first right output is handed to keep() as a copy."""
    if beta == 0:
        c.fill(np.nan)
    else:
        c[...] = c0
    launch(b, c, n, n, n)
    err = rel_err(to_host(c[:, cols]), exact)
    if not err <= F64_TOL:
        return f'disagrees with NumPy: relative error {err:.3g}'
    if ref is not None:
        err = rel_err(c, ref)
        if not err <= F64_TOL:
            return (f'disagrees with the first right formulation: relative '
                    f'error {err:.3g}')
    else:
        keep(c.copy())
    return None


def check_operators(rng):
    """Random operators that between them offer every family."""
    def sparse(m, k, d):
        A = rng.standard_normal((m, k))*(rng.random((m, k)) < d)
        A[0, 0] = 1.5
        return A
    return {'dense-84x252': rng.standard_normal((84, 252)),
            'dense-45x37': rng.standard_normal((45, 37)),
            'dense-150x70': rng.standard_normal((150, 70)),
            'sparse-40x30': sparse(40, 30, 0.2),
            'sparse-200x90': sparse(200, 90, 0.05),
            'zero-rows-24x16': np.vstack([sparse(12, 16, 0.4),
                                          np.zeros((12, 16))])}


def check(args):
    """Every candidate against a float64 NumPy reference on the device,
    output poisoned first, padding checked; returns 1 on any failure."""
    import cupy
    from gimmik.runtime.cuda import Runtime
    rt = Runtime()
    rng = np.random.default_rng()
    pool = cf.ThreadPoolExecutor(args.jobs)
    families = args.families.split(',') if args.families else None
    todo = []
    for name, A in check_operators(rng).items():
        for dtype, beta in ((np.float64, 0.0), (np.float64, 1.0),
                            (np.float64, -0.5), (np.float32, 0.0)):
            n = int(rng.integers(900, 1300)) | 1   # odd: a ragged pair
            ld = n + 7 if n % 2 else n + 8
            ld += ld % 2
            for baked in (False, True):
                if name.startswith(('dense-84', 'dense-150')) and (
                        dtype == np.float32 or baked == (beta != -0.5)):
                    continue   # its streaming kernels are slow to build
                sizes = dict(n=n, ldb=ld, ldc=ld) if baked else {}
                mm = CUDAMatMul(A, beta=beta, aligne=2, **sizes)
                for src, meta in mm.kernels(dtype, **rt.kernel_options()):
                    if families and meta['tplname'] not in families:
                        continue
                    todo.append((name, A, beta, dtype, n, ld, src, meta,
                                 pool.submit(rt.build, src, meta)))
    bad = 0
    tol = {np.float64: 1e-13, np.float32: 1e-5}
    for name, A, beta, dtype, n, ld, src, meta, fut in todo:
        m, k = A.shape
        bh = np.full((k, ld), 7.0, dtype)
        bh[:, :n] = rng.standard_normal((k, n))
        ch = np.full((m, ld), 9.0, dtype)
        ch[:, :n] = rng.standard_normal((m, n))
        ref = A @ bh[:, :n].astype(np.float64) + beta*ch[:, :n]
        if beta == 0:
            ch[:, :n] = np.nan
        what = (f'{name} beta={beta} {np.dtype(dtype).name} n={n} '
                f'{"baked " if meta["n"] else ""}{meta["variant"]}')
        try:
            launch = rt.load(src, meta, fut.result())
            b, c = rt.upload(bh), rt.upload(ch)
            launch(b, c, n, ld, ld)
            out = cupy.asnumpy(c)
            err = np.abs(out[:, :n] - ref).max()/np.abs(ref).max()
            if not np.isfinite(out[:, :n]).all():
                err = math.inf
            padok = (out[:, n:] == 9.0).all()
            ok = err <= tol[dtype] and padok
            attrs = rt.kernel_attributes(launch)
            print(f'{"ok  " if ok else "FAIL"} {what}: error {err:.2e}'
                  f'{"" if padok else " PADDING WRITTEN"} regs '
                  f'{attrs["registers"]} local {attrs["local_mem"]}',
                  flush=True)
        except Exception as e:
            ok = False
            print(f'FAIL {what}: {type(e).__name__}: {str(e)[:500]}',
                  flush=True)
        bad += not ok
    print(f'{len(todo) - bad} of {len(todo)} candidates right')
    return 1 if bad else 0


def summarise(path):
    """Summary lines of a results CSV (also printed): gimmik's and the
    vendor's fraction of copy bandwidth, the speed-ups, which formulations
    won, and operators whose vendor figure is below CuPy's plain call."""
    with open(path) as f:
        rows = [r for r in csv.DictReader(f)
                if r.get('best_copy') and r.get('speedup')]
    if not rows:
        return []
    bc = np.array([float(r['best_copy']) for r in rows])
    vc = np.array([float(r['vendor_copy']) for r in rows])
    sp = np.array([float(r['speedup']) for r in rows])
    gm = lambda x: float(np.exp(np.log(x).mean()))  # noqa: E731
    won = {}
    for r in rows:
        won[r['vendor_formulation']] = won.get(r['vendor_formulation'], 0) + 1
    below = [r['op'] for r in rows if r.get('cupy_gemm_time_s')
             and float(r['vendor_time_s']) > float(r['cupy_gemm_time_s'])]
    lines = [
        f'{len(rows)} operators: best/copy geomean {gm(bc):.3f} min '
        f'{bc.min():.3f}; vendor/copy geomean {gm(vc):.3f}; speedup '
        f'geomean {gm(sp):.3f} min {sp.min():.3f} ({(sp < 1).sum()} slower '
        f'than the vendor)',
        'vendor formulations that won: ' + ', '.join(
            f'{k} {v}' for k, v in sorted(won.items(), key=lambda x: -x[1])),
        f'operators whose vendor time is above CuPy\'s plain gemm: '
        f'{len(below)}' + (f' ({", ".join(below[:10])})' if below else '')]
    print('\n' + '\n'.join(lines))
    return lines


if __name__ == '__main__':
    sys.exit(main())
