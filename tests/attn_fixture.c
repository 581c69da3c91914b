/* attn_fixture: see attn_fixture.h. */
#include "attn_fixture.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "half.h"

static unsigned g_rng = 2024;

void th_attn_seed(unsigned seed) { g_rng = seed; }

static unsigned rnd(void)
{
    g_rng = g_rng * 1664525u + 1013904223u;
    return g_rng >> 8;
}

unsigned th_attn_randu(void) { return rnd(); }

float th_attn_rand(void) { return (float)(rnd() & 0xffff) / 32768.0f - 1.0f; }

uint16_t th_attn_to16(ws_dtype t, float x)
{
    return t == WS_DT_BF16 ? ws_f32_to_bf16(x) : ws_f32_to_fp16(x);
}

void th_attn_make(th_attn *f, ws_kv_layout kv, int n_q, int n_seqs, const int *lens, float qamp)
{
    memset(f, 0, sizeof *f);
    f->p.kv = kv;
    f->p.n_q_heads = n_q;
    f->p.scale = 1.0f / sqrtf((float)kv.d_k);
    f->p.n_seqs = n_seqs;
    f->seq = calloc((size_t)n_seqs + 1, sizeof *f->seq);
    f->tables = calloc((size_t)n_seqs + 1, sizeof *f->tables);
    cr_assert(f->seq && f->tables);
    f->p.seqs = f->seq;
    int total = 0;
    for (int s = 0; s < n_seqs; s++)
        total += (lens[s] + kv.page_tokens - 1) / kv.page_tokens;
    const int slots = 2 * total + 1; /* every other slot stays unused */
    size_t pe = ws_kv_page_bytes(&kv) / 2;
    /* Huge pages where the kernel grants them, as the runtime's CPU region and the bench
     * allocate (scripts/ab/ab_loop times kernels on this pool). */
    const size_t huge = 2u << 20, bytes = sizeof(uint16_t) * pe * (size_t)slots;
    f->pool = aligned_alloc(huge, (bytes + huge - 1) / huge * huge);
    if (f->pool)
        madvise(f->pool, (bytes + huge - 1) / huge * huge, MADV_HUGEPAGE);
    int *perm = malloc(sizeof(int) * (size_t)slots);
    cr_assert(f->pool && perm, "out of memory");
    for (size_t i = 0; i < pe * (size_t)slots; i++)
        f->pool[i] = th_attn_to16(kv.dtype, th_attn_rand());
    for (int i = 0; i < slots; i++)
        perm[i] = i;
    for (int i = slots - 1; i > 0; i--) {
        int j = (int)(rnd() % (unsigned)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int next = 0;
    for (int s = 0; s < n_seqs; s++) {
        int np = (lens[s] + kv.page_tokens - 1) / kv.page_tokens;
        f->tables[s] = malloc(sizeof(void *) * (size_t)(np + 1));
        for (int i = 0; i < np; i++)
            f->tables[s][i] = f->pool + pe * (size_t)perm[next++];
        f->seq[s].pages = f->tables[s];
        f->seq[s].n_tokens = lens[s];
    }
    free(perm);
    size_t nq = (size_t)n_seqs * n_q;
    f->q = malloc(sizeof(float) * (nq * kv.d_k + 1));
    for (size_t i = 0; i < nq * kv.d_k; i++)
        f->q[i] = qamp * th_attn_rand();
    f->o = malloc(sizeof(float) * (nq * kv.d_v + 1));
    f->lse = malloc(sizeof(float) * (nq + 1));
    f->o_ref = malloc(sizeof(double) * (nq * kv.d_v + 1));
    f->lse_ref = malloc(sizeof(double) * (nq + 1));
    f->p.q = f->q;
    f->p.o = f->o;
    f->p.lse = f->lse;
}

void th_attn_free(th_attn *f)
{
    for (int s = 0; s < f->p.n_seqs; s++)
        free(f->tables[s]);
    free(f->tables);
    free(f->seq);
    free(f->pool);
    free(f->q);
    free(f->o);
    free(f->lse);
    free(f->o_ref);
    free(f->lse_ref);
    memset(f, 0, sizeof *f);
}
