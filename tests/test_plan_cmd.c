/* test_plan_cmd: a deployment rendered as an engine's own command line (sim/plan_cmd.h) from
 * the "command" object of the shipped engine files. llama.cpp's placement flags follow
 * ws_deploy_cfg (--n-cpu-moe counting the leading dense layers, --cpu-moe for every layer,
 * -ngl for the last layers), kt-kernel's --kt-num-gpu-experts, KTransformers' balance_serve
 * flags, vLLM with every expert on the GPU; placements an engine's flags cannot make are
 * refused with a reason, an unknown engine is WS_ENOTFOUND, and every shipped engine file
 * still loads with its command in it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "deploy.h"
#include "plan_cmd.h"
#include "server.h"

/* Qwen3-30B-A3B's shape: 48 layers, all MoE, 128 routed experts; nothing else set. */
static ws_plan_cmd_cfg qwen3(void)
{
    return (ws_plan_cmd_cfg){.model = "qwen3-30b-a3b",
                             .n_layers = 48,
                             .n_moe_layers = 48,
                             .n_experts = 128,
                             .n_cpu_moe = WS_DEPLOY_NO_CPU_MOE};
}

static void render_ok(const char *engine, const ws_plan_cmd_cfg *c, char *line, size_t cap)
{
    ws_err err = {0};
    cr_assert_eq(ws_plan_cmd_render(engine, c, line, cap, &err), 0, "%s: %s", engine, err.msg);
}

static void refused(const char *engine, const ws_plan_cmd_cfg *c, const char *needle)
{
    char why[512] = "unset", line[WS_PLAN_CMD_LINE];
    ws_err err = {0};
    cr_assert_eq(ws_plan_cmd_supports(engine, c, why, sizeof why, &err), 0, "%s accepted", engine);
    cr_assert_eq(err.code, 0, "a refusal is no error: %s", err.msg);
    cr_assert(strstr(why, needle) != NULL, "%s: reason \"%s\" lacks \"%s\"", engine, why, needle);
    cr_assert(strchr(why, '\n') == NULL, "%s", why);
    cr_assert_eq(ws_plan_cmd_render(engine, c, line, sizeof line, &err), WS_EINVAL);
    cr_assert_str_eq(err.msg, why);
}

/* The first 22 MoE layers' experts on the CPU, q8_0 KV, 16 threads, a 4096-token step of
 * 1024-token passes: each knob in llama-server's own flag, every layer on the GPU (-ngl
 * n_layers + 1 puts the output layer there too), each flag with its reference. */
Test(plan_cmd, llama_cpp_n_cpu_moe_kv_threads_batches)
{
    ws_plan_cmd_cfg c = qwen3();
    c.n_cpu_moe = 22;
    c.w_cpu_experts = "Q4_K_M";
    c.kv = "q8_0";
    c.cpu_threads = 16;
    c.token_budget = 4096;
    c.chunk = 1024;
    c.max_seqs = 4;
    c.ctx = 32768;
    char line[WS_PLAN_CMD_LINE];
    render_ok("llama.cpp", &c, line, sizeof line);
    cr_assert_str_eq(line, "llama-server -m qwen3-30b-a3b-BF16-Q4_K_M.gguf -ngl 49 --n-cpu-moe 22 "
                           "-ctk q8_0 -ctv q8_0 -c 32768 -b 4096 -ub 1024 -np 4 -t 16");
    ws_plan_cmd out;
    ws_err err = {0};
    cr_assert_eq(ws_plan_cmd_build("llama.cpp", &c, &out, &err), 0, "%s", err.msg);
    cr_assert_str_eq(out.line, line);
    cr_assert_eq(out.n_flags, 10);
    for (int i = 0; i < out.n_flags; i++)
        cr_assert(strstr(out.flags[i].ref, "llama.cpp") != NULL, "%s: %s", out.flags[i].flag,
                  out.flags[i].ref);
    cr_assert_str_eq(out.flags[2].flag, "--n-cpu-moe");
    cr_assert_str_eq(out.flags[2].value, "22");
    cr_assert(strstr(out.flags[2].ref, "first N layers") != NULL, "%s", out.flags[2].ref);
}

/* --n-cpu-moe counts layers from 0: a model whose first 3 layers are dense keeps its first 10
 * MoE layers' experts on the CPU with --n-cpu-moe 13; the last 40 layers on the GPU: -ngl 40;
 * two sockets: --numa distribute. */
