/* cmd_bench: `writescope bench membw|attn-cpu` -- measured figures of this machine: its
 * memory read bandwidth, STREAM triad and dot-product peak, and the CPU decode-attention
 * kernel on a model-shaped paged KV cache, stated as a fraction of the read bandwidth (or
 * of the roofline) measured in the same run. Parses, calls calib/probe/bench.h and prints:
 * progress to stderr, results to stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "cpu_features.h"
#include "membw.h"
#include "model.h"
#include "numa.h"
#include "opts.h"
#include "pool.h"
#include "ws_util.h"

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: writescope bench membw [--threads T] [--mib N] [--repeats R] [--isa X] [--json]\n"
        "       writescope bench attn-cpu --model NAME --ctx N --batch B [--dtype bf16|fp16]\n"
        "                [--threads T] [--sparse-topk K] [--sparse-mode pages|tokens]\n"
        "                [--page P] [--isa X] [--repeats R] [--seed S] [--read-mib N]\n"
        "                [--v-layout auto|rows|pairs] [--k-layout auto|rows|tiles]\n"
        "                [--scaling] [--json]\n"
        "\n"
        "membw     read bandwidth (vectorised read-only reduction), gather bandwidth (the\n"
        "          same reads over random rows of 64, 256, 1152 and 4096 bytes, prefetched\n"
        "          ahead as the kernels prefetch a sparse list's rows; JSON key gather),\n"
        "          STREAM triad and the dot-product peak of the attention kernel's instruction\n"
        "          path; the buffer defaults to 1 GiB (at most a quarter of memory).\n"
        "          Each timed pass starts in DRAM (what it reads and writes is evicted\n"
        "          from every cache first), and triad / read (the median of the rounds'\n"
        "          ratios) is checked against the band expected of DRAM (JSON keys\n"
        "          triad_over_read, triad_read_check).\n"
        "attn-cpu  one layer's KV for B sequences of N tokens as scattered P-token pages\n"
        "          (P = 256 by default) of seeded random data; times the CPU kernel (median of\n"
        "          R repeats after a warm-up round; by default as many as fill ~3 s, 11..101)\n"
        "          and the read bandwidth in the same run (one pass over the read buffer,\n"
        "          evicted from the caches first, before each repeat, the median of\n"
        "          those); the KV is evicted from the caches before each repeat, cold as\n"
        "          in a decode step.\n"
        "          --sparse-topk K attends K tokens per sequence: whole pages (default) or\n"
        "          single tokens, a fresh random set each repeat; sparse models (index_topk)\n"
        "          default to their top-k. Reports kv_bytes, seconds, kv_gbps, gflops, isa,\n"
        "          loop (amx, dpbf16, fma or generic: the block loop that ran), precision,\n"
        "          p_bf16 (the loop rounded p to bf16 too),\n"
        "          threads,\n"
        "          read_bw_gbps, fraction_of_read_bw (of the medians; and per round, the\n"
        "          kernel over the read pass before it: fraction_of_read_bw_rounds, median\n"
        "          and quartiles), peak_gflops (the fastest dot-product instruction this CPU\n"
        "          has for the KV dtype, measured in the same run, whatever the loop uses:\n"
        "          peak_instr), roofline_gflops, roofline_fraction and which\n"
        "          bound applies. With --sparse-mode tokens, also a gather pass after each\n"
        "          read pass (random rows of a K row's size, as many bytes as the kernel\n"
        "          reads, prefetched ahead): gather_bw_gbps and fraction_of_gather_bw, what\n"
        "          the memory gives scattered rows.\n"
        "Every figure is measured on this machine (source: measured).\n");
}

typedef struct bench_opts {
    const char *isa, *model, *dtype, *precision;
    int threads, mib, read_mib, repeats, ctx, batch, topk, mode, page, v_layout, k_layout;
    int scaling, json;
    long long seed;
} bench_opts;

static const cli_optdef k_opts[] = {
    {"threads", CLI_INT(bench_opts, threads), .arg = "T", .lo = 1, .hi = WS_POOL_MAX_THREADS,
     .help = "worker threads (default: one per logical CPU), pinned to the NUMA nodes in turn; "
             "on several nodes the KV is spread over them in runs of 8192 tokens (JSON key "
             "numa_nodes) and each chunk runs on its pages' node"},
    {"mib", CLI_INT(bench_opts, mib), .arg = "N", .lo = 1, .hi = 6 * 1024,
     .help = "membw: the buffer in MiB (default 1 GiB, at most a quarter of memory)"},
    {"repeats", CLI_INT(bench_opts, repeats), .arg = "R", .lo = 1, .hi = 1000,
     .help = "timed repeats (membw: default 5; attn-cpu: as many as fill ~3 s, 11..101)"},
    {"isa", CLI_STR(bench_opts, isa), .arg = "X",
     .help = "scalar|avx2|avx512|avx512bf16|amx (default: best, or $WRITESCOPE_ISA)"},
    {"model", CLI_STR(bench_opts, model), .arg = "NAME", .help = "attn-cpu: the model's shapes"},
    {"ctx", CLI_INT(bench_opts, ctx), .arg = "N", .lo = 1, .hi = 1 << 30,
     .help = "attn-cpu: tokens per sequence"},
    {"batch", CLI_INT(bench_opts, batch), .arg = "B", .lo = 1, .hi = 1 << 20,
     .help = "attn-cpu: sequences"},
    {"dtype", CLI_STR(bench_opts, dtype), .arg = "bf16|fp16", .def = "bf16",
     .help = "attn-cpu: the KV's element type"},
    {"sparse-topk", CLI_INT(bench_opts, topk), .arg = "K", .lo = 0, .hi = 1 << 30,
     .help = "attn-cpu: attend K tokens per sequence, a fresh random set each repeat (sparse "
             "models default to their index_topk)"},
    {"sparse-mode", CLI_ENUM(bench_opts, mode),
     .names = (const char *const[]){"pages", "tokens", NULL}, .def = "pages",
     .err = "--sparse-mode must be pages or tokens",
     .help = "attn-cpu: the top-K as whole pages or single tokens"},
    {"page", CLI_INT(bench_opts, page), .arg = "P", .lo = 1, .hi = 1 << 20, .def = "256",
     .help = "attn-cpu: tokens per KV page"},
    {"seed", CLI_LL(bench_opts, seed), .arg = "S", .lo = 0, .hi = 1LL << 40, .def = "1",
     .help = "attn-cpu: the seed of the random KV"},
    {"read-mib", CLI_INT(bench_opts, read_mib), .arg = "N", .lo = 1, .hi = 6 * 1024,
     .help = "attn-cpu: the read pass's buffer in MiB (default as --mib)"},
    {"v-layout", CLI_ENUM(bench_opts, v_layout),
     .names = (const char *const[]){"auto", "rows", "pairs", NULL}, .def = "auto",
     .err = "--v-layout must be auto, rows or pairs",
     .help = "attn-cpu: how the CPU region stores V (separate V blocks only): rows, or token "
             "pairs (the amx path and the vector paths' fused loop read them as stored); auto "
             "takes what the runtime writes for this path: pairs on amx (rows with "
             "--sparse-mode tokens: a pair row brings a token's neighbour too), and beside K "
             "tiles on avx2/avx512/avx512bf16, else rows"},
    {"k-layout", CLI_ENUM(bench_opts, k_layout),
     .names = (const char *const[]){"auto", "rows", "tiles", NULL}, .def = "auto",
     .err = "--k-layout must be auto, rows or tiles",
     .help = "attn-cpu: how the CPU region stores K (separate V blocks, pages of a multiple "
             "of 16 tokens): rows, or tiles of 16 tokens (read as stored by the amx path and "
             "the fused loop); auto: tiles for up to 8 query heads per KV head on amx, 16 on "
             "the vector paths, except with --sparse-mode tokens (a token's K spans its tile), "
             "else rows"},
    {"scaling", CLI_FLAG(bench_opts, scaling),
     .help = "attn-cpu: also time the kernel and the read pass on one thread, alternating with "
             "the T-thread runs in every repeat, and report 1-thread figures and the speedup "
             "(JSON key scaling) from the same minutes of the host"},
    {"precision", CLI_STR(bench_opts, precision), .arg = "exact|bf16",
     .help = "attn-cpu: exact attends q as given (fp32; bf16 products take q and p as hi + lo "
             "halves, as accurate as fp32); bf16 takes q as bf16 (the model's activation, as "
             "GPU kernels do) on every loop, and the dpbf16 loops round p to bf16 too (half the "
             "products). Default: bf16, or $WRITESCOPE_PRECISION"},
    {"json", CLI_FLAG(bench_opts, json), .help = "machine-readable output"},
    {0}};
static const cli_spec k_spec = {"bench", k_opts, 1, usage};

/* The read buffer by default: a fixed size (membw.h), at most a quarter of memory. */
static double default_buffer_bytes(void)
{
    const ws_cpu_features *f = ws_cpu_features_get();
    double b = (double)WS_MEMBW_DEFAULT_BYTES;
    if (f->mem_bytes > 0 && b > f->mem_bytes / 4)
        b = f->mem_bytes / 4;
    return b;
}

