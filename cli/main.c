/* writescope: the command-line tool. Dispatches `writescope <command> ...` to the
 * command handlers in cli/cmd_*.c; each handler parses its own options, calls the
 * library and turns its errors into messages and exit codes.
 *
 * Output errors are checked here, once for every command: SIGPIPE is ignored, so a write
 * to a closed pipe fails with EPIPE like any other write error, and after the command
 * stdout is flushed and closed; a failure (full disk, closed pipe, I/O error) becomes one
 * line on stderr and a non-zero exit, so a truncated output never looks like success.
 *
 * SIGINT and SIGTERM remove the temporary files of outputs being written (and gnuplot's
 * private folder) before the process dies of the signal, so an interrupted command
 * leaves no hidden file beside its target (ws_atomic_cleanup); its status is the signal's,
 * 128 + signal number to a shell, as for every command. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "ws_atomic.h"
#include "ws_util.h"

typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the command name */
    const char *summary;
} cli_command;

static const cli_command k_commands[] = {
    {"model", cmd_model, "describe models from their Hugging Face config.json"},
    {"db", cmd_db, "create, show and export the profile/calibration database"},
    {"device", cmd_device, "show the CPU and CUDA devices this binary can use"},
    {"calib", cmd_calib, "measure this machine, fit the cost model, store the profile"},
    {"plot", cmd_plot, "draw figures from the database with gnuplot"},
    {"sim", cmd_sim, "simulate serving a model on profiled hardware under each KV policy"},
    {"bench", cmd_bench, "measure memory bandwidth and the CPU attention kernels"},
    {"run", cmd_run, "serve a batch through the KV format and the policy (GPU real or modeled)"},
    {"validate", cmd_validate, "compare the live runtime with the simulator on one workload"},
    {"trace", cmd_trace, "summarize, generate and convert request traces"},
    {"plan", cmd_plan, "capacity planning: highest load within SLOs per GPU and policy (modeled)"},
    {"fidelity", cmd_fidelity, "the simulator against published measurements (e2e and operators)"},
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: writescope <command> [options]   (writescope <command> --help for details)\n"
            "\n"
            "CPU-GPU load balancing of the KV cache for long-context MoE inference.\n"
            "\ncommands:\n");
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        fprintf(out, "  %-9s %s\n", k_commands[i].name, k_commands[i].summary);
    fprintf(out, "\nenvironment: WRITESCOPE_HOME (project folder), WRITESCOPE_DB (database path),\n"
                 "  WRITESCOPE_DB_TIMEOUT_MS (lock wait), WRITESCOPE_CUDA_LIB (CUDA backend .so),\n"
                 "  WRITESCOPE_ISA (force the CPU kernels' path: scalar|avx2|avx512|avx512bf16|amx)\n");
}

static int run(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("writescope %s\n", WS_VERSION);
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        if (!strcmp(argv[1], k_commands[i].name))
            return k_commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "writescope: unknown command '%s' (see 'writescope --help')\n", argv[1]);
    return CLI_EXIT_USAGE;
}

static void on_stop_signal(int sig)
{
    ws_atomic_cleanup();
    signal(sig, SIG_DFL);
    raise(sig); /* delivered when the handler returns: the process ends by the signal */
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {0};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT); /* one cleanup at a time */
    sigaddset(&sa.sa_mask, SIGTERM);
    const int sigs[] = {SIGINT, SIGTERM};
    for (int i = 0; i < 2; i++) {
        struct sigaction old;
        /* a signal ignored by whoever started us (nohup, a background job) stays ignored */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(sigs[i], &sa, NULL);
    }
    cli_open_stdout();
    return cli_close_stdout(run(argc, argv));
}
