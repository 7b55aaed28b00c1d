"""bench/opencl/opencl_h200.py --quick on PoCL's CPU device, run as a
script (upstream is loaded as gimmik_up in its own process): PyFR 3.1's
OpenCL walk over this package's and upstream 4.0's OpenCLMatMul, both
picks checked and timed, and upstream's second walk (--control) timed
against its first.  Needs upstream's wheel (.whl/pyfr, or
GIMMIK_UPSTREAM_WHEEL); skipped without it or without an OpenCL device."""

import csv
import glob
import json
import os
import subprocess
import sys

import pytest

from gimmik.pyfr import PROTOCOLS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
WHEEL = os.environ.get('GIMMIK_UPSTREAM_WHEEL') or next(iter(sorted(
    glob.glob(os.path.join(ROOT, '.whl', 'pyfr', 'gimmik-4.0-*.whl')))),
    None)

opencl = pytest.importorskip('gimmik.runtime.opencl')
pytestmark = pytest.mark.skipif(not WHEEL, reason='no upstream 4.0 wheel')


def run_script(*args):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, 'bench', 'opencl',
                                      'opencl_h200.py'), *args],
        capture_output=True, text=True, env=env, timeout=600)


def test_quick_walk(tmp_path):
    try:
        opencl.Runtime()
    except (opencl.RuntimeUnavailable, ImportError) as e:
        pytest.skip(str(e))
    p = run_script('--quick', '--ops', 'p1-hex-m0,p2-tet-m3', '--repeats',
                   '2', '--upstream', WHEEL, '--out', str(tmp_path),
                   '--name', 'q', '--control')
    assert p.returncode == 0, p.stderr[-2000:]
    rows = list(csv.DictReader(open(tmp_path / 'q.csv')))
    assert [r['op'] for r in rows] == ['p1-hex-m0', 'p2-tet-m3']
    for r in rows:
        assert r['ours_variant'] and r['up_pick'], r
        # each pick exact against float64 NumPy, C poisoned where beta = 0
        assert float(r['ours_err']) <= 1e-12 and float(r['up_err']) <= 1e-12
        assert abs(float(r['ratio']) - float(r['ours_us'])
                   / float(r['up_us'])) < 1e-3*float(r['ratio']) + 1e-3
        assert float(r['copy_gbps']) > 0
        walks = [w.split() for w in (r['ours_walk'], r['up_walk'])]
        assert all(1 <= len(w) <= PROTOCOLS['3.1', 'opencl'].nkerns
                   for w in walks)
        # the pick is a candidate the walk timed
        assert r['ours_variant'] in {x.rsplit(':', 1)[0] for x in walks[0]}
        # the control: upstream's second walk picks one of its templates,
        # timed against its first pick
        assert r['control_pick'].split('/')[0] in {
            x.rsplit(':', 1)[0].split('/')[0] for x in walks[1]}
        assert abs(float(r['control_ratio']) - float(r['control_us'])
                   / float(r['up_us'])) < 1e-3*float(r['control_ratio']) + 1e-3
    assert 'control (upstream walked twice): 2 operators' in p.stdout
    assert json.load(open(tmp_path / 'q-walks.json'))['rows'][0]['op'] == \
        'p1-hex-m0'


def test_budget_stops_before_an_operator(tmp_path):
    try:
        opencl.Runtime()
    except (opencl.RuntimeUnavailable, ImportError) as e:
        pytest.skip(str(e))
    p = run_script('--quick', '--budget', '0', '--upstream', WHEEL,
                   '--out', str(tmp_path), '--name', 'b')
    assert p.returncode == 0, p.stderr[-2000:]
    assert list(csv.DictReader(open(tmp_path / 'b.csv'))) == []
