"""The package as PyFR's users install it: a version PyFR's requirement on
gimmik accepts, and dependencies by use (the ROCm bindings only in the `hip`
extra; source generation for every platform, the C runtime and the command
line work without them, the HIP runtime names the extra)."""

from email.parser import Parser
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import gimmik

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# PyFR 3.1's requirement on gimmik (Requires-Dist of its wheel's METADATA)
PYFR_REQUIREMENT = 'gimmik>=3.2.1'

# Upstream GiMMiK releases whose API (the generators' constructors,
# kernels() and its send() protocol) this package offers
UPSTREAM_APIS = ('4.0',)

# Distributions of the ROCm Python bindings (hip-python and what it pulls)
ROCM_BINDINGS = ('hip-python', 'rocm-bindings')


def is_rocm_binding(req):
    return any(req.name.lower().startswith(b) for b in ROCM_BINDINGS)


# -- the version ---------------------------------------------------------
def test_version_is_upstream_api_plus_own_release():
    v = Version(gimmik.__version__)
    assert v.public in UPSTREAM_APIS
    # the local label is this package's release number: numbers only, so
    # that releases sort numerically
    assert v.local and all(p.isdigit() for p in v.local.split('.'))


@pytest.mark.parametrize('spec,accepts', [
    (PYFR_REQUIREMENT.removeprefix('gimmik'), True),
    ('>=4.0', True), ('==4.0', True), ('~=4.0', True),
    ('>=4.1', False), ('<4.0', False), ('==3.2.1', False),
])
def test_version_meets_requirements_as_upstreams_would(spec, accepts):
    """A requirement without a local label is matched on the public part
    only (PEP 440): this package meets what upstream's release meets."""
    v = Version(gimmik.__version__)
    assert SpecifierSet(spec).contains(v) is accepts
    assert SpecifierSet(spec).contains(Version(v.public)) is accepts


