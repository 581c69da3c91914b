/* test_layout: the code layout's rules (docs/design.md, "Code layout") hold in the tree.
 * Every source file's `#include "x.h"` is resolved to the folder that holds x.h, and that
 * folder must be one its own folder may use: folders only include folders below them
 * (common < platform < kernels; common < store; calib and runtime above kernels and store;
 * sim above runtime and traces; validate above sim and calib; plots on store and common
 * only, so a figure reads store rows and never the simulator, runtime, validation or
 * calibrator; cli above everything, and the only folder that may use plots/), and
 * <sqlite3.h> appears only in store/. A header included from a folder the rules do not
 * allow fails the test with the file and the header named. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "ws_util.h"

/* A folder and the folders (besides itself) whose headers it may include. */
typedef struct layer {
    const char *dir;
    const char *may_use; /* space-separated folders */
} layer;

static const layer layers[] = {
    {"common", ""},
    {"platform", "common"},
    {"store", "common"},
    {"kernels", "common platform kernels/cuda"},
    {"kernels/cuda", "common platform kernels"},
    /* calib shapes its probes after model descriptions (runtime/model.h), and its importer
     * fits each operation's work as the cost model defines it (runtime/cost.h's shape
     * functions, pure arithmetic); nothing else of runtime/ */
    {"calib", "common platform store kernels kernels/cuda calib/probe runtime:model.h "
              "runtime:cost.h"},
    {"calib/probe", "common platform kernels calib runtime:model.h"},
    {"runtime", "common platform store kernels kernels/cuda"},
    {"traces", "common"},
    {"sim", "common store traces runtime"},
    /* validate runs the live engine, the simulator and (--calibrate) the calibrator */
    {"validate", "common platform store kernels calib runtime sim traces"},
    /* every figure: the gnuplot scripts and the C that turns store rows into their data */
    {"plots", "common store"},
    {"cli", "common platform store kernels kernels/cuda calib calib/probe runtime sim traces "
            "validate plots"},
    /* the parsers of outside input: calib's profiling-CSV reader and the import's file layer,
     * the command line's option parser, the fidelity points reader */
    {"fuzz", "common store runtime traces calib:vidur_csv.h calib:import_files.h cli:opts.h "
             "cli:workload.h validate:fidelity_points.h"},
};
#define N_LAYERS (sizeof layers / sizeof layers[0])

typedef struct header {
    char name[128];
    int layer;
} header;

static header headers[1024];
static int n_headers;
static char root[WS_PATH_MAX];

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

static int is_source(const char *name)
{
    return has_suffix(name, ".c") || has_suffix(name, ".h") || has_suffix(name, ".cu") ||
           has_suffix(name, ".cuh");
}

/* Calls fn(layer, folder path, file name) for every file of every layer's folder. */
static void for_each_file(void (*fn)(int l, const char *dir, const char *name))
{
    for (size_t l = 0; l < N_LAYERS; l++) {
        char path[WS_PATH_MAX * 2];
        snprintf(path, sizeof path, "%s/%s", root, layers[l].dir);
        DIR *d = opendir(path);
        if (!d)
            continue;
        struct dirent *e;
        while ((e = readdir(d)))
            fn((int)l, path, e->d_name);
        closedir(d);
    }
}

static void index_header(int l, const char *dir, const char *name)
{
    (void)dir;
    if (!has_suffix(name, ".h") && !has_suffix(name, ".cuh"))
        return;
    cr_assert_lt(n_headers, 1024);
    for (int i = 0; i < n_headers; i++)
        cr_assert_str_neq(headers[i].name, name,
                          "header %s exists in %s and %s: include paths are by name, "
                          "so header names must be unique",
                          name, layers[headers[i].layer].dir, layers[l].dir);
    snprintf(headers[n_headers].name, sizeof headers[0].name, "%s", name);
    headers[n_headers++].layer = l;
}

/* 1 if a file of layer `from` may include header `name` of layer `to`. */
static int allowed(int from, int to, const char *name)
{
    if (from == to)
        return 1;
    const char *dir = layers[to].dir;
    size_t dl = strlen(dir);
    for (const char *p = layers[from].may_use; *p;) {
        size_t len = strcspn(p, " ");
        if (len == dl && !strncmp(p, dir, dl))
            return 1;
        /* "folder:header.h": only that header of the folder */
        if (len > dl + 1 && !strncmp(p, dir, dl) && p[dl] == ':' &&
            strlen(name) == len - dl - 1 && !strncmp(p + dl + 1, name, len - dl - 1))
            return 1;
        p += len;
        while (*p == ' ')
            p++;
    }
    return 0;
}

