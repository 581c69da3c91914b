#!/bin/sh
# Offline build-dependency bundle for a machine where apt cannot download anything (the
# GPU machine of tests/gpu/run.sh; see tests/gpu/README.md).
#   gpu_bundle.sh            (`make gpu-bundle`, on a Debian/Ubuntu amd64 machine with apt)
#       downloads into .gpu-deps/debs/ the .deb files of GSL, SQLite, jansson, OpenBLAS
#       (pthread variant) and Criterion, headers and the shared libraries they load, then
#       extracts them as below. .gpu-deps/debs is what travels (about 20 MiB).
#   gpu_bundle.sh --extract  (offline; tests/gpu/run.sh does it when the prefix is missing)
#       extracts .gpu-deps/debs/*.deb into the prefix .gpu-deps/prefix (dpkg -x), drops what
#       the build does not use (docs, static libraries, LAPACK), and adds the symlinks that
#       the OpenBLAS alternatives would make. Build with `make DEPS_PREFIX=$PWD/.gpu-deps/prefix`.
# Not bundled: what every Linux with a C compiler has (glibc, gcc's runtime libraries,
# zlib), gnuplot (plots are not made there), and the -dev packages that libcriterion-dev
# needs only for static linking and pkg-config.
set -eu
cd "$(dirname "$0")/.."
dir=.gpu-deps
debs=$dir/debs
root=$dir/prefix

# The packages the build needs; their dependencies are added below.
ROOTS="libgsl-dev libsqlite3-dev libjansson-dev nettle-dev libopenblas-dev libopenblas-pthread-dev libdnnl-dev libcriterion-dev"
SKIP=" libc6 libc6-dev libc-dev-bin libcrypt1 libcrypt-dev linux-libc-dev libnsl-dev libtirpc-dev
 libgcc-s1 libstdc++6 gcc-12-base gcc-13-base gcc-14-base zlib1g zlib1g-dev
 pkg-config pkgconf pkgconf-bin libboxfort-dev libffi-dev libgit2-dev libnanomsg-dev "

# Extracts the .debs into the prefix ($root), prunes it, adds the alternatives' links.
extract() {
    ls "$debs"/*.deb >/dev/null 2>&1 || { echo "gpu_bundle: no .deb files in $debs (run \`make gpu-bundle\` on a machine with apt)" >&2; exit 1; }
    command -v dpkg-deb >/dev/null 2>&1 || { echo "gpu_bundle: dpkg-deb not found: cannot extract $debs" >&2; exit 1; }
    tmp=$root.tmp
    rm -rf "$tmp"
    mkdir -p "$tmp"
    for d in "$debs"/*.deb; do
        dpkg-deb -x "$d" "$tmp"
        dpkg-deb -f "$d" Package Version | paste -sd' ' >>"$tmp/BUNDLE"
    done
    lib=$tmp/usr/lib/x86_64-linux-gnu
    inc=$tmp/usr/include/x86_64-linux-gnu
    # Docs, man pages, static libraries, CMake files, OpenSSL's loadable modules, and the
    # BLAS/LAPACK compatibility libraries of OpenBLAS: the build links none of them.
    rm -rf "${tmp:?}/usr/share" "${tmp:?}/usr/bin" "$lib/cmake" "$lib/openblas-pthread/cmake" \
        "$lib/engines-3" "$lib/ossl-modules"
    rm -f "$lib"/openblas-pthread/libblas.* "$lib"/openblas-pthread/liblapack.*
    find "$tmp" -name '*.a' -exec rm -f {} +
    find "$tmp" -type l ! -exec test -e {} \; -exec rm -f {} +
    # What update-alternatives would do for libopenblas0-pthread / libopenblas-pthread-dev
    # (dpkg -x runs no maintainer scripts): -lopenblas and <cblas.h> in the usual places.
    ln -sf openblas-pthread/libopenblas.so.0 "$lib/libopenblas.so.0"
    ln -sf openblas-pthread/libopenblas.so "$lib/libopenblas.so"
    for h in cblas.h f77blas.h openblas_config.h; do
        ln -sf "openblas-pthread/$h" "$inc/$h"
    done
    ln -sf openblas-pthread/cblas.h "$inc/cblas-openblas.h"
    # Everything the Makefile's -l flags and the sources' #includes need must be there.
    for f in "$lib/libgsl.so" "$lib/libopenblas.so" "$lib/libsqlite3.so" "$lib/libjansson.so" \
        "$lib/libnettle.so" "$tmp/usr/include/nettle/sha2.h" "$lib/libcriterion.so" "$tmp/usr/include/gsl/gsl_multifit_nlinear.h" "$inc/cblas.h" \
        "$tmp/usr/include/sqlite3.h" "$tmp/usr/include/jansson.h" \
        "$tmp/usr/include/criterion/criterion.h"; do
        [ -e "$f" ] || { echo "gpu_bundle: $f missing after extraction" >&2; exit 1; }
    done
    rm -rf "$root"
    mv "$tmp" "$root"
    set -- "$debs"/*.deb
    echo "gpu_bundle: prefix $root ($(du -sh "$root" | cut -f1)) from $# packages"
}

# Prints the dependencies of package $1 (apt-cache depends, no recommends/suggests): the
# first alternative of each 'A | B' group, the first provider of a virtual package.
deps_of() {
    apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
        --no-replaces --no-enhances "$1" | awk '
        virt { if (/^    /) { print $1; virt = 0; next } virt = 0 }
        /^ \|(Pre)?Depends:/ { if (!grp) take($2); grp = 1; next }
        /^  (Pre)?Depends:/  { if (!grp) take($2); grp = 0; next }
        function take(p) { if (p ~ /^</) virt = 1; else print p }'
}

download() {
    [ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ] || {
        echo "gpu_bundle: needs a Debian/Ubuntu amd64 machine with apt (the GPU machine is x86-64)" >&2; exit 1; }
    # The dependency closure of $ROOTS, minus $SKIP.
    todo=$ROOTS want=""
    while [ -n "$todo" ]; do
        # shellcheck disable=SC2086 # split the list of package names
        set -- $todo
        p=${1%%:*}; shift; todo="$*"
        case " $want $SKIP " in *" $p "*) continue ;; esac
        want="$want $p"
        todo="$todo $(deps_of "$p" | tr '\n' ' ')"
    done
    echo "gpu_bundle: packages:$want"
    rm -rf "$debs.tmp"
    mkdir -p "$debs.tmp"
    # apt's download sandbox user must be able to write there.
    chmod 777 "$debs.tmp" 2>/dev/null || true
    # shellcheck disable=SC2086
    if ! (cd "$debs.tmp" && apt-get download -q $want >/dev/null); then
        echo "gpu_bundle: apt-get download failed; updating the package lists and retrying" >&2
        SUDO=""
        [ "$(id -u)" = 0 ] || SUDO=sudo
        $SUDO apt-get update -qq >&2
        # shellcheck disable=SC2086
        (cd "$debs.tmp" && apt-get download -q $want >/dev/null)
    fi
    chmod 755 "$debs.tmp"
    rm -rf "$debs"
    mv "$debs.tmp" "$debs"
}

case "${1:-}" in
    --extract) extract ;;
    "") download; extract ;;
    *) echo "usage: $0 [--extract]" >&2; exit 2 ;;
esac
echo "gpu_bundle: $debs $(du -sh "$debs" | cut -f1), $root $(du -sh "$root" | cut -f1); for the GPU machine carry $debs only (tests/gpu/README.md)"
