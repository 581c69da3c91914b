/* fingerprint: see fingerprint.h. */
#include "fingerprint.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "cpu_features.h"

static uint64_t fnv1a(uint64_t h, const char *s)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h ^ 0xff; /* field separator, so "ab"+"c" differs from "a"+"bc" */
}

void ws_host_fp_hash(ws_host_fp *fp)
{
    char num[64];
    uint64_t h = 14695981039346656037ull;
    h = fnv1a(h, fp->cpu_model);
    snprintf(num, sizeof num, "%d", fp->cpu_cores);
    h = fnv1a(h, num);
    snprintf(num, sizeof num, "%.0f", floor(fp->mem_bytes / (1024.0 * 1024 * 1024) + 0.5));
    h = fnv1a(h, num);
    h = fnv1a(h, fp->isa);
    if (fp->has_gpu) {
        h = fnv1a(h, fp->gpu_name);
        h = fnv1a(h, fp->gpu_cc);
        snprintf(num, sizeof num, "%.0f", floor(fp->gpu_mem_bytes / (1024.0 * 1024 * 1024) + 0.5));
        h = fnv1a(h, num);
        h = fnv1a(h, fp->gpu_driver);
        h = fnv1a(h, fp->pcie_link);
    }
    snprintf(fp->id, sizeof fp->id, "%016llx", (unsigned long long)h);
}

int ws_host_fp_detect(const char *isa_path, ws_host_fp *fp, ws_err *err)
{
    memset(fp, 0, sizeof *fp);
    const ws_cpu_features *f = ws_cpu_features_get();
    snprintf(fp->cpu_model, sizeof fp->cpu_model, "%s", f->model[0] ? f->model : "unknown");
    fp->cpu_cores = f->logical_cpus;
    fp->mem_bytes = f->mem_bytes;
    char flags[128];
    ws_cpu_features_isa_string(f, flags, sizeof flags);
    snprintf(fp->isa, sizeof fp->isa, "%s; path %s", flags, isa_path ? isa_path : "?");

    ws_err cerr = {0};
    const ws_backend *cuda = ws_backend_cuda(&cerr);
    if (cuda && cuda->device_count(&cerr) > 0) {
        ws_device_info g;
        if (cuda->device_info(0, &g, err))
            return err ? err->code : WS_EDEVICE;
        fp->has_gpu = 1;
        snprintf(fp->gpu_name, sizeof fp->gpu_name, "%s", g.name);
        snprintf(fp->gpu_cc, sizeof fp->gpu_cc, "%d.%d", g.cc_major, g.cc_minor);
        fp->gpu_mem_bytes = g.mem_bytes;
        snprintf(fp->gpu_driver, sizeof fp->gpu_driver, "%d", g.driver_version);
        if (g.pcie_gen)
            snprintf(fp->pcie_link, sizeof fp->pcie_link, "gen%d x%d", g.pcie_gen, g.pcie_width);
    }
    ws_host_fp_hash(fp);
    return 0;
}
