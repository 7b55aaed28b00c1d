"""``gimmik sweep``: autotune every operator of a suite and tabulate it; the
tables in DIR are rewritten as one step under a lock after each operator,
so an interrupted sweep resumes and sweeps on several nodes share DIR."""

import contextlib
import csv
import hashlib
import io
import json
import math
import os
import signal
import sys
import time

import numpy as np

import gimmik
from gimmik.analysis import analyse
from gimmik.cache import n_class
from gimmik.operators import default_beta, provenance, safe_name, suite
from gimmik import tune as tune_mod
from gimmik.progress import SKIPPED, SweepProgress
from gimmik.runtime import get_runtime, moved_bytes
from gimmik.util import atomic_path, atomic_write, file_lock
from gimmik.validate import (CLI_DTYPES, add_dtype_argument, check_dtype,
                             positive_seconds)

PLATFORMS = ('auto',) + tuple(gimmik.PLATFORMS)

DTYPES = CLI_DTYPES

# Exit status of `gimmik sweep` stopped by --budget with operators left
# (EX_TEMPFAIL of sysexits.h: run it again), and stopped by SIGTERM (128 +
# the signal, as a shell reports it)
EXIT_BUDGET = 75
EXIT_SIGTERM = 128 + signal.SIGTERM

CSV_NAME = 'sweep.csv'
LOCK_NAME = '.sweep.lock'
JSON_NAME = 'sweep.json'
TUNE_DIR = 'tune'

# One row per operator, in this column order
COLUMNS = (
    'operator',          # suite name, e.g. p3-hex-m460
    'm', 'k', 'nnz', 'density', 'unique',
    'digest',            # the matrix's identity (operator_digest)
    'beta', 'n', 'dtype', 'platform', 'device',
    'candidate',         # gimmik's fastest correct candidate (variant)
    'time_s',            # its median time
    'gbps',              # moved_bytes / time_s
    'gflops',            # 2*nnz*n / time_s
    'copy_gbps',         # measured device copy bandwidth
    'copy_fraction',     # gbps / copy_gbps
    'vendor_time_s', 'vendor_gbps', 'vendor_copy_fraction',
    'vendor_formulation',  # the vendor formulation timed fastest
    'speedup',           # vendor_time_s / time_s (> 1: gimmik wins)
    'use_vendor',        # the tuner would hand this operator to the BLAS
    'verdict',           # 'use vendor', 'use gimmik' (verdict_of)
    'candidates',        # candidates timed
    'correct',           # of which correct
    'tune_s',            # wall time of tuning this operator
    'error',             # empty, or why the operator has no result
)
_INT_COLUMNS = {'m', 'k', 'nnz', 'unique', 'n', 'candidates', 'correct'}
_FLOAT_COLUMNS = {'density', 'beta', 'time_s', 'gbps', 'gflops', 'copy_gbps',
                  'copy_fraction', 'vendor_time_s', 'vendor_gbps',
                  'vendor_copy_fraction', 'speedup', 'tune_s'}
_BOOL_COLUMNS = {'use_vendor'}


# -- table I/O -------------------------------------------------------------
def _fmt(value):
    if value is None:
        return ''
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, float):
        return '' if not math.isfinite(value) else repr(float(value))
    return str(value)


def _parse(col, text):
    if text == '' and col not in ('operator', 'error', 'candidate',
                                  'vendor_formulation', 'verdict'):
        return None
    if col in _INT_COLUMNS:
        return int(text)
    if col in _FLOAT_COLUMNS:
        x = float(text)
        if not math.isfinite(x):
            raise ValueError(f'{col} is {text}')
        return x
    if col in _BOOL_COLUMNS:
        if text.lower() not in ('true', 'false'):
            raise ValueError(f'{col} is {text!r}, not true or false')
        return text.lower() == 'true'
    return text


def _check_row(row):
    """Why a parsed row cannot be used, or None."""
    if not row.get('operator'):
        return 'no operator name'
    if not row.get('dtype') or not row.get('n') or row['n'] < 1:
        return 'no dtype or n'
    if not row.get('error') and not (row.get('candidate')
                                     and row.get('time_s')
                                     and row['time_s'] > 0):
        return 'no error and no timed candidate'
    return None


