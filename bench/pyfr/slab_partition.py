"""Add an NP-way partitioning to a PyFR 3.1 mesh without METIS, SCOTCH or
KaHIP (the wheels PyFR installs from bring none of them, and the device
machines reach no package index): the elements, in the order PyFR's dual
graph numbers them, are cut into NP contiguous runs of equal weight.  On
the box meshes of the pyfr-client's case maker (cubes numbered layer by
layer) the runs are slabs, each with one or two neighbours.  PyFR does
the rest (its BasePartitioner: connectivity, regions, neighbours), so the
mesh runs with `mpiexec -n NP pyfr run` as one partitioned by METIS does.

Run it with the Python of a PyFR 3.1 venv:

    python bench/pyfr/slab_partition.py MESH.pyfrm NP
"""

import argparse
import sys

import numpy as np


def slab_parts(vwts, nparts):
    """Part of each graph vertex: contiguous runs of vertices whose
    summed weights (one column a constraint, summed) are as equal as the
    cut points allow."""
    w = np.asarray(vwts, dtype=float).reshape(len(vwts), -1).sum(axis=1)
    if nparts < 1 or nparts > len(w) or not (w > 0).all():
        raise ValueError(f'cannot cut {len(w)} elements into {nparts} parts')
    cum = np.cumsum(w) - w/2            # each vertex by its middle
    parts = np.minimum((cum*nparts/w.sum()).astype(int), nparts - 1)
    if len(np.unique(parts)) != nparts:
        raise ValueError(f'{nparts} slabs of equal weight leave one empty')
    return parts.astype(np.int32)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('mesh')
    ap.add_argument('np', type=int)
    ap.add_argument('--name', default=None,
                    help='partitioning name (default: NP, as pyfr names it)')
    args = ap.parse_args(argv)

    import h5py
    from pyfr.partitioners.base import BasePartitioner, write_partitioning
    from pyfr.progress import NullProgressSequence

    class SlabPartitioner(BasePartitioner):
        name = 'slab'
        has_part_weights = False
        has_multiple_constraints = True
        int_opts, enum_opts, dflt_opts = set(), {}, {}

        def _partition_graph(self, graph, partwts):
            return slab_parts(graph.vwts, len(partwts))

    with h5py.File(args.mesh, 'r+') as mesh:
        etypes = list(mesh['eles'])
        ewts = {etypes[0]: 1} if len(etypes) == 1 else None
        part = SlabPartitioner([1]*args.np, ewts)
        pinfo = part.partition(mesh, NullProgressSequence())
        write_partitioning(mesh, args.name or str(args.np), pinfo)
    print(f'{args.mesh}: partitioning {args.name or args.np} of {args.np} '
          'slabs')
    return 0


if __name__ == '__main__':
    sys.exit(main())
