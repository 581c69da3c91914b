#!/usr/bin/env bash
# tests/gpu/device.sh: everything a lent GPU machine runs, as one call within a budget:
#   run.sh    build, the GPU kernels against their CPU references, the benchmark
#   calib.sh  the calibrator's GPU and link sweeps
#   live.sh   this host's CPU fits, run --gpu cuda --verify and validate --gpu cuda
#   suite     the whole test suite on this machine's CPU and GPU, if time is left
# Each stage gets what is left of the budget (a stage that cannot start in time is
# skipped, and says so); the stages' files are packed into $OUT/gpu_check.tar.gz (a call
# brings back at most 8 files) with the figures and the summary also beside it.
# Usage: tests/gpu/device.sh [BUDGET_S]  (default 480; give the call ~40 s more); the
# stages' variables pass through (WS_CALIB_FULL, WS_LIVE_RUNS, WS_VALIDATE_REPEAT).
# Exit: 0 every stage passed, 77 no device, 1 otherwise.
set -u -o pipefail
cd "$(dirname "$0")/../.."
final=${OUT:-results}
mkdir -p "$final"
stage=$(mktemp -d /tmp/ws-device.XXXXXX)
budget=${1:-480}
start=$(date +%s)
summary="$stage/summary.txt"
left() { echo $((budget - ($(date +%s) - start))); }
say() { echo "device.sh: $*" | tee -a "$summary"; }
rc=0
# stage NAME MAX_S MIN_S CMD...: runs CMD with OUT=$stage for at most MAX_S, or what is
# left of the budget less 20 s for packing; skipped when that is under MIN_S.
stage() {
    local name=$1 max=$2 min=$3 lim t0 r
    shift 3
    lim=$(($(left) - 20))
    [ "$lim" -gt "$max" ] && lim=$max
    if [ "$lim" -lt "$min" ]; then
        say "$name: SKIPPED ($(left) s of the budget left)"
        rc=1
        return 1
    fi
    t0=$(date +%s)
    OUT="$stage" timeout "$lim" "$@"
    r=$?
    say "$name: exit $r in $(($(date +%s) - t0)) s (limit $lim s)"
    [ $r -eq 0 ] || rc=1
    return $r
}
{
    echo "== $(date -u +%FT%TZ)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,pcie.link.gen.max,pcie.link.width.max --format=csv 2>&1
    lscpu 2>&1 | grep -E 'Model name|^CPU\(s\)|Socket|NUMA node\(|Flags' | sed 's/^Flags: */Flags: /' | cut -c1-2000
    free -g 2>&1 | head -2
} >"$stage/machine.txt"
head -4 "$stage/machine.txt"

stage run.sh 300 60 bash tests/gpu/run.sh
r=$?
if [ $r -eq 77 ]; then
    say "no usable CUDA device: nothing more to run"
    rc=77
elif [ -x bin/writescope ] && [ -f bin/libwritescope_cuda.so ]; then
    stage calib.sh 200 40 bash tests/gpu/calib.sh
    stage live.sh 300 60 bash tests/gpu/live.sh
    stage suite 150 60 env WRITESCOPE_BIN="$PWD/bin/writescope" \
        WRITESCOPE_CUDA_LIB="$PWD/bin/libwritescope_cuda.so" \
        WRITESCOPE_PAR_CHECK="$PWD/build/tests/ws_par_check" \
        build/tests/ws_tests --jobs "$(nproc)" >"$stage/suite.log" 2>&1
    grep -E '^\[(FAIL|SKIP)\]|Synthesis' "$stage/suite.log" | head -30
fi
say "done in $(($(date +%s) - start)) s of $budget, exit $rc"
for f in gpu_figures.json summary.txt; do
    [ -f "$stage/$f" ] && cp "$stage/$f" "$final/"
done
tar -czf "$final/gpu_check.tar.gz" -C "$stage" .
ls -l "$final"
exit $rc
