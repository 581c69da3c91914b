/* test_sim_export: a simulation's files (sim/export.c). CSV: the header of each file is its
 * column list, every row has as many fields as the header (quoted where a field holds a
 * comma), missing numbers are empty, several runs share one folder, a failed export leaves
 * the old files. Chrome trace: a timeline played by the operation graph (sim/dag) is
 * written as JSON jansson loads, one complete event per span that held something, disjoint
 * and time-ordered spans on every thread (a pool's overlaps go to lanes), devices as
 * processes, bytes and labels in args; the caps hold; odd labels are escaped. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dag.h"
#include "engine.h"
#include "export.h"
#include "helpers.h"
#include "res_fifo.h"
#include "res_fluid.h"
#include "res_pool.h"
#include "timeline.h"

/* ---- CSV ---- */

static void sample(ws_simdb_run *run, ws_simdb_request req[4], ws_simdb_step st[3],
                   const char *policy)
{
    memset(run, 0, sizeof *run);
    run->id = 7;
    snprintf(run->policy, sizeof run->policy, "%s", policy);
    snprintf(run->model, sizeof run->model, "qwen3-30b-a3b");
    snprintf(run->gpu_profile, sizeof run->gpu_profile, "a100-40gb-pcie");
    snprintf(run->host_profile, sizeof run->host_profile, "xeon-gold-5318y");
    snprintf(run->workload, sizeof run->workload, "trace");
    snprintf(run->trace_path, sizeof run->trace_path, "traces/a,b.csv"); /* a comma: quoted */
    snprintf(run->trace_format, sizeof run->trace_format, "mooncake");
    snprintf(run->detail, sizeof run->detail, "layer");
    snprintf(run->params, sizeof run->params, "{\"page\": 256, \"budget\": 2e9}");
    run->batch = 32;
    run->seed = 1;
    run->requests = 4;
    run->completed = 3;
    run->oom = 1;
    run->tokens_out = 48;
    run->sim_s = 2.0;
    run->tokens_per_s = 24;
    run->ttft_p50 = run->ttft_p90 = run->ttft_p99 = 0.5;
    run->tpot_p50 = run->tpot_p90 = run->tpot_p99 = 0.02;
    run->slo_ttft = run->slo_tpot = NAN;
    run->goodput = NAN;
    for (int i = 0; i < 4; i++)
        req[i] = (ws_simdb_request){.idx = i, .arrival_s = 0.1 * i, .prompt = 1000, .output = 16,
                                    .ttft_s = 0.5, .tpot_s = 0.02, .e2e_s = 0.8,
                                    .outcome = WS_SIMDB_DONE};
    req[2].outcome = WS_SIMDB_OOM;
    req[2].ttft_s = req[2].tpot_s = req[2].e2e_s = NAN;
    for (int i = 0; i < 3; i++)
        st[i] = (ws_simdb_step){.idx = i, .t_start = 0.5 * i, .t_end = 0.5 * i + 0.4, .batch = 3,
                                .tokens = 3, .context = 3000, .r_star = 0.25, .r_real = 0.2,
                                .busy_gpu = 0.3, .busy_h2d = 0.1, .busy_d2h = 0.0,
                                .busy_cpu = 0.2};
    st[1].r_star = NAN;
    snprintf(st[2].busy_other, sizeof st[2].busy_other, "{\"membw\": 0.1, \"pin\": 0.01}");
}

/* Fields of one CSV line (quotes handled); returns their number, copies field k to out. */
static int csv_fields(const char *line, int k, char *out, size_t cap)
{
    int n = 0, q = 0;
    size_t o = 0;
    if (out)
        out[0] = '\0';
    for (const char *p = line;; p++) {
        if (!q && (*p == ',' || *p == '\n' || *p == '\0')) {
            if (n == k && out)
                out[o < cap ? o : cap - 1] = '\0';
            n++;
            o = 0;
            if (*p != ',')
                return n;
            continue;
        }
        if (*p == '"') {
            if (q && p[1] == '"') {
                p++;
            } else {
                q = !q;
                continue;
            }
        }
        if (n == k && out && o + 1 < cap)
            out[o++] = *p;
    }
}

