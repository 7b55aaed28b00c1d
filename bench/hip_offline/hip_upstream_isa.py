"""Side by side with upstream GiMMiK 4.0 on AMD, under one compiler: the
first 8 HIP candidates of ours and of upstream's for every operator PyFR
3.1's HIP backend hands to a generator, compiled by the same clang through
gimmik.isa (its prelude, cache and report parser), for each arch.

PyFR 3.1's HIP backend sends an operator to rocBLAS, not the generator,
when it has more than 128 distinct |values| (zero counted) and more than
15 % non-zeros; it calls `HIPMatMul(A, beta=, aligne=16, n=, ldb=n, ldc=n)
.kernels(np.float64, kname=, gcn_arch=, warp_size=64)` and times at most
the first 8 candidates.  Both generators are called that way here (f64,
n = 110080 baked, send() without feedback).

Upstream's sources use HIP's vector types (double2, make_double2, +=),
which hiprtc predefines; they are declared here, before the source, as
16-byte-aligned structs with `+=` (VECTOR_TYPES), so that clang needs no
HIP header: including hip_runtime.h under -nogpulib would turn threadIdx
and blockDim into calls and change the registers.

One row per operator and arch in bench/results/hip-upstream-isa-<arch>.csv
(ours_* against up_*): candidates offered, distinct sources in the first
8, best waves/SIMD, worst scratch, zero-scratch candidates at >= 2 waves,
and the fewest instructions and global bytes (loads + stores, from the
report's counts x access width) per column of C.  Per column means per
column one lane's code covers (meta cols_per_block / block x, i.e. the
width): counts are of the static listing, so they are exact for
straight-line code whose per-wave branches are kept apart and understate
where clang merged those branches or the kernel loops; ideal_bytes_col
(used rows of B plus rows of C, once each) is the floor to read them by.
up_dups names upstream's first-8 candidates whose source is byte-identical
to an earlier one (slots a tuner wastes).  A summary goes to stdout.

    PYTHONPATH=. python bench/hip_offline/hip_upstream_isa.py --jobs 2
    PYTHONPATH=. python bench/hip_offline/hip_upstream_isa.py \\
        --ops 'p4-hex-*' --arch gfx942 --out-dir sample-out

No GPU needed; each report is cached by source hash (gimmik.isa), so a
re-run compiles only the sources that changed.
"""

import argparse
import csv
import os
import re
import statistics
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from gimmik import isa  # noqa: E402
from gimmik.hip import HIPMatMul  # noqa: E402
from gimmik.operators import OperatorNameError, suite  # noqa: E402
from gimmik.pyfr import PROTOCOLS  # noqa: E402
from bench import OPERATORS, RESULTS  # noqa: E402
from bench.upstream import load_upstream  # noqa: E402

# PyFR 3.1's HIP provider
PYFR_HIP = PROTOCOLS['3.1', 'hip']
PYFR_NKERNS = PYFR_HIP.nkerns
PYFR_ALIGNE = PYFR_HIP.aligne('float64')
WARP = 64

N_DEFAULT = 110080
ARCHES = ('gfx942', 'gfx90a')
SUITES = (os.path.join(OPERATORS, 'pyfr-ops.npz'),
          os.path.join(OPERATORS, 'pyfr-ops-p7.npz'))
# Where upstream is looked for, in order (a folder holding its `gimmik`
# package, or its wheel), relative to the repository root
UPSTREAM_PATHS = ('.upstream/site', '.upstream/gimmik-4.0-py3-none-any.whl',
                  '.whl/pyfr/gimmik-4.0-py3-none-any.whl')
UPSTREAM_ENV = 'GIMMIK_UPSTREAM'

SIDES = ('ours', 'up')
PER_SIDE = ('offered', 'distinct8', 'best_waves', 'worst_scratch', 'zs2',
            'all_bad', 'min_instr_col', 'min_bytes_col', 'below_ideal',
            'errors')
