"""Time PyFR 3.1 steps inside one PyFR process, with whichever gimmik its
environment holds (run it with the Python of a PyFR venv, never gimmik's).

    python pyfr_steps.py MESH.pyfrm CASE.ini --label L --case C --csv F
        [--steps 200] [--reps 3] [--warm 20] [--soln F.npy] [--picks F.json]
        [--cut NAME]
    python pyfr_steps.py --compare A.npy B.npy

The solver is built as `pyfr run -b cuda` (or `--backend`) builds it; the clock starts when
this script starts, so start_s (to the end of the first step) covers the
imports, the mesh, the backend, the solver with every GiMMiK autotuning
walk, NVRTC compiles (from PyFR's cache when it is warm) and one step.
Steps are then timed in-process on the host clock between two points where
PyFR has waited for the GPU (it waits after every step): `--reps` segments
of `--steps` steps with the case's plugins (as a user runs it) and as many
without them (the solver alone), each segment's milliseconds per step in
the CSV.  Every process takes the same steps, so the solutions of two
packages on one mesh file compare element by element (`--compare`).

The generator PyFR uses is wrapped (not changed) to record its walk: for
each operator the candidates timed, the feedback sent and the pick PyFR
keeps (its own rule: a later candidate wins only below ifac x the best);
gimmik_us_per_rhs sums PyFR's own timing of each distinct kernel it keeps
(what one right-hand side spends in generated kernels; RK4 takes four a
step); gimmik_walk_s is the time PyFR spent in the walks (generation,
NVRTC or its cache, timing).
"""

import time

T0 = time.perf_counter()

import argparse  # noqa: E402
import csv  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402


def compare(a, b):
    x, y = np.load(a), np.load(b)
    if x.shape != y.shape:
        raise SystemExit(f'shapes differ: {x.shape} vs {y.shape}')
    rel = float(np.max(np.abs(x - y)) / np.max(np.abs(y)))
    print(f'max |a - b| / max |b| = {rel:.3e} over {x.size} values')
    return rel


# The generator class and the provider class of each backend's
# pyfr.backends.<backend>.gimmik module
PROVIDERS = {'cuda': ('CUDAMatMul', 'CUDAGiMMiKKernels'),
             'hip': ('HIPMatMul', 'HIPGiMMiKKernels'),
             'opencl': ('OpenCLMatMul', 'OpenCLGiMMiKKernels')}


