"""Checks on everything a user hands to gimmik, run before any source
exists: a ValueError or TypeError naming the argument."""

import keyword
import math
import numbers
import re

import numpy as np

from gimmik.analysis import MAX_DIM, MAX_ENTRIES, MAX_UNROLLED_NNZ

_IDENT = re.compile(r'[A-Za-z_][A-Za-z0-9_]*\Z')

# AMD GPU arch names, with optional feature suffixes such as :sramecc+:xnack-
GFX_ARCH = re.compile(r'gfx[0-9a-f]{3,4}(:[a-z0-9_-]+[+-])*\Z')

# Kernel names become external symbols beside the platform's headers and
# libraries: keywords, reserved and defined names are refused
_KEYWORDS = frozenset('''
    alignas alignof and and_eq asm auto bitand bitor bool break case catch
    char char8_t char16_t char32_t class co_await co_return co_yield compl
    concept const consteval constexpr constinit const_cast continue decltype
    default delete do double dynamic_cast else enum explicit export extern
    false float for friend goto if inline int long mutable namespace new
    noexcept not not_eq nullptr operator or or_eq private protected public
    register reinterpret_cast requires restrict return short signed sizeof
    static static_assert static_cast struct switch template this
    thread_local throw true try typedef typeid typename union unsigned using
    virtual void volatile wchar_t while xor xor_eq main
'''.split())

# Functions, types and objects of the C and C++ standard libraries, POSIX
# and the GPU device languages that a kernel's translation unit may see.
_MATH = '''
    acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh erf
    erfc exp exp2 expm1 fabs fdim floor fma fmax fmin fmod frexp hypot ilogb
    ldexp lgamma llrint llround log log10 log1p log2 logb lrint lround modf
    nan nearbyint nextafter nexttoward pow remainder remquo rint round
    scalbln scalbn sin sinh sqrt tan tanh tgamma trunc
    sincos sinpi cospi rsqrt rcbrt exp10 erfinv erfcinv normcdf normcdfinv
    j0 j1 jn y0 y1 yn rnorm norm norm3d norm4d rhypot saturate
'''.split()
_LIBRARY = frozenset(_MATH + [f + s for f in _MATH for s in ('f', 'l')] + '''
    abs labs llabs div ldiv lldiv min max swap isnan isinf isfinite isnormal
    signbit fpclassify isgreater isless isunordered
    printf fprintf sprintf snprintf vprintf puts putchar fputs fputc getchar
    scanf sscanf fopen fclose fread fwrite fflush perror remove rename
    stdin stdout stderr errno assert abort exit atexit quick_exit getenv
    system malloc calloc realloc free aligned_alloc posix_memalign alloca
    memcpy memmove memset memcmp memchr strlen strcpy strncpy strcmp strncmp
    strcat strchr strdup qsort bsearch rand srand atoi atof atol strtod
    strtol time clock signal raise setjmp longjmp
    va_list va_start va_end va_arg offsetof
    dim3 half half2 bfloat16 nv_bfloat16 nv_bfloat162 float16 char1
    threadIdx blockIdx blockDim gridDim warpSize clock64 syncthreads
    std nvcuda wmma cooperative_groups cuda hip rocwmma
    kernel gemm
'''.split())

# Name patterns reserved by those standards and toolkits
_RESERVED_PATTERNS = re.compile(r'''(?x)
      _.*                                # the implementation's (C, C++)
    | [A-Z0-9_]+                         # macro style: NAN, INFINITY, EOF
    | .*_t                               # POSIX types: size_t, int32_t
    | (omp|ompt|ompd|kmp|gomp|GOMP|KMP|OMP)_.*   # OpenMP, libgomp, libomp
    | (cuda|hip|cu|nv|rocm|hsa|amd|cublas|rocblas|hipblas)[A-Z].*  # APIs
    | (hsa|amd|nv)_.*                    # ROCm and CUDA C names
    | (u?char|u?short|u?int|u?long|u?longlong|float|double|half|bf16)
      [1-8]                              # vector types: double2, float4
    | make_.* | atomic.* | tex[1-3]D.* | surf.*
'''.strip())

_DECL = re.compile(r'''(?x)
      \#\s*define\s+([A-Za-z_]\w*)
    | \b(?:struct|enum|union|class|namespace|typedef[^;]*?)\s+([A-Za-z_]\w*)
      \s*[;{]
    | \b([A-Za-z_]\w*)\s*\(
''')