static int resolve_isa(const char *cmd, const char *name, ws_isa *out)
{
    ws_isa want = WS_ISA_AUTO;
    if (name && ws_isa_parse(name, &want))
        return cli_usage_error(cmd, "unknown --isa '%s' (scalar, avx2, avx512, avx512bf16, amx)", name);
    ws_err err = {0};
    if (ws_isa_resolve(want, out, &err))
        return cli_fail(&err);
    fprintf(stderr, "bench: instruction path %s (%s)\n", ws_isa_name(*out),
            want == WS_ISA_AUTO ? (getenv("WRITESCOPE_ISA") && *getenv("WRITESCOPE_ISA")
                                       ? "from WRITESCOPE_ISA"
                                       : "best this CPU supports")
                                : "forced by --isa");
    return 0;
}

static int bench_membw(ws_pool *pool, double bytes, int repeats, ws_isa isa, int json)
{
    ws_err err = {0};
    ws_bench_membw r;
    const ws_bench_membw_cfg cfg = {.bytes = (size_t)bytes, .repeats = repeats, .isa = isa};
    fprintf(stderr, "bench: read, gather and triad bandwidth over %.0f MiB, %d threads...\n",
            bytes / (1 << 20), ws_pool_threads(pool));
    if (ws_bench_membw_run(pool, &cfg, &r, &err))
        return cli_fail(&err);
    const ws_cpu_features *f = ws_cpu_features_get();
    const char *check = r.triad_agrees ? "agree" : "disagree";
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "source", json_string("measured"));
        json_object_set_new(o, "cpu", json_string(f->model));
        json_object_set_new(o, "threads", json_integer(ws_pool_threads(pool)));
        json_object_set_new(o, "pinned_threads", json_integer(ws_pool_pinned(pool)));
        json_object_set_new(o, "numa_nodes", json_integer(ws_pool_nodes(pool)));
        json_object_set_new(o, "bytes", cli_num(bytes));
        json_object_set_new(o, "llc_bytes", cli_num((double)f->l3_bytes));
        json_object_set_new(o, "repeats", json_integer(repeats));
        json_object_set_new(o, "cache", json_string(WS_MEMBW_METHOD));
        json_object_set_new(o, "read_bw_gbps", json_real(r.read_gbps));
        json_object_set_new(o, "triad_gbps", json_real(r.triad_gbps));
        json_object_set_new(o, "triad_over_read", json_real(r.triad_over_read));
        json_object_set_new(o, "triad_read_check", json_string(check));
        json_t *ga = json_array();
        for (int i = 0; i < WS_BENCH_GATHER_N; i++) {
            json_t *e = json_object();
            json_object_set_new(e, "segment_bytes", json_integer((json_int_t)ws_bench_gather_seg[i]));
            json_object_set_new(e, "gbps", json_real(r.gather_gbps[i]));
            json_object_set_new(e, "fraction_of_read_bw", json_real(r.gather_gbps[i] / r.read_gbps));
            json_array_append_new(ga, e);
        }
        json_object_set_new(o, "gather", ga);
        json_object_set_new(o, "isa", json_string(ws_isa_name(isa)));
        json_object_set_new(o, "peak_gflops", json_real(r.peak_gflops));
        return cli_print_json(o);
    }
    printf("cpu          %s, %d threads (%d pinned) on %d NUMA node%s\n", f->model,
           ws_pool_threads(pool), ws_pool_pinned(pool), ws_pool_nodes(pool),
           ws_pool_nodes(pool) > 1 ? "s" : "");
    printf("buffer       %.0f MiB, evicted from the caches before each pass (%s), median of %d\n",
           bytes / (1 << 20), WS_MEMBW_METHOD, repeats);
    printf("read         %.2f GB/s (measured)\n", r.read_gbps);
    printf("gather       ");
    for (int i = 0; i < WS_BENCH_GATHER_N; i++)
        printf("%s%zu B rows %.2f GB/s (%.2f of read)", i ? ", " : "", ws_bench_gather_seg[i],
               r.gather_gbps[i], r.gather_gbps[i] / r.read_gbps);
    printf(" (measured, random rows prefetched ahead)\n");
    printf("triad        %.2f GB/s (measured, STREAM counting)\n", r.triad_gbps);
    printf("check        triad / read %.2f: %s (expected %.2f-%.2f from DRAM)\n",
           r.triad_over_read, check, WS_MEMBW_TRIAD_READ_LO, WS_MEMBW_TRIAD_READ_HI);
    printf("peak         %.1f GFLOP/s dot product, %s path (measured)\n", r.peak_gflops,
           ws_isa_name(isa));
    return CLI_EXIT_OK;
}

