"""The cost model and the order checked against recorded times; candidate
source hashes."""

import json
import os
import subprocess
import sys


def in_checkout(checkout, code, req):
    """The JSON `code` prints when run on `req` (JSON on stdin) by this
    interpreter with another revision's gimmik (directory `checkout`) first
    on the path; RuntimeError if that gimmik came from elsewhere."""
    checkout = os.path.abspath(checkout)
    res = subprocess.run([sys.executable, '-c', code],
                         input=json.dumps(req), capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=checkout),
                         cwd=checkout, check=True)
    got = json.loads(res.stdout)
    if not got['gimmik'].startswith(checkout + os.sep):
        raise RuntimeError(f'the before orders came from {got["gimmik"]}, '
                           f'not from {checkout}')
    return got