def _source_names():
    """Names declared or called in the kernel templates and the CPU
    executor's shim (Mako code, comments and ${...} stripped first)."""
    import glob
    import os

    here = os.path.dirname(__file__)
    files = glob.glob(os.path.join(here, 'kernels', '**', '*.mako'),
                      recursive=True) \
        + glob.glob(os.path.join(here, 'emulate', '**', '*.h'),
                    recursive=True)
    names = set()
    for path in files:
        with open(path) as f:
            names.update(re.findall(r'\bgimmik_[A-Za-z0-9_]*[A-Za-z0-9]',
                                    f.read()))
        with open(path) as f:
            text = f.read()
        if path.endswith('.mako'):
            text = re.sub(r'<%[\s!].*?%>', ' ', text, flags=re.S)
            text = re.sub(r'</?%[^>]*>', ' ', text)
            text = re.sub(r'\$\{[^}]*\}', ' ', text)
            text = '\n'.join(ln for ln in text.splitlines()
                             if not ln.lstrip().startswith(('%', '##')))
        text = re.sub(r'//[^\n]*|/\*.*?\*/', ' ', text, flags=re.S)
        for m in _DECL.finditer(text):
            names.add(next(g for g in m.groups() if g))
    return names


_RESERVED = None


def reserved_names():
    """The explicit set of refused kernel names (patterns aside)."""
    global _RESERVED
    if _RESERVED is None:
        _RESERVED = frozenset(_KEYWORDS | _LIBRARY | _source_names()
                              | set(keyword.kwlist))
    return _RESERVED


def _library_symbol(kname):
    """Whether the C library, libm, libstdc++ or an OpenMP runtime exports
    kname (a kernel of that name would replace or shadow it)."""
    import ctypes

    global _LIBS
    if _LIBS is None:
        _LIBS = []
        for name in (None, 'libc.so.6', 'libm.so.6', 'libgomp.so.1',
                     'libstdc++.so.6', 'libomp.so'):
            try:
                _LIBS.append(ctypes.cdll.LoadLibrary(name))
            except OSError:
                continue
    return any(hasattr(lib, kname) for lib in _LIBS)


_LIBS = None


def _gimmik_name(kname):
    """Whether kname is, or extends, a gimmik_ name that the kernel sources,
    the CPU executor or the ISA prelude define (gimmik_v2, gimmik_emu...);
    gimmik_mm and the rest of the gimmik_ name space are the caller's."""
    global _GIMMIK
    if _GIMMIK is None:
        _GIMMIK = {n for n in reserved_names() if n.startswith('gimmik_')} \
            | {'gimmik_emu', 'gimmik_isa', 'gimmik_lds', 'gimmik_kernel'}
    return kname.startswith('gimmik_') and (
        re.match(r'gimmik_v\d', kname) is not None
        or any(kname == g or kname.startswith(g + '_') for g in _GIMMIK))


_GIMMIK = None


_DTYPES = {np.dtype(np.float32): np.float32, np.dtype(np.float64): np.float64}


# The command line's dtype names (cli_dtype also takes every name
# check_dtype knows)
CLI_DTYPES = {'f64': 'float64', 'f32': 'float32'}

# NumPy 1's scalar-type names that NumPy 2 no longer parses
_NUMPY_ALIASES = {'float_': 'float64', 'double_': 'float64',
                  'single_': 'float32'}

_DTYPE_NAMES = {'f32': np.float32, 'float32': np.float32, 'f4': np.float32,
                'single': np.float32, 'f64': np.float64, 'float64': np.float64,
                'f8': np.float64, 'double': np.float64, 'float': np.float64}


def check_dtype(dtype, arg='dtype'):
    """Return np.float32 or np.float64 for a dtype object or name (the
    names above, or what NumPy spells them: dtype.str such as '<f8',
    dtype.char such as 'd')."""
    if dtype is None:  # np.dtype(None) would silently mean float64
        raise TypeError(f'{arg} must be float32 or float64, not None')
    if isinstance(dtype, str) and dtype in _DTYPE_NAMES:
        return _DTYPE_NAMES[dtype]
    if isinstance(dtype, str) and dtype in _NUMPY_ALIASES:
        dtype = _NUMPY_ALIASES[dtype]
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError, SyntaxError) as e:
        raise TypeError(f'{arg} must be float32 or float64, not {dtype!r}') \
            from e
    if dt not in _DTYPES:
        raise TypeError(f'{arg} must be float32 or float64, not {dtype!r}')
    return _DTYPES[dt]


def _check_shape(shape, arg):
    m, k = shape
    if max(m, k) > MAX_DIM or m*k > MAX_ENTRIES:
        raise ValueError(f'{arg} has shape {tuple(shape)}: m and k must be at '
                         f'most {MAX_DIM} and m*k at most {MAX_ENTRIES}')


