/* cmd_db: `writescope db init|show|export` -- the SQLite database of hardware profiles
 * and calibrations. `init` creates (and seeds with the datasheet profiles) and migrates;
 * every write is one transaction. `show` and `export` only read: they never create,
 * migrate or seed a database. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "opts.h"
#include "profile.h"
#include "store.h"
#include "ws_atomic.h"
#include "ws_util.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: writescope db init   [--db PATH] [--seed FILE] [--json]\n"
            "       writescope db show   [NAME] [--db PATH] [--json]\n"
            "       writescope db export [--db PATH] [--format json|csv] [--table NAME] "
            "[--output FILE]\n"
            "\n"
            "init    create the database if missing, migrate it to the current schema and\n"
            "        (re)write the datasheet profiles, or the profiles of --seed FILE (same\n"
            "        format as profiles/datasheet.json)\n"
            "show    list the hardware profiles with every parameter, its unit, its source\n"
            "        (datasheet, measured, fitted, modeled) and its reference\n"
            "show NAME  the profile the runtime and the simulator load by NAME (also\n"
            "        --profile NAME): a datasheet name (h100-sxm), host:<fingerprint> or\n"
            "        gpu:<device name>. A datasheet profile and the newest calibration of a\n"
            "        device it lists are merged: calibrated values win, the datasheet fills\n"
            "        in the rest (see store/profile.h)\n"
            "export  every table as JSON, or one table (--table) as JSON or CSV; --output\n"
            "        FILE replaces FILE whole (never a link, FIFO, device or folder) or leaves\n"
            "        it as it was\n"
            "\n"
            "--db defaults to $WRITESCOPE_DB, else results/writescope.db in the project.\n"
            "show and export only read: a --db that does not exist is an error; with no\n"
            "database at the default path they use the embedded datasheet profiles.\n");
}

typedef struct db_opts {
    const char *db, *seed, *profile, *table, *output;
    int format, json; /* format: 0 json, 1 csv */
} db_opts;

static const cli_optdef k_opts[] = {
    {"db", CLI_STR(db_opts, db), .arg = "PATH",
     .help = "the database (default: $WRITESCOPE_DB, else results/writescope.db)"},
    {"seed", CLI_STR(db_opts, seed), .arg = "FILE",
     .help = "init: the profiles to write instead of the datasheet ones"},
    {"profile", CLI_STR(db_opts, profile), .arg = "NAME", .help = "show: the profile NAME"},
    {"format", CLI_ENUM(db_opts, format), .names = (const char *const[]){"json", "csv", NULL},
     .def = "json", .err = "--format must be json or csv", .help = "export: the output format"},
    {"table", CLI_STR(db_opts, table), .arg = "NAME",
     .help = "export: only this table (needed for csv)"},
    {"output", CLI_STR(db_opts, output), .arg = "FILE",
     .help = "export: the file to replace (default: stdout)"},
    {"json", CLI_FLAG(db_opts, json), .help = "machine-readable output"},
    {0}};
static const cli_spec k_spec = {"db", k_opts, 2, usage};

static const char *unit_text(double v, const char *unit, char *buf, int cap)
{
    if (!strcmp(unit, "1"))
        snprintf(buf, (size_t)cap, "%g", v);
    else if (!strcmp(unit, "B")) /* capacities read best in binary units */
        ws_bytes_text(v, buf, (size_t)cap);
    else
        cli_si(v, unit, buf, cap);
    return buf;
}

/* Strings from the database pass through cli_text: a stored name cannot drive the terminal. */
#define TXT(s, buf) cli_text((s), (buf), sizeof(buf))

