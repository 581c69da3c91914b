/* embedded: lookup in the generated table (see embedded.h). */
#include "embedded.h"

#include <string.h>

const ws_embedded_file *ws_embedded_find(const char *path)
{
    for (const ws_embedded_file *f = ws_embedded; f->path; f++)
        if (strcmp(f->path, path) == 0)
            return f;
    return NULL;
}