typedef struct attn_args {
    const char *model;
    long ctx, batch, topk, page, repeats, seed;
    ws_dtype dtype;
    ws_sparse_mode mode;
    int v_layout; /* -1 auto (the CPU region's layout for the path), 0 rows, 1 pairs */
    ws_attn_prec prec; /* WS_PREC_AUTO: $WRITESCOPE_PRECISION, else the default */
    int k_layout; /* -1 auto, 0 rows, 1 tiles */
    double read_bytes;
    int json, scaling;
} attn_args;

/* The figures that differ between thread counts, as JSON keys of `o`. */
static void attn_fig_json(json_t *o, const ws_bench_attn_fig *g)
{
    json_object_set_new(o, "threads", json_integer(g->threads));
    json_object_set_new(o, "seconds", json_real(g->sec));
    json_object_set_new(o, "seconds_min", json_real(g->smin));
    json_object_set_new(o, "seconds_max", json_real(g->smax));
    json_object_set_new(o, "kv_gbps", json_real(g->kv_gbps));
    json_object_set_new(o, "gflops", json_real(g->gflops));
    json_object_set_new(o, "read_bw_gbps", json_real(g->rd));
    json_object_set_new(o, "fraction_of_read_bw", json_real(g->kv_gbps / g->rd));
    if (g->fr_med > 0) {
        json_t *fr = json_object();
        json_object_set_new(fr, "q1", json_real(g->fr_q1));
        json_object_set_new(fr, "median", json_real(g->fr_med));
        json_object_set_new(fr, "q3", json_real(g->fr_q3));
        json_object_set_new(o, "fraction_of_read_bw_rounds", fr);
    }
    if (g->gb > 0) {
        json_object_set_new(o, "gather_bw_gbps", json_real(g->gb));
        json_object_set_new(o, "fraction_of_gather_bw", json_real(g->kv_gbps / g->gb));
    }
    json_object_set_new(o, "peak_gflops", json_real(g->pk));
    json_object_set_new(o, "bound", json_string(g->compute_bound ? "compute" : "memory"));
    json_object_set_new(o, "roofline_gflops", json_real(g->roof));
    json_object_set_new(o, "roofline_fraction", json_real(g->gflops / g->roof));
}

