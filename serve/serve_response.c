/*
 * serve_response.c - finished jobs to OpenAI responses (docs/serving.md
 * "Responses", docs/receipts.md): a whole `text_completion` or
 * `chat.completion` object once every sequence of a job has its result,
 * and the pieces a stream's chunks share with it (the envelope, the
 * choice's `cis2` object, usage, a failed job's error).
 *
 * finish_reason is "stop" for any stop rule, "length" otherwise, and
 * cis2.finish says which rule.  A chat answer on a server with a tool or
 * reasoning convention is read by a parser of its choice's own
 * (serve_call_parser; docs/serving.md "Tool calls and reasoning"): its
 * message gains reasoning_content and tool_calls, its finish_reason may
 * be "tool_calls", and its cis2 object names the conventions.  Every choice carries a `cis2` object: the
 * receipt text (the library's, byte for byte what `cis2 run` writes for
 * the same request; v1 or ext-sampling-1 as the library decided, §S7.1),
 * its sha256, the witness (CIS2_REF, §12.1) and argmax (§12.2) digests,
 * the prompt and generated ids, the finish reason and the stop rule, and
 * the logprob bits (serve_logprobs.c); in a stream it comes in the
 * choice's finishing chunk (serve_stream.c).
 *
 * With echo (completions) the text is the prompt's then the completion's
 * and the logprobs the prompt's scores (cis2_score, docs/sampling.md §S11:
 * the first token null) then the generated tokens'; with max_tokens 0
 * there is no job and no receipt, only the scores.  With score_receipt
 * each choice also carries its prompt's score receipt (docs/serving.md
 * "Logprobs").  Every completion receipt made here goes to the receipt
 * log first (docs/serving.md "The receipt log"); one that cannot be
 * logged fails the answer (503 receipt_log).
 *
 * Who calls it: serve_http.c (serve_call_response, on the HTTP thread
 * once the job is done) and serve_stream.c.  It calls serve_err.c,
 * serve_logprobs.c, serve_buf.c, serve_rlog.c and serve_parse.c; it
 * reads the serve_call that serve_request.c built (serve_call_score for
 * its scores).
 */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- pieces */

static json_t *ids_json(const uint32_t *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer(ids[i]));
    return a;
}

const char *serve_finish_reason(int f)
{
    return f == CIS2_FINISH_LENGTH ? "length" : f == CIS2_FINISH_CANCELLED ? "cancelled" : "stop";
}

/* The receipt's text and its digest into o (CIS2_OK or a library code),
 * and into the receipt log as NAME (docs/serving.md "The receipt log"). */
static int receipt_json(const serve_ctx *sc, const cis2_result *r, const char *name, json_t *o, cis2_error *err)
{
    cis2_receipt *rc = NULL;
    char *text = NULL;
    size_t len = 0;
    int st = cis2_receipt_make(sc->e, r, &rc, err);
    if (!st) st = cis2_receipt_render(rc, &text, &len, err);
    cis2_receipt_free(rc);
    if (!st) st = serve_rlog_write(sc->rlog, name, text, len, err);
    if (st) {
        cis2_free(text);
        return st;
    }
    uint8_t d[32];
    char h[65];
    json_object_set_new(o, "receipt", json_stringn(text, len));
    cis2_sha256(text, len, d);
    cis2_hex(d, 32, h);
    json_object_set_new(o, "receipt_sha256", json_string(h));
    cis2_free(text);
    return CIS2_OK;
}

/* ---------------------------------------------------- parsed answers */

/* Whether chat answers of c are parsed, and by what (docs/serving.md "Tool
 * calls and reasoning"): tool calls only when the request lets the model
 * call its tools. */
static int parsed(const serve_ctx *sc, const serve_call *c)
{
    return c->kind == CALL_CHAT && (sc->parse.tools != SERVE_TOOLS_NONE || sc->parse.reasoning != SERVE_REASON_NONE);
}

