/* import: operator profiles measured elsewhere into a calibration (see import.h). */
#include "import.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "profile.h"
#include "ws_util.h"

/* ---- the fits ----------------------------------------------------------------------------- */

/* The fits an import makes: key op, its form and which rows go into it. */
typedef struct fit_kind {
    const char *op;
    ws_fit_form form;
    int attn;            /* 1: the key has the attention kind */
    int ops[2];          /* the rows' ws_vidur_op (-1: none) */
} fit_kind;

static const fit_kind k_kinds[] = {
    {"attn", WS_FIT_TRANSFER, 1, {WS_VOP_ATTN_DECODE, -1}},
    {"prefill_attn", WS_FIT_SATURATING, 1, {WS_VOP_ATTN_PREFILL, -1}},
    {"gemm", WS_FIT_ROOFLINE, 0, {-1, -1}}, /* every GEMM op */
    {"rmsnorm", WS_FIT_ROOFLINE, 0, {WS_VOP_NORM_IN, WS_VOP_NORM_POST}},
    {"rope", WS_FIT_ROOFLINE, 0, {WS_VOP_ROPE, -1}},
    {"act", WS_FIT_ROOFLINE, 0, {WS_VOP_ACT, -1}},
    {"add", WS_FIT_ROOFLINE, 0, {WS_VOP_ADD, -1}},
};
#define N_KINDS ((int)(sizeof k_kinds / sizeof k_kinds[0]))

static int in_kind(const fit_kind *k, int op)
{
    if (!strcmp(k->op, "gemm"))
        return ws_vidur_op_group(op) == WS_VIDUR_GEMM;
    return op == k->ops[0] || op == k->ops[1];
}

/* A row as a fit point, with runtime/cost.h's work: decode attention F and KV bytes; prefill
 * F over the causal pairs and x = keys per query (in `bytes`, the saturating form's x); a
 * GEMM's F and B; an elementwise op's bytes. elem: bytes per element. */
static ws_fit_point row_point(const ws_vidur_row *w, double elem)
{
    double f_tok, b_tok;
    ws_cost_gqa_terms(w->q_heads, w->kv_heads, w->head_dim, elem, &f_tok, &b_tok);
    ws_fit_point p = {.t = w->t};
    switch (w->op) {
    case WS_VOP_ATTN_DECODE:
        p.flops = f_tok * w->batch * (double)w->kv;
        p.bytes = b_tok * w->batch * (double)w->kv;
        break;
    case WS_VOP_ATTN_PREFILL: {
        const double pairs = w->batch * ws_cost_causal_pairs(w->chunk, w->kv);
        p.flops = f_tok * pairs;
        p.bytes = pairs / ((double)w->batch * w->chunk);
        break;
    }
    case WS_VOP_QKV:
    case WS_VOP_OPROJ:
    case WS_VOP_UP:
    case WS_VOP_DOWN: ws_cost_gemm_work(w->M, w->K, w->N, elem, &p.flops, &p.bytes); break;
    case WS_VOP_NORM_IN:
    case WS_VOP_NORM_POST: p.bytes = ws_cost_norm_bytes(w->M, w->K, elem); break;
    case WS_VOP_ROPE: p.bytes = ws_cost_rope_bytes(w->M, w->K, w->N, elem); break;
    case WS_VOP_ACT: p.bytes = ws_cost_act_bytes(w->M, w->K, elem); break;
    default: p.bytes = ws_cost_add_bytes(w->M, w->K, elem); break;
    }
    if (ws_vidur_op_group(w->op) == WS_VIDUR_ELEM && w->M >= 1)
        p.flops = p.bytes / w->M; /* the roofline's other side: one row's bytes */
    return p;
}

