"""CUDA: sweeps against the vendor, spill audit, ncu, launch grids."""
