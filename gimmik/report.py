"""``gimmik report DIR``: report.md and bandwidth, speedup and roofline PNGs
of a sweep's sweep.csv (plots need matplotlib; --no-plots skips them)."""

import csv
import math
import os
import statistics

from gimmik.operators import ELEMENTS, parse_name, sort_key
from gimmik.sweep import CANDIDATES_NAME, CSV_NAME, SKIPPED, read_rows
from gimmik.util import atomic_path, atomic_write

MATRIX_ORDER = ('m0', 'm3', 'm6', 'm132', 'm460')
MATRIX_LABELS = {'m0': 'M0', 'm3': 'M3', 'm6': 'M6', 'm132': 'M132',
                 'm460': 'M460'}
OTHER = 'other'   # panel of operators that are not PyFR suite names

PLOTS = ('bandwidth.png', 'speedup.png', 'roofline.png')
REPORT_NAME = 'report.md'


# -- data ------------------------------------------------------------------
def load(path, problems=None):
    """Rows of a sweep: `path` is a sweep directory or its CSV.  Rows that
    cannot be used are left out and listed in `problems` as (line number,
    reason) when given."""
    path = os.fspath(path)
    csv_path = os.path.join(path, CSV_NAME) if os.path.isdir(path) else path
    if not os.path.isfile(csv_path):
        raise FileNotFoundError(f'no sweep table at {csv_path} (run gimmik '
                                f'sweep --out DIR first)')
    bad = []
    rows = read_rows(csv_path, bad)
    if problems is not None:
        problems.extend(bad)
    if not rows:
        raise ValueError(f'{csv_path} has no usable rows'
                         + ''.join(f'; line {ln}: {why}'
                                   for ln, why in bad[:5]))
    return sorted(rows, key=lambda r: sort_key(r['operator']))


def ok_rows(rows):
    return [r for r in rows if not r.get('error') and r.get('time_s')]


def group_of(name):
    """(panel, order, matrix) of an operator name: PyFR names go to their
    element's panel, anything else to OTHER with order None."""
    parsed = parse_name(name)
    if parsed is None:
        return OTHER, None, name
    order, element, matrix = parsed
    return element, order, matrix


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def intensity(row):
    """Useful flops per byte moved: 2*nnz*n / moved bytes."""
    if not row.get('gbps') or not row.get('time_s'):
        return None
    nbytes = row['gbps']*1e9*row['time_s']
    return 2*row['nnz']*row['n'] / nbytes


def _skipped(row):
    return (row.get('error') or '').startswith(SKIPPED)


def summarise(rows):
    """Headline numbers of a sweep as a dict."""
    good = ok_rows(rows)
    speed = [r['speedup'] for r in good if r.get('speedup')]
    frac = [r['copy_fraction'] for r in good if r.get('copy_fraction')]
    vfrac = [r['vendor_copy_fraction'] for r in good
             if r.get('vendor_copy_fraction')]
    return {
        'operators': len(rows), 'ok': len(good),
        'failed': [r['operator'] for r in rows if r not in good
                   and not _skipped(r)],
        'skipped': [r['operator'] for r in rows if _skipped(r)],
        'geomean_speedup': geomean(speed),
        'wins': sum(1 for s in speed if s > 1), 'compared': len(speed),
        'median_fraction': statistics.median(frac) if frac else None,
        'median_vendor_fraction': (statistics.median(vfrac) if vfrac
                                   else None),
        'best': max(good, key=lambda r: r.get('speedup') or 0, default=None),
        'worst': min(good, key=lambda r: r.get('speedup') or math.inf,
                     default=None),
        'tune_s': sum(r.get('tune_s') or 0 for r in rows),
    }


