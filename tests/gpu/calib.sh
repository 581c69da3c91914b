#!/usr/bin/env bash
# tests/gpu/calib.sh: the device check of the calibrator's GPU and link sweeps,
# run after tests/gpu/run.sh has built the project on a machine with a CUDA GPU:
#   writescope calib --quick --only gpu    device copy, GPU attention, cuBLAS GEMM
#   writescope calib --quick --only link   H2D/D2H pinned and pageable 4 KB..256 MB,
#                                          H2D with D2H, H2D under CPU expert GEMMs
# into one database; prints the fits. WS_CALIB_FULL=1: the default sweeps instead of
# --quick (finer sizes, more repeats). Output in $OUT (else results/): gpu_calib.db,
# calib_gpu.json, calib_link.json, gpu_calib.log. Exit: 0 both stored, 77 no device,
# other: a sweep failed (its message is in the log). Budget: under 5 minutes.
set -u -o pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/after_build.sh calib.sh gpu_calib.log
rc=0
mode=--quick
[ "${WS_CALIB_FULL:-0}" = 1 ] && mode=
for scope in gpu link; do
    say "calib $mode --only $scope"
    if ! timeout 140 bin/writescope calib $mode --only "$scope" --db "$db" --json \
        >"$out_dir/calib_$scope.json" 2>>"$log"; then
        say "FAIL: calib --only $scope (log: $log)"
        tail -n 5 "$log"
        rc=1
    fi
done
bin/writescope calib show --db "$db" 2>&1 | tee -a "$log"
exit $rc
