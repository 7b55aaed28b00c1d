# Sourced by the PyFR bench scripts: points PyFR at the device's NVRTC and
# cuBLASLt (PYFR_*_LIBRARY_PATH) and the loader at their folder.
for lib in nvrtc cublasLt; do
  f=$(find / -name "lib$lib.so*" 2>/dev/null | sort | head -1)
  if [ -n "$f" ]; then
    export LD_LIBRARY_PATH="$(dirname "$f"):${LD_LIBRARY_PATH:-}"
    export PYFR_$(echo $lib | tr a-z A-Z)_LIBRARY_PATH=$f
  fi
done