def vendor_lines(outdir):
    """Summary lines of a sweep against its vendor baseline."""
    rows = [r for r in read_rows(os.path.join(outdir, CSV_NAME))
            if r.get('copy_fraction') and r.get('speedup')]
    if not rows:
        return ['no operator with both a gimmik and a vendor result']
    cupy_t = {}
    path = os.path.join(outdir, CANDIDATES_NAME)
    if os.path.exists(path):
        with open(path, newline='') as f:
            for r in csv.DictReader(f):
                if r['kind'] == 'vendor' and r['name'] == 'cupy-gemm' \
                        and r['time_s']:
                    cupy_t[r['operator']] = float(r['time_s'])
    bc = [r['copy_fraction'] for r in rows]
    vc = [r['vendor_copy_fraction'] for r in rows]
    sp = [r['speedup'] for r in rows]
    won = {}
    for r in rows:
        won[r['vendor_formulation']] = won.get(r['vendor_formulation'], 0) + 1
    above = [r['operator'] for r in rows if r['operator'] in cupy_t
             and r['vendor_time_s'] > cupy_t[r['operator']]]
    return [
        f'{len(rows)} operators: gimmik/copy geomean {geomean(bc):.3f} min '
        f'{min(bc):.3f}; vendor/copy geomean {geomean(vc):.3f}; speed-up '
        f'geomean {geomean(sp):.3f} min {min(sp):.3f} '
        f'({sum(s < 1 for s in sp)} slower than the vendor)',
        'vendor formulations that won: ' + ', '.join(
            f'{k} {v}' for k, v in sorted(won.items(), key=lambda x: -x[1])),
        f'operators whose vendor time is above CuPy\'s plain gemm: '
        f'{len(above)} of {len(cupy_t)} with one'
        + (f' ({", ".join(above[:10])})' if above else '')]


# -- Markdown -----------------------------------------------------------------
def md_escape(text):
    """Text safe inside a Markdown table cell."""
    text = ' '.join(str(text).split())
    for ch in '\\|`*_<>[]':
        text = text.replace(ch, '\\' + ch)
    return text


def _num(x, fmt):
    return '–' if x is None else format(x, fmt)


def _pct(x):
    return '–' if x is None else f'{100*x:.0f}%'


def _distinct(rows, col):
    return sorted({str(r.get(col)) for r in rows if r.get(col) is not None})


def _group_key(key):
    """Orders first, then element types in suite order, then the rest."""
    if isinstance(key, int):
        return (0, key, '')
    if key in ELEMENTS:
        return (1, ELEMENTS.index(key), '')
    return (2, 0, str(key))


def _group_table(rows, keyfn, title):
    groups = {}
    for r in ok_rows(rows):
        groups.setdefault(keyfn(r), []).append(r)
    lines = [f'| {title} | operators | geomean speed-up | gimmik wins | '
             f'median % copy | median vendor % copy |',
             '|---|---:|---:|---:|---:|---:|']
    for key in sorted(groups, key=_group_key):
        g = groups[key]
        speed = [r['speedup'] for r in g if r.get('speedup')]
        frac = [r['copy_fraction'] for r in g if r.get('copy_fraction')]
        vfrac = [r['vendor_copy_fraction'] for r in g
                 if r.get('vendor_copy_fraction')]
        lines.append(
            f'| {md_escape(key)} | {len(g)} | '
            f'{_num(geomean(speed), ".2f")}× | '
            f'{sum(s > 1 for s in speed)}/{len(speed)} | '
            f'{_pct(statistics.median(frac) if frac else None)} | '
            f'{_pct(statistics.median(vfrac) if vfrac else None)} |')
    return lines


