/* ws_par: parallel map over independent points, single process or MPI (see ws_par.h). */
#include "ws_par.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef WS_HAVE_MPI
#include <mpi.h>
#endif

/* One rank's outcome of a step, exchanged before any data moves. */
typedef struct par_status {
    int code;            /* 0 or a ws_err code */
    int rank;
    unsigned long long point; /* the failing point (map), else 0 */
    char msg[WS_ERR_MSG_MAX];
} par_status;

typedef struct par_backend {
    const char *name;
    int (*init)(ws_par *p, ws_err *err);
    void (*finalize)(ws_par *p);
    /* Every rank's status into all[size], on every rank. */
    int (*allgather_status)(ws_par *p, const par_status *mine, par_status *all, ws_err *err);
    /* Rank r's bytes[r] bytes, rank after rank, into all (on rank 0; every rank with to_all). */
    int (*gatherv)(ws_par *p, const void *mine, void *all, const size_t *bytes, int to_all,
                   ws_err *err);
} par_backend;

struct ws_par {
    const par_backend *be;
    int rank, size;
    par_status *status; /* size slots for exchange(), allocated once at init */
};

/* ---- single process ---- */

static int single_init(ws_par *p, ws_err *err)
{
    (void)err;
    p->rank = 0;
    p->size = 1;
    return 0;
}

static void single_finalize(ws_par *p)
{
    (void)p;
}

static int single_allgather_status(ws_par *p, const par_status *mine, par_status *all, ws_err *err)
{
    (void)p;
    (void)err;
    all[0] = *mine;
    return 0;
}

static int single_gatherv(ws_par *p, const void *mine, void *all, const size_t *bytes, int to_all,
                          ws_err *err)
{
    (void)p;
    (void)to_all;
    (void)err;
    if (all != mine && bytes[0])
        memcpy(all, mine, bytes[0]);
    return 0;
}

static const par_backend single_backend = {"single", single_init, single_finalize,
                                           single_allgather_status, single_gatherv};

/* ---- MPI ---- */

#ifdef WS_HAVE_MPI
static int mpi_fail(int rc, const char *what, ws_err *err)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS)
        snprintf(s, sizeof s, "error %d", rc);
    return ws_err_set(err, WS_EDEVICE, "MPI: %s: %s", what, s);
}

static int mpi_init(ws_par *p, ws_err *err)
{
    int rc = MPI_Init(NULL, NULL);
    if (rc != MPI_SUCCESS)
        return mpi_fail(rc, "MPI_Init", err);
    /* MPI's own failures keep MPI_ERRORS_ARE_FATAL: the launcher ends every rank, so none
     * is left waiting in a collective. */
    MPI_Comm_rank(MPI_COMM_WORLD, &p->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p->size);
    return 0;
}

static void mpi_finalize(ws_par *p)
{
    (void)p;
    MPI_Finalize();
}

static int mpi_allgather_status(ws_par *p, const par_status *mine, par_status *all, ws_err *err)
{
    (void)p;
    int rc = MPI_Allgather(mine, (int)sizeof *mine, MPI_BYTE, all, (int)sizeof *mine, MPI_BYTE,
                           MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, "MPI_Allgather", err);
}

static int mpi_gatherv(ws_par *p, const void *mine, void *all, const size_t *bytes, int to_all,
                       ws_err *err)
{
    int *counts = calloc((size_t)p->size * 2, sizeof *counts);
    if (!counts)
        return ws_err_set(err, WS_ENOMEM, "MPI gather: out of memory");
    int *displs = counts + p->size;
    for (int r = 0, off = 0; r < p->size; r++) { /* ws_par_map checked the total fits an int */
        counts[r] = (int)bytes[r];
        displs[r] = off;
        off += counts[r];
    }
    int rc = to_all ? MPI_Allgatherv(mine, counts[p->rank], MPI_BYTE, all, counts, displs,
                                     MPI_BYTE, MPI_COMM_WORLD)
                    : MPI_Gatherv(mine, counts[p->rank], MPI_BYTE, all, counts, displs, MPI_BYTE,
                                  0, MPI_COMM_WORLD);
    free(counts);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, to_all ? "MPI_Allgatherv" : "MPI_Gatherv", err);
}

