/*
 * serve_stream.c - streamed responses (docs/serving.md "Streaming"):
 * server-sent events, `data: {chunk}` per event and `data: [DONE]` last,
 * OpenAI's `text_completion` / `chat.completion.chunk` objects carrying
 * each choice's text as its tokens arrive, their logprobs
 * (serve_logprobs.c, per chunk), the finishing chunk with finish_reason
 * and the `cis2` object (serve_response.c), and with include_usage a last
 * chunk with usage.
 *
 * A stream sends a token's text once nothing can still change it: bytes
 * that are a proper prefix of some stop string wait (docs/sampling.md
 * §S5.3, §S5.4: the library may cut them), and so does an incomplete
 * UTF-8 sequence (decided by the library's decoder, cis2_utf8_unit, so
 * "valid" means what the library's display text means); the finishing
 * token waits for the result, whose text is the truth (the streamed text
 * is always a prefix of it).  A chat answer on a server with a tool or
 * reasoning convention goes through its choice's parser (serve_parse.c,
 * docs/serving.md "Tool calls and reasoning"): the text a stream would
 * send is fed to it, each chunk's delta holds what it releases, and the
 * logprobs of the tokens released ride with them, in an empty delta when
 * the parser holds their text back.
 *
 * Who calls it: serve_http.c, on the HTTP thread of a streaming request:
 * serve_sse_collect under the engine lock (copies what arrived),
 * serve_sse_format outside it (renders).  It calls serve_err.c,
 * serve_response.c, serve_logprobs.c, serve_parse.c and serve_buf.c.
 */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- state */

typedef struct sse_seq {
    uint32_t *ids;             /* every token so far (copied under the lock) */
    size_t n_ids;
    float *lp;                 /* and their logprobs, when asked (copied too) */
    uint32_t *top_ids;
    float *top_lp;
    int finishing;             /* the last token ended it (copied under the lock) */
    size_t clean;              /* ids[0..clean) are sent as text */
    serve_buf raw;             /* the raw bytes of ids[clean..clean+n_known) */
    size_t *ends;              /* ends[k]: raw bytes of ids[clean..clean+k+1), k < n_known */
    size_t n_known, ends_cap;
    serve_buf sent;            /* the text sent so far */
    size_t sent_chars;         /* its code points (the text goes out in whole UTF-8 units) */
    int ended;                 /* the sequence's result is there */
    int final_sent, role_sent;
    serve_parse *parse;        /* chat with a convention: the text released goes through it
                                * (docs/serving.md "Tool calls and reasoning"), else NULL */
} sse_seq;

struct serve_sse {
    const serve_ctx *sc;
    serve_call *c;
    sse_seq *s;
    size_t n;
    int failed, done_sent, usage_sent, admitted;
    serve_err err;             /* why it failed (taken under the lock) */
};

serve_sse *serve_sse_new(const serve_ctx *sc, serve_call *c)
{
    serve_sse *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->sc = sc;
    s->c = c;
    s->n = c->job->n;
    s->s = calloc(s->n, sizeof *s->s);
    if (!s->s) { free(s); return NULL; }
    size_t nt = c->top_logprobs;
    for (size_t i = 0; i < s->n; i++) {
        sse_seq *t = &s->s[i];
        if (!(t->ids = malloc(c->max_tokens * sizeof(uint32_t)))) { serve_sse_free(s); return NULL; }
        if (c->logprobs && (!(t->lp = malloc(c->max_tokens * sizeof(float))) ||
                            !(t->top_ids = malloc((nt ? nt * c->max_tokens : 1) * sizeof(uint32_t))) ||
                            !(t->top_lp = malloc((nt ? nt * c->max_tokens : 1) * sizeof(float))))) {
            serve_sse_free(s);
            return NULL;
        }
        if (serve_call_parser(sc, c, c->job->seqs[i].choice, &t->parse)) { serve_sse_free(s); return NULL; }
    }
    return s;
}

