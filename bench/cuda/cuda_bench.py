"""Benchmark gimmik's CUDA candidates against the vendor's best on the PyFR
suite: `gimmik sweep --platform cuda` with panels of B + C >= --mib MiB per
operator, then a summary.

    PYTHONPATH=. python3 bench/cuda/cuda_bench.py --out DIR [--ops GLOBS]
        [--suite FILE.npz] [--mib 512] [--budget 480] [--no-cublaslt]
        [--dtype f64|f32]

DIR/sweep.csv has one row per operator (--dtype, f64 by default; beta = 1
for m3 and m6, else 0): gimmik's best candidate, the vendor baseline (the
fastest of the cuda runtime's vendor formulations: cuBLAS ?gemm with A
stored either way, CuPy's cupy.cublas.gemm('N', 'N', A, B, C), cuBLASLt's
heuristic algorithms) and its formulation, and the copy bandwidth;
DIR/candidates.csv every candidate's and every formulation's time or
error.  Every output is checked (against NumPy for the vendor's
formulations, against the vendor's output for the candidates) before it is
timed.  The summary counts the
operators whose vendor time is above CuPy's plain cupy-gemm formulation.
No operator is started after --budget seconds; the same command resumes.

    PYTHONPATH=. python3 bench/cuda/cuda_bench.py --check [--families mma-gemm]

runs every candidate family on the device against NumPy: the gpu-marked
tests, python -m pytest -m gpu tests/test_cuda_gpu.py.
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--ops', default='*',
                    help='comma-separated fnmatch globs of operator names')
    ap.add_argument('--suite', default=None, metavar='PATH',
                    help='.npz file or directory of .mtx operators (default: '
                    'the PyFR suite, bench/operators/pyfr-ops.npz)')
    ap.add_argument('--out', default='sweep-cuda', metavar='DIR')
    ap.add_argument('--mib', type=float, default=512,
                    help='B + C take at least this many MiB per operator')
    ap.add_argument('--budget', type=float, default=480,
                    help='start no operator after this many seconds')
    from gimmik.validate import add_dtype_argument
    add_dtype_argument(ap)
    ap.add_argument('--no-cublaslt', action='store_true',
                    help='leave cuBLASLt out of the vendor baseline')
    ap.add_argument('--check', action='store_true',
                    help='run the gpu-marked tests (every family against '
                    'NumPy on the device), then exit')
    ap.add_argument('--families', default=None,
                    help='with --check: comma-separated families')
    args = ap.parse_args(argv)
    if args.check:
        import pytest
        if args.families:
            os.environ['GIMMIK_CHECK_FAMILIES'] = args.families
        return pytest.main(['-q', '-m', 'gpu', '-p', 'no:cacheprovider',
                            os.path.join(ROOT, 'tests',
                                         'test_cuda_gpu.py')])

    from gimmik.progress import SweepBar
    from gimmik.runtime.cuda import Runtime
    from gimmik.sweep import sweep
    rt = Runtime(cublaslt=not args.no_cublaslt)
    print(f'{rt.device}, compiler {rt.compiler}', flush=True)
    sweep(args.out, ops=args.ops, ops_path=args.suite, platform='cuda',
          dtype=args.dtype, mib=args.mib,
          runtime=rt, use_cache=False, budget_s=args.budget,
          progress=SweepBar(stream=sys.stdout))
    from gimmik.report import vendor_lines
    for line in vendor_lines(args.out):
        print(line)
    sys.stdout.flush()
    return 0


if __name__ == '__main__':
    sys.exit(main())