def read_rows(path, problems=None):
    """Rows of a sweep CSV as dicts with typed values; unusable (torn) rows
    are left out, (line, reason) appended to `problems`."""
    with open(path, newline='') as f:
        text = f.read()
    reader = csv.DictReader(io.StringIO(text))
    missing = set(('operator', 'dtype', 'n', 'error')) \
        - set(reader.fieldnames or ())
    if missing:
        raise ValueError(f'{path} is not a gimmik sweep table: no '
                         f'column {", ".join(sorted(missing))}')
    lines = text.count('\n') + (not text.endswith('\n'))
    rows = []
    for rec in reader:
        lineno = reader.line_num
        why = None
        if None in rec or None in rec.values():
            why = 'wrong number of cells (a torn line)'
        elif lineno == lines and not text.endswith('\n'):
            why = 'the last line is unterminated (a torn write)'
        else:
            try:
                row = {c: _parse(c, rec.get(c) or '') for c in COLUMNS
                       if c in rec}
                why = _check_row(row)
            except ValueError as e:
                why = f'bad value: {e}'
        if why is None:
            rows.append(row)
        elif problems is not None:
            problems.append((lineno, why))
    return rows


def _tables_text(rows, config):
    """(sweep.csv, sweep.json) texts of rows."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator='\n')
    w.writerow(COLUMNS)
    # rows of a gimmik before the verdict column get theirs here
    rows = [r if r.get('verdict') else dict(r, verdict=verdict_of(r))
            for r in rows]
    for r in rows:
        w.writerow([_fmt(r.get(c)) for c in COLUMNS])
    clean = [{c: (None if isinstance(r.get(c), float)
                  and not math.isfinite(r[c]) else r.get(c))
              for c in COLUMNS} for r in rows]
    doc = {'config': config, 'columns': list(COLUMNS), 'rows': clean}
    return buf.getvalue(), json.dumps(doc, indent=1) + '\n'


def write_files(outdir, texts):
    """Write [(file name, text)] into outdir as one step: every file to a
    temporary file first, then renamed into place in the order given;
    when a write fails, none is."""
    with contextlib.ExitStack() as stack:
        # atomic_path renames as it exits, the last entered first
        parts = {name: stack.enter_context(
                     atomic_path(os.path.join(outdir, name)))
                 for name, _ in reversed(texts)}
        for name, text in texts:
            with open(parts[name], 'w', newline='') as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())


def write_tables(outdir, rows, config):
    """Rewrite DIR/sweep.csv and DIR/sweep.json as one step."""
    text_csv, text_json = _tables_text(rows, config)
    write_files(outdir, [(JSON_NAME, text_json), (CSV_NAME, text_csv)])


def write_all(outdir, rows, per_operator, config):
    """Rewrite candidates.csv, sweep.json and sweep.csv as one step, in
    that order: an operator sweep.csv names has its candidate rows."""
    text_csv, text_json = _tables_text(rows, config)
    write_files(outdir, [(CANDIDATES_NAME, _candidates_text(per_operator)),
                         (JSON_NAME, text_json), (CSV_NAME, text_csv)])


# -- one operator ----------------------------------------------------------
def _dtype_name(dtype):
    return np.dtype(check_dtype(dtype)).name


def _plain(row):
    """The row with NumPy scalars turned into Python ones."""
    return {k: v.item() if isinstance(v, np.generic) else v
            for k, v in row.items()}


def _get(obj, key, default=None):
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def operator_digest(A):
    """What identifies an operator's matrix whatever its name: sha256 over
    its shape and float64 values, 16 hex digits."""
    A = np.ascontiguousarray(A, dtype=np.float64)
    return hashlib.sha256(repr(A.shape).encode() + A.tobytes()) \
        .hexdigest()[:16]


def result_row(name, A, beta, result, tune_s):
    """The table row for one operator's TuneResult."""
    info = analyse(A)
    n = int(result.n)
    dtype = _dtype_name(result.dtype)
    itemsize = np.dtype(dtype).itemsize
    nbytes = moved_bytes(info, beta, n, itemsize)

    best = result.best or {}
    vendor = result.vendor or {}
    t = _get(best, 'time_s')
    vt = _get(vendor, 'time_s')
    copy_gbps = result.copy_gbps

    def rate(x, t):
        return x / t / 1e9 if t and t > 0 else None

    gbps, vgbps = rate(nbytes, t), rate(nbytes, vt)
    cands = list(result.candidates or ())
    return _plain({
        'operator': name, 'm': info.m, 'k': info.k, 'nnz': info.nnz,
        'density': info.density, 'unique': info.unique,
        'digest': operator_digest(A), 'beta': beta,
        'n': n, 'dtype': dtype, 'platform': result.platform,
        'device': str(result.device),
        'candidate': _get(best, 'variant') or '',
        'time_s': t, 'gbps': gbps, 'gflops': rate(2*info.nnz*n, t),
        'copy_gbps': copy_gbps,
        'copy_fraction': gbps / copy_gbps if gbps and copy_gbps else None,
        'vendor_time_s': vt, 'vendor_gbps': vgbps,
        'vendor_copy_fraction': (vgbps / copy_gbps if vgbps and copy_gbps
                                 else None),
        'vendor_formulation': _get(vendor, 'formulation') or '',
        'speedup': vt / t if vt and t else None,
        'use_vendor': bool(result.use_vendor),
        'verdict': (tune_mod.VERDICT_VENDOR if result.use_vendor
                    else tune_mod.VERDICT_GIMMIK if vt and t
                    else tune_mod.VERDICT_UNCOMPARED if t else ''),
        'candidates': len(cands),
        'correct': sum(1 for c in cands if _get(c, 'correct')),
        'tune_s': tune_s,
        'error': '' if t else 'no correct candidate',
    })


