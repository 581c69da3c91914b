#!/usr/bin/env bash
# tests/gpu/live.sh: the live runtime with its GPU half on the CUDA device, run after
# tests/gpu/run.sh (the build) and tests/gpu/calib.sh (the GPU and link fits) on the same
# machine, into the same database:
#   1. writescope calib --quick --only cpu      this host's CPU fits, so that run and
#                                               validate read this machine's profile;
#   2. writescope run --gpu cuda:h200 --verify  per model: every layer's merged CPU + GPU
#                                               attention against full attention (static
#                                               r = 0.5, so both halves hold KV);
#   3. writescope validate --gpu cuda:h200      per model: the runtime (GPU half measured)
#                                               against the simulator, --repeat 2.
# Models: Qwen3-30B-A3B (GQA) and DeepSeek-V2-Lite (MLA), 2 layers, batch 4 x 16K prompt.
# WS_LIVE_RUNS=0 leaves out step 2 (the verified runs: 1-2 minutes each, the reference
# attention on the CPU); WS_VALIDATE_REPEAT=N sets step 3's --repeat (2).
# Output in $OUT (else results/): live_*.txt, live.log; the records in gpu_calib.db.
# Exit: 0 all ran and verified, 77 no device, 1 something failed (the log says which).
# Budget: under 4 minutes on 16 cores.
set -u -o pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/after_build.sh live.sh live.log
rc=0
# step NAME TIMEOUT ARGS...: runs writescope ARGS, its output to live_NAME.txt (the
# database keeps every record: the runs' steps and layers, the validation's points).
step() {
    local name=$1 limit=$2 t0 r
    shift 2
    say "$name: writescope $*"
    t0=$(date +%s)
    timeout "$limit" bin/writescope "$@" >"$out_dir/live_$name.txt" 2>>"$log"
    r=$?
    if [ $r -ne 0 ]; then
        say "FAIL: $name (exit $r; log: $log)"
        tail -n 3 "$log"
        rc=1
    fi
    say "$name: $(($(date +%s) - t0)) s"
}
step calib_cpu 150 calib --quick --only cpu --db "$db"
w=(--batch 4 --prompt 16384 --output 16 --layers 2 --gpu cuda:h200 --db "$db")
if [ "${WS_LIVE_RUNS:-1}" != 0 ]; then
    for m in qwen3-30b-a3b deepseek-v2-lite; do
        step "run_$m" 120 run --model "$m" "${w[@]}" --policy static --r 0.5 --verify
    done
fi
for m in qwen3-30b-a3b deepseek-v2-lite; do
    step "validate_$m" 180 validate --model "$m" "${w[@]}" --repeat "${WS_VALIDATE_REPEAT:-2}"
done
exit $rc