static void attn_fig_print(const ws_bench_attn_fig *g, ws_isa used, const char *loop,
                           const char *peak_instr, int R, size_t gseg)
{
    printf("kernel       %s (%s loop), %d thread%s: %.4f s median of %d (min %.4f, max %.4f) "
           "(measured)\n",
           ws_isa_name(used), loop, g->threads, g->threads > 1 ? "s" : "", g->sec, R, g->smin,
           g->smax);
    printf("throughput   %.2f GB/s of KV, %.1f GFLOP/s (measured)\n", g->kv_gbps, g->gflops);
    printf("read bw      %.2f GB/s in the same run: kernel at %.1f%% of it (measured)\n", g->rd,
           100.0 * g->kv_gbps / g->rd);
    if (g->fr_med > 0)
        printf("per round    kernel at %.1f%% of the read pass before it: median of %d rounds "
               "(quartiles %.1f-%.1f%%, measured)\n",
               100.0 * g->fr_med, R, 100.0 * g->fr_q1, 100.0 * g->fr_q3);
    if (g->gb > 0)
        printf("gather bw    %.2f GB/s over random %zu-byte rows in the same run: kernel at %.1f%% "
               "of it (measured)\n",
               g->gb, gseg, 100.0 * g->kv_gbps / g->gb);
    printf("roofline     peak %.1f GFLOP/s (%s, measured); %s-bound: %.1f%% of min(peak, AI x "
           "read bw) = %.1f GFLOP/s\n",
           g->pk, peak_instr, g->compute_bound ? "compute" : "memory",
           100.0 * g->gflops / g->roof, g->roof);
}

