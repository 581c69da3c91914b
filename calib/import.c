/* import: operator profiles measured elsewhere into a calibration (see import.h). */
#include "import.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cost.h"
#include "profile.h"
#include "ws_util.h"

#define FILE_MAX_BYTES (1LL << 30) /* a profile larger than this is not one */

/* ---- reading the files ------------------------------------------------------------------ */

/* The whole file into *buf (NUL-terminated), its SHA-256 in hex. */
static int slurp(const char *path, char **buf, size_t *len, char hex[65], ws_err *err)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ws_err_set(err, WS_EIO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return ws_err_set(err, WS_EIO, "%s: not a regular file", path);
    }
    if (st.st_size > FILE_MAX_BYTES) {
        close(fd);
        return ws_err_set(err, WS_EINVAL, "%s: %lld bytes, more than a profile (%lld) has", path,
                          (long long)st.st_size, FILE_MAX_BYTES);
    }
    char *b = malloc((size_t)st.st_size + 1);
    if (!b) {
        close(fd);
        return ws_err_set(err, WS_ENOMEM, "%s: out of memory", path);
    }
    size_t n = 0;
    while (n < (size_t)st.st_size) {
        const ssize_t r = read(fd, b + n, (size_t)st.st_size - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            const int e = r < 0 ? errno : EIO;
            free(b);
            close(fd);
            return ws_err_set(err, WS_EIO, "%s: %s", path, r < 0 ? strerror(e) : "file shrank");
        }
        n += (size_t)r;
    }
    close(fd);
    b[n] = '\0';
    struct sha256_ctx h;
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_init(&h);
    sha256_update(&h, n, (const uint8_t *)b);
    sha256_digest(&h, sizeof d, d);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    *buf = b;
    *len = n;
    return 0;
}

/* The licence beside `path`: the first line of LICENSE (or LICENSE.txt, LICENSE.md, COPYING)
 * in its folder and its first "Copyright" line, e.g. "MIT License, Copyright (c) Microsoft
 * Corporation."; "" when there is none. */
static void licence_beside(const char *path, char *out, size_t cap)
{
    static const char *const names[] = {"LICENSE", "LICENSE.txt", "LICENSE.md", "COPYING"};
    out[0] = '\0';
    const char *slash = strrchr(path, '/');
    const int dl = slash ? (int)(slash - path) : 1;
    const char *dir = slash ? path : ".";
    for (int i = 0; i < 4 && !out[0]; i++) {
        char p[1200];
        snprintf(p, sizeof p, "%.*s/%s", dl, dir, names[i]);
        FILE *f = fopen(p, "r");
        if (!f)
            continue;
        char line[256], first[160] = "", copy[160] = "";
        for (int k = 0; k < 40 && fgets(line, sizeof line, f); k++) {
            char *s = line;
            while (*s == ' ' || *s == '\t')
                s++;
            s[strcspn(s, "\r\n")] = '\0';
            if (!*s)
                continue;
            if (!first[0])
                snprintf(first, sizeof first, "%.100s", s);
            else if (!copy[0] && !strncmp(s, "Copyright", 9))
                snprintf(copy, sizeof copy, "%.100s", s);
        }
        fclose(f);
        if (first[0])
            snprintf(out, cap, "%.60s%s%.70s (%s)", first, copy[0] ? ", " : "", copy, names[i]);
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.csv files of folder `dir`, in name order, appended to list (paths owned). */
static int folder_csvs(const char *dir, char **list, int *n, int max, ws_err *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return ws_err_set(err, WS_EIO, "%s: %s", dir, strerror(errno));
    const int n0 = *n;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        const size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".csv") || e->d_name[0] == '.')
            continue;
        if (*n == max) {
            rc = ws_err_set(err, WS_EINVAL, "%s: more than %d profile files", dir, max);
            break;
        }
        char *p = malloc(strlen(dir) + l + 2);
        if (!p) {
            rc = ws_err_set(err, WS_ENOMEM, "out of memory");
            break;
        }
        sprintf(p, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", e->d_name);
        list[(*n)++] = p;
    }
    closedir(d);
    if (!rc && *n == n0)
        rc = ws_err_set(err, WS_ENOTFOUND, "%s: no .csv files in the folder", dir);
    if (!rc)
        qsort(list + n0, (size_t)(*n - n0), sizeof *list, cmp_str);
    return rc;
}

