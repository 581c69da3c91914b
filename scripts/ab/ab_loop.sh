#!/bin/sh
# Which of two versions of a CPU attention block loop is faster on this host? Paired A/B
# timing of the AMX loop (kernels/attn_cpu_amx.c; see scripts/ab/ab_loop.c) or, with
# AB_LOOP=fma, of the fused FMA loop (kernels/attn_cpu_fma.c).
# usage: scripts/ab/ab_loop.sh REV_A REV_B [G N_KV D_K D_V TOKENS PAIRS THREADS]
#   REV_x: a git revision (its copy of the loop's file), "." for the working tree, or a file
#   defaults: 8 4 128 128 262144 10 2 (Qwen3-30B-A3B's layer shape, ~512 MB of KV: beyond
#   the last-level cache); MLA (DeepSeek-V2-Lite): 16 1 576 512 262144 10 2.
#   Environment: AB_VPAIRS=1 stores V in token pairs (kv.v_pairs) for both builds,
#   AB_KTILES=1 K in tiles; AB_REPS=N calls the kernel N times per run (for a KV held in
#   the caches); AB_SPARSE=N attends a random list of N of the tokens; AB_FP16=1 stores
#   fp16 KV and AB_AVX2=1 times the AVX2 form (the fma loop only); AB_BF16=1 times the
#   AMX loop's bf16 products (q rounded to bf16).
# Prints each build's median rate and the median of the per-pair time ratios B/A.
# Needs `make` first (links build/libwritescope.a); builds into build/ab_loop/.
set -eu
[ $# -ge 2 ] || { sed -n '2,15p' "$0" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$root/build/ab_loop
mkdir -p "$out"
cd "$root"
loop=${AB_LOOP:-amx}
case $loop in amx) def= ;; fma) def=-DAB_LOOP_FMA ;; *) echo "AB_LOOP: amx or fma" >&2; exit 2 ;; esac
src() { # REV -> path of that version of the loop
    case $1 in
    .) echo kernels/attn_cpu_$loop.c ;;
    *) if [ -f "$1" ]; then echo "$1"; else
           git show "$1:kernels/attn_cpu_$loop.c" > "$out/$2.c" && echo "$out/$2.c"; fi ;;
    esac
}
for x in A B; do
    [ $x = A ] && rev=$1 || rev=$2
    file=$(src "$rev" $x)
    gcc -O2 -std=c11 -D_GNU_SOURCE -pthread -Icommon -Iplatform -Ikernels -c "$file" -o "$out/$x.o"
    objcopy $(for f in attend scratch enable fits peak_flops emulate p_bf16; do
        printf ' --redefine-sym ws_attn_cpu_%s_%s=%s_ws_attn_cpu_amx_%s' $loop $f $x $f; done) \
        $(for f in dp_fits dp_scratch dp_attend dp_gain; do
        printf ' --localize-symbol ws_attn_cpu_%s' $f; done) "$out/$x.o"
done
gcc -O2 -std=c11 -D_GNU_SOURCE -pthread $def -Icommon -Iplatform -Ikernels -Itests scripts/ab/ab_loop.c \
    tests/attn_fixture.c "$out/A.o" "$out/B.o" build/libwritescope.a -lcriterion -lm \
    -o "$out/ab_loop"
shift 2
[ $# -gt 0 ] || set -- 8 4 128 128 262144 10 2
exec "$out/ab_loop" "$@"
