"""docs/ and bench/results/README.md stay true to bench/results: every
result file they name exists (current or archived), every current file in
bench/results is in the index, and a current claim (README.md, docs/ but
the dated journal, a comment in gimmik/, a current analysis in
bench/results) cites it by name; the rest goes to bench/results/archive."""

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
RESULT_NAME = re.compile(r'`(?:[\w./]*/)?((?:cuda|pyfr|hip|ncu|order|cost|'
                         r'opencl|metal)-(?!ops)[^`\s/:]*)`')
# ... and as a comment or a sentence names it, quoted or not
CITED_NAME = re.compile(r'(?<![\w-])((?:cuda|pyfr|hip|ncu|order|cost|opencl|metal)-'
                        r'(?!ops)[\w.{},-]*[\w}])')
# a run's files: a name without an extension stands for these
RUN_FILES = ('.csv', '-candidates.csv', '.log', '-compare.csv', '.md',
             '.txt')


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


def braces(name):
    """A name with {a,b} alternatives expanded."""
    m = re.search(r'\{([^}]*)\}', name)
    if not m:
        return [name]
    return [x for alt in m.group(1).split(',')
            for x in braces(name[:m.start()] + alt + name[m.end():])]


def cited_names(text, globs=None):
    """The result files a text names: exact names, or a run's stem for its
    files; a name followed by * is a glob, added to `globs`."""
    out = set()
    for m in CITED_NAME.finditer(text):
        if text[m.end():m.end() + 1] == '*':
            if globs is not None:
                rest = re.match(r'[\w.*-]*', text[m.end():]).group(0)
                globs.update(braces(m.group(1) + rest.rstrip('.')))
            continue
        for n in braces(m.group(1).rstrip('.')):
            if re.search(r'\.(csv|log|txt|md)$', n):
                out.add(n)
            else:
                out.update(n + suffix for suffix in RUN_FILES)
    return out


def current_claims():
    """The texts whose claims are current: README.md, docs/ but the dated
    journal, gimmik/'s sources and templates, the fixtures' README and
    the analyses in bench/results."""
    paths = [os.path.join(ROOT, 'README.md'),
             os.path.join(ROOT, 'tests', 'fixtures', 'README.md')]
    paths += [p for p in DOCS[:-2] if not p.endswith('journal.md')]
    for pattern in ('**/*.py', '**/*.mako'):
        paths += glob.glob(os.path.join(ROOT, 'gimmik', pattern),
                           recursive=True)
    paths += [p for p in glob.glob(os.path.join(RESULTS, '*.md'))
              if p != INDEX]
    for path in paths:
        with open(path, encoding='utf-8') as f:
            yield f.read()


def test_cited_names():
    globs = set()
    got = cited_names('as pyfr-walk-h100-stack.csv and (cuda-h100-x, '
                      'hip-a-{b,c}.md) show; and cuda-h100-context*.csv.',
                      globs)
    assert 'pyfr-walk-h100-stack.csv' in got
    assert {'cuda-h100-x.csv', 'cuda-h100-x-candidates.csv'} <= got
    assert {'hip-a-b.md', 'hip-a-c.md'} <= got
    assert not any('context' in n for n in got)
    assert globs == {'cuda-h100-context*.csv'}


def test_every_current_result_is_cited():
    cited, globs = set(), set()
    for text in current_claims():
        cited |= cited_names(text, globs)
    current = [f for f in os.listdir(RESULTS)
               if os.path.isfile(os.path.join(RESULTS, f)) and
               f != 'README.md']
    uncited = sorted(f for f in current if f not in cited and not any(
        glob.fnmatch.fnmatch(f, g) for g in globs))
    assert not uncited, 'cited by no current claim: move to archive/'