def verdict_of(row):
    """A row's verdict (gimmik.tune's VERDICT_*): 'use vendor' where the
    tuner would hand the operator to the vendor BLAS (its best faster, or
    no correct candidate), '' for an operator without a result."""
    if row.get('use_vendor'):
        return tune_mod.VERDICT_VENDOR
    if row.get('error') or not row.get('candidate'):
        return ''
    return tune_mod.VERDICT_GIMMIK if row.get('speedup') \
        else tune_mod.VERDICT_UNCOMPARED


def vendor_wins(rows):
    """The rows whose verdict is 'use vendor', slowest gimmik first."""
    return sorted((r for r in rows if r.get('use_vendor')),
                  key=lambda r: r.get('speedup') or 0)


def error_row(name, A, beta, dtype, n, platform, device, error, tune_s):
    info = analyse(A)
    row = dict.fromkeys(COLUMNS)
    row.update(operator=name, m=info.m, k=info.k, nnz=info.nnz,
               density=info.density, unique=info.unique,
               digest=operator_digest(A), beta=beta, n=n,
               dtype=dtype, platform=platform, device=device,
               candidate='', tune_s=tune_s,
               error=' '.join(str(error).split())[:500] or 'failed')
    return _plain(row)


# -- the sweep ---------------------------------------------------------------
def sweep(outdir, *, ops='*', ops_path=None, platform='auto', dtype='f64',
          n=None, max_nnz=None, runtime=None, use_cache=True,
          restart=False, progress=None, tune=None, mib=None, budget_s=None):
    """Tune every operator of a suite matching `ops`; returns the rows (done
    operators skipped unless `restart`; none started after `budget_s`)."""
    if platform not in PLATFORMS:
        raise ValueError(f'platform must be one of {", ".join(PLATFORMS)}, '
                         f'not {platform!r}')
    dtype = _dtype_name(DTYPES.get(dtype, dtype))
    if mib is not None:
        if n is not None:
            raise ValueError('give n or mib, not both')
        if isinstance(mib, bool) or not isinstance(mib, (int, float)) \
                or not 0 < mib < math.inf:
            raise ValueError(f'mib must be a positive number, not {mib!r}')
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) \
                or n < 1:
            raise ValueError(f'n must be a positive integer, not {n!r}')
        n = int(n)
    if max_nnz is not None and (
            isinstance(max_nnz, bool)
            or not isinstance(max_nnz, (int, np.integer)) or max_nnz < 1):
        raise ValueError(f'max_nnz must be a positive integer, not '
                         f'{max_nnz!r}')
    if budget_s is not None and (
            isinstance(budget_s, bool)
            or not isinstance(budget_s, (int, float, np.integer, np.floating))
            or math.isnan(budget_s)):
        raise ValueError(f'budget_s must be a number of seconds, not '
                         f'{budget_s!r}')
    if not isinstance(outdir, (str, os.PathLike)):
        raise TypeError(f'outdir must be a path, not {type(outdir).__name__}')
    outdir = os.fspath(outdir)

    # Select the operators first: a bad --ops fails before anything runs
    operators = suite(ops, ops_path)

    if tune is None:
        tune = tune_mod.tune
    if runtime is None:
        runtime = get_runtime(platform)
    if n is None and mib is None:
        n = int(tune_mod.default_n(runtime.name))
    itemsize = np.dtype(dtype).itemsize

    def n_of(A):
        return n if mib is None else panel_n(A, mib, itemsize)
    device = str(runtime.device)
    if progress is None:
        progress = SweepProgress()

    os.makedirs(os.path.join(outdir, TUNE_DIR), exist_ok=True)
    csv_path = os.path.join(outdir, CSV_NAME)

    def want_n(name):
        return n if mib is None or name not in operators \
            else n_of(operators[name])
    digests = {name: operator_digest(A) for name, A in operators.items()}
    table = _Table(outdir, dtype, want_n, runtime.name, device, digests)
    if restart:
        table.commit({}, {}, set(), None, restart=True)
    rows, cand_rows = table.read()

    config = {'ops': ops if isinstance(ops, str) else ','.join(ops),
              'ops_path': os.fspath(ops_path) if ops_path else None,
              'platform': runtime.name, 'device': device, 'dtype': dtype,
              'n': n, 'mib': mib, 'max_nnz': max_nnz}
    if ops_path is None:
        try:
            prov = provenance()
            config['suite'] = {k: prov.get(k) for k in
                               ('pyfr_version', 'soln_pts', 'flux_pts')}
        except (OSError, ValueError):
            pass

    def done(name):
        """Whether another run (or an earlier one) tabulated `name`: a row
        of this matrix (a row without a digest, of an older gimmik, is
        tuned again) without an error, and its candidate rows."""
        r = rows.get(name)
        return r is not None and not r['error'] and name in cand_rows \
            and r.get('digest') == digests[name]
    todo = [name for name in operators if not done(name)]
    progress.begin(len(todo), len(operators), csv_path)

    mine = set()        # operators this run tabulated
    ahead = _Ahead(runtime, dtype, n_of) if tune is tune_mod.tune else None
    try:
        started = time.monotonic()
        for i, name in enumerate(todo):
            if budget_s is not None and time.monotonic() - started > budget_s:
                progress.stopped(name, budget_s)
                break
            if done(name):      # a sweep sharing DIR did it meanwhile
                progress.finish(name, rows[name])
                continue
            A = operators[name]
            if ahead is not None and i + 1 < len(todo):
                nxt = todo[i + 1]
                ahead.submit(operators[nxt], default_beta(nxt))
            progress.start(name)
            row, cands = _tune_one(outdir, name, A, n_of(A), dtype, tune,
                                   runtime, use_cache, max_nnz, progress)
            rows[name] = row
            if cands is not None:
                cand_rows[name] = cands
            mine.add(name)
            table.commit(rows, cand_rows, mine, config)
            progress.finish(name, row)
    except KeyboardInterrupt:
        if ahead is not None:
            ahead.close(wait=False)
        raise
    finally:
        progress.close()
    if ahead is not None:
        ahead.close()
    if not mine:
        table.commit(rows, cand_rows, mine, config)
    return sorted(rows.values(), key=lambda r: _order(r['operator']))


