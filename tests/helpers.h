/* helpers: utilities shared by the test files: temporary folders, running the writescope
 * binary as a child process with captured output, and small file helpers. */
#ifndef WS_TEST_HELPERS_H
#define WS_TEST_HELPERS_H

#include <stddef.h>

#include "cost.h"
#include "store.h"

typedef struct th_run {
    int status;   /* exit status, or 128+signal */
    char *out;    /* captured stdout (NUL-terminated, caller frees via th_run_free) */
    char *err;    /* captured stderr */
} th_run;

/* A fresh temporary folder (mkdtemp) into buf. */
void th_tmpdir(char *buf, size_t cap);
/* Writes text to dir/name and returns the full path in buf. */
void th_write(const char *dir, const char *name, const char *text, char *buf, size_t cap);
/* Runs $WRITESCOPE_BIN (or bin/writescope) with the NULL-terminated args; env_kv is a
 * NULL-terminated list of "NAME=VALUE" added to the environment (may be NULL). */
th_run th_writescope(const char *const *args, const char *const *env_kv);
void th_run_free(th_run *r);
/* Runs the program argv[0] (searched on PATH) with argv, output captured the same way. */
th_run th_command(const char *const *argv, const char *const *env_kv);
/* The same with stdout on out_fd (r.out stays empty); SIGPIPE is ignored in the child when
 * sigpipe_ignored, as under a parent that ignores it, else it has its default action. */
th_run th_writescope_to(const char *const *args, const char *const *env_kv, int out_fd,
                        int sigpipe_ignored);
/* The same for a command that must succeed and print JSON: asserts exit 0 and valid JSON,
 * returns the parsed value (caller json_decref's it). */
struct json_t;
struct json_t *th_writescope_json(const char *const *args, const char *const *env_kv);
/* A Qwen3-MoE config.json of toy size (3 layers, hidden 64, 8 heads over 2 KV heads, 8
 * experts, top-2), for tests that run the runtime or the validator end to end. */
extern const char *const th_tiny_moe;
/* The hardware of the paper's setting (a100-40gb-pcie, xeon-gold-5318y) for model m from a
 * store, the embedded one when s is NULL (asserts on failure). */
void th_paper_hw(ws_store *s, const ws_model *m, ws_hw *hw);
/* A shipped model on a GPU profile and xeon-gold-5318y from the embedded store (asserts). */
void th_load_hw(const char *model, const char *gpu, ws_model *m, ws_hw *hw);

/* A fixed list of requests as a simulator source (sim/serve.h): th_list_src_init fills the
 * source over l, which must outlive the run. */
struct sim_req;
struct sim_source;
typedef struct th_list_src {
    const struct sim_req *v;
    int n, i;
} th_list_src;
void th_list_src_init(th_list_src *l, const struct sim_req *v, int n, struct sim_source *src);
/* Each text, written as a fidelity points file, is refused by ws_fidelity_load with one line
 * naming the file. */
void th_expect_bad_points(const char *const *bad, size_t n);
/* th_tiny_moe on the paper's profiles, and its cost model with the default settings (free
 * with ws_cost_model_free). */
void th_tiny_cost_model(ws_model *m, ws_hw *hw, ws_cost_model *cm);
/* Runs writescope with args and env_kv, which must fail with exit `status`, one line on
 * stderr that contains needle, nothing on stdout. */
void th_expect_fail(const char *const *args, int status, const char *needle,
                    const char *const *env_kv);
/* Number of '\n' in s. */
int th_lines(const char *s);
/* Hex digest-free comparison: 1 if the two files have identical bytes. */
int th_same_file_bytes(const char *path, const char *saved, size_t saved_len);
char *th_slurp(const char *path, size_t *len);
/* Number of profiles in profiles/datasheet.json (the tests run from the project folder), and
 * in *n_params (may be NULL) the number of their parameters; fails the test if unreadable. */
size_t th_datasheet_profiles(size_t *n_params);
/* The real request trace `name` from $WRITESCOPE_TRACES, else ../shared/traces beside the
 * project root, into path; 0 when it is absent (the caller skips). */
int th_real_trace(const char *name, char *path, size_t cap);
/* The public Vidur A100 operator profiles (../shared/profiling/vidur-a100 from the project's
 * root, or $WRITESCOPE_PROFILING) into path; 1 if the folder's attention.csv exists. */
int th_vidur_profiles(char *path, size_t cap);

/* The same under a file-size limit of fsize bytes (RLIMIT_FSIZE) with SIGXFSZ ignored: a
 * write past it fails with EFBIG, as on a full disk, in writescope and its children. */
th_run th_writescope_fsize(const char *const *args, const char *const *env_kv, long fsize);
/* 1 when gnuplot is on PATH (the figures need it; make deps installs it). */
int th_have_gnuplot(void);
/* 1 when the CUDA backend loads and sees a device (a test that expects `--gpu cuda` to fail
 * expects it only on machines without one). */
int th_cuda_device_present(void);
/* Makes path a device-like file that no test may write into: a character device (the null
 * device's numbers, 1:3) when running as root, else a UNIX socket. Returns the kind as
 * ws_atomic names it ("a device" or "a socket"). */
const char *th_device_like(const char *path);
/* 1 when path is still that device-like file. */
int th_is_device_like(const char *path);

/* Starts $WRITESCOPE_BIN with args in the background, stdout/stderr to the given files;
 * returns the pid. th_wait returns its exit status (128+signal when killed). */
int th_spawn(const char *const *args, const char *const *env_kv, const char *out_path,
             const char *err_path);
int th_wait(int pid);

struct sqlite3;
/* The integer the first row of a one-value query returns (asserts it does). */
int th_count(struct sqlite3 *db, const char *sql);
/* The same on a database file, opened and closed around the query. */
int th_count_file(const char *db_path, const char *sql);
/* Runs SQL on a database file (created if missing); asserts it succeeds. */
void th_exec_sql(const char *db_path, const char *sql);
/* Number of entries in a folder, "." and ".." not counted. */
int th_dir_entries(const char *dir);

#endif