static const par_backend mpi_backend = {"mpi", mpi_init, mpi_finalize, mpi_allgather_status,
                                        mpi_gatherv};
#endif

/* The backends this build holds: single, then MPI where it was compiled in. */
enum { BE_SINGLE, BE_MPI, BE_COUNT };
static const par_backend *const backends[BE_COUNT] = {
    [BE_SINGLE] = &single_backend,
#ifdef WS_HAVE_MPI
    [BE_MPI] = &mpi_backend,
#endif
};

/* ---- the launcher, from the environment ---- */

/* $name as a non-negative integer; -1 when unset or not one. */
static long env_long(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return -1;
    char *end;
    long x = strtol(v, &end, 10);
    return *end || x < 0 ? -1 : x;
}

/* Whether a launcher started this process, and as which rank of how many (-1: not said). */
static int launched(long *rank, long *size)
{
    *size = env_long("OMPI_COMM_WORLD_SIZE");
    if (*size < 0)
        *size = env_long("PMI_SIZE");
    *rank = env_long("OMPI_COMM_WORLD_RANK");
    if (*rank < 0)
        *rank = env_long("PMI_RANK");
    if (*rank < 0)
        *rank = env_long("PMIX_RANK");
    return *size >= 0 || *rank >= 0;
}

/* ---- the map ---- */

static int initialised; /* MPI allows one MPI_Init per process */

int ws_par_init(ws_par **out, ws_err *err)
{
    *out = NULL;
    if (initialised)
        return ws_err_set(err, WS_EINVAL, "ws_par: already initialised in this process");
    long rank, size;
    const par_backend *be = backends[BE_SINGLE];
    if (launched(&rank, &size)) {
        if (backends[BE_MPI])
            be = backends[BE_MPI];
        else if (size > 1 || rank > 0)
            return ws_err_set(err, WS_EUNSUP,
                              "started by mpirun/srun as rank %ld of %ld, but this writescope was "
                              "built without MPI (install Open MPI -- make deps -- and rebuild)",
                              rank, size);
    }
    ws_par *p = calloc(1, sizeof *p);
    if (!p)
        return ws_err_set(err, WS_ENOMEM, "out of memory");
    p->be = be;
    int rc = be->init(p, err);
    if (rc) {
        free(p);
        return rc;
    }
    initialised = 1;
    if (!(p->status = calloc((size_t)p->size, sizeof *p->status))) {
        /* Every rank's collectives would be one short: the MPI job cannot go on. */
        ws_par_finalize(p);
        return ws_err_set(err, WS_ENOMEM, "out of memory");
    }
    *out = p;
    return 0;
}

void ws_par_finalize(ws_par *p)
{
    if (!p)
        return;
    p->be->finalize(p);
    free(p->status);
    free(p);
}

int ws_par_rank(const ws_par *p)
{
    return p->rank;
}

int ws_par_size(const ws_par *p)
{
    return p->size;
}

const char *ws_par_backend(const ws_par *p)
{
    return p->be->name;
}

static size_t share_of(size_t n, int rank, int size)
{
    return (size_t)rank < n ? (n - (size_t)rank + (size_t)size - 1) / (size_t)size : 0;
}

size_t ws_par_share(const ws_par *p, size_t n)
{
    return share_of(n, p->rank, p->size);
}

/* Exchanges every rank's status; on a failure anywhere, err gets the one of the lowest point
 * (by_point) or rank, and its code is returned on every rank. */
