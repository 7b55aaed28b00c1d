"""gimmik.cli: the command line's refusals and progress bars, interrupts
and a closed pipe."""

import io
import os
import re
import subprocess
import sys

import pytest

import gimmik.operators  # also binds gimmik
from bad_inputs import BAD_CLI, BAD_CLI_NO_OPERATOR, GOOD_A
from conftest import A_SMALL
from gimmik.cli import main


# -- limits and progress ------------------------------------------------------
def test_huge_n_refused_clearly(tmp_path, capsys, fast_tune):
    mtx = tmp_path / 'op.mtx'
    gimmik.operators.write_mtx(mtx, A_SMALL)
    rc = main(['tune', str(mtx), '--platform', 'c', '--n', '2147483647'])
    err = capsys.readouterr().err
    assert rc == 2 and 'n = 2147483647' in err and 'GiB' in err
    assert 'Traceback' not in err


def test_progress_bar_on_a_terminal():
    from gimmik.progress import TuneBar

    class TTY(io.StringIO):
        def isatty(self):
            return True
    tty = TTY()
    bar = TuneBar(tty)
    bar.update(1, 3, 'cstream/width64')
    bar.update(2, 3, 'bstream/width64')
    bar.close()
    assert 'bstream/width64' in tty.getvalue() and '2/3' in tty.getvalue()
    plain = io.StringIO()
    bar = TuneBar(plain)
    bar.update(1, 3, 'x')
    bar.close()
    assert plain.getvalue() == ''


# -- bad input ----------------------------------------------------------------
def _cli(capsys, argv):
    """Run `gimmik argv`; returns (exit status, stderr)."""
    from gimmik.cli import main
    try:
        status = main(argv)
    except SystemExit as e:     # argparse's own rejections
        status = e.code
    return status, capsys.readouterr().err


@pytest.fixture
def mtx(tmp_path):
    """GOOD_A as a MatrixMarket file."""
    scipy_io = pytest.importorskip('scipy.io')
    path = tmp_path / 'good.mtx'
    scipy_io.mmwrite(str(path), GOOD_A)
    return str(path)


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('cmd,label,extra,word', BAD_CLI,
                         ids=[f'{r[0]}-{r[1]}' for r in BAD_CLI])
def test_cli_rejects(capsys, mtx, cmd, label, extra, word):
    pytest.importorskip(f'gimmik.{cmd}')
    pytest.importorskip('gimmik.operators')
    status, err = _cli(capsys, [cmd, mtx, *extra])
    assert status == 2, err
    assert re.search(rf'(?<![A-Za-z0-9_]){word}(?![A-Za-z0-9_])', err), err
    assert 'Traceback' not in err


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('cmd', ['isa', 'tune'])
@pytest.mark.parametrize('label,spec', [
    ('missing file', 'no/such/file.mtx'),
    ('npz without key', 'ops.npz'),
    ('unknown suffix', 'ops.txt'),
])
def test_cli_rejects_operator(capsys, cmd, label, spec):
    pytest.importorskip(f'gimmik.{cmd}')
    pytest.importorskip('gimmik.operators')
    status, err = _cli(capsys, [cmd, spec])
    assert status == 2, err
    assert 'Traceback' not in err


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('label,body', [
    ('all zero', '%%MatrixMarket matrix coordinate real general\n2 2 0\n'),
    ('NaN', '%%MatrixMarket matrix array real general\n1 1\nnan\n'),
    ('complex', '%%MatrixMarket matrix array complex general\n1 1\n1 2\n'),
])
def test_cli_rejects_bad_operator_file(capsys, tmp_path, label, body):
    pytest.importorskip('gimmik.isa')
    pytest.importorskip('gimmik.operators')
    path = tmp_path / 'bad.mtx'
    path.write_text(body)
    status, err = _cli(capsys, ['isa', str(path)])
    assert status == 2, err
    assert 'Traceback' not in err


@pytest.mark.usefixtures('no_source')
@pytest.mark.parametrize('cmd,label,argv,word', BAD_CLI_NO_OPERATOR,
                         ids=[f'{r[0]}-{r[1]}' for r in BAD_CLI_NO_OPERATOR])
def test_cli_rejects_without_operator(capsys, tmp_path, monkeypatch, cmd,
                                      label, argv, word):
    pytest.importorskip(f'gimmik.{cmd}')
    monkeypatch.chdir(tmp_path)
    status, err = _cli(capsys, [cmd, *argv])
    assert status == 2, err
    assert word in err, err
    assert 'Traceback' not in err


# -- interrupts, a closed pipe, --budget --------------------------------------
@pytest.mark.parametrize('command, target', [
    (['tune', 'x.npz:op'], 'gimmik.tune.run'),
    (['report', 'somewhere'], 'gimmik.report.run'),
])
def test_ctrl_c_is_one_line_and_130(command, target, monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt
    module, name = target.rsplit('.', 1)
    main_parser_funcs = __import__(module, fromlist=[name])
    monkeypatch.setattr(main_parser_funcs, name, interrupted)
    assert main(command) == 130
    out, err = capsys.readouterr()
    assert out == ''
    assert err == f'gimmik {command[0]}: interrupted\n'


def test_closed_pipe_is_quiet(tmp_path):
    """`gimmik ... | head -1`: the reader is gone before the output."""
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path),
           'GIMMIK_CACHE_DIR': str(tmp_path / 'cache')}
    p = subprocess.Popen([sys.executable, '-m', 'gimmik.cli', 'tune',
                          '--clear-cache'], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(120) == 0
    assert err == ''


@pytest.mark.parametrize('value', ['0', '-5', 'nan', 'inf', 'soon'])
def test_budget_must_be_positive_seconds(value, capsys):
    with pytest.raises(SystemExit) as e:
        main(['sweep', '--budget', value])
    assert e.value.code == 2
    assert 'positive number of seconds' in capsys.readouterr().err