int serve_call_parser(const serve_ctx *sc, const serve_call *c, size_t choice, serve_parse **out)
{
    *out = NULL;
    if (!parsed(sc, c)) return 0;
    const serve_prompt *pr = &c->prompts[0];
    /* call k's id: call_ + the rendered prompt's sha256 (12 hex digits) +
     * _CHOICE_ + k, so the same request gives the same ids and another turn
     * (a longer prompt) others; Mistral's template and tokenizer want 9
     * alphanumerics: the sha256 of that prefix, 8 hex digits, + k */
    uint8_t d[32];
    char h[13], prefix[48];
    cis2_sha256(pr->text ? pr->text : "", pr->text ? pr->len : 0, d);
    cis2_hex(d, 6, h);
    snprintf(prefix, sizeof prefix, "call_%s_%zu_", h, choice);
    if (sc->parse.tools == SERVE_TOOLS_MISTRAL) {
        cis2_sha256(prefix, strlen(prefix), d);
        cis2_hex(d, 4, prefix);
    }
    serve_parse_opts po = {.tools_on = c->tools_on, .tools = c->tools, .id_prefix = prefix,
                           .in_think = pr->text && serve_parse_prompt_in_think(pr->text, pr->len)};
    *out = serve_parse_new(&sc->parse, &po);
    return *out ? 0 : -1;
}

/* The parser's conventions that applied to a choice, into its cis2 object. */
static void parser_note(const serve_ctx *sc, const serve_call *c, json_t *o)
{
    if (!parsed(sc, c)) return;
    int tools = c->tools_on && sc->parse.tools != SERVE_TOOLS_NONE;
    json_object_set_new(o, "tool_parser", tools ? json_string(serve_parse_tool_str(sc->parse.tools)) : json_null());
    json_object_set_new(o, "reasoning_parser", sc->parse.reasoning != SERVE_REASON_NONE
                                                   ? json_string(serve_parse_reason_str(sc->parse.reasoning))
                                                   : json_null());
}

json_t *serve_call_cis2(const serve_ctx *sc, const serve_call *c, size_t choice, const cis2_result *r, serve_err *e)
{
    cis2_error err = {0};
    json_t *o = json_object();
    char name[96];
    snprintf(name, sizeof name, "%s.%zu.receipt", c->id, choice);
    int st = receipt_json(sc, r, name, o, &err);
    if (st) {
        json_decref(o);
        if (st == CIS2_E_IO) /* the log's disk: the answer waits for it (503, try again) */
            serve_fail(e, 503, "receipt_log", NULL, "%s", err.msg);
        else
            serve_fail(e, 500, NULL, NULL, "making the receipt failed: %s", err.msg);
        return NULL;
    }
    char h[65];
    cis2_hex(r->witness, 32, h);
    json_object_set_new(o, "witness_digest", json_string(h));
    cis2_hex(r->argmax_digest, 32, h);
    json_object_set_new(o, "argmax_digest", json_string(h));
    json_object_set_new(o, "prompt_token_ids", ids_json(r->prompt_ids, r->n_prompt));
    json_object_set_new(o, "generated_token_ids", ids_json(r->tokens, r->n_tokens));
    json_object_set_new(o, "finish", json_string(cis2_finish_name(r->finish)));
    if (c->stop_desc[0]) json_object_set_new(o, "stop_rule", json_string(c->stop_desc));
    else json_object_set_new(o, "stop_rule", json_null());
    if (c->kind == CALL_CHAT) /* the chat template's text, exactly what was tokenized (prompt_token_ids) */
        json_object_set_new(o, "prompt", json_stringn(c->prompts[0].text, c->prompts[0].len));
    parser_note(sc, c, o);
    serve_lp_bits(o, r);
    return o;
}

json_t *serve_call_usage(const serve_call *c, const serve_job *j)
{
    size_t pt = 0, ct = 0;
    for (size_t i = 0; i < c->n_prompts; i++) pt += c->prompts[i].n_tokens;
    for (size_t i = 0; j && i < j->n; i++) ct += j->seqs[i].res ? j->seqs[i].res->n_tokens : j->seqs[i].n_toks;
    json_t *u = json_object();
    json_object_set_new(u, "prompt_tokens", json_integer((json_int_t)pt));
    json_object_set_new(u, "completion_tokens", json_integer((json_int_t)ct));
    json_object_set_new(u, "total_tokens", json_integer((json_int_t)(pt + ct)));
    return u;
}

