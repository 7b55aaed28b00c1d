"""Compile a generated HIP source to an AMDGPU code object with hiprtc, through
hip-python, as PyFR does at run time (no GPU needed); ROCm 5's hiprtc inside
libamdhip64.so.5 is linked in as libhiprtc.so, GIMMIK_HIPRTC_LIB overrides."""

import contextlib
import ctypes
import os
import re
import struct
import threading

from gimmik.errors import MissingExtra, RuntimeUnavailable
from gimmik.validate import GFX_ARCH as _ARCH, check_kname

LIB_ENV = 'GIMMIK_HIPRTC_LIB'


# oldest ROCm a hiprtc may target an arch with: older comgr aborts the process
MIN_ROCM = {
    'gfx940': (6, 0), 'gfx941': (6, 0), 'gfx942': (6, 0),
    'gfx950': (6, 4),
}

# Options every compile gets besides --offload-arch
OPTIONS = ('-O3',)

# Library file names, best first, and whether hiprtc is their own library
# (True) or part of the HIP runtime (ROCm 5).
_LIB_NAMES = (('libhiprtc.so', True), ('libamdhip64.so', False))
_SYSTEM_DIRS = ('/opt/rocm/lib', '/usr/lib/x86_64-linux-gnu', '/usr/lib64',
                '/usr/lib', '/usr/local/lib')


class HiprtcError(RuntimeError):
    """hiprtc failed; `log` holds the compiler's log."""

    def __init__(self, message, log=''):
        super().__init__(f'{message}\n{log}'.rstrip())
        self.log = log


# -- finding the library ---------------------------------------------------
_state = {}
_lock = threading.Lock()


def _version(path):
    """(major, minor) from a versioned library file name, or None."""
    m = re.search(r'\.so\.(\d+)(?:\.(\d+))?', os.path.realpath(path))
    return (int(m.group(1)), int(m.group(2) or 0)) if m else None


def rocm_search_dirs():
    """Directories searched for ROCm libraries, in order: ROCM_PATH/lib,
    ROCM_HOME/lib, LD_LIBRARY_PATH, then the usual system directories."""
    dirs = []
    for var in ('ROCM_PATH', 'ROCM_HOME'):
        if os.environ.get(var):
            dirs.append(os.path.join(os.environ[var], 'lib'))
    dirs += [d for d in os.environ.get('LD_LIBRARY_PATH', '').split(':') if d]
    dirs += _SYSTEM_DIRS
    return dirs


def find_library():
    """Absolute path of the library holding hiprtc, or raise
    RuntimeUnavailable saying what is missing."""
    named = os.environ.get(LIB_ENV)
    if named:
        if not os.path.isfile(named):
            raise RuntimeUnavailable(f'{LIB_ENV}={named!r} is not a file')
        return os.path.abspath(named)
    for name, _ in _LIB_NAMES:
        hit = find_rocm_library(name)
        if hit:
            return hit
    raise RuntimeUnavailable(
        'hiprtc not found: no libhiprtc.so or libamdhip64.so in '
        + ', '.join(rocm_search_dirs())
        + f'; install ROCm (on Debian: apt-get '
        f'install libamdhip64-5 libhiprtc-builtins5) or set {LIB_ENV}')


def find_rocm_library(name):
    """The first `name` or `name`.* (e.g. 'libamdhip64.so') in
    rocm_search_dirs(), or None: the one ROCm library locator."""
    for d in rocm_search_dirs():
        try:
            hits = sorted(f for f in os.listdir(d)
                          if f == name or f.startswith(name + '.'))
        except OSError:
            continue
        if hits:
            return os.path.join(d, hits[0])
    return None


def rocm_link_dir(lib):
    """A private directory whose lib/ links libhiprtc.so (and, for a ROCm 5
    library, libamdhip64.so) to `lib`; usable as ROCM_PATH."""
    from gimmik.cache import base_dir, warn_unwritable
    try:
        return _link_libraries(os.path.join(base_dir(), 'hiprtc-lib'), lib)
    except OSError as e:    # an unwritable cache: a directory of this run
        warn_unwritable(e, 'hiprtc is linked in a temporary directory')
        import tempfile
        return _link_libraries(tempfile.mkdtemp(prefix='gimmik-hiprtc-'),
                               lib)