static void show_text(const ws_store *s, json_t *profiles)
{
    char path[WS_PATH_MAX];
    printf("database %s (schema %d)\n", TXT(ws_store_path(s), path), WS_SCHEMA_VERSION);
    size_t i, j;
    json_t *p, *q;
    json_array_foreach(profiles, i, p)
    {
        char kind[64], name[256], src[64], desc[1024];
        printf("\n%-4s %-18s [%s] %s\n", TXT(json_string_value(json_object_get(p, "kind")), kind),
               TXT(json_string_value(json_object_get(p, "name")), name),
               TXT(json_string_value(json_object_get(p, "source")), src),
               TXT(json_string_value(json_object_get(p, "description")), desc));
        json_array_foreach(json_object_get(p, "params"), j, q)
        {
            char v[96], key[256], unit[64], ref[1024];
            printf("     %-12s %-14s %-9s %s\n",
                   TXT(json_string_value(json_object_get(q, "key")), key),
                   unit_text(json_number_value(json_object_get(q, "value")),
                             TXT(json_string_value(json_object_get(q, "unit")), unit), v, sizeof v),
                   TXT(json_string_value(json_object_get(q, "source")), src),
                   TXT(json_string_value(json_object_get(q, "reference")), ref));
        }
    }
}

static void show_profile(const ws_store *s, const ws_profile *p)
{
    char path[WS_PATH_MAX], kind[64], name[256], desc[1024], ds[256], cal[256];
    printf("database %s (schema %d)\n", TXT(ws_store_path(s), path), WS_SCHEMA_VERSION);
    printf("\n%-4s %s  %s\n", TXT(p->kind, kind), TXT(p->name, name), TXT(p->description, desc));
    printf("     datasheet: %s  calibration: %s\n",
           p->datasheet[0] ? TXT(p->datasheet, ds) : "none",
           p->calibrated[0] ? TXT(p->calibrated, cal) : "none");
    int w = 12;
    for (int i = 0; i < p->n_params; i++)
        if ((int)strlen(p->params[i].key) > w)
            w = (int)strlen(p->params[i].key);
    for (int i = 0; i < p->n_params; i++) {
        const ws_profile_param *q = &p->params[i];
        char v[96], key[256], unit[64], ref[1024];
        printf("     %-*s %-14s %-9s %s\n", w, TXT(q->key, key),
               unit_text(q->value, TXT(q->unit, unit), v, sizeof v),
               ws_profile_source_name(q->source), TXT(q->reference, ref));
    }
}

static json_t *profile_json(const ws_profile *p)
{
    json_t *o = json_object(), *params = json_array();
    json_object_set_new(o, "name", json_string(p->name));
    json_object_set_new(o, "kind", json_string(p->kind));
    json_object_set_new(o, "description", json_string(p->description));
    json_object_set_new(o, "datasheet", p->datasheet[0] ? json_string(p->datasheet) : json_null());
    json_object_set_new(o, "calibrated", p->calibrated[0] ? json_string(p->calibrated) : json_null());
    for (int i = 0; i < p->n_params; i++) {
        const ws_profile_param *q = &p->params[i];
        json_t *j = json_object();
        json_object_set_new(j, "key", json_string(q->key));
        json_object_set_new(j, "value", cli_num(q->value));
        json_object_set_new(j, "unit", json_string(q->unit));
        json_object_set_new(j, "source", json_string(ws_profile_source_name(q->source)));
        json_object_set_new(j, "reference", json_string(q->reference));
        json_array_append_new(params, j);
    }
    json_object_set_new(o, "params", params);
    return o;
}