def check_matrix(A, arg='A'):
    """Return A as a new float64 2-D array after checking it."""
    if isinstance(A, (str, bytes)) or A is None:
        raise TypeError(f'{arg} must be a 2-D array of floats, '
                        f'not {type(A).__name__}')
    if type(A).__module__.startswith('scipy.sparse'):
        # a SciPy sparse matrix or array: bounded, then made dense
        shape = getattr(A, 'shape', ())
        if len(shape) != 2:
            raise ValueError(f'{arg} must be 2-D, not {len(shape)}-D')
        _check_shape(shape, arg)
        A = A.toarray()
    if isinstance(A, np.ma.MaskedArray):
        if np.ma.getmaskarray(A).any():
            raise ValueError(f'{arg} is a masked array with '
                             f'{int(np.ma.count_masked(A))} masked values: '
                             f'give their values (e.g. {arg}.filled(0))')
        A = np.ma.getdata(A)
    try:
        arr = np.asarray(A)
    except ValueError as e:  # ragged lists and the like
        raise ValueError(f'{arg} is not a rectangular array: {e}') from e
    except Exception as e:  # e.g. a device array that will not convert
        raise TypeError(f'{arg} ({type(A).__name__}) cannot be converted to '
                        f'a NumPy array: {e}') from e

    if arr.dtype.kind not in 'fiu' or arr.dtype == np.float16 \
            or arr.dtype.kind == 'b':
        what = 'Python objects' if arr.dtype.kind == 'O' \
            else f'{arr.dtype} values'
        raise TypeError(f'{arg} must hold real floats (a 2-D NumPy array, '
                        f'nested list or SciPy sparse matrix), not {what}')
    if arr.ndim != 2:
        raise ValueError(f'{arg} must be 2-D, not {arr.ndim}-D')
    if arr.size == 0:
        raise ValueError(f'{arg} is empty (shape {arr.shape})')
    _check_shape(arr.shape, arg)

    # NaN and Inf judged in A's own dtype: a long double beyond float64's
    # range is an overflow, and an integer float64 rounds is refused
    if not np.isfinite(arr).all():
        raise ValueError(f'{arg} contains NaN or Inf')
    with np.errstate(over='ignore'):
        wide = np.array(arr, dtype=np.float64)
    if not np.isfinite(wide).all():
        at = tuple(int(i) for i in np.argwhere(~np.isfinite(wide))[0])
        raise ValueError(f'{arg} overflows float64: {arr[at]} at {at} is '
                         f'beyond its range (+-{np.finfo(np.float64).max:.4g})')
    if arr.dtype.kind in 'iu':
        _check_exact_ints(arr, wide, arg)
    arr = wide
    if not arr.any():
        raise ValueError(f'{arg} is all zeros')
    # every non-zero becomes code: bound the size of the unrolled kernels
    nnz = int(np.count_nonzero(arr))
    if nnz > MAX_UNROLLED_NNZ:
        raise ValueError(f'{arg} has {nnz} non-zeros: at most '
                         f'{MAX_UNROLLED_NNZ} can be unrolled into a kernel')
    return arr


# Integers of magnitude below this convert to float64 exactly
EXACT_INT = 2**53


def _check_exact_ints(arr, wide, arg):
    """ValueError unless the integers arr convert to float64 (wide)
    exactly: beyond EXACT_INT they may lose digits."""
    big = np.flatnonzero(np.abs(wide.ravel()) >= EXACT_INT)
    for i in big:
        v = int(arr.flat[i])
        if int(wide.flat[i]) != v:
            at = tuple(int(x) for x in np.unravel_index(i, arr.shape))
            raise ValueError(f'{arg} holds the integer {v} at {at}, which '
                             f'does not round-trip as float64 (integers '
                             f'beyond 2**53 lose digits)')