FIELDS = (['op', 'm', 'k', 'nnz', 'density', 'nuq', 'used_b_rows', 'beta',
           'arch']
          + [f'{s}_{f}' for f in PER_SIDE for s in SIDES]
          + ['ideal_bytes_col', 'up_dups', 'ours_dups'])
CAND_FIELDS = ['op', 'arch', 'side', 'rank', 'variant', 'dup_of', 'block',
               'vgprs', 'agprs', 'sgprs', 'waves', 'scratch', 'lds',
               'vmcnt0', 'instr_col', 'bytes_col', 'error']


# -- pure parts (bench/tests/test_hip_upstream_isa.py) ----------------------

# HIP's vector types as hiprtc provides them to a source, reduced to what
# upstream's kernels use: the fields, 2- or 4-element alignment, += and
# make_<type>.  Upstream defines + and * itself.
_VECTOR_SCALARS = {'float': 4, 'double': 8}
_FIELDS = 'xyzw'


def vector_type(scalar, lanes):
    """C++ declaration of HIP's `<scalar><lanes>` vector type."""
    if scalar not in _VECTOR_SCALARS or lanes not in (2, 4):
        raise ValueError(f'no HIP vector type {scalar}{lanes} here')
    name, f = f'{scalar}{lanes}', _FIELDS[:lanes]
    align = _VECTOR_SCALARS[scalar]*lanes
    adds = ' '.join(f'{c} += o.{c};' for c in f)
    params = ', '.join(f'{scalar} {c}' for c in f)
    return (f'struct __attribute__((aligned({align}))) {name}\n'
            f'{{\n    {scalar} {", ".join(f)};\n'
            f'    __device__ {name} &operator+=(const {name} &o)\n'
            f'    {{ {adds} return *this; }}\n}};\n'
            f'__device__ inline {name} make_{name}({params})\n'
            f'{{ return {name}{{{", ".join(f)}}}; }}\n')


def with_vector_types(src):
    """src preceded by the declarations of the HIP vector types it names."""
    used = sorted(set(re.findall(r'\b(float|double)([24])\b', src)))
    return ''.join(vector_type(s, int(n)) for s, n in used) + src


def duplicates(cands):
    """[(variant, earlier variant)] for each of [(variant, src)] whose
    source is byte-identical to an earlier one's."""
    first, out = {}, []
    for variant, src in cands:
        if src in first:
            out.append((variant, first[src]))
        else:
            first[src] = variant
    return out


def lane_columns(meta):
    """Columns of C one lane's code covers: a block's columns over the
    lanes of its x dimension (the width unless cols_per_block says
    otherwise)."""
    block = meta['block']
    cols = meta.get('cols_per_block') or block[0]*meta['width']
    return cols / block[0]


def moved_bytes(rep):
    """Global bytes one lane's code loads and stores (the report's count
    of each access width times that width)."""
    return sum(w*c for part in ('global_loads', 'global_stores')
               for w, c in rep[part].items())


def per_column(rep, meta):
    """(instructions, global bytes) of a report per column of C."""
    cols = lane_columns(meta)
    return rep['instructions'] / cols, moved_bytes(rep) / cols


def ideal_bytes_col(A, beta, itemsize):
    """Bytes per column of C when every used row of B is read once and
    every row of C written once (and read once where beta != 0)."""
    A = np.asarray(A)
    used = int(np.count_nonzero(np.any(A != 0, axis=0)))
    return itemsize*(used + A.shape[0]*(2 if beta != 0 else 1))