static char *nth_line(char *text, int k)
{
    char *p = text;
    for (int i = 0; i < k && p; i++) {
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return p;
}

static int n_cols(const char *const *cols)
{
    int n = 0;
    while (cols[n])
        n++;
    return n;
}

/* Checks file dir/name: header = cols, `rows` rows of as many fields; returns its text. */
static char *check_csv(const char *dir, const char *name, const char *const *cols, int rows)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = th_slurp(path, NULL);
    cr_assert_not_null(text, "%s missing", path);
    cr_assert_eq(th_lines(text), rows + 1, "%s: %d lines", name, th_lines(text));
    for (int i = 0; i < n_cols(cols); i++) {
        char f[64];
        csv_fields(text, i, f, sizeof f);
        cr_assert_str_eq(f, cols[i], "%s column %d", name, i);
    }
    for (int r = 0; r <= rows; r++)
        cr_assert_eq(csv_fields(nth_line(text, r), -1, NULL, 0), n_cols(cols), "%s line %d", name,
                     r + 1);
    return text;
}

/* The field of `col` on line k of a CSV text. */
static void field(char *text, const char *const *cols, int line, const char *col, char *out,
                  size_t cap)
{
    int i = 0;
    while (cols[i] && strcmp(cols[i], col))
        i++;
    cr_assert_not_null(cols[i], "no column %s", col);
    csv_fields(nth_line(text, line), i, out, cap);
}

/* steps.csv's columns: the policy, then the one step row's (store/steprow.h). */
static const char *const *step_cols(void)
{
    static const char *cols[64];
    cols[0] = "policy";
    size_t i = 0;
    for (; ws_step_cols[i].name; i++)
        cols[i + 1] = ws_step_cols[i].name;
    cols[i + 1] = NULL;
    return cols;
}