def markdown(rows, plots=(), problems=()):
    """The report as Markdown text; `problems` lists the (line, reason) of
    table rows that could not be used."""
    s = summarise(rows)

    def listed(col, sep=', '):
        return md_escape(sep.join(_distinct(rows, col)))

    copies = sorted({r['copy_gbps'] for r in rows if r.get('copy_gbps')})
    if len(copies) > 3:
        copy = (f'{statistics.median(copies):.1f} (median of the '
                f'{len(copies)} measurements, one per operator: '
                f'{copies[0]:.1f}–{copies[-1]:.1f})')
    else:
        copy = ', '.join(f'{x:.1f}' for x in copies)
    out = ['# gimmik sweep report', '']
    out += [f'- platform: {listed("platform")}',
            f'- device: {listed("device", "; ")}',
            f'- dtype: {listed("dtype")}; n = {listed("n")} columns',
            f'- measured copy bandwidth: {copy or "–"} GB/s',
            f'- operators: {s["operators"]} ({s["ok"]} tuned, '
            f'{len(s["skipped"])} skipped, {len(s["failed"])} failed); '
            f'tuning took {s["tune_s"]:.0f} s in all',
            '']
    if problems:
        out += [f'**{len(problems)} rows of the table could not be used** '
                f'(listed at the end).', '']
    if s['compared']:
        best, worst = s['best'], s['worst']
        out += [
            f'gimmik is faster than the vendor BLAS on **{s["wins"]} of '
            f'{s["compared"]}** operators, with a geometric-mean speed-up of '
            f'**{s["geomean_speedup"]:.2f}×** (best '
            f'{md_escape(best["operator"])} {best["speedup"]:.2f}×, worst '
            f'{md_escape(worst["operator"])} {worst["speedup"]:.2f}×). '
            f'The median gimmik kernel reaches '
            f'**{_pct(s["median_fraction"])}** of the measured copy '
            f'bandwidth (vendor: {_pct(s["median_vendor_fraction"])}).', '']
    wins = [r for r in rows if r.get('use_vendor')]
    if wins:
        out += [f'**Use the vendor BLAS** for {len(wins)} of '
                f'{s["operators"]} operators (verdict "use vendor": its '
                f'best is faster than gimmik\'s, or no candidate is '
                f'correct): ' + md_escape(', '.join(
                    r['operator'] for r in wins)) + '.', '']
    out += ['Bytes moved: the rows of B that A uses, read once, and C, '
            'written once (and read once when β ≠ 0). GFLOP/s counts useful '
            'flops, 2·nnz(A)·n. Speed-up = vendor time / gimmik time. '
            '% copy = achieved GB/s / measured device copy GB/s, the '
            'roofline of these bandwidth-bound kernels.', '']

    above = [r['operator'] for r in ok_rows(rows)
             if (r.get('copy_fraction') or 0) > 1]
    if above:
        out += [f'**{len(above)} operators exceed the measured copy '
                f'bandwidth** (e.g. {md_escape(", ".join(above[:3]))}): '
                f'their panels fit in the caches, whereas the copy '
                f'bandwidth is measured on a larger buffer, so it is not '
                f'their roofline. Sweep with a larger --n to measure them '
                f'streaming from memory.', '']

    for png in plots:
        out += [f'![{png[:-4]}]({png})', '']

    out += ['## By element type', '']
    out += _group_table(rows, lambda r: group_of(r['operator'])[0],
                        'element')
    orders = [group_of(r['operator'])[1] for r in rows]
    if any(o is not None for o in orders):
        out += ['', '## By order', '']
        out += _group_table([r for r in rows
                             if group_of(r['operator'])[1] is not None],
                            lambda r: group_of(r['operator'])[1], 'order')

    out += ['', '## Operators', '',
            '| operator | m×k | nnz | density | unique | β | candidate | '
            'time (µs) | GB/s | % copy | GFLOP/s | vendor GB/s | speed-up | '
            'verdict |',
            '|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|'
            '---|']
    for r in rows:
        t = r.get('time_s')
        out.append(
            f'| {md_escape(r["operator"])} | {r.get("m")}×{r.get("k")} | '
            f'{r.get("nnz")} | {_num(r.get("density"), ".3f")} | '
            f'{r.get("unique")} | {_num(r.get("beta"), "g")} | '
            f'{md_escape(r.get("candidate") or "–")} | '
            f'{_num(t*1e6 if t else None, ".1f")} | '
            f'{_num(r.get("gbps"), ".1f")} | '
            f'{_pct(r.get("copy_fraction"))} | '
            f'{_num(r.get("gflops"), ".1f")} | '
            f'{_num(r.get("vendor_gbps"), ".1f")} | '
            f'{_num(r.get("speedup"), ".2f")}'
            f'{"" if r.get("speedup") is None else "×"} | '
            f'{"**use vendor**" if r.get("use_vendor") else "–"} |')

    failed = [r for r in rows if r.get('error')]
    if failed:
        out += ['', '## Failed and skipped operators', '']
        out += [f'- {md_escape(r["operator"])}: {md_escape(r["error"])}'
                for r in failed]
    if problems:
        out += ['', '## Table rows not used', '',
                f'{len(problems)} rows of {CSV_NAME} could not be used '
                f'(run gimmik sweep again to redo them):', '']
        out += [f'- line {ln}: {md_escape(why)}' for ln, why in problems]
    return '\n'.join(out) + '\n'


