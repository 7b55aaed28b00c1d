"""gimmik report: Markdown numbers and PNG plots from a sweep table."""

import builtins
import os

import numpy as np
import pytest

from conftest import _sweep
from gimmik.report import (geomean, group_of, markdown, md_escape, report,
                           summarise)
from gimmik.sweep import COLUMNS, write_tables


def row(name, time_s, vendor_time_s, m=10, k=8, nnz=40, n=1000, beta=0.0,
        copy_gbps=100.0, error=''):
    nbytes = 8*n*(k + m*(2 if beta else 1))
    r = dict.fromkeys(COLUMNS)
    r.update(operator=name, m=m, k=k, nnz=nnz, density=nnz/(m*k), unique=5,
             beta=beta, n=n, dtype='float64', platform='c',
             device='Test CPU | 2 cores', candidate='' if error else
             'cstream/w2', error=error, tune_s=1.5)
    if not error:
        gbps = nbytes/time_s/1e9
        r.update(time_s=time_s, gbps=gbps, gflops=2*nnz*n/time_s/1e9,
                 copy_gbps=copy_gbps, copy_fraction=gbps/copy_gbps,
                 vendor_time_s=vendor_time_s,
                 vendor_gbps=nbytes/vendor_time_s/1e9,
                 vendor_copy_fraction=nbytes/vendor_time_s/1e9/copy_gbps,
                 speedup=vendor_time_s/time_s, use_vendor=False,
                 candidates=3, correct=3)
    return r


@pytest.fixture
def rows():
    return [row('p1-hex-m0', 1e-4, 4e-4),
            row('p1-hex-m3', 2e-4, 2e-4, beta=1.0),
            row('p2-hex-m0', 4e-4, 2e-4),
            row('p1-tet-m460', 1e-4, 1e-4),
            row('p2-tet-m132', 1e-3, 1e-3, error='HiprtcError: boom | x'),
            row('my|op', 2e-4, 8e-4),
            row('p6-pyr-m132', 1, 1, error='skipped: 58288 non-zeros > '
                'max_nnz 5000')]


def test_summary_numbers(rows):
    s = summarise(rows)
    assert s['operators'] == 7 and s['ok'] == 5
    assert s['failed'] == ['p2-tet-m132']
    assert s['skipped'] == ['p6-pyr-m132']
    # speed-ups 4, 1, 0.5, 1, 4
    assert s['geomean_speedup'] == pytest.approx((4*1*0.5*1*4)**0.2)
    assert s['wins'] == 2 and s['compared'] == 5
    assert s['best']['speedup'] == 4 and s['worst']['operator'] == \
        'p2-hex-m0'
    assert geomean([]) is None and geomean([2, 8]) == pytest.approx(4)


def test_groups():
    assert group_of('p3-hex-m460') == ('hex', 3, 'm460')
    assert group_of('custom') == ('other', None, 'custom')


def test_markdown(rows):
    text = markdown(rows)
    assert '**2 of 5**' in text
    assert f'**{(4*1*0.5*1*4)**0.2:.2f}×**' in text
    # each operator once in the table, failures listed, cells escaped
    for name in ('p1-hex-m0', 'p1-hex-m3', 'p2-hex-m0', 'p1-tet-m460',
                 'p2-tet-m132'):
        assert f'| {name} |' in text
    assert '| my\\|op |' in text
    assert 'Test CPU \\| 2 cores' in text
    assert '- p2-tet-m132: HiprtcError: boom \\| x' in text
    assert '7 (5 tuned, 1 skipped, 1 failed)' in text
    # hex: speed-ups 4, 1, 0.5 -> geomean 1.26, 1 win of 3
    assert '| hex | 3 | 1.26× | 1/3 |' in text
    assert '| 1 | 3 |' in text and '| 2 | 1 |' in text   # by order
    # p1-hex-m0 moves 8*1000*(8 + 10) bytes in 1e-4 s = 1.44 GB/s
    assert '| p1-hex-m0 | 10×8 | 40 | 0.500 | 5 | 0 | cstream/w2 | 100.0 |' \
        ' 1.4 | 1% | 0.8 | 0.4 | 4.00× |' in text
    # every table row has as many cells as its header
    for block in text.split('\n\n'):
        lines = [ln for ln in block.splitlines() if ln.startswith('|')]
        if lines:
            cells = {ln.replace('\\|', '').count('|') for ln in lines}
            assert len(cells) == 1, block


def test_cache_resident_note(rows):
    assert 'exceed the measured copy' not in markdown(rows)
    rows[0]['copy_fraction'] = 1.7
    assert '**1 operators exceed the measured copy bandwidth** (e.g. ' \
        'p1-hex-m0)' in markdown(rows)


def test_copy_bandwidth_line(rows):
    assert '- measured copy bandwidth: 100.0 GB/s' in markdown(rows)
    for i, r in enumerate(rows):
        r['copy_gbps'] = 10.0 + i
    assert '- measured copy bandwidth: 13.0 (median of the 7 ' \
        'measurements, one per operator: 10.0–16.0) GB/s' in markdown(rows)