def check_scalar(x, arg):
    """Return x as a finite Python float."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        raise TypeError(f'{arg} must be a real number, not {type(x).__name__}')
    try:
        f = float(x)
    except OverflowError as e:  # an int beyond the float64 range
        raise ValueError(f'{arg} is too large for a float64') from e
    if isinstance(x, numbers.Integral) and int(x) != f:
        raise ValueError(f'{arg} ({int(x)}) does not round-trip as float64 '
                         f'(integers beyond 2**53 lose digits)')
    x = f
    if not math.isfinite(x):
        raise ValueError(f'{arg} must be finite, not {x}')
    return x


# Kernels take n, ldb and ldc as C ints: larger values are refused
MAX_INT = 2**31 - 1


def _check_int(x, arg, minimum, maximum=MAX_INT):
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Integral):
        raise TypeError(f'{arg} must be an integer, not {type(x).__name__}')
    x = int(x)
    if x < minimum:
        raise ValueError(f'{arg} must be at least {minimum}, not {x}')
    if x > maximum:
        raise ValueError(f'{arg} must be at most {maximum}, not {x}')
    return x


def check_sizes(n, ldb, ldc, aligne):
    """Check the (n, ldb, ldc, aligne) quadruple of a MatMul constructor."""
    given = [v is not None for v in (n, ldb, ldc)]
    if any(given) and not all(given):
        missing = [a for a, g in zip(('n', 'ldb', 'ldc'), given) if not g]
        raise ValueError('give all of n, ldb, ldc or none of them; missing '
                         + ', '.join(missing))
    if all(given):
        n = _check_int(n, 'n', 1)
        ldb = _check_int(ldb, 'ldb', 1)
        ldc = _check_int(ldc, 'ldc', 1)
        if ldb < n:
            raise ValueError(f'ldb ({ldb}) must be at least n ({n})')
        if ldc < n:
            raise ValueError(f'ldc ({ldc}) must be at least n ({n})')
    if aligne is not None:
        aligne = _check_int(aligne, 'aligne', 1)
        for name, ld in (('ldb', ldb), ('ldc', ldc)):
            if ld is not None and ld % aligne:
                raise ValueError(f'aligne ({aligne}) does not divide '
                                 f'{name} ({ld})')
    return n, ldb, ldc, aligne


def check_kname(kname, arg='kname'):
    """Return kname after checking that it is a plain C identifier that
    clashes with nothing the generated source or its runtime uses."""
    if not isinstance(kname, str):
        raise TypeError(f'{arg} must be a str, not {type(kname).__name__}')
    if not _IDENT.match(kname) or not kname.isascii():
        raise ValueError(f'{arg} {kname!r} is not a plain C identifier')
    if kname in reserved_names() or _RESERVED_PATTERNS.fullmatch(kname) \
            or _gimmik_name(kname) or _library_symbol(kname):
        raise ValueError(f'{arg} {kname!r} is reserved: it would clash with '
                         f'a keyword, type, macro or library function the '
                         f'kernel source or its runtime uses (choose a '
                         f'lower-case name such as gimmik_mm_1)')
    return kname


def check_representable(A, beta, dtype):
    """Check that A and beta survive the conversion to dtype: no value
    overflows to Inf (an `inff` literal) and A does not become all
    zeros."""
    if dtype != np.float32:
        return
    big = float(np.finfo(np.float32).max)
    if np.abs(A).max() > big:
        raise ValueError('A has values beyond the float32 range '
                         f'(+-{big:.4g})')
    if abs(beta) > big:
        raise ValueError(f'beta ({beta}) is beyond the float32 range')
    if not A.astype(np.float32).any():
        raise ValueError('A is all zeros in float32')


def cli_dtype(text):
    """argparse type of every sub-command's --dtype: a name check_dtype
    knows (f64, float64, double, f32, float32, single...) -> 'float64' or
    'float32'."""
    import argparse
    try:
        return np.dtype(check_dtype(text)).name
    except TypeError:
        raise argparse.ArgumentTypeError(
            f'must be f64 or f32 (or float64, float32), not {text!r}') \
            from None


def add_dtype_argument(parser, default='f64'):
    """The --dtype option of every sub-command (one vocabulary:
    cli_dtype); args.dtype is 'float64' or 'float32'."""
    parser.add_argument('--dtype', type=cli_dtype, default=default,
                        metavar='{f64,f32}',
                        help=f'f64 (float64, double) or f32 (float32, '
                             f'single); default {default}')


def positive_seconds(text):
    """argparse type of a positive, finite number of seconds."""
    import argparse
    try:
        x = float(text)
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and x > 0):
        raise argparse.ArgumentTypeError(
            f'must be a positive number of seconds, not {text!r}')
    return x


def check_product_range(ref, scale, dtype):
    """Raise ValueError when C = A*B + beta*C on these panels (ref, in float64,
    with each element's scale sum |A_ij B_jn| + |beta C_in|, as
    gimmik.verify.reference gives them) leaves dtype's range, where kernels
    and vendor BLAS would agree only on Inf."""
    big = float(np.finfo(dtype).max)
    top = float(np.max(scale)) if np.size(scale) else 0.0
    if not np.isfinite(ref).all() or not top <= big:
        name = np.dtype(dtype).name
        raise ValueError(f'A*B + beta*C overflows {name} on these panels '
                         f'(terms up to {top:.3g}, the {name} range is '
                         f'+-{big:.4g}): scale A, beta or the panels down')


def c_literal(x, dtype):
    """Print x as a C literal of dtype that parses back to the same value."""
    if dtype == np.float32:
        # out of float32's range is the ValueError below, not a warning
        with np.errstate(over='ignore'):
            v = np.float32(x)
        s = np.format_float_scientific(v, unique=True, trim='0')
        if np.float32(s) != v or not np.isfinite(v):
            raise ValueError(f'{x!r} does not round-trip as float32')
        return s + 'f'
    v = float(x)
    s = repr(v)
    if float(s) != v or not math.isfinite(v):
        raise ValueError(f'{x!r} does not round-trip as float64')
    if '.' not in s and 'e' not in s:
        s += '.0'
    return s
