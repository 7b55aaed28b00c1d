"""PyFR 3.1's OpenCL backend end to end on PoCL's CPU device: a small hex
box (Euler, a smooth bump) advanced with this package's OpenCLMatMul and
with a naive reference generator (tests/pyfr_opencl_driver.py) gives the
same solution.  Runs only where PyFR 3.1 is importable (it is no test
dependency: `pip install pyfr==3.1 mpich` beside the test extra); the
comparison with upstream GiMMiK's kernels is
bench/opencl/pyfr_opencl_e2e.sh."""

import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

pyfr = pytest.importorskip('pyfr')
pytest.importorskip('mpi4py')
cl = pytest.importorskip('pyopencl')

HERE = os.path.dirname(os.path.abspath(__file__))


def pyfr_version():
    from pyfr._version import __version__
    return __version__


def pocl_fp64():
    try:
        return any(d.double_fp_config for p in cl.get_platforms()
                   if p.name == 'Portable Computing Language'
                   for d in p.get_devices(cl.device_type.CPU))
    except cl.Error:
        return False


pytestmark = [
    pytest.mark.skipif(not pyfr_version().startswith('3.1'),
                       reason='the driver follows PyFR 3.1'),
    pytest.mark.skipif(not pocl_fp64(), reason='no PoCL CPU device with '
                       'fp64'),
]


def write_box(path, n):
    """A Gmsh 2.2 mesh of n^3 hexahedra filling [-1, 1]^3, every outer
    face in the boundary 'far'."""
    corners = [(0, 0, 0), (1, 0, 0), (1, 1, 0), (0, 1, 0),
               (0, 0, 1), (1, 0, 1), (1, 1, 1), (0, 1, 1)]
    faces = [(0, 3, 2, 1), (4, 5, 6, 7), (0, 1, 5, 4), (1, 2, 6, 5),
             (2, 3, 7, 6), (3, 0, 4, 7)]
    node = {p: i + 1 for i, p in
            enumerate(itertools.product(range(n + 1), repeat=3))}
    hexes, count = [], {}
    for ijk in itertools.product(range(n), repeat=3):
        h = [node[tuple(a + b for a, b in zip(ijk, c))] for c in corners]
        hexes.append(h)
        for f in faces:
            key = frozenset(h[i] for i in f)
            count[key] = (count.get(key, (0,))[0] + 1, [h[i] for i in f])
    bnd = [f for c, f in count.values() if c == 1]
    with open(path, 'w') as f:
        f.write('$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$PhysicalNames\n2\n'
                '2 1 "far"\n3 2 "fluid"\n$EndPhysicalNames\n')
        f.write(f'$Nodes\n{len(node)}\n')
        for p, i in node.items():
            x, y, z = (2*v/n - 1 for v in p)
            f.write(f'{i} {x!r} {y!r} {z!r}\n')
        f.write(f'$EndNodes\n$Elements\n{len(bnd) + len(hexes)}\n')
        for e, q in enumerate(bnd, 1):
            f.write(f'{e} 3 2 1 1 ' + ' '.join(map(str, q)) + '\n')
        for e, h in enumerate(hexes, len(bnd) + 1):
            f.write(f'{e} 5 2 2 2 ' + ' '.join(map(str, h)) + '\n')
        f.write('$EndElements\n')


INI = """[backend]
precision = double
[backend-opencl]
platform-id = portable computing language
device-type = cpu
device-id = 0
[constants]
gamma = 1.4
[solver]
system = euler
order = {order}
[solver-time-integrator]
formulation = std
scheme = rk4
controller = none
tstart = 0.0
tend = {tend!r}
dt = {dt!r}
[solver-interfaces]
riemann-solver = rusanov
[solver-interfaces-quad]
flux-pts = gauss-legendre
[solver-elements-hex]
soln-pts = gauss-legendre
[soln-bcs-far]
type = char-riem-inv
rho = 1.0
u = 0.3
v = 0.1
w = 0.0
p = 1.0
[soln-ics]
rho = 1.0 + 0.2*exp(-4*(x*x + y*y + z*z))
u = 0.3
v = 0.1
w = 0.0
p = 1.0 + 0.2*exp(-4*(x*x + y*y + z*z))
"""


def opencl_env(tmp_path):
    """The child's environment: PyFR's ctypes OpenCL pointed at the loader
    and PoCL that pyopencl's wheel bundles (its loader reads
    PYOPENCL_HOME), caches in tmp_path."""
    import gimmik
    # the child imports the gimmik this process tests, from wherever it is
    root = os.path.dirname(os.path.dirname(os.path.abspath(gimmik.__file__)))
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / 'cache'),
               POCL_CACHE_DIR=str(tmp_path / 'pocl'),
               PYTHONPATH=os.pathsep.join(
                   filter(None, [root, os.environ.get('PYTHONPATH')])))
    libs = os.path.join(os.path.dirname(cl.__file__), '.libs')
    loader = sorted(f for f in os.listdir(libs) if f.startswith('libOpenCL')
                    ) if os.path.isdir(libs) else []
    if loader and 'PYFR_OPENCL_LIBRARY_PATH' not in env:
        env.update(PYOPENCL_HOME=os.path.dirname(cl.__file__),
                   PYFR_OPENCL_LIBRARY_PATH=os.path.join(libs, loader[0]),
                   LD_LIBRARY_PATH=os.pathsep.join(
                       filter(None, [libs, env.get('LD_LIBRARY_PATH')])))
    return env


def test_pyfr_opencl_box_matches_reference(tmp_path):
    write_box(tmp_path / 'mesh.msh', 4)
    steps, dt = 20, 2e-3
    (tmp_path / 'case.ini').write_text(
        INI.format(order=2, tend=steps*dt, dt=dt))
    env = opencl_env(tmp_path)
    pyfr_cmd = [sys.executable, '-c', 'from pyfr.__main__ import main; '
                'main()']
    subprocess.run(pyfr_cmd + ['import', 'mesh.msh', 'mesh.pyfrm'],
                   cwd=tmp_path, env=env, check=True, capture_output=True)
    res = {}
    for mode in ('ours', 'ref'):
        out = tmp_path / f'{mode}.npz'
        p = subprocess.run(
            [sys.executable, os.path.join(HERE, 'pyfr_opencl_driver.py'),
             'mesh.pyfrm', 'case.ini', mode, str(out)],
            cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        res[mode] = np.load(out)
    ours, ref = res['ours'], res['ref']
    assert int(ours['steps']) == int(ref['steps']) == steps
    walks = json.loads(str(ours['walks']))
    # every operator PyFR sent went through this package's generator
    assert len(walks) >= 3
    assert all(w['module'] == 'gimmik.opencl' and w['variants']
               for w in walks)
    assert {v.split('/')[0] for w in walks for v in w['variants']} > {
        'cstream'}
    assert all(w['variants'] == ['reference']
               for w in json.loads(str(ref['walks'])))
    # the steps moved the solution, and both generators moved it alike
    a, b, first = ours['last'], ref['last'], ref['first']
    assert np.all(np.isfinite(a))
    assert np.max(np.abs(b - first)) > 1e-4*np.max(np.abs(b))
    assert np.max(np.abs(a - b)) <= 1e-12*np.max(np.abs(b))
