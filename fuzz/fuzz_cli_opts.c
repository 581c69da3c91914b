/* fuzz_cli_opts: libFuzzer target for the command line's option parser (cli/opts.c) and the
 * checks sim and plan share after it (cli/workload.c).
 *
 * Each input is an argv: its arguments separated by NUL or newline bytes (at most
 * FZ_ARGS of them), parsed against two tables built like sim's and plan's from the shared
 * option groups, with options of every kind (flag, string, int, long long, double, enum,
 * repeatable, tunes of a group's range, default and help). A parse that succeeds is then
 * held to the parser's promises: every number within its option's range, every enum
 * index one of its names, no list past its cap, every option declared and counted; and
 * it goes through the policy list, the policy's options and the weight formats as sim
 * and plan take them. No simulation runs and no database is touched. Usage errors and
 * --help go to the C streams stderr and stdout, which point at /dev/null here: the
 * sanitizers and libFuzzer write to the file descriptors, so their reports stay. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opts.h"
#include "policy.h"
#include "workload.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_ARGS 96 /* arguments of one input, argv[0] not counted */

typedef struct fz_opts {
    cli_workload w;
    const char *gpu, *csv;
    double kv_gb;
    int gpu_experts, mode;
    long long limit;
    cli_list gpus, prices;
} fz_opts;

static void fz_usage(FILE *out)
{
    fprintf(out, "usage: writescope fuzz [options]\n");
}

#define F fz_opts
/* sim's shape: the workload groups, its own options, tunes of the shared ones. */
static const cli_optdef k_sim[] = {
    {CLI_GROUP(F, w, cli_workload, cli_workload_opts)},
    {"gpu", CLI_STR(F, gpu), .arg = "PROFILE", .help = "the GPU"},
    {CLI_GROUP(F, w, cli_workload, cli_engine_opts)},
    {CLI_GROUP(F, w, cli_workload, cli_sim_opts)},
    {CLI_GROUP(F, w, cli_workload, cli_trace_opts)},
    {CLI_GROUP(F, w, cli_workload, cli_gen_opts)},
    {CLI_GROUP(F, w, cli_workload, cli_closed_opts)},
    {CLI_GROUP(F, w, cli_workload, cli_serve_opts)},
    {CLI_GROUP(F, w, cli_workload, cli_window_opts)},
    {CLI_GROUP(F, w, cli_workload, cli_host_opts)},
    {CLI_GROUP(F, w, cli_workload, cli_format_opts)},
    {"batch", CLI_TUNE, .help = "the most sequences running at once"},
    {"prompt", CLI_TUNE, .lo = 1, .hi = 1 << 26, .def = "2048"},
    {"output", CLI_TUNE, .lo = 1, .hi = 1 << 26, .def = "256"},
    {"gpu-kv-gb", CLI_DOUBLE(F, kv_gb), .arg = "G", .lo = 0.001, .hi = 1e6, .help = "KV"},
    {"gpu-experts", CLI_INT(F, gpu_experts), .arg = "E", .lo = 0, .hi = 65536, .def = "0"},
    {"r-max", CLI_DOUBLE(F, w.r_max), .arg = "R", .lo = 0, .hi = 1, .def = "1"},
    {"csv", CLI_STR(F, csv), .arg = "DIR"},
    {"chrome-trace-limit", CLI_LL(F, limit), .arg = "N", .lo = 0, .hi = 1LL << 40,
     .def = "200000", .err = "--chrome-trace-limit needs a count of spans, not '%s'"},
    {0}};

/* plan's shape: repeatable options, an enum with its own error, the policy tuned. */
static const cli_optdef k_plan[] = {
    {CLI_GROUP(F, w, cli_workload, cli_workload_opts)},
    {"gpu", CLI_LIST(F, gpus), .arg = "PROFILE[,PROFILE...]", .hi = 8},
    {CLI_GROUP(F, w, cli_workload, cli_sim_opts)},
    {CLI_GROUP(F, w, cli_workload, cli_trace_opts)},
    {CLI_GROUP(F, w, cli_workload, cli_gen_opts)},
    {CLI_GROUP(F, w, cli_workload, cli_host_opts)},
    {CLI_GROUP(F, w, cli_workload, cli_format_opts)},
    {CLI_GROUP(F, w, cli_workload, cli_serve_opts)},
    {"policy", CLI_TUNE, .arg = "NAME[,NAME...]|all", .help = "the KV policies"},
    {"batch", CLI_TUNE, .def = "32"},
    {"price", CLI_LIST(F, prices), .arg = "PROFILE=USD_PER_HOUR"},
    {"mode", CLI_ENUM(F, mode), .names = (const char *const[]){"a", "bb", "ccc", NULL},
     .def = "bb", .err = "--mode must be a, bb or ccc, not '%s'"},
    {0}};
