/* cmd_plan_space: `writescope plan --search` -- the configuration search's output. The search
 * itself is ws_plan_space_run_all (sim/plan_run.h); this file runs it over the ranks and
 * prints what it found: the gates' counts, the best configuration per engine and policy
 * with its command line in the engine's flags, the Pareto frontier (a figure with --plot),
 * and, where nothing meets, what binds and the smallest change. Every figure is modeled and
 * says so. Kept apart from cmd_plan.c, whose output is the per-(GPU, policy) plan. */
#ifndef WS_CLI_CMD_PLAN_SPACE_H
#define WS_CLI_CMD_PLAN_SPACE_H

#include <jansson.h>

#include "plan.h"
#include "plan_run.h"
#include "plan_space.h"

struct ws_par;

/* A time for plan's tables: "-" (not finite), "123.4ms" below a second, else "1.23s". */
const char *cli_plan_secs(double v, char *buf, size_t cap);
/* A number for plan's JSON: null when not finite. */
json_t *cli_plan_num(double v);

/* The ranks of par as a plan's backend (sim/plan_run.h): ws_par's map and agreement. */
ws_plan_ranks cli_plan_ranks(struct ws_par *par);

/* The search on every rank of par; rank 0 prints (json: one JSON object) and draws plot
 * (NULL: none). Returns the CLI's exit code. */
int cli_plan_space(struct ws_par *par, ws_plan_spec *s, const ws_plan_space *sp, const char *db,
                   int json, const char *plot);

#endif