void serve_sse_free(serve_sse *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->s[i].ids);
        free(s->s[i].lp);
        free(s->s[i].top_ids);
        free(s->s[i].top_lp);
        serve_buf_free(&s->s[i].raw);
        free(s->s[i].ends);
        serve_buf_free(&s->s[i].sent);
        serve_parse_free(s->s[i].parse);
    }
    free(s->s);
    free(s);
}

/* Under the engine lock: the tokens (and logprobs) that arrived since the
 * last call; 1 if there were any. */
static int copy_tokens(sse_seq *t, const serve_seq *q)
{
    if (q->n_toks <= t->n_ids) return 0;
    size_t a = t->n_ids, k = q->n_toks - a, nt = q->top_n;
    memcpy(t->ids + a, q->toks + a, k * sizeof(uint32_t));
    if (t->lp && q->lp) {
        memcpy(t->lp + a, q->lp + a, k * sizeof(float));
        if (nt) {
            memcpy(t->top_ids + a * nt, q->top_ids + a * nt, k * nt * sizeof(uint32_t));
            memcpy(t->top_lp + a * nt, q->top_lp + a * nt, k * nt * sizeof(float));
        }
    }
    t->n_ids = q->n_toks;
    return 1;
}

int serve_sse_collect(serve_sse *s)
{
    serve_job *j = s->c->job;
    int changed = 0;
    if (!s->failed && (j->state == JOB_FAILED || j->shutdown_cancel)) {
        s->failed = 1;
        if (!serve_job_error(j, &s->err)) serve_fail(&s->err, 500, NULL, NULL, "the request failed");
        changed = 1;
    }
    if (!s->admitted && j->state != JOB_NEW) {
        s->admitted = 1;
        changed = 1;
    }
    for (size_t i = 0; i < s->n; i++) {
        serve_seq *q = &j->seqs[i];
        sse_seq *t = &s->s[i];
        changed |= copy_tokens(t, q);
        t->finishing = q->finish != 0;
        if (q->taken && !t->ended) {
            t->ended = 1;
            changed = 1;
        }
    }
    return changed;
}

/* ------------------------------------------------------------ events */

/* One server-sent event carrying o (consumed). */
static int emit(serve_buf *out, json_t *o)
{
    char *js = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!js) return -1;
    serve_buf_str(out, "data: ");
    serve_buf_str(out, js);
    serve_buf_str(out, "\n\n");
    free(js);
    return out->oom ? -1 : 0;
}

/* A chunk for one choice: text (may be NULL), finish reason, cis2.  A
 * chat chunk's delta is {role?, content: text} or, when delta is given
 * (consumed; text then unused), that object: a parsed answer's fields. */
static json_t *chunk(const serve_sse *s, size_t i, const char *text, size_t tlen, int role, const char *finish,
                     json_t *cis2, json_t *lp, json_t *delta)
{
    int chat = s->c->kind == CALL_CHAT;
    json_t *o = serve_call_envelope(s->sc, s->c, chat ? "chat.completion.chunk" : "text_completion");
    json_t *ch = json_object();
    json_object_set_new(ch, "index", json_integer((json_int_t)s->c->job->seqs[i].choice));
    if (chat) {
        json_t *d = delta ? delta : json_object();
        if (role) json_object_set_new(d, "role", json_string("assistant"));
        if (text && !delta) json_object_set_new(d, "content", json_stringn(text, tlen));
        json_object_set_new(ch, "delta", d);
    } else {
        json_object_set_new(ch, "text", json_stringn(text ? text : "", text ? tlen : 0));
    }
    json_object_set_new(ch, "logprobs", lp ? lp : json_null());
    json_object_set_new(ch, "finish_reason", finish ? json_string(finish) : json_null());
    if (cis2) json_object_set_new(ch, "cis2", cis2);
    json_t *a = json_array();
    json_array_append_new(a, ch);
    json_object_set_new(o, "choices", a);
    if (s->c->include_usage) json_object_set_new(o, "usage", json_null());
    return o;
}

/* ----------------------------------------------------- what can be sent */

/* Where the bytes' last UTF-8 unit starts if it is a valid sequence cut
 * short by the end (more bytes could complete it), else n. */
