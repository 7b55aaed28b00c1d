"""Operator matrices to benchmark: the PyFR suite and MatrixMarket files.
A spec is ``FILE.npz:KEY``, ``FILE.mtx`` or a key of the default suite
(``p3-hex-m460``); a suite is an .npz or a directory of .mtx files."""

import contextlib
import fnmatch
import json
import math
import os
import re
import zipfile
import zlib

import numpy as np

from gimmik.analysis import MAX_DIM, MAX_ENTRIES
from gimmik.validate import check_matrix

# Where the committed PyFR suite lives, relative to the package; the
# GIMMIK_OPERATORS environment variable overrides it.
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_SUITE_CANDIDATES = (
    os.path.join(_PKG_DIR, 'data', 'pyfr-ops.npz'),
    os.path.join(os.path.dirname(_PKG_DIR), 'bench', 'operators',
                 'pyfr-ops.npz'),
)

# npz entries that are not operators
_META_KEYS = frozenset({'provenance'})

# PyFR applies these with beta = 1 (they accumulate into an existing
# result); every other operator overwrites its output (beta = 0).
BETA_ONE_MATRICES = frozenset({'m3', 'm6'})

ELEMENTS = ('quad', 'tri', 'hex', 'tet', 'pri', 'pyr')

_PYFR_NAME = re.compile(r'p(\d+)-([a-z]+)-(m\d+)\Z')
_GIMMIK_LAYOUT = re.compile(r'(?:\A|/)p(\d+)/([a-z]+)/(m\d+)-sp\.mtx\Z')
_SAFE_NAME = re.compile(r'[^A-Za-z0-9_.+-]')


class OperatorNameError(ValueError):
    """A spec or key that names no operator."""


def default_suite_path():
    """Path of the default PyFR suite (GIMMIK_OPERATORS overrides it)."""
    env = os.environ.get('GIMMIK_OPERATORS')
    if env:
        return env
    for path in _SUITE_CANDIDATES:
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(
        'the PyFR operator suite pyfr-ops.npz was not found next to the '
        'gimmik package (bench/operators/ of a source checkout); set '
        'GIMMIK_OPERATORS or pass a path')


def parse_name(name):
    """(order, element, matrix) of a PyFR suite name such as 'p3-hex-m460',
    or None for any other name."""
    m = _PYFR_NAME.match(name)
    return (int(m[1]), m[2], m[3]) if m else None


def default_beta(name):
    """The beta PyFR uses for an operator: 1 for M3 and M6, else 0."""
    parsed = parse_name(name)
    matrix = parsed[2] if parsed else name.rsplit('-', 1)[-1].lower()
    return 1.0 if matrix in BETA_ONE_MATRICES else 0.0


def safe_name(name):
    """`name` with everything but letters, digits and _.+- replaced by _
    (names end up in CSV rows, Markdown tables and file names)."""
    return _SAFE_NAME.sub('_', str(name)) or '_'


def sort_key(name):
    """Order PyFR names by element, order, matrix; others after, by name."""
    parsed = parse_name(name)
    if parsed is None:
        return (1, name)
    order, element, matrix = parsed
    eix = ELEMENTS.index(element) if element in ELEMENTS else len(ELEMENTS)
    return (0, eix, order, int(matrix[1:]), name)