Test(sim_export, csv_columns_and_rows)
{
    char dir[64], out[300];
    th_tmpdir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/csv", dir); /* created */
    ws_simdb_run run;
    ws_simdb_request req[4];
    ws_simdb_step st[3];
    sample(&run, req, st, "writescope");
    ws_err err = {0};
    cr_assert_eq(sim_export_csv_write(out, &run, req, 4, st, 3, &err), 0, "%s", err.msg);
    cr_assert_eq(th_dir_entries(out), 3, "only the three files");

    char f[256];
    char *t = check_csv(out, "requests.csv", sim_export_request_cols, 4);
    field(t, sim_export_request_cols, 1, "policy", f, sizeof f);
    cr_assert_str_eq(f, "writescope");
    field(t, sim_export_request_cols, 3, "outcome", f, sizeof f);
    cr_assert_str_eq(f, "oom");
    field(t, sim_export_request_cols, 3, "ttft_s", f, sizeof f);
    cr_assert_str_eq(f, "", "an OOM request has no TTFT");
    field(t, sim_export_request_cols, 4, "arrival_s", f, sizeof f);
    cr_assert_float_eq(atof(f), 0.3, 1e-12);
    free(t);

    t = check_csv(out, "steps.csv", step_cols(), 3);
    field(t, step_cols(), 2, "r_star", f, sizeof f);
    cr_assert_str_eq(f, "");
    field(t, step_cols(), 1, "r_star", f, sizeof f);
    cr_assert_float_eq(atof(f), 0.25, 1e-12);
    field(t, step_cols(), 3, "busy_other", f, sizeof f);
    cr_assert_str_eq(f, "{\"membw\": 0.1, \"pin\": 0.01}");
    field(t, step_cols(), 1, "busy_other", f, sizeof f);
    cr_assert_str_eq(f, "{}");
    free(t);

    t = check_csv(out, "summary.csv", sim_export_summary_cols, 1);
    const char *want[][2] = {{"label", "modeled"},
                             {"policy", "writescope"},
                             {"gpu_profile", "a100-40gb-pcie"},
                             {"host_profile", "xeon-gold-5318y"},
                             {"trace_path", "traces/a,b.csv"},
                             {"run_id", "7"},
                             {"oom", "1"},
                             {"prompt_tokens", ""},
                             {"slo_ttft", ""},
                             {"params", "{\"page\": 256, \"budget\": 2e9}"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        field(t, sim_export_summary_cols, 1, want[i][0], f, sizeof f);
        cr_assert_str_eq(f, want[i][1], "%s", want[i][0]);
    }
    free(t);
}

/* `--policy all`: several runs in one folder, told apart by their policy. */
Test(sim_export, csv_several_runs_and_failures)
{
    char dir[64];
    th_tmpdir(dir, sizeof dir);
    ws_simdb_run run;
    ws_simdb_request req[4];
    ws_simdb_step st[3];
    ws_err err = {0};
    sim_export_csv *c;
    cr_assert_eq(sim_export_csv_open(dir, &c, &err), 0, "%s", err.msg);
    const char *pol[] = {"writescope", "gpu-only", "static"};
    for (int p = 0; p < 3; p++) {
        sample(&run, req, st, pol[p]);
        cr_assert_eq(sim_export_csv_begin(c, pol[p], &err), 0, "%s", err.msg);
        for (int i = 0; i < 4; i++)
            cr_assert_eq(sim_export_csv_request(c, &req[i], &err), 0, "%s", err.msg);
        for (int i = 0; i < 3; i++)
            cr_assert_eq(sim_export_csv_step(c, &st[i], &err), 0, "%s", err.msg);
        cr_assert_eq(sim_export_csv_end(c, &run, &err), 0, "%s", err.msg);
    }
    cr_assert_eq(sim_export_csv_close(c, &err), 0, "%s", err.msg);
    char f[64];
    char *t = check_csv(dir, "summary.csv", sim_export_summary_cols, 3);
    field(t, sim_export_summary_cols, 2, "policy", f, sizeof f);
    cr_assert_str_eq(f, "gpu-only");
    free(t);
    t = check_csv(dir, "requests.csv", sim_export_request_cols, 12);
    field(t, sim_export_request_cols, 12, "policy", f, sizeof f);
    cr_assert_str_eq(f, "static");
    free(t);
    free(check_csv(dir, "steps.csv", step_cols(), 9));

    /* A failed export (a row outside any run, a bad outcome) keeps the files as they were. */
    char path[300];
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    size_t len;
    char *before = th_slurp(path, &len);
    cr_assert_eq(sim_export_csv_open(dir, &c, &err), 0, "%s", err.msg);
    cr_assert_eq(sim_export_csv_request(c, &req[0], &err), WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "outside a run"), NULL, "%s", err.msg);
    sim_export_csv_abort(c);
    req[1].outcome = 5;
    sample(&run, req, st, "x");
    req[1].outcome = 5;
    cr_assert_eq(sim_export_csv_write(dir, &run, req, 4, st, 3, &err), WS_EINVAL);
    cr_assert(th_same_file_bytes(path, before, len), "summary.csv changed");
    cr_assert_eq(th_dir_entries(dir), 3, "no temporary file left");
    free(before);
    /* --csv naming a file. */
    cr_assert_neq(sim_export_csv_open(path, &c, &err), 0);
    cr_assert_neq(strstr(err.msg, "not a folder"), NULL, "%s", err.msg);
}

/* ---- Chrome trace ---- */

enum { K_OP = 0, K_FLOW = 1 };

typedef struct world {
    sim_engine e;
    sim_res gpu, h2d, d2h, cpu;
    sim_fluid mem;
    sim_dag g;
    sim_timeline tl;
} world;

