/* res_pool: see res_pool.h. */
#include "res_pool.h"

static int pool_acquire(sim_res *r, uint64_t id, uint32_t width, ws_err *err)
{
    if (width < 1 || width > r->units)
        return ws_err_set(err, WS_EINVAL, "sim: %s has %u workers: a request for %u", r->name,
                          r->units, width),
               -1;
    if (r->q_len == 0 && r->units - r->in_use >= width) {
        sim_res_take(r, width);
        return 1;
    }
    return sim_res_enqueue(r, id, width, err) ? -1 : 0;
}

static int pool_release(sim_res *r, uint32_t width, ws_err *err)
{
    if (width > r->in_use)
        return ws_err_set(err, WS_EINVAL, "sim: %s: %u workers released, %u held", r->name, width,
                          r->in_use);
    sim_res_account(r);
    r->in_use -= width;
    const sim_res_req *h;
    while ((h = sim_res_head(r)) && r->units - r->in_use >= h->width) {
        sim_res_req q = *h;
        sim_res_dequeue(r);
        sim_res_take(r, q.width);
        if (r->grant) {
            int rc = r->grant(r->grant_ctx, r, q.id, err);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static const sim_res_vt pool_vt = {"pool", pool_acquire, pool_release};

int sim_pool_init(sim_res *r, const sim_engine *e, const char *name, uint32_t workers, ws_err *err)
{
    return sim_res_setup(r, &pool_vt, e, name, workers, err);
}
