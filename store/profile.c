/* profile: hardware profiles by name, datasheet and calibration merged (see profile.h). */
#include "profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_priv.h"

static const char *const k_sources[] = {"datasheet", "measured", "fitted", "modeled"};

const char *ws_profile_source_name(ws_profile_source src)
{
    return (unsigned)src < 4 ? k_sources[src] : "?";
}

static ws_profile_source source_of(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, k_sources[i]))
            return (ws_profile_source)i;
    return WS_SOURCE_MODELED; /* the schema allows only the four */
}

/* ---- physical bounds --------------------------------------------------------------- */

enum {
    B_OPEN = 1, /* lo itself is excluded: (lo, hi] */
    B_INT = 2,  /* a whole number (a count) */
    B_ZERO = 4, /* 0 is also allowed: the device lacks it (a V100's bf16_flops) */
};

/* A key's range. `key` is a whole key, or ".suffix" for a calibrated key's last part, or
 * "prefix." for a family of keys. */
typedef struct bound {
    const char *key;
    double lo, hi;
    int flags;
    const char *what; /* the quantity, with its unit where it has one */
} bound;

#define EFF(k)                                                                                     \
    {                                                                                              \
        k, 0, 1, B_OPEN, "an efficiency (a fraction of the peak)"                                  \
    }
#define FLOPS(k)                                                                                   \
    {                                                                                              \
        k, 1e8, 1e17, B_ZERO, "a peak rate (flop/s or op/s)"                                       \
    }
#define C0(k)                                                                                      \
    {                                                                                              \
        k, 0, 1, 0, "a fixed cost (s)"                                                             \
    }
static const bound k_bounds[] = {
    EFF("hbm_eff"),
    EFF("tensor_eff"),
    EFF("pcie_eff"),
    EFF("prefill_attn_eff"),
    EFF("rmsnorm_eff"),
    EFF("rope_eff"),
    EFF("act_eff"),
    EFF("add_eff"),
    EFF("dram_eff"),
    EFF("flops_eff"),
    {"h2d_contention", 0, 1, B_OPEN, "a bandwidth ratio"},
    FLOPS("fp32_flops"),
    FLOPS("fp16_flops"),
    FLOPS("bf16_flops"),
    FLOPS("fp8_flops"),
    FLOPS("int8_flops"),
    FLOPS("cpu_peak."),
    {"hbm_bw", 1e9, 1e14, 0, "a device memory bandwidth (B/s)"},
    {"pcie_bw", 1e8, 1e13, 0, "a link bandwidth (B/s)"},
    {"h2d_bw", 1e8, 1e13, 0, "a link bandwidth (B/s)"},
    {"d2h_bw", 1e8, 1e13, 0, "a link bandwidth (B/s)"},
    {"dram_bw", 1e8, 1e14, 0, "a DRAM bandwidth (B/s)"},
    {"core_bw", 1e7, 1e12, 0, "one core's DRAM bandwidth (B/s)"},
    {"kv_reformat_bw", 1e6, 1e13, 0, "a reformat rate (B/s)"},
    {"mem_bytes", 1e6, 1e15, B_INT, "a memory size (B)"},
    {"l3_bytes", 0, 1e11, B_INT, "a cache size (B)"},
    {"sockets", 1, 16, B_INT, "a count of CPU sockets"},
    {"cores", 1, 4096, B_INT, "a count of CPU cores"},
    {"threads", 1, 8192, B_INT, "a count of hardware threads"},
    {"pcie_lanes", 1, 1024, B_INT, "a count of PCIe lanes"},
    {"avx512_bf16", 0, 1, B_INT, "a flag"},
    {"base_clock", 1e8, 1e10, 0, "a clock (Hz)"},
    C0("attn_c0"),
    C0("copy_c0"),
    C0("elem_c0"),
    C0("gemm_c0"),
    C0("prefill_attn_c0"),
    {"step_overhead", 0, 10, 0, "a step's overhead (s)"},
    {"prefill_attn_half_keys", 0, 1e9, 0, "a count of keys"},
    {".bandwidth", 1e3, 1e16, 0, "a fitted bandwidth (B/s)"},
    {".peak_flops", 1e3, 1e19, 0, "a fitted peak (flop/s)"},
    {".c0", 0, 100, 0, "a fitted fixed cost (s)"},
    {".factor", 0, 1e3, B_OPEN, "a fitted factor"},
    {".serial", 0, 1, B_INT, "a flag"},
    {".half_keys", 0, 1e9, 0, "a count of keys"},
};
#undef EFF
#undef FLOPS
#undef C0

