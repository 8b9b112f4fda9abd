/*
 * serve_logprobs.c - logprobs in the OpenAI schemas (docs/serving.md
 * "Logprobs"), for whole responses and for streamed chunks.
 *
 * The library computes them (docs/sampling.md §S4: from the raw logits,
 * never used to choose, never in the witness); this module only renders
 * what a cis2_result or the token events carry:
 *
 *   completions  "logprobs": {"tokens": [...], "token_logprobs": [...],
 *                "top_logprobs": [{TOKEN: LOGPROB, ...}, ...],
 *                "text_offset": [...]}
 *   chat         "logprobs": {"content": [{"token", "logprob", "bytes",
 *                "top_logprobs": [{"token", "logprob", "bytes"}, ...]}, ...],
 *                "refusal": null}
 *
 * One entry per generated token, the token that triggered a stop rule
 * included (the receipt and generated_token_ids include it too; its text
 * is not in the completion).  A token's string is its raw bytes when they
 * are valid UTF-8, else OpenAI's `bytes:\xNN...` spelling; chat entries
 * also give the raw bytes.  text_offset counts Unicode code points from
 * the start of the choice's text (Python's str indexing), the position of
 * the first byte of the token, clipped to the text's length (a stop cuts
 * the text).  A completions top_logprobs object keeps the first of two
 * alternatives whose strings coincide.
 *
 * Decimals are not normative (§S4): a value is written as the double
 * equal to the binary32 (jansson's %.17g, so Math.fround / numpy.float32
 * of it gives the bits back), or null when it is not finite, and the
 * `cis2` object carries the bits themselves: `logprob_bits` (8 hex digits
 * per generated token) and, when alternatives were asked for,
 * `top_logprob_bits` ([{"id", "bits"}, ...] per token, candidate order).
 *
 * A scored prompt (echo, vLLM's prompt_logprobs; docs/sampling.md §S11)
 * is a cis2_score_result: its OpenAI span is rendered as above (the
 * unscored first token null, serve_response.c), vLLM's list here
 * (serve_lp_prompt_json), and its bits as `prompt_logprob_bits`,
 * `prompt_ranks`, `prompt_greedy`, `prompt_top_logprob_bits`.
 *
 * Who calls it: serve_response.c (whole choices) and serve_stream.c
 * (per chunk), on HTTP threads.  It calls no other server module; UTF-8
 * is decoded by the library's one decoder (cis2_utf8_unit, include/
 * cis2_toolkit.h section 5), so "valid" and a code point's bounds mean
 * here what they mean in the library's display text.
 */
#include "serve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static json_t *bits_json(float f)
{
    char h[9];
    snprintf(h, sizeof h, "%08x", (unsigned)f32_bits(f));
    return json_string(h);
}

static json_t *value_json(float f) { return isfinite(f) ? json_real((double)f) : json_null(); }

/* A token's raw bytes (cis2_free'd by the caller; NULL, 0 for none). */
static char *token_bytes(const cis2_engine *e, uint32_t id, size_t *len)
{
    char *b = NULL;
    *len = 0;
    if (cis2_engine_detokenize(e, &id, 1, 0, &b, len, NULL)) return NULL;
    return b;
}

/* The token's string: its bytes if they are valid UTF-8, else
 * "bytes:\xNN..." (OpenAI's spelling). */
static json_t *token_string(const char *b, size_t len)
{
    int ok = 1;
    for (size_t i = 0; i < len && ok;) {
        uint32_t cp;
        int v;
        i += cis2_utf8_unit((const unsigned char *)b + i, len - i, &cp, &v);
        ok = v == 1;
    }
    if (ok) return json_stringn(b ? b : "", len);
    char *s = malloc(6 + 4 * len + 1);
    if (!s) return json_string("");
    memcpy(s, "bytes:", 6);
    for (size_t i = 0; i < len; i++) snprintf(s + 6 + 4 * i, 5, "\\x%02x", (unsigned char)b[i]);
    json_t *j = json_stringn(s, 6 + 4 * len);
    free(s);
    return j;
}

static json_t *bytes_array(const char *b, size_t len)
{
    if (!len) return json_null();
    json_t *a = json_array();
    for (size_t i = 0; i < len; i++) json_array_append_new(a, json_integer((unsigned char)b[i]));
    return a;
}

