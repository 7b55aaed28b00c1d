"""Audit what the HIP generator offers on every operator PyFR's HIP
backend sends to it, on the ISA clang-19 makes of each offered candidate.

PyFR 3.1's HIP backend hands an operator to the generator unless it has
more than 128 distinct |values| (zero counted) and more than 15 %
non-zeros (those go to rocBLAS), and times the first 8 candidates of
kernels().  For both suites (bench/operators/pyfr-ops.npz and
pyfr-ops-p7.npz), f64 and f32, n = 110080 baked (ldb = ldc = n) and n at
run time, aligne 16, beta 1 for M3/M6 else 0, and each arch, a row of
bench/results/hip-offer-audit-NAME.csv says whether these targets hold:

- at least 6 distinct candidates (by source) among the first 8, or all of
  the table where fewer are offered;
- every offered candidate compiles with zero scratch;
- at least 3 of the first 8 at >= 2 waves per SIMD (clang's Occupancy,
  which counts VGPRs, AGPRs, LDS and the block size);
- loads batched: no offered candidate waits for all vector memory operations
  (`s_waitcnt vmcnt(0)`) more than once per 8 global loads on the path a
  block runs (one wait a path allowed whatever its loads; a kernel whose
  blocks take one of G row groups is judged over the G paths together:
  waits at most loads / 8 or G).

Column pass: all four over every offered candidate; pass_first8: the same
with the last judged on the first 8 only (the ones PyFR times).  The
columns vm0_fail_wave and vm0_fail_first8_wave judge the loads-batched
target with one wait allowed on each wave's path: in the families whose
waves each run their own case of a switch on the wave index
(gimmik.isa.WAVE_CASES), a kernel too small for a batch may wait once a
wave, not once a block.

    PYTHONPATH=. nice python3 bench/hip_offline/hip_offer_audit.py --name all
    PYTHONPATH=. python3 bench/hip_offline/hip_offer_audit.py \\
        --ops 'p4-hex-m460' --name x

Operators are done in parallel clang processes (--jobs, default the CPU
count); reports are cached (gimmik.isa), so a second run is fast.
"""

import argparse
import csv
import fnmatch
import hashlib
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench import OPERATORS, RESULTS  # noqa: E402
from gimmik import HIPMatMul  # noqa: E402
from gimmik.isa import (LOADS_PER_VM0, inspect_many, vm0_ok,  # noqa: E402
                        wave_paths)
from gimmik.operators import default_beta  # noqa: E402
from gimmik.pyfr import PROTOCOLS  # noqa: E402

SUITES = ('pyfr-ops.npz', 'pyfr-ops-p7.npz')
PYFR_HIP = PROTOCOLS['3.1', 'hip']     # its filter and first 8 (main's too)
PYFR_NKERNS = PYFR_HIP.nkerns
PYFR_N = 110080
ALIGNE = PYFR_HIP.aligne('float64')
ARCHES = ('gfx90a', 'gfx942')
DTYPES = ('float64', 'float32')

# the targets
MIN_DISTINCT = 6
MIN_WAVES = 2
MIN_AT_WAVES = 3

FIELDS = ['op', 'm', 'k', 'nnz', 'density', 'dtype', 'n_mode', 'arch',
          'offered', 'distinct_first8', 'max_scratch', 'waves_first8',
          'at_2_waves', 'worst_vm0_ratio', 'vm0_fail', 'vm0_fail_first8',
          'vm0_fail_variants', 'worst_variant',
          'pass', 'pass_first8', 'why', 'vm0_fail_wave',
          'vm0_fail_first8_wave']


def operators(patterns):
    out = {}
    for suite in SUITES:
        with np.load(os.path.join(OPERATORS, suite)) as d:
            for name in d.files:
                A = d[name]
                if A.ndim != 2 or not any(fnmatch.fnmatch(name, p)
                                          for p in patterns):
                    continue
                if PYFR_HIP.sends(A):
                    out[name] = np.array(A, dtype=np.float64)
    return out


