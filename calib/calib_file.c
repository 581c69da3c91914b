/* calib_file: a calibration's samples as a file; loading refits them (see calib_file.h). */
#include "calib_file.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cost.h"
#include "import.h"
#include "profile.h"
#include "ws_atomic.h"
#include "ws_util.h"

/* ---- export ----------------------------------------------------------------------------- */

static json_t *jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *export_run(ws_store *s, long long id, ws_err *err)
{
    ws_calibdb_run run;
    ws_calibdb_host h;
    if (ws_calibdb_get_run(s, id, &run, &h, err))
        return NULL;
    ws_calibdb_source *src = NULL;
    int n_src = 0;
    if (ws_calibdb_get_sources(s, run.id, &src, &n_src, err))
        return NULL;
    free(src);
    if (n_src) {
        ws_err_set(err, WS_EINVAL,
                   "calib export: run %lld was imported from operator profiles (calib import): "
                   "keep those files instead",
                   run.id);
        return NULL;
    }
    ws_calibdb_sample *x = NULL;
    int n = 0;
    if (ws_calibdb_get_samples(s, run.id, NULL, &x, &n, err))
        return NULL;
    json_t *r = json_object(), *host = json_object(), *samples = json_array();
    json_object_set_new(host, "fingerprint", json_string(h.fingerprint));
    json_object_set_new(host, "cpu_model", json_string(h.cpu_model));
    json_object_set_new(host, "cpu_cores", json_integer(h.cpu_cores));
    json_object_set_new(host, "mem_bytes", jnum(h.mem_bytes));
    json_object_set_new(host, "isa", json_string(h.isa));
    if (h.has_gpu) {
        json_object_set_new(host, "gpu_name", json_string(h.gpu_name));
        json_object_set_new(host, "gpu_cc", json_string(h.gpu_cc));
        json_object_set_new(host, "gpu_mem_bytes", jnum(h.gpu_mem_bytes));
        json_object_set_new(host, "gpu_driver", json_string(h.gpu_driver));
        json_object_set_new(host, "pcie_link", json_string(h.pcie_link));
    }
    json_object_set_new(r, "run", json_integer(run.id));
    json_object_set_new(r, "tool_version", json_string(run.tool_version));
    json_object_set_new(r, "mode", json_string(run.mode));
    json_object_set_new(r, "scope", json_string(run.scope));
    json_object_set_new(r, "started_at", json_string(run.started_at));
    json_object_set_new(r, "finished_at", json_string(run.finished_at));
    json_object_set_new(r, "note", json_string(run.note));
    json_object_set_new(r, "host", host);
    for (int i = 0; i < n; i++) {
        const ws_calibdb_sample *y = &x[i];
        json_t *o = json_object();
        json_object_set_new(o, "device", json_string(y->key.device));
        json_object_set_new(o, "op", json_string(y->key.op));
        json_object_set_new(o, "dtype", json_string(y->key.dtype));
        json_object_set_new(o, "attn_kind", json_string(y->key.attn_kind));
        json_object_set_new(o, "params", json_string(y->params));
        json_object_set_new(o, "flops", json_real(y->flops));
        json_object_set_new(o, "bytes", json_real(y->bytes));
        json_object_set_new(o, "repeats", json_integer(y->repeats));
        json_object_set_new(o, "t_median", json_real(y->t_median));
        json_object_set_new(o, "t_min", json_real(y->t_min));
        json_object_set_new(o, "t_max", json_real(y->t_max));
        if (y->t_est > 0) /* the robust estimate fits use, and the spread, where kept */
            json_object_set_new(o, "t_est", json_real(y->t_est));
        if (isfinite(y->spread_pct))
            json_object_set_new(o, "spread_pct", json_real(y->spread_pct));
        json_array_append_new(samples, o);
    }
    free(x);
    json_object_set_new(r, "samples", samples);
    return r;
}

json_t *ws_calib_file_export(ws_store *s, const long long *run_ids, int n, ws_err *err)
{
    json_t *doc = json_object(), *runs = json_array();
    json_object_set_new(doc, "format", json_string(WS_CALIB_FILE_FORMAT));
    json_object_set_new(doc, "version", json_integer(WS_CALIB_FILE_VERSION));
    json_object_set_new(doc, "source", json_string("measured"));
    json_object_set_new(doc, "runs", runs);
    for (int i = 0; i < n; i++) {
        json_t *r = export_run(s, run_ids[i], err);
        if (!r) {
            json_decref(doc);
            return NULL;
        }
        json_array_append_new(runs, r);
    }
    return doc;
}