static void world_init(world *w)
{
    ws_err err = {0};
    cr_assert_eq(sim_engine_init(&w->e, 1, &err), 0);
    cr_assert_eq(sim_fifo_init(&w->gpu, &w->e, "gpu", &err), 0);
    cr_assert_eq(sim_fifo_init(&w->h2d, &w->e, "h2d", &err), 0);
    cr_assert_eq(sim_fifo_init(&w->d2h, &w->e, "d2h", &err), 0);
    cr_assert_eq(sim_pool_init(&w->cpu, &w->e, "cpu", 4, &err), 0);
    cr_assert_eq(sim_fluid_init(&w->mem, &w->e, K_FLOW, "membw", 100e9, SIM_FLUID_MAXMIN, &err),
                 0);
    cr_assert_eq(sim_dag_init(&w->g, &w->e, K_OP, &err), 0);
    sim_timeline_init(&w->tl);
    sim_dag_record(&w->g, &w->tl);
}

static void world_free(world *w)
{
    sim_timeline_free(&w->tl);
    sim_dag_free(&w->g);
    sim_fluid_free(&w->mem);
    sim_res_free(&w->gpu);
    sim_res_free(&w->h2d);
    sim_res_free(&w->d2h);
    sim_res_free(&w->cpu);
    sim_engine_free(&w->e);
}

/* One layer's shape: qkv -> (h2d copy -> gpu half) || 4 CPU pieces -> barrier -> merge ->
 * d2h flush; returns the merge. 10 ops, 9 that hold something. */
static sim_op_id add_layer(world *w, uint32_t layer, sim_op_id prev)
{
    ws_err err = {0};
    sim_op_spec qkv = {.hold = &w->gpu, .seconds = 1e-4, .label = "qkv", .tag = layer};
    sim_op_spec cp = {.hold = &w->h2d, .channel = &w->mem, .bytes = 8e6, .max_rate = 25e9,
                      .label = "h2d-pages", .tag = layer};
    sim_op_spec gh = {.hold = &w->gpu, .seconds = 2e-4, .label = "gpu-half", .tag = layer};
    sim_op_spec piece = {.hold = &w->cpu, .seconds = 1e-5, .channel = &w->mem, .bytes = 4e6,
                         .max_rate = 20e9, .label = "cpu-attn", .tag = layer};
    sim_op_spec bar = {.label = "join", .tag = layer};
    sim_op_spec mg = {.hold = &w->gpu, .seconds = 5e-5, .label = "merge", .tag = layer};
    sim_op_spec fl = {.hold = &w->d2h, .channel = &w->mem, .bytes = 1e6, .max_rate = 25e9,
                      .label = "flush", .tag = layer};
    sim_op_id q = sim_dag_add(&w->g, &qkv, &prev, 1, &err);
    sim_op_id c = sim_dag_add(&w->g, &cp, &q, 1, &err);
    sim_op_id g = sim_dag_add(&w->g, &gh, &c, 1, &err);
    sim_op_id join[5] = {g};
    for (int i = 0; i < 4; i++)
        join[1 + i] = sim_dag_add(&w->g, &piece, &q, 1, &err);
    sim_op_id b = sim_dag_add(&w->g, &bar, join, 5, &err);
    sim_op_id m = sim_dag_add(&w->g, &mg, &b, 1, &err);
    cr_assert_neq(sim_dag_add(&w->g, &fl, &m, 1, &err), SIM_OP_NONE, "%s", err.msg);
    return m;
}

static json_t *load_trace(const char *path)
{
    json_error_t je;
    json_t *v = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    cr_assert_not_null(v, "%s: line %d: %s", path, je.line, je.text);
    cr_assert(json_is_array(json_object_get(v, "traceEvents")));
    return v;
}

/* Checks every complete event; returns their number. Per (pid, tid): ts never decreases
 * and spans do not overlap. */