/* One chat entry {token, logprob, bytes} (top_logprobs added by the caller). */
static json_t *chat_entry(const cis2_engine *e, uint32_t id, float lp)
{
    size_t len;
    char *b = token_bytes(e, id, &len);
    json_t *o = json_object();
    json_object_set_new(o, "token", token_string(b, len));
    json_object_set_new(o, "logprob", value_json(lp));
    json_object_set_new(o, "bytes", bytes_array(b, len));
    cis2_free(b);
    return o;
}

/* chat's {content: [entry...], refusal: null} */
static json_t *chat_json(const cis2_engine *e, const serve_lp_span *sp)
{
    json_t *o = json_object(), *content = json_array();
    for (size_t i = 0; i < sp->n; i++) {
        json_t *x = chat_entry(e, sp->ids[i], sp->lp[i]);
        json_t *top = json_array();
        for (size_t k = 0; k < sp->n_top; k++) {
            uint32_t id = sp->top_ids[i * sp->n_top + k];
            if (id != UINT32_MAX) json_array_append_new(top, chat_entry(e, id, sp->top_lp[i * sp->n_top + k]));
        }
        json_object_set_new(x, "top_logprobs", top);
        json_array_append_new(content, x);
    }
    json_object_set_new(o, "content", content);
    json_object_set_new(o, "refusal", json_null());
    return o;
}

/* The span's raw bytes, concatenated (*raw malloc'ed), and where each
 * token's start: starts[i] .. starts[i + 1] (calloc'ed, n + 1; NULL out of
 * memory). */
static size_t *span_bytes(const cis2_engine *e, const serve_lp_span *sp, char **raw, size_t *raw_len)
{
    size_t *starts = calloc(sp->n + 1, sizeof *starts);
    *raw = NULL;
    *raw_len = 0;
    for (size_t i = 0; i < sp->n && starts; i++) {
        size_t len;
        char *b = token_bytes(e, sp->ids[i], &len);
        char *np = len ? realloc(*raw, *raw_len + len) : *raw;
        if (np) {
            *raw = np;
            if (len) memcpy(*raw + *raw_len, b, len);
            *raw_len += len;
        }
        starts[i + 1] = *raw_len;
        cis2_free(b);
    }
    return starts;
}

/* A completions top_logprobs object {TOKEN: LOGPROB}: the first of two
 * alternatives whose strings coincide is kept. */
static json_t *top_object(const cis2_engine *e, const serve_lp_span *sp, size_t i)
{
    json_t *d = json_object();
    for (size_t t = 0; t < sp->n_top; t++) {
        uint32_t id = sp->top_ids[i * sp->n_top + t];
        if (id == UINT32_MAX) continue;
        size_t tl;
        char *tb = token_bytes(e, id, &tl);
        json_t *ks = token_string(tb, tl);
        cis2_free(tb);
        const char *key = json_string_value(ks);
        if (key && !json_object_get(d, key)) json_object_set_new(d, key, value_json(sp->top_lp[i * sp->n_top + t]));
        json_decref(ks);
    }
    return d;
}

/* completions' {tokens, token_logprobs, top_logprobs, text_offset}: the
 * span's raw bytes first, then one walk over their UTF-8 units (the
 * library's decoder, as its display text counts them): a token's offset
 * is the number of units (code points) that start before its first byte */
static json_t *completions_json(const cis2_engine *e, const serve_lp_span *sp)
{
    json_t *tokens = json_array(), *vals = json_array(), *tops = json_array(), *offs = json_array();
    char *raw;
    size_t raw_len, *starts = span_bytes(e, sp, &raw, &raw_len);
    size_t unit_pos = 0, units = 0;
    for (size_t i = 0; i < sp->n; i++) {
        size_t start = starts ? starts[i] : 0, len = starts ? starts[i + 1] - start : 0;
        while (unit_pos < start) {
            uint32_t cp;
            int v;
            unit_pos += cis2_utf8_unit((const unsigned char *)raw + unit_pos, raw_len - unit_pos, &cp, &v);
            units++;
        }
        size_t off = sp->base + units;
        if (off > sp->clip) off = sp->clip;
        json_array_append_new(offs, json_integer((json_int_t)off));
        json_array_append_new(tokens, token_string(raw ? raw + start : NULL, len));
        json_array_append_new(vals, value_json(sp->lp[i]));
        json_array_append_new(tops, top_object(e, sp, i));
    }
    free(raw);
    free(starts);
    json_t *o = json_object();
    json_object_set_new(o, "tokens", tokens);
    json_object_set_new(o, "token_logprobs", vals);
    json_object_set_new(o, "top_logprobs", tops);
    json_object_set_new(o, "text_offset", offs);
    return o;
}