def side_stats(offered, first, ideal=None):
    """The per-side columns of one operator and arch.  offered: how many
    candidates the generator yields; first: [(variant, src, meta, rep)] of
    its first 8, rep a report dict or an exception (failed compile); ideal:
    ideal_bytes_col, below which a static byte count understates."""
    dups = duplicates([(v, s) for v, s, _, _ in first])
    dup_names = {v for v, _ in dups}
    distinct = [(v, m, r) for v, _, m, r in first if v not in dup_names]
    good = [(m, r) for _, m, r in distinct if isinstance(r, dict)]
    cols = [per_column(r, m) for m, r in good]
    return {
        'offered': offered,
        'distinct8': len(distinct),
        'best_waves': max((r['occupancy'] for _, r in good), default=''),
        'worst_scratch': max((r['scratch_bytes'] for _, r in good),
                             default=''),
        'zs2': sum(r['scratch_bytes'] == 0 and r['occupancy'] >= 2
                   for _, r in good),
        # a failed compile counts as a bad candidate
        'all_bad': int(all(not isinstance(r, dict) or r['scratch_bytes'] > 0
                           or r['occupancy'] <= 1 for _, _, r in distinct)),
        'min_instr_col': round(min((c[0] for c in cols), default=0), 1)
        if cols else '',
        'min_bytes_col': round(min(c[1] for c in cols), 1) if cols else '',
        'below_ideal': sum(ideal is not None and c[1] < ideal for c in cols),
        'errors': len(distinct) - len(good),
        'dups': ';'.join(f'{v}={w}' for v, w in dups),
    }


def candidate_rows(op, arch, side, first):
    """The candidates CSV rows of one side's first 8 (as side_stats()
    takes them)."""
    dup_of = dict(duplicates([(v, s) for v, s, _, _ in first]))
    out = []
    for rank, (v, _, meta, rep) in enumerate(first):
        row = {'op': op, 'arch': arch, 'side': side, 'rank': rank,
               'variant': v, 'dup_of': dup_of.get(v, ''),
               'block': 'x'.join(map(str, meta['block']))}
        if isinstance(rep, dict):
            instr, moved = per_column(rep, meta)
            row.update(vgprs=rep['vgprs'], agprs=rep['agprs'],
                       sgprs=rep['sgprs'], waves=rep['occupancy'],
                       scratch=rep['scratch_bytes'], lds=rep['lds_bytes'],
                       vmcnt0=rep['vmcnt0'], instr_col=round(instr, 1),
                       bytes_col=round(moved, 1))
        else:
            row['error'] = str(rep).splitlines()[0] if str(rep) else 'error'
        out.append(row)
    return out


def operator_row(name, A, beta, arch, ours, up, itemsize=8):
    """One CSV row from both sides' side_stats()."""
    A = np.asarray(A)
    row = {'op': name, 'm': A.shape[0], 'k': A.shape[1],
           'nnz': int(np.count_nonzero(A)),
           'density': round(np.count_nonzero(A) / A.size, 4),
           'nuq': len(np.unique(np.abs(A))),
           'used_b_rows': int(np.count_nonzero(np.any(A != 0, axis=0))),
           'beta': beta, 'arch': arch,
           'ideal_bytes_col': ideal_bytes_col(A, beta, itemsize)}
    for side, st in (('ours', ours), ('up', up)):
        for f in PER_SIDE:
            row[f'{side}_{f}'] = st[f]
        row[f'{side}_dups'] = st['dups']
    return row


def _ratio_median(rows, field):
    rs = [r[f'ours_{field}'] / r[f'up_{field}'] for r in rows
          if r[f'ours_{field}'] not in ('', 0) and r[f'up_{field}']
          not in ('', 0)]
    return (statistics.median(rs), len(rs)) if rs else (None, 0)