/* ---- read and load ---------------------------------------------------------------------- */

/* Copies string field k of o into buf; 1 when present and a string that fits. */
static int str_field(const json_t *o, const char *k, char *buf, size_t cap, int required)
{
    const json_t *v = json_object_get(o, k);
    if (!v && !required) {
        buf[0] = '\0';
        return 1;
    }
    if (!json_is_string(v) || json_string_length(v) >= cap)
        return 0;
    memcpy(buf, json_string_value(v), json_string_length(v) + 1);
    return 1;
}

static int num_field(const json_t *o, const char *k, double *out, double lo)
{
    const json_t *v = json_object_get(o, k);
    if (!json_is_number(v))
        return 0;
    *out = json_number_value(v);
    return isfinite(*out) && *out >= lo;
}

/* The machine figures the fits read, from the samples the sweeps set them from
 * (calib/measure.c, calib/measure_gpu.c). */
static void figures_from_samples(ws_calib_run *run)
{
    for (int i = 0; i < run->n_samples; i++) {
        const ws_calib_sample *x = &run->samples[i];
        const char *d = x->key.device, *op = x->key.op;
        if (!strcmp(d, "gpu") && !strcmp(op, "d2d"))
            run->gpu_bw = fmax(run->gpu_bw, x->bytes / x->t_median);
        else if (!strcmp(d, "gpu") && !strcmp(op, "gemm"))
            run->gpu_peak = fmax(run->gpu_peak, x->flops / x->t_min);
        else if (!strcmp(d, "cpu") && !strcmp(op, "membw_read"))
            run->read_bw = fmax(run->read_bw, x->bytes / x->t_median);
        else if (!strcmp(d, "cpu") && !strcmp(op, "membw_read_1t"))
            run->read_bw_1t = x->bytes / x->t_median;
        else if (!strcmp(d, "cpu") && !strcmp(op, "peak_flops"))
            run->peak_flops[0] = x->flops / x->t_median;
        else if (!strcmp(d, "cpu") && !strcmp(op, "peak_flops_1t"))
            run->peak_flops[1] = x->flops / x->t_median;
    }
}