static int cmp_dbl(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The GPU measured as its datasheet states it: the limits of a physical fit. */
typedef struct gpu_limits {
    double peak;          /* flop/s at the data's precision (0: not stated) */
    char peak_key[24];    /* its datasheet key, fp16_flops */
    double hbm;           /* memory bandwidth, bytes/s (0: not stated) */
} gpu_limits;

/* Why fit f (nh held-out rows) is not used, into why ("" when it is): not converged, a
 * fixed cost or a rate that no GPU of limits g has, a rate not positive, the held-out rows'
 * median error over the calibrator's bound. */
static void not_used(const ws_import_fit *f, int nh, const gpu_limits *g, char *why, size_t cap)
{
    const ws_fit_result *r = &f->r;
    const double m = WS_IMPORT_RATE_MARGIN;
    const int sat = r->form == WS_FIT_SATURATING, has_p = r->form != WS_FIT_TRANSFER,
              has_w = !sat;
    why[0] = '\0';
    if (!r->converged)
        snprintf(why, cap, "the fit did not converge");
    else if (!isfinite(r->c0) || (has_p && !isfinite(r->peak_flops)) ||
             (has_w && !isfinite(r->bandwidth)))
        snprintf(why, cap, "a parameter is not finite");
    else if (r->c0 > WS_IMPORT_C0_MAX_S)
        snprintf(why, cap, "fixed cost %.3g s above %g s", r->c0, WS_IMPORT_C0_MAX_S);
    else if ((has_p && !(r->peak_flops > 0)) || (has_w && !(r->bandwidth > 0)) ||
             (sat && !(r->factor >= 0)))
        snprintf(why, cap, "a fitted rate is not positive");
    else if (has_p && !f->per_row && g->peak > 0 && r->peak_flops > m * g->peak)
        snprintf(why, cap, "peak %.3g flop/s above %gx the datasheet's %s %.3g", r->peak_flops, m,
                 g->peak_key, g->peak);
    else if (has_p && f->per_row && g->hbm > 0 && r->peak_flops > m * g->hbm)
        snprintf(why, cap, "one row's %.3g B/s above %gx the datasheet's hbm_bw %.3g",
                 r->peak_flops, m, g->hbm);
    else if (has_w && g->hbm > 0 && r->bandwidth > m * g->hbm)
        snprintf(why, cap, "bandwidth %.3g B/s above %gx the datasheet's hbm_bw %.3g",
                 r->bandwidth, m, g->hbm);
    else if (!nh)
        snprintf(why, cap, "no held-out rows");
    else if (!(f->ho_median_pct <= WS_FIT_GOOD_MAPE_PCT))
        snprintf(why, cap, "held-out median %.1f%% above %g%%", f->ho_median_pct,
                 WS_FIT_GOOD_MAPE_PCT);
}

/* Fits kind k over the training rows; the held-out rows' errors into f. */
static int fit_kind_rows(const ws_vidur_rows *rows, const fit_kind *k, double elem,
                         const gpu_limits *lim, ws_import_fit *f, ws_err *err)
{
    ws_fit_point *tr = malloc(sizeof *tr * (size_t)(rows->n + 1)),
                 *ho = malloc(sizeof *ho * (size_t)(rows->n + 1));
    double *ape = malloc(sizeof *ape * (size_t)(rows->n + 1));
    if (!tr || !ho || !ape) {
        free(tr);
        free(ho);
        free(ape);
        return ws_err_set(err, WS_ENOMEM, "calib import: out of memory");
    }
    int nt = 0, nh = 0;
    for (int i = 0; i < rows->n; i++) {
        const ws_vidur_row *w = &rows->v[i];
        if (!in_kind(k, w->op))
            continue;
        if (w->heldout)
            ho[nh++] = row_point(w, elem);
        else
            tr[nt++] = row_point(w, elem);
    }
    f->n_train = nt;
    f->n_heldout = nh;
    f->per_row = k->ops[0] >= 0 && ws_vidur_op_group(k->ops[0]) == WS_VIDUR_ELEM;
    int rc = k->form == WS_FIT_TRANSFER     ? ws_fit_transfer(tr, nt, &f->r, err)
             : k->form == WS_FIT_SATURATING ? ws_fit_saturating(tr, nt, &f->r, err)
                                            : ws_fit_roofline(tr, nt, 0, 0, &f->r, err);
    if (!rc) {
        double sum = 0;
        for (int i = 0; i < nh; i++) {
            const double m = ws_fit_predict(&f->r, ho[i].flops, ho[i].bytes);
            sum += ape[i] = 100.0 * fabs(m - ho[i].t) / ho[i].t;
        }
        qsort(ape, (size_t)nh, sizeof *ape, cmp_dbl);
        f->ho_mape_pct = nh ? sum / nh : NAN;
        f->ho_median_pct = nh ? (nh % 2 ? ape[nh / 2] : 0.5 * (ape[nh / 2 - 1] + ape[nh / 2])) : NAN;
        f->ho_worst_pct = nh ? ape[nh - 1] : NAN;
        /* Used when converged with positive, physical rates and the held-out rows' median
         * error is within the calibrator's bound (import.h says why the median). */
        char why[sizeof f->why];
        not_used(f, nh, lim, why, sizeof why);
        memcpy(f->why, why, sizeof why);
        f->r.good = !why[0];
        snprintf(f->r.note, sizeof f->r.note,
                 "%s%s%s; held-out rows (every %dth, %d): MAPE %.1f%%, median %.1f%%, worst %.1f%%",
                 f->r.good ? "used: held-out median within 10%" : "not used", why[0] ? ": " : "",
                 why, WS_VIDUR_HOLDOUT_EVERY, nh, f->ho_mape_pct, f->ho_median_pct,
                 f->ho_worst_pct);
    }
    free(tr);
    free(ho);
    free(ape);
    return rc;
}

void ws_import_key_name(const ws_calib_key *k, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s.%s%s%s%s%s", k->device, k->op, *k->attn_kind ? "." : "", k->attn_kind,
             *k->dtype ? "." : "", k->dtype);
}