def summary(rows, arch):
    """The printed summary of one arch's rows (lines)."""
    rows = [r for r in rows if r['arch'] == arch]
    n = len(rows)
    lines = [f'{arch}: {n} operators']
    if not n:
        return lines

    def count(pred):
        return {s: sum(1 for r in rows if pred(r, s)) for s in SIDES}

    few = count(lambda r, s: r[f'{s}_distinct8'] < 4)
    lines.append(f'  < 4 distinct candidates in the first 8: ours on '
                 f'{few["ours"]}, upstream on {few["up"]}')
    bad = count(lambda r, s: r[f'{s}_all_bad'])
    lines.append(f'  every candidate spills or runs 1 wave/SIMD: ours on '
                 f'{bad["ours"]}, upstream on {bad["up"]}')
    few_zs2 = count(lambda r, s: r[f'{s}_zs2'] < 3)
    lines.append(f'  fewer than 3 zero-scratch candidates at >= 2 waves: '
                 f'ours on {few_zs2["ours"]}, upstream on {few_zs2["up"]}')
    up_only = [r['op'] for r in rows if r['up_zs2'] and not r['ours_zs2']]
    ours_only = [r['op'] for r in rows if r['ours_zs2'] and not r['up_zs2']]
    lines.append(f'  a zero-scratch >= 2-wave candidate in upstream\'s first '
                 f'8 and none in ours: {len(up_only)}'
                 + (f' ({", ".join(up_only)})' if up_only else ''))
    lines.append(f'  ... in ours and none in upstream\'s: {len(ours_only)}'
                 + (f' ({", ".join(ours_only)})' if ours_only else ''))
    wasted = [r for r in rows if r['up_dups']]
    slots = sum(len(r['up_dups'].split(';')) for r in wasted)
    below = {s: sum(r[f'{s}_below_ideal'] for r in rows) for s in SIDES}
    lines.append(f'  candidates whose static bytes per column are below the '
                 f'ideal (listing understates): ours {below["ours"]}, '
                 f'upstream {below["up"]}')
    lines.append(f'  upstream\'s first 8 hold byte-identical sources on '
                 f'{len(wasted)} operators ({slots} wasted slots)')
    ours_wasted = sum(1 for r in rows if r['ours_dups'])
    if ours_wasted:
        lines.append(f'  ours hold byte-identical sources on {ours_wasted}')
    for field, what in (('min_instr_col', 'instructions'),
                        ('min_bytes_col', 'global bytes')):
        med, k = _ratio_median(rows, field)
        if med is not None:
            lines.append(f'  fewest {what} per column in the static '
                         f'listing, ours / upstream: median {med:.3f} over '
                         f'{k} operators')
    err = count(lambda r, s: r[f'{s}_errors'])
    if err['ours'] or err['up']:
        lines.append(f'  operators with failed compiles: ours {err["ours"]}, '
                     f'upstream {err["up"]}')
    return lines


# -- the generators and the compiler ----------------------------------------

def offered(mm, kname, arch):
    """[(variant, src, meta)] of every candidate a generator's kernels()
    yields with no feedback (PyFR's first send() is None)."""
    return [(m['variant'], s, m) for s, m in
            mm.kernels(np.float64, kname=kname, gcn_arch=arch,
                       warp_size=WARP)]


def find_upstream(path=None):
    """The path of upstream GiMMiK 4.0 (folder or wheel), or None."""
    for p in ([path] if path else
              [os.environ.get(UPSTREAM_ENV)] + [os.path.join(ROOT, q)
                                                for q in UPSTREAM_PATHS]):
        if p and os.path.exists(p):
            return p
    return None


