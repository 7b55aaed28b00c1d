"""Run generated GPU source, unchanged, on the CPU.

HIP (run_hip): the source is compiled by the host C++ compiler against a
small shim of HIP (hip_shim.h), and every block's threads run as
cooperating fibers, so that __syncthreads() and the wavefront-wide MFMA
builtin are honoured; a barrier or MFMA reached by only part of a block or
wavefront is reported as an error.

CUDA (run_cuda, gimmik.emulate.cuda): the same against cuda_shim.h, a
block's threads as OS threads.

Compiled kernels are cached on disk by a hash of everything that went in
(the compiler's identity included).  A fiber's stack is sized from the
kernel: the compiler's -fstack-usage report of its unit.
"""

import ctypes
import hashlib
import math
import os
import numbers
import re
import shlex
import shutil
import subprocess
import tempfile

import numpy as np

from gimmik import cache
from gimmik.errors import RuntimeUnavailable
from gimmik.util import tool_identity
from gimmik.validate import MAX_INT, check_kname

_SHIM = os.path.join(os.path.dirname(__file__), 'hip_shim.h')
_CXXFLAGS = ['-O1', '-std=c++17', '-shared', '-fPIC', '-w',
             '-Wl,-Bsymbolic', '-fno-strict-aliasing']
_ASAN_FLAGS = ['-fsanitize=address', '-fno-omit-frame-pointer']

_loaded = {}


class EmulatorError(RuntimeError):
    """A kernel misbehaved in the executor (divergent barrier or MFMA)."""


def asan_enabled():
    return os.environ.get('GIMMIK_EMU_ASAN', '') not in ('', '0')


_ARG_CTYPES = {'n': 'int', 'ldb': 'int', 'ldc': 'int'}


def _trampoline(meta, kname, extra_args=()):
    ctype = 'float' if meta['dtype'] == 'float32' else 'double'
    conv = []
    for i, a in enumerate(meta['args']):
        if a in _ARG_CTYPES:
            conv.append(f'(int)(intptr_t)a[{i}]')
        elif a == 'b':
            conv.append(f'(const {ctype}*)a[{i}]')
        elif a == 'c':
            conv.append(f'({ctype}*)a[{i}]')
        else:
            raise ValueError(f'unknown kernel argument {a!r}')
    conv.extend(extra_args)
    return (f'\nstatic void gimmik_emu_call(void **a)\n'
            f'{{\n    {kname}({", ".join(conv)});\n}}\n'
            f'GIMMIK_EMU_ENTRY(gimmik_emu_call)\n')


def compile_kernel(src, meta, kname='gimmik_mm', shim_path=_SHIM,
                   cxxflags=_CXXFLAGS, unit_name='kernel.hip', extra_args=()):
    """Compile a source for the executor against a shim (by default HIP's);
    returns the loaded library.  The host compiler is $CXX (default g++; a
    command line such as 'ccache g++' is split as a shell would); the
    library is cached by a hash of the unit, the compiler's identity and
    the flags, and checked against its digest before it is loaded."""
    kname = check_kname(kname)
    with open(shim_path) as f:
        shim = f.read()
    cxx = host_compiler()
    flags = list(cxxflags) + (_ASAN_FLAGS if asan_enabled() else [])
    unit = src + _trampoline(meta, kname, extra_args)
    key = hashlib.sha256('\0'.join([shim, unit, tool_identity(tuple(cxx)),
                                    *cxx, *flags])
                         .encode()).hexdigest()[:24]
    if key in _loaded:
        return _loaded[key]

    sopath = cache.find_build('emulate', key)
    if sopath is None:
        sopath = _build(cxx, flags, shim_path, unit, unit_name, key)
    lib = ctypes.CDLL(sopath)
    lib.gimmik_emu_entry.restype = ctypes.c_int
    lib.gimmik_emu_entry.argtypes = [
        ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int),
        ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, ctypes.c_int]
    _loaded[key] = lib
    return lib


def host_compiler():
    """The host C++ compiler's command line, from $CXX (default g++)."""
    text = os.environ.get('CXX') or 'g++'
    try:
        argv = shlex.split(text)
    except ValueError as e:
        raise ValueError(f'CXX={text!r}: {e}') from e
    if not argv or shutil.which(argv[0]) is None:
        raise RuntimeUnavailable(f'no host C++ compiler: {text!r} is not on '
                                 f'PATH (set CXX)')
    return argv


