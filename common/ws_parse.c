/* ws_parse: see ws_parse.h. */
#include "ws_parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

/* Rejects what strto* would skip or misread: NULL, empty, leading blanks. */
static int starts_like_number(const char *s)
{
    return s && *s && !isspace((unsigned char)*s);
}

int ws_parse_int64(const char *s, long long lo, long long hi, long long *out)
{
    if (!starts_like_number(s) || (*s != '-' && *s != '+' && !isdigit((unsigned char)*s)))
        return errno = EINVAL;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end)
        return errno = EINVAL;
    if (errno == ERANGE || v < lo || v > hi)
        return errno = ERANGE;
    *out = v;
    return 0;
}

int ws_parse_double(const char *s, double lo, double hi, double *out)
{
    if (!starts_like_number(s))
        return errno = EINVAL;
    /* Decimal only: strtod would also take "inf", "nan" and hex floats ("0x1p3"). */
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p) && *p != '.' && *p != 'e' && *p != 'E' && *p != '-' &&
            *p != '+')
            return errno = EINVAL;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end)
        return errno = EINVAL;
    if (!isfinite(v) || v < lo || v > hi)
        return errno = ERANGE;
    *out = v; /* an underflow to zero or a subnormal (errno ERANGE from strtod) is kept */
    errno = 0;
    return 0;
}

int ws_env_int64(const char *name, long long def, long long lo, long long hi, long long *out,
                 ws_err *err)
{
    const char *v = getenv(name);
    if (!v || !*v) {
        *out = def;
        return 0;
    }
    if (ws_parse_int64(v, lo, hi, out))
        return ws_err_set(err, WS_EINVAL, "%s=%s: not an integer in %lld..%lld", name, v, lo, hi);
    return 0;
}
