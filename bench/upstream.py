"""Load upstream GiMMiK (a wheel or an unpacked package folder) beside this
project's `gimmik`, under the module name `gimmik_up`.

Both packages are called `gimmik` and upstream's modules import each other
absolutely (`from gimmik.base import ...`).  The loader therefore imports
upstream with the `gimmik*` entries of sys.modules set aside and upstream's
folder first on sys.path, then renames every upstream module to
`gimmik_up*` (sys.modules keys and each module's `__name__`, which upstream
uses to find its templates with pkgutil) and puts this project's modules
back.  Upstream's classes keep the references they bound at import time.
"""

import importlib
import os
import sys
import tempfile
import zipfile

UP_NAME = 'gimmik_up'

_loaded = {}


def _is_pkg(name, pkg='gimmik'):
    return name == pkg or name.startswith(pkg + '.')


def unpack(path):
    """The folder holding upstream's `gimmik` package: `path` itself when it
    holds one, else a wheel unpacked to a temporary folder."""
    if os.path.isdir(path):
        if not os.path.isfile(os.path.join(path, 'gimmik', '__init__.py')):
            raise ValueError(f'{path} holds no gimmik package')
        return path
    if not zipfile.is_zipfile(path):
        raise ValueError(f'{path} is neither a folder nor a wheel')
    dest = tempfile.mkdtemp(prefix='gimmik-upstream-')
    with zipfile.ZipFile(path) as z:
        z.extractall(dest)
    return dest


def load_upstream(path):
    """Import upstream GiMMiK from `path` (wheel or folder) as `gimmik_up`
    and return that package; this project's `gimmik` stays importable and
    unchanged.  Idempotent per path."""
    path = os.path.abspath(path)
    if path in _loaded:
        return _loaded[path]
    if UP_NAME in sys.modules:
        raise RuntimeError(f'{UP_NAME} is already loaded from another path')
    root = unpack(path)

    ours = {k: v for k, v in sys.modules.items() if _is_pkg(k)}
    for k in ours:
        del sys.modules[k]
    sys.path.insert(0, root)
    try:
        importlib.invalidate_caches()
        pkg = importlib.import_module('gimmik')
        if not os.path.abspath(pkg.__file__).startswith(
                os.path.abspath(root)):
            raise RuntimeError(f'upstream gimmik not found under {root}')
        up = {k: v for k, v in sys.modules.items() if _is_pkg(k)}
    finally:
        sys.path.remove(root)
        for k in [k for k in sys.modules if _is_pkg(k)]:
            del sys.modules[k]
        sys.modules.update(ours)
        importlib.invalidate_caches()

    for k, mod in up.items():
        new = UP_NAME + k[len('gimmik'):]
        mod.__name__ = new
        sys.modules[new] = mod
    pkg = sys.modules[UP_NAME]
    _loaded[path] = pkg
    return pkg