# -- plots --------------------------------------------------------------------
def _matplotlib():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:
        raise RuntimeError('gimmik report needs matplotlib for its plots: '
                           'pip install matplotlib (or pass --no-plots)') \
            from e
    return Figure, FigureCanvasAgg


def _panels(rows):
    """{panel: [rows]} in element order, OTHER last."""
    panels = {}
    for r in rows:
        panels.setdefault(group_of(r['operator'])[0], []).append(r)
    order = [e for e in ELEMENTS if e in panels] \
        + sorted(p for p in panels if p not in ELEMENTS and p != OTHER) \
        + ([OTHER] if OTHER in panels else [])
    return {p: panels[p] for p in order}


def _new_figure(npanels, title):
    Figure, FigureCanvasAgg = _matplotlib()
    ncols = min(3, npanels)
    nrows = -(-npanels // ncols)
    fig = Figure(figsize=(max(8.0, 5.2*ncols), 3.6*nrows + 0.8),
                 layout='constrained')
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[npanels:]:
        ax.set_visible(False)
    fig.suptitle(title)
    return fig, axes


def _bar_panel(ax, panel, rows, value, vendor_value=None):
    """Bars per (order, matrix) of one element panel; returns handles."""
    if panel == OTHER:
        slots = [(r['operator'], None) for r in rows]
        labels = [r['operator'] for r in rows]
        keyed = {(r['operator'], None): r for r in rows}
        series = [None]
    else:
        orders = sorted({group_of(r['operator'])[1] for r in rows})
        mats = {group_of(r['operator'])[2] for r in rows}
        series = [m for m in MATRIX_ORDER if m in mats] \
            + sorted(mats - set(MATRIX_ORDER))
        keyed = {group_of(r['operator'])[1:]: r for r in rows}
        slots = orders
        labels = [f'p{o}' for o in orders]

    width = 0.8 / len(series)
    handles = {}
    for si, mat in enumerate(series):
        for xi, slot in enumerate(slots):
            r = keyed.get(slot if panel == OTHER else (slot, mat))
            if r is None:
                continue
            x = xi + (si - (len(series) - 1)/2)*width
            v = value(r)
            label = MATRIX_LABELS.get(mat, mat) if mat else 'gimmik'
            if v is not None:
                handles[label] = ax.bar(x, v, width*0.9, color=f'C{si}',
                                        label=label)
            else:
                ax.text(x, 0, '×', ha='center', va='bottom', color='red')
            if vendor_value and vendor_value(r) is not None:
                handles['vendor BLAS'] = ax.plot(
                    x, vendor_value(r), 'k_', markersize=9, mew=2,
                    label='vendor BLAS')[0]
    ax.set_xticks(range(len(slots)))
    ax.set_xticklabels(labels, rotation=0 if panel != OTHER else 45,
                       ha='center' if panel != OTHER else 'right',
                       fontsize=8 if panel == OTHER else 10)
    ax.set_title(panel)
    return handles


def _legend(fig, handles):
    """One legend under the panels: the matrices, then the references."""
    refs = ('vendor BLAS', 'roofline', 'parity')
    labels = [k for k in handles if k not in refs] \
        + [k for k in refs if k in handles]
    per_row = max(2, int(fig.get_figwidth() / 1.4))   # entries that fit
    fig.legend([handles[k] for k in labels], labels,
               loc='outside lower center', ncols=min(per_row, len(labels)))


def plot_bandwidth(rows, path):
    panels = _panels(rows)
    fig, axes = _new_figure(len(panels), 'Fraction of the measured copy '
                            'bandwidth (roofline = 1)')
    handles = {}
    for ax, (panel, prow) in zip(axes, panels.items()):
        handles |= _bar_panel(ax, panel, prow,
                              lambda r: r.get('copy_fraction'),
                              lambda r: r.get('vendor_copy_fraction'))
        handles['roofline'] = ax.axhline(1.0, color='k', ls='--', lw=1,
                                         label='roofline (copy bandwidth)')
        ax.set_ylim(0, max(1.1, 1.05*max(
            [r.get('copy_fraction') or 0 for r in prow]
            + [r.get('vendor_copy_fraction') or 0 for r in prow])))
        ax.set_ylabel('achieved / copy bandwidth')
    _legend(fig, handles)
    fig.savefig(path, dpi=110, format='png')


def plot_speedup(rows, path):
    panels = _panels(rows)
    fig, axes = _new_figure(len(panels), 'Speed-up of gimmik over the '
                            'vendor BLAS (vendor time / gimmik time)')
    handles = {}
    for ax, (panel, prow) in zip(axes, panels.items()):
        handles |= _bar_panel(ax, panel, prow, lambda r: r.get('speedup'))
        handles['parity'] = ax.axhline(1.0, color='k', ls='--', lw=1,
                                       label='parity with vendor')
        vals = [r['speedup'] for r in prow if r.get('speedup')]
        if vals and max(vals)/min(vals) > 20:
            ax.set_yscale('log')
        ax.set_ylabel('speed-up')
    _legend(fig, handles)
    fig.savefig(path, dpi=110, format='png')


def plot_roofline(rows, path):
    Figure, FigureCanvasAgg = _matplotlib()
    fig = Figure(figsize=(7, 5), layout='constrained')
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    good = ok_rows(rows)
    panels = list(_panels(good))
    markers = 'osD^vP*X'
    for i, panel in enumerate(panels):
        pr = [r for r in good if group_of(r['operator'])[0] == panel]
        ai = [intensity(r) for r in pr]
        ax.scatter(ai, [r['gflops'] for r in pr], marker=markers[i % 8],
                   color=f'C{i}', label=f'{panel} (gimmik)', s=22)
        vf = [(a, r['gflops']/r['speedup']) for a, r in zip(ai, pr)
              if r.get('speedup')]
        if vf:
            ax.scatter(*zip(*vf), marker=markers[i % 8], facecolors='none',
                       edgecolors=f'C{i}', s=22, alpha=0.6)
    ais = [a for a in map(intensity, good) if a]
    copies = [r['copy_gbps'] for r in good if r.get('copy_gbps')]
    if copies and ais:
        bw = statistics.median(copies)
        xs = [min(ais)/1.5, max(ais)*1.5]
        ax.plot(xs, [bw*x for x in xs], 'k--', lw=1,
                label=f'copy bandwidth {bw:.1f} GB/s'
                + (' (median)' if len(set(copies)) > 1 else ''))
    ax.set_xscale('log')
    ax.set_yscale('log')
    ax.set_xlabel('arithmetic intensity (useful flop / byte moved)')
    ax.set_ylabel('GFLOP/s')
    ax.set_title('Roofline (filled: gimmik, hollow: vendor BLAS)')
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=110, format='png')


