/* prefix: the prefix cache (see prefix.h). */
#include "prefix.h"

#include <stdlib.h>
#include <string.h>

#define EMPTY (-1)
#define GONE (-2)

static size_t slot_of(int64_t k, size_t cap)
{
    uint64_t x = (uint64_t)k * 0x9E3779B97F4A7C15ull;
    return (size_t)(x ^ (x >> 29)) & (cap - 1);
}

static int map_init(sim_prefix_map *m, size_t cap)
{
    m->key = malloc(cap * sizeof *m->key);
    m->val = malloc(cap * sizeof *m->val);
    if (!m->key || !m->val) {
        free(m->key);
        free(m->val);
        return -1;
    }
    for (size_t i = 0; i < cap; i++)
        m->val[i] = EMPTY;
    m->cap = cap;
    m->used = 0;
    return 0;
}

/* The slot of k, or -1. */
static long map_find(const sim_prefix_map *m, int64_t k)
{
    for (size_t i = slot_of(k, m->cap), n = 0; n < m->cap; i = (i + 1) & (m->cap - 1), n++) {
        if (m->val[i] == EMPTY)
            return -1;
        if (m->val[i] != GONE && m->key[i] == k)
            return (long)i;
    }
    return -1;
}

static int map_put(sim_prefix_map *m, int64_t k, int v);

static int map_grow(sim_prefix_map *m)
{
    sim_prefix_map n;
    if (map_init(&n, m->cap * 2))
        return -1;
    for (size_t i = 0; i < m->cap; i++)
        if (m->val[i] >= 0)
            map_put(&n, m->key[i], m->val[i]);
    free(m->key);
    free(m->val);
    *m = n;
    return 0;
}

/* Sets k's value (k absent); removed slots count as used until the table grows. */
static int map_put(sim_prefix_map *m, int64_t k, int v)
{
    if (2 * (m->used + 1) > m->cap && map_grow(m))
        return -1;
    size_t i = slot_of(k, m->cap);
    while (m->val[i] != EMPTY)
        i = (i + 1) & (m->cap - 1);
    m->key[i] = k;
    m->val[i] = v;
    m->used++;
    return 0;
}

int sim_prefix_init(sim_prefix *c, ws_err *err)
{
    memset(c, 0, sizeof *c);
    c->free_head = c->lru_head = c->lru_tail = -1;
    if (map_init(&c->idx, 1024) || map_init(&c->seen, 1024)) {
        sim_prefix_free(c);
        return ws_err_set(err, WS_ENOMEM, "sim: out of memory (prefix cache)");
    }
    return 0;
}

void sim_prefix_free(sim_prefix *c)
{
    free(c->b);
    free(c->idx.key);
    free(c->idx.val);
    free(c->seen.key);
    free(c->seen.val);
    memset(c, 0, sizeof *c);
}

static sim_prefix_blk *blk(const sim_prefix *c, int64_t hash)
{
    const long s = map_find(&c->idx, hash);
    return s < 0 ? NULL : &c->b[c->idx.val[s]];
}

int sim_prefix_match(const sim_prefix *c, const int64_t *h, int n)
{
    int k = 0;
    while (k < n && blk(c, h[k]))
        k++;
    return k;
}

static void lru_unlink(sim_prefix *c, int i)
{
    sim_prefix_blk *b = &c->b[i];
    if (b->prev >= 0)
        c->b[b->prev].next = b->next;
    else
        c->lru_head = b->next;
    if (b->next >= 0)
        c->b[b->next].prev = b->prev;
    else
        c->lru_tail = b->prev;
    b->prev = b->next = -1;
}

static void lru_append(sim_prefix *c, int i)
{
    sim_prefix_blk *b = &c->b[i];
    b->prev = c->lru_tail;
    b->next = -1;
    if (c->lru_tail >= 0)
        c->b[c->lru_tail].next = i;
    else
        c->lru_head = i;
    c->lru_tail = i;
}

void sim_prefix_hold(sim_prefix *c, const int64_t *h, int k, double *cpu_tok)
{
    double t = 0;
    for (int j = 0; j < k; j++) {
        sim_prefix_blk *b = blk(c, h[j]);
        if (!b)
            continue;
        if (b->ref++ == 0)
            lru_unlink(c, (int)(b - c->b));
        t += b->cpu_tok;
    }
    if (cpu_tok)
        *cpu_tok = t;
}

void sim_prefix_release(sim_prefix *c, const int64_t *h, int k)
{
    for (int j = 0; j < k; j++) {
        sim_prefix_blk *b = blk(c, h[j]);
        if (b && b->ref > 0 && --b->ref == 0)
            lru_append(c, (int)(b - c->b));
    }
}

int sim_prefix_add(sim_prefix *c, int64_t hash, double cpu_tok, double g, double h, double p,
                   ws_err *err)
{
    sim_prefix_blk *old = blk(c, hash);
    if (old) {
        if (old->ref++ == 0)
            lru_unlink(c, (int)(old - c->b));
        return 0;
    }
    int i = c->free_head;
    if (i >= 0) {
        c->free_head = c->b[i].next;
    } else {
        if (c->n == c->cap) {
            const size_t cap = c->cap ? 2 * c->cap : 256;
            sim_prefix_blk *nb = realloc(c->b, cap * sizeof *nb);
            if (!nb)
                return ws_err_set(err, WS_ENOMEM, "sim: out of memory (prefix cache)"), -WS_ENOMEM;
            c->b = nb;
            c->cap = cap;
        }
        i = (int)c->n++;
    }
    c->b[i] = (sim_prefix_blk){.hash = hash, .ref = 1, .cpu_tok = cpu_tok, .g = g, .h = h,
                               .p = p, .prev = -1, .next = -1};
    if (map_put(&c->idx, hash, i))
        return ws_err_set(err, WS_ENOMEM, "sim: out of memory (prefix cache)"), -WS_ENOMEM;
    c->g += g, c->h += h, c->p += p;
    return 1;
}

int sim_prefix_evict(sim_prefix *c, double *g, double *h, double *p)
{
    const int i = c->lru_head;
    if (i < 0)
        return 0;
    lru_unlink(c, i);
    sim_prefix_blk *b = &c->b[i];
    *g = b->g, *h = b->h, *p = b->p;
    c->g -= b->g, c->h -= b->h, c->p -= b->p;
    const long s = map_find(&c->idx, b->hash);
    if (s >= 0)
        c->idx.val[s] = GONE;
    b->next = c->free_head;
    c->free_head = i;
    return 1;
}

int sim_prefix_see(sim_prefix *c, const int64_t *h, int n, ws_err *err)
{
    int before = 0;
    for (int j = 0; j < n; j++) {
        if (map_find(&c->seen, h[j]) >= 0)
            before++;
        else if (map_put(&c->seen, h[j], 0))
            return ws_err_set(err, WS_ENOMEM, "sim: out of memory (prefix cache)"), -WS_ENOMEM;
    }
    return before;
}
