#!/bin/sh
# Installs the Debian packages WriteScope builds and tests against, only those missing.
# Called by `make deps` (and so by `make` and `make test`); does nothing when all are present.
# `deps.sh fuzz` (make fuzz, make fuzz-smoke) adds clang and its libFuzzer runtime.
set -eu
# With DEPS_PREFIX (an offline bundle, scripts/gpu_bundle.sh) the Makefile builds against
# that folder: nothing to install.
if [ -n "${DEPS_PREFIX:-}" ]; then
    if [ ! -d "$DEPS_PREFIX/usr/include" ]; then
        echo "deps: DEPS_PREFIX=$DEPS_PREFIX holds no usr/include (make gpu-bundle, or gpu_bundle.sh --extract)" >&2
        exit 1
    fi
    echo "deps: using DEPS_PREFIX=$DEPS_PREFIX (no apt-get)" >&2
    exit 0
fi
PKGS="build-essential pkg-config libgsl-dev libsqlite3-dev sqlite3 libjansson-dev nettle-dev libopenblas-dev libdnnl-dev gnuplot-nox libcriterion-dev openmpi-bin libopenmpi-dev"
[ "${1:-}" = fuzz ] && PKGS="$PKGS clang libclang-rt-14-dev"
missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing" >&2
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "deps: missing packages:$missing (run as root or install them with apt-get)" >&2; exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2 || echo "deps: apt-get update failed; trying the cached package lists" >&2
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >&2