def report(path, outdir=None, plots=True, problems=None):
    """Write report.md (and the plots) for a sweep; returns the paths.  The
    (line, reason) of table rows that could not be used are listed in the
    report and appended to `problems` when given."""
    problems = [] if problems is None else problems
    rows = load(path, problems)
    path = os.fspath(path)
    outdir = os.fspath(outdir) if outdir else (
        path if os.path.isdir(path) else os.path.dirname(path) or '.')
    os.makedirs(outdir, exist_ok=True)

    written, pngs = [], []
    if plots:
        _matplotlib()   # fail before writing anything
        if ok_rows(rows):
            for name, fn in zip(PLOTS, (plot_bandwidth, plot_speedup,
                                        plot_roofline)):
                target = os.path.join(outdir, name)
                with atomic_path(target) as tmp:
                    fn(rows, tmp)
                written.append(target)
                pngs.append(name)
    md = os.path.join(outdir, REPORT_NAME)
    atomic_write(md, markdown(rows, pngs, problems))
    return [md] + written


# -- command line -------------------------------------------------------------
def add_arguments(ap):
    ap.add_argument('dir', metavar='DIR',
                    help='a gimmik sweep output directory (or its CSV)')
    ap.add_argument('--out', default=None, metavar='OUTDIR',
                    help='where to write report.md and the plots '
                         '(default: DIR)')
    ap.add_argument('--no-plots', action='store_true',
                    help='write the Markdown only (no matplotlib needed)')


def run(args):
    import sys

    problems = []
    for p in report(args.dir, args.out, plots=not args.no_plots,
                    problems=problems):
        print(p)
    if problems:
        print(f'gimmik report: warning: {len(problems)} rows of the table '
              f'could not be used (line {problems[0][0]}: {problems[0][1]}'
              f'{"; ..." if len(problems) > 1 else ""}); they are listed in '
              f'{REPORT_NAME}', file=sys.stderr)
    return 0