Test(plan_cmd, llama_cpp_counts_dense_layers_and_gpu_layers)
{
    ws_plan_cmd_cfg c = {.model = "dsv3",
                         .n_layers = 61,
                         .n_moe_layers = 58,
                         .n_experts = 256,
                         .n_cpu_moe = 10,
                         .n_gpu_layers = 40,
                         .cpu_sockets = 2};
    char line[WS_PLAN_CMD_LINE];
    render_ok("llama.cpp", &c, line, sizeof line);
    cr_assert_str_eq(line, "llama-server -m dsv3-BF16.gguf -ngl 40 --n-cpu-moe 13 --numa "
                           "distribute");
    c.cpu_sockets = 1; /* one socket: no NUMA flag */
    render_ok("ik_llama.cpp", &c, line, sizeof line);
    cr_assert_str_eq(line, "llama-server -m dsv3-BF16.gguf -ngl 40 --n-cpu-moe 13");
}

/* Every MoE layer's routed experts on the CPU (n_cpu_moe 0, or as many as the MoE layers):
 * --cpu-moe, in llama.cpp and in ik_llama.cpp; every expert on the GPU: neither flag. */
Test(plan_cmd, cpu_moe_for_all_experts_on_the_cpu)
{
    ws_plan_cmd_cfg c = qwen3();
    char line[WS_PLAN_CMD_LINE];
    const char *engines[2] = {"llama.cpp", "ik_llama.cpp"};
    for (int e = 0; e < 2; e++) {
        for (int n = 0; n <= 48; n += 48) {
            c.n_cpu_moe = n;
            render_ok(engines[e], &c, line, sizeof line);
            cr_assert_str_eq(line, "llama-server -m qwen3-30b-a3b-BF16.gguf -ngl 49 --cpu-moe",
                             "%s, n_cpu_moe %d", engines[e], n);
        }
    }
    c.n_cpu_moe = WS_DEPLOY_NO_CPU_MOE;
    render_ok("llama.cpp", &c, line, sizeof line);
    cr_assert_str_eq(line, "llama-server -m qwen3-30b-a3b-BF16.gguf -ngl 49");
    c.n_cpu_moe = 0;
    c.gpu_experts = 128; /* every expert on the GPU */
    render_ok("llama.cpp", &c, line, sizeof line);
    cr_assert_str_eq(line, "llama-server -m qwen3-30b-a3b-BF16.gguf -ngl 49");
}

/* GGUF keeps a layer's routed experts in one tensor per projection: some of them on the GPU
 * and the rest on the CPU is no flag of llama.cpp's; nor is an fp8 weight or KV type. */
Test(plan_cmd, llama_cpp_refuses_what_its_flags_cannot_say)
{
    ws_plan_cmd_cfg c = qwen3();
    c.n_cpu_moe = 0;
    c.gpu_experts = 8;
    refused("llama.cpp", &c, "splits one layer's routed experts");
    c.n_cpu_moe = 20;
    refused("ik_llama.cpp", &c, "gpu_experts 8 of 128");
    c = qwen3();
    c.w_gpu = "fp8";
    refused("llama.cpp", &c, "does not load GPU weights in fp8");
    c = qwen3();
    c.kv = "fp8";
    refused("llama.cpp", &c, "no KV cache type fp8");
}

/* kt-kernel (SGLang with kt-kernel's CPU experts): gpu_experts per layer in
 * --kt-num-gpu-experts, the CPU experts' format in --kt-method, threads and NUMA pools,
 * SGLang's chunk, sequences and KV type. */
Test(plan_cmd, kt_kernel_num_gpu_experts)
{
    ws_plan_cmd_cfg c = qwen3();
    c.n_cpu_moe = 0;
    c.gpu_experts = 8;
    c.w_cpu_experts = "int8";
    c.kv = "fp8";
    c.chunk = 4096;
    c.max_seqs = 16;
    c.cpu_threads = 64;
    c.cpu_sockets = 2;
    char line[WS_PLAN_CMD_LINE];
    render_ok("kt-kernel", &c, line, sizeof line);
    cr_assert_str_eq(line, "python -m sglang.launch_server --model qwen3-30b-a3b "
                           "--kt-num-gpu-experts 8 --kt-method AMXINT8 --kt-weight-path "
                           "qwen3-30b-a3b-INT8 --kv-cache-dtype fp8_e4m3 --chunked-prefill-size "
                           "4096 --max-running-requests 16 --kt-cpuinfer 64 "
                           "--kt-threadpool-count 2");
    c.w_cpu_experts = "q4_k_m"; /* GGUF experts: the llamafile backend */
    c.gpu_experts = 0;
    render_ok("kt-kernel", &c, line, sizeof line);
    cr_assert(strstr(line, "--kt-num-gpu-experts 0 --kt-method LLAMAFILE --kt-weight-path "
                           "qwen3-30b-a3b-Q4_K_M ") != NULL,
              "%s", line);
    c.n_cpu_moe = 10; /* only the first 10 MoE layers: one number serves every layer */
    refused("kt-kernel", &c, "same --kt-num-gpu-experts");
    c.n_cpu_moe = WS_DEPLOY_NO_CPU_MOE;
    refused("kt-kernel", &c, "serve it with sglang");
    c.n_cpu_moe = 0;
    c.token_budget = 8192; /* SGLang's budget and chunk are one flag */
    refused("kt-kernel", &c, "token_budget 8192 != chunk 4096");
}

