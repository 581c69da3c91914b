/* test_parse: strict number parsing for options and environment variables
 * (common/ws_parse.c): whole string or nothing, range-checked. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ws_parse.h"

Test(parse, int64_whole_string_in_range)
{
    long long v = -7;
    cr_assert_eq(ws_parse_int64("42", 0, 100, &v), 0);
    cr_assert_eq(v, 42);
    cr_assert_eq(ws_parse_int64("-5", -10, 10, &v), 0);
    cr_assert_eq(v, -5);
    cr_assert_eq(ws_parse_int64("+5", 0, 10, &v), 0);
    cr_assert_eq(v, 5);
    cr_assert_eq(ws_parse_int64("9223372036854775807", 0, LLONG_MAX, &v), 0);
    cr_assert_eq(v, LLONG_MAX);

    const char *junk[] = {"", "5abc", "abc", " 5", "5 ", "0x10", "1e3", "5.0", "--5", "+", "-",
                          "\t7", "5\n"};
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        v = 99;
        errno = 0;
        cr_assert_eq(ws_parse_int64(junk[i], LLONG_MIN, LLONG_MAX, &v), EINVAL, "'%s'", junk[i]);
        cr_assert_eq(errno, EINVAL);
        cr_assert_eq(v, 99, "'%s' left *out alone", junk[i]);
    }
    cr_assert_eq(ws_parse_int64(NULL, 0, 1, &v), EINVAL);
    cr_assert_eq(ws_parse_int64("101", 0, 100, &v), ERANGE);
    cr_assert_eq(errno, ERANGE);
    cr_assert_eq(ws_parse_int64("0", 1, 100, &v), ERANGE);
    cr_assert_eq(ws_parse_int64("99999999999999999999", LLONG_MIN, LLONG_MAX, &v), ERANGE);
    cr_assert_eq(ws_parse_int64("-99999999999999999999", LLONG_MIN, LLONG_MAX, &v), ERANGE);
    cr_assert_eq(v, 99);
}

Test(parse, double_finite_decimal_in_range)
{
    double d = -1;
    cr_assert_eq(ws_parse_double("2.5", 0, 10, &d), 0);
    cr_assert_eq(d, 2.5);
    cr_assert_eq(ws_parse_double("-1e-3", -1, 1, &d), 0);
    cr_assert_eq(d, -1e-3);
    cr_assert_eq(ws_parse_double("1e-400", 0, 1, &d), 0, "underflow to zero is a number");
    const char *junk[] = {"", "2.5x", " 2.5", "nan", "inf", "-inf", "0x1p3", "abc", "1e", "."};
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        d = 7;
        cr_assert_eq(ws_parse_double(junk[i], -1e300, 1e300, &d), EINVAL, "'%s'", junk[i]);
        cr_assert_eq(d, 7);
    }
    cr_assert_eq(ws_parse_double("1e999", -1e300, 1e300, &d), ERANGE);
    cr_assert_eq(ws_parse_double("10.5", 0, 10, &d), ERANGE);
    cr_assert_eq(d, 7);
}

Test(parse, env_names_the_variable)
{
    long long v = 0;
    ws_err err = {0};
    unsetenv("WS_TEST_PARSE_N");
    cr_assert_eq(ws_env_int64("WS_TEST_PARSE_N", 5000, 0, 100000, &v, &err), 0);
    cr_assert_eq(v, 5000, "unset gives the default");
    setenv("WS_TEST_PARSE_N", "", 1);
    cr_assert_eq(ws_env_int64("WS_TEST_PARSE_N", 5000, 0, 100000, &v, &err), 0);
    cr_assert_eq(v, 5000, "empty gives the default");
    setenv("WS_TEST_PARSE_N", "250", 1);
    cr_assert_eq(ws_env_int64("WS_TEST_PARSE_N", 5000, 0, 100000, &v, &err), 0);
    cr_assert_eq(v, 250);
    const char *bad[] = {"abc", "-1", "250ms", "100001"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("WS_TEST_PARSE_N", bad[i], 1);
        cr_assert_eq(ws_env_int64("WS_TEST_PARSE_N", 5000, 0, 100000, &v, &err), WS_EINVAL);
        cr_assert_neq(strstr(err.msg, "WS_TEST_PARSE_N="), NULL, "%s", err.msg);
        cr_assert_neq(strstr(err.msg, bad[i]), NULL, "%s", err.msg);
        cr_assert_eq(v, 250);
    }
    unsetenv("WS_TEST_PARSE_N");
}