/* Checks one file's includes; returns the number of violations (each reported). */
static int check_file(int l, const char *path, const char *rel)
{
    size_t len;
    char *text = th_slurp(path, &len);
    cr_assert_not_null(text, "cannot read %s", path);
    int bad = 0;
    for (char *line = text; line && *line;) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char name[128];
        const char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (!strncmp(p, "#include <sqlite3.h>", 20) && strcmp(layers[l].dir, "store")) {
            cr_log_error("%s includes <sqlite3.h>: SQL stays in store/", rel);
            bad++;
        } else if (sscanf(p, "#include \"%127[^\"]\"", name) == 1) {
            for (int i = 0; i < n_headers; i++) {
                if (strcmp(headers[i].name, name))
                    continue;
                if (!allowed(l, headers[i].layer, name)) {
                    cr_log_error("%s includes %s/%s: %s/ may use only %s", rel,
                                 layers[headers[i].layer].dir, name, layers[l].dir,
                                 *layers[l].may_use ? layers[l].may_use : "itself");
                    bad++;
                }
                break;
            }
        }
        line = next;
    }
    free(text);
    return bad;
}

static int g_bad, g_files;

static void check_source(int l, const char *dir, const char *name)
{
    if (!is_source(name))
        return;
    char file[WS_PATH_MAX * 3], rel[WS_PATH_MAX];
    snprintf(file, sizeof file, "%s/%s", dir, name);
    snprintf(rel, sizeof rel, "%s/%s", layers[l].dir, name);
    g_bad += check_file(l, file, rel);
    g_files++;
}

Test(layout, folders_include_only_the_folders_below_them)
{
    ws_err err = {0};
    cr_assert_eq(ws_root_dir(root, sizeof root, &err), 0, "%s", err.msg);
    for_each_file(index_header);
    cr_assert_gt(n_headers, 20, "found only %d headers under %s", n_headers, root);
    for_each_file(check_source);
    cr_assert_gt(g_files, 40);
    cr_assert_eq(g_bad, 0, "%d includes break the layout's rules (listed above)", g_bad);
}

Test(layout, the_check_catches_a_kernel_that_calls_up)
{
    /* The rule table itself: a kernel may not use calib/, the store or the runtime. */
    int kernels = -1, calib = -1, store = -1, cli = -1;
    for (size_t l = 0; l < N_LAYERS; l++) {
        if (!strcmp(layers[l].dir, "kernels"))
            kernels = (int)l;
        if (!strcmp(layers[l].dir, "calib"))
            calib = (int)l;
        if (!strcmp(layers[l].dir, "store"))
            store = (int)l;
        if (!strcmp(layers[l].dir, "cli"))
            cli = (int)l;
    }
    cr_assert(!allowed(kernels, calib, "calib.h"));
    cr_assert(!allowed(kernels, store, "store.h"));
    cr_assert(allowed(cli, calib, "calib.h"));
    int runtime = -1;
    for (size_t l = 0; l < N_LAYERS; l++)
        if (!strcmp(layers[l].dir, "runtime"))
            runtime = (int)l;
    cr_assert(allowed(calib, runtime, "model.h"));
    cr_assert(!allowed(calib, runtime, "policy.h"));
}

static int layer_of(const char *dir)
{
    for (size_t l = 0; l < N_LAYERS; l++)
        if (!strcmp(layers[l].dir, dir))
            return (int)l;
    cr_assert_fail("no layer '%s' in the table", dir);
    return -1;
}

Test(layout, figures_read_only_store_rows)
{
    /* plots/ may not reach past the store: the simulator, runtime, validation and
     * calibrator are off limits, and below cli no folder draws figures. */
    const int plots = layer_of("plots");
    const char *const above[][2] = {{"sim", "serve.h"},      {"sim", "plan.h"},
                                    {"runtime", "hw.h"},     {"runtime", "policy.h"},
                                    {"validate", "validate.h"}, {"calib", "calib.h"},
                                    {"calib", "fit.h"}};
    for (size_t i = 0; i < sizeof above / sizeof above[0]; i++)
        cr_assert(!allowed(plots, layer_of(above[i][0]), above[i][1]), "plots/ may use %s/%s",
                  above[i][0], above[i][1]);
    cr_assert(allowed(plots, layer_of("store"), "simdb.h"));
    cr_assert(allowed(plots, layer_of("common"), "ws_err.h"));
    for (size_t l = 0; l < N_LAYERS; l++)
        if (strcmp(layers[l].dir, "cli") && strcmp(layers[l].dir, "plots"))
            cr_assert(!allowed((int)l, plots, "sim_plot.h"), "%s/ may use plots/",
                      layers[l].dir);
    cr_assert(allowed(layer_of("cli"), plots, "sim_plot.h"));
}
