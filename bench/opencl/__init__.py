"""PyFR's OpenCL walk replayed and PyFR -b opencl end to end."""