def _build(cxx, flags, shim_path, unit, unit_name, key):
    """Compile the unit (measuring its stack use), link it with the
    definition of gimmik_emu_stack_bytes, store it in the cache; returns
    the library's path."""
    with tempfile.TemporaryDirectory() as tmp:
        cpp = os.path.join(tmp, 'kernel.cpp')
        with open(cpp, 'w') as f:
            f.write(f'#include "{shim_path}"\n#line 1 "{unit_name}"\n'
                    f'{unit}')
        obj = os.path.join(tmp, 'kernel.o')
        _run([*cxx, *flags, '-fstack-usage', '-c', cpp, '-o', obj],
             'the host compiler rejected the kernel')
        stack = os.path.join(tmp, 'stack.cpp')
        with open(stack, 'w') as f:
            f.write(f'extern "C" const unsigned long gimmik_emu_stack_bytes'
                    f' = {stack_usage(tmp)}UL;\n')
        out = os.path.join(tmp, 'kernel.so')
        _run([*cxx, *flags, obj, stack, '-o', out],
             'the host compiler could not link the kernel')
        return cache.store_build('emulate', key, out)


def _run(cmd, what):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise RuntimeUnavailable(f'cannot run the host compiler {cmd[0]!r}: '
                                 f'{e}') from e
    if r.returncode:
        raise RuntimeError(f'{what}:\n{r.stderr[-4000:]}')


def stack_usage(folder):
    """Bytes of stack the functions of the -fstack-usage reports (*.su) in
    folder use together: a bound on any call chain through them (none
    recurses).  0 when the compiler wrote none."""
    total = 0
    for name in os.listdir(folder):
        if name.endswith('.su'):
            with open(os.path.join(folder, name)) as f:
                for line in f:
                    parts = line.rstrip('\n').split('\t')
                    if len(parts) >= 2 and parts[1].isdigit():
                        total += int(parts[1])
    return total


def _check_panel(x, name, dtype, rows, writeable=False):
    if not isinstance(x, np.ndarray):
        raise TypeError(f'{name} must be a NumPy array, not '
                        f'{type(x).__name__}')
    if x.dtype != dtype:
        raise TypeError(f'{name} has dtype {x.dtype}, the kernel is {dtype}')
    if x.ndim != 2:
        raise ValueError(f'{name} must be 2-D, not {x.ndim}-D')
    if x.shape[0] != rows:
        raise ValueError(f'{name} has {x.shape[0]} rows, the kernel needs '
                         f'{rows}')
    isz = x.itemsize
    if x.shape[1] > 1 and x.strides[1] != isz:
        raise ValueError(f'{name} must have unit stride along columns')
    if x.strides[0] % isz or x.strides[0] < 0:
        raise ValueError(f'{name} has a row stride that is not a positive '
                         f'multiple of its item size')
    if writeable and not x.flags.writeable:
        raise ValueError(f'{name} is read-only')
    ld = x.strides[0] // isz
    return ld


# What a generated source declares of itself (kernels/common/gpu-base.mako,
# kernels/c/base.mako): its header line, baked sizes and launch bounds
_HEADER = re.compile(r'// gimmik [\w-]+ kernel(?: \(\w+\))?: C = A\*B'
                     r'(?: \+ beta\*C)?, A (\d+)x(\d+), (double|float)\n')
_BAKED_N = re.compile(r'^\s*const int n = (\d+);', re.M)
_BAKED_LD = re.compile(r'^\s*const long ldbl = (\d+), ldcl = (\d+);', re.M)
_BOUNDS = re.compile(r'__launch_bounds__\((\d+)')
_REQD = re.compile(r'reqd_work_group_size\((\d+), (\d+), (\d+)\)')
_CTYPES = {'double': 'float64', 'float': 'float32'}


def check_source(src, meta):
    """Check a kernel's meta against what its source declares (ValueError
    naming the difference): the shape and dtype of its header, its baked
    n, ldb, ldc, and a block within its launch bounds.  The arrays are
    checked against the meta (panel_sizes), so a meta of another kernel
    would let the source write past c.  A source without the header (not
    generated by gimmik) is checked for its launch bounds only."""
    if not isinstance(src, str):
        raise TypeError(f'src must be a str, not {type(src).__name__}')
    head = _HEADER.match(src)
    if head:
        m, k, dtype = int(head[1]), int(head[2]), _CTYPES[head[3]]
        said = (meta.get('m'), meta.get('k'), np.dtype(meta['dtype']).name)
        if (m, k, dtype) != said:
            raise ValueError(
                f'the source declares A {m}x{k}, {dtype}, its meta m = '
                f'{said[0]}, k = {said[1]}, {said[2]}: the meta of another '
                f'kernel?')
        n, ld = _BAKED_N.search(src), _BAKED_LD.search(src)
        baked = (int(n[1]), int(ld[1]), int(ld[2])) if n and ld else None
        want = ((meta['n'], meta.get('ldb'), meta.get('ldc'))
                if meta.get('n') is not None else None)
        if baked != want:
            def say(x):
                return ('n at run time' if x is None else
                        'n = {}, ldb = {}, ldc = {}'.format(*x))
            raise ValueError(f'the source is baked for {say(baked)}, its '
                             f'meta for {say(want)}: the meta of another '
                             f'kernel?')
    if 'launch' not in meta and 'block' not in meta:
        return      # a C kernel: no threads to bound
    from gimmik.base import legacy_launch
    block = tuple((meta.get('launch') or legacy_launch(meta))['block'])
    bound = _BOUNDS.search(src)
    if bound and math.prod(block) > int(bound[1]):
        raise ValueError(f'the meta\'s block {block} has more threads than '
                         f'the source\'s launch bounds ({bound[1]})')
    reqd = _REQD.search(src)
    if reqd and tuple(int(x) for x in reqd.groups()) != block:
        raise ValueError(f'the meta\'s block {block} is not the source\'s '
                         f'work-group size {reqd.groups()}')


