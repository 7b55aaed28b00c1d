#!/usr/bin/env bash
# PyFR 3.1 on NP MPI ranks (`mpiexec -n NP`, mpich from pip, one GPU a rank: PyFR's CUDA
# device-id defaults to the local rank), every rank of a run sharing ONE cache directory
# (XDG_CACHE_HOME: PyFR's kernel cache and gimmik's), this package against upstream GiMMiK 4.0,
# each package cold (empty cache) then warm (the same cache again).  Issue #50, item 1.
#
#   OUT=DIR bash bench/pyfr/pyfr_multirank.sh ["hex:20:4 pri:16:4"] ["ours up"]
#
# CASES: ETYPE:N:ORDER box meshes from the pyfr-client's case maker (CLIENT, default .pyfr-client),
# imported once and cut into NP slabs by bench/pyfr/slab_partition.py (PyFR's partitioners need
# METIS, SCOTCH or KaHIP, which the wheels do not bring); every package and phase reads that one
# .pyfrm, so each rank's solution compares element by element.  Each rank runs
# bench/pyfr/pyfr_steps.py (start-up, walk seconds, ms per step; rank 0 writes every rank's row).
# After each run bench/pyfr/cache_check.py checks the shared cache (no write left unrenamed, no
# torn cubin or entry, no key stored twice).  Venvs as bench/pyfr/pyfr_e2e.sh builds them (WHEELS,
# default .whl/pyfr; OURS, default .whl/ours/gimmik-*.whl; UP, upstream's wheel), or VENV_ours /
# VENV_up: an existing PyFR venv holding that package.
# BACKEND=opencl runs the same on an OpenCL device; with PoCL's CPU device (the venvs of
# bench/opencl/pyfr_opencl_e2e.sh, VENV_ours=/tmp/pyfr-cl-ours VENV_up=/tmp/pyfr-cl-up) it is the
# stand-in that runs without a GPU (PyFR 3.1's own two-rank OpenCL runs on PoCL came out NaN in
# most tries, with upstream's package too: there it checks the plumbing, not the numbers).
# DRY_RUN=1 prints the commands of the first case instead.
# Writes OUT/pyfr-multirank.csv (pyfr_steps.py's row per rank; label PKG/rRofNP, case
# CASE-PHASE), OUT/pyfr-multirank-cache.csv (cache_check.py's counts after each run),
# OUT/pyfr-multirank-compare.csv (per rank and phase: max |ours - up| / max |up|, and cold vs warm
# per package), and prints start-up per rank.  Exit status 1 when a solution differs by more than
# TOL (1e-12) or the cache check finds a problem; OUT/picks.tgz holds every walk PyFR timed.
set -u
CASES=${1:-"hex:20:4 pri:16:4"}; PKGS=${2:-"ours up"}
NP=${NP:-2}; STEPS=${STEPS:-100}; SEGS=${SEGS:-2}; TOL=${TOL:-1e-12}
BACKEND=${BACKEND:-cuda}; WHEELS=${WHEELS:-.whl/pyfr}; CLIENT=${CLIENT:-.pyfr-client}
OURS=${OURS:-$(ls .whl/ours/gimmik-*.whl 2>/dev/null | head -1)}
UP=${UP:-$(ls $WHEELS/gimmik-4.0-*.whl 2>/dev/null | head -1)}
OUTD=${OUT:-/tmp/out}; mkdir -p "$OUTD"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TMPD=${TMPD:-$(mktemp -d /tmp/pyfr-multirank.XXXXXX)}
export PYTHONUNBUFFERED=1
status=0

x() {  # run a command, or print it under DRY_RUN=1
  if [ "${DRY_RUN:-0}" = 1 ]; then echo "+ $*"; else "$@"; fi
}

if [ "$BACKEND" = cuda ] && [ "${DRY_RUN:-0}" != 1 ]; then
  . "$(dirname "${BASH_SOURCE[0]}")/cuda_libs.sh"