/* What a file measured, from its rows [r0, r1). */
static void describe(const ws_vidur_rows *rows, int r0, int r1, const char *path, char *out,
                     size_t cap)
{
    int n[WS_VIDUR_GROUPS] = {0};
    for (int i = r0; i < r1; i++)
        n[ws_vidur_op_group(rows->v[i].op)]++;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (!strcmp(rows->kind, "attention"))
        snprintf(out, cap, "attention: %d decode and %d prefill rows (%.60s)",
                 n[WS_VIDUR_DECODE_ATTN], n[WS_VIDUR_PREFILL_ATTN],
                 rows->backend[0] ? rows->backend : "backend not stated");
    else
        snprintf(out, cap, "a dense layer's operations (%.60s): %d GEMM and %d elementwise rows",
                 base, n[WS_VIDUR_GEMM], n[WS_VIDUR_ELEM]);
}

int ws_import_read(const char *const *paths, int n_paths, ws_vidur_rows *rows,
                   ws_calibdb_source *files, int *n_files, ws_err *err)
{
    *n_files = 0;
    char *list[WS_IMPORT_MAX_FILES];
    int n = 0, rc = 0;
    if (n_paths < 1)
        return ws_err_set(err, WS_EINVAL, "calib import: no profile files or folders given");
    for (int i = 0; i < n_paths && !rc; i++) {
        struct stat st;
        if (stat(paths[i], &st))
            rc = ws_err_set(err, WS_EIO, "%s: %s", paths[i], strerror(errno));
        else if (S_ISDIR(st.st_mode))
            rc = folder_csvs(paths[i], list, &n, WS_IMPORT_MAX_FILES, err);
        else if (n == WS_IMPORT_MAX_FILES)
            rc = ws_err_set(err, WS_EINVAL, "calib import: more than %d profile files",
                            WS_IMPORT_MAX_FILES);
        else if (!(list[n] = strdup(paths[i])))
            rc = ws_err_set(err, WS_ENOMEM, "out of memory");
        else
            n++;
    }
    for (int i = 0; i < n && !rc; i++) {
        ws_calibdb_source *f = &files[i];
        memset(f, 0, sizeof *f);
        char *text = NULL;
        size_t len = 0;
        if ((rc = slurp(list[i], &text, &len, f->sha256, err)))
            break;
        const int r0 = rows->n;
        rc = ws_vidur_parse(text, len, list[i], rows, err);
        free(text);
        if (rc)
            break;
        snprintf(f->path, sizeof f->path, "%s", list[i]);
        f->bytes = (long long)len;
        f->rows = rows->n - r0;
        describe(rows, r0, rows->n, list[i], f->what, sizeof f->what);
        licence_beside(list[i], f->licence, sizeof f->licence);
        (*n_files)++;
    }
    for (int i = 0; i < n; i++)
        free(list[i]);
    return rc;
}

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