static int read_run(const char *path, int idx, const json_t *r, ws_calib_run *run, ws_err *err)
{
    ws_calib_run_init(run);
    const json_t *h = json_object_get(r, "host"), *xs = json_object_get(r, "samples");
    ws_host_fp *fp = &run->host;
    double cores, mem = 0, gmem = 0;
    if (!json_is_object(h) || !json_is_array(xs) ||
        !str_field(r, "mode", run->mode, sizeof run->mode, 1) ||
        !str_field(r, "scope", run->scope, sizeof run->scope, 1) ||
        !str_field(r, "started_at", run->started_at, sizeof run->started_at, 1) ||
        !str_field(r, "finished_at", run->finished_at, sizeof run->finished_at, 1) ||
        !str_field(r, "note", run->note, sizeof run->note, 0) ||
        !str_field(h, "cpu_model", fp->cpu_model, sizeof fp->cpu_model, 1) ||
        !num_field(h, "cpu_cores", &cores, 0) || cores != floor(cores) || cores > 1 << 20 ||
        (json_object_get(h, "mem_bytes") && !num_field(h, "mem_bytes", &mem, 0)) ||
        !str_field(h, "isa", fp->isa, sizeof fp->isa, 1) ||
        !str_field(h, "gpu_name", fp->gpu_name, sizeof fp->gpu_name, 0) ||
        !str_field(h, "gpu_cc", fp->gpu_cc, sizeof fp->gpu_cc, 0) ||
        (json_object_get(h, "gpu_mem_bytes") && !num_field(h, "gpu_mem_bytes", &gmem, 0)) ||
        !str_field(h, "gpu_driver", fp->gpu_driver, sizeof fp->gpu_driver, 0) ||
        !str_field(h, "pcie_link", fp->pcie_link, sizeof fp->pcie_link, 0))
        return ws_err_set(err, WS_EPARSE,
                          "%s: run %d: needs mode, scope, started_at, finished_at, samples and a "
                          "host with cpu_model, cpu_cores and isa (strings that fit, numbers >= 0)",
                          path, idx + 1);
    fp->cpu_cores = (int)cores;
    fp->mem_bytes = mem;
    fp->gpu_mem_bytes = gmem;
    fp->has_gpu = fp->gpu_name[0] != '\0';
    ws_host_fp_hash(fp);
    size_t i;
    const json_t *o;
    json_array_foreach(xs, i, o)
    {
        ws_calib_sample x = {0};
        double reps;
        if (!json_is_object(o) || !str_field(o, "device", x.key.device, sizeof x.key.device, 1) ||
            !str_field(o, "op", x.key.op, sizeof x.key.op, 1) ||
            !str_field(o, "dtype", x.key.dtype, sizeof x.key.dtype, 1) ||
            !str_field(o, "attn_kind", x.key.attn_kind, sizeof x.key.attn_kind, 1) ||
            !str_field(o, "params", x.params, sizeof x.params, 0) ||
            !num_field(o, "flops", &x.flops, 0) || !num_field(o, "bytes", &x.bytes, 0) ||
            !num_field(o, "repeats", &reps, 1) || reps != floor(reps) || reps > 1e6 ||
            !num_field(o, "t_median", &x.t_median, 0) || !num_field(o, "t_min", &x.t_min, 0) ||
            !num_field(o, "t_max", &x.t_max, 0) || !(x.t_median > 0) ||
            !(x.t_min <= x.t_median && x.t_median <= x.t_max) ||
            (strcmp(x.key.device, "cpu") && strcmp(x.key.device, "gpu") &&
             strcmp(x.key.device, "link"))) {
            ws_calib_run_free(run);
            return ws_err_set(err, WS_EPARSE,
                              "%s: run %d, sample %zu: needs device (cpu, gpu or link), op, dtype, "
                              "attn_kind, flops, bytes, repeats >= 1 and times t_min <= t_median "
                              "<= t_max, t_median > 0",
                              path, idx + 1, i + 1);
        }
        x.repeats = (int)reps;
        /* optional: a file from before they were kept has neither */
        if (!num_field(o, "t_est", &x.t_est, 0) || !(x.t_est >= x.t_min && x.t_est <= x.t_max))
            x.t_est = 0;
        if (!num_field(o, "spread_pct", &x.spread_pct, 0))
            x.spread_pct = NAN;
        int rc = ws_calib_add_sample(run, &x, err);
        if (rc) {
            ws_calib_run_free(run);
            return rc;
        }
    }
    if (!run->n_samples)
        return ws_err_set(err, WS_EPARSE, "%s: run %d has no samples", path, idx + 1);
    figures_from_samples(run);
    int rc = ws_calib_fit_all(run, err);
    if (rc)
        ws_calib_run_free(run);
    return rc;
}

int ws_calib_file_read(const char *path, ws_calib_run *runs, int max, int *n, ws_err *err)
{
    *n = 0;
    /* Opened without blocking and checked before reading: a FIFO or a device never hangs
     * the command, a folder is named as one. */
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    if (fd < 0)
        return ws_err_set(err, WS_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        close(fd);
        return ws_err_set(err, WS_EIO, "%s: %s, not a calibration file", path,
                          ws_atomic_kind(sb.st_mode));
    }
    json_error_t je;
    json_t *doc = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
    close(fd);
    if (!doc)
        return je.line < 0 ? ws_err_set(err, WS_EIO, "%s: %s", path, je.text)
                           : ws_err_set(err, WS_EPARSE, "%s:%d: %s", path, je.line, je.text);
    const json_t *fmt = json_object_get(doc, "format"), *ver = json_object_get(doc, "version"),
                 *rs = json_object_get(doc, "runs");
    int rc = 0;
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), WS_CALIB_FILE_FORMAT))
        rc = ws_err_set(err, WS_EPARSE, "%s: not a calibration file (\"format\": \"%s\" expected)",
                        path, WS_CALIB_FILE_FORMAT);
    else if (!json_is_integer(ver) || json_integer_value(ver) != WS_CALIB_FILE_VERSION)
        rc = ws_err_set(err, WS_EPARSE, "%s: version %d expected", path, WS_CALIB_FILE_VERSION);
    else if (!json_is_array(rs) || json_array_size(rs) == 0 || (int)json_array_size(rs) > max)
        rc = ws_err_set(err, WS_EPARSE, "%s: \"runs\" must hold 1 to %d runs", path, max);
    for (size_t i = 0; !rc && i < json_array_size(rs); i++) {
        if ((rc = read_run(path, (int)i, json_array_get(rs, i), &runs[i], err)))
            break;
        (*n)++;
    }
    json_decref(doc);
    if (rc) {
        for (int i = 0; i < *n; i++)
            ws_calib_run_free(&runs[i]);
        *n = 0;
    }
    return rc;
}

