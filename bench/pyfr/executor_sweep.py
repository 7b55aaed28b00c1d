"""Every candidate a PyFR HIP provider can be offered (PyFR main's: n at run
time, launched ceil(n/block[0]) x 1 x 1; PyFR 3.1's: n baked, meta['grid']),
or its CUDA provider (--backend cuda: n baked, meta['grid']), or the CUDA twin
(--backend twin: CUDA's source at run-time n under PyFR main's HIP rule),
on every operator of both suites it sends, run in the executor under that
provider's launch rule (--grid ours: the package's own launch_config) at
n = 1000 and 37; PyFR's beta and aligne unless --beta/--aligne name
others; C poisoned, checked against float64 NumPy.
Smallest operators first, --jobs processes; one line an operator.

    PYTHONPATH=. python3 bench/pyfr/executor_sweep.py [--release 3.1] \\
        [--backend hip|cuda|twin] [--dtype float32] [--only NAME ...] > LOG
"""
import argparse
import multiprocessing as mp
import sys
import time

import numpy as np

sys.path.insert(0, '.')
from gimmik.base import MatMul  # noqa: E402
from gimmik.emulate import run_cuda, run_hip  # noqa: E402
from gimmik.operators import default_beta  # noqa: E402
from gimmik.pyfr import PROTOCOLS, twin_generator  # noqa: E402
from gimmik.verify import Panels  # noqa: E402

SUITES = ('bench/operators/pyfr-ops.npz', 'bench/operators/pyfr-ops-p7.npz')
NS = (1000, 37)
ARGS = None


def protocol():
    """(protocol, runner, kernels() arch) of --release and --backend."""
    if ARGS.backend == 'hip':
        return (PROTOCOLS[ARGS.release, 'hip'], run_hip,
                'gfx942:sramecc+:xnack-')
    if ARGS.backend == 'cuda':
        return PROTOCOLS[ARGS.release, 'cuda'], run_cuda, (9, 0)
    return PROTOCOLS['main', 'hip'], run_cuda, (9, 0)


def generator(proto, A, beta, al, n):
    if ARGS.backend == 'twin':
        return twin_generator(A, beta, al)
    return proto.generator(A, beta, al, n,
                           *2*[None if n is None else ld(n, al)])


def one(item):
    name, A = item
    proto, run, arch = protocol()
    dtype = np.dtype(ARGS.dtype).type
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    beta = default_beta(name) if ARGS.beta is None else ARGS.beta
    al = proto.aligne(dtype) if ARGS.aligne == 'pyfr' else (
        None if ARGS.aligne == 'none' else int(ARGS.aligne))
    bad, cnt, t0 = [], 0, time.time()
    # a baked-n provider builds a generator (and its sources) per n
    gens = ([(n, generator(proto, A, beta, al, n)) for n in NS]
            if proto.baked_n else
            [(None, generator(proto, A, beta, al, None))])
    for nb, mm in gens:
        # the twin is our own generator, not a provider's
        kgen = (mm.kernels(dtype, compute_capability=arch)
                if ARGS.backend == 'twin' else
                proto.kernels(mm, dtype, arch=arch))
        for src, meta in kgen:
            for n in (NS if nb is None else (nb,)):
                p = Panels(rng, A, beta, dtype, n, ld(n, al), ld(n, al),
                           alignb=(al or 1)*np.dtype(dtype).itemsize)
                grid = (MatMul.launch_config(meta, n)[0]
                        if ARGS.grid == 'ours' else proto.launch(meta, n)[0])
                try:
                    run(src, meta, p.b, p.c, grid=grid)
                    p.check(f"{name} {meta['variant']} n={n}")
                except Exception as e:
                    bad.append(f"{meta['variant']} n={n}: {str(e)[:200]}")
            cnt += 1
    return name, cnt, bad, time.time() - t0


def ld(n, al):
    return n if al is None else -(-n // al)*al


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--release', default='main', choices=('main', '3.1'))
    ap.add_argument('--backend', default='hip',
                    choices=('hip', 'cuda', 'twin'))
    ap.add_argument('--dtype', default='float64',
                    choices=('float64', 'float32'))
    ap.add_argument('--beta', type=float, default=None,
                    help="default: PyFR's for the operator")
    ap.add_argument('--aligne', default='pyfr',
                    help="'pyfr' (default), 'none' or a number")
    ap.add_argument('--grid', default='client', choices=('client', 'ours'),
                    help="the provider's launch rule or launch_config's")
    ap.add_argument('--only', nargs='*', help='operator names')
    ap.add_argument('--jobs', type=int, default=2)
    ARGS = ap.parse_args()
    proto = protocol()[0]
    ops = []
    for path in SUITES:
        z = np.load(path)
        for k in z.files:
            if (z[k].dtype.kind == 'f' and proto.sends(z[k])
                    and (not ARGS.only or k in ARGS.only)):
                ops.append((k, z[k]))
    ops.sort(key=lambda x: x[1].size)
    print(f'{len(ops)} operators, PyFR {ARGS.release} {ARGS.backend}, '
          f'{ARGS.grid} grid, {ARGS.dtype}, '
          f'beta {"pyfr" if ARGS.beta is None else ARGS.beta}, '
          f'aligne {ARGS.aligne}',
          flush=True)
    tot = nbad = 0
    with mp.Pool(ARGS.jobs) as pool:
        for name, cnt, bad, dt in pool.imap_unordered(one, ops):
            tot += cnt
            nbad += len(bad)
            print(f'{name}: {cnt} candidates, {len(bad)} wrong ({dt:.0f} s)',
                  *bad, sep='\n  ', flush=True)
    print(f'done: {tot} candidates, {nbad} wrong runs', flush=True)


if __name__ == '__main__':
    main()