static const bound *bound_of(const char *key)
{
    const size_t n = strlen(key);
    for (size_t i = 0; i < sizeof k_bounds / sizeof k_bounds[0]; i++) {
        const char *b = k_bounds[i].key;
        const size_t m = strlen(b);
        if (b[0] == '.'       ? n > m && !strcmp(key + n - m, b)
            : b[m - 1] == '.' ? n > m && !strncmp(key, b, m)
                              : !strcmp(key, b))
            return &k_bounds[i];
    }
    return NULL;
}

int ws_profile_check_param(const char *key, double value, ws_err *err)
{
    const bound *b = bound_of(key);
    if (!b)
        return 0;
    const int in = (b->flags & B_OPEN ? value > b->lo : value >= b->lo) && value <= b->hi &&
                   (!(b->flags & B_INT) || value == floor(value));
    if (in || ((b->flags & B_ZERO) && value == 0))
        return 0;
    return ws_err_set(err, WS_EINVAL, "param %s = %.17g: %s is %s%s%g, %g]%s", key, value, b->what,
                      b->flags & B_ZERO ? "0 or " : "", b->flags & B_OPEN ? "(" : "[", b->lo, b->hi,
                      b->flags & B_INT ? ", a whole number" : "");
}

/* One stored profile row. */
typedef struct row {
    long long id;
    int calibrated; /* built by the calibrator (linked to a host) */
    char name[160], kind[8], description[320];
    char device[160];   /* calibrated: the name its host reported for the device */
    char devices[1024]; /* datasheet: JSON array of the device names it describes */
} row;

/* Parameters with the key that supersedes each (datasheet ones only). */
typedef struct plist {
    ws_profile_param *p;
    char (*by)[128];
    int n, cap;
} plist;

static int find_row(ws_store *s, const char *name, row *r, int *found, ws_err *err)
{
    sqlite3_stmt *st;
    *found = 0;
    if (sqlite3_prepare_v2(ws_store_sqlite(s),
                           "SELECT p.id, p.host_id IS NOT NULL, p.name, p.kind, p.description, "
                           "CASE p.kind WHEN 'gpu' THEN h.gpu_name ELSE h.cpu_model END, "
                           "p.devices FROM "
                           "profiles p LEFT JOIN hosts h ON h.id = p.host_id WHERE p.name = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read profiles");
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        memset(r, 0, sizeof *r);
        r->id = sqlite3_column_int64(st, 0);
        r->calibrated = sqlite3_column_int(st, 1);
        ws_store_col_text(st, 2, r->name, sizeof r->name);
        ws_store_col_text(st, 3, r->kind, sizeof r->kind);
        ws_store_col_text(st, 4, r->description, sizeof r->description);
        ws_store_col_text(st, 5, r->device, sizeof r->device);
        ws_store_col_text(st, 6, r->devices, sizeof r->devices);
        *found = 1;
    }
    rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : WS_DB_FAIL(s, err, "cannot read profiles");
    sqlite3_finalize(st);
    return rc;
}

/* The name of the first profile the query (binding ?1, ?2) returns, "" if none. */
static int query_name(ws_store *s, const char *sql, const char *a, const char *b, char *out,
                      size_t cap, ws_err *err)
{
    sqlite3_stmt *st;
    out[0] = '\0';
    if (sqlite3_prepare_v2(ws_store_sqlite(s), sql, -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read profiles");
    sqlite3_bind_text(st, 1, a, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, b, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        ws_store_col_text(st, 0, out, cap);
    rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : WS_DB_FAIL(s, err, "cannot read profiles");
    sqlite3_finalize(st);
    return rc;
}

static ws_profile_param *push(plist *l, ws_err *err)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 32;
        ws_profile_param *p = realloc(l->p, sizeof *p * (size_t)cap);
        if (p)
            l->p = p;
        char(*by)[128] = realloc(l->by, sizeof *by * (size_t)cap);
        if (by)
            l->by = by;
        if (!p || !by) {
            ws_err_set(err, WS_ENOMEM, "out of memory");
            return NULL;
        }
        l->cap = cap;
    }
    memset(&l->p[l->n], 0, sizeof l->p[0]);
    l->by[l->n][0] = '\0';
    return &l->p[l->n++];
}

static int find_key(const plist *l, const char *key)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->p[i].key, key))
            return i;
    return -1;
}

