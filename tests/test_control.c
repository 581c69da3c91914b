/* test_control: the step's one controller (runtime/control.h). Its decisions are the policy
 * module's on the cost model's terms with the MoE estimate it keeps; migrate's share moves
 * only by min_delta or more, by whole pages, and new writes follow it; a policy that does
 * not spill places nothing; feedback far from the model is adopted after its confirmations. */
#include <criterion/criterion.h>
#include <math.h>

#include "control.h"
#include "helpers.h"

static ws_model g_m;
static ws_hw g_hw;
static ws_cost_model g_cm;

static void setup(void)
{
    ws_err err = {0};
    cr_assert_eq(ws_model_parse(th_tiny_moe, "tiny.json", &g_m, &err), 0, "%s", err.msg);
    th_paper_hw(NULL, &g_m, &g_hw);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cr_assert_eq(ws_cost_model_init(&g_hw, &g_m, &cc, &g_cm, &err), 0, "%s", err.msg);
}

static void teardown(void)
{
    ws_cost_model_free(&g_cm);
}

static void ctl(ws_ctl *c, ws_policy_kind k)
{
    ws_policy_params par;
    ws_policy_params_default(&par);
    ws_err err = {0};
    cr_assert_eq(ws_ctl_init(c, &g_cm, k, &par, 3, &err), 0, "%s", err.msg);
}

Test(control, target_is_the_policy_on_the_moe_estimate, .init = setup, .fini = teardown)
{
    ws_ctl c;
    ctl(&c, WS_POLICY_WRITESCOPE);
    const double B = 4, res = 40, L = 20000;
    /* Before any step: the last played layer's MoE phase in the schedule, from the router's
     * end: the CPU experts and their output's copy back beside the GPU's experts and the
     * shared ones, which share the GPU's stream. */
    const int l = 2;
    double tc = ws_cost_cpu_experts(&g_cm, l, B), tg = ws_cost_gpu_experts(&g_cm, l, B);
    tc += tc > 0 ? ws_cost_moe_permute_cpu(&g_cm, l, B) + ws_cost_handoff(&g_cm, B, 0) : 0;
    tg += tg > 0 ? ws_cost_moe_permute_gpu(&g_cm, l, B) : 0;
    cr_assert_gt(tc, 0, "the tiny MoE's experts are on the CPU");
    const double moe = fmax(tc, tg + ws_cost_shared_experts(&g_cm, B));
    cr_assert_float_eq(ws_ctl_moe_estimate(&c, B), moe, 1e-15);
    ws_cost_split sp;
    ws_cost_split_terms(&g_cm, res, moe, 0, 0, &sp);
    cr_assert_float_eq(ws_ctl_target(&c, B, res, L), ws_policy_target(&c.pol, &sp, L), 1e-15);
    /* after a step the estimate is that step's MoE phase */
    ws_ctl_step_end(&c, 3e-3);
    cr_assert_eq(ws_ctl_moe_estimate(&c, B), 3e-3);
    ws_cost_split_terms(&g_cm, res, 3e-3, 0, 0, &sp);
    const double r = ws_policy_target(&c.pol, &sp, L + 512);
    cr_assert_eq(ws_ctl_flush_cpu_pages(&c, B, res, 1000, L, 2),
                 ws_policy_flush_cpu_pages(1000, L, 2, c.page_tokens, r));
    cr_assert_eq(ws_ctl_prefill_cpu_pages(&c, B, res, L, 10),
                 ws_policy_prefill_cpu_pages(ws_ctl_target(&c, B, res, L), 10));
}

Test(control, a_policy_that_does_not_spill_places_nothing, .init = setup, .fini = teardown)
{
    const ws_policy_kind k[] = {WS_POLICY_GPU_ONLY, WS_POLICY_KTRANS};
    for (int i = 0; i < 2; i++) {
        ws_ctl c;
        ctl(&c, k[i]);
        cr_assert_eq(ws_ctl_target(&c, 4, 0, 1e5), 0);
        cr_assert_eq(ws_ctl_prefill_cpu_pages(&c, 4, 0, 1e5, 100), 0);
        int move = 7;
        cr_assert_eq(ws_ctl_migrate(&c, 0.8, 0, 100, &move), 0);
        cr_assert_eq(move, 0);
    }
}

Test(control, migrate_moves_whole_pages_and_new_writes_follow, .init = setup, .fini = teardown)
{
    ws_ctl c;
    ctl(&c, WS_POLICY_MIGRATE);
    /* before any move, writes follow the cache's one share (0), not r* */
    cr_assert_gt(ws_ctl_target(&c, 4, 0, 1e5), 0.1);
    cr_assert_eq(ws_ctl_share(&c, 4, 0, 1e5), 0);
    cr_assert_eq(ws_ctl_prefill_cpu_pages(&c, 4, 0, 1e5, 100), 0);
    int move;
    cr_assert_eq(ws_ctl_migrate(&c, 0.37, 0, 100, &move), 1);
    cr_assert_eq(move, 37);
    cr_assert_eq(ws_ctl_share(&c, 4, 0, 1e5), 0.37);
    /* a target within min_delta (0.05) leaves the share */
    cr_assert_eq(ws_ctl_migrate(&c, 0.40, 37, 100, &move), 0);
    cr_assert_eq(move, 0);
    /* and a lower one moves pages back to XFER */
    cr_assert_eq(ws_ctl_migrate(&c, 0.2, 37, 100, &move), 1);
    cr_assert_eq(move, -17);
    /* migrate confirms over two steps' samples of every layer */
    cr_assert_eq(c.pol.par.confirm, 6);
}

Test(control, feedback_far_from_the_model_is_adopted, .init = setup, .fini = teardown)
{
    ws_ctl c;
    ctl(&c, WS_POLICY_WRITESCOPE);
    const double A0 = ws_ctl_A(&c), n = 4096;
    ws_cost_split sp;
    ws_cost_split_terms(&g_cm, 40, 0, 0, 0, &sp);
    for (int i = 0; i < 40; i++)
        ws_ctl_observe(&c, n, sp.C_cpu + 2 * A0 * n, 0, 0, 40, 0);
    cr_assert_float_eq(ws_ctl_A(&c), 2 * A0, 0.05 * A0);
    cr_assert_eq(ws_ctl_B(&c), g_cm.B); /* no GPU half observed */
}
