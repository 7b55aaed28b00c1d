"""Kernel families: one class per family, bound to one candidate.

A family object knows its launch geometry, how a table row binds to an
operator (adapt), its plan, template context, register estimate and cost
model (work, finish_rows), and the facts platform policies read from its
class attributes (max_registers, free_registers, register_resident,
long_min_blocks, max_thread_terms, max_thread_loads, hoisted_bound, c_store,
register_factor, padded_tail, no_packed_f32, arch_specific, template_file).

Adding a family ``foo-bar``: a :class:`Family` subclass in foo_bar.py here
(name, geometry, build_plan, live_values; adapt, context, work where the
defaults do not hold), its template kernels/<platform or common>/foo-bar.mako
inheriting base.mako, and rows in the platform's table (gimmik.order ranks
them); tests/test_families.py checks all of it."""

from dataclasses import dataclass
from functools import cached_property
import importlib
import pkgutil

import numpy as np

from gimmik import cost, plans

# Registers a candidate needs beyond its live values (addresses, indices)
REGISTER_MARGIN = 24

# At or below this estimate, streaming families without B in shared memory get
# no CUDA block minimum on sm_90: with one ptxas hoisted loads into more
# registers (pyfr-walk-analysis.md); staging families spilled without one
FREE_REGISTER_ESTIMATE = 64

# CUDA f64: the most terms x columns a thread of cstream/bstream runs; the
# spilling builds ran 784-3150 under any launch bound (docs/cuda-spills.md)
UNROLLED_MAX_TERMS = 780

# ptxas keeps the recurring values of such code in registers, two each; at
# 168 registers or its own pick it spilled with 55-195 of them, never with 24
# or fewer: two blocks an SM (255 registers) from this many
# (cuda-spill-audit-unrolled.csv)
UNROLLED_HOISTED = 48


@dataclass(frozen=True)
class Geometry:
    """Launch geometry of a candidate.  cols_per_block (default
    block[0]*width) and row_groups (blocks per column tile, default 1) go
    into the candidate's meta when set."""
    block: tuple
    shared: int
    width: int
    cols_per_block: int = None
    row_groups: int = None

    @property
    def tile_cols(self):
        """Columns of C one block computes."""
        return self.cols_per_block or self.block[0]*self.width

    @property
    def groups(self):
        """Blocks a column tile (row groups)."""
        return self.row_groups or 1

    def launch(self):
        """The launch contract (meta['launch']): per grid axis an int or
        {'div': d[, 'mul': g]}, ceil(n/d)*g blocks, and the block."""
        x = {'div': self.tile_cols}
        if self.groups > 1:
            x['mul'] = self.groups
        return {'grid': (x, 1, 1), 'block': tuple(self.block)}

    def walks_tiles(self):
        """Whether a grid of ceil(n/block[0]) blocks (PyFR's for run-time
        n) can hold fewer blocks than the contract's: the kernel then walks
        its tiles in a loop (gpu-base.mako, tiles_open)."""
        return self.groups > 1 or self.tile_cols < self.block[0]

    def overlaunch(self):
        """Blocks of a ceil(n/block[0]) grid per block the contract needs,
        for large n: above 1 the extra blocks only exit."""
        return self.tile_cols/(self.groups*self.block[0])


