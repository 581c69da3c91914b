/* export: CSV tables and a Chrome trace of a simulation (see export.h). */
#include "export.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "resource.h"
#include "ws_atomic.h"
#include "ws_csv.h"
#include "ws_util.h"

/* ---- CSV ---- */

const char *const sim_export_request_cols[] = {
    "policy", "idx", "arrival_s", "prompt", "output", "ttft_s", "tpot_s", "e2e_s", "outcome",
    NULL};
const char *const sim_export_summary_cols[] = {
    "run_id",       "label",        "policy",       "model",        "gpu_profile",
    "host_profile", "workload",     "batch",        "prompt_tokens", "output_tokens",
    "trace_path",   "trace_format", "generator",    "detail",       "seed",
    "requests",     "completed",    "oom",          "tokens_out",   "sim_s",
    "tokens_per_s", "ttft_p50",     "ttft_p90",     "ttft_p99",     "tpot_p50",
    "tpot_p90",     "tpot_p99",     "slo_ttft",     "slo_tpot",     "slo_met",
    "goodput",      "events",       "wall_s",       "started_at",   "tool_version",
    "params",       NULL};

enum { F_REQ, F_STEP, F_SUM, N_FILES };
static const char *const k_files[N_FILES] = {"requests.csv", "steps.csv", "summary.csv"};

struct sim_export_csv {
    ws_atomic_file f[N_FILES];
    int open[N_FILES];
    char policy[64];
    int in_run;
};

/* ",<number>", empty where there is none. */
static void csv_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, ",%.12g", v);
    else
        fputc(',', f);
}

static void csv_header(FILE *f, const char *const *cols)
{
    for (int i = 0; cols[i]; i++) {
        if (i)
            fputc(',', f);
        fputs(cols[i], f);
    }
    fputc('\n', f);
}

void sim_export_csv_abort(sim_export_csv *c)
{
    if (!c)
        return;
    for (int i = 0; i < N_FILES; i++)
        if (c->open[i])
            ws_atomic_abort(&c->f[i]);
    free(c);
}

