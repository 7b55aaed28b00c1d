"""One small interface over the places a generated kernel can run: the
tuner only talks to a :class:`Runtime`; panels are row-major, stride ld."""

from abc import ABC, abstractmethod
import importlib
import os
import warnings

import numpy as np

from gimmik.cost import moved_bytes  # noqa: F401 (the API)
from gimmik.errors import MissingExtra, RuntimeUnavailable
from gimmik.verify import rel_error


# platform name -> module providing `Runtime` (a subclass of Runtime below)
PLATFORMS = {'hip': 'gimmik.runtime.hip', 'cuda': 'gimmik.runtime.cuda',
             'c': 'gimmik.runtime.c', 'opencl': 'gimmik.runtime.opencl'}

# the order `auto` tries them in (opencl only when named: PoCL's CPU
# device would otherwise stand in for the c platform)
AUTO_ORDER = ('hip', 'cuda', 'c')

# A platform's device nodes: `auto` warns when it passes over a platform
# whose device is there but whose Python packages (an extra) are not
DEVICE_NODES = {'hip': '/dev/kfd'}


class Runtime(ABC):
    """A place to compile, launch and time kernels."""

    name = None          # 'c', 'hip', 'cuda', 'opencl'

    @property
    @abstractmethod
    def device(self):
        """Human-readable description of the device (e.g. 'NVIDIA H100')."""

    @abstractmethod
    def matmul(self, A, beta, **sizes):
        """The platform's *MatMul generator for A (sizes: aligne, n, ldb,
        ldc)."""

    @abstractmethod
    def kernel_options(self):
        """Keyword options for the generator's kernels() on this device
        (e.g. {'gcn_arch': 'gfx942'}), used in cache keys too."""

    def build_identity(self):
        """What built kernels depend on besides their source and the
        device: the compiler's identity and version, its flags, the CPU
        code is built for (a str; part of every cache key)."""
        return ''

    @abstractmethod
    def upload(self, host):
        """Copy a 2-D host array to a new device buffer; returns it."""

    @abstractmethod
    def download(self, buf, out):
        """Copy a device buffer back into the host array `out`."""

    @abstractmethod
    def compile(self, src, meta):
        """Build a candidate; returns launch(b, c, n, ldb, ldc), which runs
        it asynchronously on buffers from upload().  Raises on a compile
        failure with the compiler's log in the message."""

    @abstractmethod
    def vendor_gemm(self, A, alpha, beta, dtype):
        """The vendor BLAS doing the same C = alpha*A*B + beta*C on row-major
        panels; returns launch(b, c, n, ldb, ldc) like compile()."""

    def vendor_formulations(self, A, alpha, beta, dtype, n=None, ldb=None,
                            ldc=None):
        """Every way the vendor library offers to do vendor_gemm's work, as a
        list of (name, launch) pairs; one that cannot be set up is listed
        with a launch that raises why."""
        return [(self.vendor_name, self.vendor_gemm(A, alpha, beta, dtype))]

    vendor_name = 'gemm'   # the name of vendor_gemm's formulation

    @abstractmethod
    def time(self, launch, args, *, warmup=2, repeats=10):
        """Median wall time in seconds of launch(*args) (device events where
        there is a device)."""

    def starved(self):
        """Why the last time() measured the scheduler rather than the
        kernel (the process was starved of CPU on a saturated machine), or
        None; a runtime that cannot tell says None."""
        return None

    def copy_bandwidth(self, nbytes):
        """Measured device-to-device copy bandwidth in bytes/s for a copy of
        nbytes."""

    # -- checking outputs (the tuner's) -----------------------------------
    def clone(self, buf):
        """A new buffer holding a copy of buf (through the host unless the
        runtime copies on the device)."""
        return self.upload(self._host(buf))

    def same(self, buf, other):
        """Whether two buffers of one shape hold the same values."""
        a, b = (x if isinstance(x, np.ndarray) else self._host(x)
                for x in (buf, other))
        return bool(np.array_equal(a, b))

    def reference(self, values, scale):
        """A reference for compare(): float64 values (a host array, or a
        buffer of this runtime) and each element's scale (a host array, see
        gimmik.verify), kept where the runtime compares."""
        return (values, scale)

    def compare(self, buf, ref, start, n):
        """(error of the first n columns of buf against reference() ref, each
        element relative to its own scale (gimmik.verify.rel_error), the
        columns of buf beyond n equal those of start); infinite on NaN/Inf."""
        values, scale = ref
        out, values, start = (x if isinstance(x, np.ndarray)
                              else self._host(x)
                              for x in (buf, values, start))
        return (rel_error(out[:, :n], values[:, :n], scale),
                bool(np.array_equal(out[:, n:], start[:, n:])))

    def _host(self, buf):
        out = np.empty(buf.shape, buf.dtype)
        self.download(buf, out)
        return out

    def prepare(self, kernels):
        """Build ahead of time the (src, meta) pairs the tuner is about to
        compile() one by one, where the platform can build several at once (the
        C compiler runs in parallel); failures are left to compile()."""

    def launch_feedback(self, src, meta):
        """Extra feedback for kernels().send() (registers, local_mem...)."""
        return {}

    def cache_bytes(self):
        """Size of the last-level cache in bytes (0: unknown).  The tuner
        rotates through several buffer sets when one set would fit in it."""
        return 0


