/* trace_gen: synthetic workloads as a trace source (trace.h): read with ws_trace_next like
 * a file, in constant memory, deterministic for a seed (GSL's MT19937; arrivals, prompt
 * lengths and output lengths each draw from their own stream, so changing one
 * distribution leaves the others' draws as they were).
 *
 * Arrivals: `poisson` (exponential gaps of mean 1/rate), `gamma` (gamma gaps of mean
 * 1/rate and coefficient of variation cv: shape 1/cv^2; cv = 1 is Poisson, cv > 1
 * burstier), both starting at 0; `closed` (a closed loop of `clients` clients: a client
 * sends its next request think time after its previous one completes). Closed-loop
 * arrivals depend on completions, which only the consumer knows: such a source says so
 * (ws_trace_closed_clients > 0), its requests carry session_id = client (i mod clients)
 * and arrival_s = the think time to wait after that client's previous request completes
 * (0 for each client's first; exponential of mean think_s, or exactly think_s when
 * think_fixed). Those arrivals are therefore not non-decreasing, and a closed loop cannot be
 * written to a file; the simulator plays it (sim/serve.h).
 *
 * Lengths (prompt and output each): `fixed:N`; `uniform:LO:HI` (integers, both ends
 * included); `lognormal:MEAN:SIGMA` (the distribution's mean, and sigma of its log);
 * `zipf:S:MAX` (P(k) proportional to k^-S on 1..MAX, rejection-inversion sampling). Drawn
 * values are rounded and clipped to 1..WS_TRACE_TOKENS_MAX. */
#ifndef WS_TRACE_GEN_H
#define WS_TRACE_GEN_H

#include <stdint.h>

#include "trace.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ws_trace_arrivals {
    WS_ARRIVALS_POISSON = 0, /* exponential gaps */
    WS_ARRIVALS_GAMMA,       /* gamma gaps, coefficient of variation cv */
    WS_ARRIVALS_CLOSED,      /* closed loop of `clients` */
} ws_trace_arrivals;

typedef enum ws_trace_len_kind {
    WS_LEN_FIXED = 0, /* a = N */
    WS_LEN_UNIFORM,   /* a = LO, b = HI */
    WS_LEN_LOGNORMAL, /* a = mean, b = sigma */
    WS_LEN_ZIPF,      /* a = exponent S (> 0), b = MAX */
} ws_trace_len_kind;

typedef struct ws_trace_len {
    ws_trace_len_kind kind;
    double a, b;
} ws_trace_len;

typedef struct ws_trace_gen {
    ws_trace_arrivals arrivals;
    double rate;       /* requests/s (poisson, gamma); > 0 */
    double cv;         /* gamma: coefficient of variation of the gaps; > 0 */
    int clients;       /* closed: number of clients; >= 1 */
    double think_s;    /* closed: mean think time, s; >= 0 */
    int think_fixed;   /* closed: 1 = every think time is think_s; 0 = exponential */
    uint64_t requests; /* requests to generate; >= 1 */
    ws_trace_len prompt, output;
    int shared_prefix; /* tokens every prompt starts with (a system prompt): the whole
                        * WS_TRACE_BLOCK_TOKENS blocks of it that the prompt holds carry the
                        * same hashes in every request (0: none) */
    uint64_t seed;
} ws_trace_gen;

/* "poisson" | "gamma" | "closed"; returns 0 or WS_EINVAL naming the choices. */
int ws_trace_arrivals_parse(const char *s, ws_trace_arrivals *out, ws_err *err);
const char *ws_trace_arrivals_name(ws_trace_arrivals a);
/* A think-time spec into g->think_s and g->think_fixed: "S" or "exp:S" (exponential of
 * mean S seconds), "fixed:S" (exactly S); S in 0..1e6. Returns 0 or WS_EINVAL. */
int ws_trace_think_parse(const char *spec, ws_trace_gen *g, ws_err *err);
/* Writes g's think time back as a spec ("exp:0.5", "fixed:2"). */
void ws_trace_think_format(const ws_trace_gen *g, char *buf, int cap);
/* A length spec (above) into *out; returns 0 or WS_EINVAL with the problem. */
int ws_trace_len_parse(const char *spec, ws_trace_len *out, ws_err *err);
/* Writes the spec back as text ("lognormal:2000:1"). */
void ws_trace_len_format(const ws_trace_len *l, char *buf, int cap);
/* The distribution's mean before rounding and clipping (Zipf: exact sum). */
double ws_trace_len_mean(const ws_trace_len *l);
/* Checks g and opens it as a source; returns 0 or sets err. */
int ws_trace_gen_open(const ws_trace_gen *g, ws_trace **out, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