static size_t check_events(json_t *v)
{
    json_t *evs = json_object_get(v, "traceEvents");
    size_t i, n = 0;
    json_t *e;
    struct lane {
        long long pid, tid;
        double end, ts;
    } last[256];
    int nl = 0;
    json_array_foreach(evs, i, e)
    {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        cr_assert_not_null(ph);
        if (strcmp(ph, "X"))
            continue;
        n++;
        long long pid = json_integer_value(json_object_get(e, "pid"));
        long long tid = json_integer_value(json_object_get(e, "tid"));
        cr_assert(pid >= 1 && pid <= 4, "pid %lld", pid);
        cr_assert(json_is_number(json_object_get(e, "ts")));
        double ts = json_number_value(json_object_get(e, "ts"));
        double dur = json_number_value(json_object_get(e, "dur"));
        cr_assert(ts >= 0 && dur >= 0);
        cr_assert(json_is_string(json_object_get(json_object_get(e, "args"), "label")));
        int k = 0;
        while (k < nl && !(last[k].pid == pid && last[k].tid == tid))
            k++;
        if (k == nl) {
            cr_assert_lt(nl, 256);
            last[nl++] = (struct lane){pid, tid, ts + dur, ts};
            continue;
        }
        cr_assert_geq(ts, last[k].ts, "ts goes back on pid %lld tid %lld", pid, tid);
        cr_assert_geq(ts, last[k].end - 2e-3, "spans overlap on pid %lld tid %lld", pid, tid);
        last[k].ts = ts;
        last[k].end = ts + dur;
    }
    return n;
}

/* The metadata event `name` (process_name / thread_name) whose args.name is `value`. */
static json_t *meta(json_t *v, const char *name, const char *value)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(v, "traceEvents"), i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "ph")), "M") ||
            strcmp(json_string_value(json_object_get(e, "name")), name))
            continue;
        const char *a = json_string_value(json_object_get(json_object_get(e, "args"), "name"));
        if (a && !strcmp(a, value))
            return e;
    }
    return NULL;
}

Test(sim_export, chrome_trace_of_a_graph)
{
    world w;
    world_init(&w);
    ws_err err = {0};
    sim_op_id prev = SIM_OP_NONE;
    for (uint32_t l = 0; l < 3; l++)
        prev = add_layer(&w, l, prev);
    cr_assert_eq(sim_engine_run(&w.e, INFINITY, &err), 0, "%s", err.msg);
    cr_assert_eq(w.tl.n, 30);

    char dir[64], path[300];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/trace.json", dir);
    sim_export_trace_opts o = {.title = "test \"layers\" on gpu"};
    size_t written = 0;
    cr_assert_eq(sim_export_trace_write(path, &w.tl, &o, &written, &err), 0, "%s", err.msg);
    cr_assert_eq(written, 27, "the barriers are left out");
    json_t *v = load_trace(path);
    cr_assert_eq(check_events(v), 27);
    json_t *od = json_object_get(v, "otherData");
    cr_assert_str_eq(json_string_value(json_object_get(od, "label")), "modeled");
    cr_assert_str_eq(json_string_value(json_object_get(od, "title")), "test \"layers\" on gpu");
    cr_assert_eq(json_integer_value(json_object_get(od, "spans_written")), 27);

    /* Devices as processes; the pool's four parallel pieces on four lanes. */
    json_t *gpu = meta(v, "process_name", "GPU"), *link = meta(v, "process_name", "link"),
           *cpu = meta(v, "process_name", "CPU");
    cr_assert(gpu && link && cpu);
    cr_assert_null(meta(v, "process_name", "other"));
    for (int l = 0; l < 4; l++) {
        char name[16];
        snprintf(name, sizeof name, "cpu #%d", l);
        json_t *t = meta(v, "thread_name", name);
        cr_assert_not_null(t, "%s", name);
        cr_assert_eq(json_integer_value(json_object_get(t, "pid")),
                     json_integer_value(json_object_get(cpu, "pid")));
    }
    cr_assert_null(meta(v, "thread_name", "cpu #4"));
    json_t *h2d = meta(v, "thread_name", "h2d");
    cr_assert_eq(json_integer_value(json_object_get(h2d, "pid")),
                 json_integer_value(json_object_get(link, "pid")));
    cr_assert_not_null(meta(v, "thread_name", "gpu"));

    /* A copy carries its bytes and channel; ts/dur are the span's, in microseconds. */
    size_t i;
    json_t *e;
    int copies = 0;
    json_array_foreach(json_object_get(v, "traceEvents"), i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        if (strcmp(name, "h2d-pages"))
            continue;
        json_t *a = json_object_get(e, "args");
        cr_assert_float_eq(json_number_value(json_object_get(a, "bytes")), 8e6, 1e-6);
        cr_assert_str_eq(json_string_value(json_object_get(a, "channel")), "membw");
        long long tag = json_integer_value(json_object_get(a, "tag"));
        const sim_span *s = NULL;
        for (size_t j = 0; j < w.tl.n; j++)
            if (w.tl.v[j].tag == tag && !strcmp(w.tl.v[j].label, "h2d-pages"))
                s = &w.tl.v[j];
        cr_assert_not_null(s);
        cr_assert_float_eq(json_number_value(json_object_get(e, "ts")), s->t_start * 1e6, 1e-3);
        cr_assert_float_eq(json_number_value(json_object_get(e, "dur")),
                           (s->t_end - s->t_start) * 1e6, 1e-3);
        copies++;
    }
    cr_assert_eq(copies, 3);
    json_decref(v);
    world_free(&w);
}