# -- MatrixMarket ---------------------------------------------------------
def read_mtx(path):
    """Read a real MatrixMarket file into a dense float64 array (ValueError
    naming the line of a bad number)."""
    with open(path, 'rb') as f:
        raw = f.read()
    # a UTF-8 byte-order mark, as some editors write one
    if raw.startswith(b'\xef\xbb\xbf'):
        raw = raw[3:]
    lines = raw.decode('ascii', errors='replace').splitlines()
    if not lines:
        raise ValueError(f'{path}: empty file, not MatrixMarket')

    header = lines[0].split()
    if len(header) != 5 or header[0].lower() != '%%matrixmarket' \
            or header[1].lower() != 'matrix':
        raise ValueError(f'{path}: not a MatrixMarket matrix file '
                         f'(header {lines[0][:60]!r})')
    fmt, field, symm = (h.lower() for h in header[2:])
    if fmt not in ('coordinate', 'array'):
        raise ValueError(f'{path}: unknown MatrixMarket format {fmt!r}')
    if field not in ('real', 'double', 'integer'):
        raise ValueError(f'{path}: MatrixMarket field {field!r} is not '
                         f'supported (only real and integer)')
    if symm not in ('general', 'symmetric', 'skew-symmetric'):
        raise ValueError(f'{path}: MatrixMarket symmetry {symm!r} is not '
                         f'supported')

    # (line number, words) of the lines that are not blank or comments
    body = [(no, ln.split()) for no, ln in enumerate(lines[1:], 2)
            if ln.strip() and not ln.startswith('%')]
    if not body:
        raise ValueError(f'{path}: no size line')
    no, words = body[0]
    size = [_mtx_int(path, no, w, 'bad size line') for w in words]
    data = body[1:]
    integer = field == 'integer'

    if fmt == 'coordinate':
        if len(size) != 3:
            raise ValueError(f'{path}: coordinate size line needs rows, '
                             f'columns and entries')
        m, k, nent = size
        _check_shape(path, m, k)
        if symm != 'general' and m != k:
            raise ValueError(f'{path}: a {symm} matrix must be square, not '
                             f'{m} x {k}')
        if len(data) != nent:
            raise ValueError(f'{path}: {nent} entries declared, '
                             f'{len(data)} found')
        A = np.zeros((m, k))
        for no, ln in data:
            if len(ln) != 3:
                raise ValueError(f'{path}: line {no}: bad entry '
                                 f'{" ".join(ln)!r}')
            i = _mtx_int(path, no, ln[0], 'bad entry') - 1
            j = _mtx_int(path, no, ln[1], 'bad entry') - 1
            v = _mtx_value(path, no, ln[2], integer)
            if not (0 <= i < m and 0 <= j < k):
                raise ValueError(f'{path}: line {no}: entry ({i + 1}, '
                                 f'{j + 1}) is outside the {m} x {k} matrix')
            # a symmetric file holds the lower triangle only (and a
            # skew-symmetric one no diagonal)
            if symm != 'general' and (i < j or (i == j and symm !=
                                                'symmetric')):
                raise ValueError(f'{path}: line {no}: entry ({i + 1}, '
                                 f'{j + 1}) is not below the diagonal of a '
                                 f'{symm} matrix')
            A[i, j] += v
            if symm != 'general' and i != j:
                A[j, i] += v if symm == 'symmetric' else -v
    else:
        if len(size) != 2:
            raise ValueError(f'{path}: array size line needs rows and '
                             f'columns')
        m, k = size
        _check_shape(path, m, k)
        vals = []
        for no, ln in data:
            if len(ln) != 1:
                raise ValueError(f'{path}: line {no}: array entries must be '
                                 f'one per line')
            vals.append(_mtx_value(path, no, ln[0], integer,
                                   'bad array value'))
        if symm == 'general':
            if len(vals) != m*k:
                raise ValueError(f'{path}: {m*k} values expected, '
                                 f'{len(vals)} found')
            A = np.array(vals).reshape(k, m).T  # column-major
        else:
            if m != k:
                raise ValueError(f'{path}: a {symm} matrix must be square')
            lower = [(i, j) for j in range(k) for i in range(j, m)
                     if symm == 'symmetric' or i != j]
            if len(vals) != len(lower):
                raise ValueError(f'{path}: {len(lower)} values expected, '
                                 f'{len(vals)} found')
            A = np.zeros((m, k))
            for (i, j), v in zip(lower, vals):
                A[i, j] = v
                A[j, i] = v if symm == 'symmetric' else -v
    return A


# MatrixMarket's numbers: stricter than Python's int() and float(), which
# read 1_0 as 10 and take inf, nan and surrounding space
_MTX_INT = re.compile(r'[+-]?[0-9]+\Z')
_MTX_REAL = re.compile(r'[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\Z')


def _mtx_int(path, no, word, what):
    """An integer word (a size or an index) of line `no`."""
    if not _MTX_INT.match(word):
        raise ValueError(f'{path}: line {no}: {what}: {word!r} is not an '
                         f'integer')
    return int(word)


