"""docs/ and bench/results/README.md stay true to bench/results: every
result file they name exists (current or archived), and every current
file in bench/results is in the index."""

import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, 'bench', 'results')
INDEX = os.path.join(RESULTS, 'README.md')
DOCS = sorted(glob.glob(os.path.join(ROOT, 'docs', '*.md'))) + \
    [os.path.join(ROOT, 'README.md'), INDEX]

# a file name of a recorded run, as the documents quote it
RESULT_NAME = re.compile(r'`(?:[\w./]*/)?((?:cuda|pyfr|hip|ncu|order|cost)-'
                         r'(?!ops)[^`\s/:]*)`')


def expand(name):
    """Names a quoted name stands for: {a,b} alternatives expanded; a
    name without an extension stands for any file it begins."""
    m = re.search(r'\{([^}]*)\}', name)
    if m:
        return [x for alt in m.group(1).split(',')
                for x in expand(name[:m.start()] + alt + name[m.end():])]
    if not re.search(r'\.(csv|log|txt|md)$|\*', name):
        name += '*'
    return [name]


def quoted_results(path):
    with open(path, encoding='utf-8') as f:
        return sorted(set(RESULT_NAME.findall(f.read())))


def exists(pattern):
    return any(glob.glob(os.path.join(d, pattern))
               for d in (RESULTS, os.path.join(RESULTS, 'archive')))


def test_expand():
    assert expand('a-{x,y}.csv') == ['a-x.csv', 'a-y.csv']
    assert expand('a-b') == ['a-b*'] and expand('a.log') == ['a.log']
    assert not exists('cuda-h100-no-such-run.csv')


@pytest.mark.parametrize('doc', DOCS, ids=os.path.basename)
def test_named_results_exist(doc):
    names = quoted_results(doc)
    missing = [n for n in names for p in expand(n) if not exists(p)]
    assert not missing


def test_docs_name_results():
    assert len(quoted_results(os.path.join(ROOT, 'docs',
                                           'journal.md'))) >= 10


def test_every_current_result_is_indexed():
    indexed = [p for n in quoted_results(INDEX) for p in expand(n)]
    current = [f for f in os.listdir(RESULTS)
               if os.path.isfile(os.path.join(RESULTS, f)) and
               f != 'README.md']
    assert current
    unindexed = [f for f in current
                 if not any(glob.fnmatch.fnmatch(f, p) or
                            glob.fnmatch.fnmatch(f, p.replace(
                                '.csv', '-candidates.csv'))
                            for p in indexed)]
    assert not unindexed