/* ---- the run ------------------------------------------------------------------------------ */

/* A sample's params, one JSON object text of at most cap - 1 bytes: the file's name (at most
 * 48 bytes, cut where it must be to fit, never inside a character; '?' for each byte of a
 * name that is not UTF-8) and the row's line, operation, shape and held-out mark. */
static void sample_params(const char *base, const ws_vidur_row *w, char *out, size_t cap)
{
    char ascii[49];
    size_t len = strlen(base) > 48 ? 48 : strlen(base);
    out[0] = '\0';
    for (;;) {
        while (len && ((unsigned char)base[len] & 0xC0) == 0x80)
            len--; /* base[len], the first byte left out, must start a character */
        json_t *name = json_stringn(base, len);
        if (!name) {
            for (size_t i = 0; i < len; i++)
                ascii[i] = (unsigned char)base[i] < 0x80 ? base[i] : '?';
            name = json_stringn(ascii, len);
        }
        json_t *o =
            w->op <= WS_VOP_ATTN_PREFILL
                ? json_pack("{s:o, s:i, s:s, s:i, s:i, s:i, s:i}", "file", name, "line", w->line,
                            "op", ws_vidur_op_name(w->op), "batch", w->batch, "kv", w->kv,
                            "chunk", w->chunk, "heldout", w->heldout)
                : json_pack("{s:o, s:i, s:s, s:I, s:I, s:I, s:i, s:i}", "file", name, "line",
                            w->line, "op", ws_vidur_op_name(w->op), "M", (json_int_t)w->M, "K",
                            (json_int_t)w->K, "N", (json_int_t)w->N, "tp", w->tp, "heldout",
                            w->heldout);
        char *t = o ? json_dumps(o, JSON_PRESERVE_ORDER) : NULL;
        json_decref(o);
        const int fits = t && strlen(t) < cap;
        if (fits || !len)
            snprintf(out, cap, "%s", fits ? t : "{}");
        free(t);
        if (fits || !len)
            return;
        len = len > 8 ? len - 8 : 0;
    }
}

/* The rows as samples of the run (all of them, the held-out ones marked). */
static int add_samples(ws_calib_run *run, const ws_vidur_rows *rows, const ws_import_fit *fits,
                       const int *kind_of_fit, int n_fits, const ws_calibdb_source *files,
                       int n_files, double elem, ws_err *err)
{
    int file = 0, left = n_files ? files[0].rows : 0;
    for (int i = 0; i < rows->n; i++) {
        while (left == 0 && file + 1 < n_files)
            left = files[++file].rows;
        left--;
        const ws_vidur_row *w = &rows->v[i];
        int f = -1;
        for (int j = 0; j < n_fits && f < 0; j++)
            if (in_kind(&k_kinds[kind_of_fit[j]], w->op))
                f = j;
        if (f < 0)
            continue;
        ws_fit_point p = row_point(w, elem);
        ws_calib_sample x = {.key = fits[f].key, .flops = p.flops, .bytes = p.bytes,
                             .repeats = 1, .t_median = w->t, .t_min = w->t_min,
                             .t_max = w->t_max};
        if (w->op == WS_VOP_ATTN_PREFILL) { /* the samples table keeps bytes: K/V read */
            double f_tok, b_tok;
            ws_cost_gqa_terms(w->q_heads, w->kv_heads, w->head_dim, elem, &f_tok, &b_tok);
            x.bytes = b_tok * w->batch * ((double)w->kv + w->chunk);
        }
        const char *base = strrchr(files[file].path, '/');
        sample_params(base ? base + 1 : files[file].path, w, x.params, sizeof x.params);
        int rc = ws_calib_add_sample(run, &x, err);
        if (rc)
            return rc;
    }
    return 0;
}

