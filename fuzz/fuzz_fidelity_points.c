/* fuzz_fidelity_points: libFuzzer target for the fidelity points reader
 * (validate/fidelity_points.c), the parser of the fidelity/ points files and of
 * `fidelity --points`.
 *
 * Each input is parsed as a points document into an empty report, then again into the same
 * report (every id of an accepted document is then a duplicate, so the second parse must
 * fail and leave the report as it was). Nothing is simulated. Every accepted point is
 * checked against the reader's promises (fidelity_points.h): an id that is a non-empty
 * identifier without control characters, unique; every string valid UTF-8 (a JSON string
 * for --json); counts within sim's bounds and the simulated tokens within
 * WS_FIDELITY_TOKENS_MAX; published a positive normal number. A refusal is one line that
 * names the document. A broken promise aborts; the sanitizers (ASan with leak detection,
 * UBSan with no recovery) turn memory errors, leaks and overflows into findings. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fidelity_points.h"
#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken promise: which one, then abort (a finding). */
static void broken(const char *what, int line)
{
    fprintf(stderr, "fuzz_fidelity_points.c:%d: broken promise: %s\n", line, what);
    abort();
}
#define check(c) ((c) ? (void)0 : broken(#c, __LINE__))

static void check_utf8(const char *s)
{
    json_t *j = json_string(s);
    check(j != NULL);
    json_decref(j);
}

static int has_control(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
            return 1;
    return 0;
}

static void check_refusal(const ws_err *err)
{
    check(err->code != 0 && !strncmp(err->msg, "fuzz", 4) && !strchr(err->msg, '\n'));
}

static void check_point(const ws_fid_point *p)
{
    check(*p->id && !has_control(p->id));
    const char *s[] = {
        p->id,           p->kind,        p->group,        p->engine,  p->engine_version,
        p->source,       p->url,         p->gpu,          p->host,    p->model,
        p->hw_desc,      p->metric,      p->unit,         p->stat,    p->weights_gpu,
        p->weights_cpu,  p->kv_dtype,    p->offload_what, p->assumed, p->load.arrival,
        p->load.lengths, p->load.dataset};
    for (size_t i = 0; i < sizeof s / sizeof *s; i++)
        check_utf8(s[i]);
    check(!strcmp(p->kind, "e2e") || !strcmp(p->kind, "serving"));
    check(p->batch >= 0 && p->batch <= WS_FIDELITY_BATCH_MAX);
    check(p->prompt >= -1 && p->prompt <= WS_TRACE_TOKENS_MAX);
    check(p->output >= 0 && p->output <= WS_TRACE_TOKENS_MAX);
    check(p->load.concurrency >= 0 && p->load.concurrency <= WS_FIDELITY_CLIENTS_MAX);
    const int serving = !strcmp(p->kind, "serving");
    const long long n = serving ? p->load.requests : p->batch;
    check(n * ((long long)(p->prompt > 0 ? p->prompt : 0) + p->output) <= WS_FIDELITY_TOKENS_MAX);
    check(isnormal(p->published) && p->published > 0);
    const double rate = p->load.rate_rps;
    check(!serving || isnan(rate) || (isnormal(rate) && rate > 0 && rate <= WS_FIDELITY_RATE_MAX));
    check(isnan(p->predicted) && isnan(p->ratio) && !*p->missing && !*p->bad);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ws_fid_report r = {0};
    ws_err err = {0};
    if (ws_fidelity_parse((const char *)data, size, "fuzz", &r, &err)) {
        check_refusal(&err);
        check(r.n == 0);
        ws_fidelity_free(&r);
        return 0;
    }
    for (size_t i = 0; i < r.n; i++) {
        check_point(&r.pt[i]);
        for (size_t k = 0; k < i; k++)
            check(strcmp(r.pt[i].id, r.pt[k].id) != 0);
    }
    const size_t n = r.n;
    err = (ws_err){0};
    const int again = ws_fidelity_parse((const char *)data, size, "fuzz", &r, &err);
    check(n == 0 ? again == 0 : again != 0);
    if (again)
        check_refusal(&err);
    check(r.n == n);
    ws_fidelity_free(&r);
    return 0;
}
