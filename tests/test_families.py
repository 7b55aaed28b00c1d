"""The family contract (gimmik.families) and the candidate tables that use
it: every row of every platform's table names a family found by the scan,
whose template resolves on that platform, gates the platform knows and
(on the GPU platforms) a register estimate and limit; misspelt gates and
gates nothing uses are errors; one launch-limit check."""

import numpy as np
import pytest

from conftest import gradient_like, kron_like, prism_like
from gimmik import c, cuda, hip
from gimmik.base import Candidate, Row, check_table
from gimmik.families import Family, Geometry, families, family
from gimmik.families.cstream import Cstream

# platform -> (generator class, its table, its gate names, options)
PLATFORMS = {
    'hip': (hip.HIPMatMul, hip.CANDIDATES, hip.GATES,
            {'gcn_arch': 'gfx942', 'warp_size': 64}),
    'cuda': (cuda.CUDAMatMul, cuda.CANDIDATES, cuda.GATES,
             {'compute_capability': (9, 0)}),
    'c': (c.CMatMul, c.CANDIDATES, c.GATES, {}),
}
GPU = ('hip', 'cuda')


def operators():
    """Operators of the shapes the tables' rows are written for: small
    and sparse, dense, dense with m and k beyond mfma-gemm's threshold,
    wide and sparse (the k-split in passes of rows), blocks of
    non-zeros with rows and columns shuffled (mfma-gemm with A
    reordered), a gradient's transpose (cstream-kparts), a prism-like
    gradient (mma-gemm's compact tiles) and a gradient (cstream-mblock's
    partitioned groups)."""
    rng = np.random.default_rng(7)
    sparse = rng.standard_normal((20, 15))*(rng.random((20, 15)) < 0.4)
    sparse[0, 0] = 1.0
    wide = rng.standard_normal((40, 100))*(rng.random((40, 100)) < 0.1)
    wide[0, 0] = 1.0
    return [sparse, rng.standard_normal((48, 40)),
            rng.standard_normal((100, 120)),
            rng.standard_normal((160, 200)), wide,
            kron_like(rng, 300, 100, blocks=6, bk=16),
            np.ascontiguousarray(gradient_like(rng, 5).T),
            prism_like(rng, 28, 7), gradient_like(rng, 5)]


def bind(platform, row, dtype=np.float64):
    """(generator, family object) of a row on the first operator whose
    adapt() keeps it (even aligne, beta 1), or (None, None)."""
    cls, _, _, opts = PLATFORMS[platform]
    for A in operators():
        mm = cls(A, beta=1.0, aligne=2)
        params = row.family.adapt(mm, row.params)
        if params is not None:
            cand = Candidate(row.family.name, params, dict(opts), row.id)
            return mm, mm.kernel(cand, dtype)
    return None, None


def rows():
    return [pytest.param(p, row, id=f'{p}-{row.id}')
            for p, (_, table, _, _) in PLATFORMS.items() for row in table]


@pytest.mark.parametrize('platform,row', rows())
def test_every_row(platform, row):
    gates = PLATFORMS[platform][2]
    # the family is the one the package scan finds under its name
    assert issubclass(row.family, Family)
    assert family(row.family.name) is row.family
    # its gates are the platform's
    assert set(row.gates) <= set(gates)
    # its template resolves on this platform
    mm, kern = bind(platform, row)
    assert kern is not None, f'{row.id}: adapt drops it for every operator'
    mm._lookup.get_template(f'{row.family.name}.mako')
    # it fits the platform's launch limits
    assert mm.launch_fits(kern.geometry())
    if platform in GPU:
        # a register estimate and a limit for this platform
        regs = kern.registers()
        assert isinstance(regs, int) and regs > 0
        limit = kern.register_limit()
        assert limit is None or isinstance(limit, int)


@pytest.mark.parametrize('platform', list(PLATFORMS))
def test_tables_check(platform):
    _, table, gates, _ = PLATFORMS[platform]
    check_table(table, gates, platform)
    assert len({(row.id, row.gates) for row in table}) == len(table)


def test_every_family_has_rows_and_a_name():
    names = {row.family.name for _, table, _, _ in PLATFORMS.values()
             for row in table}
    assert names == set(families())
    assert all(cls.name == name for name, cls in families().items())


def test_unknown_family_name():
    with pytest.raises(ValueError, match='unknown kernel family'):
        family('no-such-family')


def test_a_row_repeated_under_its_gates_is_an_error():
    table = c.CANDIDATES + [c.CANDIDATES[0]]
    with pytest.raises(ValueError, match='repeat'):
        check_table(table, c.GATES, 'c')
    # the same kernel under other gates (one kernel, two ways to offer it)
    row = c.CANDIDATES[0]
    other = next(g for g in c.GATES if g not in row.gates)
    check_table(table[:-1] + [Row(row.family, row.params, other)], c.GATES,
                'c')