def _mtx_value(path, no, word, integer, what='bad entry'):
    """A value word of line `no` as a float64: an integer field's exactly
    (else ValueError), a real field's within float64's range."""
    if integer:
        v = _mtx_int(path, no, word, what)
        try:
            x = float(v)
        except OverflowError:
            x = math.inf
        if x != v:
            raise ValueError(
                f'{path}: line {no}: the integer {word} does not round-trip '
                f'as float64 (integers beyond 2**53 lose digits, beyond '
                f'1.8e308 overflow)')
        return x
    if not _MTX_REAL.match(word):
        raise ValueError(f'{path}: line {no}: {what}: {word!r} is not a '
                         f'real number')
    x = float(word)
    if math.isinf(x):
        raise ValueError(f'{path}: line {no}: {word} overflows float64 '
                         f'(beyond +-{np.finfo(np.float64).max:.4g})')
    return x


def _check_shape(path, m, k):
    if m < 1 or k < 1:
        raise ValueError(f'{path}: matrix size {m} x {k} is empty')
    if max(m, k) > MAX_DIM or m*k > MAX_ENTRIES:
        raise ValueError(f'{path}: matrix size {m} x {k}: m and k must be '
                         f'at most {MAX_DIM} and m*k at most {MAX_ENTRIES}')


def write_mtx(path, A, comment=None):
    """Write A as a MatrixMarket coordinate real general file."""
    A = np.asarray(A, dtype=np.float64)
    rows, cols = np.nonzero(A)
    with open(path, 'w') as f:
        f.write('%%MatrixMarket matrix coordinate real general\n')
        if comment:
            for line in str(comment).splitlines():
                f.write(f'% {line}\n')
        f.write(f'{A.shape[0]} {A.shape[1]} {len(rows)}\n')
        for i, j in zip(rows, cols):
            f.write(f'{i + 1} {j + 1} {float(A[i, j])!r}\n')


# -- npz ------------------------------------------------------------------
@contextlib.contextmanager
def _open_npz(path):
    """np.load of an .npz archive; an archive that cannot be read (cut
    short, damaged, not a zip file) is a ValueError naming it, wherever the
    damage shows (opening it or reading a member)."""
    # np.load takes a file that is no zip for a .npy or a pickle, and its
    # advice about pickled data would mislead
    if os.path.isfile(path) and not zipfile.is_zipfile(path):
        raise ValueError(f'{path}: not a valid .npz archive: not a zip file '
                         f'(another format, or cut short?)')
    try:
        with np.load(path, allow_pickle=False) as f:
            yield f
    except OperatorNameError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError) as e:
        raise ValueError(f'{path}: not a readable .npz archive (cut short '
                         f'or damaged?): {e}') from e


def _npz_keys(path):
    with _open_npz(path) as f:
        return [k for k in f.files if k not in _META_KEYS]


def _npz_get(path, key):
    with _open_npz(path) as f:
        if key not in f.files or key in _META_KEYS:
            keys = [k for k in f.files if k not in _META_KEYS]
            close = fnmatch.filter(keys, f'*{key}*')[:5]
            hint = f'; similar: {", ".join(close)}' if close else ''
            raise OperatorNameError(f'{path} has no operator {key!r} '
                                    f'({len(keys)} operators{hint})')
        return f[key]


def provenance(path=None):
    """The provenance dict stored in a suite .npz (empty if none)."""
    path = path or default_suite_path()
    with _open_npz(path) as f:
        if 'provenance' not in f.files:
            return {}
        return json.loads(str(f['provenance']))


# -- public ---------------------------------------------------------------
def load_operator(spec):
    """(name, A) for a spec: 'FILE.npz:KEY', 'FILE.mtx' or a key of the
    default suite.  A is a checked, float64 2-D array."""
    if not isinstance(spec, (str, os.PathLike)):
        raise TypeError(f'spec must be a path or a str, not '
                        f'{type(spec).__name__}')
    spec = os.fspath(spec)
    if not spec:
        raise ValueError('spec is empty')

    if spec.endswith('.mtx'):
        _need_file(spec, 'operator file')
        name = _mtx_name(spec, os.path.dirname(spec))
        return name, check_matrix(read_mtx(spec), arg=spec)

    path, sep, key = spec.rpartition(':')
    if sep and path.endswith('.npz'):
        _need_file(path, 'operator archive')
        A = _npz_get(path, key)
        return safe_name(key), check_matrix(A, arg=spec)

    if spec.endswith('.npz'):
        raise ValueError(f'spec {spec!r} names an archive but no key: use '
                         f'FILE.npz:KEY')
    if os.sep in spec or '/' in spec:
        raise ValueError(f'spec {spec!r} is neither FILE.mtx, FILE.npz:KEY '
                         f'nor a key of the PyFR suite')
    A = _npz_get(default_suite_path(), spec)
    return safe_name(spec), check_matrix(A, arg=spec)