static size_t incomplete_tail(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int v;
        size_t u = cis2_utf8_unit(s + i, n - i, &cp, &v);
        if (v < 0) return i;
        i += u;
    }
    return n;
}

/* Where bytes that may still begin a stop string start: the earliest j
 * such that raw[j..n) is a proper prefix of some stop string (n: none).
 * An occurrence that a later token completes starts there or later, so
 * raw[0..j) can never be cut (docs/sampling.md §S5.3, §S5.4). */
static size_t stop_hold(const serve_call *c, const char *raw, size_t n)
{
    if (!c->max_stop_len) return n;
    for (size_t j = n >= c->max_stop_len ? n - c->max_stop_len + 1 : 0; j < n; j++)
        for (size_t i = 0; i < c->n_stop_str; i++)
            if (c->stop_len[i] > n - j && !memcmp(raw + j, c->stop_str[i], n - j)) return j;
    return n;
}

/* raw[0..n) as display text, the rule of the result's text (cis2.h
 * cis2_result.text): each valid UTF-8 unit as it is, each maximal invalid
 * subpart U+FFFD, by the library's decoder (cis2_utf8_unit).  malloc'ed. */
static char *lossy(const char *raw, size_t n, size_t *len)
{
    char *o = malloc(3 * n + 1);
    size_t k = 0;
    if (!o) return NULL;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int v;
        size_t u = cis2_utf8_unit((const unsigned char *)raw + i, n - i, &cp, &v);
        if (v > 0) memcpy(o + k, raw + i, u), k += u;
        else memcpy(o + k, "\xEF\xBF\xBD", 3), k += 3;
        i += u;
    }
    o[k] = 0;
    *len = k;
    return o;
}

/* Appends the raw bytes of the tokens that arrived to t->raw, noting
 * where each ends. */
static int learn_tokens(const cis2_engine *e, sse_seq *t)
{
    while (t->clean + t->n_known < t->n_ids) {
        char *b = NULL;
        size_t l = 0;
        if (cis2_engine_detokenize(e, &t->ids[t->clean + t->n_known], 1, 0, &b, &l, NULL)) return -1;
        if (t->n_known + 1 > t->ends_cap) {
            size_t nc = t->ends_cap ? 2 * t->ends_cap : 64;
            size_t *ne = realloc(t->ends, nc * sizeof *ne);
            if (!ne) { cis2_free(b); return -1; }
            t->ends = ne;
            t->ends_cap = nc;
        }
        serve_buf_put(&t->raw, b, l);
        cis2_free(b);
        if (t->raw.oom) return -1;
        t->ends[t->n_known++] = t->raw.n;
    }
    return 0;
}

/* The text of the tokens that can be shown now: every new token's raw
 * bytes are appended (learn_tokens); the longest token prefix that ends
 * on a complete UTF-8 sequence and before any bytes that may begin a stop
 * string (stop_hold) is sent as the result's text is made: its raw bytes,
 * U+FFFD for each maximal invalid subpart (lossy; never changes at such a
 * boundary), not a tokenizer decoder's text (SentencePiece's would strip
 * the first space of every piece).  *from and
 * *k: the tokens sent (ids[*from..*from+*k)); *base: the code points sent
 * before them. */
static int stream_text(serve_sse *s, sse_seq *t, char **out, size_t *olen, size_t *from, size_t *k_out,
                       size_t *base)
{
    *out = NULL;
    *olen = 0;
    *from = t->clean;
    *k_out = 0;
    *base = t->sent_chars;
    const cis2_engine *e = s->sc->e;
    if (learn_tokens(e, t)) return -1;
    size_t limit = incomplete_tail((const unsigned char *)t->raw.p, t->raw.n);
    size_t h = stop_hold(s->c, t->raw.p, t->raw.n);
    if (h < limit) limit = h;
    size_t k = 0;
    while (k < t->n_known && t->ends[k] <= limit) k++;
    if (k == 0) return 0;
    size_t cut = t->ends[k - 1];
    size_t tl = 0;
    char *txt = lossy(t->raw.p, cut, &tl);
    if (!txt) return -1;
    serve_buf_put(&t->sent, txt, tl);
    if (t->sent.oom) { free(txt); return -1; }
    t->sent_chars += cis2_utf8_chars(txt, tl);
    serve_buf_cut(&t->raw, cut);
    for (size_t m = k; m < t->n_known; m++) t->ends[m - k] = t->ends[m] - cut;
    t->n_known -= k;
    t->clean += k;
    *out = txt;
    *olen = tl;
    *k_out = k;
    return 0;
}