class Family:
    """One candidate of a family, bound to a generator (mm: the operator,
    beta, sizes and platform), its parameters and a dtype."""

    name = None
    arch_specific = False
    max_registers = {}
    free_registers = None
    # CUDA: the unrolled code holds its values in registers (budgeted as a
    # long kernel from cuda.LONG_KERNEL_TERMS terms a thread)
    register_resident = False
    # CUDA sm_90: the blocks a SM the launch bounds ask for where the
    # kernel is long (None: the register budget decides)
    long_min_blocks = None
    # the most terms x columns a thread may run, by platform (f64)
    max_thread_terms = {}
    # the most values x columns a thread may load, by platform (f64)
    max_thread_loads = {}
    # CUDA sm_90, f64: (recurring_values() from which ptxas holds more than
    # the estimate counts, the blocks a SM the launch bound then asks)
    hoisted_bound = None
    # HIP: two-column threads load both columns even past n (one copy of
    # the body, kernels/hip/base.mako); one-column f32 without packed math
    padded_tail = False
    no_packed_f32 = False
    # CUDA: C's store hint where the row names none (None: the platform's)
    c_store = None
    # the most registers ptxas took over the estimate, by platform: a block
    # whose size leaves fewer a thread is not offered (registers_fit)
    register_factor = {}
    template_file = None

    def __init__(self, mm, cand, dtype):
        self.mm = mm
        self.A = mm.A
        self.info = mm.info
        self.params = cand.params
        self.opts = cand.opts
        self.dtype = dtype
        self.itemsize = np.dtype(dtype).itemsize

    # -- what a family provides ------------------------------------------
    @classmethod
    def adapt(cls, mm, params):
        """A table row's parameters bound to mm's operator: rewritten, or
        None to drop the row."""
        return params

    def geometry(self):
        """The launch :class:`Geometry` (without building the plan where
        that can be helped)."""
        raise NotImplementedError

    def build_plan(self):
        """The plan the template walks."""
        raise NotImplementedError

    def context(self):
        """Names the template needs besides the common ones (see
        MatMul.render)."""
        return {'plan': self.plan}

    def walk_group(self):
        """Candidates the walk's feedback prunes together (a slow or
        spilling one stops the rest of its group): by default the family."""
        return self.name

    def kernel_key(self):
        """What decides the kernel besides the family: two candidates of
        one generator with equal keys render the same kernel, and only the
        first is offered (default: the parameters)."""
        return repr(sorted(self.params.items()))

    def live_values(self):
        """The most values (each `width` columns wide) one thread keeps
        live: accumulators plus held B values; None when the family has no
        estimate."""
        return None

    def work(self):
        """What the candidate does a column (gimmik.cost.Work): by default
        one pass, one thread a column, each used row of B read once."""
        return cost.stream_work(self, len(self.info.bix))

    def finish_rows(self):
        """Rows of C a thread finishes one after the other, each store after
        its own load of C (kernels/common/gpu-base.mako's finish), a full wait
        each on HIP where C is read (cost.c_row_waits)."""
        return None

    def thread_terms(self):
        """A's non-zeros a thread's unrolled code runs."""
        return self.info.nnz

    def thread_loads(self):
        """The B and C values a thread loads (None: not counted)."""
        return None

    def recurring_values(self):
        """The most recurring() values in one thread's code (None: not
        known); ptxas keeps such f64 constants in registers."""
        return None

    def long_kernel(self, min_terms):
        """Whether the candidate is a register-resident unrolled kernel of
        at least min_terms terms a thread (CUDA budgets such kernels'
        registers at a multiple of the estimate)."""
        return self.register_resident and self.thread_terms() >= min_terms

    def terms_bound(self):
        """Whether the kernel's registers are bounded by its terms rather
        than by the estimate (CUDA offers it whatever the estimate)."""
        return False

    def registers(self):
        """32-bit registers per thread the live values need, plus a
        margin; None without an estimate."""
        return self.registers_of(self.live_values())

    def registers_of(self, live):
        """32-bit registers per thread `live` values need, plus a margin
        (None for None)."""
        if live is None:
            return None
        words = self.itemsize // 4 * self.params.get('width', 1)
        return REGISTER_MARGIN + words*live

    def launch_blocks(self, sm_shared, reserved):
        """The blocks per SM a table row names (parameter blocks: the launch
        bound then caps registers at 64K/(threads*blocks)), None where it names
        none; ValueError where that many blocks do not fit an SM."""
        blocks = self.params.get('blocks')
        if blocks is None:
            return None
        g = self.geometry()
        threads = g.block[0]*g.block[1]*g.block[2]
        if (blocks*(g.shared + reserved) > sm_shared
                or blocks*threads > 2048):
            raise ValueError(f'{self.name}: {blocks} blocks of {threads} '
                             f'threads and {g.shared} bytes of shared '
                             'memory do not fit an SM')
        return blocks

    # -- shared ----------------------------------------------------------
    def batch_min_loads(self, plan=None):
        """The loads a cstream load batch issues (Target.batch_loads) where the
        kernel reads C or, given its cstream plan, where one row a batch would
        wait more than once per batch_loads loads
        (plans.row_batches_wait_often)."""
        size = self.mm.target.batch_loads
        if size is None:
            return None
        if self.mm.beta != 0 or (
                plan is not None
                and plans.row_batches_wait_often(plan, size)):
            return size
        return None

    def cstream_batches(self, plan):
        """A cstream plan in load batches (plans.load_batches, the GPU
        templates walk them; one row a batch on CUDA and C); unasked batches
        past the register limit give way with n baked, where clang-19
        issues rows' loads ahead anyway."""
        min_loads = self.batch_min_loads(plan)
        batches = plans.load_batches(plan, self.mm.beta, min_loads)
        if min_loads is None or self.mm.beta != 0 or self.mm.n is None:
            return batches
        limit = self.register_limit()
        if limit is not None and self.registers_of(
                plans.batched_live_values(batches)) > limit:
            return plans.load_batches(plan, self.mm.beta, None)
        return batches

    def reads_c_in_runs(self, min_loads):
        """Whether C's old values are read in runs of min_loads rows:
        the platform batches (min_loads not None), C is read (beta != 0)
        and not preloaded."""
        return (min_loads is not None and self.mm.beta != 0
                and not self.params.get('preload_c', False))

    def register_limit(self):
        """The most registers the estimate may give on this candidate's
        platform (max_registers, else the target's), None for no limit."""
        return self.max_registers.get(self.mm.platform,
                                      self.mm.target.max_registers)

    @cached_property
    def plan(self):
        return self.build_plan()

    @property
    def warp(self):
        return self.mm.warp_size(self.opts)