def failed_launch(error):
    """A launch that raises `error`: how vendor_formulations lists a
    formulation that could not be set up."""
    def launch(b, c, n, ldb, ldc):
        raise error
    launch.error = error
    return launch


def pick_vendor(formulations, check, time):
    """(best, records): the fastest correct vendor formulation as (name,
    launch, time_s) or None, and a record per formulation."""
    best, records = None, []
    for name, launch in formulations:
        rec = {'name': name, 'time_s': None, 'error': None}
        try:
            wrong = check(launch)
            if wrong:
                rec['error'] = str(wrong)
            else:
                t = float(time(launch))
                if not t > 0:
                    raise ValueError(f'timed at {t!r} s')
                rec['time_s'] = t
                if best is None or t < best[2]:
                    best = (name, launch, t)
        except RuntimeUnavailable as e:
            rec['error'] = f'unavailable: {e}'
        except Exception as e:   # one formulation's failure is not fatal
            rec['error'] = f'{type(e).__name__}: {e}'[:500]
        records.append(rec)
    return best, records


def get_runtime(platform='auto', **options):
    """A Runtime for `platform` ('auto' tries hip, then cuda, then c); a named
    one that cannot run raises RuntimeUnavailable saying what is missing."""
    if platform == 'auto':
        errors, missed = [], None
        for name in AUTO_ORDER:
            try:
                rt = get_runtime(name, **options)
            except RuntimeUnavailable as e:
                errors.append(f'{name}: {e}')
                if isinstance(e, MissingExtra) and \
                        os.path.exists(DEVICE_NODES.get(name, '')):
                    missed = (name, e)
                continue
            if missed:
                warnings.warn(f'platform {rt.name} chosen although this '
                              f'machine has a {missed[0]} device: '
                              f'{missed[1]}', RuntimeWarning, stacklevel=2)
            return rt
        raise RuntimeUnavailable('no platform can run here: '
                                 + '; '.join(errors))
    if platform not in PLATFORMS:
        raise ValueError(f'platform must be auto or one of '
                         f'{", ".join(PLATFORMS)}, not {platform!r}')
    try:
        mod = importlib.import_module(PLATFORMS[platform])
    except ModuleNotFoundError as e:
        raise RuntimeUnavailable(f'platform {platform} is not available: '
                                 f'{e}') from e
    return mod.Runtime(**options)


__all__ = ['MissingExtra', 'Runtime', 'RuntimeUnavailable', 'get_runtime',
           'moved_bytes', 'pick_vendor', 'failed_launch', 'PLATFORMS',
           'AUTO_ORDER']
