/* trace_azure: the Azure LLM inference trace CSV (`TIMESTAMP,ContextTokens,
 * GeneratedTokens`, 2023 and 2024 releases), found by those column names. TIMESTAMP is
 * `YYYY-MM-DD HH:MM:SS[.fffffff]` (UTC, up to 9 fraction digits); the arrival is the
 * time since the first row's, counted in whole nanoseconds and converted once, so that
 * 100 ns steps survive and 0.052 s reads as 0.052. */
#include <ctype.h>
#include <stdint.h>
#include <string.h>

#include "trace_io.h"

static const char *const k_cols[] = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"};

static int detect(const char *line)
{
    return strstr(line, "TIMESTAMP") && strstr(line, "ContextTokens") &&
           strstr(line, "GeneratedTokens");
}

static int header(ws_trace *t, char *line, ws_err *err)
{
    return trace_csv_columns(t, line, k_cols, 3, err);
}

/* n digits at s into *v; 0 if they are not all digits. */
static int digits(const char *s, int n, int *v)
{
    *v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return 0;
        *v = *v * 10 + (s[i] - '0');
    }
    return 1;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm). */
static int64_t days_from_civil(int y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int parse_time(const char *s, int64_t *sec, int64_t *ns)
{
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y, mo, d, h, mi, se;
    if (strlen(s) < 19 || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) ||
        s[7] != '-' || !digits(s + 8, 2, &d) || (s[10] != ' ' && s[10] != 'T') ||
        !digits(s + 11, 2, &h) || s[13] != ':' || !digits(s + 14, 2, &mi) || s[16] != ':' ||
        !digits(s + 17, 2, &se))
        return 0;
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 || mi > 59 || se > 59)
        return 0;
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (mo == 2 && d == 29 && !leap)
        return 0;
    const char *p = s + 19;
    int64_t frac = 0;
    if (*p == '.') {
        int n = 0;
        for (p++; isdigit((unsigned char)*p); p++, n++) {
            if (n == 9)
                return 0;
            frac = frac * 10 + (*p - '0');
        }
        if (n == 0)
            return 0;
        for (; n < 9; n++)
            frac *= 10;
    }
    if (*p == 'Z')
        p++;
    if (*p)
        return 0;
    *sec = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se;
    *ns = frac;
    return 1;
}

static int row(ws_trace *t, char *line, size_t len, ws_trace_req *r, ws_err *err)
{
    (void)len;
    char *f[TRACE_COLS_MAX];
    if (trace_csv_row(t, line, f, err))
        return TRACE_ROW_BAD;
    int64_t sec, ns;
    const char *ts = f[t->col[0]];
    if (!parse_time(ts, &sec, &ns)) {
        ws_err_set(err, WS_EPARSE, "TIMESTAMP '%.40s': not a time YYYY-MM-DD HH:MM:SS[.fffffff]",
                   ts);
        return TRACE_ROW_BAD;
    }
    if (trace_field_tokens(f[t->col[1]], "ContextTokens", &r->prompt_tokens, err) ||
        trace_field_tokens(f[t->col[2]], "GeneratedTokens", &r->output_tokens, err))
        return TRACE_ROW_BAD;
    if (!t->have_origin) {
        t->have_origin = 1;
        t->origin_s = sec;
        t->origin_ns = ns;
    }
    int64_t d = sec - t->origin_s;
    if (d < -(int64_t)WS_TRACE_ARRIVAL_MAX || d > (int64_t)WS_TRACE_ARRIVAL_MAX) {
        ws_err_set(err, WS_EINVAL, "TIMESTAMP '%.40s': more than %g s from the first row's", ts,
                   WS_TRACE_ARRIVAL_MAX);
        return TRACE_ROW_BAD;
    }
    /* whole nanoseconds (< 2^63 within the bound), divided once: 0.052 s stays 0.052 */
    r->arrival_s = (double)(d * 1000000000 + (ns - t->origin_ns)) / 1e9;
    return TRACE_ROW_OK;
}

const trace_importer trace_importer_azure = {WS_TRACE_AZURE, detect, header, 1, row};
