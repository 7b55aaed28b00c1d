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
