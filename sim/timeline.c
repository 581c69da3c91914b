/* timeline: see timeline.h. */
#include "timeline.h"

#include <stdlib.h>

#include "ws_util.h"

void sim_timeline_free(sim_timeline *tl)
{
    free(tl->v);
    *tl = (sim_timeline){0};
}

int sim_timeline_add(sim_timeline *tl, const sim_span *s, ws_err *err)
{
    if (ws_grow((void **)&tl->v, &tl->cap, tl->n, sizeof *tl->v, 1024))
        return ws_err_set(err, WS_ENOMEM, "sim: out of memory for %zu timeline spans", tl->n + 1);
    tl->v[tl->n++] = *s;
    return 0;
}