def _tune_one(outdir, name, A, n, dtype, tune, runtime, use_cache, max_nnz,
              progress):
    """Tune one operator (or skip it past max_nnz): (its table row, its
    candidate rows or None); a failure is recorded in the row."""
    beta = default_beta(name)
    device = str(runtime.device)
    t0 = time.monotonic()
    nnz = int(np.count_nonzero(A))
    if max_nnz is not None and nnz > max_nnz:
        return error_row(name, A, beta, dtype, n, runtime.name, device,
                         f'{SKIPPED}: {nnz} non-zeros > max_nnz {max_nnz}',
                         0.0), None
    try:
        result = tune(A, beta=beta, dtype=dtype, n=n, platform=runtime.name,
                      runtime=runtime, use_cache=use_cache, name=name,
                      progress=progress.step)
        row = result_row(name, A, beta, result, time.monotonic() - t0)
        _write_tune_json(outdir, name, result)
        return row, candidate_rows(name, A, beta, result)
    except Exception as e:   # recorded in the row, not fatal
        return error_row(name, A, beta, dtype, n, runtime.name, device,
                         f'{type(e).__name__}: {e}',
                         time.monotonic() - t0), None


class _Table:
    """DIR's tables as several sweeps share them: written under a lock,
    merged, sweep.csv (what is done) renamed last."""

    def __init__(self, outdir, dtype, want_n, platform, device, digests):
        self.outdir, self.dtype, self.want_n = outdir, dtype, want_n
        self.platform, self.device = platform, device
        self.digests = digests      # {operator: operator_digest} of this run
        self.csv_path = os.path.join(outdir, CSV_NAME)

    def lock(self):
        return file_lock(os.path.join(self.outdir, LOCK_NAME))

    def read(self):
        """({operator: row}, {operator: candidate rows}) on disk; a table of
        another dtype, n class, platform or device is refused."""
        rows = {}
        if os.path.exists(self.csv_path):
            for r in read_rows(self.csv_path, []):
                self._check(r)
                rows[r['operator']] = r
        return rows, _load_candidate_rows(self.outdir, rows)

    def _check(self, r):
        want = self.want_n(r['operator'])
        if r.get('dtype') != self.dtype or (
                want is not None and r.get('n') != want
                and n_class(r.get('n')) != n_class(want)):
            raise ValueError(
                f'{self.csv_path} holds a sweep with dtype {r.get("dtype")} '
                f'and n {r.get("n")}, not dtype {self.dtype} and n {want}: '
                f'use another --out or --restart')
        # the n is kept to its class: the tuner's result is the class's
        if (r.get('platform'), r.get('device')) != (self.platform,
                                                    self.device):
            raise ValueError(
                f'{self.csv_path} holds results on platform '
                f'{r.get("platform")}, device {r.get("device")} (operator '
                f'{r["operator"]}), not on platform {self.platform}, device '
                f'{self.device}: use another --out or --restart')
        mine = self.digests.get(r['operator'])
        if r.get('digest') and mine and r['digest'] != mine:
            raise ValueError(
                f'{self.csv_path} holds operator {r["operator"]} with another '
                f'matrix (digest {r["digest"]}, this suite\'s {mine}): is '
                f'--ops-path another suite? use another --out or --restart')

    def commit(self, rows, cand_rows, mine, config, restart=False):
        """Write the tables: this run's rows for the operators in `mine`,
        what is on disk for the others (merged into rows and cand_rows);
        with restart, this run's alone.  SIGTERM waits for the write."""
        with _holding_sigterm(), self.lock():
            if not restart:
                disk, disk_cands = self.read()
                for name, r in disk.items():
                    if name not in mine:
                        rows[name] = r
                        if name in disk_cands:
                            cand_rows[name] = disk_cands[name]
            ordered = sorted(rows.values(),
                             key=lambda r: _order(r['operator']))
            write_all(self.outdir, ordered,
                      [cand_rows[r['operator']] for r in ordered
                       if r['operator'] in cand_rows], config or {})


