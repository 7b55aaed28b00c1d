"""Our one-column OpenCL cstream and bstream at work-groups of 64-512
work-items beside upstream GiMMiK 4.0's (the driver picks its groups), each
launch's own time, interleaved rounds, medians: whether the work-group size
explains the small operators where PyFR's OpenCL walk picks slower kernels
(issue #48; bench/results/opencl-h200-blocks.csv).

    PYTHONPATH=. /tmp/clv/bin/python bench/opencl/opencl_blocks.py \\
        --icd nvidia --max-size 2400 --out "$OUT"

(the venv as in bench/opencl/opencl_h200.py)."""

import argparse
import csv
import dataclasses
import os
import statistics
import sys
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.opencl import opencl_h200 as oh  # noqa: E402

ROUNDS, LAUNCHES = 7, 100
STREAM_WARPS = (1, 2, 4, 8)
VARIANTS = ('cstream/width1', 'bstream/width1')


def contenders(dev, gen, up, A, beta, n, ld, aligne, kname):
    """{label: (src, meta)}: ours at each work-group, upstream's cstream and
    bstream."""
    from gimmik.targets import OPENCL
    out = {}
    try:
        for sw in STREAM_WARPS:
            gen.target = dataclasses.replace(OPENCL, stream_warps=sw)
            mm = gen(A, beta=beta, aligne=aligne, n=n, ldb=ld, ldc=ld)
            for src, meta in mm.kernels(np.float64, kname=kname,
                                        local_mem_size=dev.local_mem_size):
                if meta['variant'] in VARIANTS:
                    lws = meta['local_work_size'][0]
                    out[f"{meta['variant']}/b{lws}"] = (src, meta)
    finally:
        gen.target = OPENCL
    umm = up.OpenCLMatMul(A, beta=beta, aligne=aligne, n=n, ldb=ld, ldc=ld)
    for src, meta in umm.kernels(np.float64, kname=kname,
                                 local_mem_size=dev.local_mem_size):
        if meta.get('tplname') in ('cstream', 'bstream') and \
                meta.get('width', 1) == 1:
            out['up-' + meta['tplname']] = (src, meta)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--icd', default=None, metavar='LIB')
    ap.add_argument('--max-size', type=int, default=2400,
                    help='operators of at most this many entries (m x k)')
    ap.add_argument('--n', type=int, default=110080)
    ap.add_argument('--out', default=os.environ.get('OUT') or '.')
    ap.add_argument('--name', default='opencl-blocks')
    args = ap.parse_args(argv)
    if args.icd:
        oh.register_icd(args.icd)
    dev = oh.Device(None, 8)
    up = oh.load_up(os.path.join(ROOT, '.whl', 'pyfr',
                                 'gimmik-4.0-py3-none-any.whl'))
    from pyopencl import array as cla
    from gimmik.opencl import OpenCLMatMul
    ops, _ = oh.operators(['*'], None)
    ops = [o for o in ops if o[1].size <= args.max_size]
    n, aligne = args.n, dev.alignb // 8
    ld = -(-n // aligne)*aligne
    path = os.path.join(args.out, f'{args.name}.csv')
    with open(path, 'w', newline='') as f:
        w = csv.writer(f)
        w.writerow(['op', 'm', 'k', 'nnz', 'beta', 'contender', 'us',
                    'spread', 'device'])
        for name, A, beta in ops:
            m, k = A.shape
            rng = np.random.default_rng(zlib.crc32(name.encode()))
            b = cla.to_device(dev.queue, rng.standard_normal((k, ld)))
            c = cla.to_device(dev.queue, rng.standard_normal((m, ld)))
            conts = contenders(dev, OpenCLMatMul, up, A, beta, n, ld, aligne,
                               'kk')
            dev.build_ahead([s for s, _ in conts.values()])
            fns = {lab: (lambda kern=dev.kernel(src, 'kk'), meta=meta:
                         dev.launch(kern, meta, b.data, c.data, n))
                   for lab, (src, meta) in conts.items()}
            labs, times = list(fns), {lab: [] for lab in fns}
            for r in range(ROUNDS):
                for lab in labs[r % len(labs):] + labs[:r % len(labs)]:
                    times[lab].append(dev.mean_time(fns[lab], LAUNCHES))
            for lab, t in times.items():
                med = statistics.median(t)
                w.writerow([name, m, k, int(np.count_nonzero(A)), beta, lab,
                            f'{med*1e6:.3f}', f'{(max(t) - min(t))/med:.3f}',
                            dev.rt.device])
            f.flush()
            print(name, ' '.join(f'{lab}:{statistics.median(t)*1e6:.2f}'
                                 for lab, t in times.items()), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
