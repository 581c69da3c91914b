/* ws_par: a parallel map over independent points, for the commands whose work is many
 * independent simulations (`sim grid`, `plan`). Point i of n is evaluated on rank
 * i % size (round-robin: a fixed, deterministic assignment that spreads a grid's cheap and
 * dear points alike), each into a fixed-size record, and the records are gathered in point
 * order to rank 0 (or to every rank, for a search that picks its next round from the last
 * one's results). One process evaluates every point itself; the result is the same bytes.
 *
 * Backends, chosen at ws_par_init by a table of functions (callers never #ifdef):
 * - "single": this process alone (size 1).
 * - "mpi": Open MPI (or another MPI), compiled in when the build found mpicc
 *   (WS_HAVE_MPI), and used only when the process was started by a launcher, detected from
 *   the environment before MPI is touched (OMPI_COMM_WORLD_SIZE from mpirun, PMI_SIZE or
 *   PMIX_RANK from srun); a plain run never initialises MPI. A build without MPI that finds
 *   itself launched as one of several ranks refuses to run, so N copies never each do the
 *   whole job.
 *
 * Errors: a point's failure stops that rank's share; every rank then learns of it at the
 * gather (no rank waits on one that gave up), and every rank returns the failure of the
 * lowest failing point index -- the one a single process would have met first -- with its
 * message (prefixed "rank R: " when R is not 0). ws_par_agree does the same for any step outside a map (opening a database on
 * rank 0). One ws_par per process: MPI can be initialised once. */
#ifndef WS_PAR_H
#define WS_PAR_H

#include <stddef.h>

#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ws_par ws_par;

/* Evaluates point i into rec (rec_size bytes, zeroed); returns 0 or a ws_err code. */
typedef int (*ws_par_fn)(void *ctx, size_t i, void *rec, ws_err *err);

enum {
    WS_PAR_TO_ROOT = 0, /* records gathered on rank 0 only */
    WS_PAR_TO_ALL = 1,  /* records on every rank */
};

/* Starts the backend the environment asks for (see above). */
int ws_par_init(ws_par **out, ws_err *err);
/* Ends it (MPI_Finalize); NULL is fine. Every rank calls it. */
void ws_par_finalize(ws_par *p);
int ws_par_rank(const ws_par *p);
int ws_par_size(const ws_par *p);
/* "single" or "mpi". */
const char *ws_par_backend(const ws_par *p);
/* The number of the n points this rank evaluates. */
size_t ws_par_share(const ws_par *p, size_t n);

/* Collective: fn over points 0..n-1 spread over the ranks; out (n * rec_size bytes) receives
 * every record in point order on rank 0, and on every rank with WS_PAR_TO_ALL (out may be
 * NULL on the others). Returns 0 on every rank, or the same error on every rank. */
int ws_par_map(ws_par *p, size_t n, size_t rec_size, ws_par_fn fn, void *ctx, void *out,
               int to, ws_err *err);
/* Collective: 0 when every rank passes rc 0; else, on every rank, the lowest failing rank's
 * code and message (err holds it). A barrier. */
int ws_par_agree(ws_par *p, int rc, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
