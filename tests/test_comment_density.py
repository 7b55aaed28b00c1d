"""Comments in gimmik/ say why in one line and cite bench/results by file
instead of restating measurements (issue #49 item 5): comment and
docstring lines per code line stay <= 0.25 for the package."""

import ast
import glob
import io
import os
import tokenize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT = 0.25


def docstring_lines(tree):
    """Line numbers inside a module, class or function docstring."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and \
                    isinstance(first.value, ast.Constant) and \
                    isinstance(first.value.value, str):
                out.update(range(first.lineno, first.end_lineno + 1))
    return out


def count(source):
    """(comment lines, code lines) of a Python source: a comment line is
    a `#` line or a non-blank line of a docstring; code lines are the
    other non-blank lines."""
    lines = source.splitlines()
    comments = docstring_lines(ast.parse(source))
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        row = tok.start[0]
        if tok.type == tokenize.COMMENT and \
                not lines[row - 1][:tok.start[1]].strip():
            comments.add(row)
    nonblank = {i for i, s in enumerate(lines, 1) if s.strip()}
    comments &= nonblank
    return len(comments), len(nonblank - comments)


def package_density():
    com = code = 0
    for path in glob.glob(os.path.join(ROOT, 'gimmik', '**', '*.py'),
                          recursive=True):
        with open(path, encoding='utf-8') as f:
            c, k = count(f.read())
        com, code = com + c, code + k
    return com, code


def test_count():
    src = ('"""Module\n\ndoc."""\n# a comment\nx = 1  # inline\n\n'
           's = """\n# not a comment\n"""\n\n'
           'def f():\n    """Doc."""\n    # why\n    return x\n')
    # 3 docstring lines + 2 `#` lines; the string's lines and
    # the inline comment's line are code
    assert count(src) == (5, 6)


def test_package_density():
    com, code = package_density()
    assert code > 1000
    assert com / code <= LIMIT, \
        f'{com} comment lines / {code} code lines = {com / code:.3f}'