class WalkLog:
    """Wraps the provider's generator class and its mul() to record what
    PyFR times and keeps, per operator."""

    def __init__(self, prov_mod, cut=None, backend='cuda'):
        self.walks, self.calls, self.cut = [], [], cut
        self._install(prov_mod, *PROVIDERS[backend])

    def _install(self, prov, gen_name, kprov_name):
        log, Gen = self, getattr(prov, gen_name)

        class Recorded(Gen):
            def __init__(self, A, *args, **kwargs):
                self._recorded_shape = list(np.shape(A))
                super().__init__(A, *args, **kwargs)

            def kernels(self, *args, **kwargs):
                walk = {'shape': self._recorded_shape, 'cands': []}
                log.walks.append(walk)
                if log.cut:
                    try:        # run as a script from bench/pyfr/
                        from cuts import apply_cut
                    except ImportError:   # imported as bench.pyfr.pyfr_steps
                        from bench.pyfr.cuts import apply_cut
                    apply_cut(self, log.cut)
                inner = super().kernels(*args, **kwargs)
                fb = None
                while True:
                    try:
                        src, meta = inner.send(fb)
                    except StopIteration:
                        return
                    walk['cands'].append(
                        {k: v for k, v in meta.items()
                         if isinstance(v, (str, int, float))})
                    fb = yield src, meta
                    if isinstance(fb, dict):
                        walk['cands'][-1].update(
                            {k: (float(v) if isinstance(v, (int, float))
                                 else None) for k, v in fb.items()})

        setattr(prov, gen_name, Recorded)
        kprov = getattr(prov, kprov_name)
        mul = kprov.mul

        def recorded_mul(kself, a, b, out, alpha=1.0, beta=0.0):
            nwalks, t = len(log.walks), time.perf_counter()
            k = mul(kself, a, b, out, alpha=alpha, beta=beta)
            log.calls.append({
                'shape': [a.nrow, a.ncol], 'n': b.ncol, 'beta': beta,
                'kernel': [a.mid, alpha, beta, b.leaddim, out.leaddim],
                'dt': float(k.dt), 'walked': len(log.walks) > nwalks,
                'seconds': time.perf_counter() - t})
            return k
        kprov.mul = recorded_mul

    def gimmik_us(self):
        """Microseconds of the distinct kernels PyFR keeps (the provider's
        cache key less the alignment): one right-hand side runs each once,
        the RK registers each get their own launch of the same kernel."""
        kernels = {str(c['kernel']): c['dt'] for c in self.calls}
        return 1e6*sum(kernels.values())

    def walk_seconds(self):
        return sum(c['seconds'] for c in self.calls if c['walked'])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('mesh', nargs='?')
    ap.add_argument('ini', nargs='?')
    ap.add_argument('--compare', nargs=2, metavar='NPY')
    ap.add_argument('--label', default='?')
    ap.add_argument('--case', default='?')
    ap.add_argument('--csv', default='-')
    ap.add_argument('--steps', type=int, default=200)
    ap.add_argument('--reps', type=int, default=3)
    ap.add_argument('--warm', type=int, default=20)
    ap.add_argument('--backend', default='cuda', choices=sorted(PROVIDERS),
                    help='PyFR backend (`pyfr run -b BACKEND`)')
    ap.add_argument('--soln', default=None, help='save the final solution')
    ap.add_argument('--picks', default=None, help='JSON of every walk')
    ap.add_argument('--cut', default=None,
                    help="a cut of bench/pyfr/cuts.py applied to this "
                    "package's kernels() (measures it before the generator "
                    "changes)")
    args = ap.parse_args(argv)
    if args.compare:
        compare(*args.compare)
        return 0
    if not (args.mesh and args.ini):
        ap.error('MESH and INI are required')

    import mpi4py.rc
    mpi4py.rc.initialize = False        # as pyfr's command line: init_mpi()
    import importlib
    prov = importlib.import_module(f'pyfr.backends.{args.backend}.gimmik')
    from pyfr.backends import get_backend
    from pyfr.inifile import Inifile
    from pyfr.mpiutil import init_mpi
    from pyfr.readers.native import NativeReader
    from pyfr.solvers import get_solver
    import gimmik

    log = WalkLog(prov, args.cut, args.backend)
    init_mpi()
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    if comm.size > 1:       # mpiexec -n NP: one solution and walk a rank
        args.soln, args.picks = (
            _rank_path(p, comm.rank) for p in (args.soln, args.picks))
    cfg = Inifile.load(args.ini)
    sect = 'solver-time-integrator'
    dt = cfg.getfloat(sect, 'dt')
    nsteps = 1 + args.warm + 2*args.reps*args.steps
    tend = cfg.getfloat(sect, 'tstart', 0.0) + (nsteps + 10)*dt
    cfg.set(sect, 'tend', repr(tend))
    if 'soln-plugin-writer' in cfg.sections():
        cfg.set('soln-plugin-writer', 'dt-out', repr(tend))
    mesh = NativeReader(args.mesh).mesh
    backend = get_backend(args.backend, cfg)
    solver = get_solver(backend, mesh, None, cfg)
    t_built = time.perf_counter()

    def advance(k):
        n0, t = solver.nacptsteps, time.perf_counter()
        solver.advance_to(solver.tstart + (solver.nacptsteps + k)*dt)
        backend.wait()
        return (time.perf_counter() - t)*1e3/max(solver.nacptsteps - n0, 1)

    advance(1)
    start_s = time.perf_counter() - T0
    advance(args.warm)
    plugins = list(solver.plugins)
    with_plugins = [advance(args.steps) for _ in range(args.reps)]
    solver.plugins = []
    solver_only = [advance(args.steps) for _ in range(args.reps)]
    solver.plugins = plugins

    soln = np.concatenate([np.ravel(s) for s in solver.soln])
    if args.soln:
        np.save(args.soln, soln)
    if args.picks:
        with open(args.picks, 'w') as f:
            json.dump({'walks': log.walks, 'calls': log.calls}, f, indent=1)
    row = {
        'label': args.label if comm.size == 1 else
        f'{args.label}/r{comm.rank}of{comm.size}', 'case': args.case,
        'gimmik': getattr(gimmik, '__version__', '?'),
        'neles': sum(np.shape(s)[-1] for s in solver.soln),
        'steps': solver.nacptsteps, 'start_s': round(start_s, 2),
        'build_s': round(t_built - T0, 2),
        'step_ms_plugins': ' '.join(f'{x:.4f}' for x in with_plugins),
        'step_ms_solver': ' '.join(f'{x:.4f}' for x in solver_only),
        'gimmik_calls': len(log.calls), 'gimmik_walks': len(log.walks),
        'gimmik_walk_s': round(log.walk_seconds(), 2),
        'gimmik_us_per_rhs': round(log.gimmik_us(), 1),
        'soln_rms': f'{float(np.sqrt(np.mean(soln**2))):.15e}',
        'finite': bool(np.isfinite(soln).all()),
    }
    rows = comm.gather(row, root=0)     # one writer: rank 0, rows by rank
    if comm.rank != 0:
        return 0
    new = args.csv == '-' or not os.path.exists(args.csv)
    out = sys.stdout if args.csv == '-' else open(args.csv, 'a', newline='')
    w = csv.DictWriter(out, list(row))
    if new:
        w.writeheader()
    w.writerows(rows)
    out.flush()
    for r in rows:
        print(' '.join(f'{k}={v}' for k, v in r.items()), file=sys.stderr)
    return 0


def _rank_path(path, rank):
    """PATH.EXT as PATH.rRANK.EXT (None stays None)."""
    if path is None:
        return None
    stem, ext = os.path.splitext(path)
    return f'{stem}.r{rank}{ext}'


if __name__ == '__main__':
    sys.exit(main())
