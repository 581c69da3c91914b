/* trace_gen: see trace_gen.h. */
#include "trace_gen.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_io.h"
#include "ws_parse.h"

static const char *const k_arrivals[] = {"poisson", "gamma", "closed"};
static const char *const k_len_kinds[] = {"fixed", "uniform", "lognormal", "zipf"};

int ws_trace_arrivals_parse(const char *s, ws_trace_arrivals *out, ws_err *err)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, k_arrivals[i])) {
            *out = (ws_trace_arrivals)i;
            return 0;
        }
    return ws_err_set(err, WS_EINVAL, "unknown arrivals '%s' (poisson, gamma, closed)", s);
}

const char *ws_trace_arrivals_name(ws_trace_arrivals a)
{
    return (unsigned)a < 3 ? k_arrivals[a] : "?";
}

int ws_trace_think_parse(const char *spec, ws_trace_gen *g, ws_err *err)
{
    const char *v = spec;
    int fixed = 0;
    if (!strncmp(spec, "fixed:", 6))
        v = spec + 6, fixed = 1;
    else if (!strncmp(spec, "exp:", 4))
        v = spec + 4;
    double s;
    if (ws_parse_double(v, 0, 1e6, &s))
        return ws_err_set(err, WS_EINVAL,
                          "think time '%s': expected S, exp:S or fixed:S seconds in 0..1e6", spec);
    g->think_s = s;
    g->think_fixed = fixed;
    return 0;
}

void ws_trace_think_format(const ws_trace_gen *g, char *buf, int cap)
{
    snprintf(buf, (size_t)cap, "%s:%.17g", g->think_fixed ? "fixed" : "exp", g->think_s);
}

int ws_trace_len_parse(const char *spec, ws_trace_len *out, ws_err *err)
{
    char buf[128];
    if (strlen(spec) >= sizeof buf)
        return ws_err_set(err, WS_EINVAL, "length spec too long: %.40s...", spec);
    strcpy(buf, spec);
    char *parts[4];
    int n = 0;
    for (char *p = buf;; p++) {
        if (n == 4)
            return ws_err_set(err, WS_EINVAL, "length spec '%s': too many ':' fields", spec);
        parts[n++] = p;
        p = strchr(p, ':');
        if (!p)
            break;
        *p = '\0';
    }
    int kind = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(parts[0], k_len_kinds[i]))
            kind = i;
    static const int nargs[] = {1, 2, 2, 2};
    static const char *const usage[] = {"fixed:N", "uniform:LO:HI", "lognormal:MEAN:SIGMA",
                                        "zipf:S:MAX"};
    if (kind < 0)
        return ws_err_set(err, WS_EINVAL,
                          "length spec '%s': unknown distribution (fixed:N, uniform:LO:HI, "
                          "lognormal:MEAN:SIGMA, zipf:S:MAX)",
                          spec);
    if (n - 1 != nargs[kind])
        return ws_err_set(err, WS_EINVAL, "length spec '%s': expected %s", spec, usage[kind]);
    double a = 0, b = 0;
    const double tmax = WS_TRACE_TOKENS_MAX;
    int bad = 0;
    switch (kind) {
    case WS_LEN_FIXED: bad = ws_parse_double(parts[1], 1, tmax, &a) || a != floor(a); break;
    case WS_LEN_UNIFORM:
        bad = ws_parse_double(parts[1], 1, tmax, &a) || a != floor(a) ||
              ws_parse_double(parts[2], a, tmax, &b) || b != floor(b);
        break;
    case WS_LEN_LOGNORMAL:
        bad = ws_parse_double(parts[1], 1, tmax, &a) || ws_parse_double(parts[2], 0, 10, &b);
        break;
    case WS_LEN_ZIPF:
        bad = ws_parse_double(parts[1], 0.01, 100, &a) || ws_parse_double(parts[2], 1, tmax, &b) ||
              b != floor(b);
        break;
    }
    if (bad) {
        static const char *const ranges[] = {
            "N an integer in 1..16777216", "1 <= LO <= HI <= 16777216, integers",
            "MEAN in 1..16777216, SIGMA in 0..10", "S in 0.01..100, MAX an integer in 1..16777216"};
        return ws_err_set(err, WS_EINVAL, "length spec '%s': %s (%s)", spec, usage[kind],
                          ranges[kind]);
    }
    out->kind = (ws_trace_len_kind)kind;
    out->a = a;
    out->b = b;
    return 0;
}

void ws_trace_len_format(const ws_trace_len *l, char *buf, int cap)
{
    if (l->kind == WS_LEN_FIXED)
        snprintf(buf, (size_t)cap, "fixed:%.0f", l->a);
    else
        snprintf(buf, (size_t)cap, "%s:%.10g:%.10g",
                 (unsigned)l->kind < 4 ? k_len_kinds[l->kind] : "?", l->a, l->b);
}

