/* ws_csv: writing CSV fields (see ws_csv.h). */
#include "ws_csv.h"

#include <string.h>

void ws_csv_field(FILE *f, const char *v)
{
    if (!strpbrk(v, ",\"\n\r")) {
        fputs(v, f);
        return;
    }
    fputc('"', f);
    for (; *v; v++) {
        if (*v == '"')
            fputc('"', f);
        fputc(*v, f);
    }
    fputc('"', f);
}
