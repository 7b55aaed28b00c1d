"""The tables of bench/pyfr/pyfr_walk.py: one row per (operator, n) and one per
candidate, appended as they are measured (a run resumes from them), and
the summary printed at the end."""

import csv
import math
import os

FIELDS = ['op', 'etype', 'order', 'mat', 'm', 'k', 'nnz', 'density', 'nuq',
          'pyfr_sends', 'beta', 'neles', 'n', 'walk_pick', 'walk_time_s',
          'all_best', 'all_best_time_s', 'walk_over_all', 'up_walk_pick',
          'up_walk_time_s', 'ours_over_up', 'ours_compile_s',
          'up_compile_s', 'ncand', 'nwalk', 'up_nwalk', 'walk_seen',
          'ord_walk_pick', 'ord_walk_over_all', 'ord_over_up',
          'vendor_formulation', 'vendor_time_s', 'ours_over_vendor',
          'up_over_vendor', 'copy_time_s', 'walk_copy_fraction',
          'all_best_copy_fraction', 'up_copy_fraction', 'nfail', 'device']
CAND_FIELDS = ['op', 'n', 'kind', 'rank', 'variant', 'time_s', 'walk_seen',
               'registers', 'local_mem', 'shared_mem', 'compile_s', 'error',
               'status']


def geomean(x):
    x = [float(v) for v in x]
    return math.exp(sum(math.log(v) for v in x) / len(x)) if x else math.nan


def read_done(path):
    if not os.path.exists(path):
        return set()
    with open(path) as f:
        return {(r['op'], int(r['n'])) for r in csv.DictReader(f)}


def append(path, fields, rows):
    new = not os.path.exists(path)
    with open(path, 'a', newline='') as f:
        w = csv.DictWriter(f, fieldnames=fields)
        if new:
            w.writeheader()
        for row in rows:
            w.writerow(row)


def fmt(x, spec='.6e'):
    return '' if x is None or (isinstance(x, float) and math.isnan(x)) \
        else format(x, spec)


def cand_row(name, n, kind, rank, r, seen):
    meta = r.get('meta', {})
    return {'op': name, 'n': n, 'kind': kind, 'rank': rank,
            'variant': meta.get('variant', meta.get('tplname', '')),
            'time_s': fmt(r.get('time_s')) if 'time_s' in r and
            math.isfinite(r['time_s']) else '',
            'walk_seen': seen, 'registers': r.get('registers', ''),
            'local_mem': r.get('local_mem', ''),
            'shared_mem': r.get('shared_mem', ''),
            'compile_s': fmt(r.get('compile_s'), '.3f'),
            'error': fmt(r.get('err'), '.2e'),
            'status': r.get('status', 'not timed' if not r.get('error')
                            else r['error'][:300].replace('\n', ' '))}


def summarise(path):
    """Print: (op, n) with walk_over_all > 1.03; geomean ours_over_up over
    the operators PyFR sends; compile seconds per element type and order
    at the largest-population n."""
    if not os.path.exists(path):
        return
    with open(path) as f:
        rows = list(csv.DictReader(f))
    woa = [r for r in rows if r['walk_over_all']]
    miss = [r for r in woa if float(r['walk_over_all']) > 1.03]
    print(f'\n{len(rows)} (operator, n) rows; walk_over_all measured on '
          f'{len(woa)}, > 1.03 on {len(miss)}:')
    for r in sorted(miss, key=lambda r: -float(r['walk_over_all'])):
        print(f'  {r["op"]:13s} n={r["n"]:>8s} {r["walk_over_all"]} walk '
              f'{r["walk_pick"]} best {r["all_best"]}')
    owa = [r for r in rows if r.get('ord_walk_over_all')]
    if owa:
        om = [r for r in owa if float(r['ord_walk_over_all']) > 1.03]
        table = [r['walk_over_all'] for r in owa if r['walk_over_all']]
        print(f'every ranked candidate (no start-up cut): '
              f'ord_walk_over_all > 1.03 on {len(om)} of {len(owa)}, '
              f'geomean {geomean(r["ord_walk_over_all"] for r in owa):.4f} '
              f'(as offered: {geomean(table):.4f})')
        for r in sorted(om, key=lambda r: -float(r['ord_walk_over_all'])):
            print(f'  {r["op"]:13s} n={r["n"]:>8s} {r["ord_walk_over_all"]} '
                  f'walk {r["ord_walk_pick"]} best {r["all_best"]}')
    sent = [r for r in rows if r['pyfr_sends'] == 'True' and
            r['ours_over_up']]
    for n in sorted({int(r['n']) for r in sent}):
        x = [float(r['ours_over_up']) for r in sent if int(r['n']) == n]
        worse = sum(v > 1 for v in x)
        print(f'n={n}: ours/upstream walk pick over {len(x)} operators PyFR '
              f'sends: geomean {geomean(x):.3f}, max {max(x):.3f}, '
              f'{worse} slower')
    x = [float(r['ours_over_up']) for r in sent]
    if x:
        print(f'all n: geomean {geomean(x):.3f} over {len(x)}')
    for col in ('ours_over_vendor', 'up_over_vendor'):
        x = [float(r[col]) for r in rows if r.get(col)]
        if x:
            print(f'{col} (time ratio, < 1 faster than the vendor): '
                  f'geomean {geomean(x):.3f} over {len(x)}, '
                  f'{sum(v > 1 for v in x)} above 1')
    cf = [r for r in rows if r.get('all_best_copy_fraction')]
    if cf:
        print('copy fractions (a same-bytes device copy\'s time over the '
              'pick\'s, timed together):')
        for col in ('walk_copy_fraction', 'all_best_copy_fraction',
                    'up_copy_fraction'):
            x = [float(r[col]) for r in cf if r.get(col)]
            if x:
                print(f'  {col}: geomean {geomean(x):.3f}, min {min(x):.3f},'
                      f' >= 0.90 on {sum(v >= 0.9 for v in x)} of {len(x)}')
        ok = [r for r in cf if float(r['all_best_copy_fraction']) >= 0.9
              and float(r['all_best_copy_fraction'])
              >= float(r.get('up_copy_fraction') or 0)]
        print(f'  best candidate >= 0.90 of copy and no slower than '
              f'upstream\'s pick: {len(ok)} of {len(cf)}')
    # compile seconds per (etype, order): the first n target's rows
    comp = {}
    for r in rows:
        if r['pyfr_sends'] != 'True' or not r['up_compile_s']:
            continue
        key = (r['etype'], int(r['order']), int(r['n']))
        o, u = comp.get(key, (0.0, 0.0))
        comp[key] = (o + float(r['ours_compile_s'] or 0),
                     u + float(r['up_compile_s']))
    if comp:
        print('NVRTC seconds of the walk\'s candidates (operators PyFR sends;'
              ' ours / upstream), per element type, order and n:')
        for (e, p, n), (o, u) in sorted(comp.items()):
            print(f'  {e:5s} p{p} n={n:<8d} {o:7.2f} / {u:7.2f}')
