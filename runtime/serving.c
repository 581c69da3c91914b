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
}