def judge(offered, reps):
    """(row fields, pass, why) of one operator x dtype x n-mode x arch:
    offered [(variant, src, row groups, wave paths)], reps the ISA reports
    in that order."""
    first = offered[:PYFR_NKERNS]
    distinct = len({hashlib.sha256(s.encode()).hexdigest()
                    for _, s, _, _ in first})
    errors = [v for (v, _, _, _), r in zip(offered, reps)
              if isinstance(r, Exception)]
    good = [(v, r, g, w) for (v, _, g, w), r in zip(offered, reps)
            if not isinstance(r, Exception)]
    scratch = max([r['scratch_bytes'] for _, r, _, _ in good] or [0])
    waves = [r['occupancy'] for r in reps[:len(first)]
             if not isinstance(r, Exception)]
    at2 = sum(w >= MIN_WAVES for w in waves)
    ratios = [(r['vmcnt0'] / max(1, sum(r['global_loads'].values())), v)
              for v, r, _, _ in good]
    worst, worst_v = max(ratios) if ratios else (0.0, '')
    vm0_bad = [i for i, (v, r, g, _) in enumerate(good) if not vm0_ok(r, g)]
    wave_bad = [i for i, (v, r, g, w) in enumerate(good)
                if not vm0_ok(r, g, w)]
    why = []
    if not offered:
        why.append('nothing offered')
    if errors:
        why.append(f'{len(errors)} do not compile')
    if distinct < min(MIN_DISTINCT, len(offered)):
        why.append(f'{distinct} distinct in the first {PYFR_NKERNS}')
    if scratch:
        why.append(f'scratch {scratch}')
    if at2 < min(MIN_AT_WAVES, len(first)):
        why.append(f'{at2} at >= {MIN_WAVES} waves')
    # what PyFR times: the first 8 (the rest are never run by it)
    first_ok = not why and not any(i < len(first) for i in vm0_bad)
    if vm0_bad:
        why.append(f'{len(vm0_bad)} wait vmcnt(0) more than once per '
                   f'{LOADS_PER_VM0} loads')
    return {'offered': len(offered), 'distinct_first8': distinct,
            'max_scratch': scratch,
            'waves_first8': ' '.join(map(str, waves)),
            'at_2_waves': at2, 'worst_vm0_ratio': f'{worst:.3f}',
            'vm0_fail': len(vm0_bad),
            'vm0_fail_first8': sum(i < len(first) for i in vm0_bad),
            'vm0_fail_variants': ' '.join(good[i][0] for i in vm0_bad),
            'worst_variant': worst_v,
            'pass': int(not why), 'pass_first8': int(first_ok),
            'why': '; '.join(why), 'vm0_fail_wave': len(wave_bad),
            'vm0_fail_first8_wave': sum(i < len(first) for i in wave_bad)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--ops', default='*',
                    help='comma-separated fnmatch globs of operator names')
    ap.add_argument('--name', default='all', help='CSV name suffix')
    ap.add_argument('--out', default=RESULTS)
    ap.add_argument('--jobs', type=int, default=os.cpu_count() or 1)
    ap.add_argument('--arch', nargs='+', default=list(ARCHES))
    ap.add_argument('--dtype', nargs='+', default=list(DTYPES))
    ap.add_argument('--n-mode', nargs='+', default=['baked', 'runtime'],
                    choices=['baked', 'runtime'])
    args = ap.parse_args(argv)

    ops = operators(args.ops.split(','))
    path = os.path.join(args.out, f'hip-offer-audit-{args.name}.csv')
    os.makedirs(args.out, exist_ok=True)
    t0, npass, nrows = time.time(), 0, 0
    with open(path, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for name, A in ops.items():
            nnz = int(np.count_nonzero(A))
            for dtype in args.dtype:
                for mode in args.n_mode:
                    sizes = (dict(n=PYFR_N, ldb=PYFR_N, ldc=PYFR_N)
                             if mode == 'baked' else {})
                    mm = HIPMatMul(A, beta=default_beta(name), aligne=ALIGNE,
                                   **sizes)
                    per_arch = {arch: [(m['variant'], s,
                                        m.get('row_groups', 1),
                                        wave_paths(m)) for s, m in
                                       mm.kernels(dtype, gcn_arch=arch)]
                                for arch in args.arch}
                    jobs = [(s, arch) for arch in args.arch
                            for _, s, _, _ in per_arch[arch]]
                    reps = inspect_many(jobs, args.jobs)
                    for arch in args.arch:
                        offered = per_arch[arch]
                        mine, reps = reps[:len(offered)], reps[len(offered):]
                        row = {'op': name, 'm': A.shape[0], 'k': A.shape[1],
                               'nnz': nnz,
                               'density': f'{nnz / A.size:.4f}',
                               'dtype': dtype, 'n_mode': mode, 'arch': arch,
                               **judge(offered, mine)}
                        w.writerow(row)
                        f.flush()
                        nrows += 1
                        npass += row['pass']
                        print(f'{time.time() - t0:7.0f}s {name} {dtype} '
                              f'{mode} {arch}: '
                              f'{"pass" if row["pass"] else row["why"]}',
                              flush=True)
    print(f'{npass}/{nrows} pass; {path}')
    return 0 if npass == nrows else 1


if __name__ == '__main__':
    sys.exit(main())
