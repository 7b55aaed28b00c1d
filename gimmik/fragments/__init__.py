"""Bakes of a constant operator A into the fragments of matrix-core
instructions, each with a NumPy model of its instruction so that a bake is
checked against A @ B without a GPU: mfma (HIP mfma-dense), mfma_tiled (HIP
mfma-gemm), mma (CUDA mma-gemm)."""