/* KTransformers' balance_serve: its serve rules keep every routed expert on the CPU, the
 * threads in --cpu_infer, the chunk in --chunk_size; experts on the GPU are its rule file's,
 * not a flag. */
Test(plan_cmd, ktransformers_balance_serve)
{
    ws_plan_cmd_cfg c = qwen3();
    c.n_cpu_moe = 0;
    c.w_cpu_experts = "q4_k_m";
    c.cpu_threads = 32;
    c.chunk = 256;
    c.max_seqs = 4;
    c.ctx = 8192;
    char line[WS_PLAN_CMD_LINE];
    render_ok("ktransformers", &c, line, sizeof line);
    cr_assert_str_eq(line, "python ktransformers/server/main.py --model_path qwen3-30b-a3b "
                           "--gguf_path qwen3-30b-a3b-BF16-Q4_K_M-GGUF --optimize_config_path "
                           "qwen3-30b-a3b-serve.yaml --backend_type balance_serve --cache_lens "
                           "8192 --chunk_size 256 --max_batch_size 4 --cpu_infer 32");
    c.gpu_experts = 8;
    refused("ktransformers", &c, "optimize-rule");
    c.gpu_experts = 0;
    c.cpu_sockets = 2;
    refused("ktransformers", &c, "over 2 sockets");
    c.cpu_sockets = 0;
    c.kv = "q4_0";
    refused("ktransformers", &c, "no KV cache type q4_0");
}

/* vLLM with every expert on the GPU: its scheduler's flags; CPU threads are dropped (nothing
 * runs on the CPU). Routed experts on the CPU, or whole layers there, are refused. V0 sets the
 * chunk with the budget's flag and chunked prefill. */
Test(plan_cmd, vllm_all_gpu_and_refusal_for_cpu_experts)
{
    ws_plan_cmd_cfg c = qwen3();
    c.kv = "fp8";
    c.ctx = 32768;
    c.token_budget = 8192;
    c.chunk = 2048;
    c.max_seqs = 256;
    c.cpu_threads = 16;
    char line[WS_PLAN_CMD_LINE];
    render_ok("vllm-v1", &c, line, sizeof line);
    cr_assert_str_eq(line, "vllm serve qwen3-30b-a3b --kv-cache-dtype fp8 --max-model-len 32768 "
                           "--max-num-batched-tokens 8192 --long-prefill-token-threshold 2048 "
                           "--enable-chunked-prefill --max-num-seqs 256");
    c.token_budget = 0;
    render_ok("vllm-v0", &c, line, sizeof line);
    cr_assert_str_eq(line, "vllm serve qwen3-30b-a3b --kv-cache-dtype fp8 --max-model-len 32768 "
                           "--max-num-batched-tokens 2048 --enable-chunked-prefill --max-num-seqs "
                           "256");
    c.n_cpu_moe = 0;
    c.gpu_experts = 8;
    refused("vllm-v1", &c, "vllm-v1 runs no routed expert on the CPU");
    refused("vllm-v0", &c, "vllm-v0 runs no routed expert on the CPU");
    refused("sglang", &c, "sglang runs no routed expert on the CPU");
    c = qwen3();
    c.n_gpu_layers = 40;
    refused("vllm-v1", &c, "runs whole layers on the CPU");
    c = qwen3();
    c.w_gpu = "fp8";
    render_ok("sglang", &c, line, sizeof line);
    cr_assert_str_eq(line, "python -m sglang.launch_server --model-path qwen3-30b-a3b "
                           "--quantization fp8");
}

