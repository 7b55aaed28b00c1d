"""What every platform's MatMul generator shares: argument checks, the
candidate table walk with send() feedback, template rendering and the launch
geometry; a candidate kernel is its family's object (gimmik.families)."""

from collections.abc import Mapping
from dataclasses import dataclass, field
import math
import numbers
import os
import re
import warnings

from mako.lookup import TemplateLookup
from mako.template import Template
import numpy as np

from gimmik.analysis import analyse
from gimmik.families import Family, family
from gimmik.targets import MAX_SHARED, MAX_THREADS  # noqa: F401 (the API)
from gimmik.validate import (c_literal, check_dtype, check_kname,
                             check_matrix, check_representable, check_scalar,
                             check_sizes)

_KERNEL_DIR = os.path.join(os.path.dirname(__file__), 'kernels')

# A family whose best measured runtime is this many times slower than the
# best seen so far gets no further candidates.
PRUNE_FACTOR = 1.5

def feedback_runtime(feedback, variant):
    """The runtime in seconds that send() feedback reports for a candidate, or
    None; malformed feedback only warns, so it can never prune candidates."""
    if feedback is None:
        return None
    if not isinstance(feedback, Mapping):
        warnings.warn(f'kernels().send(): feedback for {variant} must be a '
                      f"dict such as {{'runtime': seconds}} or None, not "
                      f'{type(feedback).__name__}; ignored', RuntimeWarning,
                      stacklevel=3)
        return None
    t = feedback.get('runtime')
    if t is None:
        return None
    if isinstance(t, (bool, np.bool_)) or not isinstance(t, numbers.Real):
        why = f'a {type(t).__name__}'
    elif math.isnan(t) or t <= 0:
        why = repr(float(t))
    elif math.isinf(t):
        return None
    else:
        return float(t)
    warnings.warn(f"kernels().send(): feedback 'runtime' for {variant} must "
                  f'be a positive number of seconds, not {why}; ignored',
                  RuntimeWarning, stacklevel=3)
    return None


# Run-time n: a candidate needing more blocks than ceil(n/block[0]) (PyFR's
# HIP launch) over this is not offered there
MAX_OVERLAUNCH = 1.1


