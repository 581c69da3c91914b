/* res_pool: the worker-pool resource model: N identical units (the CPU worker threads);
 * a request takes k of them at once and queues while fewer than k are free. Queueing is
 * strict FIFO: a request that does not fit blocks the ones behind it, even small ones that
 * would fit (no backfilling), so a wide operation is never starved by narrow ones and the
 * order of starts is the order of requests.
 *
 * Built on resource.h (the queue and the busy-time accounting are the shared ones):
 * utilisation over an interval is d(sim_res_unit_seconds) / (N * dt). A request wider
 * than N is refused with WS_EINVAL, since it could never start. */
#ifndef WS_SIM_RES_POOL_H
#define WS_SIM_RES_POOL_H

#include <stdint.h>

#include "engine.h"
#include "resource.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A pool of `workers` >= 1 free units named `name`, on e's clock. Free with sim_res_free. */
int sim_pool_init(sim_res *r, const sim_engine *e, const char *name, uint32_t workers, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
