"""A family added from this one file and its template
(tests/fixtures/toy-rows.mako), with no other edit: a row of it in a HIP
table (a generator subclass) is offered, placed by gimmik.cost's estimate
from the family's own cost model, rendered and run exactly in the CPU
executor against float64 NumPy with C poisoned."""

from dataclasses import replace
import os

import numpy as np
import pytest

from conftest import Panels, random_operator
from gimmik import cost, hip
from gimmik.base import Row, check_table
from gimmik.emulate import run_hip
from gimmik.families import Family, Geometry

HERE = os.path.dirname(os.path.abspath(__file__))


class ToyRows(Family):
    """One thread a column; each row of C from its terms, each B value
    loaded where it is used."""
    name = 'toy-rows'
    template_file = os.path.join(HERE, 'fixtures', 'toy-rows.mako')

    def geometry(self):
        return Geometry((self.mm.stream_threads(self.opts), 1, 1), 0, 1)

    def build_plan(self):
        A = self.A
        return [(i, [(int(j), float(A[i, j])) for j in np.flatnonzero(A[i])])
                for i in range(A.shape[0])]

    def context(self):
        return {'rows': self.plan}

    def live_values(self):
        return 2        # a row's sum and one B value


class ToyHIP(hip.HIPMatMul):
    table = hip.CANDIDATES + [Row(ToyRows, {})]


def operator(rng):
    A = random_operator(rng, 14, 10, 0.4)
    A[5] = 0                    # a zero row: C is stored, or read where
    return A                    # beta != 1


def toy_of(cands):
    found = [c for c in cands if c.family == ToyRows.name]
    assert len(found) == 1, [c.variant for c in cands]
    return found[0]


def test_the_table_with_the_toy_row_checks():
    table = ToyHIP.table
    check_table(table, hip.GATES, 'hip')
    assert [r.id for r in table].count(ToyRows.name) == 1


def test_offered_and_placed_by_its_own_cost_model(rng, monkeypatch):
    mm = ToyHIP(operator(rng), beta=1.0)
    dtype = np.float64
    cands = mm.candidates(dtype, gcn_arch='gfx942')
    toy = toy_of(cands)
    # its work is the family's (here Family.work's default)
    w = cost.work(mm, toy, dtype)
    assert w == cost.stream_work(mm.kernel(toy, dtype),
                                 len(mm.info.bix))
    # the order is cost.rank's: the estimate it gives moves the toy
    first = cands[0]
    assert first is not toy

    def cheap(self):
        w = Family.work(self)
        return replace(w, dram_bytes=w.dram_bytes / 100, l2_bytes=0.0,
                       valu_flops=0.0, instructions=0.0, inflight=8.0)
    monkeypatch.setattr(ToyRows, 'work', cheap)
    mm = ToyHIP(operator(rng), beta=1.0)
    assert mm.candidates(dtype, gcn_arch='gfx942')[0].family == ToyRows.name

    def dear(self):
        w = Family.work(self)
        return replace(w, dram_bytes=w.dram_bytes*100)
    monkeypatch.setattr(ToyRows, 'work', dear)
    mm = ToyHIP(operator(rng), beta=1.0)
    out = mm.candidates(dtype, gcn_arch='gfx942')
    est = [e.seconds for _, e in cost.rank(mm, out, dtype, 'gfx942')]
    toy = out.index(toy_of(out))
    assert est[toy] == max(est) and toy >= cost.FIRST


@pytest.mark.parametrize('dtype', [np.float64, np.float32])
@pytest.mark.parametrize('beta,baked', [(0.0, False), (1.0, True),
                                        (-0.5, False), (0.0, True)])
def test_emitted_and_run_exactly(rng, dtype, beta, baked):
    A = operator(rng)
    n, ldb, ldc = 301, 304, 306
    sizes = dict(n=n, ldb=ldb, ldc=ldc) if baked else {}
    mm = ToyHIP(A, beta=beta, **sizes)
    gen = mm.kernels(dtype, kname='toy_mm', gcn_arch='gfx942')
    src, meta = next(gen)
    while meta['tplname'] != ToyRows.name:
        src, meta = gen.send(None)
    gen.close()
    assert meta['variant'] == 'toy-rows' and 'toy_mm(' in src
    p = Panels(rng, A, beta, dtype, n, ldb, ldc)
    run_hip(src, meta, p.b, p.c)
    p.check(f'toy-rows beta {beta} baked {baked}')