int ws_calib_file_load(ws_store *s, const char *path, long long *ids, int max, int *n,
                       ws_err *err)
{
    ws_calib_run runs[WS_CALIB_FILE_MAX_RUNS];
    int nr, rc = ws_calib_file_read(path, runs, max < WS_CALIB_FILE_MAX_RUNS ? max : WS_CALIB_FILE_MAX_RUNS, &nr, err);
    *n = 0;
    for (int i = 0; !rc && i < nr; i++)
        if (!(rc = ws_calib_store(s, &runs[i], &ids[i], err)))
            (*n)++;
    for (int i = 0; i < nr; i++)
        ws_calib_run_free(&runs[i]);
    return rc;
}

/* ---- check ------------------------------------------------------------------------------ */

/* The profile's roofline for a sample's key, and a factor on its W (contention); 0 when the
 * cost model has no term for it. */
static int roof_for(const ws_hw *hw, const ws_calib_key *k, ws_hw_roof *roof)
{
    const char *d = k->device, *op = k->op;
    if (!strcmp(d, "gpu") && !strcmp(op, "d2d"))
        *roof = hw->gpu_elem[WS_ELEM_ADD]; /* a streaming copy: the memory-bound kernels' W */
    else if (!strcmp(d, "gpu") && !strcmp(op, "attn"))
        *roof = hw->gpu_attn;
    else if (!strcmp(d, "gpu") && !strcmp(op, "gemm"))
        *roof = hw->gpu_gemm;
    else if (!strcmp(d, "link") && !strcmp(op, "h2d"))
        *roof = hw->h2d;
    else if (!strcmp(d, "link") && !strcmp(op, "d2h"))
        *roof = hw->d2h;
    else if (!strcmp(d, "link") && !strcmp(op, "h2d_under_gemm")) {
        *roof = hw->h2d;
        roof->W.v *= hw->h2d_contention.v;
    } else
        return 0;
    return 1;
}

