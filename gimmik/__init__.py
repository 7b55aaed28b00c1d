"""gimmik: generator of bespoke matrix multiplication kernels C = αA·B + βC
for a small constant operator matrix A and wide panels B and C."""

__version__ = '0.1.0'

from gimmik.hip import HIPMatMul  # noqa: E402,F401
