/* serving: the serving configuration's defaults (see serving.h). */
#include "serving.h"

#include <math.h>
#include <string.h>

void ws_serving_default(ws_serving *s)
{
    memset(s, 0, sizeof *s);
    s->policy = WS_POLICY_WRITESCOPE;
    ws_policy_params_default(&s->par);
    s->batch = 32;
    s->chunk = 2048;
    s->window = 256;
    s->prefill_mode = WS_PREFILL_AUTO;
    s->batching = WS_BATCH_CHUNKED;
    s->token_budget = 2048;
}

static int parse(const char *const *names, int n, const char *name)
{
    for (int i = 0; name && i < n; i++)
        if (!strcmp(names[i], name))
            return i;
    return -1;
}

static const char *const batching_names[WS_BATCH_KINDS] = {"chunked", "prefill-first", "slots",
                                                                   "serial"};
static const char *const preempt_names[WS_PREEMPT_KINDS] = {"none", "recompute"};

const char *ws_batching_name(int kind)
{
    return kind >= 0 && kind < WS_BATCH_KINDS ? batching_names[kind] : "?";
}

int ws_batching_parse(const char *name)
{
    return parse(batching_names, WS_BATCH_KINDS, name);
}

const char *ws_preempt_name(int kind)
{
    return kind >= 0 && kind < WS_PREEMPT_KINDS ? preempt_names[kind] : "?";
}

int ws_preempt_parse(const char *name)
{
    return parse(preempt_names, WS_PREEMPT_KINDS, name);
}