/* An unknown engine: WS_ENOTFOUND listing the known ones, from render and from supports. */
Test(plan_cmd, unknown_engine)
{
    ws_plan_cmd_cfg c = qwen3();
    char line[WS_PLAN_CMD_LINE], why[512];
    ws_err err = {0};
    cr_assert_eq(ws_plan_cmd_render("no-such-engine", &c, line, sizeof line, &err), WS_ENOTFOUND);
    cr_assert(strstr(err.msg, "no-such-engine") && strstr(err.msg, "llama.cpp"), "%s", err.msg);
    ws_err_clear(&err);
    cr_assert_eq(ws_plan_cmd_supports("no-such-engine", &c, why, sizeof why, &err), 0);
    cr_assert_eq(err.code, WS_ENOTFOUND);
    cr_assert_str_eq(why, err.msg);
    ws_err_clear(&err);
    c.gpu_experts = 129; /* more than the model has: out of range, not a refusal */
    cr_assert_eq(ws_plan_cmd_supports("llama.cpp", &c, why, sizeof why, &err), 0);
    cr_assert_eq(err.code, WS_EINVAL);
}

/* Every shipped engine file still loads with its command object, and renders an all-GPU
 * deployment with every flag referenced, except the two whose CPU experts must run (they say
 * why). */
Test(plan_cmd, every_engine_command_is_read)
{
    char names[32][64];
    const int n = ws_server_list(names, 32);
    cr_assert_geq(n, 8);
    ws_plan_cmd_cfg c = qwen3();
    c.max_seqs = 8;
    for (int i = 0; i < n; i++) {
        ws_server s;
        ws_err err = {0};
        cr_assert_eq(ws_server_load(names[i], "h100-sxm", 8e10, 0, &s, &err), 0, "%s: %s", names[i],
                     err.msg);
        ws_plan_cmd out;
        memset(&out, 0, sizeof out);
        const int rc = ws_plan_cmd_build(names[i], &c, &out, &err);
        if (!strcmp(names[i], "kt-kernel") || !strcmp(names[i], "ktransformers")) {
            cr_assert_eq(rc, WS_EINVAL, "%s rendered %s", names[i], out.line);
            continue;
        }
        cr_assert_eq(rc, 0, "%s: %s", names[i], err.msg);
        cr_assert(strstr(out.line, " 8") != NULL, "%s: no sequence cap in %s", names[i], out.line);
        cr_assert(out.program_ref[0], "%s", names[i]);
        for (int f = 0; f < out.n_flags; f++)
            cr_assert(strlen(out.flags[f].ref) > 10, "%s %s", names[i], out.flags[f].flag);
    }
}

static void write_tmp(char *path, const char *text)
{
    int fd = mkstemps(path, 5);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* A file whose command names a knob there is none of: WS_EPARSE naming it; a file with no
 * command: a refusal, not an error; a model name the shell would split is quoted. */
Test(plan_cmd, malformed_or_missing_command)
{
    ws_plan_cmd_cfg c = qwen3();
    char path[] = "/tmp/ws_plan_cmd_XXXXXX.json", line[WS_PLAN_CMD_LINE], why[512];
    write_tmp(path, "{\"name\":\"x\",\"command\":{\"program\":{\"value\":\"x\",\"ref\":\"r\"},"
                    "\"model\":[{\"flag\":\"\",\"value\":\"{model}\",\"ref\":\"r\"}],"
                    "\"experts\":{\"value\":\"gpu\",\"ref\":\"r\"},"
                    "\"flags\":{\"max_seq\":{\"flag\":\"--n\",\"ref\":\"r\"}}}}");
    ws_err err = {0};
    cr_assert_eq(ws_plan_cmd_render(path, &c, line, sizeof line, &err), WS_EPARSE);
    cr_assert(strstr(err.msg, "max_seq") != NULL, "%s", err.msg);
    unlink(path);
    char path2[] = "/tmp/ws_plan_cmd_XXXXXX.json";
    write_tmp(path2, "{\"name\":\"y\"}");
    ws_err_clear(&err);
    cr_assert_eq(ws_plan_cmd_supports(path2, &c, why, sizeof why, &err), 0);
    cr_assert_eq(err.code, 0, "%s", err.msg);
    cr_assert(strstr(why, "no \"command\"") != NULL, "%s", why);
    unlink(path2);
    c.model = "my model's";
    render_ok("llama.cpp", &c, line, sizeof line);
    cr_assert_str_eq(line, "llama-server -m 'my model'\\''s-BF16.gguf' -ngl 49");
}