class ColumnStream(Family):
    """The unrolled streaming families (cstream, bstream): one thread per
    column group running all of A, its values held in registers."""

    free_registers = FREE_REGISTER_ESTIMATE
    register_resident = True
    max_thread_terms = {'cuda': UNROLLED_MAX_TERMS}
    hoisted_bound = (UNROLLED_HOISTED, 2)
    # HIP: one copy of the body, so one wait for loads a kernel too small for a
    # batch (bstream/width2 of p1-tri-m0: 2 full waits on 6 loads, one a copy)
    padded_tail = True

    def geometry(self):
        return Geometry((self.mm.stream_threads(self.opts), 1, 1), 0,
                        self.params.get('width', 1))

    def recurring_values(self):
        # a thread's code runs all of A
        return recurring(self.A)


def recurring(values):
    """Distinct non-zero |values| used more than once, less those an f64
    multiply takes as an immediate (low 32 bits zero: 1.0, 0.5...)."""
    v = np.abs(np.asarray(values, dtype=np.float64).ravel())
    v = v[(v != 0) & (v.view(np.uint64) & np.uint64(0xffffffff) != 0)]
    _, counts = np.unique(v, return_counts=True)
    return int((counts > 1).sum())


_FAMILIES = None


def families():
    """{name: Family subclass} of every module in this package."""
    global _FAMILIES
    if _FAMILIES is None:
        found = {}
        for mod in pkgutil.iter_modules(__path__):
            m = importlib.import_module(f'{__name__}.{mod.name}')
            for obj in vars(m).values():
                if (isinstance(obj, type) and issubclass(obj, Family)
                        and obj.name and obj.__module__ == m.__name__):
                    found[obj.name] = obj
        _FAMILIES = found
    return _FAMILIES


def family(name):
    """The Family subclass of a family name."""
    try:
        return families()[name]
    except KeyError:
        raise ValueError(f'unknown kernel family {name!r}') from None
