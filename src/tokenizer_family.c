/*
 * tokenizer_family.c - NON-NORMATIVE: the tokenizer.json components of the
 * model families beyond SmolLM2's shape (docs/tokenizer.md "Which
 * tokenizers"; outside CIS-2 v0.3b §3, admitted by default), exact to
 * Hugging Face `tokenizers` 0.23.2 on the real files of Llama-3, Qwen3,
 * Llama-2 (Mistral, TinyLlama) and Gemma-3:
 *   - normalizers NFC, Prepend, Replace (literal pattern) and Sequence of
 *     them, applied to each piece between the normalized=false added
 *     tokens and to the normalized=true tokens' contents (tokfam_normalize);
 *     what they can make of a text is bounded at load (norm_bounds,
 *     docs/tokenizer.md "Normalizers");
 *   - SentencePiece-style BPE (no ByteLevel): model.byte_fallback,
 *     unk_token, fuse_unk (the symbols are built in tokenizer.c);
 *   - the decoder Sequence [Replace("▁", " "), ByteFallback, Fuse,
 *     Strip(" ", n, 0)] (tokfam_build_sp_decode, called at load: the
 *     per-id text tokenizer.c decodes with);
 *   - the post-processor TemplateProcessing (also inside a Sequence after
 *     ByteLevel): the ids of the single template around the text, which
 *     encode adds with CIS2_TOK_ADD_SPECIAL (add_special_tokens=True).
 * Anything else in those keys is refused naming the file and the key
 * (CIS2_E_UNSUPPORTED, exit 5).  The Split pre-tokenizers are pretok.c;
 * loading the rest of the file is tokenizer_load.c, which calls the
 * tokfam_* functions here; they add strings to the tokenizer's arena with
 * tokenizer_impl.h's tok_arena_add and call back into no other file.
 */
#include "tokenizer_impl.h"
#include "nfc.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *type_of(json_t *o)
{
    json_t *v = json_is_object(o) ? json_object_get(o, "type") : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static char *dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) { memcpy(d, s, n); d[n] = 0; }
    return d;
}

/* A {"String": "..."} pattern (Replace, Split); NULL if it is not one. */
static json_t *string_pattern(json_t *o)
{
    json_t *p = json_object_get(o, "pattern");
    json_t *s = json_is_object(p) && json_object_size(p) == 1 ? json_object_get(p, "String") : NULL;
    return json_is_string(s) && json_string_length(s) > 0 ? s : NULL;
}

/* ---- normalizer ---- */
static int norm_step_load(cis2_tokenizer *t, json_t *o, const char *path, cis2_error *err)
{
    const char *ty = type_of(o);
    if (!ty) return cis2_fail(err, CIS2_E_FORMAT, "%s: normalizer has no type", path);
    if (t->nnorm == CIS2_TOK_MAX_NORM)
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: normalizer Sequence has more than %d steps", path,
                         CIS2_TOK_MAX_NORM);
    norm_step *st = &t->norm[t->nnorm];
    if (!strcmp(ty, "NFC") && json_object_size(o) == 1) {
        st->kind = NORM_NFC;
        t->nfc = 1;
    } else if (!strcmp(ty, "Prepend")) {
        json_t *p = json_object_get(o, "prepend");
        if (!json_is_string(p)) return cis2_fail(err, CIS2_E_FORMAT, "%s: normalizer Prepend lacks prepend", path);
        st->kind = NORM_PREPEND;
        st->al = json_string_length(p);
        if (!(st->a = dupn(json_string_value(p), st->al))) return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
    } else if (!strcmp(ty, "Replace")) {
        json_t *pat = string_pattern(o), *c = json_object_get(o, "content");
        if (!pat || !json_is_string(c))
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: normalizer Replace is supported only with a "
                             "{\"String\": ...} pattern and a content string", path);
        st->kind = NORM_REPLACE;
        st->al = json_string_length(pat);
        st->bl = json_string_length(c);
        st->a = dupn(json_string_value(pat), st->al);
        st->b = dupn(json_string_value(c), st->bl);
        st->kmp = st->al <= UINT32_MAX ? malloc(st->al * sizeof *st->kmp) : NULL;
        if (!st->a || !st->b || !st->kmp) { t->nnorm++; return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path); }
        /* the pattern's failure function: Replace runs in O(text + pattern) */
        st->kmp[0] = 0;
        for (size_t q = 1, k = 0; q < st->al; q++) {
            while (k && st->a[q] != st->a[k]) k = st->kmp[k - 1];
            if (st->a[q] == st->a[k]) k++;
            st->kmp[q] = (uint32_t)k;
        }
    } else {
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: normalizer %s is not supported (cis2 implements none, "
                         "and with --tokenizer-ext NFC, Prepend, Replace and Sequence of them)", path, ty);
    }
    t->nnorm++;
    return CIS2_OK;
}