def compare(ops, up, arches, beta, n, jobs):
    """Yield one row per operator and arch."""
    sizes = dict(aligne=PYFR_ALIGNE, n=n, ldb=n, ldc=n)
    for name, A in ops.items():
        kname = f'gimmik_mm_{A.shape[0]}x{A.shape[1]}'
        ours_mm = HIPMatMul(A, beta=beta, **sizes)
        up_mm = up.hip.HIPMatMul(np.asarray(A, dtype=np.float64),
                                 beta=beta, **sizes)
        sides = {}
        for arch in arches:
            for side, mm, wrap in (('ours', ours_mm, None),
                                   ('up', up_mm, with_vector_types)):
                cands = offered(mm, kname, arch)
                first = [(v, s, m, (wrap(s) if wrap else s))
                         for v, s, m in cands[:PYFR_NKERNS]]
                sides[arch, side] = (len(cands), first)

        # one clang job per distinct (source, arch)
        jobs_list = list(dict.fromkeys(
            (cs, arch) for (arch, _), (_, first) in sides.items()
            for _, _, _, cs in first))
        reps = dict(zip(jobs_list, isa.inspect_many(jobs_list, jobs)))
        ideal = ideal_bytes_col(A, beta, 8)
        for arch in arches:
            stats, cands = {}, []
            for side in SIDES:
                count, first = sides[arch, side]
                first = [(v, s, m, reps[cs, arch]) for v, s, m, cs in first]
                stats[side] = side_stats(count, first, ideal)
                cands += candidate_rows(name, arch, side, first)
            yield operator_row(name, A, beta, arch, stats['ours'],
                               stats['up']), cands


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--ops', default='*',
                   help='fnmatch glob(s), comma-separated (default: all)')
    p.add_argument('--suite', action='append', default=None,
                   help='.npz file or .mtx directory (repeatable; default: '
                        'bench/operators/pyfr-ops.npz and pyfr-ops-p7.npz)')
    p.add_argument('--arch', action='append', default=None,
                   help=f'repeatable (default: {" ".join(ARCHES)})')
    p.add_argument('--max-nnz', type=int, default=None,
                   help='skip operators with more non-zeros')
    p.add_argument('--beta', type=float, default=0.0,
                   help='beta of every operator (default 0)')
    p.add_argument('--n', type=int, default=N_DEFAULT,
                   help=f'n baked, ldb = ldc = n (default {N_DEFAULT})')
    p.add_argument('--upstream', default=None,
                   help="upstream GiMMiK 4.0's unpacked folder or wheel "
                        f'(default: ${UPSTREAM_ENV}, then '
                        f'{", ".join(UPSTREAM_PATHS)})')
    p.add_argument('--out-dir', default=RESULTS)
    p.add_argument('--jobs', type=int, default=None,
                   help='parallel clang processes (default: CPU count)')
    args = p.parse_args(argv)

    arches = [isa.check_arch(a, '--arch') for a in (args.arch or ARCHES)]
    if args.jobs is not None and args.jobs < 1:
        p.error('--jobs must be at least 1')
    if args.n < 1 or args.n % PYFR_ALIGNE:
        p.error(f'--n must be a positive multiple of {PYFR_ALIGNE}')
    path = find_upstream(args.upstream)
    if path is None:
        p.error('upstream GiMMiK 4.0 not found: pip download --no-deps '
                'gimmik==4.0 -d .upstream, or give --upstream')
    up = load_upstream(path)

    ops = {}
    for s in args.suite or SUITES:
        try:
            found = suite(args.ops, s)
        except OperatorNameError:
            continue
        ops.update((k, A) for k, A in found.items() if PYFR_HIP.sends(A)
                   and (args.max_nnz is None
                        or np.count_nonzero(A) <= args.max_nnz))
    if not ops:
        p.error(f'no operator PyFR sends to a generator matches {args.ops}')

    os.makedirs(args.out_dir, exist_ok=True)
    tag = '' if args.beta == 0 else f'-beta{args.beta:g}'
    files, writers = {}, {}
    for a in arches:
        for kind, fields in (('', FIELDS), ('-candidates', CAND_FIELDS)):
            f = files[a, kind] = open(os.path.join(
                args.out_dir, f'hip-upstream-isa-{a}{tag}{kind}.csv'), 'w',
                newline='')
            writers[a, kind] = csv.DictWriter(f, fields)
            writers[a, kind].writeheader()
    rows = []
    print(f'{len(ops)} operators, {", ".join(arches)}, beta {args.beta:g}, '
          f'n {args.n}; {isa.find_clang()[1]}; upstream from '
          f'{os.path.relpath(path, ROOT)}', flush=True)
    for i, (row, cands) in enumerate(compare(ops, up, arches, args.beta,
                                             args.n, args.jobs)):
        a = row['arch']
        writers[a, ''].writerow(row)
        writers[a, '-candidates'].writerows(cands)
        for kind in ('', '-candidates'):
            files[a, kind].flush()
        rows.append(row)
        if row['arch'] == arches[-1]:
            print(f'[{i // len(arches) + 1}/{len(ops)}] {row["op"]}',
                  file=sys.stderr, flush=True)
    for f in files.values():
        f.close()
    for a in arches:
        print('\n'.join(summary(rows, a)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
