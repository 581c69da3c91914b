/* res_fifo: see res_fifo.h. */
#include "res_fifo.h"

static int fifo_acquire(sim_res *r, uint64_t id, uint32_t width, ws_err *err)
{
    if (width != 1)
        return ws_err_set(err, WS_EINVAL, "sim: %s is a serial resource: width %u, not 1", r->name,
                          width),
               -1;
    if (r->in_use == 0 && r->q_len == 0) {
        sim_res_take(r, 1);
        return 1;
    }
    return sim_res_enqueue(r, id, 1, err) ? -1 : 0;
}

static int fifo_release(sim_res *r, uint32_t width, ws_err *err)
{
    if (width != 1 || r->in_use != 1)
        return ws_err_set(err, WS_EINVAL, "sim: %s released while not held", r->name);
    sim_res_account(r);
    r->in_use = 0;
    const sim_res_req *h = sim_res_head(r);
    if (!h)
        return 0;
    uint64_t id = h->id;
    sim_res_dequeue(r);
    sim_res_take(r, 1);
    return r->grant ? r->grant(r->grant_ctx, r, id, err) : 0;
}

static const sim_res_vt fifo_vt = {"fifo", fifo_acquire, fifo_release};

int sim_fifo_init(sim_res *r, const sim_engine *e, const char *name, ws_err *err)
{
    return sim_res_setup(r, &fifo_vt, e, name, 1, err);
}
