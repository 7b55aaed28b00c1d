"""README.md stays true: every python block runs as it stands from the
repository root, the quick start's test command is the one CI runs, and
every file it links to exists."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, 'README.md')
TEST_COMMAND = 'python -m pytest -q -n 2 tests'


def readme():
    with open(README, encoding='utf-8') as f:
        return f.read()


def python_blocks(text):
    return re.findall(r'^```python\n(.*?)^```$', text, re.M | re.S)


def run_block(block, tmp_path):
    """Run a block in a fresh interpreter from the repository root, with
    this checkout's gimmik and a private cache."""
    env = dict(os.environ, GIMMIK_CACHE_DIR=str(tmp_path / 'cache'),
               PYTHONPATH=os.pathsep.join(
                   [ROOT] + [p for p in [os.environ.get('PYTHONPATH')]
                             if p]))
    return subprocess.run([sys.executable, '-c', block], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


BLOCKS = python_blocks(readme())


def test_readme_has_python_blocks():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize('block', BLOCKS,
                         ids=[f'block{i}' for i in range(len(BLOCKS))])
def test_readme_python_block_runs(block, tmp_path):
    r = run_block(block, tmp_path)
    assert r.returncode == 0, f'{block}\n{r.stderr}'


def test_a_failing_block_fails(tmp_path):
    r = run_block('import numpy as np\nassert np.allclose(1.0, 2.0)',
                  tmp_path)
    assert r.returncode != 0 and 'AssertionError' in r.stderr


def test_quick_start_test_command_is_what_ci_runs():
    with open(os.path.join(ROOT, '.ci', 'run')) as f:
        ci = f.read()
    assert TEST_COMMAND in readme()
    assert ci.rstrip().splitlines()[-1].strip() == TEST_COMMAND
    assert 'bash .ci/run' in readme()


def test_linked_files_exist():
    links = re.findall(r'\]\(([^)#\s]+)(?:#[^)]*)?\)', readme())
    assert links
    missing = [p for p in links if not p.startswith('http') and
               not os.path.exists(os.path.join(ROOT, p))]
    assert not missing


def slug(heading):
    """GitHub's anchor of a markdown heading."""
    s = re.sub(r'[^\w\- ]', '', heading.strip().lower())
    return s.replace(' ', '-')


def test_linked_anchors_exist():
    links = re.findall(r'\]\(([^)#\s]+)#([^)]*)\)', readme())
    assert links
    for path, anchor in links:
        with open(os.path.join(ROOT, path), encoding='utf-8') as f:
            heads = re.findall(r'^#+ (.*)$', f.read(), re.M)
        assert anchor in {slug(h) for h in heads}, (path, anchor)