static int exchange(ws_par *p, par_status *mine, int by_point, ws_err *err)
{
    par_status *all = p->status;
    memset(all, 0, (size_t)p->size * sizeof *all);
    mine->rank = p->rank;
    int rc = p->be->allgather_status(p, mine, all, err);
    const par_status *first = NULL;
    for (int r = 0; !rc && r < p->size; r++)
        if (all[r].code && (!first || (by_point && all[r].point < first->point)))
            first = &all[r];
    if (first) {
        rc = first->code;
        if (first->rank > 0)
            ws_err_set(err, rc, "rank %d: %s", first->rank, first->msg);
        else
            ws_err_set(err, rc, "%s", first->msg);
    }
    return rc;
}

int ws_par_agree(ws_par *p, int rc, ws_err *err)
{
    par_status st = {.code = rc};
    if (rc)
        snprintf(st.msg, sizeof st.msg, "%s", err && err->msg[0] ? err->msg : "failed");
    return exchange(p, &st, 0, err);
}

int ws_par_map(ws_par *p, size_t n, size_t rec_size, ws_par_fn fn, void *ctx, void *out, int to,
               ws_err *err)
{
    /* Checks every rank makes alike, before any collective. */
    if (!rec_size || (n && rec_size > SIZE_MAX / n))
        return ws_err_set(err, WS_EINVAL, "ws_par_map: %zu records of %zu bytes", n, rec_size);
    if (p->size > 1 && n * rec_size > (size_t)INT_MAX)
        return ws_err_set(err, WS_EINVAL,
                          "ws_par_map: %zu records of %zu bytes exceed one MPI gather (2 GiB)", n,
                          rec_size);
    const int receives = p->rank == 0 || to == WS_PAR_TO_ALL;
    par_status st = {0};
    if (receives && n && !out) {
        st.code = ws_err_set(err, WS_EINVAL, "ws_par_map: no output buffer on rank %d", p->rank);
        snprintf(st.msg, sizeof st.msg, "%s", err ? err->msg : "");
    }
    const size_t share = ws_par_share(p, n);
    /* One process writes straight into out; ranks write their share, then the gather
     * (rank-major) is put back in point order. */
    const int direct = p->size == 1;
    unsigned char *mine = direct ? out : calloc(share ? share : 1, rec_size);
    unsigned char *all = direct || !receives ? NULL : malloc(n ? n * rec_size : 1);
    size_t *bytes = direct ? NULL : calloc((size_t)p->size, sizeof *bytes);
    if (!st.code && !direct && (!mine || !bytes || (receives && !all))) {
        st.code = WS_ENOMEM;
        snprintf(st.msg, sizeof st.msg, "ws_par_map: out of memory for %zu records", n);
    }
    for (size_t k = 0; !st.code && k < share; k++) {
        const size_t i = (size_t)p->rank + k * (size_t)p->size;
        unsigned char *rec = mine + k * rec_size;
        memset(rec, 0, rec_size);
        ws_err e = {0};
        int rc = fn(ctx, i, rec, &e);
        if (rc) {
            st.code = rc;
            st.point = i;
            snprintf(st.msg, sizeof st.msg, "%s", e.msg[0] ? e.msg : "failed");
        }
    }
    /* Every rank passes the exchange, or none does, so all of them reach the gather. */
    int rc = exchange(p, &st, 1, err);
    if (!rc && !direct) {
        for (int r = 0; r < p->size; r++)
            bytes[r] = share_of(n, r, p->size) * rec_size;
        rc = p->be->gatherv(p, mine, all, bytes, to == WS_PAR_TO_ALL, err);
        if (!rc && receives) {
            size_t off = 0;
            for (int r = 0; r < p->size; r++) {
                const size_t sh = share_of(n, r, p->size);
                for (size_t k = 0; k < sh; k++)
                    memcpy((unsigned char *)out + ((size_t)r + k * (size_t)p->size) * rec_size,
                           all + off + k * rec_size, rec_size);
                off += sh * rec_size;
            }
        }
    }
    if (!direct) {
        free(mine);
        free(all);
        free(bytes);
    }
    return rc;
}
