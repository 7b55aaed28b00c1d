"""Every candidate PyFR main's HIP provider can be offered, on every
operator of both suites it sends, run in the executor under its launch
rule (n at run time, ceil(n/block[0])), f64, PyFR's beta and aligne, at
n = 1000 and 37; C poisoned, checked against float64 NumPy.  Smallest
operators first, two processes; one line an operator.

    PYTHONPATH=. python3 bench/pyfr/executor_sweep.py > LOG
"""
import sys, time, multiprocessing as mp
import numpy as np
sys.path.insert(0, '.')
from gimmik.pyfr import PROTOCOLS
from gimmik.operators import default_beta
from gimmik.verify import Panels
from gimmik.emulate import run_hip

P = PROTOCOLS['main', 'hip']

def one(args):
    name, A = args
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    beta = default_beta(name); al = P.aligne(np.float64)
    mm = P.generator(A, beta, al, None, None, None)
    bad, cnt = [], 0
    t0 = time.time()
    for src, meta in mm.kernels(np.float64, kname='gimmik_mm', gcn_arch='gfx942:sramecc+:xnack-', warp_size=64):
        for n in (1000, 37):
            ld = -(-n // al) * al
            p = Panels(rng, A, beta, np.float64, n, ld, ld, alignb=al * 8)
            grid, _ = P.launch(meta, n)
            try:
                run_hip(src, meta, p.b, p.c, grid=grid)
                p.check(f"{name} {meta['variant']} n={n}")
            except Exception as e:
                bad.append(f"{meta['variant']} n={n}: {str(e)[:200]}")
        cnt += 1
    return name, cnt, bad, time.time() - t0

if __name__ == '__main__':
    ops = []
    for path in ('bench/operators/pyfr-ops.npz', 'bench/operators/pyfr-ops-p7.npz'):
        z = np.load(path)
        for k in z.files:
            A = z[k]
            if A.dtype.kind == 'f' and P.sends(A):
                ops.append((k, A))
    ops.sort(key=lambda x: x[1].size)
    print(len(ops), 'operators', flush=True)
    tot = 0; nbad = 0
    with mp.Pool(2) as pool:
        for name, cnt, bad, dt in pool.imap_unordered(one, ops):
            tot += cnt; nbad += len(bad)
            print(f'{name}: {cnt} candidates, {len(bad)} wrong ({dt:.0f} s)', *bad, sep='\n  ', flush=True)
    print(f'done: {tot} candidates, {nbad} wrong runs', flush=True)
