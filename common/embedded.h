/* embedded: data files compiled into the binary by scripts/embed.sh (schema migrations
 * under store/schema/, the datasheet profiles in profiles/datasheet.json), so that the
 * default database can be created on any machine the binary runs on. The files in the
 * tree stay the source of truth; `make` regenerates the table when they change. */
#ifndef WS_EMBEDDED_H
#define WS_EMBEDDED_H

#include <stddef.h>

typedef struct ws_embedded_file {
    const char *path; /* path relative to the project root, e.g. "store/schema/001_initial.sql" */
    const char *data; /* contents, NUL-terminated */
    size_t len;       /* length without the NUL */
} ws_embedded_file;

extern const ws_embedded_file ws_embedded[]; /* terminated by a {NULL} entry */

/* The embedded file with this path, or NULL. */
const ws_embedded_file *ws_embedded_find(const char *path);

#endif
