/*
 * serve_err.c - the errors of `cis2 serve` (docs/serving.md "Errors"):
 * every refusal is OpenAI's shape, {"error": {"message", "type", "param",
 * "code"}}, sent with an HTTP status.  A module fills a serve_err with
 * serve_fail (the first error wins, so a caller may go on and check once);
 * serve_status_for maps a library status code to the HTTP status; the
 * HTTP layer (serve_http.c), the stream (serve_stream.c) and the stdin
 * mode (serve_main.c) render one with serve_err_json.
 *
 * Who calls it: every module that refuses something (serve_request.c,
 * serve_body.c, serve_chat.c, serve_engine.c, serve_response.c,
 * serve_stream.c, serve_http.c, serve_main.c).  It calls no other module:
 * the leaf of the server's module graph (serve.h), so that no module that
 * only needs to say "400" depends on the request parser.
 *
 * What cis2 will never do (a parameter at a value it does not implement,
 * tools, a chat template it cannot render) is a 400 `unsupported_parameter`
 * or `unsupported_chat_template` naming it, never a 501: the official
 * OpenAI clients retry every 5xx (docs/serving.md "Errors"), and no retry of these
 * can succeed.  5xx means "try again": 503 while shutting down or out of
 * memory, 500 for a bug.
 */
#include "serve.h"

#include <stdarg.h>
#include <stdio.h>

/* OpenAI's error type for an HTTP status. */
static const char *type_for(int status)
{
    return status == 401   ? "authentication_error"
           : status == 429 ? "rate_limit_error"
           : status >= 500 ? "server_error"
           : status == 404 ? "not_found_error"
                           : "invalid_request_error";
}

int serve_fail(serve_err *e, int status, const char *code, const char *param, const char *fmt, ...)
{
    if (!e || e->status) return e ? e->status : status;
    e->status = status;
    e->code = code;
    e->type = type_for(status);
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return status;
}

int serve_status_for(int code)
{
    switch (code) {
    case CIS2_E_USAGE: case CIS2_E_FORMAT: case CIS2_E_MISMATCH: return 400;
    case CIS2_E_UNSUPPORTED: return 400; /* never 5xx: clients retry those */
    case CIS2_E_NOMEM: case CIS2_E_CANCELLED: return 503;
    default: return 500;
    }
}

json_t *serve_err_json(const serve_err *e)
{
    json_t *o = json_object();
    json_object_set_new(o, "message", json_string(e->msg));
    json_object_set_new(o, "type", json_string(e->type ? e->type : "server_error"));
    json_object_set_new(o, "param", e->param[0] ? json_string(e->param) : json_null());
    json_object_set_new(o, "code", e->code ? json_string(e->code) : json_null());
    json_t *r = json_object();
    json_object_set_new(r, "error", o);
    return r;
}