def resolve_launch(launch, n):
    """The grid of a launch contract for n columns: each axis an int, or
    {'div': d} (ceil(n/d) blocks) or {'div': d, 'mul': g} (g times that);
    at least one block an axis."""
    out = []
    for ax in launch['grid']:
        if isinstance(ax, Mapping):
            if set(ax) - {'div', 'mul'} or 'div' not in ax:
                raise ValueError(f'invalid launch axis {ax!r}')
            ax = -(-int(n) // ax['div'])*ax.get('mul', 1)
        out.append(max(1, int(ax)))
    return tuple(out)


def legacy_launch(meta):
    """The launch contract of a meta written before meta['launch']."""
    block = tuple(meta['block'])
    cols = meta.get('cols_per_block') or block[0]*meta['width']
    x = {'div': cols}
    if meta.get('row_groups', 1) > 1:
        x['mul'] = meta['row_groups']
    return {'grid': (x, 1, 1), 'block': block}


def feedback_spilled(feedback):
    """Whether send() feedback says the candidate spilled on the device:
    'local_mem' > 0 ('registers' is not read: the estimate already keeps
    candidates within the register file)."""
    if not isinstance(feedback, Mapping):
        return False
    lm = feedback.get('local_mem')
    return (isinstance(lm, numbers.Real) and not isinstance(lm, bool)
            and lm > 0)


class Row:
    """One row of a platform's candidate table: family, params, gates
    (space-separated); its id is the variant name of its table parameters
    (a candidate's own variant differs where adapt() rebinds them)."""

    __slots__ = ('family', 'params', 'gates')

    def __init__(self, family, params, gates=''):
        self.family = family
        self.params = params
        self.gates = tuple(gates.split())

    @property
    def id(self):
        return Candidate(self.family.name, self.params).variant

    def __repr__(self):
        return (f'Row({self.family.name}, {self.params!r}, '
                f'{" ".join(self.gates)!r})')


def check_table(table, gate_names, platform):
    """ValueError unless every row of a platform's candidate table has a
    Family subclass, is unique under its gates (one kernel may be offered
    under two sets of gates), names only gates of `gate_names`, and every
    gate is named by some row."""
    keys = [(row.id, frozenset(row.gates)) for row in table]
    dup = sorted({k[0] for k in keys if keys.count(k) > 1})
    if dup:
        raise ValueError(f'{platform} table: rows {dup} repeat')
    used = set()
    for row in table:
        if not (isinstance(row.family, type) and issubclass(row.family,
                                                            Family)):
            raise ValueError(f'{platform} row {row.id}: {row.family!r} is '
                             'not a Family subclass')
        bad = set(row.gates) - set(gate_names)
        if bad:
            raise ValueError(f'{platform} row {row.id}: unknown gates '
                             f'{sorted(bad)} (known: {sorted(gate_names)})')
        used.update(row.gates)
    if set(gate_names) - used:
        raise ValueError(f'{platform} gates {sorted(set(gate_names) - used)}'
                         ' are named by no row')


@dataclass(frozen=True)
class Candidate:
    """One row of a platform's candidate table, bound to a concrete A."""
    family: str            # template name, e.g. 'bstream-msplit'
    params: dict = field(default_factory=dict)
    opts: dict = field(default_factory=dict, compare=False)  # arch etc.
    row: str = field(default=None, compare=False)   # the table row's id

    @property
    def variant(self):
        parts = [self.family]
        for k, v in sorted(self.params.items()):
            if v is True:
                parts.append(k)
            elif v is not False and v is not None:
                parts.append(f'{k}{v}')
        return '/'.join(parts)


class MatMul:
    """Base of the per-platform generators (HIPMatMul, CUDAMatMul, CMatMul)."""

    platform = None
    # the platform's numbers (gimmik.targets)
    target = None
    # its candidate table (gimmik.base.Row) and the names of the conditions
    # its rows may require (the keys of the dict its gates come in)
    table = ()
    gate_names = ()
    # template directory of the families shared with other platforms
    # (None: none), searched after the platform's own
    shared_templates = 'common'
    # kernels launched over a grid a client may compute
    grid_launch = True
    # with n at run time the platform's client (PyFR main's HIP provider)
    # launches ceil(n/block[0]) x 1 x 1 blocks whatever the contract: the
    # kernels walk their tiles
    client_grid_x = False

    def __init__(self, A, beta=0.0, aligne=None, n=None, ldb=None, ldc=None):
        self.A = check_matrix(A)
        self.beta = check_scalar(beta, 'beta')
        self.n, self.ldb, self.ldc, self.aligne = check_sizes(n, ldb, ldc,
                                                              aligne)
        self.info = analyse(self.A)
        self._kernels = {}
        self._memo = {}
        # A platform's own templates (its base.mako first of all), then the
        # families shared by the GPU platforms, which inherit that base
        dirs = [self.platform] + ([self.shared_templates]
                                  if self.shared_templates else [])
        self._lookup = TemplateLookup(
            directories=[os.path.join(_KERNEL_DIR, d) for d in dirs],
            strict_undefined=True)

    # -- to be provided by each platform ---------------------------------
    def _candidates(self, dtype, **opts):
        """Return the list of Candidate objects to offer, best guess first."""
        raise NotImplementedError

    def _check_opts(self, **opts):
        return opts

    def registers_fit(self, kern):
        """Whether a candidate's register estimate is within what the
        platform lets it use (Family.register_limit)."""
        limit = kern.register_limit()
        if limit is None:
            return True
        est = kern.registers()
        return est is None or est <= limit

    def warp_size(self, opts):
        """Threads of a warp (wavefront) under these options."""
        return opts.get('warp_size', self.target.warp)

    def stream_threads(self, opts):
        """Threads of a block of the one-thread-per-column families."""
        return self.target.stream_warps*self.warp_size(opts)

    def _platform_context(self, kern):
        """Template names the platform adds for every family."""
        return {}

    def _platform_meta(self, cand):
        """Meta keys the platform adds for every candidate."""
        return {}

    def _from_table(self, table, gates, dtype, opts=None, adapt=None):
        """Walk a platform's candidate table of Row: a row is offered when
        every condition named in its gates holds in `gates`, adapt() keeps it
        and it fits the launch limits and register budget; duplicates go."""
        if set(gates) != set(self.gate_names):
            raise ValueError(f'{self.platform} gates {sorted(gates)} are not '
                             f'the declared {sorted(self.gate_names)}')
        out, keys = [], set()
        for row in table:
            if not all([gates[g] for g in row.gates]):
                continue
            params = row.family.adapt(self, row.params)
            if params is not None and adapt is not None:
                params = adapt(row, params)
            if params is None:
                continue
            cand = Candidate(row.family.name, params, dict(opts or {}),
                             row.id)
            kern = self.kernel(cand, dtype)
            key = (cand.family, kern.kernel_key())
            geom = kern.geometry()
            if (self.launch_fits(geom) and self.registers_fit(kern)
                    and (not self.runtime_client_grid
                         or geom.overlaunch() <= MAX_OVERLAUNCH)
                    and key not in keys):
                out.append(cand)
                keys.add(key)
        return out

    def launch_fits(self, geom):
        """Whether a launch Geometry fits the platform's limits on threads
        per block and shared memory."""
        b = geom.block
        return (b[0]*b[1]*b[2] <= self.target.max_threads
                and geom.shared <= self.target.max_shared)

    def kernel(self, cand, dtype):
        """The family object of a candidate, built once per candidate and
        dtype (its plan is built once, when first needed)."""
        key = (cand.family, repr(sorted(cand.params.items())),
               repr(sorted(cand.opts.items())), np.dtype(dtype).name)
        kern = self._kernels.get(key)
        if kern is None:
            kern = self._kernels[key] = self.family_class(cand.family)(
                self, cand, dtype)
        return kern

    def family_class(self, name):
        """The Family subclass of a family name: its own table's, else the
        package's (gimmik.families.family)."""
        for row in self.table:
            if row.family.name == name:
                return row.family
        return family(name)

    def template(self, kern):
        """The template of a candidate's family: its template_file, else
        <name>.mako of the platform's template directories."""
        path = type(kern).template_file
        if path is None:
            return self._lookup.get_template(f'{kern.name}.mako')
        # inheriting base.mako resolves through the platform's lookup
        return self.memo(('template', os.fspath(path)), lambda: Template(
            filename=os.fspath(path), lookup=self._lookup,
            uri=f'{kern.name}.mako', strict_undefined=True))

    def memo(self, key, build):
        """A value several candidates share (e.g. one bake of A), built
        once per generator."""
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    # -- shared ----------------------------------------------------------
    @property
    def baked_n(self):
        return self.n is not None

    @property
    def runtime_client_grid(self):
        """Whether a client launches ceil(n/block[0]) blocks (n at run time
        on a platform whose client does: client_grid_x)."""
        return not self.baked_n and self.grid_launch and self.client_grid_x

    @property
    def args(self):
        return ('b', 'c') if self.baked_n else ('n', 'b', 'ldb', 'c', 'ldc')

    def offered(self, cands):
        """What kernels() offers of the ranked candidates `cands` where no
        feedback prunes any: all of them unless a platform cuts."""
        return cands

    def candidates(self, dtype, **opts):
        """Every candidate, best guess first (the same checks of dtype and
        options); kernels() offers offered() of them where no
        feedback prunes any."""
        dtype = check_dtype(dtype)
        return self._candidates(dtype, **self._check_opts(**opts))

    def kernels(self, dtype, kname='gimmik_mm', **opts):
        """Generate (src, meta) candidates; send() feedback to prune."""
        dtype = check_dtype(dtype)
        # A and beta must be finite in dtype before any source is emitted
        check_representable(self.A, self.beta, dtype)
        kname = check_kname(kname)
        opts = self._check_opts(**opts)
        cands = self._candidates(dtype, **opts)
        return self._walk(self.offered(cands), dtype, kname)

    def _walk(self, cands, dtype, kname):
        best = math.inf
        family_best = {}
        spilled = set()
        for cand in cands:
            group = self.walk_group(cand, dtype)
            fb = family_best.get(group, math.inf)
            if group in spilled or (fb > PRUNE_FACTOR*best
                                    and fb != math.inf):
                continue

            src, meta = self.render(cand, dtype, kname)
            feedback = yield src, meta
            # a group that spilled on the client's device is not offered
            # again: its next candidates are of the same register policy
            if feedback_spilled(feedback):
                spilled.add(group)
            t = feedback_runtime(feedback, meta['variant'])
            if t is not None:
                best = min(best, t)
                family_best[group] = min(fb, t)

    def walk_group(self, cand, dtype):
        """The candidates _walk's feedback prunes together with this one
        (the family's walk_group)."""
        return self.kernel(cand, dtype).walk_group()

    def render(self, cand, dtype, kname='gimmik_mm'):
        """Render one candidate; returns (src, meta)."""
        kern = self.kernel(cand, dtype)
        geom = kern.geometry()
        block, shared, width = geom.block, geom.shared, geom.width
        if not self.launch_fits(geom):
            raise ValueError(f'{cand.variant} exceeds the launch limits')

        # a client's grid smaller than the contract's (runtime_client_grid)
        # is walked in a loop over the tiles (gpu-base.mako, tiles_open)
        walk = self.runtime_client_grid and geom.walks_tiles()
        ctx = {'lit': lambda x: self.lit(x, dtype),
               'zero_rows': set(self.info.zero_rows),
               'walk_tiles': walk, 'bid': 'vb' if walk else 'blockIdx.x',
               'tile_cols': geom.tile_cols, 'tile_groups': geom.groups,
               'tile_barrier': walk and shared > 0}
        ctx.update(self._platform_context(kern))
        ctx.update(kern.context())
        tpl = self.template(kern)
        src = tpl.render(kname=kname, dtype=self._ctype(dtype),
                         itemsize=np.dtype(dtype).itemsize, block=block,
                         nthreads=block[0]*block[1]*block[2], width=width,
                         n=self.n, ldb=self.ldb, ldc=self.ldc,
                         beta=self.beta, betalit=self.lit(self.beta, dtype),
                         m=self.info.m, k=self.info.k, tplname=cand.family,
                         **ctx)
        src = re.sub(r'\n{3,}', '\n\n', src).strip() + '\n'
        meta = {'tplname': cand.family, 'variant': cand.variant,
                'params': dict(cand.params), 'dtype': np.dtype(dtype).name,
                'block': block, 'width': width, 'shared': shared,
                'args': self.args, 'kname': kname, 'm': self.info.m,
                'k': self.info.k, 'n': self.n, 'ldb': self.ldb,
                'ldc': self.ldc, 'aligne': self.aligne}
        meta.update(self._platform_meta(cand))
        if geom.cols_per_block is not None:
            meta['cols_per_block'] = geom.cols_per_block
        if geom.row_groups is not None:
            meta['row_groups'] = geom.row_groups
        meta['launch'] = geom.launch()
        if self.baked_n:
            meta['grid'] = self.launch_config(meta, self.n)[0]
        return src, meta

    @staticmethod
    def launch_config(meta, n):
        """(grid, block) for a candidate's meta and n columns, from its
        launch contract meta['launch'] (resolve_launch)."""
        launch = meta.get('launch') or legacy_launch(meta)
        return resolve_launch(launch, n), tuple(launch['block'])

    @staticmethod
    def _ctype(dtype):
        return 'float' if dtype == np.float32 else 'double'

    @staticmethod
    def lit(x, dtype):
        return c_literal(x, dtype)

    def width2_ok(self):
        """Two columns per thread need even row strides (aligne even)."""
        return self.aligne is not None and self.aligne % 2 == 0
