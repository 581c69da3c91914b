/* hw: a model and its GPU and host profiles into the cost model's hardware (see hw.h). */
#include "hw.h"

#include <string.h>

#include "profile.h"

int ws_hw_load(ws_store *s, const char *model, const char *gpu, const char *host, ws_dtype kv,
               ws_model *m, ws_cost_hw *hw, int *cores, ws_err *err)
{
    char path[4096];
    int rc = ws_model_resolve(model, path, sizeof path, err);
    if (!rc)
        rc = ws_model_load(path, m, err);
    if (rc)
        return rc;
    return ws_hw_load_model(s, m, gpu, host, kv, hw, cores, err);
}

int ws_hw_load_model(ws_store *s, const ws_model *m, const char *gpu, const char *host,
                     ws_dtype kv, ws_cost_hw *hw, int *cores, ws_err *err)
{
    int rc;
    ws_profile g = {0}, h = {0};
    if ((rc = ws_profile_load(s, gpu, &g, err)))
        return rc;
    if ((rc = ws_profile_load(s, host, &h, err))) {
        ws_profile_free(&g);
        return rc;
    }
    if (strcmp(g.kind, "gpu"))
        rc = ws_err_set(err, WS_EINVAL, "profile '%s' is a %s profile, not a GPU's", gpu, g.kind);
    else if (strcmp(h.kind, "host"))
        rc = ws_err_set(err, WS_EINVAL, "profile '%s' is a %s profile, not a host's", host, h.kind);
    else if (!(rc = ws_profile_fill(s, &h, "kv_reformat_bw", err)))
        rc = ws_cost_hw_load(&g, &h, m->attn, kv, m->weight_dtype, hw, err);
    const ws_profile_param *pc = ws_profile_get(&h, "cores");
    if (cores)
        *cores = pc && pc->value >= 1 && pc->value < 1e6 ? (int)pc->value : 1;
    ws_profile_free(&g);
    ws_profile_free(&h);
    return rc;
}