static void progress(const ws_import_opts *o, double frac, const char *what)
{
    if (o->progress)
        o->progress(o->progress_ctx, frac, what);
}

/* One import as it goes: the options with their defaults filled in, the GPU, the rows. */
typedef struct import_job {
    const ws_import_opts *o;
    const char *gpu, *dtype, *by, *tool;
    char file_tool[64]; /* the files' profile_method, escaped */
    double elem;   /* bytes per element of dtype */
    gpu_limits lim;
    double mem;    /* the GPU's memory, bytes (0: the profile does not say) */
    ws_vidur_rows rows;
    int kind_of_fit[WS_IMPORT_MAX_FITS]; /* k_kinds index of each fit */
} import_job;

/* Whether the profile `name` may be written: not stored, or an earlier import's GPU profile
 * (unless keep: an explicit name must not replace one without being asked to). */
static int import_name_free(ws_store *s, const char *name, int keep, ws_err *err)
{
    ws_profile_info pi;
    int rc = ws_profile_info_get(s, name, &pi, err);
    if (rc || !pi.found)
        return rc;
    if (strcmp(pi.kind, "gpu"))
        return ws_err_set(err, WS_EINVAL, "calib import: profile '%s' exists and is a %s profile, "
                          "not a GPU's: choose another --name", name, pi.kind);
    if (!pi.calibrated)
        return ws_err_set(err, WS_EINVAL, "calib import: profile '%s' is a datasheet profile: "
                          "choose another --name", name);
    if (strcmp(pi.run_mode, "import"))
        return ws_err_set(err, WS_EINVAL, "calib import: profile '%s' is a calibration measured "
                          "here, not an import: choose another --name", name);
    if (keep)
        return ws_err_set(err, WS_EINVAL, "calib import: profile '%s' exists (an earlier import): "
                          "--replace replaces it", name);
    return 0;
}

/* The GPU measured: a datasheet GPU profile that names its device; the profile written. */
static int import_gpu(ws_store *s, import_job *j, ws_import_result *res, ws_err *err)
{
    char devs[4][128];
    int n_dev;
    int rc = ws_profile_devices(s, j->gpu, devs, 4, &n_dev, err);
    if (rc)
        return rc;
    if (!n_dev)
        return ws_err_set(err, WS_EINVAL,
                          "%s: datasheet profile '%s' lists no device name to calibrate",
                          ws_store_path(s), j->gpu);
    ws_profile dp;
    if ((rc = ws_profile_load(s, j->gpu, &dp, err)))
        return rc;
    const int is_gpu = !strcmp(dp.kind, "gpu");
    ws_profile_value(&dp, "mem_bytes", &j->mem, NULL);
    /* the limits as the datasheet states them, whatever a calibration lays over them */
    snprintf(j->lim.peak_key, sizeof j->lim.peak_key, "%s_flops", j->dtype);
    const ws_profile_param *pk = ws_profile_get(&dp, j->lim.peak_key),
                           *bw = ws_profile_get(&dp, "hbm_bw");
    j->lim.peak = pk && pk->source == WS_SOURCE_DATASHEET ? pk->value : 0;
    j->lim.hbm = bw && bw->source == WS_SOURCE_DATASHEET ? bw->value : 0;
    ws_profile_free(&dp);
    if (!is_gpu)
        return ws_err_set(err, WS_EINVAL, "calib import: '%s' is a host profile, not a GPU's",
                          j->gpu);
    snprintf(res->gpu, sizeof res->gpu, "%s", j->gpu);
    snprintf(res->device, sizeof res->device, "%s", devs[0]);
    const int named = j->o->name && *j->o->name;
    if (named)
        snprintf(res->profile, sizeof res->profile, "%s", j->o->name);
    else
        snprintf(res->profile, sizeof res->profile, "imported:%s", j->gpu);
    return import_name_free(s, res->profile, named && !j->o->replace, err);
}

