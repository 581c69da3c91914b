/* serving: the serving configuration's defaults and the CPU's share (see serving.h). */
#include "serving.h"

#include <math.h>
#include <string.h>

void ws_serving_default(ws_serving *s)
{
    memset(s, 0, sizeof *s);
    s->policy = WS_POLICY_WRITESCOPE;
    ws_policy_params_default(&s->par);
    s->batch = 32;
    s->chunk = 2048;
    s->window = 256;
    s->prefill_mode = WS_PREFILL_AUTO;
}

int ws_serving_cores(const ws_cost_hw *hw)
{
    const double v = hw->cores.v;
    return v >= 1 && v < 1e6 ? (int)v : 1;
}

int ws_serving_cpu_workers(int cores, const ws_cost_hw *hw, const ws_cost_cfg *cc)
{
    int workers = cc->cpu_sockets > 0 && cc->cpu_sockets < hw->sockets.v
                      ? (int)fmax(1, cores * cc->cpu_sockets / hw->sockets.v)
                      : cores;
    if (cc->cpu_threads > 0 && cc->cpu_threads < workers)
        workers = cc->cpu_threads;
    return workers;
}
