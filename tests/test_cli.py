"""The `gimmik` command's own behaviour: interrupts, a closed pipe, and
arguments refused by the parser."""

import os
import subprocess
import sys

import pytest

from gimmik.cli import main


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
