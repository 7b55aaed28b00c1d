"""The package's layers: no module of gimmik imports (at any depth of its
code) a module of a layer above its own, and every module has a layer."""

import ast
import pathlib
import sys

import gimmik

# Lowest first; a module may import its own layer and those below it
LAYERS = [
    {'errors', 'util', 'progress', 'verify', 'targets'},
    {'analysis'},
    {'validate', 'operators', 'plans', 'fragments', 'cache'},
    {'cost'},
    {'families'},
    {'base'},
    {'order'},
    {'hip', 'cuda', 'c', 'opencl', 'metal', 'pyfr', 'upstream_api'},
    {'emulate', 'hiprtc', 'isa'},
    {'runtime'},
    {'tune'},
    {'sweep'},
    {'report', 'cli'},
]
LAYER = {name: i for i, names in enumerate(LAYERS) for name in names}
ROOT = pathlib.Path(gimmik.__file__).parent


def unit(module):
    """A module's unit: the first name below gimmik (a package counts as
    one unit), None for the package's own __init__."""
    parts = module.split('.')
    return parts[1] if len(parts) > 1 else None


def imports():
    """[(importing unit, imported unit, file, line)] of every import of a
    gimmik module by another unit."""
    out = []
    for path in sorted(ROOT.rglob('*.py')):
        rel = path.relative_to(ROOT.parent).with_suffix('')
        me = unit('.'.join(rel.parts))
        if me == '__init__':
            me = None
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                mod = node.module or ''
                names = ([f'gimmik.{a.name}' for a in node.names]
                         if mod == 'gimmik' else [mod])
            else:
                continue
            for name in names:
                if name.startswith('gimmik.') and unit(name) != me:
                    out.append((me, unit(name), path.name, node.lineno))
    return out


def test_every_module_has_a_layer():
    units = {unit('gimmik.' + p.stem) for p in ROOT.glob('*.py')
             if p.stem != '__init__'}
    units |= {p.name for p in ROOT.iterdir()
              if (p / '__init__.py').exists()}
    assert units - set(LAYER) == set()
    assert set(LAYER) - units == set()


def test_no_import_from_a_layer_above():
    found = imports()
    assert found, 'the walk found no imports'
    # the package's __init__ (me None) is the facade above every layer
    up = [(me, it, f, ln) for me, it, f, ln in found
          if me is not None and LAYER[it] > LAYER[me]]
    assert up == []


def test_the_walk_sees_an_upward_import(tmp_path, monkeypatch):
    """An import of gimmik.runtime in a low module is reported."""
    pkg = tmp_path / 'gimmik'
    pkg.mkdir()
    (pkg / '__init__.py').write_text('')
    (pkg / 'cost.py').write_text(
        'def f():\n    from gimmik.runtime import x\n')
    monkeypatch.setattr(sys.modules[__name__], 'ROOT', pkg)
    assert [(me, it) for me, it, _, _ in imports()] == [('cost', 'runtime')]
    assert LAYER['runtime'] > LAYER['cost']