/* Every file's provenance past what ws_import_read found: who, with what, on which GPU, at
 * which precision, under which licence. */
static void import_provenance(import_job *j, ws_import_result *res)
{
    const ws_import_opts *o = j->o;
    const char *method = j->rows.method;
    ws_text_escape(method, j->file_tool, sizeof j->file_tool);
    j->by = o->by && *o->by ? o->by : "Vidur (microsoft/vidur)";
    j->tool = o->tool && *o->tool ? o->tool
              : !strcmp(method, "ProfileMethod.KINETO") || !method[0] ? "PyTorch Kineto profiler"
                                                                        : j->file_tool;
    for (int i = 0; i < res->n_files; i++) {
        ws_calibdb_source *f = &res->files[i];
        snprintf(f->measured_by, sizeof f->measured_by, "%s", j->by);
        snprintf(f->tool, sizeof f->tool, "%s", j->tool);
        snprintf(f->gpu, sizeof f->gpu, "%.80s (%.40s)", res->device, j->gpu);
        snprintf(f->dtype, sizeof f->dtype, "%s", j->dtype);
        if (o->licence && *o->licence)
            snprintf(f->licence, sizeof f->licence, "%s", o->licence);
        else if (!f->licence[0])
            snprintf(f->licence, sizeof f->licence, "not stated (no LICENSE beside the file)");
    }
    res->rows = j->rows.n;
    for (int i = 0; i < j->rows.n; i++)
        res->heldout += j->rows.v[i].heldout;
}

/* One fit per operation kind the training rows hold (at least 3 rows each). */
static int import_fits(import_job *j, ws_import_result *res, ws_err *err)
{
    const ws_vidur_rows *rows = &j->rows;
    /* The attention kind of the decode rows: grouped unless every q head has its own KV. */
    const char *kind = "gqa";
    for (int i = 0; i < rows->n; i++)
        if (rows->v[i].op <= WS_VOP_ATTN_PREFILL) {
            kind = rows->v[i].q_heads == rows->v[i].kv_heads ? "mha" : "gqa";
            break;
        }
    int rc;
    for (int k = 0; k < N_KINDS; k++) {
        int n = 0;
        for (int i = 0; i < rows->n; i++)
            n += !rows->v[i].heldout && in_kind(&k_kinds[k], rows->v[i].op);
        if (!n)
            continue;
        ws_import_fit *f = &res->fits[res->n_fits];
        memset(f, 0, sizeof *f);
        snprintf(f->key.device, sizeof f->key.device, "gpu");
        snprintf(f->key.op, sizeof f->key.op, "%s", k_kinds[k].op);
        snprintf(f->key.dtype, sizeof f->key.dtype, "%s", j->dtype);
        snprintf(f->key.attn_kind, sizeof f->key.attn_kind, "%s", k_kinds[k].attn ? kind : "");
        char what[96], key[96];
        ws_import_key_name(&f->key, key, sizeof key);
        snprintf(what, sizeof what, "fitting %.64s (%d rows)", key, n);
        progress(j->o, 0.1 + 0.8 * k / N_KINDS, what);
        if (n < 3)
            return ws_err_set(err, WS_EINVAL, "calib import: %d training rows for %s, at least 3",
                              n, key);
        if ((rc = fit_kind_rows(rows, &k_kinds[k], j->elem, &j->lim, f, err)))
            return rc;
        j->kind_of_fit[res->n_fits++] = k;
    }
    if (!res->n_fits)
        return ws_err_set(err, WS_EINVAL, "calib import: no operator rows to fit");
    return 0;
}

/* The run's header: its host is the GPU alone, its note says what was imported. */
static void import_run_head(const import_job *j, const ws_import_result *res, ws_calib_run *run)
{
    ws_host_fp *h = &run->host;
    snprintf(h->cpu_model, sizeof h->cpu_model, "imported: %.80s", j->by);
    snprintf(h->isa, sizeof h->isa, "none (GPU measurements imported)");
    h->has_gpu = 1;
    snprintf(h->gpu_name, sizeof h->gpu_name, "%s", res->device);
    h->gpu_mem_bytes = j->mem;
    ws_host_fp_hash(h);
    snprintf(run->mode, sizeof run->mode, "import");
    snprintf(run->scope, sizeof run->scope, "gpu");
    char backend[64];
    ws_text_escape(j->rows.backend, backend, sizeof backend);
    snprintf(run->note, sizeof run->note,
             "imported: %.60s, %.40s, %s%s%.60s, %d files, %d rows (%d held out)", j->by, j->tool,
             j->dtype, backend[0] ? ", " : "", backend, res->n_files, j->rows.n, res->heldout);
    snprintf(run->gpu_profile, sizeof run->gpu_profile, "%s", res->profile);
    ws_utc_now(run->started_at, sizeof run->started_at);
    snprintf(run->finished_at, sizeof run->finished_at, "%s", run->started_at);
}