def _order(name):
    from gimmik.operators import sort_key
    return sort_key(name)


def _write_tune_json(outdir, name, result):
    to_json = getattr(result, 'to_json', None)
    if to_json is None:
        return
    doc = to_json()
    text = doc if isinstance(doc, str) else json.dumps(doc, indent=1,
                                                       default=str)
    atomic_write(os.path.join(outdir, TUNE_DIR, f'{safe_name(name)}.json'),
                 text + '\n')


# -- command line ------------------------------------------------------------
def add_arguments(ap):
    ap.add_argument('--platform', choices=PLATFORMS, default='auto',
                    help='where to run (default: auto = hip, cuda, then c)')
    ap.add_argument('--ops', default='*', metavar='GLOB',
                    help='operators to tune: fnmatch globs over the suite '
                         'names, comma-separated (default: all; e.g. '
                         "'p[1-3]-hex-*,*-m460')")
    ap.add_argument('--ops-path', default=None, metavar='PATH',
                    help='suite to read: an .npz file or a directory of '
                         '.mtx files such as p{p}/{ele}/{mat}-sp.mtx '
                         '(default: the PyFR suite)')
    ap.add_argument('--n', type=int, default=None,
                    help='columns of B and C (default: the tuner\'s '
                         'default for the platform)')
    ap.add_argument('--mib', type=float, default=None,
                    help='instead of --n: per operator, n columns so that '
                         'B + C take at least MIB MiB')
    ap.add_argument('--max-nnz', type=int, default=None, metavar='NNZ',
                    help='skip operators with more non-zeros (default and '
                         '0: no limit)')
    add_dtype_argument(ap)
    ap.add_argument('--out', default='sweep-results', metavar='DIR',
                    help='output directory (default: %(default)s); an '
                         'interrupted sweep resumes from it')
    ap.add_argument('--budget', type=positive_seconds, default=None,
                    metavar='S',
                    help='start no operator after S seconds (resume with '
                         'the same command)')
    ap.add_argument('--restart', action='store_true',
                    help='ignore results already in DIR')
    ap.add_argument('--no-cache', action='store_true',
                    help="do not use the tuner's cache")
    ap.add_argument('--quiet', action='store_true', help='no progress')


