/*
 * prompts.c - prompt files (include/cis2_toolkit.h section 1:
 * cis2_prompts_load), as `cis2 run --prompt-file` and embedders read them.
 *
 * A prompt file is a JSON array of strings, or one prompt per line (LF or
 * CR LF; a final LF is optional).  It is read once (cis2_read_file, at
 * most PROMPT_FILE_MAX bytes), a JSON array's memory cost is bounded before
 * jansson parses it (jsonlim.h), and an empty prompt, a NUL or more than
 * `max` prompts are format errors naming the line or element.  Text is
 * validated as UTF-8 when it is tokenized.
 */
#include "jsonlim.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define PROMPT_FILE_MAX ((size_t)256 << 20)
#define PROMPT_JSON_BUDGET ((uint64_t)512 << 20)

typedef struct prompts_priv {
    char *buf;         /* the file (line prompts point into it) */
    json_t *json;      /* or the parsed array (its strings) */
} prompts_priv;

void cis2_prompts_free(cis2_prompts *p)
{
    if (!p) return;
    prompts_priv *pv = p->priv;
    if (pv) {
        json_decref(pv->json);
        free(pv->buf);
        free(pv);
    }
    free(p->text);
    free(p->len);
    free(p);
}

static int from_json(const char *path, prompts_priv *pv, size_t len, size_t max, cis2_prompts *p, cis2_error *err)
{
    int rc = cis2_json_cost_check(pv->buf, len, PROMPT_JSON_BUDGET, path, "a prompt file", err);
    if (rc) return rc;
    json_error_t je;
    json_t *arr = json_loadb(pv->buf, len, JSON_ALLOW_NUL, &je);
    if (!arr || !json_is_array(arr)) {
        json_decref(arr);
        return cis2_fail(err, CIS2_E_FORMAT, "%s: line %d: %s", path, je.line, arr ? "not a JSON array" : je.text);
    }
    pv->json = arr;
    size_t n = json_array_size(arr);
    if (n > max) return cis2_fail(err, CIS2_E_FORMAT, "%s: more than %zu prompts", path, max);
    p->text = calloc(n ? n : 1, sizeof *p->text);
    p->len = calloc(n ? n : 1, sizeof *p->len);
    if (!p->text || !p->len) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(arr, i);
        if (!json_is_string(s)) return cis2_fail(err, CIS2_E_FORMAT, "%s: element %zu is not a string", path, i);
        if (json_string_length(s) == 0) return cis2_fail(err, CIS2_E_FORMAT, "%s: element %zu is an empty prompt", path, i);
        if (memchr(json_string_value(s), 0, json_string_length(s)))
            return cis2_fail(err, CIS2_E_FORMAT, "%s: element %zu holds a NUL character (\\u0000)", path, i);
        p->text[i] = json_string_value(s);
        p->len[i] = json_string_length(s);
    }
    p->n = n;
    return CIS2_OK;
}

static int from_lines(const char *path, prompts_priv *pv, size_t len, size_t max, cis2_prompts *p, cis2_error *err)
{
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += pv->buf[i] == '\n';
    if (lines > max + 1) return cis2_fail(err, CIS2_E_FORMAT, "%s: more than %zu prompts", path, max);
    p->text = calloc(lines, sizeof *p->text);
    p->len = calloc(lines, sizeof *p->len);
    if (!p->text || !p->len) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    size_t start = 0, lineno = 0;
    while (start < len) {
        size_t e = start;
        while (e < len && pv->buf[e] != '\n') e++;
        size_t l = e - start;
        if (l && pv->buf[start + l - 1] == '\r') l--;
        lineno++;
        if (l == 0) return cis2_fail(err, CIS2_E_FORMAT, "%s: line %zu: empty prompt", path, lineno);
        if (memchr(pv->buf + start, 0, l)) return cis2_fail(err, CIS2_E_FORMAT, "%s: line %zu: NUL byte", path, lineno);
        if (p->n == max) return cis2_fail(err, CIS2_E_FORMAT, "%s: more than %zu prompts", path, max);
        p->text[p->n] = pv->buf + start;
        p->len[p->n] = l;
        p->n++;
        start = e + 1;
    }
    return CIS2_OK;
}

int cis2_prompts_load(const char *path, size_t max, cis2_prompts **out, cis2_error *err)
{
    *out = NULL;
    cis2_prompts *p = calloc(1, sizeof *p);
    prompts_priv *pv = calloc(1, sizeof *pv);
    if (!p || !pv) { free(p); free(pv); return cis2_fail(err, CIS2_E_NOMEM, "out of memory"); }
    p->priv = pv;
    size_t len = 0;
    int rc = cis2_read_file(path, PROMPT_FILE_MAX, "a prompt file", &pv->buf, &len, err);
    if (!rc) {
        size_t k = 0;
        while (k < len && strchr(" \t\r\n", pv->buf[k]) && pv->buf[k]) k++;
        rc = k < len && pv->buf[k] == '[' ? from_json(path, pv, len, max, p, err) : from_lines(path, pv, len, max, p, err);
    }
    if (!rc && p->n == 0) rc = cis2_fail(err, CIS2_E_FORMAT, "%s: no prompts", path);
    if (rc) { cis2_prompts_free(p); return rc; }
    *out = p;
    return CIS2_OK;
}