double ws_trace_len_mean(const ws_trace_len *l)
{
    switch (l->kind) {
    case WS_LEN_FIXED: return l->a;
    case WS_LEN_UNIFORM: return 0.5 * (l->a + l->b);
    case WS_LEN_LOGNORMAL: return l->a;
    case WS_LEN_ZIPF: {
        double num = 0, den = 0;
        for (double k = l->b; k >= 1; k--) { /* smallest terms first */
            double p = pow(k, -l->a);
            num += k * p;
            den += p;
        }
        return num / den;
    }
    }
    return 0;
}

/* Zipf on 1..n with exponent s by rejection-inversion (Hormann and Derflinger 1996, as in
 * Apache Commons RNG): constant time per draw whatever n. */
typedef struct zipf {
    double s, n, h_x1, h_n, sv;
} zipf;

static double helper1(double x) /* log1p(x)/x */
{
    return fabs(x) > 1e-8 ? log1p(x) / x : 1 - x * (0.5 - x * (1.0 / 3 - 0.25 * x));
}

static double helper2(double x) /* expm1(x)/x */
{
    return fabs(x) > 1e-8 ? expm1(x) / x : 1 + x * 0.5 * (1 + x / 3 * (1 + 0.25 * x));
}

static double zh(const zipf *z, double x)
{
    return exp(-z->s * log(x));
}

static double zhi(const zipf *z, double x) /* integral of h */
{
    double lx = log(x);
    return helper2((1 - z->s) * lx) * lx;
}

static double zhi_inv(const zipf *z, double x)
{
    double t = x * (1 - z->s);
    if (t < -1)
        t = -1;
    return exp(helper1(t) * x);
}

static void zipf_init(zipf *z, double s, double n)
{
    z->s = s;
    z->n = n;
    z->h_x1 = zhi(z, 1.5) - 1;
    z->h_n = zhi(z, n + 0.5);
    z->sv = 2 - zhi_inv(z, zhi(z, 2.5) - zh(z, 2));
}

static double zipf_draw(const zipf *z, gsl_rng *r)
{
    for (;;) {
        double u = z->h_n + gsl_rng_uniform(r) * (z->h_x1 - z->h_n);
        double x = zhi_inv(z, u);
        double k = floor(x + 0.5);
        if (k < 1)
            k = 1;
        else if (k > z->n)
            k = z->n;
        if (k - x <= z->sv || u >= zhi(z, k + 0.5) - zh(z, k))
            return k;
    }
}

typedef struct gen_state {
    ws_trace_gen g;
    gsl_rng *r_arr, *r_prompt, *r_output;
    zipf z_prompt, z_output;
    double t;
    uint64_t i;
    int64_t *blocks; /* the shared prefix's block hashes: 0, 1, ... */
} gen_state;

static int32_t draw_len(const ws_trace_len *l, const zipf *z, gsl_rng *r)
{
    double v = 0;
    switch (l->kind) {
    case WS_LEN_FIXED: v = l->a; break;
    case WS_LEN_UNIFORM:
        v = l->a + (double)gsl_rng_uniform_int(r, (unsigned long)(l->b - l->a) + 1);
        break;
    case WS_LEN_LOGNORMAL: v = gsl_ran_lognormal(r, log(l->a) - 0.5 * l->b * l->b, l->b); break;
    case WS_LEN_ZIPF: v = zipf_draw(z, r); break;
    }
    v = floor(v + 0.5);
    if (!(v >= 1))
        v = 1;
    if (v > WS_TRACE_TOKENS_MAX)
        v = WS_TRACE_TOKENS_MAX;
    return (int32_t)v;
}

static int gen_next(ws_trace *t, ws_trace_req *req, ws_err *err)
{
    gen_state *s = t->gen;
    if (s->i >= s->g.requests)
        return 0;
    ws_trace_req r = {.session_id = -1};
    const ws_trace_gen *g = &s->g;
    if (g->arrivals == WS_ARRIVALS_CLOSED) {
        r.session_id = (int64_t)(s->i % (uint64_t)g->clients);
        r.arrival_s = s->i < (uint64_t)g->clients || g->think_s == 0 ? 0
                       : g->think_fixed                           ? g->think_s
                                        : gsl_ran_exponential(s->r_arr, g->think_s);
    } else {
        if (s->i > 0)
            s->t += g->arrivals == WS_ARRIVALS_POISSON
                        ? gsl_ran_exponential(s->r_arr, 1 / g->rate)
                        : gsl_ran_gamma(s->r_arr, 1 / (g->cv * g->cv), g->cv * g->cv / g->rate);
        if (s->t > WS_TRACE_ARRIVAL_MAX)
            return ws_err_set(err, WS_EINVAL,
                              "generator: request %llu arrives after %g s (rate too low for "
                              "this many requests)",
                              (unsigned long long)s->i, WS_TRACE_ARRIVAL_MAX),
                   -1;
        r.arrival_s = s->t;
    }
    r.prompt_tokens = draw_len(&g->prompt, &s->z_prompt, s->r_prompt);
    r.output_tokens = draw_len(&g->output, &s->z_output, s->r_output);
    const int shared = g->shared_prefix < r.prompt_tokens ? g->shared_prefix : r.prompt_tokens;
    r.n_blocks = shared / WS_TRACE_BLOCK_TOKENS;
    r.blocks = r.n_blocks ? s->blocks : NULL;
    s->i++;
    *req = r;
    return 1;
}

