"""The CPU parts of bench/pyfr/pyfr_multirank.sh: the slab partition
that stands in for METIS (bench/pyfr/slab_partition.py) and the check of
the cache directory the ranks shared (bench/pyfr/cache_check.py), each
shown to catch what it is there to catch."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import uuid

import numpy as np
import pytest

from bench.pyfr import cache_check, slab_partition

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(__file__)), 'pyfr',
                      'pyfr_multirank.sh')


@pytest.mark.parametrize('nv, nparts', [(27, 2), (64, 3), (10, 10), (7, 1)])
def test_slabs_are_contiguous_balanced_and_complete(nv, nparts):
    parts = slab_partition.slab_parts(np.ones((nv, 1), dtype=int), nparts)
    assert len(parts) == nv and set(parts) == set(range(nparts))
    assert (np.diff(parts) >= 0).all()          # contiguous runs, in order
    sizes = np.bincount(parts)
    assert sizes.max() - sizes.min() <= 1


def test_slabs_follow_the_weights():
    w = np.array([[3], [1], [1], [1], [1], [1]])      # 8 in all
    parts = slab_partition.slab_parts(w, 2)
    assert list(parts) == [0, 0, 1, 1, 1, 1]
    with pytest.raises(ValueError):
        slab_partition.slab_parts(w, 7)             # more parts than cells
    with pytest.raises(ValueError):
        slab_partition.slab_parts(np.zeros((4, 1)), 2)


def _elf():
    """A whole ELF file of this machine (the Python executable)."""
    with open(os.path.realpath(sys.executable), 'rb') as f:
        data = f.read()
    assert data[:4] == b'\x7fELF'
    return data


def _tree(root):
    """A cache as two ranks leave it: PyFR's cubins under pyfr/cuda/,
    gimmik's entries and builds under gimmik/, another library's files."""
    elf = _elf()
    (root / 'pyfr' / 'cuda').mkdir(parents=True)
    for i in range(3):
        (root / 'pyfr' / 'cuda' / hashlib.sha256(bytes([i])).hexdigest()) \
            .write_bytes(elf[:-1] + bytes([i]))
    g = root / 'gimmik'
    for d in ('tune', 'c', 'locks'):
        (g / d).mkdir(parents=True)
    (g / 'tune' / ('ab'*32 + '.json')).write_text(json.dumps({'x': 1}))
    so = b'\x7fELF-not-really'
    digest = hashlib.sha256(so).hexdigest()[:16]
    (g / 'c' / f'{"cd"*12}.{digest}.so').write_bytes(so)
    (g / 'locks' / f'tune-{"ab"*32}.lock').write_bytes(b'')
    (root / 'pocl' / 'kcache').mkdir(parents=True)
    (root / 'pocl' / 'kcache' / 'tempfile_x').write_bytes(b'')
    return root


def test_cache_check_passes_a_whole_cache(tmp_path):
    res = cache_check.check(str(_tree(tmp_path)))
    assert res['problems'] == [], res['problems']
    assert (res['pyfr'], res['gimmik']) == (3, 2)
    assert res['files'] == 7


@pytest.mark.parametrize('damage, kind', [
    ('cubin cut short', 'torn'), ('uuid leftover', 'leftover'),
    ('empty cubin', 'empty'), ('gimmik part', 'leftover'),
    ('json torn', 'torn'), ('build torn', 'torn'),
    ('build twice', 'duplicate')])
def test_cache_check_finds(tmp_path, damage, kind):
    root = _tree(tmp_path)
    cuda, g = root / 'pyfr' / 'cuda', root / 'gimmik'
    cubin = sorted(cuda.iterdir())[0]
    if damage == 'cubin cut short':
        cubin.write_bytes(cubin.read_bytes()[:len(cubin.read_bytes())//2])
    elif damage == 'uuid leftover':
        shutil.copy(cubin, cuda / str(uuid.uuid4()))
    elif damage == 'empty cubin':
        cubin.write_bytes(b'')
    elif damage == 'gimmik part':
        (g / 'tune' / ('.' + 'ab'*32 + '.jsonx1y2z3w4.part')).write_text('{')
    elif damage == 'json torn':
        (g / 'tune' / ('ab'*32 + '.json')).write_text('{"x": ')
    elif damage == 'build torn':
        so = next((g / 'c').iterdir())
        so.write_bytes(so.read_bytes()[:-2])
    elif damage == 'build twice':
        other = b'\x7fELF-another-build'
        (g / 'c' / f'{"cd"*12}.{hashlib.sha256(other).hexdigest()[:16]}.so') \
            .write_bytes(other)
    res = cache_check.check(str(root))
    assert res[kind] == 1, res['problems']
    assert len(res['problems']) == 1
    # the command line says so with its exit status
    r = subprocess.run([sys.executable, cache_check.__file__, str(root)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and kind in r.stdout


def test_dry_run_names_every_step(tmp_path):
    """DRY_RUN=1 prints the steps of one case, two packages, two phases:
    partition, mpiexec -n NP with one XDG_CACHE_HOME a package, the cache
    check after each run."""
    env = dict(os.environ, DRY_RUN='1', NP='2', VENV_ours='/v/ours',
               VENV_up='/v/up', TMPD=str(tmp_path), OUT=str(tmp_path / 'o'))
    r = subprocess.run(['bash', SCRIPT, 'hex:3:1'], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert any('slab_partition.py' in ln and ln.endswith(' 2')
               for ln in lines)
    runs = [ln for ln in lines if 'mpiexec -n 2' in ln]
    assert len(runs) == 4
    for pkg in ('ours', 'up'):
        mine = [ln for ln in runs if f'/v/{pkg}/bin/mpiexec' in ln]
        assert len(mine) == 2 and len({ln.split('XDG_CACHE_HOME=')[1]
                                       .split()[0] for ln in mine}) == 1
    assert sum('cache_check.py' in ln for ln in lines) == 4