static void note_stderr(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "bench: %s\n", msg);
}

static int bench_attn(ws_pool *pool, ws_isa isa, const attn_args *a)
{
    ws_err err = {0};
    char path[WS_PATH_MAX];
    ws_model m;
    if (ws_model_resolve(a->model, path, sizeof path, &err) || ws_model_load(path, &m, &err))
        return cli_fail(&err);
    const ws_bench_attn_cfg c = {.model = &m,
                                 .dtype = a->dtype,
                                 .page = (int)a->page,
                                 .ctx = (int)a->ctx,
                                 .batch = (int)a->batch,
                                 .topk = a->topk,
                                 .mode = a->mode,
                                 .seed = (uint64_t)a->seed,
                                 .v_layout = a->v_layout,
                                 .k_layout = a->k_layout,
                                 .isa = isa,
                                 .prec = a->prec,
                                 .repeats = (int)a->repeats,
                                 .read_bytes = (size_t)a->read_bytes,
                                 .scaling = a->scaling,
                                 .note = note_stderr};
    ws_bench_attn res;
    if (ws_bench_attn_run(pool, &c, &res, &err))
        return cli_fail(&err);
    const ws_attn_bench_cfg cfg = res.problem;
    const ws_isa used = res.used;
    const char *loop = res.loop;
    const int R = res.repeats, T = ws_pool_threads(pool), nodes = res.nodes;
    const double kv_bytes = res.kv_bytes, flops = res.flops, alloc_bytes = res.alloc_bytes;
    const double ai = flops / kv_bytes;
    const size_t gseg = res.gather_seg;
    const ws_bench_attn_fig g = res.fig, g1 = res.fig1;
    const char *v_layout = ws_kv_v_layout_name(&cfg.kv), *k_layout = ws_kv_k_layout_name(&cfg.kv);
    const ws_cpu_features *f = ws_cpu_features_get();
    const char *mode = cfg.sparse == WS_SPARSE_NONE    ? "dense"
                       : cfg.sparse == WS_SPARSE_PAGES ? "pages"
                                                       : "tokens";
    if (a->json) {
        json_t *o = json_object();
        json_object_set_new(o, "source", json_string("measured"));
        json_object_set_new(o, "model", json_string(m.name));
        json_object_set_new(o, "attention", json_string(ws_attn_kind_name(m.attn)));
        json_object_set_new(o, "q_heads", json_integer(cfg.n_q_heads));
        json_object_set_new(o, "kv_heads", json_integer(cfg.kv.n_kv_heads));
        json_object_set_new(o, "d_k", json_integer(cfg.kv.d_k));
        json_object_set_new(o, "d_v", json_integer(cfg.kv.d_v));
        json_object_set_new(o, "dtype", json_string(ws_dtype_name(cfg.kv.dtype)));
        json_object_set_new(o, "ctx", json_integer(cfg.ctx));
        json_object_set_new(o, "batch", json_integer(cfg.batch));
        json_object_set_new(o, "page", json_integer(cfg.kv.page_tokens));
        json_object_set_new(o, "k_layout", json_string(k_layout));
        json_object_set_new(o, "v_layout", json_string(v_layout));
        json_object_set_new(o, "sparse", json_string(mode));
        json_object_set_new(o, "sparse_topk", json_integer(cfg.sparse ? cfg.topk : 0));
        json_object_set_new(o, "kv_alloc_bytes", cli_num(alloc_bytes));
        json_object_set_new(o, "llc_bytes", cli_num((double)f->l3_bytes));
        json_object_set_new(o, "kv_bytes", cli_num(kv_bytes));
        json_object_set_new(o, "flops", cli_num(flops));
        json_object_set_new(o, "repeats", json_integer(R));
        json_object_set_new(o, "isa", json_string(ws_isa_name(used)));
        json_object_set_new(o, "isa_requested", json_string(ws_isa_name(isa)));
        json_object_set_new(o, "loop", json_string(loop));
        json_object_set_new(o, "precision", json_string(ws_attn_prec_name(res.precision)));
        json_object_set_new(o, "p_bf16", json_boolean(res.p_bf16));
        json_object_set_new(o, "peak_instr", json_string(res.peak_instr));
        json_object_set_new(o, "pinned_threads", json_integer(ws_pool_pinned(pool)));
        json_object_set_new(o, "numa_nodes", json_integer(nodes));
        json_object_set_new(o, "read_bw_bytes", cli_num(a->read_bytes));
        json_object_set_new(o, "cache", json_string(WS_MEMBW_METHOD));
        if (gseg)
            json_object_set_new(o, "gather_segment_bytes", json_integer((json_int_t)gseg));
        json_object_set_new(o, "arithmetic_intensity", json_real(ai));
        attn_fig_json(o, &g);
        if (a->scaling) { /* one thread, same rounds; speedup = 1-thread time / T-thread */
            json_t *sc = json_object();
            attn_fig_json(sc, &g1);
            json_object_set_new(sc, "speedup", json_real(g1.sec / g.sec));
            json_object_set_new(sc, "read_bw_speedup", json_real(g.rd / g1.rd));
            json_object_set_new(o, "scaling", sc);
        }
        return cli_print_json(o);
    }
    printf("model        %s (%s), %d q / %d kv heads, d_k %d, d_v %d, %s KV, page %d, K %s, "
           "V %s\n",
           m.name, ws_attn_kind_name(m.attn), cfg.n_q_heads, cfg.kv.n_kv_heads, cfg.kv.d_k,
           cfg.kv.d_v, ws_dtype_name(cfg.kv.dtype), cfg.kv.page_tokens, k_layout, v_layout);
    printf("workload     batch %d x %d tokens, %s", cfg.batch, cfg.ctx, mode);
    if (cfg.sparse)
        printf(" top-%d", cfg.topk);
    printf("; %.3f GB attended (%.2f GB allocated, LLC %.0f MiB)\n", kv_bytes / 1e9,
           alloc_bytes / 1e9, f->l3_bytes / 1048576.0);
    if (nodes > 1)
        printf("numa         KV over %d nodes in runs of %d tokens per node; each chunk runs on "
               "its pages' node\n",
               nodes, WS_NUMA_RUN_TOKENS);
    printf("arithmetic   %.1f flop/byte\n", ai);
    printf("precision    %s (%s)\n", ws_attn_prec_name(res.precision),
           res.precision != WS_PREC_BF16 ? "q as fp32; bf16 products on hi + lo halves"
           : res.p_bf16                  ? "q and p rounded to bf16"
                                         : "q rounded to bf16, p as fp32");
    attn_fig_print(&g, used, loop, res.peak_instr, R, gseg);
    if (a->scaling) {
        attn_fig_print(&g1, used, loop, res.peak_instr, R, gseg);
        printf("scaling      %d threads %.2fx faster than 1 (read bandwidth %.2fx), same rounds "
               "(measured)\n",
               T, g1.sec / g.sec, g.rd / g1.rd);
    }
    return CLI_EXIT_OK;
}

