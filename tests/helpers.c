/* helpers: see helpers.h. */
#include "helpers.h"
#include "fidelity.h"
#include "serve.h"

#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "ws_util.h"

const char *const th_tiny_moe =
    "{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"model_type\": \"qwen3_moe\", "
    "\"hidden_size\": 64, \"num_hidden_layers\": 3, \"num_attention_heads\": 8, "
    "\"num_key_value_heads\": 2, \"head_dim\": 32, \"intermediate_size\": 128, "
    "\"moe_intermediate_size\": 32, \"num_experts\": 8, \"num_experts_per_tok\": 2, "
    "\"vocab_size\": 1000, \"torch_dtype\": \"bfloat16\"}";

void th_load_hw(const char *model, const char *gpu, ws_model *m, ws_hw *hw)
{
    ws_err err = {0};
    ws_store *s;
    cr_assert_eq(ws_store_open_embedded(&s, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_hw_load(s, model, gpu, "xeon-gold-5318y", WS_DT_BF16, m, hw, NULL, &err), 0,
                 "%s", err.msg);
    ws_store_close(s);
}

static int list_next(void *ctx, sim_req *r, ws_err *err)
{
    (void)err;
    th_list_src *l = ctx;
    if (l->i >= l->n)
        return 0;
    *r = l->v[l->i++];
    return 1;
}

void th_list_src_init(th_list_src *l, const sim_req *v, int n, sim_source *src)
{
    *l = (th_list_src){v, n, 0};
    *src = (sim_source){list_next, l, 0};
}

void th_expect_bad_points(const char *const *bad, size_t n)
{
    char dir[256], path[512];
    th_tmpdir(dir, sizeof dir);
    for (size_t i = 0; i < n; i++) {
        th_write(dir, "b.json", bad[i], path, sizeof path);
        ws_fid_report r = {0};
        ws_err err = {0};
        cr_assert_neq(ws_fidelity_load(path, &r, &err), 0, "%s", bad[i]);
        cr_assert(strstr(err.msg, "b.json") && !strchr(err.msg, '\n'), "%s", err.msg);
        ws_fidelity_free(&r);
    }
}

void th_paper_hw(ws_store *s, const ws_model *m, ws_hw *hw)
{
    ws_err err = {0};
    ws_store *own = NULL;
    if (!s) {
        cr_assert_eq(ws_store_open_embedded(&own, &err), 0, "%s", err.msg);
        s = own;
    }
    ws_profile g, h;
    cr_assert_eq(ws_profile_load(s, "a100-40gb-pcie", &g, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_profile_load(s, "xeon-gold-5318y", &h, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_hw_from_profiles(&g, &h, m->attn, WS_DT_BF16, m->weight_dtype, hw, &err), 0, "%s",
                 err.msg);
    ws_profile_free(&g);
    ws_profile_free(&h);
    if (own)
        ws_store_close(own);
}

void th_tiny_cost_model(ws_model *m, ws_hw *hw, ws_cost_model *cm)
{
    ws_err err = {0};
    cr_assert_eq(ws_model_parse(th_tiny_moe, "tiny.json", m, &err), 0, "%s", err.msg);
    th_paper_hw(NULL, m, hw);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cr_assert_eq(ws_cost_model_init(hw, m, &cc, cm, &err), 0, "%s", err.msg);
}

void th_expect_fail(const char *const *args, int status, const char *needle,
                    const char *const *env_kv)
{
    th_run r = th_writescope(args, env_kv);
    cr_assert_eq(r.status, status, "%s %s: exit %d, stderr: %s", args[0], args[1] ? args[1] : "",
                 r.status, r.err);
    cr_assert_eq(th_lines(r.err), 1, "one line: %s", r.err);
    cr_assert_neq(strstr(r.err, needle), NULL, "stderr '%s' lacks '%s'", r.err, needle);
    cr_assert_str_eq(r.out, "");
    th_run_free(&r);
}

void th_tmpdir(char *buf, size_t cap)
{
    snprintf(buf, cap, "/tmp/ws_test_XXXXXX");
    cr_assert_not_null(mkdtemp(buf), "mkdtemp failed");
}

void th_write(const char *dir, const char *name, const char *text, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s", dir, name);
    FILE *f = fopen(buf, "wb");
    cr_assert_not_null(f, "cannot write %s", buf);
    fputs(text, f);
    fclose(f);
}

char *th_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = '\0';
    fclose(f);
    if (len)
        *len = got;
    return b;
}

size_t th_datasheet_profiles(size_t *n_params)
{
    json_error_t je;
    json_t *ds = json_load_file("profiles/datasheet.json", 0, &je);
    cr_assert_not_null(ds, "run the tests from the project folder: %s", je.text);
    json_t *profiles = json_object_get(ds, "profiles"), *p;
    size_t n = json_array_size(profiles), params = 0, i;
    json_array_foreach(profiles, i, p) params += json_object_size(json_object_get(p, "params"));
    json_decref(ds);
    if (n_params)
        *n_params = params;
    return n;
}

int th_same_file_bytes(const char *path, const char *saved, size_t saved_len)
{
    size_t len;
    char *now = th_slurp(path, &len);
    int same = now && len == saved_len && memcmp(now, saved, len) == 0;
    free(now);
    return same;
}

static void append(char **buf, size_t *len, const char *data, size_t n)
{
    *buf = realloc(*buf, *len + n + 1);
    memcpy(*buf + *len, data, n);
    *len += n;
    (*buf)[*len] = '\0';
}

/* In a forked child: sets the extra environment and execs the binary with args, or, when
 * prog is set, the program args[0] found on PATH with args. */
static void exec_writescope(const char *prog, const char *const *args, const char *const *env_kv)
{
    const char *bin = getenv("WRITESCOPE_BIN");
    if (!bin || !*bin)
        bin = "bin/writescope";
    for (const char *const *e = env_kv; e && *e; e++)
        putenv((char *)*e);
    /* the child meets a signal as a foreground command does, however the tests were
     * started (a background job starts with SIGINT ignored) */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (prog) {
        execvp(prog, (char *const *)args);
        fprintf(stderr, "exec %s failed\n", prog);
        _exit(127);
    }
    const char *argv[64];
    int n = 0;
    argv[n++] = bin;
    for (const char *const *a = args; *a && n < 63; a++)
        argv[n++] = *a;
    argv[n] = NULL;
    execv(bin, (char *const *)argv);
    fprintf(stderr, "exec %s failed\n", bin);
    _exit(127);
}

/* Runs the binary with stdout on out_fd, or on a captured pipe when out_fd < 0; fsize > 0:
 * under that file-size limit, SIGXFSZ ignored. */
static th_run run_captured_lim(const char *prog, const char *const *args, const char *const *env_kv,
                               int out_fd, int sigpipe_ignored, long fsize)
{
    int po[2] = {-1, -1}, pe[2];
    cr_assert(pipe(pe) == 0);
    if (out_fd < 0)
        cr_assert(pipe(po) == 0);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork failed");
    if (pid == 0) {
        signal(SIGPIPE, sigpipe_ignored ? SIG_IGN : SIG_DFL);
        if (fsize > 0) {
            const struct rlimit rl = {(rlim_t)fsize, (rlim_t)fsize};
            signal(SIGXFSZ, SIG_IGN); /* inherited through exec: writes fail with EFBIG */
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
                _exit(126);
        }
        dup2(out_fd < 0 ? po[1] : out_fd, 1);
        dup2(pe[1], 2);
        if (out_fd < 0)
            close(po[0]);
        close(pe[0]);
        exec_writescope(prog, args, env_kv);
    }
    if (out_fd < 0)
        close(po[1]);
    close(pe[1]);
    th_run r = {0};
    size_t lo = 0, le = 0;
    append(&r.out, &lo, "", 0);
    append(&r.err, &le, "", 0);
    struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    int open_fds = out_fd < 0 ? 2 : 1;
    char buf[65536];
    while (open_fds > 0) {
        if (poll(fds, 2, -1) < 0)
            break;
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP)))
                continue;
            ssize_t n = read(fds[i].fd, buf, sizeof buf);
            if (n <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
            } else if (i == 0) {
                append(&r.out, &lo, buf, (size_t)n);
            } else {
                append(&r.err, &le, buf, (size_t)n);
            }
        }
    }
    int st;
    waitpid(pid, &st, 0);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
}