json_t *serve_call_envelope(const serve_ctx *sc, const serve_call *c, const char *object)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(c->id));
    json_object_set_new(o, "object", json_string(object));
    json_object_set_new(o, "created", json_integer(c->created));
    json_object_set_new(o, "model", json_string(sc->cfg.model_name));
    json_object_set_new(o, "system_fingerprint", json_string("cis2-" CIS2_VERSION));
    return o;
}

int serve_job_error(const serve_job *j, serve_err *e)
{
    if (j->shutdown_cancel) return serve_fail(e, 503, "shutting_down", NULL, "the server is shutting down");
    if (j->state == JOB_FAILED) {
        int st = serve_status_for(j->admit_rc);
        const char *msg = j->admit_err.msg;
        if (j->admit_rc == CIS2_E_UNSUPPORTED) return serve_fail(e, 400, "unsupported_parameter", NULL, "%s", msg);
        if (st == 400) return serve_fail(e, 400, "invalid_value", NULL, "%s", msg[0] ? msg : "invalid request");
        return serve_fail(e, st, NULL, NULL, "%s", msg[0] ? msg : cis2_status_name(j->admit_rc));
    }
    for (size_t i = 0; i < j->n; i++)
        if (!j->seqs[i].res || j->seqs[i].res->finish == CIS2_FINISH_CANCELLED)
            return serve_fail(e, 503, "cancelled", NULL, "the request was cancelled");
    return 0;
}

/* ----------------------------------------------------- whole responses */

/* A whole choice's OpenAI logprobs object for its generated tokens. */
static json_t *result_logprobs(const serve_ctx *sc, const serve_call *c, const cis2_result *r, size_t base)
{
    serve_lp_span sp = {.ids = r->tokens, .lp = r->logprobs, .top_ids = r->top_ids, .top_lp = r->top_logprobs,
                        .n_top = r->n_top, .n = r->n_tokens, .base = base,
                        .clip = base + cis2_utf8_chars(r->text ? r->text : "", r->text ? r->text_len : 0)};
    return serve_lp_json(sc->e, c->kind == CALL_CHAT, &sp);
}

/* The echoed prompt's OpenAI logprobs (docs/sampling.md §S11: the first
 * token has no row, so its logprob and top_logprobs are null), its
 * alternatives the first `logprobs` of the score's (which may hold more
 * for prompt_logprobs); text_offset counts from the start of the text. */
static json_t *echo_logprobs(const serve_ctx *sc, const serve_call *c, const cis2_score_result *s, size_t clip)
{
    size_t nt = c->top_logprobs < s->n_top ? c->top_logprobs : s->n_top;
    uint32_t *ti = nt ? malloc(s->n_ids * nt * sizeof *ti) : NULL;
    float *tl = nt ? malloc(s->n_ids * nt * sizeof *tl) : NULL;
    if (nt && (!ti || !tl)) { free(ti); free(tl); return NULL; }
    for (size_t i = 0; i < s->n_ids && nt; i++) {
        memcpy(ti + i * nt, s->top_ids + i * s->n_top, nt * sizeof *ti);
        memcpy(tl + i * nt, s->top_logprobs + i * s->n_top, nt * sizeof *tl);
    }
    serve_lp_span sp = {.ids = s->ids, .lp = s->logprobs, .top_ids = ti, .top_lp = tl, .n_top = nt, .n = s->n_ids,
                        .base = 0, .clip = clip};
    json_t *o = serve_lp_json(sc->e, 0, &sp);
    free(ti);
    free(tl);
    for (size_t i = 0; o && i < s->first && i < s->n_ids; i++) {
        json_array_set_new(json_object_get(o, "token_logprobs"), i, json_null());
        json_array_set_new(json_object_get(o, "top_logprobs"), i, json_null());
    }
    return o;
}

/* A choice's logprobs: null when not asked; with echo the prompt's, then
 * the generated tokens' (r NULL: none were), in one object. */