def _need_file(path, what):
    """FileNotFoundError, or IsADirectoryError for a folder, unless path is
    a file."""
    if os.path.isdir(path):
        raise IsADirectoryError(f'{what} {path!r} is a directory, not a '
                                f'file (a suite of .mtx files is given as '
                                f'the suite path)')
    if not os.path.isfile(path):
        raise FileNotFoundError(f'{what} {path!r} does not exist')


def _mtx_name(path, root):
    """Suite name of an .mtx file below root: p{p}-{ele}-{mat} for the
    GiMMiK layout, else its relative path without .mtx, '/' -> '-'."""
    m = _GIMMIK_LAYOUT.search(os.path.abspath(path).replace(os.sep, '/'))
    if m:
        return f'p{m[1]}-{m[2]}-{m[3]}'
    rel = os.path.relpath(path, root).replace(os.sep, '/')
    return safe_name(rel[:-len('.mtx')].replace('/', '-'))


def _match(name, patterns):
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _patterns(pattern):
    if isinstance(pattern, str):
        pats = [p.strip() for p in pattern.split(',')]
    else:
        pats = [str(p).strip() for p in pattern]
    pats = [p for p in pats if p]
    if not pats:
        raise ValueError('pattern is empty')
    return pats


def suite_names(pattern='*', path=None):
    """Sorted names of the operators of a suite matching `pattern` (an
    fnmatch glob, or several separated by commas), without loading them."""
    return list(_suite_sources(pattern, path))


def _suite_sources(pattern, path):
    """{name: loader} for the matching operators of a suite, in order."""
    pats = _patterns(pattern)
    path = os.fspath(path) if path is not None else default_suite_path()

    if os.path.isdir(path):
        found = {}
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames.sort()
            for fn in sorted(filenames):
                if fn.endswith('.mtx'):
                    full = os.path.join(dirpath, fn)
                    name = _mtx_name(full, path)
                    if name in found:
                        raise ValueError(f'{path}: two files are named '
                                         f'{name!r}')
                    found[name] = full
        loaders = {n: (lambda f=f: read_mtx(f)) for n, f in found.items()}
    elif os.path.isfile(path):
        if not path.endswith('.npz'):
            raise ValueError(f'suite path {path!r} must be an .npz file or '
                             f'a directory of .mtx files')
        loaders, keys = {}, {}
        for k in _npz_keys(path):
            name = safe_name(k)
            if name in keys:
                raise ValueError(f'{path}: keys {keys[name]!r} and {k!r} '
                                 f'both make the operator name {name!r} '
                                 f'(only letters, digits and _.+- are kept); '
                                 f'rename one')
            keys[name] = k
            loaders[name] = (lambda k=k: _npz_get(path, k))
    else:
        raise FileNotFoundError(f'suite path {path!r} does not exist')

    names = sorted((n for n in loaders if _match(n, pats)), key=sort_key)
    if not names:
        raise OperatorNameError(f'no operator of {path} matches '
                                f'{",".join(pats)!r}')
    return {n: loaders[n] for n in names}


def suite(pattern='*', path=None):
    """{name: A} of the operators of a suite matching `pattern` (an fnmatch
    glob, or several separated by commas).  `path` is an .npz file or a
    directory of .mtx files; the default is the PyFR suite."""
    return {name: check_matrix(load(), arg=name)
            for name, load in _suite_sources(pattern, path).items()}


def export_mtx(outdir, pattern='*', path=None):
    """Write a suite as p{p}/{ele}/{mat}-sp.mtx files (other names as
    NAME.mtx) below outdir; returns the paths written."""
    written = []
    for name, A in suite(pattern, path).items():
        parsed = parse_name(name)
        if parsed:
            order, element, matrix = parsed
            rel = os.path.join(f'p{order}', element, f'{matrix}-sp.mtx')
        else:
            rel = f'{name}.mtx'
        full = os.path.join(outdir, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        write_mtx(full, A, comment=f'gimmik operator {name}')
        written.append(full)
    return written


__all__ = ['load_operator', 'suite', 'suite_names', 'read_mtx', 'write_mtx',
           'export_mtx', 'provenance', 'parse_name', 'default_beta',
           'default_suite_path', 'OperatorNameError', 'BETA_ONE_MATRICES']