def test_md_escape():
    assert md_escape('a|b\nc*d') == 'a\\|b c\\*d'


def test_report_files(tmp_path, rows):
    pytest.importorskip('matplotlib')
    write_tables(tmp_path, rows, {})
    out = report(tmp_path)
    names = sorted(p.rsplit('/', 1)[-1] for p in out)
    assert names == ['bandwidth.png', 'report.md', 'roofline.png',
                     'speedup.png']
    for p in out:
        if p.endswith('.png'):
            with open(p, 'rb') as f:
                assert f.read(8) == b'\x89PNG\r\n\x1a\n'
    md = (tmp_path / 'report.md').read_text()
    assert '![bandwidth](bandwidth.png)' in md


def test_report_elsewhere_and_no_plots(tmp_path, rows):
    write_tables(tmp_path, rows, {})
    out = report(tmp_path / 'sweep.csv', tmp_path / 'rep', plots=False)
    assert out == [str(tmp_path / 'rep' / 'report.md')]
    assert '![' not in (tmp_path / 'rep' / 'report.md').read_text()


def test_all_failed(tmp_path):
    write_tables(tmp_path, [row('p1-hex-m0', 1, 1, error='x')], {})
    report(tmp_path, plots=False)
    md = (tmp_path / 'report.md').read_text()
    assert '0 tuned, 0 skipped, 1 failed' in md


def test_missing_matplotlib(tmp_path, rows, monkeypatch):
    write_tables(tmp_path, rows, {})
    real_import = builtins.__import__

    def no_mpl(name, *a, **kw):
        if name.startswith('matplotlib'):
            raise ImportError('No module named matplotlib')
        return real_import(name, *a, **kw)

    monkeypatch.setattr(builtins, '__import__', no_mpl)
    with pytest.raises(RuntimeError, match='pip install matplotlib'):
        report(tmp_path)
    assert not (tmp_path / 'report.md').exists()


def test_errors(tmp_path, capsys):
    from gimmik.cli import main
    with pytest.raises(FileNotFoundError, match='no sweep table'):
        report(tmp_path)
    assert main(['report', str(tmp_path)]) == 2
    assert 'no sweep table' in capsys.readouterr().err
    (tmp_path / 'sweep.csv').write_text(','.join(COLUMNS) + '\n')
    with pytest.raises(ValueError, match='no usable rows'):
        report(tmp_path)


def test_cli(tmp_path, rows, capsys):
    pytest.importorskip('matplotlib')
    from gimmik.cli import main
    write_tables(tmp_path, rows, {})
    assert main(['report', str(tmp_path)]) == 0
    assert 'report.md' in capsys.readouterr().out
    assert np.all([(tmp_path / p).exists() for p in
                   ('bandwidth.png', 'speedup.png', 'roofline.png')])


# -- unusable rows and atomic writes ------------------------------------------
@pytest.mark.parametrize('col,value', [('time_s', 'nan'), ('gbps', 'inf'),
                                       ('speedup', 'NaN'), ('m', 'x'),
                                       ('use_vendor', 'maybe'),
                                       ('time_s', '')])
def test_report_skips_and_names_unusable_rows(tmp_path, col, value):
    from gimmik.report import report
    from gimmik.sweep import COLUMNS
    _sweep(tmp_path, [])
    csv_path = tmp_path / 'sweep.csv'
    lines = csv_path.read_text().splitlines()
    cells = lines[2].split(',')
    cells[COLUMNS.index(col)] = value
    lines[2] = ','.join(cells)
    csv_path.write_text('\n'.join(lines) + '\n')
    problems = []
    (md, *_) = report(tmp_path, plots=False, problems=problems)
    text = open(md).read()
    assert '## Table rows not used' in text and '- line 3:' in text
    assert '2 tuned' in text and [ln for ln, _ in problems] == [3]


def test_report_is_written_atomically(tmp_path, monkeypatch):
    from gimmik import report as report_mod
    _sweep(tmp_path, [])
    (md, *_) = report_mod.report(tmp_path, plots=False)
    before = open(md).read()
    assert before

    def broken(*a, **k):
        raise RuntimeError('formatting failed')
    monkeypatch.setattr(report_mod, 'markdown', broken)
    with pytest.raises(RuntimeError):
        report_mod.report(tmp_path, plots=False)
    assert open(md).read() == before
    assert sorted(f for f in os.listdir(tmp_path)    # .sweep.lock aside
                  if not f.startswith('.')) == ['candidates.csv', 'report.md', 'sweep.csv',
                                             'sweep.json', 'tune']


def test_report_of_nothing_usable(tmp_path):
    from gimmik.report import report
    _sweep(tmp_path, [])
    csv_path = tmp_path / 'sweep.csv'
    header = csv_path.read_text().splitlines()[0]
    csv_path.write_text(header + '\np1-quad-m0,4,4\n')
    with pytest.raises(ValueError, match='no usable rows.*line 2'):
        report(tmp_path, plots=False)
