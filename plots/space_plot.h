/* space_plot: the figure of a configuration search (`writescope plan --search --plot`):
 * goodput against the longest context one sequence's KV fits, or against $/h when every GPU
 * has a price, for every configuration searched to the end, with the Pareto frontier drawn
 * over them (plots/space.gp). The caller hands the points over as numbers: a search is not
 * stored, and this folder reads no simulator types. */
#ifndef WS_SPACE_PLOT_H
#define WS_SPACE_PLOT_H

#include "ws_err.h"

typedef struct ws_space_plot_pt {
    double x;     /* K tokens of context, or $/h */
    double y;     /* goodput */
    int frontier; /* 1: on the Pareto frontier */
} ws_space_plot_pt;

/* Draws the n points into out; price: x is $/h (else K tokens, log scale); users: y is decode
 * tokens/s (else requests/s); title as given. */
int ws_space_plot(const ws_space_plot_pt *pts, int n, int price, int users, const char *title,
                  const char *out, ws_err *err);

#endif
