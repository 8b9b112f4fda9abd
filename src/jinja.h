/*
 * jinja.h - the chat-template renderer: the part of Jinja2 that published
 * chat templates use, rendered as Hugging Face transformers renders them
 * (docs/chat.md, "The API").  Library-internal: clients (the server)
 * reach it through cis2_chat_template_* (cis2_toolkit.h section 6,
 * jinja_api.c); the unit test (tests/unit/test_jinja.c) calls it directly.
 *
 * The environment is transformers' apply_chat_template one: Jinja2's
 * ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
 * loopcontrols extension ({% break %}, {% continue %}), transformers'
 * {% generation %} block, its tojson filter (json.dumps, ensure_ascii
 * false, keys in their order, indent), and the globals raise_exception and
 * strftime_now.  Autoescaping is off; undefined names behave as Jinja's
 * default Undefined.
 *
 * A template is parsed once (cis2_jinja_parse) into an immutable tree that
 * any number of threads may render at once (cis2_jinja_render): each render
 * works in memory of its own and frees it before returning.
 *
 * Errors (cis2_error.msg is always one line):
 *   CIS2_E_FORMAT   a syntax error (parse) or an error while rendering:
 *                   "template line L:C: what", L and C 1-based (C counts
 *                   characters), at the construct that failed.
 *   CIS2_E_USAGE    the template called raise_exception(message): msg is
 *                   the template's message itself (newlines as spaces, cut
 *                   to fit), so a server can answer 400 with it.
 *   CIS2_E_NOMEM    a limit of cis2_jinja_limits was reached (the message
 *                   names it), or an allocation failed.
 *   CIS2_E_INTERNAL vars is not a JSON object (a caller's bug).
 */
#ifndef CIS2_JINJA_H
#define CIS2_JINJA_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "cis2.h"

/* A parsed template (immutable; free with cis2_jinja_free). */
typedef struct cis2_jinja cis2_jinja;

/* The bounds of parsing and of one render (docs/chat.md "Limits").  A zero
 * member takes its default. */
typedef struct cis2_jinja_limits {
    size_t max_source;   /* template bytes: 1 MiB */
    size_t max_output;   /* rendered bytes: 16 MiB */
    size_t max_memory;   /* memory of one render (values, captured output,
                            the variables' copy, the result): 256 MiB */
    uint64_t max_steps;  /* evaluation steps of one render (a node evaluated,
                            a loop turn, a filter's work per 64 bytes or
                            items): 20,000,000 */
    unsigned max_depth;  /* evaluator recursion (nested expressions, blocks
                            and macro calls together): 400 */
} cis2_jinja_limits;

/* The defaults above, with each nonzero member of *in (may be NULL) kept. */
void cis2_jinja_limits_resolve(cis2_jinja_limits *out, const cis2_jinja_limits *in);

/* Parses src[0..len) (UTF-8).  CIS2_OK with *out set, else CIS2_E_FORMAT
 * (the first syntax error, "template line L:C: ...") or CIS2_E_NOMEM (over
 * max_source, nesting past the parser's bounds (docs/chat.md "Limits"),
 * out of memory). */
int cis2_jinja_parse(const char *src, size_t len, const cis2_jinja_limits *lim, cis2_jinja **out, cis2_error *err);
void cis2_jinja_free(cis2_jinja *t);

/* Renders t with the variables of the JSON object vars (messages, tools,
 * add_generation_prompt, bos_token, ... as the caller passes them; the
 * object is only read).  now is strftime_now's time (NULL: the local time
 * at the call).  CIS2_OK with *out malloc'ed and NUL-terminated (free it),
 * its length in *out_len; else the codes above, *out NULL. */
int cis2_jinja_render(const cis2_jinja *t, const json_t *vars, const struct tm *now, const cis2_jinja_limits *lim,
                      char **out, size_t *out_len, cis2_error *err);

/* Parse and render in one call (a template used once). */
int cis2_jinja_render_string(const char *src, size_t len, const json_t *vars, const struct tm *now,
                             const cis2_jinja_limits *lim, char **out, size_t *out_len, cis2_error *err);

#endif
