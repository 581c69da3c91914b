/* decode: one decode step's protocol (see decode.h). */
#include "decode.h"

#include <math.h>
#include <string.h>

/* migrate at the step's start: the controller's move toward r*, by whole pages. */
static int migrate(ws_ctl *ctl, const ws_decode_ops *ops, void *ctx, ws_decode_plan *plan,
                   ws_err *err)
{
    const int P = ctl->page_tokens;
    const ws_decode_sums *s = &plan->sums;
    int move;
    if (!ws_ctl_migrate(ctl, plan->r_star, (int)(s->cpu / P), (int)(s->spilled / P), &move) ||
        !move)
        return 0;
    plan->migrate_pages = move;
    plan->migrate_bytes = fabs((double)move) * P * ctl->cm->b_tok;
    int rc = ops->migrate(ctx, move, err);
    if (!rc)
        ops->sums(ctx, &plan->sums);
    return rc;
}

/* The flush, decided on the estimates of the step's start: the pages of the n windows
 * (of W tokens) this token fills go where the realised share moves toward the share of
 * L + flushed, with what stays in the windows after it resident. */
static void plan_flush(const ws_ctl *ctl, int W, int n, ws_decode_plan *plan)
{
    if (!n)
        return;
    const int P = ctl->page_tokens;
    const ws_decode_sums *s = &plan->sums;
    plan->flush_seqs = n;
    plan->flush_pages = n * (W / P);
    plan->flush_cpu_pages = ws_ctl_flush_cpu_pages(ctl, s->batch, s->resident - (double)n * W,
                                                   s->cpu, s->spilled, plan->flush_pages);
    plan->flush_bytes = (double)plan->flush_pages * P * ctl->cm->b_tok;
}

int ws_decode_step(ws_ctl *ctl, int layers, int window, const ws_decode_ops *ops, void *ctx,
                   ws_decode_plan *plan, ws_decode_obs *obs, ws_err *err)
{
    memset(plan, 0, sizeof *plan);
    ops->sums(ctx, &plan->sums);
    plan->r_star = ws_ctl_target(ctl, plan->sums.batch, plan->sums.resident, plan->sums.spilled);
    int rc = migrate(ctl, ops, ctx, plan, err);
    if (rc)
        return rc;
    const ws_decode_sums *s = &plan->sums;
    plan->r_real = s->spilled > 0 ? s->cpu / s->spilled : 0;
    plan_flush(ctl, window, ops->full_windows(ctx), plan);
    if ((rc = ops->play(ctx, plan, obs, err)))
        return rc;
    for (int l = 0; l < layers; l++) {
        ws_decode_obs *o = &obs[l];
        ws_ctl_observe(ctl, o->n_cpu, o->cpu_s, o->m_xfer, o->gpu_s, o->resident,
                       l > 0 ? obs[l - 1].moe_s : 0);
        o->A = ws_ctl_A(ctl);
        o->B = ws_ctl_B(ctl);
    }
    ws_ctl_step_end(ctl, obs[layers - 1].moe_s);
    return 0;
}
