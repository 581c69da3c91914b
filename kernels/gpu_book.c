/* gpu_book: ping-pong, ring and copy-run bookkeeping (see gpu_book.h). */
#include "gpu_book.h"

#include <string.h>

static const char *pp_name(ws_pp_state s)
{
    return s == WS_PP_FREE ? "free" : s == WS_PP_COPYING ? "copying" : "attending";
}

void ws_pingpong_init(ws_pingpong *pp, int pages_per_half)
{
    memset(pp, 0, sizeof *pp);
    pp->pages_per_half = pages_per_half;
    pp->tag[0] = pp->tag[1] = -1;
}

int ws_pingpong_submit(ws_pingpong *pp, int n_pages, long tag, int *half, ws_err *err)
{
    if (n_pages < 0 || n_pages > pp->pages_per_half)
        return ws_err_set(err, WS_EINVAL,
                          "ping-pong: %d pages do not fit a half of %d landing slots", n_pages,
                          pp->pages_per_half);
    int h = pp->next;
    if (pp->state[h] != WS_PP_FREE)
        return ws_err_set(err, WS_EINVAL,
                          "ping-pong: half %d (tag %ld) is still %s; release it before "
                          "streaming tag %ld into it",
                          h, pp->tag[h], pp_name(pp->state[h]), tag);
    pp->state[h] = WS_PP_COPYING;
    pp->tag[h] = tag;
    pp->n_pages[h] = n_pages;
    pp->next = 1 - h;
    pp->submits++;
    pp->pages += (uint64_t)n_pages;
    *half = h;
    return 0;
}

static int pp_step(ws_pingpong *pp, int half, ws_pp_state from, ws_pp_state to, const char *op,
                   ws_err *err)
{
    if (half < 0 || half > 1)
        return ws_err_set(err, WS_EINVAL, "ping-pong: %s of half %d (0 or 1)", op, half);
    if (pp->state[half] != from)
        return ws_err_set(err, WS_EINVAL, "ping-pong: %s of half %d, which is %s (expected %s)",
                          op, half, pp_name(pp->state[half]), pp_name(from));
    pp->state[half] = to;
    return 0;
}

int ws_pingpong_acquire(ws_pingpong *pp, int half, ws_err *err)
{
    return pp_step(pp, half, WS_PP_COPYING, WS_PP_ATTENDING, "acquire", err);
}

int ws_pingpong_release(ws_pingpong *pp, int half, ws_err *err)
{
    return pp_step(pp, half, WS_PP_ATTENDING, WS_PP_FREE, "release", err);
}

int ws_ring_init(ws_ring *r, int window, int page_tokens, ws_err *err)
{
    memset(r, 0, sizeof *r);
    if (page_tokens <= 0 || window <= 0 || window % page_tokens)
        return ws_err_set(err, WS_EINVAL,
                          "D-window: window %d must be a positive multiple of the page (%d tokens)",
                          window, page_tokens);
    r->window = window;
    r->page_tokens = page_tokens;
    r->n_pages = window / page_tokens;
    return 0;
}

int ws_ring_append(ws_ring *r, int *slot, ws_err *err)
{
    if (r->count >= r->window)
        return ws_err_set(err, WS_EINVAL, "D-window: ring full (%d tokens); flush before appending",
                          r->window);
    *slot = (r->head + r->count) % r->window;
    r->count++;
    r->appended++;
    return 0;
}

int ws_ring_pages(const ws_ring *r, int *pages)
{
    int n = (r->count + r->page_tokens - 1) / r->page_tokens;
    for (int i = 0; i < n; i++)
        pages[i] = (r->head / r->page_tokens + i) % r->n_pages;
    return n;
}

int ws_ring_flush(ws_ring *r, int n, int *pages, ws_err *err)
{
    if (n < 0 || n > ws_ring_full_pages(r))
        return ws_err_set(err, WS_EINVAL, "D-window: flush of %d pages, %d full pages held", n,
                          ws_ring_full_pages(r));
    for (int i = 0; i < n; i++)
        pages[i] = (r->head / r->page_tokens + i) % r->n_pages;
    r->head = (r->head + n * r->page_tokens) % r->window;
    r->count -= n * r->page_tokens;
    r->flushed += (uint64_t)n * (uint64_t)r->page_tokens;
    return 0;
}

int ws_copy_runs(const size_t *src, void *const *dst, int n, size_t page_bytes,
                 ws_copy_run *runs)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (k > 0) {
            ws_copy_run *r = &runs[k - 1];
            if (src[i] == r->src + (size_t)r->n_pages &&
                (char *)dst[i] == (char *)r->dst + (size_t)r->n_pages * page_bytes) {
                r->n_pages++;
                continue;
            }
        }
        runs[k].src = src[i];
        runs[k].dst = dst[i];
        runs[k].n_pages = 1;
        k++;
    }
    return k;
}