/* tokenizer.md "Normalizers": how much longer (and shorter) the steps can
 * make a text.  A piece of n bytes becomes at most F*n + C bytes: Prepend
 * adds its bytes (C += al), a Replace multiplies by ceil(bl / al) when its
 * content is the longer (F and C both), NFC by 3 (Unicode's bound for
 * UTF-8).  The pieces normalized are never empty, so that is at most
 * (F + C)*n: over CIS2_TOK_MAX_NORM_GROWTH the file is refused, before
 * any text (a Replace of "a" by 1,000 bytes, chained, made 7 bytes of
 * input take 57 s and 1 GB).  The lower bound (a Replace to a shorter
 * content divides by al / bl, NFC by 4 at most; an empty content: none)
 * lets encode_max refuse a piece too long for the context before
 * normalizing it. */
static int norm_bounds(cis2_tokenizer *t, const char *path, cis2_error *err)
{
    const size_t lim = CIS2_TOK_MAX_NORM_GROWTH, cap = (size_t)1 << 20;
    size_t f = 1, c = 0, lo_num = 1, lo_den = 1;
    char why[160] = "";
    for (int i = 0; i < t->nnorm; i++) {
        const norm_step *st = &t->norm[i];
        size_t r = 1;
        if (st->kind == NORM_PREPEND) c += st->al < cap ? st->al : cap;
        else if (st->kind == NORM_NFC) { r = 3; lo_den *= 4; }
        else if (st->bl > st->al) r = (st->bl + st->al - 1) / st->al;
        else if (st->bl == 0) lo_num = 0;
        else { lo_num *= st->bl; lo_den *= st->al; }
        if (r > cap) r = cap;
        f *= r; c *= r;                        /* each <= 2^20 before: no overflow */
        if (f > cap) f = cap;
        if (c > cap) c = cap;
        if (lo_den > cap || lo_num > cap) lo_num = 0;   /* too small to be of use */
        if (r > 1 && st->kind == NORM_REPLACE && !why[0])
            snprintf(why, sizeof why, " (Replace of %zu bytes by %zu)", st->al, st->bl);
    }
    if (f + c > lim)
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: normalizer can make a text %s %zu times longer%s, more than "
                         "cis2's limit of %zu", path, f + c >= cap ? "more than" : "up to", f + c >= cap ? cap : f + c,
                         why, lim);
    t->norm_f = f; t->norm_c = c;
    t->norm_lo_num = lo_num; t->norm_lo_den = lo_num ? lo_den : 1;
    return CIS2_OK;
}

int tokfam_normalizer(cis2_tokenizer *t, json_t *v, const char *path, cis2_error *err)
{
    if (strcmp(type_of(v), "Sequence")) {
        int rc = norm_step_load(t, v, path, err);
        return rc ? rc : norm_bounds(t, path, err);
    }
    json_t *list = json_object_get(v, "normalizers");
    if (!json_is_array(list))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: normalizer Sequence lacks the normalizers array", path);
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *e = json_array_get(list, i);
        if (type_of(e) && !strcmp(type_of(e), "Sequence"))
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: normalizer Sequence inside a Sequence is not supported", path);
        int rc = norm_step_load(t, e, path, err);
        if (rc) return rc;
    }
    return norm_bounds(t, path, err);
}

/* Replace: every non-overlapping occurrence of st->a in s (leftmost
 * first, as the reference's find_iter) by st->b, into o; o NULL: only the
 * length.  Knuth-Morris-Pratt, the state reset after each match: linear
 * in n + al whatever the pattern (a memcmp at each byte was n * al). */
static size_t kmp_replace(const norm_step *st, const char *s, size_t n, char *o, size_t *nmatch)
{
    size_t q = 0, k = 0, last = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        while (q && s[i] != st->a[q]) q = st->kmp[q - 1];
        if (s[i] == st->a[q]) q++;
        if (q < st->al) continue;
        size_t start = i + 1 - st->al;
        if (o) { memcpy(o + k, s + last, start - last); memcpy(o + k + (start - last), st->b, st->bl); }
        k += start - last + st->bl;
        last = i + 1;
        q = 0;
        m++;
    }
    if (o && n > last) memcpy(o + k, s + last, n - last);
    *nmatch = m;
    return k + (n - last);
}