# -- the metadata, as the build backend writes it ----------------------------
@pytest.fixture(scope='module')
def egg_info(tmp_path_factory):
    """The build backend's (setuptools') metadata for this source tree: the
    version (PKG-INFO) and requirements by extra (requires.txt, None for
    the base install), built from a copy so the tree is left alone."""
    pytest.importorskip('setuptools')
    src = tmp_path_factory.mktemp('src')
    for name in ('pyproject.toml', 'README.md'):
        shutil.copy(os.path.join(ROOT, name), src)
    shutil.copytree(os.path.join(ROOT, 'gimmik'), src / 'gimmik',
                    ignore=shutil.ignore_patterns('__pycache__'))
    out = tmp_path_factory.mktemp('meta')
    code = ('import sys; sys.argv[1:] = ["-q", "egg_info", "--egg-base", '
            'sys.argv[1]]; from setuptools import setup; setup()')
    r = subprocess.run([sys.executable, '-c', code, str(out)], cwd=src,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    info = out / 'gimmik.egg-info'
    with open(info / 'PKG-INFO') as f:
        pkg_info = Parser().parse(f)
    reqs, section = {None: set()}, None
    for line in (info / 'requires.txt').read_text().splitlines():
        line = line.strip()
        if line.startswith('['):
            section = line[1:-1].split(':')[0] or None
            reqs.setdefault(section, set())
        elif line:
            reqs[section].add(Requirement(line).name.lower())
    return pkg_info, reqs


def test_metadata_version_is_the_package_version(egg_info):
    pkg_info, _ = egg_info
    assert pkg_info['Name'] == 'gimmik'
    assert pkg_info['Version'] == gimmik.__version__
    assert Requirement(PYFR_REQUIREMENT).specifier.contains(
        Version(pkg_info['Version']))


def test_rocm_bindings_only_in_the_hip_extra(egg_info):
    pkg_info, reqs = egg_info
    extras = set(pkg_info.get_all('Provides-Extra'))
    assert 'hip' in extras and extras == set(reqs) - {None}
    assert reqs[None] >= {'mako', 'numpy'}
    assert 'hip-python' in reqs['hip']
    for extra, names in reqs.items():
        if extra != 'hip':
            assert not any(is_rocm_binding(Requirement(n)) for n in names), \
                extra


# -- an install without the hip extra ---------------------------------------
# hip-python's packages made unimportable, as in an install without it
BLOCK_ROCM = '''
import sys

class BlockRocm:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('hip', 'rocm'):
            raise ModuleNotFoundError(f'No module named {name!r}', name=name)

sys.meta_path.insert(0, BlockRocm())
'''

WITHOUT_HIP = BLOCK_ROCM + '''
import importlib, json
import numpy as np
import gimmik
from gimmik.runtime import MissingExtra, RuntimeUnavailable, get_runtime

for mod in ('gimmik.hip', 'gimmik.cuda', 'gimmik.c', 'gimmik.cli',
            'gimmik.tune', 'gimmik.isa', 'gimmik.hiprtc',
            'gimmik.runtime.hip', 'gimmik.runtime.cuda', 'gimmik.runtime.c'):
    importlib.import_module(mod)

rng = np.random.default_rng(1)
dense = rng.standard_normal((20, 12))
sparse = np.where(rng.random((24, 16)) < 0.2, rng.standard_normal((24, 16)),
                  0.0)
sparse[0, 0] = 1.0
families = {}
for A in (dense, sparse):
    for arch in ('gfx90a', 'gfx942'):
        kgen = gimmik.HIPMatMul(A, n=1000, ldb=1000, ldc=1000).kernels(
            np.float64, gcn_arch=arch)
        for src, meta in kgen:
            assert '__global__' in src
            families.setdefault('hip', set()).add(meta['tplname'])
    for src, meta in gimmik.CUDAMatMul(A, beta=1.0).kernels(
            np.float64, compute_capability=(9, 0)):
        families.setdefault('cuda', set()).add(meta['tplname'])
    for src, meta in gimmik.CMatMul(A).kernels(np.float64):
        families.setdefault('c', set()).add(meta['tplname'])
legacy = gimmik.generate_mm(sparse, 'float64', 'hip')

errors = {}
def error_of(what, call):
    try:
        call()
    except Exception as e:
        errors[what] = [type(e).__name__, str(e), isinstance(e, ImportError),
                        isinstance(e, RuntimeUnavailable),
                        isinstance(e, MissingExtra)]

from gimmik.hiprtc import compile_hip
import gimmik.runtime.hip as hiprt
error_of('compile_hip', lambda: compile_hip(legacy, 'gfx90a'))
error_of('load_hip', hiprt.load_hip)
error_of('get_runtime', lambda: get_runtime('hip'))
auto = get_runtime('auto').name
print(json.dumps({
    'families': {k: sorted(v) for k, v in families.items()},
    'errors': errors, 'auto': auto,
    'rocm_imported': sorted(m for m in sys.modules
                            if m.split('.')[0] in ('hip', 'rocm'))}))
'''


def run_python(code, **kwargs):
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, '-c', textwrap.dedent(code)],
                       capture_output=True, text=True, env=env, timeout=300,
                       **kwargs)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_blocker_hides_hip_python():
    """The stand-in for a missing install really hides the bindings."""
    out = run_python(BLOCK_ROCM + '''
try:
    import hip
    print('imported')
except ModuleNotFoundError:
    print('missing')
''')
    assert out.split() == ['missing']


def test_without_hip_extra_generation_works_and_runtime_names_extra():
    res = json.loads(run_python(WITHOUT_HIP).splitlines()[-1])
    # every platform's source generation ran, AMD matrix-core families too
    assert {'cstream', 'bstream', 'mfma-dense'} <= set(res['families']['hip'])
    assert 'cstream' in res['families']['cuda']
    assert res['families']['c']
    assert res['rocm_imported'] == []
    assert set(res['errors']) == {'compile_hip', 'load_hip', 'get_runtime'}
    for what, (name, msg, is_import, is_unavail, is_extra) in \
            res['errors'].items():
        assert "pip install 'gimmik[hip]'" in msg, what
        assert 'hip-python' in msg, what
        assert is_unavail and is_import and is_extra, (what, name)
    # `auto` moves on to a platform that can run here
    assert res['auto'] != 'hip'