#undef F

static const cli_spec k_specs[2] = {{"sim", k_sim, 2, fz_usage}, {"plan", k_plan, 0, fz_usage}};

/* The parser's promises about what it accepted; a broken one aborts (a finding). */
static void check_parsed(const cli_spec *spec, const cli_args *a, const fz_opts *o)
{
    for (int k = 0; k < a->n; k++) {
        const cli_optdef *d = &a->opt[k];
        const void *p = (const char *)o + d->off;
        if (cli_given(a, d->name) != a->given[k] || !cli_declared(a, d->name))
            abort();
        if (!a->given[k] && !d->def)
            continue;
        long double v = 0;
        switch (d->type) {
        case CLI_OPT_INT: v = *(const int *)p; break;
        case CLI_OPT_LL: v = *(const long long *)p; break;
        case CLI_OPT_DOUBLE: v = *(const double *)p; break;
        case CLI_OPT_ENUM: {
            int n = 0;
            while (d->names[n])
                n++;
            if (*(const int *)p < 0 || *(const int *)p >= n)
                abort();
            continue;
        }
        case CLI_OPT_LIST: {
            const cli_list *l = p;
            const int cap = d->hi > 0 && d->hi < CLI_LIST_MAX ? (int)d->hi : CLI_LIST_MAX;
            if (l->n < 0 || l->n > cap || l->n != a->given[k])
                abort();
            for (int i = 0; i < l->n; i++)
                if (!l->v[i])
                    abort();
            continue;
        }
        case CLI_OPT_STR:
            if (!*(const char *const *)p)
                abort();
            continue;
        default: continue;
        }
        if (!(v >= d->lo && v <= d->hi))
            abort();
    }
    if (a->npos < 0 || a->npos > spec->max_pos)
        abort();
}

/* What sim and plan do next with the options, short of loading anything. */
static void use_parsed(const cli_spec *spec, const cli_args *a, const fz_opts *o)
{
    unsigned mask = 0;
    if (!o->w.policy)
        abort(); /* it has a default */
    if (cli_policy_list(spec->cmd, o->w.policy, &mask) == 0) {
        if (!mask || mask >> WS_POLICY_COUNT)
            abort();
        cli_policy_opts(spec->cmd, a, o->w.policy, mask);
    }
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    if (cli_formats_apply(spec->cmd, a, &o->w, &cc) == 0 &&
        (cc.n_cpu_moe < WS_DEPLOY_NO_CPU_MOE || cc.cpu_threads < 0 || cc.n_gpu_layers < 0))
        abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    FILE *null_out = fopen("/dev/null", "w");
    if (null_out)
        stdout = stderr = null_out;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *argv[FZ_ARGS + 2];
    int argc = 1;
    argv[0] = "writescope";
    /* NUL and newline both end an argument; an empty input is no argument at all */
    for (size_t i = 0, start = 0; i <= size && argc <= FZ_ARGS; i++)
        if (i == size || text[i] == '\0' || text[i] == '\n') {
            if (i < size)
                text[i] = '\0';
            if (i > start || i < size)
                argv[argc++] = text + start;
            start = i + 1;
        }
    argv[argc] = NULL;
    for (int s = 0; s < 2; s++) {
        fz_opts o;
        memset(&o, 0, sizeof o);
        cli_args a;
        if (cli_opts_parse(&k_specs[s], argc, argv, &o, &a) == 0) {
            check_parsed(&k_specs[s], &a, &o);
            use_parsed(&k_specs[s], &a, &o);
        }
    }
    free(text);
    return 0;
}
