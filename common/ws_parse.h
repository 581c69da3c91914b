/* ws_parse: strict parsing of numbers given as text: command-line options and environment
 * variables.
 *
 * atoi/atoll and a bare strtol accept "5abc" as 5, "abc" as 0 and wrap or clamp values out
 * of range, so a typo silently becomes another request. These parsers take the whole
 * string or nothing: base-10 digits with an optional sign (no leading blanks, no trailing
 * characters), or for doubles a finite decimal number, checked against [lo, hi]. They
 * return 0, or EINVAL (not a number) / ERANGE (a number outside [lo, hi]) and set errno
 * to the same, leaving *out untouched. The ws_env_* forms read an environment variable:
 * unset or empty gives the default; anything else must parse, and the error names the
 * variable. Nothing here prints. */
#ifndef WS_PARSE_H
#define WS_PARSE_H

#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The whole of s as a base-10 integer in [lo, hi]; returns 0, EINVAL or ERANGE. */
int ws_parse_int64(const char *s, long long lo, long long hi, long long *out);
/* The whole of s as a finite decimal number in [lo, hi]; returns 0, EINVAL or ERANGE. */
int ws_parse_double(const char *s, double lo, double hi, double *out);
/* Environment variable `name` as an integer in [lo, hi]; def when unset or empty.
 * Returns 0, or WS_EINVAL with "NAME=VALUE: not an integer in LO..HI". */
int ws_env_int64(const char *name, long long def, long long lo, long long hi, long long *out,
                 ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
