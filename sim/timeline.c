/* timeline: see timeline.h. */
#include "timeline.h"

#include <stdlib.h>

void sim_timeline_free(sim_timeline *tl)
{
    free(tl->v);
    *tl = (sim_timeline){0};
}

int sim_timeline_add(sim_timeline *tl, const sim_span *s, ws_err *err)
{
    if (tl->n == tl->cap) {
        size_t cap = tl->cap ? 2 * tl->cap : 1024;
        sim_span *v = realloc(tl->v, cap * sizeof *v);
        if (!v)
            return ws_err_set(err, WS_ENOMEM, "sim: out of memory for %zu timeline spans", cap);
        tl->v = v;
        tl->cap = cap;
    }
    tl->v[tl->n++] = *s;
    return 0;
}
