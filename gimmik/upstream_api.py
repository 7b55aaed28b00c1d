"""Upstream GiMMiK 4.0's other public names, so that code written against it
(PyFR's backends among it) imports; generators not offered here say which to
use instead."""

from gimmik.c import CMatMul

# upstream's call signatures and operand kinds; every kernel here takes SIG_BC
SIG_BC = 'bc'
SIG_ABC = 'abc'
SIG_BDESC_CDESC = 'bdesc-cdesc'
SIG_BDESC_C = 'bdesc-c'
SIGS = frozenset({SIG_BC, SIG_ABC, SIG_BDESC_CDESC, SIG_BDESC_C})
OPERAND_BUFFER = 'buffer'
OPERAND_TENSORMAP = 'tensormap'


class COpenMPMatMul(CMatMul):
    """Upstream's C-with-OpenMP generator: CMatMul's kernels have its
    contract (void kname(int n, const T* b, int ldb, T* c, int ldc), or
    (b, c) with n baked; OpenMP threads inside)."""


class _Unavailable:
    alternative = None

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(
            f'gimmik has no {type(self).__name__}: use '
            f'{self.alternative}')


class ISPCMatMul(_Unavailable):
    alternative = ('gimmik.CMatMul (C with OpenMP; the compiler vectorises '
                   'its column loops)')


class PTXMatMul(_Unavailable):
    alternative = ('gimmik.CUDAMatMul (CUDA C for NVRTC/nvcc, f64 tensor '
                   'cores included)')
