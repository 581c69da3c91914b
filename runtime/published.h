/* published: the weight formats each model is published in, by its maker or by the widely
 * used quantizers (official FP8, AWQ and GPTQ repositories; GGUF from the maker, unsloth,
 * bartowski, ggml-org), read from models/published.json with the repository and file of
 * each. A planner (sim/plan_space.c, `plan --w-gpu auto`) searches only these, so it never
 * recommends a format nobody can download, and cites where each comes from.
 *
 * The list is data, kept apart from the configs (models/NAME.json stay verbatim hub
 * files plus underscore fields) and found the way they are (ws_model_data_path:
 * $WRITESCOPE_HOME or the folder above the executable). It is read and checked whole at
 * each call, a few KiB, so an edited file needs no rebuild and a bad entry is refused
 * whichever model is asked for: every entry must name a format wformat.h knows (aliases
 * such as "Q4_K_M" or "awq" included), at most once per model, with "where" and "by" texts
 * free of control characters (they are printed). A model the file does not list, or a
 * missing file, lists nothing; the caller falls back to the model's own dtype. */
#ifndef WS_PUBLISHED_H
#define WS_PUBLISHED_H

#include <stddef.h>

#include "wformat.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The formats model `name` is published in (models/published.json), at most max, in the
 * file's order, into out[] (ws_wformat pointers); *n their count. A model the file does not
 * list: *n = 0 and 0 returned (the caller falls back to the model's own dtype). WS_EINVAL
 * for a malformed file or an unknown format name in it, the file and entry named. */
int ws_model_published_formats(const char *name, const ws_wformat **out, int max, int *n,
                               ws_err *err);
/* The same entry's "where" text for one format (any name wformat.h knows), for references
 * in output, truncated to cap ("" if none). The file's errors as above; WS_EINVAL for an
 * unknown format. */
int ws_model_published_where(const char *name, const char *format, char *buf, size_t cap,
                             ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
