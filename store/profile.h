/* profile: one typed view of a hardware profile, for the runtime and the simulator. A
 * profile is a set of parameters, each with its value (SI units), unit, source
 * (datasheet, measured, fitted, modeled) and a reference saying where it came from.
 *
 * How a name resolves (ws_profile_load):
 *   - any name is first the stored profile of that name: a datasheet profile
 *     (profiles/datasheet.json, e.g. "h100-sxm"), one imported with `db init --seed`, or
 *     one the calibrator built, "host:<fingerprint>" or "gpu:<device name>";
 *   - a datasheet profile lists the devices it describes ("devices": the CUDA device name
 *     of a GPU, the /proc/cpuinfo model name of a CPU). The calibrated profile of the same
 *     kind whose host reported one of those names is its calibration; when several
 *     hosts match, the one of the newest run;
 *   - loading either of the two gives the same merge: the datasheet parameters, where a
 *     datasheet parameter names the calibrated key that measures it ("calibrated_by")
 *     and the calibration has that key, the calibrated value instead (source fitted or
 *     measured, its own reference); then every calibrated parameter under its own key.
 *     A calibrated profile holds the newest good fit of each key, so the newest good
 *     calibration wins over the datasheet, and the datasheet fills in the rest;
 *   - a name that is not stored: WS_ENOTFOUND, "<db>: no profile named '<name>'".
 * The merge happens when loading; the database keeps the two profiles apart. */
#ifndef WS_PROFILE_H
#define WS_PROFILE_H

#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ws_profile_source {
    WS_SOURCE_DATASHEET, /* vendor specification */
    WS_SOURCE_MEASURED,  /* timed on a machine */
    WS_SOURCE_FITTED,    /* fitted to measured samples */
    WS_SOURCE_MODELED,   /* an assumption or a value derived by a model */
} ws_profile_source;

typedef struct ws_profile_param {
    char key[128]; /* hbm_bw, link.h2d.bandwidth, cpu.attn.gqa.bf16.bandwidth, ... */
    double value;
    char unit[16]; /* B, B/s, flop/s, s, Hz, 1 */
    ws_profile_source source;
    char reference[320];
} ws_profile_param;

typedef struct ws_profile {
    char name[160]; /* the name it was loaded by */
    char kind[8];   /* gpu | host */
    char description[320];
    char datasheet[160];  /* the datasheet profile used, "" if none */
    char calibrated[160]; /* the calibrated profile laid over it, "" if none */
    ws_profile_param *params;
    int n_params;
} ws_profile;

/* Loads `name` as described above into *p (free with ws_profile_free). */
int ws_profile_load(ws_store *s, const char *name, ws_profile *p, ws_err *err);
void ws_profile_free(ws_profile *p);
/* When p has no parameter `key`: the value of the first datasheet profile of p's kind that
 * has it, added as a modeled parameter whose reference says whose value it is (a calibrated
 * host with no datasheet profile of its own borrows what no calibration measures, e.g.
 * kv_reformat_bw). No datasheet has it: p is left as it was. Returns 0 or an error. */
int ws_profile_fill(ws_store *s, ws_profile *p, const char *key, ws_err *err);
/* The device names (as the machine reports them) the stored datasheet profile `name` lists,
 * at most max of them, into out[]; *n their count. WS_ENOTFOUND "<db>: no datasheet profile
 * named '<name>'" when there is no such datasheet profile. */
int ws_profile_devices(ws_store *s, const char *name, char (*out)[128], int max, int *n,
                       ws_err *err);
/* The datasheet profiles of `kind` (gpu | host) by name, at most max into out[]; *n their
 * count. */
int ws_profile_names(ws_store *s, const char *kind, char (*out)[128], int max, int *n, ws_err *err);
/* What is stored under a profile name, before anything is written under it. */
typedef struct ws_profile_info {
    int found;         /* 0: no profile of that name (the rest empty) */
    char kind[8];      /* gpu | host */
    int calibrated;    /* 1: built from a calibration run (else a datasheet profile) */
    char run_mode[16]; /* calibrated: its run's mode (quick | default | import) */
} ws_profile_info;
int ws_profile_info_get(ws_store *s, const char *name, ws_profile_info *out, ws_err *err);
/* The parameter `key`, or NULL. */
const ws_profile_param *ws_profile_get(const ws_profile *p, const char *key);
/* Its value; WS_ENOTFOUND "profile <name> has no parameter '<key>'" when missing. */
int ws_profile_value(const ws_profile *p, const char *key, double *out, ws_err *err);
/* The physical range of parameter `key`: 0 when value lies in it (or the key has none),
 * else WS_EINVAL "param <key> = <value>: <what> is <range>" (one line, the bound named).
 * Every key the cost model reads has one (counts are whole numbers, efficiencies in
 * (0, 1], rates and sizes within what any machine has), and so does each calibrated key by
 * its last part (".bandwidth", ".c0", ...); other keys are only descriptive. Every profile
 * imported (ws_store_import_profiles: db init, --seed, a calibration) and every profile
 * loaded (ws_profile_load) passes its parameters through it. */
int ws_profile_check_param(const char *key, double value, ws_err *err);
/* "datasheet", "measured", "fitted", "modeled". */
const char *ws_profile_source_name(ws_profile_source src);

#ifdef __cplusplus
}
#endif
#endif