fi

venv() {  # venv LABEL -> a PyFR venv holding that label's package, with mpich
  local given; eval "given=\${VENV_$1:-}"
  if [ -n "$given" ]; then echo "$given"; return; fi
  local v=/tmp/pyfr-multirank-$1 whl=$UP
  [ $1 = ours ] && whl=$OURS
  if [ ! -x $v/bin/pyfr ] && [ "${DRY_RUN:-0}" != 1 ]; then
    python3 -m venv $v
    $v/bin/pip install -q --no-index --find-links "$WHEELS" pyfr==3.1 mpich "$whl" 2>&1 \
        | grep -iv warning | tail -3 >&2
    $v/bin/pip check >&2 || { echo "pip check failed in $v" >&2; exit 2; }
  fi
  echo $v
}

backend_env() {  # backend_env VENV -> NAME=VALUE words the backend needs
  [ "$BACKEND" = opencl ] || return 0
  local d; d=$($1/bin/python -c "import os, pyopencl; print(os.path.dirname(pyopencl.__file__))")
  echo PYOPENCL_HOME=$d LD_LIBRARY_PATH=$d/.libs:${LD_LIBRARY_PATH:-} \
       PYFR_OPENCL_LIBRARY_PATH=$(ls $d/.libs/libOpenCL*.so* | head -1)
}

first=$(venv ${PKGS%% *})
for c in $CASES; do
  IFS=: read -r ET N P <<<"$c"; case_=$ET-$N-p$P
  M=$TMPD/mesh-$ET-$N-$P
  if [ "${DRY_RUN:-0}" = 1 ] || [ ! -f $M/mesh.pyfrm ]; then
    x mkdir -p $M
    x $first/bin/python "$CLIENT/pyfr_case.py" $ET $N $P $M --steps 10 --dt 2e-4
    x $first/bin/pyfr import $M/mesh.msh $M/mesh.pyfrm
    x $first/bin/python "$HERE/slab_partition.py" $M/mesh.pyfrm $NP
    if [ "$BACKEND" = opencl ]; then   # PoCL's CPU device, as pyfr_opencl_e2e.sh
      x sh -c "printf '\n[backend-opencl]\nplatform-id = portable computing language\ndevice-type = cpu\ndevice-id = 0\n' >> $M/case.ini"
    fi
  fi
  for pkg in $PKGS; do
    v=$(venv $pkg); X=$TMPD/xdg-$pkg-$case_
    x rm -rf $X; x mkdir -p $X
    for phase in cold warm; do
      W=$TMPD/run-$pkg-$case_-$phase; x rm -rf $W; x mkdir -p $W
      # one shared cache: every rank gets the same XDG_CACHE_HOME (gimmik's cache under it)
      ( x cd $W && x env -u GIMMIK_CACHE_DIR $(backend_env $v) XDG_CACHE_HOME=$X timeout 900 \
          $v/bin/mpiexec -n $NP $v/bin/python "$HERE/pyfr_steps.py" $M/mesh.pyfrm $M/case.ini \
          --backend $BACKEND --label $pkg --case $case_-$phase --csv "$OUTD/pyfr-multirank.csv" \
          --steps $STEPS --reps $SEGS --warm 5 --soln $TMPD/soln-$case_-$pkg-$phase.npy \
          --picks "$OUTD/picks-multirank-$case_-$pkg-$phase.json" ) 2>&1 | tail -$((NP + 2)) | cut -c1-300
      x $first/bin/python "$HERE/cache_check.py" $X --label "$case_,$pkg,$phase" \
          --csv "$OUTD/pyfr-multirank-cache.csv" || status=1
    done
  done
  [ "${DRY_RUN:-0}" = 1 ] && break
  # each rank's solution: ours against up per phase, and cold against warm per package
  $first/bin/python - "$TMPD" "$case_" "$NP" "$TOL" "$OUTD/pyfr-multirank-compare.csv" $PKGS <<'EOF' || status=1