/* The rows as samples, the fits and the sources as one calibration run, stored. */
static int import_store(ws_store *s, const import_job *j, ws_import_result *res, ws_err *err)
{
    ws_calib_run run;
    ws_calib_run_init(&run);
    progress(j->o, 0.9, "storing the run");
    import_run_head(j, res, &run);
    run.sources = res->files;
    run.n_sources = res->n_files;
    int rc = add_samples(&run, &j->rows, res->fits, j->kind_of_fit, res->n_fits, res->files,
                         res->n_files, j->elem, err);
    for (int i = 0; i < res->n_fits && !rc; i++) {
        ws_calib_fit cf = {.key = res->fits[i].key, .r = res->fits[i].r};
        if (run.n_fits == run.cap_fits) {
            const int cap = run.cap_fits ? 2 * run.cap_fits : 8;
            ws_calib_fit *nf = realloc(run.fits, sizeof *nf * (size_t)cap);
            if (!nf) {
                rc = ws_err_set(err, WS_ENOMEM, "calib import: out of memory");
                break;
            }
            run.fits = nf;
            run.cap_fits = cap;
        }
        run.fits[run.n_fits++] = cf;
    }
    if (!rc)
        rc = ws_calib_store(s, &run, &res->run_id, err);
    run.sources = NULL;
    ws_calib_run_free(&run);
    return rc;
}

int ws_import_dtype(const char *name, ws_dtype *dt, ws_err *err)
{
    const char *n = name && *name ? name : "fp16";
    if (ws_dtype_parse(n, dt) || (*dt != WS_DT_FP16 && *dt != WS_DT_BF16 && *dt != WS_DT_FP32))
        return ws_err_set(err, WS_EINVAL, "precision '%s' (fp16, bf16 or fp32)", n);
    return 0;
}

/* Text given for the provenance: no control character (it is stored and printed). */
static int plain_text(const char *what, const char *v, ws_err *err)
{
    for (const unsigned char *p = (const unsigned char *)(v ? v : ""); *p; p++)
        if (*p < 0x20 || *p == 0x7f || (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
            return ws_err_set(err, WS_EINVAL, "calib import: %s holds a control character "
                              "(byte %ld)", what, (long)(p - (const unsigned char *)v) + 1);
    return 0;
}

int ws_calib_import(ws_store *s, const ws_import_opts *o, ws_import_result *res, ws_err *err)
{
    memset(res, 0, sizeof *res);
    import_job j = {.o = o,
                    .gpu = o->gpu && *o->gpu ? o->gpu : "a100-80gb-sxm",
                    .dtype = o->dtype && *o->dtype ? o->dtype : "fp16"};
    ws_dtype dt;
    int rc = ws_import_dtype(j.dtype, &dt, err);
    if (rc) {
        ws_err_prefix(err, "calib import");
        return rc;
    }
    if ((rc = plain_text("--name", o->name, err)) || (rc = plain_text("--by", o->by, err)) ||
        (rc = plain_text("--tool", o->tool, err)) || (rc = plain_text("--licence", o->licence, err)))
        return rc;
    j.elem = ws_dtype_size(dt);
    rc = import_gpu(s, &j, res, err);
    if (rc)
        return rc;
    progress(o, 0.0, "reading the profiles");
    rc = ws_import_read(o->paths, o->n_paths, &j.rows, res->files, &res->n_files, err);
    if (!rc) {
        import_provenance(&j, res);
        rc = import_fits(&j, res, err);
    }
    if (!rc)
        rc = import_store(s, &j, res, err);
    ws_vidur_rows_free(&j.rows);
    if (!rc)
        progress(o, 1.0, "done");
    return rc;
}