static void gen_free(void *p)
{
    gen_state *s = p;
    if (!s)
        return;
    if (s->r_arr)
        gsl_rng_free(s->r_arr);
    if (s->r_prompt)
        gsl_rng_free(s->r_prompt);
    if (s->r_output)
        gsl_rng_free(s->r_output);
    free(s->blocks);
    free(s);
}

/* splitmix64: one seed into independent-looking seeds for the three streams. */
static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static int check_len(const ws_trace_len *l, const char *what, ws_err *err)
{
    char spec[128];
    ws_trace_len_format(l, spec, sizeof spec);
    ws_trace_len tmp;
    if (ws_trace_len_parse(spec, &tmp, err)) {
        ws_err_prefix(err, "%s", what);
        return -1;
    }
    return 0;
}

int ws_trace_gen_open(const ws_trace_gen *g, ws_trace **out, ws_err *err)
{
    *out = NULL;
    if (g->arrivals == WS_ARRIVALS_CLOSED) {
        if (g->clients < 1 || g->clients > 1000000)
            return ws_err_set(err, WS_EINVAL, "generator: clients %d outside 1..1000000",
                              g->clients);
        if (!(g->think_s >= 0 && g->think_s <= 1e6))
            return ws_err_set(err, WS_EINVAL, "generator: think time %g s outside 0..1e6",
                              g->think_s);
    } else if (g->arrivals == WS_ARRIVALS_POISSON || g->arrivals == WS_ARRIVALS_GAMMA) {
        if (!(g->rate > 0 && g->rate <= 1e9))
            return ws_err_set(err, WS_EINVAL, "generator: rate %g outside (0, 1e9] requests/s",
                              g->rate);
        if (g->arrivals == WS_ARRIVALS_GAMMA && !(g->cv >= 0.01 && g->cv <= 100))
            return ws_err_set(err, WS_EINVAL, "generator: gamma cv %g outside 0.01..100", g->cv);
    } else {
        return ws_err_set(err, WS_EINVAL, "generator: unknown arrivals %d", (int)g->arrivals);
    }
    if (g->requests < 1 || g->requests > (1ull << 40))
        return ws_err_set(err, WS_EINVAL, "generator: requests %llu outside 1..2^40",
                          (unsigned long long)g->requests);
    if (check_len(&g->prompt, "prompt", err) || check_len(&g->output, "output", err))
        return WS_EINVAL;
    if (g->shared_prefix < 0 || g->shared_prefix > WS_TRACE_TOKENS_MAX)
        return ws_err_set(err, WS_EINVAL, "generator: shared prefix %d outside 0..%d tokens",
                          g->shared_prefix, WS_TRACE_TOKENS_MAX);

    ws_trace *t = calloc(1, sizeof *t);
    gen_state *s = calloc(1, sizeof *s);
    if (!t || !s) {
        free(t);
        free(s);
        return ws_err_set(err, WS_ENOMEM, "out of memory for the generator");
    }
    s->g = *g;
    const int nb = g->shared_prefix / WS_TRACE_BLOCK_TOKENS;
    if (nb > 0 && !(s->blocks = malloc((size_t)nb * sizeof *s->blocks))) {
        gen_free(s);
        free(t);
        return ws_err_set(err, WS_ENOMEM, "out of memory for the generator");
    }
    for (int i = 0; i < nb; i++)
        s->blocks[i] = i;
    gsl_rng **rs[] = {&s->r_arr, &s->r_prompt, &s->r_output};
    for (int i = 0; i < 3; i++) {
        *rs[i] = gsl_rng_alloc(gsl_rng_mt19937);
        if (!*rs[i]) {
            gen_free(s);
            free(t);
            return ws_err_set(err, WS_ENOMEM, "out of memory for the generator");
        }
        gsl_rng_set(*rs[i], (unsigned long)mix(g->seed * 3 + (uint64_t)i));
    }
    if (g->prompt.kind == WS_LEN_ZIPF)
        zipf_init(&s->z_prompt, g->prompt.a, g->prompt.b);
    if (g->output.kind == WS_LEN_ZIPF)
        zipf_init(&s->z_output, g->output.a, g->output.b);
    snprintf(t->name, sizeof t->name, "generator");
    t->lr.fd = -1;
    t->format = WS_TRACE_GEN;
    t->gen = s;
    t->gen_next = gen_next;
    t->gen_free = gen_free;
    t->has_sessions = g->arrivals == WS_ARRIVALS_CLOSED;
    t->closed_clients = g->arrivals == WS_ARRIVALS_CLOSED ? g->clients : 0;
    *out = t;
    return 0;
}