def _link_libraries(root, lib):
    libdir = os.path.join(root, 'lib')
    os.makedirs(libdir, exist_ok=True)
    links = ['libhiprtc.so']
    if os.path.basename(lib).startswith('libamdhip64.so'):
        links.append('libamdhip64.so')
    for name in links:
        link = os.path.join(libdir, name)
        if os.path.realpath(link) != os.path.realpath(lib):
            tmp = f'{link}.{os.getpid()}.tmp'
            os.symlink(os.path.realpath(lib), tmp)
            os.replace(tmp, link)
    return root


@contextlib.contextmanager
def rocm_path(rocm):
    """ROCM_PATH set to `rocm` for the duration (None: left alone), for the
    first call into a hip-python module, which loads its library lazily and
    searches ROCM_PATH then."""
    saved = os.environ.get('ROCM_PATH')
    if rocm:
        os.environ['ROCM_PATH'] = rocm
    try:
        yield
    finally:
        if rocm:
            if saved is None:
                os.environ.pop('ROCM_PATH', None)
            else:
                os.environ['ROCM_PATH'] = saved


def hip_python(module, libname):
    """hip-python's `module` ('hiprtc', 'hip'), imported (its library is loaded
    lazily, at the first call), and the path of `libname` in the rocm-sdk
    wheels hip-python may come with ('' when there are none)."""
    try:
        mod = getattr(__import__('hip', fromlist=[module]), module)
    except (ImportError, AttributeError) as e:
        user = 'HIP runtime' if module == 'hip' else 'hiprtc compiler'
        raise MissingExtra('hip-python', 'hip', f"gimmik's {user}",
                           str(e)) from e
    try:
        from rocm.bindings.util.paths import get_library_path
        own = os.fsdecode(get_library_path(libname))
    except ImportError:
        own = ''
    return mod, own


def load():
    """hip-python's hiprtc module with its library loaded; returns
    (module, library path).  Raises RuntimeUnavailable if it cannot be."""
    with _lock:
        if 'hiprtc' in _state:
            return _state['hiprtc'], _state['path']
        hiprtc, own = hip_python('hiprtc', 'hiprtc')
        if os.path.isabs(own) and os.path.isfile(own) \
                and not os.environ.get(LIB_ENV):
            lib, rocm = own, None
        else:
            lib = find_library()
            rocm = rocm_link_dir(lib)

        try:
            with rocm_path(rocm):
                err = hiprtc.hiprtcVersion()[0]     # the first call loads it
        except RuntimeError as e:
            raise RuntimeUnavailable(f'cannot load hiprtc from {lib}: '
                                     f'{e}') from e
        if _code(err) != 0:
            raise RuntimeUnavailable(f'hiprtc from {lib} does not work: '
                                     f'hiprtcVersion gave {err!r}')
        _state.update(hiprtc=hiprtc, path=lib)
        return hiprtc, lib


def _code(err):
    return int(getattr(err, 'value', err))


def check_arch(arch, lib=None):
    """Validate arch and refuse those the loaded hiprtc cannot compile."""
    if not isinstance(arch, str):
        raise TypeError(f'arch must be a str, not {type(arch).__name__}')
    if not _ARCH.match(arch):
        raise ValueError(f'arch {arch!r} is not a gfx arch name')
    need = MIN_ROCM.get(arch.split(':')[0])
    have = _version(lib) if lib else None
    if need and have and have < need:
        raise RuntimeUnavailable(
            f'hiprtc of ROCm {have[0]}.{have[1]} ({lib}) cannot compile for '
            f'{arch} (needs ROCm {need[0]}.{need[1]}; its comgr aborts the '
            f'process)')
    return arch