/* The parameters of profile `name` (row profile_id), each within its bounds. */
static int read_params(ws_store *s, long long profile_id, const char *name, plist *l, ws_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s),
                           "SELECT key, value, unit, source, reference, calibrated_by FROM "
                           "profile_params WHERE profile_id = ?1 ORDER BY rowid",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read profile parameters");
    sqlite3_bind_int64(st, 1, profile_id);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        ws_profile_param *p = push(l, err);
        if (!p) {
            sqlite3_finalize(st);
            return WS_ENOMEM;
        }
        char src[16];
        ws_store_col_text(st, 0, p->key, sizeof p->key);
        p->value = sqlite3_column_double(st, 1);
        ws_store_col_text(st, 2, p->unit, sizeof p->unit);
        ws_store_col_text(st, 3, src, sizeof src);
        p->source = source_of(src);
        ws_store_col_text(st, 4, p->reference, sizeof p->reference);
        ws_store_col_text(st, 5, l->by[l->n - 1], sizeof l->by[0]);
        ws_err bad;
        if (ws_profile_check_param(p->key, p->value, &bad)) {
            sqlite3_finalize(st);
            return ws_err_set(err, WS_EINVAL, "%s: profile %s: %s", ws_store_path(s), name,
                              bad.msg);
        }
    }
    rc = rc == SQLITE_DONE ? 0 : WS_DB_FAIL(s, err, "cannot read profile parameters");
    sqlite3_finalize(st);
    return rc;
}

/* Lays the calibrated parameters in `cal` over the datasheet ones in `l`. */
static int overlay(plist *l, const plist *cal, const char *cal_name, ws_err *err)
{
    const int n_sheet = l->n;
    for (int i = 0; i < n_sheet; i++) {
        int j = l->by[i][0] ? find_key(cal, l->by[i]) : -1;
        if (j < 0)
            continue;
        ws_profile_param *p = &l->p[i];
        const ws_profile_param *c = &cal->p[j];
        p->value = c->value;
        snprintf(p->unit, sizeof p->unit, "%s", c->unit);
        p->source = c->source;
        if (snprintf(p->reference, sizeof p->reference, "%s %s: %s", cal_name, c->key,
                     c->reference) >= (int)sizeof p->reference)
            p->reference[sizeof p->reference - 1] = '\0'; /* cut to the field */
    }
    for (int j = 0; j < cal->n; j++) {
        if (find_key(l, cal->p[j].key) >= 0)
            continue;
        ws_profile_param *p = push(l, err);
        if (!p)
            return WS_ENOMEM;
        *p = cal->p[j];
    }
    return 0;
}

static void plist_free(plist *l)
{
    free(l->p);
    free(l->by);
    memset(l, 0, sizeof *l);
}

int ws_profile_load(ws_store *s, const char *name, ws_profile *out, ws_err *err)
{
    memset(out, 0, sizeof *out);
    row r, o;
    int found, rc;
    if ((rc = find_row(s, name, &r, &found, err)))
        return rc;
    if (!found)
        return ws_err_set(err, WS_ENOTFOUND, "%s: no profile named '%s'", ws_store_path(s), name);
    /* The other half of the pair: the datasheet profile that describes a calibrated
     * device, or the newest calibration of a device a datasheet profile describes. */
    char other[160] = "";
    if (r.calibrated && r.device[0])
        rc = query_name(s,
                        "SELECT d.name FROM profiles d, json_each(d.devices) j WHERE "
                        "d.host_id IS NULL AND d.kind = ?1 AND j.value = ?2 ORDER BY d.id LIMIT 1",
                        r.kind, r.device, other, sizeof other, err);
    else if (!r.calibrated)
        rc = query_name(s,
                        "SELECT p.name FROM profiles p JOIN hosts h ON h.id = p.host_id WHERE "
                        "p.kind = ?1 AND (CASE p.kind WHEN 'gpu' THEN h.gpu_name ELSE "
                        "h.cpu_model END) IN (SELECT value FROM json_each(?2)) ORDER BY "
                        "p.run_id DESC, p.id DESC LIMIT 1",
                        r.kind, r.devices, other, sizeof other, err);
    if (rc)
        return rc;
    const row *sheet = r.calibrated ? NULL : &r, *cal = r.calibrated ? &r : NULL;
    if (other[0]) {
        if ((rc = find_row(s, other, &o, &found, err)))
            return rc;
        if (found && r.calibrated)
            sheet = &o;
        else if (found)
            cal = &o;
    }
    plist l = {0}, c = {0};
    if ((sheet && (rc = read_params(s, sheet->id, sheet->name, &l, err))) ||
        (cal && (rc = read_params(s, cal->id, cal->name, &c, err))) ||
        (cal && (rc = overlay(&l, &c, cal->name, err)))) {
        plist_free(&l);
        plist_free(&c);
        return rc;
    }
    plist_free(&c);
    snprintf(out->name, sizeof out->name, "%s", r.name);
    snprintf(out->kind, sizeof out->kind, "%s", r.kind);
    snprintf(out->description, sizeof out->description, "%s", r.description);
    if (sheet)
        snprintf(out->datasheet, sizeof out->datasheet, "%s", sheet->name);
    if (cal)
        snprintf(out->calibrated, sizeof out->calibrated, "%s", cal->name);
    out->params = l.p;
    out->n_params = l.n;
    free(l.by);
    return 0;
}

