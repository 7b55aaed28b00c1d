"""MetalMatMul's kernels in the CPU executor (gimmik.emulate.run_metal: the
Metal Shading Language source compiled as C++ over the HIP shim's threads;
no Apple GPU is reachable): every candidate exact against float64 NumPy
within the f32 bound, C poisoned first, launched as PyFR's Metal backend
launches them (gimmik.pyfr: meta['grid'] threadgroups of
meta['threadgroup'])."""

import numpy as np
import pytest

from conftest import Panels, random_operator
from gimmik.emulate import run_metal
from gimmik.metal import MetalMatMul
from gimmik.operators import default_beta, suite
from gimmik.pyfr import PROTOCOLS, walk

PROTO = PROTOCOLS['main', 'metal']


def run_walk(rng, A, beta, nkerns=None, n=1000, aligne=None):
    """PyFR's walk over A's candidates, each run and checked; the
    variants."""
    aligne = aligne or PROTO.aligne(np.float32)
    ld = -(-n // aligne)*aligne
    mm = PROTO.generator(A, beta, aligne, n, ld, ld)

    def time_candidate(src, meta):
        assert meta['args'] == PROTO.args and 'kernel void' in src
        grid, tgrp = PROTO.launch(meta, n)
        p = Panels(rng, A, beta, np.float32, n, ld, ld,
                   alignb=aligne*4)
        run_metal(src, meta, p.b, p.c, grid=grid)
        p.check(meta['variant'])
        return 1.0

    return walk(PROTO, PROTO.kernels(mm, np.float32), time_candidate,
                nkerns=nkerns)['seen']


def sample_operators(full):
    """Every operator PyFR's Metal backend sends (with --full), else the
    smallest and largest of each matrix kind."""
    ops = {k: A for k, A in suite().items() if PROTO.sends(A)}
    if full:
        return sorted(ops)
    out = set()
    for mat in ('m0', 'm3', 'm6', 'm132', 'm460'):
        kind = sorted((A.size, k) for k, A in ops.items()
                      if k.endswith('-' + mat))
        out.update({kind[0][1], kind[-1][1]})
    return sorted(out)


@pytest.mark.parametrize('name', sample_operators(False))
def test_pyfr_metal_walk(rng, name):
    seen = run_walk(rng, suite()[name], default_beta(name))
    assert 2 <= len(seen) <= PROTO.nkerns


@pytest.mark.full
@pytest.mark.parametrize('name', sample_operators(True))
def test_every_candidate_every_operator(rng, name):
    for beta in (0.0, 1.0):
        run_walk(rng, suite()[name], beta, nkerns=10**6)


@pytest.mark.parametrize('beta', [
    0.0, *(pytest.param(b, marks=pytest.mark.full) for b in (1.0, -0.5))])
def test_every_candidate_random_operator(rng, beta):
    seen = run_walk(rng, random_operator(rng, 70, 33, 0.3), beta,
                    nkerns=10**6, n=333, aligne=2)
    families = {v.split('/')[0] for v, _ in seen}
    assert {'cstream', 'bstream', 'bstream-msplit', 'cstream-ksplit',
            'cstream-mblock'} <= families
    assert any('width2' in v for v, _ in seen)


def test_f32_and_baked_n_only():
    A = np.eye(4)
    with pytest.raises(ValueError, match='needs n'):
        MetalMatMul(A)
    mm = MetalMatMul(A, n=10, ldb=10, ldc=10)
    with pytest.raises(ValueError, match='float32 kernels only'):
        next(iter(mm.kernels(np.float64)))


def test_one_threadgroup_short_fails(rng):
    A = random_operator(rng, 12, 8, 0.5)
    n = 700
    mm = MetalMatMul(A, n=n, ldb=n, ldc=n)
    src, meta = next(iter(mm.kernels(np.float32)))
    grid, _ = PROTO.launch(meta, n)
    p = Panels(rng, A, 0.0, np.float32, n)
    run_metal(src, meta, p.b, p.c, grid=(grid[0] - 1, *grid[1:]))
    with pytest.raises(AssertionError, match='relative error'):
        p.check('one threadgroup short')
