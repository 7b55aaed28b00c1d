"""gimmik: generator of bespoke matrix multiplication kernels C = αA·B + βC
for a small constant operator matrix A and wide panels B and C."""

import importlib

import numpy as np

# PEP 440: the public part is the upstream GiMMiK API this package is a drop-in
# for (what PyFR's `gimmik>=...` requirement is checked against); '+' ours
__version__ = '4.0+0.1.0'

from gimmik.hip import HIPMatMul  # noqa: E402
from gimmik.validate import check_kname, check_matrix, check_scalar  # noqa: E402,E501

# platform name -> (module, generator class); imported on first use
PLATFORMS = {
    'hip': ('gimmik.hip', 'HIPMatMul'),
    'cuda': ('gimmik.cuda', 'CUDAMatMul'),
    'c': ('gimmik.c', 'CMatMul'),
    'opencl': ('gimmik.opencl', 'OpenCLMatMul'),
}

# the generators above, and one without a tuning runtime (source for its
# client, PyFR's Metal backend)
_LAZY = {cls: mod for mod, cls in PLATFORMS.values()}
_LAZY['MetalMatMul'] = 'gimmik.metal'
# upstream GiMMiK 4.0's other public names (gimmik.upstream_api)
UPSTREAM_NAMES = ('COpenMPMatMul', 'ISPCMatMul', 'PTXMatMul', 'SIG_BC',
                  'SIG_ABC', 'SIG_BDESC_C', 'SIG_BDESC_CDESC', 'SIGS',
                  'OPERAND_BUFFER', 'OPERAND_TENSORMAP')
_LAZY.update(dict.fromkeys(UPSTREAM_NAMES, 'gimmik.upstream_api'))


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def matmul_class(platform):
    """The *MatMul generator class of a platform name."""
    if not isinstance(platform, str) or platform not in PLATFORMS:
        raise ValueError(f'platform must be one of {", ".join(PLATFORMS)}, '
                         f'not {platform!r}')
    mod, cls = PLATFORMS[platform]
    return getattr(importlib.import_module(mod), cls)


def generate_mm(mat, dtype, platform, alpha=1.0, beta=0.0, funcn='gimmik_mm',
                n=None, ldb=None, ldc=None):
    """Legacy entry point: the source of the first candidate kernel computing
    C = alpha*mat*B + beta*C on `platform` ('hip', 'cuda', 'c' or
    'opencl')."""
    cls = matmul_class(platform)
    funcn = check_kname(funcn, 'funcn')
    alpha = check_scalar(alpha, 'alpha')
    A = check_matrix(mat, 'mat')
    if alpha == 0:
        raise ValueError('alpha is zero: the product alpha*mat is all zeros')
    # an overflowing product is check_matrix's error to name, not a warning
    with np.errstate(over='ignore'):
        scaled = alpha*A
    A = check_matrix(scaled, 'alpha*mat')
    gen = cls(A, beta=beta, n=n, ldb=ldb, ldc=ldc).kernels(dtype, kname=funcn)
    # The legacy call names no GPU architecture, so the families built on
    # one architecture's matrix instructions are passed over
    from gimmik.families import family
    for src, meta in gen:
        if not family(meta['tplname']).arch_specific:
            gen.close()
            return src
    raise ValueError('no portable kernel for this operator')


__all__ = ['HIPMatMul', 'CMatMul', 'CUDAMatMul', 'OpenCLMatMul', 'MetalMatMul',
           'generate_mm',
           'matmul_class', 'PLATFORMS', '__version__', *UPSTREAM_NAMES]
