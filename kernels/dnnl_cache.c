/* dnnl_cache: the oneDNN engine and the expert FFNs' primitive caches (see dnnl_cache.h). */
#include "dnnl_cache.h"

#include <pthread.h>
#include <string.h>

static dnnl_engine_t g_engine;
static pthread_once_t g_engine_once = PTHREAD_ONCE_INIT;

static void engine_init(void)
{
    if (dnnl_engine_create(&g_engine, dnnl_cpu, 0) != dnnl_success)
        g_engine = NULL;
}

dnnl_engine_t ws_dnnl_engine(void)
{
    pthread_once(&g_engine_once, engine_init);
    return g_engine;
}

static void mm_destroy(ws_dnnl_mm *p)
{
    if (p->prim)
        dnnl_primitive_destroy(p->prim);
    dnnl_memory_t *ms[] = {&p->src, &p->wei, &p->dst, &p->scratch};
    for (int i = 0; i < 4; i++)
        if (*ms[i])
            dnnl_memory_destroy(*ms[i]);
    memset(p, 0, sizeof *p);
}

/* The primitive of the kernel's descriptor and memories of the descriptor's layouts (the
 * data handles set at each run, the scratchpad allocated here). */
static int mm_create(const ws_dnnl_cache *c, ws_dnnl_mm *p, int m, int n, int k, ws_err *err)
{
    memset(p, 0, sizeof *p);
    dnnl_engine_t eng = ws_dnnl_engine();
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t st;
    if ((st = eng ? c->pd(eng, &pd, m, n, k) : dnnl_runtime_error) ||
        (st = dnnl_primitive_create(&p->prim, pd)) ||
        (st = dnnl_memory_create(&p->src, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0),
                                 eng, DNNL_MEMORY_NONE)) ||
        (st =
             dnnl_memory_create(&p->wei, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0),
                                eng, DNNL_MEMORY_NONE)) ||
        (st = dnnl_memory_create(&p->dst, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0),
                                 eng, DNNL_MEMORY_NONE)) ||
        (st = dnnl_memory_create(&p->scratch,
                                 dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0),
                                 eng, DNNL_MEMORY_ALLOCATE))) {
        if (pd)
            dnnl_primitive_desc_destroy(pd);
        mm_destroy(p);
        return ws_err_set(err, WS_EDEVICE, "oneDNN: %s matmul %dx%dx%d: status %d", c->kind, m, n,
                          k, (int)st);
    }
    dnnl_primitive_desc_destroy(pd);
    return 0;
}

ws_dnnl_pair *ws_dnnl_cache_get(ws_dnnl_cache *c, int m, int hd, int in, int threads,
                                ws_err *err)
{
    if (!c->stream && dnnl_stream_create(&c->stream, ws_dnnl_engine(),
                                         dnnl_stream_default_flags) != dnnl_success) {
        c->stream = NULL;
        ws_err_set(err, WS_EDEVICE, "oneDNN: cannot create a stream");
        return NULL;
    }
    ws_dnnl_pair *lru = NULL;
    for (int i = 0; i < c->n; i++) {
        ws_dnnl_pair *e = &c->e[i];
        if (e->m == m && e->hidden == hd && e->inter == in && e->threads == threads) {
            e->used = ++c->tick;
            return e;
        }
        if (!lru || e->used < lru->used)
            lru = e;
    }
    ws_dnnl_pair ne = {.m = m, .hidden = hd, .inter = in, .threads = threads, .used = ++c->tick};
    if (mm_create(c, &ne.gate_up, m, 2 * in, hd, err))
        return NULL;
    if (mm_create(c, &ne.down, m, hd, in, err)) {
        mm_destroy(&ne.gate_up);
        return NULL;
    }
    ws_dnnl_pair *e = c->n < WS_DNNL_CACHE ? &c->e[c->n++] : lru;
    if (e == lru) {
        mm_destroy(&e->gate_up);
        mm_destroy(&e->down);
    }
    *e = ne;
    return e;
}

int ws_dnnl_mm_run(ws_dnnl_mm *p, dnnl_stream_t stream, const void *a, const void *b, void *c,
                   const char *what, ws_err *err)
{
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, p->src},
                               {DNNL_ARG_WEIGHTS, p->wei},
                               {DNNL_ARG_DST, p->dst},
                               {DNNL_ARG_SCRATCHPAD, p->scratch}};
    dnnl_status_t st;
    if ((st = dnnl_memory_set_data_handle(p->src, (void *)a)) ||
        (st = dnnl_memory_set_data_handle(p->wei, (void *)b)) ||
        (st = dnnl_memory_set_data_handle(p->dst, c)) ||
        (st = dnnl_primitive_execute(p->prim, stream, 4, args)) || (st = dnnl_stream_wait(stream)))
        return ws_err_set(err, WS_EDEVICE, "oneDNN: %s failed: status %d", what, (int)st);
    return 0;
}

void ws_dnnl_cache_clear(ws_dnnl_cache *c)
{
    for (int i = 0; i < c->n; i++) {
        mm_destroy(&c->e[i].gate_up);
        mm_destroy(&c->e[i].down);
    }
    c->n = 0;
}

void ws_dnnl_cache_free(ws_dnnl_cache *c)
{
    ws_dnnl_cache_clear(c);
    if (c->stream)
        dnnl_stream_destroy(c->stream);
    c->stream = NULL;
}
