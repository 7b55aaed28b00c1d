"""Checking a kernel's output: panels with sentinel padding and a float64
reference, and the error measure every check uses (the tuner's, the tests' and
the benchmarks'): each element against its own scale sum_j |A_ij B_jn| +
|beta C_in|, as a whole-output scale passes a zeroed small row."""

import math

import numpy as np

# Value of the padding columns of B and C (ld > n): a kernel must neither
# use nor write them
SENTINEL = 1234.5


def _xp(x):
    """CuPy for a CuPy array, else NumPy."""
    if type(x).__module__.partition('.')[0] == 'cupy':
        import cupy
        return cupy
    return np


def reference(A, b, beta=0.0, c=None):
    """(C = A*b + beta*c, scale) in float64, where scale holds each
    element's sum of term magnitudes |A||b| + |beta||c|.  Only the columns
    of A with a non-zero take part."""
    xp = _xp(b)
    A = np.asarray(A, dtype=np.float64)
    used = np.flatnonzero(A.any(axis=0))
    Au = xp.asarray(A[:, used])
    bu = xp.asarray(b, dtype=np.float64)[xp.asarray(used)]
    ref = Au @ bu
    scale = xp.abs(Au) @ xp.abs(bu)
    if beta:
        c = xp.asarray(c, dtype=np.float64)
        ref += beta*c
        scale += abs(beta)*xp.abs(c)
    return ref, scale


def rel_error(x, ref, scale=None):
    """The largest error of x against ref, each element relative to its own
    scale (default: the largest |ref| of its row); inf when x has a NaN or
    Inf, or differs where the scale is zero."""
    xp = _xp(x)
    x = xp.asarray(x, dtype=np.float64)
    ref = xp.asarray(ref, dtype=np.float64)
    if x.shape != ref.shape:
        raise ValueError(f'output shape {x.shape} is not the reference '
                         f'shape {ref.shape}')
    if not (bool(xp.isfinite(x).all()) and bool(xp.isfinite(ref).all())):
        return math.inf
    if x.size == 0:
        return 0.0
    if scale is None:
        scale = xp.abs(ref).max(axis=-1, keepdims=True)
    diff = xp.abs(x - ref)
    with np.errstate(divide='ignore', invalid='ignore'):
        err = xp.where(diff == 0, 0.0, diff / scale)
    return float(err.max())


def sentinel_array(shape, dtype, alignb=None):
    """An array of SENTINEL whose data starts on a multiple of alignb
    bytes (a kernel assuming aligned rows checks it)."""
    if not alignb:
        return np.full(shape, SENTINEL, dtype)
    size = int(np.prod(shape))*np.dtype(dtype).itemsize
    raw = np.empty(size + alignb, np.uint8)
    off = -raw.ctypes.data % alignb
    out = raw[off:off + size].view(dtype).reshape(shape)
    out[...] = SENTINEL
    return out


class Panels:
    """B (k x n, row stride ldb) and C (m x n, row stride ldc) cut from larger
    arrays whose padding holds SENTINEL, plus the float64 reference for C = A*B
    + beta*C and its scale; with beta == 0 C starts as NaN, so an element the
    kernel does not write fails."""

    SENTINEL = SENTINEL

    def __init__(self, rng, A, beta, dtype, n, ldb=None, ldc=None, b=None,
                 c=None, alignb=None):
        m, k = A.shape
        ldb, ldc = ldb or n, ldc or n
        self.dtype, self.n, self.beta = dtype, n, beta
        self.bfull = sentinel_array((k, ldb), dtype, alignb)
        self.cfull = sentinel_array((m, ldc), dtype, alignb)
        self.bfull[:, :n] = rng.standard_normal((k, n)) if b is None else b
        self.cfull[:, :n] = rng.standard_normal((m, n)) if c is None else c
        self.b = self.bfull[:, :n]
        self.c = self.cfull[:, :n]
        self.b0 = self.bfull.copy()
        self.ref, self.scale = reference(A, self.b, beta, self.c)
        self.c0 = self.cfull.copy()    # the values before poisoning
        if beta == 0:
            self.c[...] = np.nan

    def error(self, c=None):
        """rel_error of C (or `c`, an m x n array) against the reference."""
        return rel_error(self.c if c is None else c, self.ref, self.scale)

    def padding_intact(self, cfull=None):
        cfull = self.cfull if cfull is None else cfull
        return bool((cfull[:, self.n:] == SENTINEL).all())

    def check(self, what='', rtol=None):
        """Assert C matches the reference (within rtol, default 1e-13 for
        float64 and 1e-5 for float32) and B and the padding are intact."""
        if rtol is None:
            rtol = 1e-5 if np.dtype(self.dtype) == np.float32 else 1e-13
        err = self.error()
        assert err <= rtol, f'{what}: relative error {err:.3g}'
        assert np.array_equal(self.bfull, self.b0), f'{what}: B was modified'
        assert self.padding_intact(), f'{what}: C padding was written'