int sim_export_csv_open(const char *dir, sim_export_csv **out, ws_err *err)
{
    *out = NULL;
    char path[WS_PATH_MAX];
    struct stat sb;
    /* A folder, or nothing yet; never through a link (the files would land where it points). */
    if (lstat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return ws_err_set(err, WS_EIO, "%s: exists and is %s, not a folder (--csv takes a folder)",
                          dir, ws_atomic_kind(sb.st_mode));
    sim_export_csv *c = calloc(1, sizeof *c);
    if (!c)
        return ws_err_set(err, WS_ENOMEM, "out of memory");
    for (int i = 0; i < N_FILES; i++) {
        if (ws_path_join(path, sizeof path, dir, k_files[i], err) ||
            (i == 0 && ws_ensure_parent_dir(path, err)) || ws_atomic_open(&c->f[i], path, err)) {
            sim_export_csv_abort(c);
            return err ? err->code : WS_EIO;
        }
        c->open[i] = 1;
    }
    csv_header(c->f[F_REQ].f, sim_export_request_cols);
    ws_row_csv_header(c->f[F_STEP].f, "policy,", ws_step_cols);
    csv_header(c->f[F_SUM].f, sim_export_summary_cols);
    *out = c;
    return 0;
}

int sim_export_csv_begin(sim_export_csv *c, const char *policy, ws_err *err)
{
    if (c->in_run)
        return ws_err_set(err, WS_EINVAL, "csv export: run '%s' was not ended", c->policy);
    snprintf(c->policy, sizeof c->policy, "%s", policy ? policy : "");
    c->in_run = 1;
    return 0;
}

static int check_run(const sim_export_csv *c, ws_err *err)
{
    return c->in_run ? 0 : ws_err_set(err, WS_EINVAL, "csv export: a row outside a run");
}

int sim_export_csv_request(sim_export_csv *c, const ws_simdb_request *r, ws_err *err)
{
    if (check_run(c, err))
        return WS_EINVAL;
    const char *oc = ws_simdb_outcome_name(r->outcome);
    if (!oc)
        return ws_err_set(err, WS_EINVAL, "csv export: request %lld: unknown outcome %d", r->idx,
                          r->outcome);
    FILE *f = c->f[F_REQ].f;
    ws_csv_field(f, c->policy);
    fprintf(f, ",%lld", r->idx);
    csv_num(f, r->arrival_s);
    fprintf(f, ",%lld,%lld", r->prompt, r->output);
    csv_num(f, r->ttft_s);
    csv_num(f, r->tpot_s);
    csv_num(f, r->e2e_s);
    fprintf(f, ",%s\n", oc);
    return 0;
}

int sim_export_csv_step(sim_export_csv *c, const ws_simdb_step *x, ws_err *err)
{
    if (check_run(c, err))
        return WS_EINVAL;
    FILE *f = c->f[F_STEP].f;
    ws_csv_field(f, c->policy);
    ws_row_csv(f, ",", ws_step_cols, x);
    return 0;
}

int sim_export_csv_end(sim_export_csv *c, const ws_simdb_run *r, ws_err *err)
{
    if (check_run(c, err))
        return WS_EINVAL;
    FILE *f = c->f[F_SUM].f;
    if (r->id > 0)
        fprintf(f, "%lld", r->id);
    fputs(",modeled,", f);
    const char *text1[] = {r->policy[0] ? r->policy : c->policy, r->model, r->gpu_profile,
                           r->host_profile, r->workload};
    for (int i = 0; i < 5; i++) {
        if (i)
            fputc(',', f);
        ws_csv_field(f, text1[i]);
    }
    fprintf(f, ",%d", r->batch);
    if (r->prompt_tokens > 0)
        fprintf(f, ",%lld", r->prompt_tokens);
    else
        fputc(',', f);
    if (r->output_tokens > 0)
        fprintf(f, ",%lld", r->output_tokens);
    else
        fputc(',', f);
    const char *text2[] = {r->trace_path, r->trace_format, r->generator, r->detail};
    for (int i = 0; i < 4; i++) {
        fputc(',', f);
        ws_csv_field(f, text2[i]);
    }
    fprintf(f, ",%llu,%lld,%lld,%lld,%lld", r->seed, r->requests, r->completed, r->oom,
            r->tokens_out);
    const double num[] = {r->sim_s,    r->tokens_per_s, r->ttft_p50, r->ttft_p90,
                          r->ttft_p99, r->tpot_p50,     r->tpot_p90, r->tpot_p99,
                          r->slo_ttft, r->slo_tpot};
    for (int i = 0; i < 10; i++)
        csv_num(f, num[i]);
    fprintf(f, ",%lld", r->slo_met);
    csv_num(f, r->goodput);
    fprintf(f, ",%lld", r->events);
    csv_num(f, r->wall_s);
    const char *text3[] = {r->started_at, r->tool_version, r->params[0] ? r->params : "{}"};
    for (int i = 0; i < 3; i++) {
        fputc(',', f);
        ws_csv_field(f, text3[i]);
    }
    fputc('\n', f);
    c->in_run = 0;
    return 0;
}

int sim_export_csv_close(sim_export_csv *c, ws_err *err)
{
    if (c->in_run) {
        ws_err_set(err, WS_EINVAL, "csv export: run '%s' was not ended", c->policy);
        sim_export_csv_abort(c);
        return WS_EINVAL;
    }
    /* All three written out before any replaces its target: a write that fails (a full
     * disk) leaves every old file as it was; only the renames come after. */
    int rc = 0;
    for (int i = 0; i < N_FILES && !rc; i++)
        rc = ws_atomic_flush(&c->f[i], err);
    for (int i = 0; i < N_FILES; i++) {
        if (!rc)
            rc = ws_atomic_commit(&c->f[i], err);
        else
            ws_atomic_abort(&c->f[i]);
        c->open[i] = 0;
    }
    free(c);
    return rc;
}

int sim_export_csv_write(const char *dir, const ws_simdb_run *run, const ws_simdb_request *req,
                         size_t n_req, const ws_simdb_step *steps, size_t n_steps, ws_err *err)
{
    sim_export_csv *c;
    int rc = sim_export_csv_open(dir, &c, err);
    if (rc)
        return rc;
    rc = sim_export_csv_begin(c, run->policy, err);
    for (size_t i = 0; !rc && i < n_req; i++)
        rc = sim_export_csv_request(c, &req[i], err);
    for (size_t i = 0; !rc && i < n_steps; i++)
        rc = sim_export_csv_step(c, &steps[i], err);
    if (!rc)
        rc = sim_export_csv_end(c, run, err);
    if (rc) {
        sim_export_csv_abort(c);
        return rc;
    }
    return sim_export_csv_close(c, err);
}

/* ---- Chrome trace ---- */

enum { P_GPU = 1, P_LINK, P_CPU, P_OTHER, N_PROC = P_OTHER }; /* process ids */
static const char *const k_proc[] = {"", "GPU", "link", "CPU", "other"};

/* One resource (or channel) and its lanes: lane k is a thread whose last span ended at
 * end[k]; a span goes to the first lane free at its start. */
typedef struct track {
    char name[SIM_NAME_MAX];
    int pid;
    int n_lanes, cap_lanes;
    double *end;
} track;

struct sim_export_trace {
    ws_atomic_file af;
    sim_export_trace_opts o;
    char title[256];
    track *tr;
    int n_tr, cap_tr;
    size_t *idx, idx_cap; /* sort buffer */
    size_t written, dropped;
};

/* The device a resource or channel name belongs to. */
static int proc_of(const char *name)
{
    static const struct {
        const char *prefix;
        int pid;
    } rules[] = {{"gpu", P_GPU}, {"h2d", P_LINK}, {"d2h", P_LINK}, {"link", P_LINK},
                 {"pcie", P_LINK}, {"cpu", P_CPU}, {"host", P_CPU}, {"mem", P_CPU}};
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (!strncmp(name, rules[i].prefix, strlen(rules[i].prefix)))
            return rules[i].pid;
    return P_OTHER;
}

/* JSON string body of s (without quotes): quote, backslash and control characters
 * escaped, bytes past ASCII written as \u00XX so the output is valid whatever s holds. */
static void json_text(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
}

static double finite_or_0(double v) { return isfinite(v) ? v : 0.0; }

int sim_export_trace_open(const char *path, const sim_export_trace_opts *opts,
                          sim_export_trace **out, ws_err *err)
{
    *out = NULL;
    sim_export_trace *t = calloc(1, sizeof *t);
    if (!t)
        return ws_err_set(err, WS_ENOMEM, "out of memory");
    if (opts)
        t->o = *opts;
    snprintf(t->title, sizeof t->title, "%s", t->o.title ? t->o.title : "");
    t->o.title = t->title;
    int rc = ws_atomic_open(&t->af, path, err);
    if (rc) {
        free(t);
        return rc;
    }
    setvbuf(t->af.f, NULL, _IOFBF, 1 << 20);
    fputs("{\"traceEvents\":[\n", t->af.f);
    *out = t;
    return 0;
}

static void trace_free(sim_export_trace *t)
{
    for (int i = 0; i < t->n_tr; i++)
        free(t->tr[i].end);
    free(t->tr);
    free(t->idx);
    free(t);
}

void sim_export_trace_abort(sim_export_trace *t)
{
    if (!t)
        return;
    ws_atomic_abort(&t->af);
    trace_free(t);
}

int sim_export_trace_full(const sim_export_trace *t)
{
    return t->o.max_spans && t->written >= t->o.max_spans;
}
size_t sim_export_trace_written(const sim_export_trace *t) { return t->written; }
void sim_export_trace_skip(sim_export_trace *t, size_t n) { t->dropped += n; }
size_t sim_export_trace_dropped(const sim_export_trace *t) { return t->dropped; }

/* The track of a resource or channel name, created on first use. */
static track *track_of(sim_export_trace *t, const char *name, ws_err *err)
{
    for (int i = t->n_tr - 1; i >= 0; i--)
        if (!strcmp(t->tr[i].name, name))
            return &t->tr[i];
    if (t->n_tr == t->cap_tr) {
        int cap = t->cap_tr ? 2 * t->cap_tr : 16;
        track *v = realloc(t->tr, (size_t)cap * sizeof *v);
        if (!v) {
            ws_err_set(err, WS_ENOMEM, "out of memory");
            return NULL;
        }
        t->tr = v;
        t->cap_tr = cap;
    }
    track *k = &t->tr[t->n_tr++];
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", name);
    k->pid = proc_of(name);
    return k;
}

/* The lane a span [start, end) takes on track k (lanes are numbered in the order they
 * open), or -1 when out of memory. */
static int lane_of(track *k, double start, double end, ws_err *err)
{
    for (int i = 0; i < k->n_lanes; i++)
        if (k->end[i] <= start) {
            k->end[i] = end;
            return i;
        }
    if (k->n_lanes == k->cap_lanes) {
        int cap = k->cap_lanes ? 2 * k->cap_lanes : 4;
        double *v = realloc(k->end, (size_t)cap * sizeof *v);
        if (!v) {
            ws_err_set(err, WS_ENOMEM, "out of memory");
            return -1;
        }
        k->end = v;
        k->cap_lanes = cap;
    }
    k->end[k->n_lanes] = end;
    return k->n_lanes++;
}

/* A lane's tid: track i owns tids i * 100000 + 1 .., so lanes never collide. */
static int tid_of(const sim_export_trace *t, const track *k, int lane)
{
    return (int)(k - t->tr) * 100000 + lane + 1;
}

static int by_start(const void *a, const void *b, void *ctx)
{
    const sim_span *v = ctx;
    const sim_span *x = &v[*(const size_t *)a], *y = &v[*(const size_t *)b];
    if (x->t_start != y->t_start)
        return x->t_start < y->t_start ? -1 : 1;
    if (x->t_end != y->t_end)
        return x->t_end < y->t_end ? -1 : 1;
    return x->op < y->op ? -1 : x->op > y->op;
}

static void write_span(sim_export_trace *t, const sim_span *s, const track *k, int tid)
{
    FILE *f = t->af.f;
    const char *name = s->label ? s->label : s->res ? s->res : s->channel ? s->channel : "op";
    fputs(t->written ? ",\n{\"name\":\"" : "{\"name\":\"", f);
    json_text(f, name);
    fputs("\",\"cat\":\"", f);
    json_text(f, k->name);
    fprintf(f, "\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{", k->pid,
            tid, finite_or_0(s->t_start) * 1e6, finite_or_0(s->t_end - s->t_start) * 1e6);
    fputs("\"label\":\"", f);
    json_text(f, s->label ? s->label : "");
    fprintf(f, "\",\"op\":%llu,\"tag\":%u,\"user\":%llu,\"width\":%u", (unsigned long long)s->op,
            s->tag, (unsigned long long)s->user, s->width ? s->width : 1);
    if (s->channel) {
        fputs(",\"channel\":\"", f);
        json_text(f, s->channel);
        fprintf(f, "\",\"bytes\":%.17g", finite_or_0(s->bytes));
    }
    fprintf(f, ",\"wait_us\":%.3f}}", finite_or_0(s->t_start - s->t_ready) * 1e6);
}

int sim_export_trace_add(sim_export_trace *t, const sim_timeline *tl, ws_err *err)
{
    if (tl->n > t->idx_cap) {
        size_t *v = realloc(t->idx, tl->n * sizeof *v);
        if (!v)
            return ws_err_set(err, WS_ENOMEM, "out of memory for %zu trace spans", tl->n);
        t->idx = v;
        t->idx_cap = tl->n;
    }
    size_t n = 0;
    for (size_t i = 0; i < tl->n; i++) {
        const sim_span *s = &tl->v[i];
        if (!s->res && !s->channel && !(s->t_end > s->t_start))
            continue; /* a barrier */
        t->idx[n++] = i;
    }
    qsort_r(t->idx, n, sizeof *t->idx, by_start, (void *)tl->v);
    for (size_t j = 0; j < n; j++) {
        const sim_span *s = &tl->v[t->idx[j]];
        if (sim_export_trace_full(t) || (t->o.t_max > 0 && !(s->t_start < t->o.t_max))) {
            t->dropped++;
            continue;
        }
        const char *res = s->res ? s->res : s->channel ? s->channel : "ops";
        track *k = track_of(t, res, err);
        if (!k)
            return WS_ENOMEM;
        int lane = lane_of(k, s->t_start, s->t_end, err);
        if (lane < 0)
            return WS_ENOMEM;
        write_span(t, s, k, tid_of(t, k, lane));
        t->written++;
    }
    if (ferror(t->af.f)) /* errno: the failed write's (a full disk: ENOSPC, EFBIG) */
        return ws_err_set(err, WS_EIO, "%s: cannot write: %s", t->af.path,
                          strerror(errno ? errno : EIO));
    return 0;
}

int sim_export_trace_close(sim_export_trace *t, ws_err *err)
{
    FILE *f = t->af.f;
    int first = t->written == 0;
    /* Process and thread names, and sort orders so the devices read top-down. */
    for (int p = 1; p <= N_PROC; p++) {
        int used = 0;
        for (int i = 0; i < t->n_tr; i++)
            used |= t->tr[i].pid == p && t->tr[i].n_lanes > 0;
        if (!used)
            continue;
        fprintf(f,
                "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"%s\"}}"
                ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":"
                "{\"sort_index\":%d}}",
                first ? "" : ",\n", p, k_proc[p], p, p);
        first = 0;
    }
    for (int i = 0; i < t->n_tr; i++) {
        const track *k = &t->tr[i];
        for (int l = 0; l < k->n_lanes; l++) {
            int tid = tid_of(t, k, l);
            fprintf(f, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                       "\"args\":{\"name\":\"",
                    first ? "" : ",\n", k->pid, tid);
            json_text(f, k->name);
            if (k->n_lanes > 1)
                fprintf(f, " #%d", l);
            fprintf(f, "\"}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                       "\"args\":{\"sort_index\":%d}}",
                    k->pid, tid, tid);
            first = 0;
        }
    }
    fputs("\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"label\":\"modeled\",\"title\":\"", f);
    json_text(f, t->title);
    fprintf(f, "\",\"time\":\"simulated\",\"spans_written\":%zu,\"spans_dropped\":%zu}}\n",
            t->written, t->dropped);
    const int rc = ws_atomic_commit(&t->af, err); /* checks every write, or drops the file */
    trace_free(t);
    return rc;
}

int sim_export_trace_write(const char *path, const sim_timeline *tl,
                           const sim_export_trace_opts *opts, size_t *n_written, ws_err *err)
{
    sim_export_trace *t;
    int rc = sim_export_trace_open(path, opts, &t, err);
    if (rc)
        return rc;
    if ((rc = sim_export_trace_add(t, tl, err))) {
        sim_export_trace_abort(t);
        return rc;
    }
    if (n_written)
        *n_written = t->written;
    return sim_export_trace_close(t, err);
}