static th_run run_captured(const char *prog, const char *const *args, const char *const *env_kv,
                           int out_fd, int sigpipe_ignored)
{
    return run_captured_lim(prog, args, env_kv, out_fd, sigpipe_ignored, 0);
}

th_run th_writescope(const char *const *args, const char *const *env_kv)
{
    return run_captured(NULL, args, env_kv, -1, 0);
}

th_run th_writescope_fsize(const char *const *args, const char *const *env_kv, long fsize)
{
    return run_captured_lim(NULL, args, env_kv, -1, 0, fsize);
}

int th_have_gnuplot(void)
{
    return system("command -v gnuplot >/dev/null 2>&1") == 0;
}

int th_cuda_device_present(void)
{
    ws_err err = {0};
    const ws_backend *b = ws_backend_cuda(&err);
    return b && b->device_count(&err) > 0;
}

const char *th_device_like(const char *path)
{
    if (geteuid() == 0) {
        cr_assert_eq(mknod(path, S_IFCHR | 0600, makedev(1, 3)), 0, "mknod %s", path);
        return "a device";
    }
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    cr_assert_lt(strlen(path), sizeof a.sun_path, "%s: too long for a socket", path);
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0, "bind %s", path);
    close(fd); /* the socket file stays */
    return "a socket";
}