# -- compiling ----------------------------------------------------------------
def compile_hip(src, arch='gfx90a', kname='gimmik_mm'):
    """Compile src with hiprtc for arch; return the code object bytes
    (HiprtcError with the log, RuntimeUnavailable without hiprtc)."""
    if not isinstance(src, str):
        raise TypeError(f'src must be a str, not {type(src).__name__}')
    if '\0' in src:
        raise ValueError('src contains a NUL character')
    kname = check_kname(kname)
    check_arch(arch)
    hiprtc, lib = load()
    check_arch(arch, lib)

    err, prog = hiprtc.hiprtcCreateProgram(src.encode(), b'gimmik.hip', 0,
                                           [], [])
    if _code(err) != 0:
        raise HiprtcError(f'hiprtcCreateProgram failed: {err!r}')
    try:
        opts = [f'--offload-arch={arch}'.encode(),
                *(o.encode() for o in OPTIONS)]
        err, = hiprtc.hiprtcCompileProgram(prog, len(opts), opts)
        log = _log(hiprtc, prog)
        if _code(err) != 0:
            raise HiprtcError(f'hiprtc could not compile {kname} for '
                              f'{arch}: {err!r}', log)
        err, size = hiprtc.hiprtcGetCodeSize(prog)
        if _code(err) != 0 or not size:
            raise HiprtcError(f'hiprtcGetCodeSize failed: {err!r}', log)
        code = bytearray(size)
        err, = hiprtc.hiprtcGetCode(prog, code)
        if _code(err) != 0:
            raise HiprtcError(f'hiprtcGetCode failed: {err!r}', log)
    finally:
        # hiprtcDestroyProgram takes a pointer to the handle
        handle = ctypes.c_void_p(int(prog))
        hiprtc.hiprtcDestroyProgram(ctypes.addressof(handle))

    code = bytes(code)
    if kname not in kernel_symbols(code):
        raise HiprtcError(f'the code object for {arch} has no kernel '
                          f'{kname}', log)
    return code


def _log(hiprtc, prog):
    err, size = hiprtc.hiprtcGetProgramLogSize(prog)
    if _code(err) != 0 or not size:
        return ''
    buf = bytearray(size)
    hiprtc.hiprtcGetProgramLog(prog, buf)
    return bytes(buf).rstrip(b'\0').decode(errors='replace').rstrip()


# -- reading the code object ---------------------------------------------
_ELF_MAGIC = b'\x7fELF'
_SHT_SYMTAB, _SHT_DYNSYM, _STT_FUNC = 2, 11, 2


def _elf_images(code):
    """The ELF images in a code object: itself, or those in an offload
    bundle."""
    if code[:4] == _ELF_MAGIC:
        return [code]
    starts = [m.start() for m in re.finditer(re.escape(_ELF_MAGIC), code)]
    return [code[s:] for s in starts]


def kernel_symbols(code):
    """Names of the function symbols in an AMDGPU code object (ELF64, or a
    clang offload bundle of them)."""
    names = set()
    for elf in _elf_images(code):
        try:
            names |= _elf_functions(elf)
        except (struct.error, IndexError, ValueError):
            continue        # not a well-formed ELF image
    return names


def _elf_functions(elf):
    if elf[4] != 2 or elf[5] != 1:          # ELFCLASS64, little-endian
        return set()
    shoff, = struct.unpack_from('<Q', elf, 0x28)
    shentsize, shnum = struct.unpack_from('<HH', elf, 0x3A)
    sections = [struct.unpack_from('<IIQQQQIIQQ', elf, shoff + i*shentsize)
                for i in range(shnum)]
    names = set()
    for _, stype, _, _, off, size, link, _, _, entsize in sections:
        if stype not in (_SHT_SYMTAB, _SHT_DYNSYM) or not entsize:
            continue
        stroff = sections[link][4]
        for s in range(off, off + size, entsize):
            name, info = struct.unpack_from('<IB', elf, s)
            if info & 0xf == _STT_FUNC and name:
                end = elf.index(b'\0', stroff + name)
                names.add(elf[stroff + name:end].decode(errors='replace'))
    return names