import csv, os, sys
import numpy as np
tmpd, case, nranks, tol, out, *pkgs = sys.argv[1:]
nranks, tol = int(nranks), float(tol)
def load(pkg, phase, r):
    p = f'{tmpd}/soln-{case}-{pkg}-{phase}.r{r}.npy'
    return np.load(p) if os.path.exists(p) else None
pairs = [(f'{a}-{ph}', f'up-{ph}', a, ph, 'up', ph)
         for a in pkgs if a != 'up' and 'up' in pkgs for ph in ('cold', 'warm')]
pairs += [(f'{a}-warm', f'{a}-cold', a, 'warm', a, 'cold') for a in pkgs]
new = not os.path.exists(out)
bad = 0
with open(out, 'a', newline='') as f:
    w = csv.writer(f)
    if new:
        w.writerow(['case', 'rank', 'a', 'b', 'values', 'max_abs', 'max_rel', 'ok'])
    for la, lb, pa, fa, pb, fb in pairs:
        for r in range(nranks):
            x, y = load(pa, fa, r), load(pb, fb, r)
            if x is None or y is None or x.shape != y.shape:
                w.writerow([case, r, la, lb, '', '', '', 'missing'])
                bad += 1
                continue
            d = float(np.max(np.abs(x - y)))
            rel = d/float(np.max(np.abs(y)))
            ok = bool(np.isfinite(x).all() and rel <= tol)
            bad += not ok
            w.writerow([case, r, la, lb, x.size, f'{d:.3e}', f'{rel:.3e}', ok])
            print(f'{case} rank {r}: {la} vs {lb}: max rel {rel:.3e}'
                  + ('' if ok else f'  ABOVE {tol:g}'))
sys.exit(1 if bad else 0)
EOF
done
[ "${DRY_RUN:-0}" = 1 ] && exit 0

# start-up per rank (s), the seconds PyFR spent in gimmik's walks, and the walk spread within a run
# (an upper bound on how long one rank could wait at PyFR's collectives for another's walk); the
# cache files each phase left (warm should add none)
$first/bin/python - "$OUTD/pyfr-multirank.csv" "$OUTD/pyfr-multirank-cache.csv" <<'EOF' || status=1
import csv, os, sys
steps, caches = sys.argv[1:]
if not os.path.exists(steps):
    sys.exit(f'no run finished: {steps} missing')
runs = {}
for r in csv.DictReader(open(steps)):
    pkg, _, rank = r['label'].partition('/')
    runs.setdefault((r['case'], pkg), []).append((rank, r))
for (case, pkg), rs in runs.items():
    walks = [float(r['gimmik_walk_s']) for _, r in rs]
    print(f'{case:<18} {pkg:<6} ' + '  '.join(
        f'{rank}: start {r["start_s"]} s walk {r["gimmik_walk_s"]} s '
        f'step {r["step_ms_solver"].split()[-1]} ms' for rank, r in rs)
        + f'  walk spread {max(walks) - min(walks):.2f} s')
files = {}
for r in csv.DictReader(open(caches)) if os.path.exists(caches) else ():
    case, pkg, phase = r['label'].split(',')
    files.setdefault((case, pkg), {})[phase] = int(r['pyfr']) + int(r['gimmik'])
grew = [k for k, v in files.items() if v.get('warm', 0) > v.get('cold', 0)]
for case, pkg in grew:
    print(f'{case} {pkg}: the warm run added cache entries '
          f'({files[case, pkg]["cold"]} -> {files[case, pkg]["warm"]})')
EOF
# the GPU machine sends back at most 8 files: the walks go back as one archive
(cd "$OUTD" && ls picks-*.json >/dev/null 2>&1 && tar czf picks.tgz picks-*.json && rm -f picks-*.json)
exit $status
