#!/usr/bin/env bash
# tests/gpu/run.sh: the GPU check of the CUDA kernels, for a machine with a CUDA GPU.
#   1. builds everything (make -j), including bin/libwritescope_cuda.so, against the
#      offline dependency bundle .gpu-deps when it is there (tests/gpu/README.md);
#   2. stops with exit 77 and one line if no usable CUDA device is found;
#   3. runs the tests that touch the device: gpu::every_kernel_vs_cpu_reference compares
#      every GPU kernel with its CPU reference (attention, split-K, merge, streaming,
#      D-window, GEMM), backend::* lists the device; a failure, or a GPU test skipped
#      although a device exists, fails (the whole suite: tests/gpu/device.sh, last);
#   4. runs the benchmark (build/tests/ws_gpu_bench): decode-attention HBM bandwidth as a
#      fraction of D2D memcpy for contexts >= 32K, H2D streaming as a fraction of a plain
#      pinned memcpy of the same size, D2H flush bandwidth, pageable against pinned H2D.
# Figures go to $OUT/gpu_figures.json when $OUT is set, else results/gpu_figures.json;
# logs beside them. Exit: 0 all passed and measured, 77 no device, non-zero otherwise.
# Budget: under 5 minutes (build 170 s, tests 90 s, benchmark 50 s at most).
set -u -o pipefail
cd "$(dirname "$0")/../.."
out_dir=${OUT:-results}
mkdir -p "$out_dir"
figures="$out_dir/gpu_figures.json"
log="$out_dir/gpu_run.log"
: >"$log"
say() { echo "run.sh: $*" | tee -a "$log"; }
started=$(date +%s)

# Build dependencies: that machine cannot download packages. With the offline bundle
# (`make gpu-bundle` on a machine with apt, carried as .gpu-deps/debs; tests/gpu/README.md)
# it is extracted (2 s) and the build uses it through DEPS_PREFIX; the binaries find its
# libraries through their RPATH, so LD_LIBRARY_PATH stays unset (set, it would also hand
# the bundle's libraries to the compiler and linker). Else the system's packages must do.
deps_probe() {
    local t rc
    t=$(mktemp -d)
    printf '%s\n' '#include <gsl/gsl_errno.h>' '#include <cblas.h>' '#include <sqlite3.h>' \
        '#include <jansson.h>' '#include <criterion/criterion.h>' 'Test(probe, links) {}' >"$t/p.c"
    "${CC:-cc}" "$t/p.c" -o "$t/p" -lcriterion -lgsl -lopenblas -lsqlite3 -ljansson -lm >"$t/log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || cat "$t/log" >>"$log"
    rm -rf "$t"
    return $rc
}
if [ -d .gpu-deps/debs ]; then
    if ! sh scripts/gpu_bundle.sh --extract >>"$log" 2>&1; then
        tail -n 5 "$log"
        say "FAIL: could not extract the dependency bundle .gpu-deps/debs (log: $log)"
        exit 1
    fi
fi
if [ -d .gpu-deps/prefix/usr/include ]; then
    export DEPS_PREFIX="$PWD/.gpu-deps/prefix"
    say "build deps: the bundle in .gpu-deps/prefix ($( (wc -l <.gpu-deps/prefix/BUNDLE) 2>/dev/null || echo "?") packages)"
elif ! deps_probe; then
    say "FAIL: missing build deps: run \`make gpu-bundle\` here and carry .gpu-deps/debs (log: $log)"
    exit 1
fi

jobs=$(nproc 2>/dev/null || echo 4)
say "building (make -j$jobs)"
if ! timeout 170 make -j"$jobs" all build/tests/ws_tests build/tests/ws_gpu_bench build/tests/ws_par_check build/tests/ws_sim_bench build/tests/ws_expert_bench >>"$log" 2>&1; then
    tail -n 30 "$log"
    say "FAIL: build failed (log: $log)"
    exit 1
fi
if [ ! -f bin/libwritescope_cuda.so ]; then
    say "no CUDA backend was built (nvcc not found): GPU checks not run"
    exit 77
fi
export WRITESCOPE_CUDA_LIB="$PWD/bin/libwritescope_cuda.so"
dev=$(bin/writescope device 2>&1)
echo "$dev" >>"$log"
if echo "$dev" | grep -q '^cuda  none'; then
    why=$(echo "$dev" | sed -n 's/^cuda  none: //p')
    # A GPU the driver lists but the backend cannot use (e.g. a driver older than the
    # CUDA runtime linked into the backend) is a failure, not "no device".
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
        say "FAIL: nvidia-smi lists a GPU but the CUDA backend cannot use it: $why"
        exit 1
    fi
    say "no CUDA device: $why; GPU checks not run"
    exit 77
fi
echo "$dev" | grep '^cuda' | tee -a "$log"

say "tests that touch the device (the GPU kernels against their CPU references)"
tests_out=""
tests_rc=0
for f in 'gpu/*' 'backend/*'; do
    o=$(WRITESCOPE_BIN="$PWD/bin/writescope" timeout 90 build/tests/ws_tests --filter "$f" 2>&1)
    rc=$?
    [ $rc -eq 0 ] || tests_rc=$rc
    tests_out="$tests_out$o
"
done
echo "$tests_out" >>"$log"
echo "$tests_out" | grep -E '^\[(SKIP|FAIL)|Synthesis|Assertion|error' | head -40
# A failed test does not stop the benchmark: one lent device run should bring back both.
fail=0
if [ $tests_rc -ne 0 ]; then
    say "FAIL: tests failed (exit $tests_rc; log: $log); the benchmark runs all the same"
    fail=1
fi
if echo "$tests_out" | grep -q '^\[SKIP\] gpu::'; then
    say "FAIL: a device is present but the GPU tests were skipped"
    fail=1
fi

say "benchmark"
timeout 50 build/tests/ws_gpu_bench "$figures" 2>&1 | tee -a "$log"
bench_rc=${PIPESTATUS[0]}
if [ "$bench_rc" -ne 0 ]; then
    say "FAIL: benchmark exited $bench_rc"
    fail=1
fi
say "done in $(( $(date +%s) - started )) s; figures: $figures"
exit $fail