/* Fits kind k over the training rows; the held-out rows' errors into f. */
static int fit_kind_rows(const ws_vidur_rows *rows, const fit_kind *k, double elem,
                         ws_import_fit *f, ws_err *err)
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
        /* Used when converged with positive rates and the held-out rows' median error is
         * within the calibrator's bound (import.h says why the median). */
        const int rates = f->r.form == WS_FIT_SATURATING
                              ? f->r.peak_flops > 0 && f->r.factor >= 0
                              : f->r.bandwidth > 0 && (f->r.form == WS_FIT_TRANSFER ||
                                                       f->r.peak_flops > 0);
        f->r.good = f->r.converged && rates && nh > 0 && f->ho_median_pct <= WS_FIT_GOOD_MAPE_PCT;
        snprintf(f->r.note, sizeof f->r.note,
                 "%s; held-out rows (every %dth, %d): MAPE %.1f%%, median %.1f%%, worst %.1f%%",
                 f->r.good ? "used: held-out median within 10%" : "not used", WS_VIDUR_HOLDOUT_EVERY,
                 nh, f->ho_mape_pct, f->ho_median_pct, f->ho_worst_pct);
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
        base = base ? base + 1 : files[file].path;
        if (w->op <= WS_VOP_ATTN_PREFILL)
            snprintf(x.params, sizeof x.params,
                     "{\"file\": \"%.48s\", \"line\": %d, \"op\": \"%s\", \"batch\": %d, "
                     "\"kv\": %d, \"chunk\": %d, \"heldout\": %d}",
                     base, w->line, ws_vidur_op_name(w->op), w->batch, w->kv, w->chunk,
                     w->heldout);
        else
            snprintf(x.params, sizeof x.params,
                     "{\"file\": \"%.48s\", \"line\": %d, \"op\": \"%s\", \"M\": %.0f, "
                     "\"K\": %.0f, \"N\": %.0f, \"tp\": %d, \"heldout\": %d}",
                     base, w->line, ws_vidur_op_name(w->op), w->M, w->K, w->N, w->tp,
                     w->heldout);
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
    double elem;   /* bytes per element of dtype */
    double mem;    /* the GPU's memory, bytes (0: the profile does not say) */
    ws_vidur_rows rows;
    int kind_of_fit[WS_IMPORT_MAX_FITS]; /* k_kinds index of each fit */
} import_job;

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
    ws_profile_free(&dp);
    if (!is_gpu)
        return ws_err_set(err, WS_EINVAL, "calib import: '%s' is a host profile, not a GPU's",
                          j->gpu);
    snprintf(res->gpu, sizeof res->gpu, "%s", j->gpu);
    snprintf(res->device, sizeof res->device, "%s", devs[0]);
    if (j->o->name && *j->o->name)
        snprintf(res->profile, sizeof res->profile, "%s", j->o->name);
    else
        snprintf(res->profile, sizeof res->profile, "imported:%s", j->gpu);
    return 0;
}

/* Every file's provenance past what ws_import_read found: who, with what, on which GPU, at
 * which precision, under which licence. */
static void import_provenance(import_job *j, ws_import_result *res)
{
    const ws_import_opts *o = j->o;
    const char *method = j->rows.method;
    j->by = o->by && *o->by ? o->by : "Vidur (microsoft/vidur)";
    j->tool = o->tool && *o->tool ? o->tool
              : !strcmp(method, "ProfileMethod.KINETO") || !method[0] ? "PyTorch Kineto profiler"
                                                                        : method;
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
        if ((rc = fit_kind_rows(rows, &k_kinds[k], j->elem, f, err)))
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
    snprintf(run->note, sizeof run->note,
             "imported: %.60s, %.40s, %s%s%.60s, %d files, %d rows (%d held out)", j->by, j->tool,
             j->dtype, j->rows.backend[0] ? ", " : "", j->rows.backend, res->n_files, j->rows.n,
             res->heldout);
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

int ws_calib_import(ws_store *s, const ws_import_opts *o, ws_import_result *res, ws_err *err)
{
    memset(res, 0, sizeof *res);
    import_job j = {.o = o,
                    .gpu = o->gpu && *o->gpu ? o->gpu : "a100-80gb-sxm",
                    .dtype = o->dtype && *o->dtype ? o->dtype : "fp16"};
    ws_dtype dt;
    if (ws_dtype_parse(j.dtype, &dt) || (dt != WS_DT_FP16 && dt != WS_DT_BF16 && dt != WS_DT_FP32))
        return ws_err_set(err, WS_EINVAL, "calib import: precision '%s' (fp16, bf16 or fp32)",
                          j.dtype);
    j.elem = ws_dtype_size(dt);
    int rc = import_gpu(s, &j, res, err);
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
