#!/bin/sh
# long_functions.sh: lists the C functions longer than N lines (default 120), longest first,
# as "file:line length name", where line is the line naming the function and length counts
# from there to its closing brace.
#
#   scripts/long_functions.sh [-n N] [FILE|FOLDER...]   (default: every tracked .c file)
#
# Functions are found by brace depth: a brace that opens depth 1 after a line at depth 0
# with a '(' and no '=' or ';' (not an initializer or a declaration) starts one. Comments,
# strings, character literals and preprocessor lines (with their continuations) are
# skipped, so a brace in any of them does not count. It reads text, compiles nothing.
set -eu
limit=120
if [ "${1:-}" = "-n" ]; then
    limit=$2
    shift 2
fi
case $limit in '' | *[!0-9]*) echo "long_functions.sh: -n takes a whole number" >&2; exit 2 ;; esac
cd "$(git rev-parse --show-toplevel 2>/dev/null || echo .)" 2>/dev/null || true
if [ $# -eq 0 ]; then
    set -- $(git ls-files '*.c' 2>/dev/null || find . -name '*.c')
else
    files=
    for p in "$@"; do
        if [ -d "$p" ]; then files="$files $(find "$p" -name '*.c' | sort)"; else files="$files $p"; fi
    done
    set -- $files
fi
[ $# -gt 0 ] || exit 0
awk -v limit="$limit" '
FNR == 1 { depth = 0; incomment = 0; cont = 0; cand = 0 }
{
    line = $0
    # preprocessor lines and their continuations
    if (cont || line ~ /^[ \t]*#/) {
        cont = (line ~ /\\$/)
        next
    }
    # strip comments, strings and character literals
    out = ""
    i = 1
    n = length(line)
    while (i <= n) {
        c = substr(line, i, 1)
        two = substr(line, i, 2)
        if (incomment) {
            if (two == "*/") { incomment = 0; i += 2 } else i++
            continue
        }
        if (two == "/*") { incomment = 1; i += 2; continue }
        if (two == "//") break
        if (c == "\"" || c == "\x27") {
            q = c
            i++
            while (i <= n) {
                d = substr(line, i, 1)
                if (d == "\\") { i += 2; continue }
                i++
                if (d == q) break
            }
            out = out " "
            continue
        }
        out = out c
        i++
    }
    # a candidate signature: at depth 0, a name followed by "(", no "=" or ";"
    if (depth == 0 && out ~ /[A-Za-z_][A-Za-z0-9_]*[ \t]*\(/ && out !~ /[=;]/ && out !~ /^[ \t]/) {
        cand = FNR
        s = out
        sub(/\(.*/, "", s)
        m = split(s, w, /[ \t*]+/)
        name = w[m]
    } else if (depth == 0 && out ~ /[;=]/) {
        cand = 0
    }
    for (k = 1; k <= length(out); k++) {
        c = substr(out, k, 1)
        if (c == "{") {
            if (depth == 0) { start = cand; fname = name }
            depth++
        } else if (c == "}") {
            depth--
            if (depth == 0 && start) {
                len = FNR - start + 1
                if (len > limit)
                    printf "%s:%d %d %s\n", FILENAME, start, len, fname
                start = 0
                cand = 0
            }
            if (depth < 0) depth = 0
        }
    }
}' "$@" | sort -k2,2nr
