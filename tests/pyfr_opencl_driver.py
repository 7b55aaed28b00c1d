"""Run PyFR 3.1's OpenCL backend on a mesh for a number of steps with the
installed gimmik's OpenCLMatMul ('ours') or with a naive reference
generator ('ref': one dense, unrolled dot product a column and row, A's
values as exact hexadecimal literals), saving the initial and final
solutions and the walks PyFR ran (a child process of test_pyfr_opencl).

    python pyfr_opencl_driver.py MESH.pyfrm CASE.ini ours|ref OUT.npz
"""

import json
import sys

import numpy as np


class ReferenceMatMul:
    """PyFR's OpenCLMatMul interface with one plain kernel: work-item j
    computes column j of C = A*B + beta*C."""

    def __init__(self, A, beta=0.0, aligne=None, n=None, ldb=None,
                 ldc=None):
        self.A, self.beta = np.asarray(A, dtype=np.float64), float(beta)
        self.n, self.ldb, self.ldc = int(n), int(ldb), int(ldc)

    def kernels(self, dtype, kname='gimmik_mm', local_mem_size=None):
        if np.dtype(dtype) != np.float64:
            raise ValueError('the reference generator is float64 only')
        if not kname.isidentifier():
            raise ValueError(f'bad kernel name {kname!r}')
        rows = []
        for i, arow in enumerate(self.A):
            terms = [f'{float(v).hex()}*b[{k*self.ldb} + j]'
                     for k, v in enumerate(arow) if v != 0]
            acc = ' + '.join(terms) or '0.0'
            if self.beta:
                acc = f'{self.beta.hex()}*c[{i*self.ldc} + j] + ({acc})'
            rows.append(f'        c[{i*self.ldc} + j] = {acc};')
        body = '\n'.join(rows)
        src = (f'__kernel void {kname}(__global const double* restrict b, '
               f'__global double* restrict c)\n{{\n'
               f'    const int j = get_global_id(0);\n'
               f'    if (j < {self.n})\n    {{\n{body}\n    }}\n}}\n')
        local = 64
        yield src, {'global_work_size': (-(-self.n // local)*local,),
                    'local_work_size': (local,), 'variant': 'reference'}


def main(mesh_path, ini_path, mode, out):
    import mpi4py.rc
    mpi4py.rc.initialize = False        # as pyfr's command line: init_mpi()
    import pyfr.backends.opencl.gimmik as prov
    from pyfr.backends import get_backend
    from pyfr.inifile import Inifile
    from pyfr.mpiutil import init_mpi
    from pyfr.readers.native import NativeReader
    from pyfr.solvers import get_solver

    walks = []
    Gen = ReferenceMatMul if mode == 'ref' else prov.OpenCLMatMul

    class Recorded(Gen):
        def kernels(self, *args, **kwargs):
            walk = []
            walks.append({'module': type(self).__mro__[1].__module__,
                          'variants': walk})
            inner = super().kernels(*args, **kwargs)
            fb = None
            while True:
                try:
                    src, meta = inner.send(fb)
                except StopIteration:
                    return
                walk.append(meta['variant'])
                fb = yield src, meta

    prov.OpenCLMatMul = Recorded
    init_mpi()
    cfg = Inifile.load(ini_path)
    backend = get_backend('opencl', cfg)
    solver = get_solver(backend, NativeReader(mesh_path).mesh, None, cfg)
    first = np.concatenate([np.ravel(s) for s in solver.soln])
    solver.advance_to(cfg.getfloat('solver-time-integrator', 'tend'))
    backend.wait()
    last = np.concatenate([np.ravel(s) for s in solver.soln])
    np.savez(out, first=first, last=last, steps=solver.nacptsteps,
             walks=json.dumps(walks))


if __name__ == '__main__':
    if len(sys.argv) != 5 or sys.argv[3] not in ('ours', 'ref'):
        sys.exit(__doc__.strip())
    main(*sys.argv[1:])
