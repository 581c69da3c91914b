#!/bin/sh
# Runs libFuzzer targets for a given time each: scripts/fuzz.sh BUILD_DIR SECONDS NAME...
# (called by `make fuzz` and `make fuzz-smoke`; docs/fuzzing.md).
#
# Target NAME is BUILD_DIR/fuzz_NAME. It runs on a copy of its seed corpus fuzz/corpus/NAME/
# in BUILD_DIR/run/NAME/corpus (the committed corpus is never written), with the dictionary
# fuzz/NAME.dict when there is one; what the sanitizers or libFuzzer report (crash, leak,
# undefined behaviour, timeout, out of memory) is saved under BUILD_DIR/artifacts/NAME/ and
# the full log is BUILD_DIR/run/NAME/log. Prints one line per target: executions and
# findings, then "fuzz: N passed, N failed" (a target passes when it ran its time without a
# finding). Exits 1 when any target has a finding or fails to run.
# Environment: FUZZ_TIMEOUT (seconds one input may take, default 10), FUZZ_RSS_MB (memory
# cap, default 2048), FUZZ_ARGS (more libFuzzer flags, e.g. -seed=1 or -use_value_profile=1).
set -u
[ $# -ge 2 ] || { echo "usage: $0 BUILD_DIR SECONDS NAME..." >&2; exit 2; }
build=$1
secs=$2
shift 2
[ $# -gt 0 ] || { echo "fuzz: no targets (fuzz/fuzz_<name>.c)" >&2; exit 2; }
status=0
passed=0
failed=0
for name in "$@"; do
    bin=$build/fuzz_$name
    work=$build/run/$name
    art=$build/artifacts/$name
    rm -rf "$work"
    mkdir -p "$work/corpus" "$art"
    if [ -d "fuzz/corpus/$name" ]; then
        cp -R "fuzz/corpus/$name/." "$work/corpus/"
    else
        echo "fuzz $name: no seed corpus fuzz/corpus/$name/ (starting from nothing)" >&2
    fi
    set --
    [ -f "fuzz/$name.dict" ] && set -- "-dict=fuzz/$name.dict"
    touch "$work/start"
    t0=$(date +%s)
    # shellcheck disable=SC2086
    "$bin" -max_total_time="$secs" -timeout="${FUZZ_TIMEOUT:-10}" \
        -rss_limit_mb="${FUZZ_RSS_MB:-2048}" -print_final_stats=1 \
        -artifact_prefix="$art/" "$@" ${FUZZ_ARGS:-} "$work/corpus" >"$work/log" 2>&1
    rc=$?
    took=$(($(date +%s) - t0))
    find "$art" -type f -newer "$work/start" >"$work/findings"
    found=$(wc -l <"$work/findings")
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
    [ -n "$execs" ] || execs=$(sed -n 's/^#\([0-9][0-9]*\).*/\1/p' "$work/log" | tail -n 1) # -fork
    if [ "$rc" -ne 0 ] && [ "$found" -eq 0 ]; then
        echo "fuzz $name: FAILED to run (exit $rc), log: $work/log" >&2
        tail -n 5 "$work/log" >&2
        status=1
        failed=$((failed + 1))
        continue
    fi
    echo "fuzz $name: ${execs:-?} executions in $took s, $found finding(s)"
    if [ "$found" -eq 0 ]; then
        passed=$((passed + 1))
    else
        status=1
        failed=$((failed + 1))
        grep -E '^(SUMMARY|==[0-9]+== ?ERROR)|runtime error|ALARM' "$work/log" | head -n 3 | sed 's/^/    /'
        sed 's/^/    /' "$work/findings"
        echo "    reproduce: $bin FILE; log: $work/log"
    fi
done
echo "fuzz: $passed passed, $failed failed"
exit $status
