"""Launch one gimmik candidate and one vendor formulation of an operator once
each, for a profiler (Nsight Compute) to measure side by side.

    ncu --set full -o REPORT python3 bench/cuda/ncu_gemm.py OPERATOR VARIANT
        VENDOR [--mib 512]

OPERATOR is a suite name or FILE.npz:KEY (gimmik.operators.load_operator),
VARIANT a candidate variant of CUDAMatMul (as in the sweep's candidate
column), VENDOR a formulation of the cuda runtime (cublas-nn, cupy-gemm,
cublaslt-nt/h0, ...).  Panels as the sweep sizes them (B + C >= --mib MiB,
beta as PyFR uses it: 1 for m3 and m6).  Both outputs are checked against
each other before the profiled launches, and each launch's time is printed.
"""

import argparse
import sys

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('operator')
    ap.add_argument('variant')
    ap.add_argument('vendor')
    ap.add_argument('--mib', type=float, default=512)
    args = ap.parse_args(argv)

    from gimmik.operators import default_beta, load_operator
    from gimmik.runtime.cuda import Runtime
    from gimmik.sweep import panel_n

    name, A = load_operator(args.operator)
    beta = default_beta(name)
    m, k = A.shape
    n = panel_n(A, args.mib)
    rt = Runtime()
    mm = rt.matmul(A, beta, aligne=2)
    opts = rt.kernel_options()
    cands = {c.variant: c for c in mm.candidates(np.float64, **opts)}
    if args.variant not in cands:
        sys.exit(f'{name}: no candidate {args.variant!r}; there are: '
                 + ', '.join(sorted(cands)))
    src, meta = mm.render(cands[args.variant], np.float64)
    ours = rt.load(src, meta)
    forms = dict(rt.vendor_formulations(A, 1.0, beta, np.float64, n=n,
                                        ldb=n, ldc=n))
    if args.vendor not in forms:
        sys.exit(f'no vendor formulation {args.vendor!r}; there are: '
                 + ', '.join(forms))
    vendor = forms[args.vendor]

    rng = np.random.default_rng(0)
    B = rt.upload(rng.standard_normal((k, n)))
    C0 = rng.standard_normal((m, n))
    outs = {}
    for label, launch in (('gimmik', ours), ('vendor', vendor)):
        c = rt.upload(C0)
        launch(B, c, n, n, n)
        rt.synchronize()
        outs[label] = c.get()
    err = np.max(np.abs(outs['gimmik'] - outs['vendor'])) \
        / np.max(np.abs(outs['vendor']))
    print(f'{name} {m}x{k} n={n} beta={beta}: outputs differ by {err:.2e}')
    if not err < 1e-12:
        sys.exit('outputs disagree')
    c = rt.upload(C0)
    for label, launch in (('gimmik', ours), ('vendor', vendor)):
        t = rt.time(launch, (B, c, n, n, n), warmup=0, repeats=1)
        print(f'{label:7s} {t*1e6:9.1f} us  {2*m*k*n/t/1e12:6.2f} dense '
              f'TFLOP/s')
    return 0


if __name__ == '__main__':
    sys.exit(main())