class Terminated(KeyboardInterrupt):
    """SIGTERM during `gimmik sweep` (a batch scheduler's time limit): an
    interruption, so that everything a Ctrl-C cleans up is cleaned up."""


_sigterm = {'hold': 0, 'pending': False}


def _on_sigterm(signum, frame):
    if _sigterm['hold']:
        _sigterm['pending'] = True  # raised once the tables are in place
        return
    raise Terminated()


@contextlib.contextmanager
def _holding_sigterm():
    """Hold SIGTERM's Terminated until the body (a table write) is done."""
    _sigterm['hold'] += 1
    try:
        yield
    finally:
        _sigterm['hold'] -= 1
    if not _sigterm['hold'] and _sigterm['pending']:
        _sigterm['pending'] = False
        raise Terminated()


def run(args):
    from gimmik.progress import SweepBar

    t0 = time.monotonic()
    bar = SweepBar(quiet=args.quiet)
    csv_path = os.path.join(args.out, CSV_NAME)
    try:
        old = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:      # not the main thread: SIGTERM stays as it was
        old = None
    try:
        rows = sweep(args.out, ops=args.ops, ops_path=args.ops_path,
                     platform=args.platform, dtype=args.dtype, n=args.n,
                     mib=args.mib, budget_s=args.budget,
                     max_nnz=args.max_nnz or None,
                     use_cache=not args.no_cache, restart=args.restart,
                     progress=bar)
    except Terminated:
        print(f'terminated (SIGTERM): the operator being tuned is left '
              f'undone; run the same command again to resume from '
              f'{csv_path}', file=sys.stderr)
        return EXIT_SIGTERM
    except KeyboardInterrupt:
        print(f'interrupted: run the same command again to resume from '
              f'{csv_path}', file=sys.stderr)
        return 130
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)
        _sigterm.update(hold=0, pending=False)
    bad = [r['operator'] for r in rows
           if r.get('error') and not r['error'].startswith(SKIPPED)]
    skipped = sum(1 for r in rows if r.get('error', '').startswith(SKIPPED))
    print(f'{len(rows)} operators in {os.path.join(args.out, CSV_NAME)} '
          f'({time.monotonic() - t0:.0f} s)'
          + (f'; {skipped} skipped (--max-nnz)' if skipped else '')
          + (f'; {len(bad)} failed: {", ".join(bad[:10])}' if bad else ''),
          file=sys.stderr)
    wins = vendor_wins(rows)
    if wins:
        print(f'use vendor: the vendor BLAS beats gimmik\'s best on '
              f'{len(wins)} of {len(rows)} operators: '
              + ', '.join(f'{r["operator"]}'
                          + (f' (gimmik {1/r["speedup"]:.2f}x its time)'
                             if r.get('speedup')
                             else ' (no correct candidate)')
                          for r in wins[:10])
              + (', ...' if len(wins) > 10 else '')
              + f' (verdict column of {CSV_NAME})', file=sys.stderr)
    if bar.stopped_before is not None:
        print(f'incomplete: --budget stopped the sweep before '
              f'{bar.stopped_before} (exit status {EXIT_BUDGET}); run the '
              f'same command again to go on', file=sys.stderr)
        return EXIT_BUDGET
    return 1 if bad else 0


