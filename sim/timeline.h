/* timeline: an optional record of every operation the graph (dag.h) ran: when it became
 * ready, started (held its resource) and ended, where it ran and under which label. A
 * Chrome-trace/Perfetto writer or a test reads it back; the simulation never does.
 *
 * Spans are appended in the order operations end, in one array that grows geometrically.
 * Labels and resource names are pointers, not copies: they must outlive the timeline
 * (string literals, and the sim_res / sim_fluid structs of the run). */
#ifndef WS_SIM_TIMELINE_H
#define WS_SIM_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sim_span {
    uint64_t op;         /* the op's id in its graph */
    const char *label;   /* the op's label, or NULL */
    const char *res;     /* name of the resource it held, or NULL */
    const char *channel; /* name of the channel its bytes went through, or NULL */
    uint32_t width;      /* units of `res` it held */
    uint32_t tag;        /* the caller's tag (e.g. layer) */
    uint64_t user;       /* the caller's value (e.g. request or step) */
    double bytes;        /* bytes through `channel` */
    double t_ready;      /* all predecessors done, seconds */
    double t_start;      /* resource granted, seconds */
    double t_end;        /* done, seconds */
} sim_span;

typedef struct sim_timeline {
    sim_span *v;
    size_t n, cap;
} sim_timeline;

static inline void sim_timeline_init(sim_timeline *tl)
{
    *tl = (sim_timeline){0};
}
void sim_timeline_free(sim_timeline *tl);
/* Appends a copy of *s; returns 0 or WS_ENOMEM. */
int sim_timeline_add(sim_timeline *tl, const sim_span *s, ws_err *err);
/* Empties the timeline, keeping its memory. */
static inline void sim_timeline_clear(sim_timeline *tl)
{
    tl->n = 0;
}

#ifdef __cplusplus
}
#endif
#endif
