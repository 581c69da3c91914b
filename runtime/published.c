/* published: the weight formats each model is published in (see published.h). */
#include "published.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "ws_util.h"

/* A string field of a published.json entry: present, a string, no control characters (it
 * is printed as a reference). */
static int published_text(json_t *e, const char *key, const char *where, ws_err *err)
{
    json_t *v = json_object_get(e, key);
    if (!json_is_string(v))
        return ws_err_set(err, WS_EINVAL, "%s: \"%s\" is missing or not a string", where, key);
    for (const unsigned char *p = (const unsigned char *)json_string_value(v); *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return ws_err_set(err, WS_EINVAL, "%s: \"%s\" holds a control character", where, key);
    return 0;
}

/* One model's list: objects with a known format, "where" and "by", no format twice. */
static int published_check(json_t *list, const char *path, const char *model, ws_err *err)
{
    char where[WS_PATH_MAX + 160];
    if (!json_is_array(list))
        return ws_err_set(err, WS_EINVAL, "%s: models.\"%.64s\" is not a list", path, model);
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        snprintf(where, sizeof where, "%s: models.\"%.64s\"[%zu]", path, model, i);
        int rc;
        if (!json_is_object(e))
            return ws_err_set(err, WS_EINVAL, "%s is not an object", where);
        if ((rc = published_text(e, "format", where, err)) ||
            (rc = published_text(e, "where", where, err)) ||
            (rc = published_text(e, "by", where, err)))
            return rc;
        const char *name = json_string_value(json_object_get(e, "format"));
        const ws_wformat *f = ws_wformat_find(name);
        if (!f) {
            char names[256];
            ws_wformat_names(names, sizeof names);
            return ws_err_set(err, WS_EINVAL, "%s: unknown weight format '%.40s' (%s)", where, name,
                              names);
        }
        for (size_t j = 0; j < i; j++)
            if (ws_wformat_find(
                    json_string_value(json_object_get(json_array_get(list, j), "format"))) == f)
                return ws_err_set(err, WS_EINVAL, "%s: format %s listed twice", where, f->name);
    }
    return 0;
}

/* Reads and checks models/published.json (every model's list, so a bad entry is found
 * whichever model is asked for) and finds `name`'s list: *list NULL when the file does not
 * list the model or there is no file. *root owns *list; the caller json_decrefs it. */
static int published_load(const char *name, json_t **root, json_t **list, ws_err *err)
{
    *root = *list = NULL;
    if (!name)
        return ws_err_set(err, WS_EINVAL, "published formats: no model name");
    char path[WS_PATH_MAX];
    int rc = ws_model_data_path(WS_MODEL_PUBLISHED ".json", path, sizeof path, err);
    if (rc || !ws_file_exists(path))
        return rc;
    size_t len;
    char *text = ws_read_file(path, &len, err);
    if (!text)
        return err ? err->code : WS_EIO;
    json_error_t je;
    *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!*root)
        return ws_err_set(err, WS_EINVAL, "%s: invalid JSON at line %d column %d: %s", path,
                          je.line, je.column, je.text);
    json_t *models = json_object_get(*root, "models");
    if (!json_is_object(models))
        rc = ws_err_set(err, WS_EINVAL, "%s: expected an object with a \"models\" object", path);
    const char *key;
    json_t *v;
    json_object_foreach(models, key, v)
    {
        if (rc || (rc = published_check(v, path, key, err)))
            break;
    }
    if (rc) {
        json_decref(*root);
        *root = NULL;
        return rc;
    }
    *list = json_object_get(models, name);
    return 0;
}

int ws_model_published_formats(const char *name, const ws_wformat **out, int max, int *n,
                               ws_err *err)
{
    *n = 0;
    json_t *root, *list;
    int rc = published_load(name, &root, &list, err);
    if (rc)
        return rc;
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        if (*n >= max)
            break;
        out[(*n)++] = ws_wformat_find(json_string_value(json_object_get(e, "format")));
    }
    json_decref(root);
    return 0;
}

int ws_model_published_where(const char *name, const char *format, char *buf, size_t cap,
                             ws_err *err)
{
    if (cap)
        buf[0] = '\0';
    const ws_wformat *f;
    int rc = ws_wformat_parse(format, &f, err);
    json_t *root, *list;
    if (rc || (rc = published_load(name, &root, &list, err)))
        return rc;
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        if (ws_wformat_find(json_string_value(json_object_get(e, "format"))) == f) {
            if (cap)
                snprintf(buf, cap, "%s", json_string_value(json_object_get(e, "where")));
            break;
        }
    }
    json_decref(root);
    return 0;
}