def panel_sizes(meta, b, c):
    """(n, ldb, ldc) of panels b (k x n) and c (m x n) for a kernel's meta,
    after checking them: 2-D arrays of the kernel's dtype with unit column
    stride, strides that fit a C int, the baked sizes and alignment."""
    dtype = np.dtype(meta['dtype'])
    n = c.shape[1] if isinstance(c, np.ndarray) and c.ndim == 2 else None
    ldb = _check_panel(b, 'b', dtype, meta['k'])
    ldc = _check_panel(c, 'c', dtype, meta['m'], writeable=True)
    if b.shape[1] != n:
        raise ValueError(f'b has {b.shape[1]} columns and c {n}')
    if ldb < n or ldc < n:
        raise ValueError('row strides of b and c must be at least n')
    # the kernels take n, ldb and ldc as C ints
    for name, v in (('n', n), ('ldb', ldb), ('ldc', ldc)):
        if v > MAX_INT:
            raise ValueError(f'{name} ({v}) does not fit a C int')
    if meta.get('n') is not None:
        for name, want, got in (('n', meta['n'], n), ('ldb', meta['ldb'], ldb),
                                ('ldc', meta['ldc'], ldc)):
            if want != got:
                raise ValueError(f'{name} is {got} but the kernel was baked '
                                 f'with {name} = {want}')

    al = meta.get('aligne')
    if al:
        for name, x, ld in (('b', b, ldb), ('c', c, ldc)):
            if ld % al or x.ctypes.data % (al*x.itemsize):
                raise ValueError(f'{name} rows are not aligned to {al} '
                                 f'elements as the kernel assumes')
    return n, ldb, ldc


def client_grid(grid):
    """A grid a client computed: three ints >= 1 (TypeError/ValueError
    naming it otherwise)."""
    try:
        grid = tuple(grid)
    except TypeError:
        raise TypeError(f'grid must be a tuple of 3 ints, not '
                        f'{type(grid).__name__}') from None
    if len(grid) != 3 or not all(isinstance(g, numbers.Integral)
                                 and not isinstance(g, bool) for g in grid):
        raise TypeError(f'grid must be a tuple of 3 ints, not {grid!r}')
    if min(grid) < 1 or max(grid) > MAX_INT:
        raise ValueError(f'grid {grid!r}: each axis must be in 1..{MAX_INT}')
    return tuple(int(g) for g in grid)


def launch(lib, meta, b, c, n, ldb, ldc, grid=None):
    """Run a compiled kernel over `grid` (a client's, client_grid), by
    default the grid of its meta's launch contract."""
    vals = {'n': n, 'ldb': ldb, 'ldc': ldc, 'b': b.ctypes.data,
            'c': c.ctypes.data}
    args = (ctypes.c_void_p*len(meta['args']))(
        *[vals[a] for a in meta['args']])

    from gimmik.base import MatMul
    own, block = MatMul.launch_config(meta, n)
    grid = (ctypes.c_int*3)(*(own if grid is None else client_grid(grid)))
    block = (ctypes.c_int*3)(*block)
    msg = ctypes.create_string_buffer(512)
    if lib.gimmik_emu_entry(args, grid, block, msg, len(msg)):
        raise EmulatorError(msg.value.decode())


def run_hip(src, meta, b, c, *, kname=None, grid=None):
    """Run a generated HIP kernel on the CPU, updating c in place.

    b (k x n) and c (m x n) are 2-D arrays of the kernel's dtype with unit
    column stride; their row strides are ldb and ldc and n = c.shape[1].
    grid: the grid a client launches (e.g. gimmik.pyfr's rules), by
    default the meta's own (launch_config).
    """
    check_source(src, meta)
    n, ldb, ldc = panel_sizes(meta, b, c)
    if kname is None:   # the name the kernel was generated with
        kname = meta.get('kname', 'gimmik_mm')
    launch(compile_kernel(src, meta, kname), meta, b, c, n, ldb, ldc, grid)


from gimmik.emulate.cuda import run_cuda  # noqa: E402,F401
from gimmik.emulate.metal import run_metal  # noqa: E402,F401
