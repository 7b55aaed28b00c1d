"""bench/model's comparison tools on made-up inputs: candidate_hashes'
verdicts and order_compare's in-context ratios and summary."""

import csv

from bench.model import candidate_hashes as ch
from bench.model import order_compare as oc


def test_hash_compare_tells_a_rename_from_a_change():
    before = {'same': ['h1', ['a', 'b'], 's1'],
              'renamed': ['h2', ['a', 'b'], 's2'],
              'reordered': ['h3', ['a', 'b'], 's3'],
              'changed': ['h4', ['a', 'b'], 's4'],
              'old-file': ['h5', ['a']],
              'only-before': ['h6', ['a'], 's6']}
    after = {'same': ['h1', ['a', 'b'], 's1'],
             'renamed': ['x2', ['a2', 'b'], 's2'],
             'reordered': ['x3', ['b', 'a'], 'y3'],
             'changed': ['x4', ['a', 'b'], 'y4'],
             'old-file': ['x5', ['a']]}
    n, bad = ch.compare(before, after)
    assert n == 5
    assert dict(bad) == {
        'renamed': 'names only (same sources in the same order)',
        'reordered': 'order/variants', 'changed': 'sources',
        'old-file': 'sources'}


def _run(path, rows):
    with open(path, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=['op', 'n', 'walk_pick',
                                          'ours_over_up'])
        w.writeheader()
        w.writerows(rows)
    return str(path)


def test_context_rows_compare_ratios_to_upstream(tmp_path):
    before = _run(tmp_path / 'b.csv', [
        dict(op='x', n=10, walk_pick='k1', ours_over_up=0.80),
        dict(op='y', n=10, walk_pick='k2', ours_over_up=1.00),
        dict(op='z', n=10, walk_pick='k3', ours_over_up=0.90)])
    after = _run(tmp_path / 'a.csv', [
        dict(op='x', n=10, walk_pick='k9', ours_over_up=0.88),
        dict(op='y', n=10, walk_pick='k2', ours_over_up=0.50)])
    again = _run(tmp_path / 'a2.csv', [
        dict(op='y', n=10, walk_pick='k2', ours_over_up=1.01)])
    rows = {r['op']: r for r in oc.context_rows(before, [after, again])}
    assert set(rows) == {'x', 'y'}            # z: not run after
    assert rows['x']['after_over_before'] == 1.1
    assert rows['y']['after_over_before'] == 1.01   # the later run wins
    text = oc.summary(list(rows.values()))
    assert 'context: 2 operators' in text and '1 above 1.03' in text
    assert 'x ' in text and 'k1 -> k9' in text
    assert 'same pick in 0' in text


def test_recorded_context_looks_up_each_pick_by_operator_n_and_variant(
        tmp_path):
    path = tmp_path / 'run-candidates.csv'
    with open(path, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=['op', 'n', 'variant',
                                          'ctx_over_up', 'status'])
        w.writeheader()
        w.writerows([
            dict(op='a', n=110080, variant='x', ctx_over_up=0.98,
                 status='ok'),
            dict(op='a', n=110080, variant='y', ctx_over_up=1.08,
                 status='ok'),
            dict(op='a', n=110080, variant='y', ctx_over_up=1.02,
                 status='ok'),
            dict(op='a', n=20480, variant='y', ctx_over_up=0.5,
                 status='ok'),
            dict(op='a', n=110080, variant='z', ctx_over_up=0.5,
                 status='wrong')])
    ctx = oc.recorded_context([str(path)])
    rows = oc.with_recorded_context(
        [{'dataset': 'pyfr', 'op': 'a', 'n': 110080, 'before_pick': 'x',
          'after_pick': 'y'},
         {'dataset': 'pyfr', 'op': 'a', 'n': 110080, 'before_pick': 'x',
          'after_pick': 'z'}], ctx)
    assert rows[0]['before_ctx'] == 0.98
    assert abs(rows[0]['after_ctx'] - (1.08*1.02)**0.5) < 1e-4
    assert rows[1]['after_ctx'] == ''         # only a failed run of z
    s = oc.context_summary(rows)
    assert s.startswith('recorded context: 1 changed picks')
    assert 'above 1.03: before 0, after 1' in s
