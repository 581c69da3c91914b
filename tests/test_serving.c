/* test_serving: the one serving configuration (runtime/serving.h): its defaults, written
 * once, are the simulator's and (but for the engine's closed batch, scheduler and seed) the
 * engine's;
 * the fields embedded in sim_cfg and ws_engine_cfg are the same bytes as their `srv`; the
 * CPU's share of the host takes the sockets and threads the cost settings name. */
#include <criterion/criterion.h>
#include <string.h>

#include "run_engine.h"
#include "serve.h"
#include "serving.h"

Test(serving, one_set_of_defaults)
{
    ws_serving s;
    ws_serving_default(&s);
    cr_assert_eq(s.policy, WS_POLICY_WRITESCOPE);
    cr_assert_eq(s.batch, 32);
    cr_assert_eq(s.chunk, 2048);
    cr_assert_eq(s.window, 256);
    cr_assert_eq(s.prefill_mode, WS_PREFILL_AUTO);
    cr_assert_eq(s.par.page_tokens, 256);
    sim_cfg sc;
    sim_cfg_default(&sc);
    cr_assert_eq(memcmp(&sc.srv, &s, sizeof s), 0, "the simulator's are the defaults");
    ws_engine_cfg ec;
    ws_engine_cfg_default(&ec);
    cr_assert_eq(ec.chunk, s.chunk);
    cr_assert_eq(ec.window, s.window);
    cr_assert_eq(ec.batch, 4, "the engine's closed batch");
    cr_assert_eq(s.batching, WS_BATCH_CHUNKED);
    cr_assert_eq(s.token_budget, 2048);
    cr_assert_eq(ec.batching, WS_BATCH_SERIAL, "the runtime's prompts one chunk at a time");
    cr_assert_eq(ec.seed, 1);
}

Test(serving, fields_and_srv_are_the_same_bytes)
{
    sim_cfg sc;
    sim_cfg_default(&sc);
    sc.batch = 7;
    sc.par.page_tokens = 16;
    cr_assert_eq(sc.srv.batch, 7);
    cr_assert_eq(sc.srv.par.page_tokens, 16);
    ws_engine_cfg ec;
    ws_engine_cfg_default(&ec);
    ec.srv = sc.srv;
    cr_assert_eq(ec.batch, 7);
    cr_assert_eq(ec.par.page_tokens, 16);
    cr_assert_eq(ec.chunk, 2048);
}

Test(serving, cpu_workers_share_the_host)
{
    ws_hw hw = {0};
    hw.cores.v = 24;
    hw.sockets.v = 2;
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cr_assert_eq(ws_hw_cores(&hw), 24);
    cr_assert_eq(ws_deploy_cpu_workers(&hw, &cc, 24), 24, "every core");
    cc.cpu_sockets = 1;
    cr_assert_eq(ws_deploy_cpu_workers(&hw, &cc, 24), 12, "one socket's share");
    cc.cpu_threads = 8;
    cr_assert_eq(ws_deploy_cpu_workers(&hw, &cc, 24), 8, "at most the threads");
    cc = (ws_deploy_cfg){.cpu_sockets = 1};
    cr_assert_eq(ws_deploy_cpu_workers(&hw, &cc, 1), 1, "at least one");
    hw.cores.v = 0;
    cr_assert_eq(ws_hw_cores(&hw), 1, "a host without cores has one");
}
