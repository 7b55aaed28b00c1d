#!/usr/bin/env bash
# PyFR 3.1 `-b opencl` end to end on PoCL's CPU device: this package against upstream GiMMiK 4.0,
# steps timed inside each PyFR process (bench/pyfr/pyfr_steps.py --backend opencl), packages alternating.
#
#   bash bench/opencl/pyfr_opencl_e2e.sh ["hex:6:3"] [REPS]
#
# CASES: ETYPE:N:ORDER box meshes made by the pyfr-client's case maker (CLIENT, default
# .pyfr-client), one imported mesh per case shared by both packages so the solutions compare element
# by element.  Each package gets its own venv (/tmp/pyfr-cl-up, /tmp/pyfr-cl-ours) with PyFR 3.1,
# mpich, pyopencl and pocl-binary-distribution from the package index (WHEELS=DIR installs from a
# folder of wheels instead) and gimmik==4.0 or this project (`pip install .`, not editable, or the
# wheel OURS=WHL); each must pass `pip check`.  PyFR reaches PoCL through the OpenCL loader bundled in pyopencl's wheel.
# ICD=LIB (or ICD=nvidia: the driver's libnvidia-opencl.so.1) runs on that OpenCL driver instead,
# registered through an ICD file in a temporary folder (OCL_ICD_VENDORS), without PoCL; PLATFORM
# and DEVTYPE (default 0 and gpu there, PoCL's name and cpu here) choose PyFR's device.
# Writes OUT/NAME.csv (OUT default bench/results, NAME pyfr-opencl-pocl): per case and package the median
# ms per step (solver only, over REPS processes, and the spread), start-up, the microseconds of
# generated kernels a right-hand side, and the final solution's max abs / rel difference to
# upstream's.
set -u
CASES=${1:-"hex:6:3"}; REPS=${2:-3}
STEPS=${STEPS:-50}; SEGS=${SEGS:-2}
CLIENT=${CLIENT:-.pyfr-client}; OUTD=${OUT:-bench/results}; mkdir -p "$OUTD"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"; ROOT="$(dirname "$(dirname "$HERE")")"
TMPD=$(mktemp -d /tmp/pyfr-cl-run.XXXXXX)
export PYTHONUNBUFFERED=1
POCL=pocl-binary-distribution; SUF=""
PLATFORM=${PLATFORM:-portable computing language}; DEVTYPE=${DEVTYPE:-cpu}
if [ -n "${ICD:-}" ]; then
  if [ "$ICD" = nvidia ]; then
    ICD=$(ls /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so* /usr/lib64/libnvidia-opencl.so* 2>/dev/null | head -1)
    [ -n "$ICD" ] || { echo "libnvidia-opencl.so not found" >&2; exit 2; }
    PLATFORM=${PLATFORM/portable computing language/0}; DEVTYPE=gpu
  fi
  mkdir -p $TMPD/icd && realpath "$ICD" > $TMPD/icd/gimmik.icd
  export OCL_ICD_VENDORS=$TMPD/icd; POCL=""; SUF=-icd
fi

venv() {  # venv LABEL -> path of a PyFR venv holding that label's gimmik
  local v=/tmp/pyfr-cl-$1$SUF pkg=gimmik==4.0
  [ $1 = ours ] && pkg=${OURS:-$ROOT}
  if [ ! -x $v/bin/pyfr ]; then
    python3 -m venv $v
    $v/bin/pip install -q ${WHEELS:+--no-index --find-links "$WHEELS"} \
        pyfr==3.1 mpich pyopencl $POCL "$pkg" 2>&1 | grep -iv warning | tail -3 >&2
    $v/bin/pip check >&2 || { echo "pip check failed in $v" >&2; exit 2; }
  fi
  echo $v
}

clenv() {  # clenv VENV -> the environment that points PyFR's ctypes OpenCL at pyopencl's loader and PoCL
  local d; d=$($1/bin/python -c "import os, pyopencl; print(os.path.dirname(pyopencl.__file__))")
  echo PYOPENCL_HOME=$d LD_LIBRARY_PATH=$d/.libs:${LD_LIBRARY_PATH:-} \
       PYFR_OPENCL_LIBRARY_PATH=$(ls $d/.libs/libOpenCL*.so* | head -1)
}

for pkg in up ours; do venv $pkg >/dev/null; done
up=$(venv up)
for c in $CASES; do
  IFS=: read -r ET N P <<<"$c"
  M=$TMPD/mesh-$ET-$N-$P; mkdir -p $M
  $up/bin/python "$CLIENT/pyfr_case.py" $ET $N $P $M --steps 10 --dt 2e-4 | tail -1
  ( cd $M && $up/bin/pyfr import mesh.msh mesh.pyfrm >import.log 2>&1 ) || { echo "import failed"; tail -3 $M/import.log; exit 2; }
  # PoCL's CPU device (or the ICD's), in double precision
  printf '\n[backend-opencl]\nplatform-id = %s\ndevice-type = %s\ndevice-id = 0\n' "$PLATFORM" "$DEVTYPE" >> $M/case.ini
  for r in $(seq 1 $REPS); do
    for pkg in up ours; do
      v=$(venv $pkg); W=$TMPD/run-$pkg-$ET; rm -rf $W; mkdir -p $W
      ( cd $W && env $(clenv $v) XDG_CACHE_HOME=$TMPD/xdg-$pkg timeout 600 $v/bin/python \
          "$ROOT/bench/pyfr/pyfr_steps.py" $M/mesh.pyfrm $M/case.ini --backend opencl --label $pkg \
          --case "$ET-$N-p$P" --csv $TMPD/steps.csv --steps $STEPS --reps $SEGS --warm 2 \
          --soln $TMPD/soln-$ET-$N-$P-$pkg.npy ) 2>&1 | tail -1 | cut -c1-200
    done
  done
done
$up/bin/python - "$TMPD" "$OUTD/${NAME:-pyfr-opencl-pocl}.csv" <<'EOF'
import csv, statistics, sys
import numpy as np
tmpd, out = sys.argv[1:]
rows = list(csv.DictReader(open(f'{tmpd}/steps.csv')))
with open(out, 'w', newline='') as f:
    w = csv.writer(f)
    w.writerow(['case', 'package', 'gimmik', 'neles', 'steps', 'runs', 'step_ms_median',
                'step_ms_min', 'step_ms_max', 'start_s_median', 'gimmik_us_per_rhs',
                'max_abs_diff_vs_up', 'max_rel_diff_vs_up'])
    for case in dict.fromkeys(r['case'] for r in rows):
        et, n, p = case.split('-'); p = p[1:]
        ref = np.load(f'{tmpd}/soln-{et}-{n}-{p}-up.npy')
        for pkg in ('up', 'ours'):
            rs = [r for r in rows if r['case'] == case and r['label'] == pkg]
            ms = [float(x) for r in rs for x in r['step_ms_solver'].split()]
            x = np.load(f'{tmpd}/soln-{et}-{n}-{p}-{pkg}.npy')
            d = float(np.max(np.abs(x - ref)))
            w.writerow([case, pkg, rs[-1]['gimmik'], rs[-1]['neles'], rs[-1]['steps'], len(rs),
                        f'{statistics.median(ms):.3f}', f'{min(ms):.3f}', f'{max(ms):.3f}',
                        f"{statistics.median(float(r['start_s']) for r in rs):.2f}",
                        rs[-1]['gimmik_us_per_rhs'], f'{d:.3e}',
                        f'{d/float(np.max(np.abs(ref))):.3e}'])
print(open(out).read(), end='')
EOF
rm -rf "$TMPD"
