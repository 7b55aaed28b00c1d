"""PyFR's protocols (gimmik.pyfr) driving the generators as PyFR 3.1 and
PyFR's main branch do, every candidate run in the CPU executor under the
protocol's own launch rule (not ours) on fresh panels, C poisoned first.

By default each protocol runs, on the suite operators it sends, the first
candidates of the smallest operator on which each family appears among
them (every family PyFR would see, at f64, the operator's own beta and
PyFR's aligne); with --full every candidate of every operator it sends,
f64 and f32, beta 0 and 1, aligne None and 16."""

import functools

import numpy as np
import pytest

from conftest import Panels
from gimmik import HIPMatMul
from gimmik.base import MatMul
from gimmik.emulate import run_cuda, run_hip
from gimmik.operators import default_beta, suite as load_suite
from gimmik.pyfr import (IFAC, PROTOCOLS, needed_blocks, twin_generator,
                         walk)

ARCH = {'hip': 'gfx942:sramecc+:xnack-', 'cuda': (9, 0)}
RUN = {'hip': run_hip, 'cuda': run_cuda}
# column counts no block or tile divides (blocks of 32-256 threads, tiles of
# 64-512 columns), one of them smaller than any block
NS = (1000, 37)
# operators of at most this many entries run n < one block with n baked too
SMALL_A = 4096
# the default run's operators have at most this many entries (an executor
# build of the largest takes minutes); --full runs every operator
MAX_A = 50000
# The CUDA twin at run-time n: the CUDA source of a family launched by PyFR
# main's HIP rule (what bench/pyfr/in_context.py times against upstream)
TWIN = PROTOCOLS['main', 'hip']


def protocols():
    """(id, protocol, platform) of every GPU protocol (releases that drive
    a backend alike run once), with the twin."""
    out, seen = [], set()
    for p in PROTOCOLS.values():
        key = (p.cls, p.baked_n, p.kernels_keywords, p.args, p.launch_rule)
        if p.backend in ('cuda', 'hip') and key not in seen:
            seen.add(key)
            same = [q.release for q in PROTOCOLS.values() if
                    (q.cls, q.baked_n, q.kernels_keywords, q.args,
                     q.launch_rule) == key]
            out.append((f"pyfr-{'+'.join(same)}-{p.backend}", p, p.backend))
    return out + [('twin-cuda-runtime-n', TWIN, 'cuda')]


PROTOS = protocols()


@functools.lru_cache(maxsize=None)
def suite():
    return dict(load_suite())


