/* import_files: the files `calib import`, `calib check` and `fidelity --ops` read -- operator
 * profiles in Vidur's CSV format (calib/vidur_csv.h), given as files or folders of *.csv
 * files -- into one list of rows, with each file's provenance (path, size, SHA-256, rows,
 * what it measured, the licence found beside it).
 *
 * Paths come from anywhere, so nothing here may block or be fooled: every file (the LICENSE
 * beside them too) is opened without blocking and refused unless it is a regular file (a
 * FIFO, a device, a folder named *.csv), a file whose size stat cannot tell (/proc, /sys) is
 * refused as such, a file given twice (itself and its folder, a link to it) is read once,
 * and a path longer than the database keeps is refused rather than cut. The licence text
 * is stored with its control characters escaped (common/ws_util.h ws_text_escape). Kept
 * apart from the fits and the database (calib/import.h) so the fuzz build, which has no GSL
 * or calibrator, reads files exactly as the tool does (fuzz/fuzz_import_files.c). */
#ifndef WS_CALIB_IMPORT_FILES_H
#define WS_CALIB_IMPORT_FILES_H

#include "calibdb.h"
#include "vidur_csv.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_IMPORT_MAX_FILES 16
#define WS_IMPORT_FILE_MAX_BYTES (1LL << 30) /* a profile larger than this is not one */

/* The files paths name (folders: their *.csv files in name order, hidden ones skipped),
 * each once, as heap strings into list[0..*n) (free each). One-line errors: a path that
 * does not exist, a folder without .csv files, more than WS_IMPORT_MAX_FILES files, a path
 * longer than ws_calibdb_source.path keeps. */
int ws_import_collect(const char *const *paths, int n_paths, char **list, int *n, ws_err *err);

/* The licence beside `path`: the first line of LICENSE (or LICENSE.txt, LICENSE.md, COPYING)
 * in its folder and its first "Copyright" line, e.g. "MIT License, Copyright (c) Microsoft
 * Corporation. (LICENSE)", control characters escaped; "" when there is none. An error
 * when such a file exists but is not a regular file. */
int ws_import_licence(const char *path, char *out, size_t cap, ws_err *err);

/* Reads the files into rows (in order; folders expanded), their sources filled in
 * files[0..*n_files) (licence detected, gpu and dtype left empty). */
int ws_import_read(const char *const *paths, int n_paths, ws_vidur_rows *rows,
                   ws_calibdb_source *files, int *n_files, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
