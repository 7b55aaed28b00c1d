"""Generate the PyFR operator suite, bench/operators/pyfr-ops.npz.

Run this with the Python of a throwaway virtual environment holding PyFR
(never the one gimmik is installed in: PyFR depends on upstream gimmik,
which would shadow ours):

    python3 -m venv .venv-pyfr
    .venv-pyfr/bin/pip install numpy
    .venv-pyfr/bin/pip install --no-deps pyfr==3.1
    .venv-pyfr/bin/python bench/operators/generate.py

Only ``pyfr.shapes`` and ``pyfr.inifile`` are imported, and they need
nothing but NumPy.  Each shape is built the way PyFR's solver builds it:
``Shape(None, cfg)`` from a config naming the solution and flux point sets
of PyFR's example configurations.  Each matrix is ``shape.opmat(expr)``,
exactly what ``BaseElements.opmat`` hands to the backend (and so to
GiMMiK); ``opmat`` is wrapped in PyFR's ``nputil.clean`` (tol 1e-10),
which flushes entries below 1e-10 in magnitude to exact zeros and coalesces
magnitudes that agree to a relative 1e-10 onto their median.  No further
cleaning is done here.

The output holds one float64 array per key ``p{order}-{element}-{matrix}``
(e.g. ``p3-hex-m460``) plus ``provenance``, a JSON string.
"""

import argparse
import json
import os
import platform
import sys

import numpy as np

ORDERS = range(1, 7)
ELEMENTS = ('quad', 'tri', 'hex', 'tet', 'pri', 'pyr')

# matrix key -> PyFR operator expression (as PyFR's elements spell it)
MATRICES = {
    'm0': 'M0',                # solution points -> flux points
    'm3': 'M3',                # flux points -> solution points (correction)
    'm6': 'M6',                # normal flux -> gradient correction
    'm132': 'M1 - M3*M2',      # divergence of the flux, fused
    'm460': 'M4 - M6*M0',      # gradient of the solution, fused
}

# The point sets of PyFR's example configurations
SOLN_PTS = {
    'quad': 'gauss-legendre',
    'tri': 'williams-shunn',
    'hex': 'gauss-legendre',
    'tet': 'shunn-ham',
    'pri': 'williams-shunn~gauss-legendre',
    'pyr': 'gauss-legendre',
}
FLUX_PTS = {
    'line': 'gauss-legendre',
    'tri': 'williams-shunn',
    'quad': 'gauss-legendre',
}

SHAPE_CLASSES = {
    'quad': 'QuadShape', 'tri': 'TriShape', 'hex': 'HexShape',
    'tet': 'TetShape', 'pri': 'PriShape', 'pyr': 'PyrShape',
}

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           'pyfr-ops.npz')


def make_config(order, element, soln_pts=None):
    from pyfr.inifile import Inifile

    cfg = Inifile()
    cfg.set('solver', 'order', order)
    cfg.set(f'solver-elements-{element}', 'soln-pts',
            (soln_pts or SOLN_PTS)[element])
    for face, rule in FLUX_PTS.items():
        cfg.set(f'solver-interfaces-{face}', 'flux-pts', rule)
    return cfg


def operators(order, element, soln_pts=None):
    """{matrix key: array} for one order and element type (soln_pts:
    {element: rule} replacing SOLN_PTS)."""
    import pyfr.shapes

    cls = getattr(pyfr.shapes, SHAPE_CLASSES[element])
    shape = cls(None, make_config(order, element, soln_pts))
    return {key: np.ascontiguousarray(shape.opmat(expr), dtype=np.float64)
            for key, expr in MATRICES.items()}


def provenance():
    import pyfr

    return {
        'generator': 'bench/operators/generate.py',
        'pyfr_version': pyfr.__version__,
        'numpy_version': np.__version__,
        'python_version': platform.python_version(),
        'construction': 'pyfr.shapes.<Element>Shape(None, cfg).opmat(expr)',
        'cleaning': "PyFR's own nputil.clean on opmat (tol 1e-10): entries "
                    "with |a| < 1e-10 set to exact zero, magnitudes equal "
                    "to a relative 1e-10 coalesced onto their median; "
                    "nothing else",
        'orders': list(ORDERS),
        'elements': list(ELEMENTS),
        'matrices': MATRICES,
        'soln_pts': SOLN_PTS,
        'flux_pts': FLUX_PTS,
        'anti_alias': 'none',
        'key_format': 'p{order}-{element}-{matrix}',
        'beta_in_pyfr': {'m0': 0, 'm3': 1, 'm6': 1, 'm132': 0, 'm460': 0},
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--out', default=DEFAULT_OUT,
                    help='output .npz (default: %(default)s)')
    ap.add_argument('--orders', default=None,
                    help='comma-separated orders (default 1-6)')
    ap.add_argument('--soln-pts', action='append', default=[],
                    metavar='ELEMENT=RULE',
                    help='solution point set of one element type instead of '
                    'the default (repeatable), e.g. tet=alpha-opt')
    args = ap.parse_args(argv)
    orders = ([int(o) for o in args.orders.split(',')] if args.orders
              else list(ORDERS))
    soln_pts = dict(SOLN_PTS)
    for item in args.soln_pts:
        ele, sep, rule = item.partition('=')
        if ele not in soln_pts or not sep or not rule:
            ap.error(f'--soln-pts wants ELEMENT=RULE with ELEMENT one of '
                     f'{", ".join(ELEMENTS)}: {item!r}')
        soln_pts[ele] = rule

    try:
        import pyfr.shapes  # noqa: F401
    except ImportError:
        sys.exit('pyfr is not importable: run this with the python of a '
                 'venv holding pyfr==3.1 (see the docstring)')

    arrays, missing = {}, []
    for order in orders:
        for element in ELEMENTS:
            try:
                ops = operators(order, element, soln_pts)
            except (KeyError, ValueError) as e:
                # PyFR has no rule of this order for the element's points
                missing.append(f'p{order}-{element} ({e})')
                print(f'p{order}-{element}: skipped, {e}', file=sys.stderr)
                continue
            for key, A in ops.items():
                name = f'p{order}-{element}-{key}'
                arrays[name] = A
                print(f'{name:16s} {A.shape[0]:5d} x {A.shape[1]:5d}  '
                      f'nnz {np.count_nonzero(A):7d}', file=sys.stderr)

    prov = provenance()
    prov.update(orders=orders, soln_pts=soln_pts, skipped=missing)
    prov['keys'] = sorted(arrays)
    arrays['provenance'] = np.array(json.dumps(prov, indent=1,
                                               sort_keys=True))
    np.savez_compressed(args.out, **arrays)
    print(f'wrote {len(arrays) - 1} operators to {args.out} '
          f'({os.path.getsize(args.out)/2**20:.2f} MiB)', file=sys.stderr)


if __name__ == '__main__':
    main()
