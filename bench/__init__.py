"""The lab beside the product: device benchmarks, offline audits and the
analyses of their results, one subpackage a job (see docs/benchmarks.md):

    pyfr/         PyFR's CUDA provider replayed on a device, in context,
                  at start-up, and PyFR itself end to end
    cuda/         CUDA sweeps against the vendor, spill audit, ncu, grids
    hip_offline/  HIP offer and ISA audits with clang, no device
    opencl/       PyFR's OpenCL walk and PyFR -b opencl end to end
    model/        the cost model and the order against recorded times,
                  candidate source hashes
    operators/    the PyFR operator suite; results/ the measurements

Scripts run as `PYTHONPATH=. python3 bench/SUB/NAME.py`; nothing in gimmik/
or tests/ imports from here (bench/tests/ tests the lab's own logic)."""

import os

BENCH = os.path.dirname(os.path.abspath(__file__))
OPERATORS = os.path.join(BENCH, 'operators')
RESULTS = os.path.join(BENCH, 'results')