static json_t *choice_logprobs(const serve_ctx *sc, const serve_call *c, size_t p, const cis2_result *r,
                               size_t echo_chars, serve_err *e)
{
    if (!c->logprobs || (r && !r->logprobs)) return json_null();
    if (!c->echo) return result_logprobs(sc, c, r, 0);
    json_t *o = echo_logprobs(sc, c, serve_call_score(c, p), echo_chars);
    json_t *g = o && r ? result_logprobs(sc, c, r, echo_chars) : NULL;
    const char *keys[] = {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
    for (int k = 0; g && k < 4; k++) json_array_extend(json_object_get(o, keys[k]), json_object_get(g, keys[k]));
    json_decref(g);
    if (!o || (r && !g)) {
        json_decref(o);
        serve_fail(e, 500, NULL, NULL, "out of memory");
        return NULL;
    }
    return o;
}

/* The prompt an echo puts before the completion: the text as given, or
 * the ids' display text (malloc'ed; NULL out of memory). */
static char *echo_text(const serve_ctx *sc, const serve_prompt *p, size_t *len)
{
    char *t = NULL;
    *len = 0;
    if (p->text) {
        if ((t = malloc(p->len + 1))) { memcpy(t, p->text, p->len + 1); *len = p->len; }
        return t;
    }
    char *d = NULL;
    if (cis2_engine_detokenize(sc->e, p->ids, p->n_ids, 1, &d, len, NULL)) return NULL;
    if ((t = malloc(*len + 1))) memcpy(t, d, *len + 1);
    cis2_free(d);
    return t;
}

/* The `cis2` object of a choice with nothing generated (max_tokens 0): the
 * prompt's ids and no receipt (no run was made). */
static json_t *prompt_only_cis2(const serve_ctx *sc, const serve_call *c, size_t p)
{
    const serve_prompt *pr = &c->prompts[p];
    json_t *o = json_object();
    json_object_set_new(o, "receipt", json_null());
    const cis2_score_result *s = serve_call_score(c, p);
    if (s) {
        json_object_set_new(o, "prompt_token_ids", ids_json(s->ids, s->n_ids));
    } else if (pr->text) {
        uint32_t *ids = NULL;
        size_t n = 0;
        cis2_engine_tokenize_prompt(sc->e, pr->text, pr->len, &ids, &n, NULL);
        json_object_set_new(o, "prompt_token_ids", ids_json(ids, n));
        cis2_free(ids);
    } else {
        json_object_set_new(o, "prompt_token_ids", ids_json(pr->ids, pr->n_ids));
    }
    json_object_set_new(o, "generated_token_ids", json_array());
    json_object_set_new(o, "finish", json_string("length"));
    json_object_set_new(o, "stop_rule", c->stop_desc[0] ? json_string(c->stop_desc) : json_null());
    return o;
}

/* One choice of a whole response: prompt p, OpenAI index `choice`, its
 * result r (NULL: max_tokens 0).  NULL, with e, when its receipt fails. */
static json_t *choice_json(const serve_ctx *sc, const serve_call *c, size_t p, size_t choice, const cis2_result *r,
                           serve_err *e)
{
    json_t *x = r ? serve_call_cis2(sc, c, choice, r, e) : prompt_only_cis2(sc, c, p);
    if (!x) return NULL;
    const cis2_score_result *s = serve_call_score(c, p);
    if (s) serve_lp_score_bits(x, s);
    if (c->score_receipt && c->score_text && c->score_text[p]) { /* the prompt's score receipt (ext-score-1) */
        uint8_t d[32];
        char h[65];
        json_object_set_new(x, "score_receipt", json_stringn(c->score_text[p], c->score_len[p]));
        cis2_sha256(c->score_text[p], c->score_len[p], d);
        cis2_hex(d, 32, h);
        json_object_set_new(x, "score_receipt_sha256", json_string(h));
    }
    size_t elen = 0;
    char *et = c->echo ? echo_text(sc, &c->prompts[p], &elen) : NULL;
    if (c->echo && !et) { json_decref(x); serve_fail(e, 500, NULL, NULL, "out of memory"); return NULL; }
    json_t *ch = json_object();
    json_object_set_new(ch, "index", json_integer((json_int_t)choice));
    serve_buf tb = {0};
    if (et) serve_buf_put(&tb, et, elen);
    if (r && r->text) serve_buf_put(&tb, r->text, r->text_len);
    const char *finish = r ? serve_finish_reason(r->finish) : "length";
    serve_parse *ps = NULL;
    json_t *text = NULL, *m = NULL;
    if (serve_call_parser(sc, c, choice, &ps)) goto oom;
    if (ps) { /* the answer's text read by the convention (docs/serving.md "Tool calls and reasoning") */
        if (serve_parse_feed(ps, tb.p ? tb.p : "", tb.n) || serve_parse_finish(ps) || !(m = serve_parse_message(ps)))
            goto oom;
        finish = serve_parse_finish_reason(ps, finish); /* a static string: outlives ps */
    } else {
        text = json_stringn(tb.p ? tb.p : "", tb.p ? tb.n : 0);
    }
    serve_buf_free(&tb);
    serve_parse_free(ps);
    ps = NULL;
    if (c->kind == CALL_CHAT) {
        if (!m) {
            m = json_object();
            json_object_set_new(m, "role", json_string("assistant"));
            json_object_set_new(m, "content", text);
        }
        json_object_set_new(m, "refusal", json_null());
        json_object_set_new(ch, "message", m);
    } else {
        json_object_set_new(ch, "text", text);
    }
    json_t *lp = choice_logprobs(sc, c, p, r, et ? cis2_utf8_chars(et, elen) : 0, e);
    free(et);
    if (!lp) { json_decref(ch); json_decref(x); return NULL; }
    json_object_set_new(ch, "logprobs", lp);
    json_object_set_new(ch, "finish_reason", json_string(finish));
    if (c->prompt_lp) json_object_set_new(ch, "prompt_logprobs", serve_lp_prompt_json(sc->e, s, c->prompt_lp_top));
    json_object_set_new(ch, "cis2", x);
    return ch;
oom:
    serve_parse_free(ps);
    serve_buf_free(&tb);
    free(et);
    json_decref(ch);
    json_decref(x);
    serve_fail(e, 500, NULL, NULL, "out of memory");
    return NULL;
}

/* The score receipts of the answer into the receipt log (one per scored
 * prompt, ID.pP.score.receipt), before the answer goes out. */
static int log_score_receipts(const serve_ctx *sc, const serve_call *c, serve_err *e)
{
    for (size_t p = 0; sc->rlog && c->score_text && p < c->n_prompts; p++) {
        char name[96];
        cis2_error err = {0};
        snprintf(name, sizeof name, "%s.p%zu.score.receipt", c->id, p);
        int st = serve_rlog_write(sc->rlog, name, c->score_text[p], c->score_len[p], &err);
        if (st == CIS2_E_IO) return serve_fail(e, 503, "receipt_log", NULL, "%s", err.msg);
        if (st) return serve_fail(e, 500, NULL, NULL, "%s", err.msg);
    }
    return 0;
}

json_t *serve_call_response(const serve_ctx *sc, serve_call *c, serve_err *e)
{
    serve_job *j = c->job;
    if (j && serve_job_error(j, e)) return NULL;
    if (log_score_receipts(sc, c, e)) return NULL;
    json_t *o = serve_call_envelope(sc, c, c->kind == CALL_CHAT ? "chat.completion" : "text_completion");
    json_t *choices = json_array();
    size_t n = j ? j->n : c->n_prompts * c->n_choices;
    for (size_t i = 0; i < n; i++) {
        json_t *ch = j ? choice_json(sc, c, j->seqs[i].prompt_idx, j->seqs[i].choice, j->seqs[i].res, e)
                       : choice_json(sc, c, i / c->n_choices, i, NULL, e);
        if (!ch) { json_decref(choices); json_decref(o); return NULL; }
        json_array_append_new(choices, ch);
    }
    json_object_set_new(o, "choices", choices);
    json_object_set_new(o, "usage", serve_call_usage(c, j));
    return o;
}