# -- per-operator panel sizes, building ahead, the per-candidate table ------
CANDIDATES_NAME = 'candidates.csv'
CANDIDATE_COLUMNS = (
    'operator', 'n',
    'kind',              # gimmik (a candidate) or vendor (a formulation)
    'name',              # candidate variant or vendor formulation
    'time_s', 'gbps', 'copy_fraction',
    'chosen',            # the fastest of its kind for this operator
    'error',             # empty, or why it was not timed
)


def panel_n(A, mib, itemsize=8, multiple=256):
    """Columns n (a multiple of `multiple`) so that B (k x n) and C (m x n)
    take at least `mib` MiB together."""
    m, k = np.shape(A)
    cols = math.ceil(mib*2**20 / ((m + k)*itemsize))
    return -(-cols // multiple)*multiple


class _Ahead:
    """Builds the next operator's candidates (tune.prepare) in a background
    thread while this one is timed, for runtimes that build elsewhere than
    they time (prepare_ahead: the cuda runtime's nvcc runs on the host)."""

    def __init__(self, runtime, dtype, n_of):
        self.runtime, self.dtype, self.n_of = runtime, dtype, n_of
        self.pool = None
        if getattr(runtime, 'prepare_ahead', False):
            import concurrent.futures as cf
            self.pool = cf.ThreadPoolExecutor(1)

    def submit(self, A, beta):
        if self.pool is None:
            return
        prep = tune_mod.prepare
        self.pool.submit(prep, A, beta=beta, dtype=self.dtype, n=self.n_of(A),
                         runtime=self.runtime)

    def close(self, wait=True):
        if self.pool is not None:
            self.pool.shutdown(wait=wait, cancel_futures=not wait)


def candidate_rows(name, A, beta, result):
    """The per-candidate table's rows for one operator's TuneResult."""
    info = analyse(A)
    n = int(result.n)
    nbytes = moved_bytes(info, beta, n, np.dtype(_dtype_name(
        result.dtype)).itemsize)
    copy = result.copy_gbps
    best = _get(result.best or {}, 'variant')
    vendor = result.vendor or {}
    out = []

    def row(kind, label, t, chosen, error):
        gbps = nbytes / t / 1e9 if t else None
        out.append(_plain({
            'operator': name, 'n': n, 'kind': kind, 'name': label,
            'time_s': t, 'gbps': gbps,
            'copy_fraction': gbps / copy if gbps and copy else None,
            'chosen': chosen,
            'error': ' '.join(str(error or '').split())[:300]}))
    for c in result.candidates or ():
        row('gimmik', _get(c, 'variant'), _get(c, 'time_s'),
            _get(c, 'variant') == best and bool(_get(c, 'correct')),
            _get(c, 'error'))
    for f in _get(vendor, 'formulations') or ():
        row('vendor', f['name'], f.get('time_s'),
            f['name'] == _get(vendor, 'formulation'), f.get('error'))
    return out


def _load_candidate_rows(outdir, rows):
    """Candidate rows of operators already done, from DIR/candidates.csv."""
    path = os.path.join(outdir, CANDIDATES_NAME)
    done = {}
    if not os.path.exists(path):
        return done
    try:
        with open(path, newline='') as f:
            for rec in csv.DictReader(f):
                if rec.get('operator') in rows:
                    done.setdefault(rec['operator'], []).append(rec)
    except (OSError, csv.Error, UnicodeDecodeError):
        return {}
    return done


def _candidates_text(per_operator):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator='\n')
    w.writerow(CANDIDATE_COLUMNS)
    for rows in per_operator:
        for r in rows:
            w.writerow([r.get(c) if isinstance(r.get(c), str)
                        else _fmt(r.get(c)) for c in CANDIDATE_COLUMNS])
    return buf.getvalue()


def write_candidates(outdir, per_operator):
    """Rewrite DIR/candidates.csv atomically from lists of rows."""
    write_files(outdir, [(CANDIDATES_NAME, _candidates_text(per_operator))])