static int check_run(const ws_profile *p, const ws_calib_run *run, ws_calib_check *out,
                     ws_err *err)
{
    ws_hw *hw = calloc(1, sizeof *hw);
    double *ape = malloc(sizeof(double) * (size_t)(run->n_samples + 1)),
           *sgn = malloc(sizeof(double) * (size_t)(run->n_samples + 1));
    int rc = hw && ape && sgn ? 0 : ws_err_set(err, WS_ENOMEM, "calib check: out of memory");
    char done[WS_CALIB_CHECK_MAX * 2][96];
    int n_done = 0;
    for (int i = 0; !rc && i < run->n_samples; i++) {
        const ws_calib_key *k = &run->samples[i].key;
        if (!strcmp(k->device, "cpu"))
            continue;
        char name[96];
        ws_import_key_name(k, name, sizeof name);
        int seen = 0;
        for (int j = 0; j < n_done; j++)
            seen |= !strcmp(done[j], name);
        if (seen || n_done == (int)(sizeof done / sizeof done[0]))
            continue;
        snprintf(done[n_done++], sizeof done[0], "%s", name);
        ws_dtype dt = WS_DT_BF16;
        if (k->dtype[0] && ws_dtype_parse(k->dtype, &dt))
            dt = WS_DT_BF16;
        const ws_attn_kind kind = !strcmp(k->attn_kind, "mla") ? WS_ATTN_MLA : WS_ATTN_GQA;
        memset(hw, 0, sizeof *hw);
        if ((rc = ws_hw_gpu_from_profile(p, kind, dt, dt, hw, err)))
            break;
        ws_hw_roof roof;
        int n = 0, on_p = 0, cnt = 0;
        for (int j = 0; j < run->n_samples; j++) {
            const ws_calib_sample *x = &run->samples[j];
            if (memcmp(&x->key, k, sizeof *k))
                continue;
            cnt++;
            if (!roof_for(hw, k, &roof))
                continue;
            const double t = ws_hw_roof_time(&roof, x->flops, x->bytes);
            sgn[n] = (t - x->t_median) / x->t_median;
            ape[n] = 100 * fabs(sgn[n]);
            n++;
            on_p += roof.P.v > 0 && roof.W.v > 0 && x->flops / roof.P.v > x->bytes / roof.W.v;
        }
        if (!n) {
            out->skipped += cnt;
            continue;
        }
        if (out->n_op == WS_CALIB_CHECK_MAX)
            break;
        ws_calib_check_op *o = &out->op[out->n_op++];
        memset(o, 0, sizeof *o);
        snprintf(o->key, sizeof o->key, "%s", name);
        o->n = n;
        double sum = 0, worst = 0;
        for (int j = 0; j < n; j++)
            sum += ape[j], worst = fmax(worst, ape[j]);
        o->mean_pct = sum / n;
        o->worst_pct = worst;
        o->median_pct = ws_median_sort(ape, n);
        o->bias_pct = 100 * ws_median_sort(sgn, n);
        const int use_p = 2 * on_p > n;
        snprintf(o->rate, sizeof o->rate, "%s", use_p ? "P" : "W");
        const ws_hw_val *v = use_p ? &roof.P : &roof.W;
        o->profile_rate = v->v;
        snprintf(o->profile_from, sizeof o->profile_from, "%s", v->from);
        o->fitted_rate = NAN;
        const ws_calib_fit *fit = NULL;
        for (int j = 0; j < run->n_fits; j++)
            if (!memcmp(&run->fits[j].key, k, sizeof *k) && run->fits[j].r.good)
                fit = &run->fits[j];
        if (fit)
            o->fitted_rate = use_p ? fit->r.peak_flops : fit->r.bandwidth;
        /* Some samples on the other side of the roofline: that rate too, on a row of its own
         * (the same samples, so the same errors). */
        if (on_p > 0 && !use_p && roof.P.v > 0 && out->n_op < WS_CALIB_CHECK_MAX) {
            ws_calib_check_op *q = &out->op[out->n_op++];
            *q = *o;
            snprintf(q->rate, sizeof q->rate, "P");
            q->profile_rate = roof.P.v;
            snprintf(q->profile_from, sizeof q->profile_from, "%s", roof.P.from);
            q->fitted_rate = fit && !fit->r.p_fixed ? fit->r.peak_flops : NAN;
        }
    }
    free(hw);
    free(ape);
    free(sgn);
    return rc;
}

int ws_calib_file_check(ws_store *s, const char *path, const char *gpu, ws_calib_check *out,
                        ws_err *err)
{
    memset(out, 0, sizeof *out);
    ws_calib_run runs[WS_CALIB_FILE_MAX_RUNS];
    int nr, rc = ws_calib_file_read(path, runs, WS_CALIB_FILE_MAX_RUNS, &nr, err);
    if (rc)
        return rc;
    ws_profile p;
    if (!(rc = ws_profile_load(s, gpu, &p, err))) {
        snprintf(out->profile, sizeof out->profile, "%s", p.name);
        snprintf(out->datasheet, sizeof out->datasheet, "%s", p.datasheet);
        snprintf(out->calibrated, sizeof out->calibrated, "%s", p.calibrated);
        if (strcmp(p.kind, "gpu"))
            rc = ws_err_set(err, WS_EINVAL, "calib check: '%s' is not a GPU profile", gpu);
        for (int i = 0; !rc && i < nr; i++)
            rc = check_run(&p, &runs[i], out, err);
        ws_profile_free(&p);
    }
    for (int i = 0; i < nr; i++)
        ws_calib_run_free(&runs[i]);
    if (!rc && !out->n_op)
        rc = ws_err_set(err, WS_EINVAL, "%s: no GPU or link sample the cost model predicts", path);
    return rc;
}
