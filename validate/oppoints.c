/* oppoints: operator rows measured elsewhere against the cost model (see oppoints.h). */
#include "oppoints.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "import.h"
#include "profile.h"

double ws_oppoint_predict(const ws_vidur_row *w, const ws_hw *hw, double elem)
{
    double f_tok, b_tok;
    ws_cost_gqa_terms(w->q_heads, w->kv_heads, w->head_dim, elem, &f_tok, &b_tok);
    switch (w->op) {
    case WS_VOP_ATTN_DECODE: {
        const double tokens = (double)w->batch * w->kv;
        return ws_cost_decode_attn_time(hw, b_tok * tokens, f_tok * tokens);
    }
    case WS_VOP_ATTN_PREFILL: {
        /* one kernel over the batch's sequences: its fixed cost once */
        const double one = ws_cost_prefill_attn_time(hw, w->chunk, w->kv, f_tok, b_tok),
                     c0 = hw->gpu_prefill.c0.v;
        return c0 + w->batch * (one - c0);
    }
    case WS_VOP_QKV:
    case WS_VOP_OPROJ:
    case WS_VOP_UP:
    case WS_VOP_DOWN: return ws_cost_gemm_time(hw, w->M, w->K, w->N, elem);
    case WS_VOP_NORM_IN:
    case WS_VOP_NORM_POST:
        return ws_cost_elem_time(hw, WS_ELEM_NORM, ws_cost_norm_bytes(w->M, w->K, elem), w->M);
    case WS_VOP_ROPE:
        return ws_cost_elem_time(hw, WS_ELEM_ROPE, ws_cost_rope_bytes(w->M, w->K, w->N, elem),
                                 w->M);
    case WS_VOP_ACT:
        return ws_cost_elem_time(hw, WS_ELEM_ACT, ws_cost_act_bytes(w->M, w->K, elem), w->M);
    default: return ws_cost_elem_time(hw, WS_ELEM_ADD, ws_cost_add_bytes(w->M, w->K, elem), w->M);
    }
}

typedef struct err_row {
    double pct;
    int row;
} err_row;

static int cmp_err(const void *a, const void *b)
{
    const err_row *x = a, *y = b;
    return x->pct < y->pct ? -1 : x->pct > y->pct ? 1 : (x->row > y->row) - (x->row < y->row);
}

static double median(const err_row *e, int n)
{
    return n ? (n % 2 ? e[n / 2].pct : 0.5 * (e[n / 2 - 1].pct + e[n / 2].pct)) : NAN;
}

/* The nearest-rank q-quantile of n sorted errors. */
static double rank(const err_row *e, int n, double q)
{
    if (!n)
        return NAN;
    int k = (int)ceil(q * n);
    return e[(k < 1 ? 1 : k > n ? n : k) - 1].pct;
}

int ws_oppoints_eval(const ws_vidur_rows *rows, const ws_hw *hw, double elem,
                     int heldout_only, double min_s, ws_oppoints *out, ws_err *err)
{
    memset(out, 0, sizeof *out);
    out->min_s = min_s;
    out->heldout_only = heldout_only;
    err_row *all = malloc(sizeof *all * (size_t)(rows->n + 1)),
            *lng = malloc(sizeof *lng * (size_t)(rows->n + 1));
    if (!all || !lng) {
        free(all);
        free(lng);
        return ws_err_set(err, WS_ENOMEM, "operator points: out of memory");
    }
    for (int g = 0; g < WS_VIDUR_GROUPS; g++) {
        int n = 0, nl = 0;
        double sum = 0;
        for (int i = 0; i < rows->n; i++) {
            const ws_vidur_row *w = &rows->v[i];
            if ((int)ws_vidur_op_group(w->op) != g || (heldout_only && !w->heldout))
                continue;
            const double p = ws_oppoint_predict(w, hw, elem),
                         pct = 100.0 * fabs(p - w->t) / w->t;
            all[n++] = (err_row){pct, i};
            sum += pct;
            if (w->t >= min_s)
                lng[nl++] = (err_row){pct, i};
        }
        qsort(all, (size_t)n, sizeof *all, cmp_err);
        qsort(lng, (size_t)nl, sizeof *lng, cmp_err);
        ws_oppoint_stats *s = &out->group[g];
        s->n = n;
        s->median_pct = median(all, n);
        s->mean_pct = n ? sum / n : NAN;
        s->p90_pct = rank(all, n, 0.90);
        s->p95_pct = rank(all, n, 0.95);
        s->worst_pct = n ? all[n - 1].pct : NAN;
        s->worst_row = n ? all[n - 1].row : -1;
        s->n_long = nl;
        s->median_long_pct = median(lng, nl);
        s->worst_long_pct = nl ? lng[nl - 1].pct : NAN;
        s->worst_long_row = nl ? lng[nl - 1].row : -1;
    }
    free(all);
    free(lng);
    return 0;
}

int ws_oppoints_check(ws_store *s, const char *const *paths, int n_paths, const char *gpu,
                      const char *dtype, int heldout_only, double min_s, ws_vidur_rows *rows,
                      ws_hw *hw, ws_oppoints *out, ws_err *err)
{
    memset(rows, 0, sizeof *rows);
    memset(hw, 0, sizeof *hw);
    ws_dtype dt;
    int rc = ws_import_dtype(dtype, &dt, err); /* the precisions `calib import` takes */
    if (rc) {
        ws_err_prefix(err, "operator points");
        return rc;
    }
    ws_calibdb_source files[WS_IMPORT_MAX_FILES];
    int n_files;
    rc = ws_import_read(paths, n_paths, rows, files, &n_files, err);
    if (rc) {
        ws_vidur_rows_free(rows);
        return rc;
    }
    ws_attn_kind kind = WS_ATTN_GQA;
    for (int i = 0; i < rows->n; i++)
        if (ws_vidur_op_group(rows->v[i].op) <= WS_VIDUR_PREFILL_ATTN) {
            kind = rows->v[i].q_heads == rows->v[i].kv_heads ? WS_ATTN_MHA : WS_ATTN_GQA;
            break;
        }
    ws_profile p;
    if (!(rc = ws_profile_load(s, gpu, &p, err))) {
        rc = strcmp(p.kind, "gpu")
                 ? ws_err_set(err, WS_EINVAL, "operator points: '%s' is not a GPU profile", gpu)
                 : ws_hw_gpu_from_profile(&p, kind, dt, dt, hw, err);
        ws_profile_free(&p);
    }
    if (!rc)
        rc = ws_oppoints_eval(rows, hw, ws_dtype_size(dt), heldout_only, min_s, out, err);
    if (rc)
        ws_vidur_rows_free(rows);
    return rc;
}
