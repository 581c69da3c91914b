/* backend: the CPU backend table and the loader of the CUDA backend (see backend.h). */
#include "backend.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_features.h"
#include "ws_util.h"

static int cpu_device_count(ws_err *err)
{
    (void)err;
    return 1;
}

static int cpu_device_info(int index, ws_device_info *out, ws_err *err)
{
    if (index != 0)
        return ws_err_set(err, WS_EINVAL, "cpu: no device %d (there is one host CPU device)",
                          index);
    const ws_cpu_features *f = ws_cpu_features_get();
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", f->model[0] ? f->model : "unknown x86-64 CPU");
    out->mem_bytes = f->mem_bytes;
    out->units = f->logical_cpus;
    return 0;
}

/* The GPU entries (set_device .. copy_bandwidth) stay NULL: see backend.h. */
static const ws_backend g_cpu = {
    .abi = WS_BACKEND_ABI,
    .name = "cpu",
    .device_count = cpu_device_count,
    .device_info = cpu_device_info,
};

const ws_backend *ws_backend_cpu(void) { return &g_cpu; }

/* The CUDA backend is loaded once per process; the outcome (table or reason) is kept. */
static pthread_once_t g_cuda_once = PTHREAD_ONCE_INIT;
static const ws_backend *g_cuda;
static ws_err g_cuda_err;

static void cuda_load(void)
{
    char path[WS_PATH_MAX], dir[WS_PATH_MAX];
    const char *env = getenv("WRITESCOPE_CUDA_LIB");
    if (env && *env) {
        snprintf(path, sizeof path, "%s", env);
    } else {
        if (ws_exe_dir(dir, sizeof dir, &g_cuda_err))
            return;
        if (ws_path_join(path, sizeof path, dir, "libwritescope_cuda.so", &g_cuda_err))
            return;
    }
    if (!ws_file_exists(path)) {
        ws_err_set(&g_cuda_err, WS_EDEVICE,
                   "CUDA backend not built (%s missing; it is built when nvcc is on PATH)", path);
        return;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        ws_err_set(&g_cuda_err, WS_EDEVICE, "%s: cannot load the CUDA backend: %s", path,
                   dlerror());
        return;
    }
    ws_backend_entry_fn entry;
    *(void **)&entry = dlsym(h, WS_CUDA_ENTRY_SYMBOL);
    if (!entry) {
        ws_err_set(&g_cuda_err, WS_EDEVICE, "%s: no symbol %s", path, WS_CUDA_ENTRY_SYMBOL);
        dlclose(h);
        return;
    }
    const ws_backend *b = entry();
    if (!b || b->abi != WS_BACKEND_ABI) {
        ws_err_set(&g_cuda_err, WS_EDEVICE, "%s: backend ABI %d, expected %d (rebuild with make)",
                   path, b ? b->abi : -1, WS_BACKEND_ABI);
        dlclose(h);
        return;
    }
    g_cuda = b; /* the handle stays open for the life of the process */
}

const ws_backend *ws_backend_cuda(ws_err *err)
{
    pthread_once(&g_cuda_once, cuda_load);
    if (!g_cuda && err)
        *err = g_cuda_err;
    return g_cuda;
}