def test_a_row_is_named_by_its_parameters():
    for _, table, _, _ in PLATFORMS.values():
        for row in table:
            assert row.id == Candidate(row.family.name, row.params).variant


# -- gates: checked names -------------------------------------------------

def test_a_misspelt_gate_is_an_error_after_a_false_one():
    # 'mma' is false for most operators; the misspelling after it is still
    # caught, when the table is checked and when it is walked
    bad = Row(Cstream, dict(width=1, ld='nc'), 'mma strem')
    with pytest.raises(ValueError, match='strem'):
        check_table(cuda.CANDIDATES + [bad], cuda.GATES, 'cuda')
    mm = cuda.CUDAMatMul(np.eye(4))
    gates = cuda._gates(mm, np.float64, (9, 0))
    assert not gates['mma']
    with pytest.raises(KeyError, match='strem'):
        mm._from_table([bad], gates, np.float64)


def test_gates_nothing_uses_are_an_error():
    with pytest.raises(ValueError, match='nosuch'):
        check_table(c.CANDIDATES, c.GATES + ('nosuch',), 'c')


def test_gate_dict_must_be_the_declared_names():
    mm = c.CMatMul(np.eye(4))
    with pytest.raises(ValueError, match='declared'):
        mm._from_table(c.CANDIDATES, {'small': True}, np.float64)


# -- registers and launch limits -------------------------------------------

class Unestimated(Cstream):
    """A cstream without a register estimate (not in the package: the
    scan does not find it)."""
    free_registers = None

    def registers(self):
        return None


@pytest.mark.parametrize('cc', [(8, 0), (9, 0)])
def test_cuda_without_a_register_estimate(cc):
    mm = cuda.CUDAMatMul(np.eye(8) + 0.5, aligne=2)
    cand = Candidate('cstream', dict(width=1, ld='nc'),
                     {'compute_capability': cc})
    kern = Unestimated(mm, cand, np.float64)
    assert mm.registers_fit(kern)
    assert mm._platform_context(kern)['minblocks'] is None


def test_register_limits_are_the_families():
    mm = cuda.CUDAMatMul(np.eye(8) + 0.5, aligne=2)
    cand = Candidate('cstream', dict(width=1, ld='nc'),
                     {'compute_capability': (9, 0)})
    kern = mm.kernel(cand, np.float64)
    # the target's, where the family names none of its own
    assert 'cuda' not in Cstream.max_registers
    assert kern.register_limit() == mm.target.max_registers

    class Tight(Cstream):
        max_registers = {'cuda': kern.registers() - 1}
    assert mm.registers_fit(kern)
    assert not mm.registers_fit(Tight(mm, cand, np.float64))


def test_one_launch_limit_check():
    hmm = hip.HIPMatMul(np.eye(4))
    cmm = cuda.CUDAMatMul(np.eye(4))
    kib = 1024
    assert hmm.launch_fits(Geometry((64, 16, 1), 64*kib, 1))
    assert not hmm.launch_fits(Geometry((64, 16, 1), 64*kib + 1, 1))
    assert not hmm.launch_fits(Geometry((64, 17, 1), 0, 1))
    # CUDA: static shared memory
    assert cmm.launch_fits(Geometry((32, 32, 1), 48*kib, 1))
    assert not cmm.launch_fits(Geometry((32, 32, 1), 48*kib + 1, 1))
    assert not cmm.launch_fits(Geometry((32, 16, 3), 0, 1))


def test_render_refuses_what_does_not_fit():
    # 64 warps of 32 threads: 2048 threads a block
    cand = Candidate('bstream-msplit', dict(width=1, msplit=64, bsz=16,
                                            ld='cs'),
                     {'compute_capability': (9, 0)})
    mm = cuda.CUDAMatMul(np.ones((80, 8)), aligne=2)
    assert not mm.launch_fits(mm.kernel(cand, np.float64).geometry())
    with pytest.raises(ValueError, match='launch limits'):
        mm.render(cand, np.float64)


def test_generate_mm_passes_over_arch_specific_families():
    import gimmik

    A = np.random.default_rng(5).standard_normal((40, 40))
    gen = hip.HIPMatMul(A).kernels('float64', kname='k')
    src, meta = next(gen)
    assert family(meta['tplname']).arch_specific     # mfma-dense leads
    while family(meta['tplname']).arch_specific:
        src, meta = next(gen)
    gen.close()
    assert gimmik.generate_mm(A, 'float64', 'hip', funcn='k') == src