int tokfam_normalize(const cis2_tokenizer *t, const char *s, size_t n, char **out, size_t *on)
{
    char *cur = NULL;                     /* owned; NULL: s itself */
    size_t cn = n;
    *out = NULL; *on = n;
    for (int i = 0; i < t->nnorm; i++) {
        const norm_step *st = &t->norm[i];
        const char *in = cur ? cur : s;
        char *nx = NULL;
        size_t nn = cn;
        if (st->kind == NORM_NFC) {
            if (cis2_nfc(in, cn, &nx, &nn)) { free(cur); return -1; }
            if (!nx) continue;            /* already NFC */
        } else if (st->kind == NORM_PREPEND) {
            if (cn == 0) continue;        /* the reference prepends to non-empty text only */
            if (!(nx = malloc(st->al + cn + 1))) { free(cur); return -1; }
            memcpy(nx, st->a, st->al); memcpy(nx + st->al, in, cn);
            nn = st->al + cn;
        } else {
            size_t nm;
            nn = kmp_replace(st, in, cn, NULL, &nm);
            if (!nm) continue;
            if (!(nx = malloc(nn + 1))) { free(cur); return -1; }
            kmp_replace(st, in, cn, nx, &nm);
        }
        free(cur);
        cur = nx; cn = nn;
    }
    *out = cur; *on = cn;
    return 0;
}

/* ---- decoder: Sequence [Replace("▁", " "), ByteFallback, Fuse, Strip(" ", n, 0)?] ---- */
int tokfam_decoder_sp(cis2_tokenizer *t, json_t *v, const char *path, cis2_error *err)
{
    json_t *list = json_object_get(v, "decoders");
    size_t n = json_is_array(list) ? json_array_size(list) : 0;
    int ok = n == 3 || n == 4;
    for (size_t i = 0; ok && i < n; i++) {
        json_t *e = json_array_get(list, i);
        const char *ty = type_of(e);
        if (!ty) { ok = 0; break; }
        if (i == 0) {
            json_t *pat = string_pattern(e), *c = json_object_get(e, "content");
            ok = !strcmp(ty, "Replace") && pat && !strcmp(json_string_value(pat), "\xe2\x96\x81") &&
                 json_is_string(c) && !strcmp(json_string_value(c), " ") && json_string_length(c) == 1;
        } else if (i == 1) ok = !strcmp(ty, "ByteFallback");
        else if (i == 2) ok = !strcmp(ty, "Fuse");
        else {
            json_t *c = json_object_get(e, "content"), *a = json_object_get(e, "start"), *b = json_object_get(e, "stop");
            ok = !strcmp(ty, "Strip") && json_is_string(c) && !strcmp(json_string_value(c), " ") &&
                 json_is_integer(a) && json_integer_value(a) >= 0 && json_integer_value(a) <= 64 &&
                 json_is_integer(b) && json_integer_value(b) == 0;
            if (ok) t->strip_start = (int)json_integer_value(a);
        }
    }
    if (!ok)
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: decoder Sequence is supported only as [Replace(\"\xe2\x96\x81\", "
                         "\" \"), ByteFallback, Fuse, Strip(\" \", n, 0)] (SentencePiece-style BPE)", path);
    return CIS2_OK;
}

/* "<0xXX>" -> XX, as the reference's ByteFallback decoder reads it (a token
 * of 6 bytes, "<0x" + 2 characters Rust's u8::from_str_radix(_, 16) takes
 * (an optional '+' then hex digits) + ">"); -1 otherwise. */
static int byte_token(const char *s, size_t len)
{
    if (len != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return -1;
    int v = 0, digits = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) {
            if (i == 3 && c == '+') continue;
            return -1;
        }
        v = v * 16 + d;
        digits++;
    }
    return digits ? v : -1;
}

/* Per-id decode text for SentencePiece-style BPE: the token with every "▁"
 * replaced by " " (the Replace decoder), and byte_val for "<0xXX>" tokens
 * (ByteFallback).  Added tokens go through the decoder too, as there. */
static int sp_decode_one(cis2_tokenizer *t, const char *s, size_t len, uint32_t id)
{
    size_t on = 0;
    char *r = malloc(len + 1);
    if (!r) return -1;
    for (size_t i = 0; i < len;)
        if (i + 3 <= len && !memcmp(s + i, "\xe2\x96\x81", 3)) { r[on++] = ' '; i += 3; }
        else r[on++] = s[i++];
    r[on] = 0;
    uint32_t off;
    int rc = tok_arena_add(t, r, on, &off);
    if (!rc) {
        t->dec_off[id] = off; t->dec_len[id] = (uint32_t)on;
        t->byte_val[id] = (int16_t)byte_token(r, on);
    }
    free(r);
    return rc;
}