/* attn-cpu's options into *a (its read_bytes, json and scaling set by the caller). */
static int attn_options(const bench_opts *o, const cli_args *ca, attn_args *a)
{
    if (!o->model || !cli_given(ca, "ctx") || !cli_given(ca, "batch"))
        return cli_usage_error("bench", "attn-cpu needs --model, --ctx and --batch");
    a->model = o->model;
    a->ctx = o->ctx;
    a->batch = o->batch;
    a->page = o->page;
    a->seed = (long)o->seed;
    a->topk = cli_given(ca, "sparse-topk") ? o->topk : -1;
    a->repeats = o->repeats; /* 0: chosen by time (bench_attn) */
    if (ws_dtype_parse(o->dtype, &a->dtype) || (a->dtype != WS_DT_BF16 && a->dtype != WS_DT_FP16))
        return cli_usage_error("bench", "--dtype must be bf16 or fp16 (got '%s')", o->dtype);
    a->mode = o->mode ? WS_SPARSE_TOKENS : WS_SPARSE_PAGES;
    a->v_layout = o->v_layout - 1; /* auto -1, rows 0, pairs 1 */
    a->k_layout = o->k_layout - 1; /* auto -1, rows 0, tiles 1 */
    ws_err perr = {0};
    if (o->precision && (ws_attn_prec_parse(o->precision, &a->prec) || a->prec == WS_PREC_AUTO))
        return cli_usage_error("bench", "--precision must be exact or bf16 (got '%s')",
                               o->precision);
    if (ws_attn_prec_resolve(a->prec, &a->prec, &perr))
        return cli_fail(&perr);
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    bench_opts o = {0};
    cli_args ca;
    int rc = cli_opts_parse(&k_spec, argc, argv, &o, &ca);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    if (ca.npos == 0)
        return cli_usage_error("bench", "missing what to measure (membw or attn-cpu)");
    const char *what = ca.pos[0];
    const int is_membw = !strcmp(what, "membw"), is_attn = !strcmp(what, "attn-cpu");
    if (!is_membw && !is_attn)
        return cli_usage_error("bench", "unknown benchmark '%s' (membw, attn-cpu)", what);
    double bytes = default_buffer_bytes();
    if (o.mib || o.read_mib)
        bytes = (double)(o.mib ? o.mib : o.read_mib) * (1 << 20);
    attn_args a = {.read_bytes = bytes, .json = o.json, .scaling = o.scaling};
    if (is_attn && (rc = attn_options(&o, &ca, &a)))
        return rc;
    if (is_membw && (o.model || cli_given(&ca, "ctx") || cli_given(&ca, "batch") ||
                     cli_given(&ca, "sparse-topk") || o.scaling || o.precision))
        return cli_usage_error("bench", "membw takes no attn-cpu options (--model, --ctx, "
                                        "--batch, --sparse-topk, --scaling, --precision)");
    ws_isa isa;
    if ((rc = resolve_isa("bench", o.isa, &isa)))
        return rc;
    ws_err err = {0};
    ws_pool *pool = ws_pool_create(o.threads, &err);
    if (!pool)
        return cli_fail(&err);
    rc = is_membw ? bench_membw(pool, bytes, o.repeats ? o.repeats : 5, isa, o.json)
                  : bench_attn(pool, isa, &a);
    ws_pool_destroy(pool);
    return rc;
}