int th_is_device_like(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0;
    return geteuid() == 0 ? S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)
                          : S_ISSOCK(st.st_mode);
}

th_run th_command(const char *const *argv, const char *const *env_kv)
{
    return run_captured(argv[0], argv, env_kv, -1, 0);
}

th_run th_writescope_to(const char *const *args, const char *const *env_kv, int out_fd,
                        int sigpipe_ignored)
{
    return run_captured(NULL, args, env_kv, out_fd, sigpipe_ignored);
}

void th_run_free(th_run *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

int th_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Criterion prints skipped tests only with --verbose; a skip (no GPU, no trace folder)
 * must always say why, in one line. */
ReportHook(POST_TEST)(struct criterion_test_stats *stats)
{
    if (stats->test_status == CR_STATUS_SKIPPED)
        fprintf(stderr, "[SKIP] %s::%s: %s\n", stats->test->category, stats->test->name,
                stats->message ? stats->message : "skipped");
}

int th_spawn(const char *const *args, const char *const *env_kv, const char *out_path,
             const char *err_path)
{
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork failed");
    if (pid == 0) {
        int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fo, 1);
        dup2(fe, 2);
        exec_writescope(NULL, args, env_kv);
    }
    return (int)pid;
}

int th_wait(int pid)
{
    int st;
    waitpid((pid_t)pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int th_count(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql,
                 sqlite3_errmsg(db));
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
    int n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return n;
}

int th_count_file(const char *db_path, const char *sql)
{
    sqlite3 *db;
    cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
    int n = th_count(db, sql);
    sqlite3_close(db);
    return n;
}

void th_exec_sql(const char *db_path, const char *sql)
{
    sqlite3 *db;
    char *msg = NULL;
    cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    cr_assert_eq(rc, SQLITE_OK, "%s: %s", db_path, msg ? msg : "");
    sqlite3_close(db);
}

int th_dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

json_t *th_writescope_json(const char *const *args, const char *const *env_kv)
{
    th_run r = th_writescope(args, env_kv);
    cr_assert_eq(r.status, 0, "exit %d, stderr: %s", r.status, r.err);
    json_error_t je;
    json_t *v = json_loads(r.out, 0, &je);
    cr_assert_not_null(v, "not JSON (%s): %s", je.text, r.out);
    th_run_free(&r);
    return v;
}

int th_vidur_profiles(char *path, size_t cap)
{
    const char *env = getenv("WRITESCOPE_PROFILING");
    char root[WS_PATH_MAX], file[WS_PATH_MAX + 64];
    if (env && *env)
        snprintf(path, cap, "%s", env);
    else if (ws_root_dir(root, sizeof root, NULL) == 0)
        snprintf(path, cap, "%s/../shared/profiling/vidur-a100", root);
    else
        return 0;
    snprintf(file, sizeof file, "%s/attention.csv", path);
    return ws_file_exists(file);
}

int th_real_trace(const char *name, char *path, size_t cap)
{
    const char *env = getenv("WRITESCOPE_TRACES");
    char root[WS_PATH_MAX];
    if (env && *env)
        snprintf(path, cap, "%s/%s", env, name);
    else if (ws_root_dir(root, sizeof root, NULL) == 0)
        snprintf(path, cap, "%s/../shared/traces/%s", root, name);
    else
        return 0;
    return ws_file_exists(path);
}