int tokfam_build_sp_decode(cis2_tokenizer *t, const char *path, cis2_error *err)
{
    size_t n = t->nids ? t->nids : 1;
    t->dec_off = malloc(n * sizeof *t->dec_off);
    t->dec_len = malloc(n * sizeof *t->dec_len);
    t->byte_val = malloc(n * sizeof *t->byte_val);
    if (!t->dec_off || !t->dec_len || !t->byte_val) return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < t->nids; i++) { t->dec_len[i] = UINT32_MAX; t->byte_val[i] = -1; }
    int bad = 0;
    for (size_t i = 0; i < t->vcap && !bad; i++) {
        vslot v = t->vocab[i];
        if (v.id == UINT32_MAX) continue;
        char *copy = dupn(t->arena + v.off, v.len);   /* the arena may move */
        bad = !copy || sp_decode_one(t, copy, v.len, v.id);
        free(copy);
        if (v.len > t->max_tok_bytes) t->max_tok_bytes = v.len;  /* input bytes one token covers */
    }
    for (size_t i = 0; i < t->nadded && !bad; i++) {   /* a normalized token: its normalized content, as there */
        size_t l;
        const char *p = added_pat(&t->added[i], t->added[i].normalized, &l);
        bad = sp_decode_one(t, p, l, t->added[i].id);
    }
    if (bad) return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
    return CIS2_OK;
}

/* ---- post_processor: ByteLevel (adds nothing), TemplateProcessing, or a
 * Sequence of them ---- */
static int ids_of_special(json_t *specials, const char *name, uint32_t **v, size_t *n, const char *path,
                          cis2_error *err)
{
    json_t *e = json_object_get(specials, name), *ids = json_object_get(e, "ids");
    if (!json_is_array(ids))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: post_processor TemplateProcessing names special token \"%.40s\" "
                         "that special_tokens lacks", path, name);
    for (size_t i = 0; i < json_array_size(ids); i++) {
        json_t *x = json_array_get(ids, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= (1 << 24))
            return cis2_fail(err, CIS2_E_FORMAT, "%s: post_processor special_tokens \"%.40s\" has an invalid id",
                             path, name);
        uint32_t *nv = realloc(*v, (*n + 1) * sizeof *nv);
        if (!nv) return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
        *v = nv;
        nv[(*n)++] = (uint32_t)json_integer_value(x);
    }
    return CIS2_OK;
}

static int load_template(cis2_tokenizer *t, json_t *o, const char *path, cis2_error *err)
{
    json_t *single = json_object_get(o, "single"), *specials = json_object_get(o, "special_tokens");
    if (!json_is_array(single) || !json_is_object(specials))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: post_processor TemplateProcessing lacks single or special_tokens", path);
    if (t->has_template)
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: post_processor has two TemplateProcessing", path);
    t->has_template = 1;
    int seen_a = 0;
    for (size_t i = 0; i < json_array_size(single); i++) {
        json_t *e = json_array_get(single, i);
        json_t *sp = json_object_get(e, "SpecialToken"), *sq = json_object_get(e, "Sequence");
        if (json_is_object(sp) && json_is_string(json_object_get(sp, "id"))) {
            int rc = seen_a ? ids_of_special(specials, json_string_value(json_object_get(sp, "id")), &t->post_post,
                                             &t->npost_post, path, err)
                            : ids_of_special(specials, json_string_value(json_object_get(sp, "id")), &t->post_pre,
                                             &t->npost_pre, path, err);
            if (rc) return rc;
        } else if (json_is_object(sq) && json_is_string(json_object_get(sq, "id")) &&
                   !strcmp(json_string_value(json_object_get(sq, "id")), "A") && !seen_a) {
            seen_a = 1;
        } else {
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: post_processor TemplateProcessing single[%zu] is not "
                             "supported (cis2 takes special tokens around one Sequence A)", path, i);
        }
    }
    if (!seen_a)
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: post_processor TemplateProcessing single has no Sequence A", path);
    return CIS2_OK;
}

int tokfam_post(cis2_tokenizer *t, json_t *v, const char *path, cis2_error *err)
{
    const char *ty = type_of(v);
    if (!strcmp(ty, "TemplateProcessing")) return load_template(t, v, path, err);
    json_t *list = json_object_get(v, "processors");
    if (strcmp(ty, "Sequence") || !json_is_array(list))
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: post_processor type %s is not supported", path, ty);
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *e = json_array_get(list, i);
        const char *et = type_of(e);
        int rc;
        if (et && !strcmp(et, "ByteLevel")) continue;   /* offsets only */
        if (et && !strcmp(et, "TemplateProcessing")) rc = load_template(t, e, path, err);
        else rc = cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: post_processor Sequence item %zu (%s) is not supported",
                            path, i, et ? et : "no type");
        if (rc) return rc;
    }
    return CIS2_OK;
}

void tokfam_free(cis2_tokenizer *t)
{
    for (int i = 0; i < t->nnorm; i++) { free(t->norm[i].a); free(t->norm[i].b); free(t->norm[i].kmp); }
    free(t->byte_val); free(t->split_lit); free(t->post_pre); free(t->post_post);
}