json_t *serve_lp_json(const cis2_engine *e, int chat, const serve_lp_span *sp)
{
    return chat ? chat_json(e, sp) : completions_json(e, sp);
}

void serve_lp_bits(json_t *o, const cis2_result *r)
{
    if (!r->logprobs) return;
    json_t *a = json_array();
    for (size_t i = 0; i < r->n_tokens; i++) json_array_append_new(a, bits_json(r->logprobs[i]));
    json_object_set_new(o, "logprob_bits", a);
    if (!r->n_top) return;
    json_t *t = json_array();
    for (size_t i = 0; i < r->n_tokens; i++) {
        json_t *s = json_array();
        for (size_t k = 0; k < r->n_top; k++) {
            uint32_t id = r->top_ids[i * r->n_top + k];
            if (id == UINT32_MAX) continue;
            json_t *x = json_object();
            json_object_set_new(x, "id", json_integer(id));
            json_object_set_new(x, "bits", bits_json(r->top_logprobs[i * r->n_top + k]));
            json_array_append_new(s, x);
        }
        json_array_append_new(t, s);
    }
    json_object_set_new(o, "top_logprob_bits", t);
}

/* ------------------------------------------- scored prompts (§S11) */

/* One vLLM Logprob {logprob, rank, decoded_token} under key "ID". */
static void prompt_entry(const cis2_engine *e, json_t *d, uint32_t id, float lp, uint32_t rank)
{
    char key[16];
    snprintf(key, sizeof key, "%u", (unsigned)id);
    if (json_object_get(d, key)) return;
    size_t len;
    char *b = token_bytes(e, id, &len);
    json_t *x = json_object();
    json_object_set_new(x, "logprob", value_json(lp));
    json_object_set_new(x, "rank", rank ? json_integer(rank) : json_null());
    json_object_set_new(x, "decoded_token", token_string(b, len));
    cis2_free(b);
    json_object_set_new(d, key, x);
}

json_t *serve_lp_prompt_json(const cis2_engine *e, const cis2_score_result *s, size_t n_top)
{
    json_t *a = json_array();
    if (n_top > s->n_top) n_top = s->n_top;
    for (size_t i = 0; i < s->n_ids; i++) {
        if (i < s->first) { json_array_append_new(a, json_null()); continue; }
        json_t *d = json_object();
        prompt_entry(e, d, s->ids[i], s->logprobs[i], s->ranks[i]);
        for (size_t k = 0; k < n_top; k++) { /* candidate order: alternative k has rank k + 1 */
            uint32_t id = s->top_ids[i * s->n_top + k];
            if (id != UINT32_MAX) prompt_entry(e, d, id, s->top_logprobs[i * s->n_top + k], (uint32_t)(k + 1));
        }
        json_array_append_new(a, d);
    }
    return a;
}

void serve_lp_score_bits(json_t *o, const cis2_score_result *s)
{
    json_t *bits = json_array(), *ranks = json_array(), *greedy = json_array(), *top = json_array();
    for (size_t i = 0; i < s->n_ids; i++) {
        if (i < s->first) {
            json_array_append_new(bits, json_null());
            json_array_append_new(ranks, json_null());
            json_array_append_new(greedy, json_null());
            json_array_append_new(top, json_null());
            continue;
        }
        json_array_append_new(bits, bits_json(s->logprobs[i]));
        json_array_append_new(ranks, json_integer(s->ranks[i]));
        json_array_append_new(greedy, json_boolean(s->greedy[i]));
        json_t *t = json_array();
        for (size_t k = 0; k < s->n_top; k++) {
            uint32_t id = s->top_ids[i * s->n_top + k];
            if (id == UINT32_MAX) continue;
            json_t *x = json_object();
            json_object_set_new(x, "id", json_integer(id));
            json_object_set_new(x, "bits", bits_json(s->top_logprobs[i * s->n_top + k]));
            json_array_append_new(t, x);
        }
        json_array_append_new(top, t);
    }
    json_object_set_new(o, "prompt_logprob_bits", bits);
    json_object_set_new(o, "prompt_ranks", ranks);
    json_object_set_new(o, "prompt_greedy", greedy);
    if (s->n_top) json_object_set_new(o, "prompt_top_logprob_bits", top);
    else json_decref(top);
}