Test(sim_export, chrome_trace_caps_and_streaming)
{
    world w;
    world_init(&w);
    ws_err err = {0};
    char dir[64], path[300];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/trace.json", dir);

    /* Streaming: one layer at a time, the timeline cleared between them. */
    sim_export_trace *t;
    cr_assert_eq(sim_export_trace_open(path, NULL, &t, &err), 0, "%s", err.msg);
    sim_op_id prev = SIM_OP_NONE;
    for (uint32_t l = 0; l < 4; l++) {
        prev = add_layer(&w, l, prev);
        cr_assert_eq(sim_engine_run(&w.e, INFINITY, &err), 0, "%s", err.msg);
        cr_assert_eq(sim_export_trace_add(t, &w.tl, &err), 0, "%s", err.msg);
        sim_timeline_clear(&w.tl);
    }
    cr_assert_eq(sim_export_trace_written(t), 36);
    cr_assert_eq(sim_export_trace_close(t, &err), 0, "%s", err.msg);
    json_t *v = load_trace(path);
    cr_assert_eq(check_events(v), 36);
    json_decref(v);

    /* max_spans: the first N by start time, the rest counted as dropped. */
    for (uint32_t l = 0; l < 4; l++)
        prev = add_layer(&w, 10 + l, prev);
    cr_assert_eq(sim_engine_run(&w.e, INFINITY, &err), 0, "%s", err.msg);
    sim_export_trace_opts o = {.max_spans = 5};
    cr_assert_eq(sim_export_trace_open(path, &o, &t, &err), 0, "%s", err.msg);
    cr_assert_eq(sim_export_trace_add(t, &w.tl, &err), 0, "%s", err.msg);
    cr_assert(sim_export_trace_full(t));
    cr_assert_eq(sim_export_trace_written(t), 5);
    cr_assert_eq(sim_export_trace_dropped(t), 31);
    cr_assert_eq(sim_export_trace_close(t, &err), 0, "%s", err.msg);
    v = load_trace(path);
    cr_assert_eq(check_events(v), 5);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(v, "otherData"),
                                                    "spans_dropped")),
                 31);
    /* The five written start no later than any dropped one. */
    double max_written = 0, min_start = INFINITY;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(v, "traceEvents"), i, e) if (
        !strcmp(json_string_value(json_object_get(e, "ph")), "X"))
    {
        double ts = json_number_value(json_object_get(e, "ts"));
        max_written = ts > max_written ? ts : max_written;
    }
    int later = 0;
    for (size_t j = 0; j < w.tl.n; j++) {
        if (!w.tl.v[j].res)
            continue;
        min_start = fmin(min_start, w.tl.v[j].t_start);
        later += w.tl.v[j].t_start * 1e6 >= max_written - 1e-3;
    }
    cr_assert_geq(later, 31, "the written spans are the earliest");
    json_decref(v);

    /* t_max: only spans that start before it. */
    double t_max = (min_start + w.tl.v[w.tl.n - 1].t_end) / 2;
    size_t before = 0;
    for (size_t j = 0; j < w.tl.n; j++)
        before += w.tl.v[j].res && w.tl.v[j].t_start < t_max;
    cr_assert(before > 0 && before < 36);
    o = (sim_export_trace_opts){.t_max = t_max};
    size_t written;
    cr_assert_eq(sim_export_trace_write(path, &w.tl, &o, &written, &err), 0, "%s", err.msg);
    cr_assert_eq(written, before);
    v = load_trace(path);
    cr_assert_eq(check_events(v), before);
    json_decref(v);
    world_free(&w);
}

