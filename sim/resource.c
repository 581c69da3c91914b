/* resource: see resource.h. */
#include "resource.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_QUEUE_MIN 16 /* first queue allocation, requests */

int sim_res_setup(sim_res *r, const sim_res_vt *vt, const sim_engine *eng, const char *name,
                  uint32_t units, ws_err *err)
{
    memset(r, 0, sizeof *r);
    if (units < 1)
        return ws_err_set(err, WS_EINVAL, "sim: resource %s needs at least one unit",
                          name ? name : "?");
    r->vt = vt;
    r->eng = eng;
    snprintf(r->name, sizeof r->name, "%s", name ? name : vt->model);
    r->units = units;
    r->t_mark = sim_now(eng);
    return 0;
}

void sim_res_free(sim_res *r)
{
    free(r->q);
    r->q = NULL;
    r->q_len = r->q_cap = r->q_head = 0;
}

void sim_res_account(sim_res *r)
{
    double now = sim_now(r->eng), dt = now - r->t_mark;
    if (dt > 0) {
        r->unit_s += r->in_use * dt;
        if (r->in_use)
            r->busy_s += dt;
    }
    r->t_mark = now;
}

double sim_res_unit_seconds(const sim_res *r)
{
    return r->unit_s + r->in_use * (sim_now(r->eng) - r->t_mark);
}

double sim_res_busy_seconds(const sim_res *r)
{
    return r->busy_s + (r->in_use ? sim_now(r->eng) - r->t_mark : 0.0);
}

int sim_res_enqueue(sim_res *r, uint64_t id, uint32_t width, ws_err *err)
{
    if (r->q_len == r->q_cap) {
        size_t cap = r->q_cap ? 2 * r->q_cap : SIM_QUEUE_MIN;
        sim_res_req *q = malloc(cap * sizeof *q);
        if (!q)
            return ws_err_set(err, WS_ENOMEM, "sim: out of memory for the queue of %s", r->name);
        for (size_t i = 0; i < r->q_len; i++)
            q[i] = r->q[(r->q_head + i) & (r->q_cap - 1)];
        free(r->q);
        r->q = q;
        r->q_cap = cap;
        r->q_head = 0;
    }
    r->q[(r->q_head + r->q_len) & (r->q_cap - 1)] = (sim_res_req){id, width};
    r->q_len++;
    r->n_waited++;
    if (r->q_len > r->max_queue)
        r->max_queue = r->q_len;
    return 0;
}

void sim_res_dequeue(sim_res *r)
{
    r->q_head = (r->q_head + 1) & (r->q_cap - 1);
    r->q_len--;
}

void sim_res_take(sim_res *r, uint32_t width)
{
    sim_res_account(r);
    r->in_use += width;
    r->n_granted++;
}
