#!/usr/bin/env bash
# tests/gpu/check_bundle.sh: checks the offline dependency bundle (scripts/gpu_bundle.sh)
# on this machine as if on one without those packages and without apt: in a private mount
# namespace (unshare -m; root), every file of the system's GSL, SQLite, jansson, OpenBLAS,
# Criterion (+ libgit2, nanomsg) packages is covered by an empty file and apt-get/apt-cache
# are made unusable; then a scratch copy of the tracked tree plus .gpu-deps/debs is
# extracted offline, built with DEPS_PREFIX and tested. Whatever came from the system
# instead of the bundle fails loudly (an empty header or library). Also prints ldd's lines
# for those libraries and the size of what would travel. Development aid, not in make test.
# Usage: tests/gpu/check_bundle.sh [SCRATCH_DIR]   (default: a new folder under /tmp)
set -eu
cd "$(dirname "$0")/../.."
[ -d .gpu-deps/debs ] || { echo "check_bundle: no .gpu-deps/debs: run make gpu-bundle first" >&2; exit 1; }
scratch=${1:-$(mktemp -d /tmp/ws-bundle-check.XXXXXX)}
mkdir -p "$scratch"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$scratch"
mkdir -p "$scratch/.gpu-deps"
cp -a .gpu-deps/debs "$scratch/.gpu-deps/"
echo "check_bundle: scratch copy in $scratch"
echo "check_bundle: would travel: tracked files $(git ls-files -z | du -ch --files0-from=- | tail -1 | cut -f1), .gpu-deps/debs $(du -sh .gpu-deps/debs | cut -f1)"

# Not libjansson4: this machine's linker (binutils >= 2.40) loads it; ldd below still shows
# which copy the binaries use.
pkgs="libgsl27 libgslcblas0 libgsl-dev libsqlite3-0 libsqlite3-dev libjansson-dev
      libopenblas0 libopenblas0-pthread libopenblas-pthread-dev libopenblas-dev libcriterion3
      libcriterion-dev libgit2-1.5 libgit2-dev libnanomsg5 libnanomsg-dev libboxfort-dev"
hide=$(mktemp)
# shellcheck disable=SC2086 # split the package list
dpkg -L $pkgs 2>/dev/null | grep -E '^/usr/(include|lib)/' | while read -r f; do
    [ -f "$f" ] && [ ! -L "$f" ] && echo "$f"
done >"$hide"
echo "check_bundle: hiding $(wc -l <"$hide") system files of: $(echo "$pkgs" | tr -s ' \n' ' ')"

# shellcheck disable=SC2016 # the script below gets its values as arguments
unshare -m --propagation private bash -eu -c '
    while read -r f; do mount --bind /dev/null "$f"; done <"$1"
    for t in apt-get apt-cache apt; do
        p=$(command -v $t) && mount --bind /dev/null "$p"
    done
    cd "$2"
    scripts/gpu_bundle.sh --extract
    export DEPS_PREFIX=$PWD/.gpu-deps/prefix
    make -j"$(nproc)" >build.log 2>&1 || { tail -30 build.log; exit 1; }
    grep "^deps:" build.log
    echo "== ldd (gsl, openblas, sqlite3, jansson, criterion and their libraries)"
    for b in bin/writescope build/tests/ws_tests; do
        [ "$b" = build/tests/ws_tests ] && { make -j"$(nproc)" build/tests/ws_tests build/tests/ws_gpu_bench >>build.log 2>&1 || { tail -30 build.log; exit 1; }; }
        echo "-- $b ($(readelf -d "$b" | grep -o "R[UN]*PATH.*"))"
        ldd "$b" | grep -E "gsl|blas|sqlite|jansson|criterion|git2|nanomsg|gfortran|ssl|crypto|ssh|mbed|krb|ffi|pcre"
        if ldd "$b" | grep -E "gsl|blas|sqlite|jansson|criterion|git2|nanomsg" | grep -v "$DEPS_PREFIX"; then
            echo "check_bundle: FAIL: $b resolves a library outside the bundle"; exit 1
        fi
    done
    echo "== headers the build used from outside the bundle (none expected)"
    if cat $(find build -name "*.d") | tr " " "\n" | grep -E "gsl|cblas|openblas|sqlite3|jansson|criterion" | grep -v "$DEPS_PREFIX" | sort -u | grep .; then
        echo "check_bundle: FAIL: headers from the system"; exit 1
    fi
    echo "== make test"
    make test 2>&1 | tee test.log | grep -E "Synthesis|^\[(FAIL|SKIP)|deps:"
    grep -q "Synthesis.*Failing: 0 | Crashing: 0" test.log || { echo "check_bundle: FAIL: make test"; exit 1; }
    echo "check_bundle: OK"
' check_bundle "$hide" "$scratch"
