"""Bakes of a constant operator A into the fragments of matrix-core
instructions, each with a NumPy model of its instruction so that a bake is
checked against A @ B without a GPU:

* :mod:`gimmik.fragments.mfma` -- AMD's f64 MFMA 16x16x4 (HIP mfma-dense);
* :mod:`gimmik.fragments.mma` -- NVIDIA's f64 mma.sync shapes (CUDA
  mma-gemm).

The MFMA names are also importable from this package directly
(``from gimmik.fragments import bake_mfma``).
"""

from gimmik.fragments.mfma import (  # noqa: F401
    MAX_CHUNK_KTILES, MAX_MTILES_PER_WAVE, MFMA_K, MFMA_M, MFMA_N, N_TILES,
    WAVE, MfmaBake, MfmaPlan, Tiling, b_fragment, bake_mfma, lane_coords,
    mfma_count, mfma_f64_16x16x4, mfma_plan, model_product, tile_operator,
    wave_groups)
