"""The walk log of bench/pyfr/pyfr_steps.py (CPU only, a stand-in for PyFR's
CUDA provider module driving this package's CUDAMatMul)."""

import os
import types

import numpy as np

from bench import OPERATORS
from bench.pyfr import cuts, pyfr_steps
from bench.tests.conftest import random_operator
from gimmik.cuda import CUDAMatMul


class _Mat:
    def __init__(self, nrow, ncol, mid=None):
        self.nrow, self.ncol, self.leaddim, self.mid = nrow, ncol, ncol, mid


def _provider():
    """A module shaped like pyfr.backends.cuda.gimmik: CUDAMatMul and a
    provider whose mul() walks the first candidates as PyFR does."""
    prov = types.SimpleNamespace(CUDAMatMul=CUDAMatMul)

    class Kernels:
        def mul(self, a, b, out, alpha=1.0, beta=0.0):
            gen = prov.CUDAMatMul(a.A, beta=beta, n=b.ncol, ldb=b.ncol,
                                  ldc=out.ncol).kernels(np.float64)
            best, fb = None, None
            try:
                for i in range(8):
                    src, meta = gen.send(fb)
                    dt = 1e-4/(i + 1) if i < 3 else 1e-3
                    best = min(best or dt, dt)
                    fb = {'runtime': dt, 'registers': 32, 'local_mem': 0,
                          'shared_mem': 0}
            except StopIteration:
                pass
            return types.SimpleNamespace(dt=best)
    prov.CUDAGiMMiKKernels = Kernels
    return prov


def test_walk_log_records_walks_and_distinct_kernels(rng):
    prov = _provider()
    log = pyfr_steps.WalkLog(prov)
    A0, A1 = random_operator(rng, 40, 30, 0.3), random_operator(rng, 30, 40,
                                                               0.3)
    a0, a1 = _Mat(40, 30, mid=0), _Mat(30, 40, mid=1)
    a0.A, a1.A = A0, A1
    k = prov.CUDAGiMMiKKernels()
    # the same operator for three registers, as PyFR's RK4 builds them
    for _ in range(3):
        k.mul(a0, _Mat(30, 1000), _Mat(40, 1000))
    k.mul(a1, _Mat(40, 1000), _Mat(30, 1000), beta=1.0)
    assert len(log.calls) == 4 and len(log.walks) == 4
    assert [w['shape'] for w in log.walks] == [[40, 30]]*3 + [[30, 40]]
    walk = log.walks[0]
    assert len(walk['cands']) >= 3
    assert all('variant' in c for c in walk['cands'])
    assert [c['runtime'] for c in walk['cands'][:3]] == [1e-4, 5e-5,
                                                         1e-4/3]
    # each distinct kernel (operator, alpha, beta, ldb, ldc) counted once
    assert abs(log.gimmik_us() - 1e6*sum(
        c['dt'] for c in (log.calls[0], log.calls[3]))) < 1e-9
    assert log.gimmik_us() < 1e6*sum(c['dt'] for c in log.calls)
    assert log.walk_seconds() >= 0


def test_compare_reports_the_relative_difference(tmp_path, capsys):
    a, b = tmp_path / 'a.npy', tmp_path / 'b.npy'
    np.save(a, np.array([1.0, 2.0, 4.0]))
    np.save(b, np.array([1.0, 2.0, 4.0 + 4e-12]))
    rel = pyfr_steps.compare(a, b)
    assert 0.9e-12 < rel < 1.1e-12
    assert 'max |a - b|' in capsys.readouterr().out


def test_walk_log_applies_a_cut():
    """--cut: the provider's walk is offered the cut's candidates."""
    # dense, 4675 non-zeros
    A = np.load(os.path.join(OPERATORS, 'pyfr-ops.npz'))['p4-pyr-m0']
    a = _Mat(*A.shape, mid=0)
    a.A = A
    walks = {}
    for cut in (None, 'shipped', 'uncut'):
        prov = _provider()
        log = pyfr_steps.WalkLog(prov, cut)
        prov.CUDAGiMMiKKernels().mul(a, _Mat(A.shape[1], 1024),
                                     _Mat(A.shape[0], 1024))
        walks[cut] = [c['variant'] for c in log.walks[0]['cands']]
    mm = CUDAMatMul(A, n=1024, ldb=1024, ldc=1024)
    # dense and large: the generator offers its first two
    # (CUDAMatMul.offered), as 'shipped' does
    shipped = [c.variant for c in cuts.offered(mm, 'shipped')]
    assert walks[None] == walks['shipped'] == shipped
    assert len(shipped) == 2
    # uncut: the ranked candidates, pruned by the feedback as PyFR's walk
    every = [c.variant for c in cuts.offered(mm, 'uncut')]
    assert len(every) > 8
    assert walks['uncut'][:4] == every[:4] and len(walks['uncut']) > 2
    assert set(walks['uncut']) <= set(every)
