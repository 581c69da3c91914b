/* res_fifo: the FIFO serial resource model: one unit, requests served one at a time in
 * the order they asked. It stands for a GPU compute stream, an H2D or a D2H copy engine:
 * an operation waits until every earlier one on the same resource has released it, then
 * holds it for as long as its caller says (dag.h: the op's fixed seconds and flow).
 *
 * Built on resource.h: sim_res_acquire / sim_res_release, the queue and the busy-time
 * accounting are the shared ones; sim_fifo_init only picks this queueing rule. A request
 * must have width 1. */
#ifndef WS_SIM_RES_FIFO_H
#define WS_SIM_RES_FIFO_H

#include "engine.h"
#include "resource.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A free FIFO serial resource named `name`, on e's clock. Free it with sim_res_free. */
int sim_fifo_init(sim_res *r, const sim_engine *e, const char *name, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