Test(sim_export, chrome_trace_escapes_labels_and_fails_cleanly)
{
    sim_timeline tl;
    sim_timeline_init(&tl);
    ws_err err = {0};
    const char *odd = "a \"quoted\" \\ label\nwith\ttabs \xc3\xa9";
    sim_span s = {.op = 1, .label = odd, .res = "gpu", .t_start = 0, .t_end = 1e-3};
    cr_assert_eq(sim_timeline_add(&tl, &s, &err), 0);
    s = (sim_span){.op = 2, .label = NULL, .res = NULL, .channel = "membw", .bytes = 5e5,
                   .t_start = 2e-3, .t_end = 3e-3};
    cr_assert_eq(sim_timeline_add(&tl, &s, &err), 0);
    s = (sim_span){.op = 3, .label = "delay", .t_start = 1e-3, .t_end = 4e-3}; /* no resource */
    cr_assert_eq(sim_timeline_add(&tl, &s, &err), 0);
    s = (sim_span){.op = 4, .label = "barrier", .t_start = 4e-3, .t_end = 4e-3};
    cr_assert_eq(sim_timeline_add(&tl, &s, &err), 0);
    char dir[64], path[300];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/t.json", dir);
    size_t written;
    cr_assert_eq(sim_export_trace_write(path, &tl, NULL, &written, &err), 0, "%s", err.msg);
    cr_assert_eq(written, 3);
    json_t *v = load_trace(path);
    cr_assert_eq(check_events(v), 3);
    json_t *e0 = json_array_get(json_object_get(v, "traceEvents"), 0);
    const char *got = json_string_value(json_object_get(json_object_get(e0, "args"), "label"));
    cr_assert_eq(strncmp(got, odd, strlen(odd) - 2), 0, "%s", got);
    cr_assert_not_null(meta(v, "thread_name", "membw"), "a flow with no resource: its channel");
    cr_assert_not_null(meta(v, "process_name", "other"));
    json_decref(v);

    /* A folder that does not exist: an error naming the path, nothing written. */
    char bad[320];
    snprintf(bad, sizeof bad, "%s/no/such/t.json", dir);
    cr_assert_neq(sim_export_trace_write(bad, &tl, NULL, NULL, &err), 0);
    cr_assert_neq(strstr(err.msg, "no/such"), NULL, "%s", err.msg);
    /* An aborted writer leaves the old file. */
    size_t len;
    char *old = th_slurp(path, &len);
    sim_export_trace *t;
    cr_assert_eq(sim_export_trace_open(path, NULL, &t, &err), 0, "%s", err.msg);
    cr_assert_eq(sim_export_trace_add(t, &tl, &err), 0, "%s", err.msg);
    sim_export_trace_abort(t);
    cr_assert(th_same_file_bytes(path, old, len));
    cr_assert_eq(th_dir_entries(dir), 1, "no temporary file left");
    free(old);
    sim_timeline_free(&tl);
}