/* Writes the export to stdout, or replaces `output` whole (ws_atomic). */
static int export_to(ws_store *s, const char *format, const char *table, const char *output,
                     ws_err *err)
{
    ws_atomic_file af;
    FILE *out = stdout;
    if (output) {
        if (ws_atomic_open(&af, output, err))
            return err->code;
        out = af.f;
    }
    int rc = 0;
    if (!strcmp(format, "csv")) {
        rc = ws_store_export_csv(s, table, out, err);
    } else {
        json_t *all = table ? ws_store_export_table(s, table, err) : ws_store_export(s, err);
        if (!all) {
            rc = err->code;
        } else {
            rc = json_dumpf(all, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
            fputc('\n', out);
            json_decref(all);
            /* a failed write to --output is named by ws_atomic_commit, to stdout by
             * cli_close_stdout, each with its cause */
            rc = 0;
        }
    }
    if (output) {
        if (rc)
            ws_atomic_abort(&af);
        else
            rc = ws_atomic_commit(&af, err);
    }
    return rc;
}

int cmd_db(int argc, char **argv)
{
    db_opts o = {0};
    cli_args a;
    int rc = cli_opts_parse(&k_spec, argc, argv, &o, &a);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    const char *db = o.db, *seed = o.seed, *profile = o.profile, *table = o.table,
               *output = o.output, *format = o.format ? "csv" : "json";
    const int json = o.json, nargs = a.npos;
    char **args = a.pos;
    if (nargs == 0)
        return cli_usage_error("db", "missing subcommand (init, show or export)");
    const char *sub = args[0];
    if (strcmp(sub, "init") && strcmp(sub, "show") && strcmp(sub, "export"))
        return cli_usage_error("db", "unknown subcommand '%s'", sub);
    if (nargs > 1 && strcmp(sub, "show"))
        return cli_usage_error("db", "unexpected argument '%s'", args[1]);
    if (nargs > 1 && profile)
        return cli_usage_error("db", "give the profile name once (NAME or --profile NAME)");
    if (nargs > 1)
        profile = args[1];
    if (!strcmp(sub, "export") && !strcmp(format, "csv") && !table)
        return cli_usage_error("db", "--format csv needs --table NAME");

    ws_err err = {0};
    char *seed_text = NULL;
    if (seed && !(seed_text = ws_read_file(seed, NULL, &err)))
        return cli_fail(&err); /* read the seed before touching the database */
    ws_store *s;
    int embedded = 0;
    if (!strcmp(sub, "init") ? cli_open_store(db, &s, &err)
                             : cli_open_store_ro(db, &s, &embedded, &err)) {
        free(seed_text);
        return cli_fail(&err);
    }
    if (!strcmp(sub, "init")) {
        int n = 0;
        rc = seed_text ? ws_store_import_profiles(s, seed_text, seed, &n, &err)
                       : ws_store_seed_datasheet(s, &n, &err);
        if (!rc && json) {
            json_t *o = json_object();
            json_object_set_new(o, "database", json_string(ws_store_path(s)));
            json_object_set_new(o, "schema_version", json_integer(WS_SCHEMA_VERSION));
            json_object_set_new(o, "created", json_boolean(ws_store_created(s)));
            json_object_set_new(o, "profiles_written", json_integer(n));
            cli_print_json(o);
        } else if (!rc) {
            printf("%s %s (schema %d): wrote %d profile(s) from %s\n",
                   ws_store_created(s) ? "created" : "updated", ws_store_path(s),
                   WS_SCHEMA_VERSION, n, seed ? seed : "the datasheet profiles");
        }
    } else if (!strcmp(sub, "show") && profile) {
        ws_profile p;
        rc = ws_profile_load(s, profile, &p, &err);
        if (!rc && json) {
            json_t *o = json_object();
            json_object_set_new(o, "database", json_string(ws_store_path(s)));
            json_object_set_new(o, "schema_version", json_integer(WS_SCHEMA_VERSION));
            json_object_set_new(o, "profile", profile_json(&p));
            cli_print_json(o);
        } else if (!rc) {
            show_profile(s, &p);
        }
        if (!rc)
            ws_profile_free(&p);
    } else if (!strcmp(sub, "show")) {
        json_t *profiles = ws_store_profiles(s, profile, &err);
        if (!profiles) {
            rc = err.code;
        } else if (json) {
            json_t *o = json_object();
            json_object_set_new(o, "database", json_string(ws_store_path(s)));
            json_object_set_new(o, "schema_version", json_integer(WS_SCHEMA_VERSION));
            json_object_set_new(o, "profiles", profiles);
            cli_print_json(o);
        } else {
            show_text(s, profiles);
            json_decref(profiles);
        }
    } else {
        rc = export_to(s, format, table, output, &err);
    }
    free(seed_text);
    if (rc && !strcmp(sub, "init"))
        ws_store_discard(s); /* a database this init created goes with its failure */
    else
        ws_store_close(s);
    if (rc)
        return cli_fail(&err);
    if (embedded)
        cli_note_embedded();
    return CLI_EXIT_OK;
}
