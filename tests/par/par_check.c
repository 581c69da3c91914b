/* par_check: ws_par's map and agree driven by tests/test_par.c, one process or under
 * `mpirun -n N`. Each rank checks what it received and exits 0 when it is right, 1 when not;
 * rank 0 prints one line saying what it saw.
 *   par_check map N all|root  every record i (on every rank, or rank 0) is point i's
 *   par_check fail N K        points K and K+1 fail: every rank gets point K's error
 *   par_check agree R         rank R fails a step: every rank gets its error */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_par.h"

typedef struct rec {
    unsigned long long i, sq; /* the point, and a value computed from it */
    char tag[40];
} rec;

typedef struct ctx {
    long long fail; /* point that fails (and the next), or -1 */
} ctx;

static int eval(void *c, size_t i, void *r, ws_err *err)
{
    const ctx *x = c;
    if (x->fail >= 0 && (i == (size_t)x->fail || i == (size_t)x->fail + 1))
        return ws_err_set(err, WS_EINVAL, "point %zu refused", i);
    rec *o = r;
    o->i = i;
    o->sq = (unsigned long long)i * i + 7;
    snprintf(o->tag, sizeof o->tag, "point-%zu", i);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: par_check map N all|root | fail N K | agree R\n");
        return 2;
    }
    ws_err err = {0};
    ws_par *p;
    if (ws_par_init(&p, &err)) {
        fprintf(stderr, "par_check: %s\n", err.msg);
        return 1;
    }
    const int rank = ws_par_rank(p), size = ws_par_size(p);
    int ok = 0;
    if (!strcmp(argv[1], "map") && argc == 4) {
        const size_t n = (size_t)atoll(argv[2]);
        const int to = !strcmp(argv[3], "all") ? WS_PAR_TO_ALL : WS_PAR_TO_ROOT;
        const int receives = rank == 0 || to == WS_PAR_TO_ALL;
        rec *v = receives ? calloc(n ? n : 1, sizeof *v) : NULL;
        ctx c = {.fail = -1};
        int rc = ws_par_map(p, n, sizeof *v, eval, &c, v, to, &err);
        ok = !rc;
        for (size_t i = 0; ok && receives && i < n; i++) {
            char tag[40];
            snprintf(tag, sizeof tag, "point-%zu", i);
            ok = v[i].i == i && v[i].sq == (unsigned long long)i * i + 7 && !strcmp(v[i].tag, tag);
        }
        if (!rank)
            printf("par_check: map n=%zu size=%d backend=%s share0=%zu %s\n", n, size,
                   ws_par_backend(p), ws_par_share(p, n), ok ? "ok" : rc ? err.msg : "wrong records");
        free(v);
    } else if (!strcmp(argv[1], "fail") && argc == 4) {
        const size_t n = (size_t)atoll(argv[2]);
        ctx c = {.fail = atoll(argv[3])};
        rec *v = calloc(n ? n : 1, sizeof *v);
        int rc = ws_par_map(p, n, sizeof *v, eval, &c, v, WS_PAR_TO_ALL, &err);
        char want[64];
        snprintf(want, sizeof want, "point %lld refused", c.fail);
        ok = rc == WS_EINVAL && strstr(err.msg, want) != NULL;
        if (!rank)
            printf("par_check: fail size=%d rc=%d err=%s %s\n", size, rc, err.msg, ok ? "ok" : "WRONG");
        free(v);
    } else if (!strcmp(argv[1], "agree")) {
        const int who = atoi(argv[2]);
        int rc = rank == who ? ws_err_set(&err, WS_EIO, "rank %d said no", rank) : 0;
        rc = ws_par_agree(p, rc, &err);
        char want[64];
        snprintf(want, sizeof want, "rank %d said no", who);
        ok = who < size ? rc == WS_EIO && strstr(err.msg, want) != NULL : rc == 0;
        if (!rank)
            printf("par_check: agree size=%d rc=%d err=%s %s\n", size, rc, err.msg, ok ? "ok" : "WRONG");
    } else {
        fprintf(stderr, "par_check: unknown mode '%s'\n", argv[1]);
    }
    ws_par_finalize(p);
    return ok ? 0 : 1;
}
