"""gimmik.isa's loads-batched judge (the HIP offer audit's): at most one
full wait per 8 global loads on a block's path, one a path allowed; row
groups divide a kernel's loads and waits; waves that run their own case of
a switch on the wave index are allowed one wait each, never fewer than
the strict judge allows."""

import pytest

from gimmik.isa import LOADS_PER_VM0, vm0_ok, wave_paths


def rep(loads, waits):
    return {'global_loads': {8: loads}, 'vmcnt0': waits}


@pytest.mark.parametrize('loads,waits,paths,waves,ok', [
    (64, 8, 1, 1, True),
    (64, 9, 1, 1, False),
    (5, 1, 1, 1, True),          # one wait a path whatever its loads
    (5, 2, 1, 1, False),
    (96, 24, 4, 1, False),       # 4 row groups of 24 loads and 6 waits
    (96, 12, 4, 1, True),
    (26, 3, 2, 1, True),         # row groups of 16 and 10 loads: 2 + 1 waits
    (26, 4, 2, 1, False),
    (24, 4, 1, 4, True),         # 4 waves of 6 loads, one wait each
    (24, 5, 1, 4, False),
    (189, 23, 1, 2, True),       # never stricter than the strict judge
])
def test_vm0_ok(loads, waits, paths, waves, ok):
    assert vm0_ok(rep(loads, waits), paths, waves) is ok
    if waves == 1:
        assert vm0_ok(rep(loads, waits), paths) is ok


def test_per_wave_never_stricter():
    for loads in range(0, 200, 7):
        for waits in range(0, 30):
            for waves in (1, 2, 4):
                if vm0_ok(rep(loads, waits)):
                    assert vm0_ok(rep(loads, waits), 1, waves)
    assert LOADS_PER_VM0 == 8


def test_wave_paths():
    assert wave_paths({'tplname': 'bstream-msplit',
                       'block': (64, 4, 1)}) == 4
    assert wave_paths({'tplname': 'cstream-ksplit',
                       'block': (64, 2, 1)}) == 2
    assert wave_paths({'tplname': 'bstream-mgroup',
                       'block': (64, 4, 1)}) == 1
    assert wave_paths({'tplname': 'cstream', 'block': (128, 1, 1)}) == 1
