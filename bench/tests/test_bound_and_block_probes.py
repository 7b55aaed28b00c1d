"""The pure parts of bench/cuda/cuda_launch_bounds.py and
bench/opencl/opencl_blocks.py (their timing needs a GPU)."""

import types

import numpy as np

from bench.cuda import cuda_launch_bounds as lb
from bench.opencl import opencl_blocks as ob
from gimmik.cuda import CUDAMatMul
from gimmik.opencl import OpenCLMatMul
from gimmik.targets import OPENCL


def test_with_bound_replaces_only_the_launch_bounds():
    A = np.arange(1.0, 13.0).reshape(3, 4)
    mm = CUDAMatMul(A, aligne=4)
    src, _ = mm.render(mm.candidates(np.float64)[0], np.float64, 'k')
    assert '__launch_bounds__(' in src
    new = lb.with_bound(src, '128,8')
    assert '__launch_bounds__(128,8)' in new
    assert new.replace('__launch_bounds__(128,8)', '') == \
        src.replace(src[src.index('__launch_bounds__('):
                        src.index(')', src.index('__launch_bounds__(')) + 1],
                    '')
    assert lb.with_bound(src, None) == src
    assert lb.with_bound(src, 'none') == new.replace(
        '__launch_bounds__(128,8)', '')


def test_panel_sizes_reach_512_mib():
    sizes = lb.panel_sizes(64, 96)
    assert sizes['110080'] == 110080
    n = sizes['512MiB']
    assert n % 4 == 0 and (64 + 96)*n*8 <= 512 << 20 < (64 + 96)*(n + 8)*8


class FakeUp:
    """Upstream's OpenCLMatMul, as far as contenders() reads it."""

    class OpenCLMatMul:
        def __init__(self, A, **kw):
            pass

        def kernels(self, dtype, **kw):
            yield 'cs', {'tplname': 'cstream'}
            yield 'bs', {'tplname': 'bstream'}
            yield 'bm', {'tplname': 'bstream-msplit'}


def test_block_contenders_span_the_work_groups_and_restore_the_target():
    A = np.random.default_rng(1).standard_normal((6, 12))
    dev = types.SimpleNamespace(local_mem_size=48 << 10)
    conts = ob.contenders(dev, OpenCLMatMul, FakeUp, A, 0.0, 4096, 4096, 4,
                          'kk')
    want = {f'{v}/b{64*sw}' for v in ob.VARIANTS for sw in ob.STREAM_WARPS}
    assert want | {'up-cstream', 'up-bstream'} == set(conts)
    for label, (src, meta) in conts.items():
        if not label.startswith('up-'):
            size = int(label.rsplit('/b', 1)[1])
            assert meta['local_work_size'][0] == size
            assert f'reqd_work_group_size({size}, 1, 1)' in src
    assert OpenCLMatMul.target is OPENCL


def test_compile_only_renders_the_case_under_the_sizes_asked():
    from bench.cuda import cuda_launch_bounds as lb
    from bench.cuda.cuda_spill_audit import SIZES
    _, _, rt, _ = lb.case_source('p2-tet-m460', 'cstream/ldnc/width2',
                                 SIZES['rt4'])
    _, _, baked, meta = lb.case_source('p2-tet-m460', 'cstream/ldnc/width2',
                                       SIZES['baked'])
    assert meta['n'] == SIZES['baked']['n']
    assert '(int n,' in rt and '(int n,' not in baked
    assert f"const int n = {SIZES['baked']['n']};" in baked
    assert lb.with_bound(baked, '128,5').count('__launch_bounds__(128,5)') == 1
