/* cmd_device: `writescope device` -- the devices this binary can use: the host CPU (with
 * the SIMD paths it supports) and, through the dlopen-loaded CUDA backend, each GPU. On a
 * machine without a GPU or driver the CUDA line says why, and the command still succeeds. */
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "cli.h"
#include "cpu_features.h"
#include "opts.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: writescope device [--json]\n"
                 "\nLists the host CPU (model, logical CPUs, memory, SIMD features) and the CUDA\n"
                 "devices (name, compute capability, memory, driver), or why there are none.\n");
}

typedef struct device_opts {
    int json;
} device_opts;

static const cli_optdef k_opts[] = {
    {"json", CLI_FLAG(device_opts, json), .help = "machine-readable output"}, {0}};
static const cli_spec k_spec = {"device", k_opts, 0, usage};

int cmd_device(int argc, char **argv)
{
    device_opts o = {0};
    cli_args a;
    int rc = cli_opts_parse(&k_spec, argc, argv, &o, &a);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    ws_err err = {0};
    const ws_backend *cpu = ws_backend_cpu();
    ws_device_info info;
    if (cpu->device_info(0, &info, &err))
        return cli_fail(&err);
    char isa[256];
    ws_cpu_features_isa_string(ws_cpu_features_get(), isa, sizeof isa);

    ws_err cerr = {0};
    const ws_backend *cuda = ws_backend_cuda(&cerr);
    int ngpu = cuda ? cuda->device_count(&cerr) : 0;

    json_t *js = json_object(), *gpus = json_array();
    json_t *c = json_object();
    json_object_set_new(c, "model", json_string(info.name));
    json_object_set_new(c, "logical_cpus", json_integer(info.units));
    json_object_set_new(c, "mem_bytes", json_real(info.mem_bytes));
    json_object_set_new(c, "isa", json_string(isa));
    json_object_set_new(js, "cpu", c);
    for (int i = 0; i < ngpu; i++) {
        ws_device_info g;
        ws_err gerr = {0};
        json_t *d = json_object();
        int grc = cuda->device_info(i, &g, &gerr);
        json_object_set_new(d, "index", json_integer(i));
        json_object_set_new(d, "name", json_string(g.name));
        json_object_set_new(d, "compute_capability", json_sprintf("%d.%d", g.cc_major, g.cc_minor));
        json_object_set_new(d, "mem_bytes", json_real(g.mem_bytes));
        json_object_set_new(d, "multiprocessors", json_integer(g.units));
        json_object_set_new(d, "driver_version", json_integer(g.driver_version));
        json_object_set_new(d, "runtime_version", json_integer(g.runtime_version));
        json_object_set_new(d, "pci_bus_id", json_string(g.pci_bus_id));
        json_object_set_new(d, "usable", json_boolean(grc == 0));
        if (grc)
            json_object_set_new(d, "error", json_string(gerr.msg));
        json_array_append_new(gpus, d);
    }
    json_t *cu = json_object();
    json_object_set_new(cu, "backend_loaded", json_boolean(cuda != NULL));
    json_object_set_new(cu, "devices", gpus);
    if (ngpu == 0)
        json_object_set_new(cu, "reason", json_string(cerr.msg[0] ? cerr.msg : "no CUDA device"));
    json_object_set_new(js, "cuda", cu);
    if (o.json)
        return cli_print_json(js);

    printf("cpu   %s: %d logical CPUs, %.1f GiB\n", info.name, info.units,
           info.mem_bytes / (1024.0 * 1024 * 1024));
    printf("      isa: %s\n", isa[0] ? isa : "(x86-64 baseline only)");
    if (ngpu == 0)
        printf("cuda  none: %s\n", cerr.msg[0] ? cerr.msg : "no CUDA device");
    size_t i;
    json_t *d;
    json_array_foreach(gpus, i, d)
    {
        printf("cuda%zu %s (sm_%s) %.1f GiB%s%s\n", i,
               json_string_value(json_object_get(d, "name")),
               json_string_value(json_object_get(d, "compute_capability")),
               json_number_value(json_object_get(d, "mem_bytes")) / (1024.0 * 1024 * 1024),
               json_is_true(json_object_get(d, "usable")) ? "" : ": unusable: ",
               json_is_true(json_object_get(d, "usable"))
                   ? ""
                   : json_string_value(json_object_get(d, "error")));
    }
    json_decref(js);
    return CLI_EXIT_OK;
}