int ws_profile_fill(ws_store *s, ws_profile *p, const char *key, ws_err *err)
{
    if (ws_profile_get(p, key))
        return 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s),
                           "SELECT d.name, q.value, q.unit, q.reference FROM profiles d JOIN "
                           "profile_params q ON q.profile_id = d.id WHERE d.host_id IS NULL AND "
                           "d.kind = ?1 AND q.key = ?2 ORDER BY d.id LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read profile parameters");
    sqlite3_bind_text(st, 1, p->kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        ws_profile_param *v = realloc(p->params, sizeof *v * (size_t)(p->n_params + 1));
        if (!v) {
            sqlite3_finalize(st);
            return ws_err_set(err, WS_ENOMEM, "out of memory");
        }
        p->params = v;
        ws_profile_param *q = &v[p->n_params++];
        memset(q, 0, sizeof *q);
        char sheet[160], ref[320];
        snprintf(q->key, sizeof q->key, "%s", key);
        ws_store_col_text(st, 0, sheet, sizeof sheet);
        q->value = sqlite3_column_double(st, 1);
        ws_store_col_text(st, 2, q->unit, sizeof q->unit);
        ws_store_col_text(st, 3, ref, sizeof ref);
        q->source = WS_SOURCE_MODELED;
        ws_err bad;
        if (ws_profile_check_param(key, q->value, &bad)) {
            p->n_params--;
            sqlite3_finalize(st);
            return ws_err_set(err, WS_EINVAL, "%s: profile %s: %s", ws_store_path(s), sheet,
                              bad.msg);
        }
        if (snprintf(q->reference, sizeof q->reference, "not in %s: datasheet %s's value: %s",
                     p->name, sheet, ref) >= (int)sizeof q->reference)
            q->reference[sizeof q->reference - 1] = '\0'; /* cut to the field */
    }
    rc = rc == SQLITE_ROW || rc == SQLITE_DONE
             ? 0
             : WS_DB_FAIL(s, err, "cannot read profile parameters");
    sqlite3_finalize(st);
    return rc;
}

int ws_profile_devices(ws_store *s, const char *name, char (*out)[128], int max, int *n,
                       ws_err *err)
{
    *n = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s),
                           "SELECT j.value FROM profiles d LEFT JOIN json_each(d.devices) j WHERE "
                           "d.name = ?1 AND d.host_id IS NULL ORDER BY j.key",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read profiles");
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    int rc, found = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        found = 1;
        if (sqlite3_column_type(st, 0) != SQLITE_NULL && *n < max)
            ws_store_col_text(st, 0, out[(*n)++], sizeof out[0]);
    }
    rc = rc == SQLITE_DONE ? 0 : WS_DB_FAIL(s, err, "cannot read profiles");
    sqlite3_finalize(st);
    if (!rc && !found)
        rc = ws_err_set(err, WS_ENOTFOUND, "%s: no datasheet profile named '%s'", ws_store_path(s),
                        name);
    return rc;
}

int ws_profile_names(ws_store *s, const char *kind, char (*out)[128], int max, int *n, ws_err *err)
{
    *n = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s),
                           "SELECT name FROM profiles WHERE kind = ?1 AND source = 'datasheet' "
                           "ORDER BY name",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read profiles");
    sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        if (*n < max)
            ws_store_col_text(st, 0, out[(*n)++], sizeof out[0]);
    rc = rc == SQLITE_DONE ? 0 : WS_DB_FAIL(s, err, "cannot read profiles");
    sqlite3_finalize(st);
    return rc;
}

int ws_profile_info_get(ws_store *s, const char *name, ws_profile_info *out, ws_err *err)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s),
                           "SELECT p.kind, p.host_id IS NOT NULL, r.mode FROM profiles p LEFT JOIN "
                           "calib_runs r ON r.id = p.run_id WHERE p.name = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read profiles");
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        out->found = 1;
        ws_store_col_text(st, 0, out->kind, sizeof out->kind);
        out->calibrated = sqlite3_column_int(st, 1);
        ws_store_col_text(st, 2, out->run_mode, sizeof out->run_mode);
    }
    rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : WS_DB_FAIL(s, err, "cannot read profiles");
    sqlite3_finalize(st);
    return rc;
}

void ws_profile_free(ws_profile *p)
{
    free(p->params);
    memset(p, 0, sizeof *p);
}

const ws_profile_param *ws_profile_get(const ws_profile *p, const char *key)
{
    for (int i = 0; i < p->n_params; i++)
        if (!strcmp(p->params[i].key, key))
            return &p->params[i];
    return NULL;
}

int ws_profile_value(const ws_profile *p, const char *key, double *out, ws_err *err)
{
    const ws_profile_param *q = ws_profile_get(p, key);
    if (!q)
        return ws_err_set(err, WS_ENOTFOUND, "profile %s has no parameter '%s'", p->name, key);
    *out = q->value;
    return 0;
}
