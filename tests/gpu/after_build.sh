# tests/gpu/after_build.sh: sourced by the device scripts that run after tests/gpu/run.sh
# built the project (calib.sh, live.sh): sets out_dir ($OUT, else results/), db (the
# shared gpu_calib.db) and log ($out_dir/$1), defines say, and exits 1 when the build is
# missing or 77 when the CUDA backend finds no device.
# Usage: . tests/gpu/after_build.sh NAME.sh LOGFILE
out_dir=${OUT:-results}
mkdir -p "$out_dir"
db="$out_dir/gpu_calib.db"
log="$out_dir/$2"
: >"$log"
ws_script=$1
say() { echo "$ws_script: $*" | tee -a "$log"; }
if [ ! -x bin/writescope ] || [ ! -f bin/libwritescope_cuda.so ]; then
    say "FAIL: build first (bash tests/gpu/run.sh)"
    exit 1
fi
export WRITESCOPE_CUDA_LIB="$PWD/bin/libwritescope_cuda.so"
if bin/writescope device 2>&1 | grep -q '^cuda  none'; then
    say "no CUDA device: $(bin/writescope device 2>&1 | sed -n 's/^cuda  none: //p')"
    exit 77
fi
