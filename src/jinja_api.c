/*
 * jinja_api.c - the chat-template renderer's public entry points
 * (cis2_toolkit.h section 6, docs/chat.md "The API"): a template's text in,
 * the variables as a JSON object's text, the rendered text out.  Callers:
 * clients of the library (the server's chat completions and /tokenize,
 * `cis2 serve --render-chat`); everything else is jinja.h's.
 *
 * What it adds to jinja.h: the variables' text parsed here (its jansson
 * memory bounded first, as every JSON input of the library is: docs/inputs.md
 * "Memory"), and the floating-point environment of a render: the caller's
 * is saved, Python's (IEEE default: no FTZ/DAZ, nearest-even) set for the
 * render and the caller's put back after (docs/chat.md "The environment";
 * api.h's cis2_api_enter_ieee), so a template's float arithmetic, repr and
 * tojson are Python's whatever the embedder's register says.
 */
#include "api.h"
#include "cis2_toolkit.h"
#include "jinja.h"

#include <stdlib.h>
#include <string.h>

struct cis2_chat_template {
    cis2_jinja *t;
};

int cis2_chat_template_parse(const char *src, size_t len, cis2_chat_template **out, cis2_error *err)
{
    *out = NULL;
    if (!src && len) return cis2_fail(err, CIS2_E_USAGE, "template: NULL text");
    cis2_chat_template *ct = calloc(1, sizeof *ct);
    if (!ct) return cis2_fail(err, CIS2_E_NOMEM, "template: out of memory");
    cis2_frame f;
    unsigned x87 = cis2_libc_round_begin();
    int rc = cis2_api_enter_ieee(&f);
    if (rc) rc = cis2_fail(err, rc, "template: the IEEE floating-point environment did not read back");
    else rc = cis2_jinja_parse(src, len, NULL, &ct->t, err);
    cis2_api_leave(&f);
    cis2_libc_round_end(x87);
    if (rc) {
        free(ct);
        return rc;
    }
    *out = ct;
    return CIS2_OK;
}

void cis2_chat_template_free(cis2_chat_template *t)
{
    if (!t) return;
    cis2_jinja_free(t->t);
    free(t);
}

int cis2_chat_template_render(const cis2_chat_template *t, const char *vars_json, size_t len, const struct tm *now,
                              char **out, size_t *out_len, cis2_error *err)
{
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!t || (!vars_json && len)) return cis2_fail(err, CIS2_E_USAGE, "template: NULL template or variables");
    cis2_jinja_limits lim;
    cis2_jinja_limits_resolve(&lim, NULL);
    int rc = cis2_json_cost_check(vars_json ? vars_json : "", len, lim.max_memory, "template variables",
                                  "a template's variables", err);
    if (rc) return rc;
    json_error_t je;
    json_t *vars = json_loadb(vars_json ? vars_json : "", len, JSON_ALLOW_NUL, &je);
    if (!vars) return cis2_fail(err, CIS2_E_FORMAT, "template variables: not valid JSON (%s)", je.text);
    if (!json_is_object(vars)) {
        json_decref(vars);
        return cis2_fail(err, CIS2_E_FORMAT, "template variables: not a JSON object");
    }
    cis2_frame f;
    unsigned x87 = cis2_libc_round_begin();
    rc = cis2_api_enter_ieee(&f);
    if (rc) rc = cis2_fail(err, rc, "template: the IEEE floating-point environment did not read back");
    else rc = cis2_jinja_render(t->t, vars, now, &lim, out, out_len, err);
    cis2_api_leave(&f);
    cis2_libc_round_end(x87);
    json_decref(vars);
    return rc;
}