def test_missing_extra_is_runtime_unavailable_and_import_error():
    from gimmik.runtime import MissingExtra, RuntimeUnavailable
    e = MissingExtra('hip-python', 'hip', "gimmik's HIP runtime",
                     "No module named 'hip'")
    assert isinstance(e, RuntimeUnavailable) and isinstance(e, ImportError)
    assert (e.package, e.extra) == ('hip-python', 'hip')
    assert str(e) == ("gimmik's HIP runtime needs hip-python, which is not "
                      "installed (No module named 'hip'); install it with "
                      "pip install 'gimmik[hip]'")


# -- real installs (network, minutes): --full only ----------------------------
PYFR_IMPORTS = ('import pyfr.backends.cuda.gimmik, pyfr.backends.hip.gimmik, '
                'gimmik; print(gimmik.__version__)')


@pytest.mark.full
@pytest.mark.parametrize('extra', ['', '[hip]'])
def test_fresh_venv_with_pyfr(tmp_path, extra):
    """`pip install pyfr==3.1 mpich <wheel>` in a fresh venv resolves in
    one command, `pip check` is clean and PyFR imports this package; the
    ROCm bindings come only with the hip extra.  Needs PyPI."""
    if sys.version_info < (3, 11):
        pytest.skip('PyFR 3.1 needs Python >= 3.11')
    whl = tmp_path / 'whl'
    venv = tmp_path / 'venv'
    pip = [str(venv / 'bin' / 'python'), '-m', 'pip']

    def sh(*cmd):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, (cmd, r.stdout[-2000:], r.stderr[-2000:])
        return r.stdout

    sh(sys.executable, '-m', 'pip', 'wheel', '-q', '--no-deps', ROOT,
       '-w', str(whl))
    wheel, = whl.glob('gimmik-*.whl')
    sh(sys.executable, '-m', 'venv', str(venv))
    sh(*pip, 'install', '-q', 'pyfr==3.1', 'mpich', f'{wheel}{extra}')
    sh(*pip, 'check')
    out = sh(str(venv / 'bin' / 'python'), '-c', PYFR_IMPORTS)
    assert out.split() == [gimmik.__version__]
    names = [Requirement(line.split('==')[0]).name.lower() for line in
             sh(*pip, 'freeze').splitlines() if '==' in line]
    assert any(is_rocm_binding(Requirement(n)) for n in names) == bool(extra)


@pytest.mark.parametrize('device_there', [True, False])
def test_auto_warns_when_an_extra_hides_a_device(monkeypatch, tmp_path,
                                                 device_there):
    """`auto` passing over the HIP runtime for want of the extra, on a
    machine with an AMD GPU's device node, says so."""
    import warnings
    import gimmik.runtime as rt
    import gimmik.runtime.hip as hiprt
    node = tmp_path / 'kfd'
    if device_there:
        node.touch()
    monkeypatch.setitem(rt.DEVICE_NODES, 'hip', str(node))
    monkeypatch.setattr(hiprt, '_state', {})
    monkeypatch.setitem(sys.modules, 'hip', None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        got = rt.get_runtime('auto')
    assert got.name != 'hip'
    said = [str(w.message) for w in caught
            if issubclass(w.category, RuntimeWarning)]
    if device_there:
        assert len(said) == 1 and "pip install 'gimmik[hip]'" in said[0]
        assert f'platform {got.name} chosen' in said[0]
    else:
        assert said == []


def test_setup_py_shim_reads_pyproject():
    """`python setup.py --version` (tools that expect a setup.py) gives the
    one version, read from the package through pyproject.toml."""
    r = subprocess.run([sys.executable, 'setup.py', '--version'], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == gimmik.__version__
