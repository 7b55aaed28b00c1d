"""Bakes of a constant operator A into the fragments of matrix-core
instructions, each with a NumPy model of its instruction so that a bake is
checked against A @ B without a GPU:

* :mod:`gimmik.fragments.mfma` -- AMD's f64 MFMA 16x16x4 (HIP mfma-dense);
* :mod:`gimmik.fragments.mma` -- NVIDIA's f64 mma.sync shapes (CUDA
  mma-gemm).
"""