def strides(n, aligne):
    """(ldb, ldc): padded past n, multiples of aligne."""
    al = aligne or 1
    return -(-(n + 3) // al)*al, -(-(n + 21) // al)*al


def generator(proto, platform, A, beta, aligne, n, dtype=np.float64):
    """The protocol's generator for platform (the twin: CUDA at run-time
    n, built with HIP's arguments, offered for HIP's client grid)."""
    if platform == proto.backend:
        return proto.generator(A, beta, aligne, n, *strides(n, aligne))
    return twin_generator(A, beta, aligne)


def offered(mm, platform, dtype, nkerns):
    return mm.offered(mm.candidates(dtype, **{
        'hip': {'gcn_arch': ARCH['hip']},
        'cuda': {'compute_capability': ARCH['cuda']}}[platform]))[:nkerns]


@functools.lru_cache(maxsize=None)
def coverage(pid):
    """{operator: [families]}: per family among the first candidates of
    the operators the protocol sends (of at most MAX_A entries), the
    smallest operator offering it."""
    _, proto, platform = next(x for x in PROTOS if x[0] == pid)
    best = {}
    for name, A in suite().items():
        if not proto.sends(A) or A.size > MAX_A:
            continue
        mm = generator(proto, platform, A, default_beta(name),
                       proto.aligne(np.float64), NS[0])
        for cand in offered(mm, platform, np.float64, proto.nkerns):
            if cand.family not in best or best[cand.family][0] > A.size:
                best[cand.family] = (A.size, name)
    out = {}
    for fam, (_, name) in sorted(best.items()):
        out.setdefault(name, []).append(fam)
    return out


def run_walk(proto, platform, A, beta, aligne, dtype, rng, nkerns,
             families=None):
    """PyFR's walk over a generator, each candidate (of `families` only,
    where given) run under the protocol's launch rule at every n of NS
    and checked (with n baked, n < one block on small operators only: a
    compile each); returns the [(variant, grid, needed blocks)] at
    NS[0]."""
    seen = []
    small = not proto.baked_n or A.size <= SMALL_A
    for n in NS if small else NS[:1]:
        mm = generator(proto, platform, A, beta, aligne, n)
        opts = {'hip': {'gcn_arch': ARCH['hip'], 'warp_size': 64},
                'cuda': {'compute_capability': ARCH['cuda']}}[platform]
        kgen = mm.kernels(dtype, kname='gimmik_mm', **opts)
        ldb, ldc = strides(n, aligne)

        def time_candidate(src, meta):
            assert meta['args'] == proto.args
            grid, block = proto.launch(meta, n)
            assert tuple(block) == tuple(meta['block'])
            if families is not None and meta['tplname'] not in families:
                return 1.0
            p = Panels(rng, A, beta, dtype, n, ldb, ldc,
                       alignb=aligne and aligne*np.dtype(dtype).itemsize)
            RUN[platform](src, meta, p.b, p.c, grid=grid)
            p.check(f"{proto.name} {meta['variant']} n={n} grid={grid}")
            if n == NS[0]:
                seen.append((meta['variant'], grid, needed_blocks(meta, n)))
            return 1.0, {'registers': 32, 'local_mem': 0, 'shared_mem': 0}

        res = walk(proto, kgen, time_candidate, nkerns=nkerns)
        assert res['seen'], f'{proto.name}: nothing offered'
    return seen


@pytest.mark.parametrize('pid', [p[0] for p in PROTOS])
def test_protocol_walks_exact(pid, rng):
    """The first candidates of the coverage operators, each of a family
    the operator covers exact under the protocol's own grid at n = 1000
    and n = 37."""
    _, proto, platform = next(x for x in PROTOS if x[0] == pid)
    cov = coverage(pid)
    assert cov, f'{pid}: no operator sent'
    for name, fams in cov.items():
        A = suite()[name]
        seen = run_walk(proto, platform, A, default_beta(name),
                        proto.aligne(np.float64), np.float64, rng,
                        proto.nkerns, fams)
        walked = {v.split('/')[0] for v, _, _ in seen}
        assert set(fams) <= walked, (name, fams, walked)


@pytest.mark.full
@pytest.mark.parametrize('pid', [p[0] for p in PROTOS])
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
@pytest.mark.parametrize('beta', [0.0, 1.0])
@pytest.mark.parametrize('aligne', [None, 16])
def test_protocol_walks_exact_full(pid, dtype, beta, aligne, rng):
    """--full: every candidate of every operator the protocol sends."""
    _, proto, platform = next(x for x in PROTOS if x[0] == pid)
    for name, A in suite().items():
        if proto.sends(A):
            run_walk(proto, platform, A, beta, aligne, dtype, rng, 10**6)


def test_no_overlaunch_under_pyfr_main():
    """PyFR main's HIP grid, ceil(n/block[0]), holds at most 1.1x the
    blocks any first-8 candidate's contract needs (n large), on every
    operator it sends, at PyFR's aligne (the two-column candidates need an
    even one)."""
    proto = PROTOCOLS['main', 'hip']
    worst = (0, None)
    n = 110080
    for name, A in suite().items():
        if not proto.sends(A):
            continue
        for aligne in (proto.aligne(np.float64),):
            mm = proto.generator(A, default_beta(name), aligne, n, n, n)
            for cand in offered(mm, 'hip', np.float64, proto.nkerns):
                launch = mm.kernel(cand, np.float64).geometry().launch()
                meta = {'launch': launch, 'block': launch['block']}
                ratio = (proto.launch(meta, n)[0][0]
                         / needed_blocks(meta, n))
                worst = max(worst, (ratio, f'{name} {cand.variant}'))
    assert worst[0] <= 1.1, worst


def _baked_mblock(rng, A, beta=0.0):
    proto = PROTOCOLS['3.1', 'hip']
    n = 1000
    mm = proto.generator(A, beta, None, n, n, n)
    for src, meta in proto.kernels(mm, np.float64, arch=ARCH['hip']):
        if meta.get('row_groups', 1) > 1:
            return proto, src, meta, n
    pytest.fail('no candidate with row groups')


@pytest.mark.parametrize('baked', [True, False])
def test_one_block_short_fails(rng, baked):
    """The check catches an incomplete launch: a candidate whose grid is
    its own (PyFR 3.1's meta['grid'] with n baked; at run time one whose
    contract is PyFR main's ceil(n/block[0])) launched with one block fewer
    leaves columns of C unwritten."""
    A = rng.standard_normal((96, 40))
    if baked:
        proto, src, meta, n = _baked_mblock(rng, A)
        grid, _ = proto.launch(meta, n)
    else:
        n = 1000
        mm = HIPMatMul(A, beta=0.0)
        src, meta = next(iter(mm.kernels(np.float64, gcn_arch='gfx942')))
        assert meta['launch']['grid'][0] == {'div': meta['block'][0]}
        grid, _ = PROTOCOLS['main', 'hip'].launch(meta, n)
    short = (grid[0] - 1, *grid[1:])
    p = Panels(rng, A, 0.0, np.float64, n)
    run_hip(src, meta, p.b, p.c, grid=short)
    with pytest.raises(AssertionError, match='relative error'):
        p.check('one block short')
    assert np.isnan(p.c[:, -1]).any()


def test_runtime_walk_any_grid(rng):
    """At run-time n a candidate with row groups walks its tiles: one block
    or twice the contract's blocks give the same exact C."""
    A = rng.standard_normal((96, 40))
    mm = HIPMatMul(A, beta=0.0)
    n = 777
    for src, meta in mm.kernels(np.float64, gcn_arch='gfx942'):
        if meta['launch']['grid'][0].get('mul', 1) > 1:
            break
    else:
        pytest.fail('no candidate with row groups')
    own = MatMul.launch_config(meta, n)[0]
    for grid in ((1, 1, 1), (2*own[0], 1, 1), own):
        p = Panels(rng, A, 0.0, np.float64, n)
        run_hip(src, meta, p.b, p.c, grid=grid)
        p.check(f"{meta['variant']} grid {grid}")


def test_protocol_table():
    """The protocols as PyFR's providers state them."""
    main_hip, old_hip = PROTOCOLS['main', 'hip'], PROTOCOLS['3.1', 'hip']
    assert not main_hip.baked_n and old_hip.baked_n
    assert main_hip.args == ('n', 'b', 'ldb', 'c', 'ldc')
    meta = {'block': (64, 4, 1), 'grid': (3, 1, 1)}
    assert main_hip.launch(meta, 1000) == ((16, 1, 1), (64, 4, 1))
    assert old_hip.launch(meta, 1000) == ((3, 1, 1), (64, 4, 1))
    A = np.zeros((10, 10))
    A[np.arange(10), np.arange(10)] = np.arange(1, 11)   # 11 |values|
    assert PROTOCOLS['main', 'cuda'].sends(A)
    A = np.arange(1, 101, dtype=float).reshape(10, 10)   # 100, dense
    assert not PROTOCOLS['main', 'cuda'].sends(A)
    assert main_hip.sends(A) and old_hip.sends(A)
    assert not PROTOCOLS['3.1', 'opencl'].sends(np.ones((50, 50)))
    assert main_hip.feedback(1.0, 40, 8) == {
        'runtime': 1.0, 'registers': 40, 'local_mem': 8}
    assert IFAC == 0.95


def test_spilling_family_not_offered_again():
    """local_mem > 0 in the feedback (the kernel spilled on the device):
    that family gets no further candidates in the walk; registers alone
    change nothing."""
    A = np.random.default_rng(5).standard_normal((24, 16))
    mm = HIPMatMul(A, beta=0.0, aligne=2)
    cands = mm.offered(mm.candidates(np.float64, gcn_arch='gfx942'))
    fam0 = cands[0].family
    later = sum(c.family == fam0 for c in cands[1:])
    assert later, 'the first family has one candidate only'

    def families(feedback):
        kgen = mm.kernels(np.float64, gcn_arch='gfx942')
        out = [kgen.send(None)[1]['tplname']]
        try:
            while True:
                out.append(kgen.send(feedback)[1]['tplname'])
        except StopIteration:
            return out

    quiet = families({'runtime': 1.0, 'registers': 250, 'local_mem': 0})
    spilled = families({'runtime': 1.0, 'registers': 40, 'local_mem': 16})
    assert quiet.count(fam0) == later + 1
    assert spilled.count(fam0) == 1
