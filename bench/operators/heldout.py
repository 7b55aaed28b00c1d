"""A held-out-style suite: every dense operator (density > 0.5) of orders
3-6 of pyfr-ops.npz kept at its largest |values| on a quarter of its
entries (ties at the cut go), named `{op}-d25`: the sparsity other point
sets give PyFR's dense operators (p6-pyr-m0-d25 is 161 x 140 at 25 %).

    python3 bench/operators/heldout.py OUT.npz [--keep 0.25]
"""

import argparse

import numpy as np

from gimmik.operators import suite


def thin(A, keep):
    """A with all but its largest-magnitude `keep` fraction of entries
    zeroed."""
    mags = np.sort(np.abs(A[A != 0]))
    cut = mags[max(len(mags) - int(keep*A.size) - 1, 0)]
    return np.where(np.abs(A) > cut, A, 0.0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('out', help='the .npz to write')
    ap.add_argument('--keep', type=float, default=0.25,
                    help='fraction of entries kept (default 0.25)')
    args = ap.parse_args(argv)
    tag = f'-d{round(100*args.keep)}'
    out = {name + tag: thin(A, args.keep)
           for name, A in suite().items()
           if np.count_nonzero(A) > 0.5*A.size and int(name[1]) >= 3}
    np.savez_compressed(args.out, **out)
    print(f'{len(out)} operators in {args.out}')


if __name__ == '__main__':
    main()