/* The logprobs object of tokens [from, from + k) of a stream (NULL when
 * not asked): from the copies of the events, or from the result. */
static json_t *span_logprobs(const serve_sse *s, const sse_seq *t, const cis2_result *r, size_t from, size_t k,
                             size_t base, size_t clip)
{
    const serve_call *c = s->c;
    if (!c->logprobs || k == 0) return NULL;
    size_t nt = c->top_logprobs;
    serve_lp_span sp = {.n_top = nt, .n = k, .base = base, .clip = clip};
    if (r) {
        if (!r->logprobs) return NULL;
        sp.ids = r->tokens + from;
        sp.lp = r->logprobs + from;
        sp.top_ids = r->top_ids ? r->top_ids + from * r->n_top : NULL;
        sp.top_lp = r->top_logprobs ? r->top_logprobs + from * r->n_top : NULL;
        sp.n_top = r->n_top;
    } else {
        sp.ids = t->ids + from;
        sp.lp = t->lp + from;
        sp.top_ids = t->top_ids + from * nt;
        sp.top_lp = t->top_lp + from * nt;
    }
    return serve_lp_json(s->sc->e, c->kind == CALL_CHAT, &sp);
}


/* ------------------------------------------------------------ rendering */

/* The stream's last event: an error (s->err, or e), then no [DONE]. */
static int format_error(serve_sse *s, const serve_err *e, serve_buf *out, int *done)
{
    if (emit(out, serve_err_json(e))) return -1;
    s->done_sent = 1;
    *done = 1;
    return 0;
}

/* A parsed answer (t->parse): text[0..n) fed to the parser (finish: its
 * last piece), and the delta object of what the parser released, in
 * *delta (NULL: nothing).  0, or -1 when memory ran out. */
static int parse_piece(sse_seq *t, const char *text, size_t n, int finish, json_t **delta)
{
    *delta = NULL;
    if (n && serve_parse_feed(t->parse, text, n)) return -1;
    if (finish && serve_parse_finish(t->parse)) return -1;
    size_t nd = 0;
    const serve_parse_delta *d = serve_parse_take(t->parse, &nd);
    if (!d) return -1;
    if (nd && !(*delta = serve_parse_delta_json(d, nd))) return -1;
    return 0;
}

/* A running sequence: the text (and logprobs) that can be sent now.  A
 * parsed answer sends what its parser releases; the logprobs of the
 * tokens the stream released go out at once, in a chunk with an empty
 * delta when the parser holds their text back (docs/serving.md "Tool
 * calls and reasoning", In the server). */
static int format_running(serve_sse *s, size_t i, sse_seq *t, serve_buf *out)
{
    if (t->finishing) return 0; /* its last token may be cut (a stop rule): wait for the result */
    char *txt = NULL;
    size_t tl = 0, from, k, base;
    json_t *delta = NULL;
    if (stream_text(s, t, &txt, &tl, &from, &k, &base)) return -1;
    if (t->parse && parse_piece(t, txt, tl, 0, &delta)) { free(txt); return -1; }
    json_t *lp = span_logprobs(s, t, NULL, from, k, base, SIZE_MAX);
    int rc = 0;
    if (t->parse ? delta || lp : tl || lp) {
        if (t->parse && !delta) delta = json_object(); /* logprobs whose text waits */
        rc = emit(out, chunk(s, i, txt, tl, 0, NULL, NULL, lp, delta)) ? -1 : 0;
    } else {
        json_decref(delta);
    }
    free(txt);
    return rc;
}

