#!/usr/bin/env bash
# PyFR 3.1 end to end on an NVIDIA GPU: this package against upstream GiMMiK 4.0, steps timed
# inside each PyFR process (bench/pyfr/pyfr_steps.py), packages alternating within one command.
#
#   OUT=DIR bash bench/pyfr/pyfr_e2e.sh "hex:28:4 pri:22:4" "ours up" [REPS]
#
# CASES: ETYPE:N:ORDER (box meshes of N^3 cubes made by the pyfr-client's pyfr_case.py, one
# imported mesh per case shared by every package, so solutions compare element by element).
# PACKAGES: labels run in this order each repetition: ours, up, and ours-relax / up-relax (PyFR's
# dense filter off: every constant operator goes to the generator); LABEL+CUT (e.g. ours+uncut,
# ours-relax+wider) runs LABEL's package with a cut of bench/pyfr/cuts.py applied to its offer
# (pyfr_steps.py --cut), to measure it before the generator changes.  The first process of each
# (case, package) starts with an empty PyFR kernel cache (cold start-up); later ones reuse it.
# Needs the wheels of PyFR 3.1 and its dependencies and of this package's (WHEELS, default
# .whl/pyfr, holding gimmik-4.0 and tqdm: the pyfr-client's download command with tqdm added),
# this package's wheel (OURS, default .whl/ours/gimmik-*.whl) and the client's case maker
# (CLIENT, default .pyfr-client).  Each venv gets PyFR and its gimmik in one `pip install`, as a
# user installs them (no --no-deps), and must pass `pip check`.  Writes DIR/pyfr-e2e.csv, DIR/compare.csv (each final
# solution against upstream's as shipped), DIR/picks.tgz (picks-*.json: every walk PyFR timed).
set -u
CASES=${1:?cases}; PKGS=${2:-"ours up"}; REPS=${3:-2}
STEPS=${STEPS:-200}; SEGS=${SEGS:-3}
WHEELS=${WHEELS:-.whl/pyfr}; CLIENT=${CLIENT:-.pyfr-client}
OURS=${OURS:-$(ls .whl/ours/gimmik-*.whl | head -1)}; UP=${UP:-$(ls $WHEELS/gimmik-4.0-*.whl)}
OUTD=${OUT:-/tmp/out}; mkdir -p "$OUTD"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PYTHONUNBUFFERED=1

. "$HERE/cuda_libs.sh"

venv() {  # venv LABEL[+CUT] -> path of a PyFR venv holding that label's package
  local label=${1%%+*}; local v=/tmp/pyfr-e2e-$label whl=$UP
  case $label in ours*) whl=$OURS ;; esac
  if [ ! -x $v/bin/pyfr ]; then
    python3 -m venv $v
    # one command, as a user installs it: pip resolves PyFR's gimmik>=3.2.1
    # against the wheel named (ours: 4.0+<release>; upstream: 4.0)
    $v/bin/pip install -q --no-index --find-links "$WHEELS" \
        pyfr==3.1 mpich "$whl" 2>&1 | grep -iv warning | tail -3 >&2
    $v/bin/pip check >&2 || { echo "pip check failed in $v" >&2; exit 2; }
    local prov; prov=$($v/bin/python -c "import pyfr.backends.cuda.gimmik as g; print(g.__file__)")
    case $label in *-relax) sed -i 's/if nuq > 28 and nnz/if False and nnz/' "$prov" ;; esac
    grep -q "nnz / arr.size > 0.15" "$prov" || { echo "unexpected PyFR provider: $prov" >&2; exit 2; }
  fi
  echo $v
}

for pkg in $PKGS; do venv $pkg >/dev/null; done
first=$(venv ${PKGS%% *})
for c in $CASES; do
  IFS=: read -r ET N P <<<"$c"
  M=/tmp/pyfr-mesh/$ET-$N-$P
  if [ ! -f $M/mesh.pyfrm ]; then
    rm -rf $M
    $first/bin/python "$CLIENT/pyfr_case.py" $ET $N $P $M --steps 10 --dt 2e-4 | tail -1
    ( cd $M && $first/bin/pyfr import mesh.msh mesh.pyfrm >import.log 2>&1 ) || { echo "import failed"; tail -3 $M/import.log; }
  fi
  for r in $(seq 1 $REPS); do
    for pkg in $PKGS; do
      v=$(venv $pkg); x=/tmp/xdg-$pkg-$ET-$N-$P; cache=warm
      if [ $r = 1 ]; then rm -rf $x; cache=cold; fi
      mkdir -p /tmp/pyfr-soln; W=/tmp/pyfr-run-$pkg-$ET; rm -rf $W; mkdir -p $W
      ( cd $W && XDG_CACHE_HOME=$x timeout 500 $v/bin/python "$HERE/pyfr_steps.py" \
          $M/mesh.pyfrm $M/case.ini --label $pkg --case "$ET-$N-p$P-$cache" --csv "$OUTD/pyfr-e2e.csv" \
          --steps $STEPS --reps $SEGS --soln /tmp/pyfr-soln/$ET-$N-$P-$pkg.npy \
          $(case $pkg in *+*) echo --cut "${pkg#*+}" ;; esac) \
          $([ $r = 1 ] && echo --picks "$OUTD/picks-$ET-$N-p$P-$pkg.json") ) 2>&1 | tail -2
    done
  done
  for pkg in $PKGS; do
    [ $pkg = up ] && continue
    [ -f /tmp/pyfr-soln/$ET-$N-$P-up.npy ] || continue
    d=$($first/bin/python "$HERE/pyfr_steps.py" --compare /tmp/pyfr-soln/$ET-$N-$P-$pkg.npy /tmp/pyfr-soln/$ET-$N-$P-up.npy)
    echo "$ET-$N-p$P,$pkg,up,$d" | tee -a "$OUTD/compare.csv"
  done
done
# the GPU machine sends back at most 8 files: the walks go back as one archive
(cd "$OUTD" && ls picks-*.json >/dev/null 2>&1 && tar czf picks.tgz picks-*.json && rm -f picks-*.json)
