/* steprow: the step and layer rows and their one column table (steprow.h). */
#include "steprow.h"

#include <stddef.h>

#define S(f, t, u) WS_COL_AS(ws_step_row, #f, f, t, u)
const ws_col ws_step_cols[] = {S(idx, WS_COL_I64, "1"),
                               S(t_start, WS_COL_REAL, "s"),
                               S(t_end, WS_COL_REAL, "s"),
                               S(batch, WS_COL_INT, "sequences"),
                               S(tokens, WS_COL_I64, "tokens"),
                               S(context, WS_COL_I64, "tokens"),
                               S(r_star, WS_COL_REAL, "1"),
                               S(r_real, WS_COL_REAL, "1"),
                               S(busy_gpu, WS_COL_REAL, "s"),
                               S(busy_h2d, WS_COL_REAL, "s"),
                               S(busy_d2h, WS_COL_REAL, "s"),
                               S(busy_cpu, WS_COL_REAL, "s"),
                               S(busy_other, WS_COL_TEXT, "json"),
                               S(cpu_attn_s, WS_COL_REAL, "s"),
                               S(experts_s, WS_COL_REAL, "s"),
                               S(overhead_s, WS_COL_REAL, "s"),
                               S(wall_s, WS_COL_REAL, "s"),
                               S(verify_err, WS_COL_REAL, "1"),
                               {0}};
#undef S

static const char *const k_sources[] = {"modeled", "measured", NULL};

#define L(f, t, u) WS_COL_AS(ws_layer_row, #f, f, t, u)
const ws_col ws_layer_cols[] = {L(step, WS_COL_INT, "1"),
                                L(layer, WS_COL_INT, "1"),
                                L(n_cpu, WS_COL_I64, "tokens"),
                                L(m_xfer, WS_COL_I64, "tokens"),
                                L(resident, WS_COL_I64, "tokens"),
                                L(cpu_attn_s, WS_COL_REAL, "s"),
                                L(router_s, WS_COL_REAL, "s"),
                                L(experts_s, WS_COL_REAL, "s"),
                                L(gpu_s, WS_COL_REAL, "s"),
                                {"gpu_source", WS_COL_FLAG, "modeled|measured",
                                 offsetof(ws_layer_row, gpu_measured), sizeof(int), k_sources},
                                L(overhead_s, WS_COL_REAL, "s"),
                                L(r_real, WS_COL_REAL, "1"),
                                L(r_star, WS_COL_REAL, "1"),
                                L(a_est, WS_COL_REAL, "s/token"),
                                L(b_est, WS_COL_REAL, "s/token"),
                                L(pred_cpu_s, WS_COL_REAL, "s"),
                                L(pred_gpu_s, WS_COL_REAL, "s"),
                                L(pred_experts_s, WS_COL_REAL, "s"),
                                L(flush_pages, WS_COL_INT, "pages"),
                                L(flush_cpu_pages, WS_COL_INT, "pages"),
                                {0}};
#undef L