/* An ended sequence: the rest of the result's text with the logprobs of
 * the tokens not sent yet (the finishing one among them), then the
 * finishing chunk.  1 when the stream ended with an error instead. */
static int format_ended(serve_sse *s, size_t i, sse_seq *t, serve_buf *out, int *done)
{
    const cis2_result *r = s->c->job->seqs[i].res;
    if (!r || r->finish == CIS2_FINISH_CANCELLED) {
        s->failed = 1;
        serve_fail(&s->err, 503, "cancelled", NULL, "the request was cancelled");
        return format_error(s, &s->err, out, done) ? -1 : 1;
    }
    size_t rl = r->text ? r->text_len : 0, rest = 0;
    if (t->sent.n <= rl && !memcmp(r->text ? r->text : "", t->sent.p ? t->sent.p : "", t->sent.n))
        rest = rl - t->sent.n;
    else
        fprintf(stderr, "cis2 serve: %s: streamed text is not a prefix of the result's text\n", s->c->id);
    size_t from = t->clean < r->n_tokens ? t->clean : r->n_tokens;
    json_t *delta = NULL;
    if (t->parse && parse_piece(t, rest ? r->text + t->sent.n : "", rest, 1, &delta)) return -1;
    json_t *lp = span_logprobs(s, t, r, from, r->n_tokens - from, t->sent_chars,
                               cis2_utf8_chars(r->text ? r->text : "", rl));
    if (t->parse ? delta || lp : rest || lp) {
        if (t->parse && !delta) delta = json_object();
        if (emit(out, chunk(s, i, rest ? r->text + t->sent.n : "", rest, 0, NULL, NULL, lp, delta))) return -1;
    }
    serve_err e = {0};
    json_t *x = serve_call_cis2(s->sc, s->c, s->c->job->seqs[i].choice, r, &e);
    if (!x) return format_error(s, &e, out, done) ? -1 : 1;
    int chat = s->c->kind == CALL_CHAT;
    const char *finish = serve_finish_reason(r->finish);
    if (t->parse) finish = serve_parse_finish_reason(t->parse, finish); /* "tool_calls" when it made calls */
    if (emit(out, chunk(s, i, chat ? NULL : "", 0, 0, finish, x, NULL, NULL))) return -1;
    t->final_sent = 1;
    return 0;
}

/* Every choice finished: the usage chunk (when asked) and [DONE]. */
static int format_done(serve_sse *s, serve_buf *out, int *done)
{
    if (s->c->include_usage && !s->usage_sent) {
        const char *object = s->c->kind == CALL_CHAT ? "chat.completion.chunk" : "text_completion";
        json_t *o = serve_call_envelope(s->sc, s->c, object);
        json_object_set_new(o, "choices", json_array());
        json_object_set_new(o, "usage", serve_call_usage(s->c, s->c->job));
        if (emit(out, o)) return -1;
        s->usage_sent = 1;
    }
    serve_buf_str(out, "data: [DONE]\n\n");
    if (out->oom) return -1;
    s->done_sent = 1;
    *done = 1;
    return 0;
}

int serve_sse_format(serve_sse *s, serve_buf *out, int *done)
{
    *done = 0;
    if (s->done_sent) { *done = 1; return 0; }
    if (s->failed) {
        if (!s->err.status) serve_fail(&s->err, 500, NULL, NULL, "the request failed");
        return format_error(s, &s->err, out, done);
    }
    int all = 1;
    for (size_t i = 0; i < s->n; i++) {
        sse_seq *t = &s->s[i];
        if (s->c->kind == CALL_CHAT && !t->role_sent && s->admitted) {
            if (emit(out, chunk(s, i, "", 0, 1, NULL, NULL, NULL, NULL))) return -1;
            t->role_sent = 1;
        }
        if (t->final_sent) continue;
        if (!t->ended) {
            all = 0;
            if (format_running(s, i, t, out)) return -1;
            continue;
        }
        int rc = format_ended(s, i, t, out, done);
        if (rc) return rc < 0 ? -1 : 0;
    }
    return all ? format_done(s, out, done) : 0;
}
