/* ws_csv: writing CSV fields, for every CSV file the tool writes (the database's table
 * export in store/, the step and layer rows in store/steprow.c, the simulator's export in
 * sim/export.c).
 *
 * Fields follow RFC 4180: a field is quoted only when it holds a comma, a quote or a line
 * break, and a quote inside a quoted field is doubled. It lives in common/ so that every
 * writer of CSV uses one quoting rule without depending on the store. Nothing here
 * allocates or fails; write errors stay on the FILE for the caller to check. */
#ifndef WS_CSV_H
#define WS_CSV_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One CSV field: quoted when it holds a comma, a quote or a line break, quotes doubled. */
void ws_csv_field(FILE *f, const char *v);

#ifdef __cplusplus
}
#endif
#endif
