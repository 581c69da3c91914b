/* test_decode: the decode-step protocol (runtime/decode.h) on a table of fake operations:
 * the controller's target on the batch's sums, migrate's move only under migrate (then the
 * sums again), the flush planned before the step plays, every layer observed with the
 * estimates after it, the last layer's MoE phase kept for the next step. The callers' own
 * equality (simulator and runtime to 1e-9) is tests/test_schedule.c's. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "decode.h"
#include "helpers.h"

static ws_model g_m;
static ws_hw g_hw;
static ws_cost_model g_cm;

static void setup(void)
{
    th_tiny_cost_model(&g_m, &g_hw, &g_cm);
}

static void teardown(void)
{
    ws_cost_model_free(&g_cm);
}

/* A batch of token counts, and the calls in order ("s" sums, "w" windows, "m" migrate,
 * "p" play). */
typedef struct fake {
    ws_decode_sums s;
    int full, moved;
    char calls[16];
} fake;

static void call(fake *f, char c)
{
    size_t n = strlen(f->calls);
    if (n + 1 < sizeof f->calls)
        f->calls[n] = c;
}

static void f_sums(void *ctx, ws_decode_sums *s)
{
    call(ctx, 's');
    *s = ((fake *)ctx)->s;
}

static int f_full(void *ctx)
{
    call(ctx, 'w');
    return ((fake *)ctx)->full;
}

static int f_migrate(void *ctx, int pages, ws_err *err)
{
    (void)err;
    fake *f = ctx;
    call(f, 'm');
    f->moved = pages;
    f->s.cpu += pages * 16.0;
    return 0;
}

static int f_play(void *ctx, const ws_decode_plan *p, ws_decode_obs *obs, ws_err *err)
{
    (void)p, (void)err;
    call(ctx, 'p');
    for (int l = 0; l < 3; l++)
        obs[l] = (ws_decode_obs){.n_cpu = 512,
                                 .cpu_s = 1e-3,
                                 .m_xfer = 1024,
                                 .gpu_s = 1e-3,
                                 .resident = 64,
                                 .moe_s = 1e-3 * (l + 1)};
    return 0;
}

static const ws_decode_ops k_ops = {f_sums, f_full, f_migrate, f_play};

static void ctl(ws_ctl *c, ws_policy_kind k)
{
    ws_policy_params par;
    ws_policy_params_default(&par);
    par.page_tokens = 16;
    ws_err err = {0};
    cr_assert_eq(ws_ctl_init(c, &g_cm, k, &par, 3, &err), 0, "%s", err.msg);
}

Test(decode, plans_then_plays_then_observes, .init = setup, .fini = teardown)
{
    ws_ctl c;
    ctl(&c, WS_POLICY_WRITESCOPE);
    fake f = {.s = {.batch = 2, .spilled = 2048, .cpu = 512, .resident = 64}, .full = 1};
    const double r_star = ws_ctl_target(&c, 2, 64, 2048);
    const int cpu_pages = ws_ctl_flush_cpu_pages(&c, 2, 64 - 32, 512, 2048, 2);
    ws_decode_plan p;
    ws_decode_obs obs[3];
    ws_err err = {0};
    cr_assert_eq(ws_decode_step(&c, 3, 32, &k_ops, &f, &p, obs, &err), 0, "%s", err.msg);
    cr_assert_str_eq(f.calls, "swp", "no migrate outside migrate");
    cr_assert_eq(p.r_star, r_star);
    cr_assert_float_eq(p.r_real, 0.25, 1e-12);
    cr_assert_eq(p.flush_seqs, 1);
    cr_assert_eq(p.flush_pages, 2, "a window of 32 tokens is 2 pages of 16");
    cr_assert_eq(p.flush_cpu_pages, cpu_pages);
    cr_assert_float_eq(p.flush_bytes, 2 * 16 * g_cm.b_tok, 1e-9);
    for (int l = 0; l < 3; l++)
        cr_assert(obs[l].A > 0 && obs[l].B > 0, "layer %d: the estimates after it", l);
    cr_assert_float_eq(c.last_moe, 3e-3, 1e-15, "the last layer's MoE phase");
}

Test(decode, migrate_moves_then_sums_again, .init = setup, .fini = teardown)
{
    ws_ctl c;
    ctl(&c, WS_POLICY_MIGRATE);
    fake f = {.s = {.batch = 2, .spilled = 4096, .cpu = 0, .resident = 64}};
    ws_decode_plan p;
    ws_decode_obs obs[3];
    ws_err err = {0};
    cr_assert_eq(ws_decode_step(&c, 3, 32, &k_ops, &f, &p, obs, &err), 0, "%s", err.msg);
    cr_assert_neq(p.migrate_pages, 0, "r* is away from the cache's share of 0: pages move");
    cr_assert_str_eq(f.calls, "smswp");
    cr_assert_eq(f.moved, p.migrate_pages);
    cr_assert_float_eq(p.migrate_bytes, fabs((double)p.migrate_pages) * 16 * g_cm.b_tok, 1e-6);
    cr_assert_float_eq(p.sums.cpu, p.migrate_pages * 16.0, 1e-9, "the sums after the move");
    cr_assert_eq(p.flush_seqs, 0);
    cr_assert_eq(p.flush_bytes, 0);
}
