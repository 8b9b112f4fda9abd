/*
 * tokenizer_load.c - tokenizer.json into the in-memory byte-level BPE
 * tokenizer (CIS-2 §3.1), exact to Hugging Face `tokenizers` 0.23.1
 * (§3.1.2; FACTS §1.14, §2).
 *
 * Owns: loading and validating tokenizer.json (only the SmolLM2 shape and
 * its subsets are admitted; anything else is refused by name): the
 * normalizer (none, §3.1.3), the pre-tokenizer's settings (Digits and
 * ByteLevel, §3.1.4), the BPE model's vocab and merges (§3.1.5), the added
 * tokens (§3.1.6), refusing every field or value cis2 does not implement;
 * then the tables encode and decode use (tokenizer_impl.h): the
 * byte->unicode map (§3.1.5.a), each byte's one-character token
 * (§3.1.5.b), the merge ranks (§3.1.5.c), the added-token automata and the
 * per-id decode bytes.  And freeing it.  Encoding and decoding are
 * tokenizer.c.
 *
 * NON-NORMATIVE extension (outside CIS-2 v0.3b §3, FACTS §2; loaded by
 * default, docs/tokenizer.md "Which tokenizers";
 * CIS2_TOK_ALLOW_NONNORMATIVE is a no-op kept for compatibility,
 * cis2_tokenizer_is_normative tells them apart): Qwen2.5's
 * shape, normalizer NFC and pre_tokenizer Sequence [Split(Qwen regex,
 * Isolated), ByteLevel(use_regex=false)], which tokenizer.c then applies
 * (nfc.c, pretok.c).  Also the model families' shapes
 * (docs/tokenizer.md): Llama-3's Split regex, the Metaspace and literal
 * Split pre-tokenizers, SentencePiece-style BPE (no pre-tokenizer,
 * byte_fallback, unk_token), and through tokenizer_family.c the
 * Prepend/Replace normalizers, their decoder and TemplateProcessing.
 *
 * Bounds (docs/inputs.md "tokenizer.json", "Memory"): the file is read once (fileio.h) and
 * parsed from that buffer, which is also what cis2_tokenizer_load_file
 * hashes; its JSON's heap cost is bounded before jansson runs (jsonlim.h).
 * Loading is linear: vocab, merges and added tokens go through hash
 * tables; the Aho-Corasick automaton of each group of added tokens (over
 * their reversed contents, see ac_trie and tokenizer.c) is built in time
 * linear in their total content, plus a sort.
 *
 * Callers: the library API (cis2.h: cis2_tokenizer_load,
 * cis2_tokenizer_load_ext, cis2_tokenizer_free), engine.c through
 * cis2_tokenizer_load_mem (the bytes of cis2_model's tokenizer_json, that
 * were hashed), judge.c through cis2_tokenizer_load_file, the CLI.
 */
#include "tokenizer_impl.h"
#include "fileio.h"
#include "jsonlim.h"
#include "nfc.h"
#include "pretok.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ID (1u << 24)           /* ids beyond this are refused (memory bound) */

/* the capacity of a hash table of n entries */
static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

/* ---- §3.1.5.a byte -> unicode ---- */
uint32_t cis2_byte_to_unicode(uint8_t b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
    uint32_t n = 0;                         /* rank of b among the other 68 bytes */
    for (unsigned c = 0; c < b; c++)
        if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE)) n++;
    return 256 + n;
}

/* ---- tables ---- */
static void ac_free(ac_trie *T)
{
    free(T->first); free(T->fail); free(T->out); free(T->label);
    memset(T, 0, sizeof *T);
}

void cis2_tokenizer_free(cis2_tokenizer *t)
{
    if (!t) return;
    ac_free(&t->trie[0]); ac_free(&t->trie[1]);
    tokfam_free(t);
    for (size_t i = 0; i < t->nadded; i++) { free(t->added[i].s); free(t->added[i].pn); }
    free(t->added); free(t->arena); free(t->vocab); free(t->merges);
    free(t->dec_off); free(t->dec_len); free(t);
}

/* ---- loading ---- */
#define FAIL(code, ...) do { rc = cis2_fail(err, code, __VA_ARGS__); goto out; } while (0)

/* Field `key` of object o must be absent, null, or (if allowed) `ok_value` semantics
 * are checked by the caller; these helpers read optional booleans/strings. */
static int get_bool(json_t *o, const char *key, int dflt, int *out)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) { *out = dflt; return 0; }
    if (!json_is_boolean(v)) return -1;
    *out = json_is_true(v);
    return 0;
}
static int absent_or_null(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return !v || json_is_null(v);
}
static const char *type_of(json_t *o)
{
    json_t *v = json_object_get(o, "type");
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* The ByteLevel pre-tokenizer object (§3.1.4.b). */
static int load_bytelevel(cis2_tokenizer *t, json_t *o, const char *path, cis2_error *err)
{
    int aps, trim, regex;
    json_t *ap = json_object_get(o, "add_prefix_space");
    if (!ap) return cis2_fail(err, CIS2_E_FORMAT, "%s: pre_tokenizer ByteLevel lacks add_prefix_space", path);
    if (get_bool(o, "add_prefix_space", 0, &aps) || get_bool(o, "trim_offsets", 1, &trim) ||
        get_bool(o, "use_regex", 1, &regex))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: pre_tokenizer ByteLevel has a non-boolean option", path);
    if (aps)
        return cis2_fail(err, CIS2_E_UNSUPPORTED,
                         "%s: pre_tokenizer ByteLevel add_prefix_space=true is not supported", path);
    t->use_regex = regex;
    return CIS2_OK;
}

static int load_digits(cis2_tokenizer *t, json_t *o, const char *path, cis2_error *err)
{
    int ind;
    if (get_bool(o, "individual_digits", 0, &ind))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: pre_tokenizer Digits individual_digits is not a boolean", path);
    t->digits_mode = ind ? CIS2_DIGITS_INDIVIDUAL : CIS2_DIGITS_CONTIGUOUS;
    return CIS2_OK;
}

static int is_str(json_t *v, const char *want)
{
    return json_is_string(v) && json_string_length(v) == strlen(want) && !strcmp(json_string_value(v), want);
}

/* NON-NORMATIVE: the Split pre-tokenizer: exactly Qwen2.5/Qwen3's,
 * Llama-3's or gpt-oss's (o200k) regex, Isolated (then ByteLevel without
 * regex); or a literal string, MergedWithPrevious (Gemma-3, alone:
 * SentencePiece-style). */
static int load_split(cis2_tokenizer *t, json_t *o, const char *path, cis2_error *err)
{
    json_t *pat = json_object_get(o, "pattern"), *beh = json_object_get(o, "behavior");
    json_t *rx = json_is_object(pat) ? json_object_get(pat, "Regex") : NULL;
    json_t *lit = json_is_object(pat) ? json_object_get(pat, "String") : NULL;
    int inv;
    if ((!json_is_string(rx) && !json_is_string(lit)) || json_object_size(pat) != 1 || !json_is_string(beh) ||
        get_bool(o, "invert", 0, &inv))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: pre_tokenizer Split needs pattern {\"Regex\": ...} or "
                         "{\"String\": ...}, behavior and a boolean invert", path);
    int which = is_str(rx, CIS2_QWEN_SPLIT_REGEX) ? SPLIT_RX_QWEN : is_str(rx, CIS2_LLAMA3_SPLIT_REGEX) ?
                SPLIT_RX_LLAMA3 : is_str(rx, CIS2_O200K_SPLIT_REGEX) ? SPLIT_RX_O200K : 0;
    if (lit && json_string_length(lit) > 0 && is_str(beh, "MergedWithPrevious") && !inv) {
        t->split_lit_len = json_string_length(lit);
        if (!(t->split_lit = malloc(t->split_lit_len)))
            return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
        memcpy(t->split_lit, json_string_value(lit), t->split_lit_len);
        return CIS2_OK;
    }
    if (!which || !is_str(beh, "Isolated") || inv)
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: pre_tokenizer Split is supported only with Qwen2.5/Qwen3's, "
                         "Llama-3's or gpt-oss's (o200k) regex, behavior Isolated and invert false, or a String "
                         "pattern with behavior MergedWithPrevious", path);
    t->split_rx = which;
    return CIS2_OK;
}

/* NON-NORMATIVE: the Metaspace pre-tokenizer of SentencePiece-style BPE
 * (Mistral, Llama-2 files converted without the legacy normalizer):
 * replacement "▁", prepend_scheme always/first/never, split; only without
 * a normalizer (its "first" piece is the one that starts the input). */
static int load_metaspace(cis2_tokenizer *t, json_t *o, const char *path, cis2_error *err)
{
    json_t *ps = json_object_get(o, "prepend_scheme");
    int split;
    if (!is_str(json_object_get(o, "replacement"), "\xe2\x96\x81") || get_bool(o, "split", 1, &split) ||
        !(is_str(ps, "always") || is_str(ps, "first") || is_str(ps, "never")))
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: pre_tokenizer Metaspace is supported only with replacement "
                         "\"\xe2\x96\x81\", prepend_scheme always/first/never and a boolean split", path);
    if (t->nnorm)
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: pre_tokenizer Metaspace after a normalizer is not supported",
                         path);
    t->sp = t->metaspace = 1;
    t->ms_split = split;
    t->ms_scheme = is_str(ps, "never") ? 0 : is_str(ps, "first") ? 1 : 2;
    return CIS2_OK;
}

/* Admitted: ByteLevel, or Sequence [ByteLevel] / [Digits, ByteLevel] (§3.1.4);
 * non-normative (tokenizer_family.c) also Sequence [Split, ByteLevel(use_regex=false)]. */
static int load_pretok(cis2_tokenizer *t, json_t *p, const char *path, cis2_error *err)
{
    if (!p || json_is_null(p)) {           /* SentencePiece-style BPE (Llama-2): non-normative */
        t->sp = 1;
        return CIS2_OK;
    }
    const char *ty = json_is_object(p) ? type_of(p) : NULL;
    if (!ty) return cis2_fail(err, CIS2_E_FORMAT, "%s: pre_tokenizer has no type", path);
    if (!strcmp(ty, "ByteLevel")) return load_bytelevel(t, p, path, err);
    if (!strcmp(ty, "Metaspace")) return load_metaspace(t, p, path, err);
    if (!strcmp(ty, "Split")) {             /* alone: a String pattern (Gemma-3), SentencePiece-style */
        int rc = load_split(t, p, path, err);
        if (!rc && !t->split_lit)
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: pre_tokenizer Split with a regex must be followed by "
                             "ByteLevel with use_regex=false", path);
        t->sp = 1;
        return rc;
    }
    if (strcmp(ty, "Sequence"))
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: pre_tokenizer type %s is not supported", path, ty);
    json_t *list = json_object_get(p, "pretokenizers");
    if (!json_is_array(list))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: pre_tokenizer Sequence lacks the pretokenizers array", path);
    size_t n = json_array_size(list);
    int have_bl = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(list, i);
        const char *et = json_is_object(e) ? type_of(e) : NULL;
        if (!et) return cis2_fail(err, CIS2_E_FORMAT, "%s: pre_tokenizer Sequence item %zu has no type", path, i);
        int rc;
        if (!strcmp(et, "Digits") && i == 0 && n == 2) rc = load_digits(t, e, path, err);
        else if (!strcmp(et, "Split") && i == 0 && n == 2) rc = load_split(t, e, path, err);
        else if (!strcmp(et, "ByteLevel") && i == n - 1) { rc = load_bytelevel(t, e, path, err); have_bl = 1; }
        else
            return cis2_fail(err, CIS2_E_UNSUPPORTED,
                             "%s: pre_tokenizer Sequence item %zu (%s) is not supported "
                             "(cis2 admits [Digits,] ByteLevel)", path, i, et);
        if (rc) return rc;
    }
    if (!have_bl)
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: pre_tokenizer Sequence has no ByteLevel", path);
    if (t->split_lit)
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: pre_tokenizer Split with a String pattern is supported "
                         "only alone", path);
    if (t->split_rx && t->use_regex)      /* Split then the GPT-2 pattern: not Qwen2.5's shape */
        return cis2_fail(err, CIS2_E_UNSUPPORTED,
                         "%s: pre_tokenizer Split must be followed by ByteLevel with use_regex=false", path);
    return CIS2_OK;
}

/* post_processor / decoder: null or ByteLevel (neither adds tokens); and,
 * non-normative (tokenizer_family.c), the post_processor
 * TemplateProcessing (or Sequence [ByteLevel, TemplateProcessing]) and,
 * for SentencePiece-style BPE, its decoder Sequence.  The decoder must
 * match the model: ByteLevel (or null) with ByteLevel, the Sequence
 * without. */
static int load_passive(cis2_tokenizer *t, json_t *root, const char *key, const char *path,
                        cis2_error *err)
{
    json_t *v = json_object_get(root, key);
    int dec = !strcmp(key, "decoder");
    if (!v || json_is_null(v)) {
        if (dec && t->sp)
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: decoder is null (SentencePiece-style BPE needs its "
                             "Replace/ByteFallback/Fuse decoder)", path);
        return CIS2_OK;
    }
    const char *ty = json_is_object(v) ? type_of(v) : NULL;
    if (!ty) return cis2_fail(err, CIS2_E_FORMAT, "%s: %s has no type", path, key);
    if (!strcmp(ty, "ByteLevel") && !(dec && t->sp)) return CIS2_OK;
    int fam = dec ? t->sp && !strcmp(ty, "Sequence") : !strcmp(ty, "TemplateProcessing") || !strcmp(ty, "Sequence");
    if (!fam) return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: %s type %s is not supported", path, key, ty);
    return dec ? tokfam_decoder_sp(t, v, path, err) : tokfam_post(t, v, path, err);
}

static int load_vocab(cis2_tokenizer *t, json_t *vocab, const char *path, cis2_error *err)
{
    size_t n = json_object_size(vocab);
    if (n == 0) return cis2_fail(err, CIS2_E_FORMAT, "%s: model.vocab is empty", path);
    t->vcap = pow2_at_least(2 * n + 2);
    t->vocab = malloc(t->vcap * sizeof *t->vocab);
    if (!t->vocab) return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
    memset(t->vocab, 0xFF, t->vcap * sizeof *t->vocab);
    const char *key; size_t klen; json_t *val;
    uint32_t maxid = 0;
    json_object_keylen_foreach(vocab, key, klen, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= MAX_ID)
            return cis2_fail(err, CIS2_E_FORMAT, "%s: model.vocab entry \"%.40s\" has no valid id (0..%u)",
                             path, key, MAX_ID - 1);
        if (klen == 0) return cis2_fail(err, CIS2_E_FORMAT, "%s: model.vocab has an empty token", path);
        vslot *s = vocab_find(t, key, klen);
        if (s->id != UINT32_MAX)
            return cis2_fail(err, CIS2_E_FORMAT, "%s: model.vocab token \"%.40s\" appears twice", path, key);
        uint32_t off;
        if (tok_arena_add(t, key, klen, &off)) return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
        s->off = off; s->len = (uint32_t)klen; s->id = (uint32_t)json_integer_value(val);
        if (s->id > maxid) maxid = s->id;
    }
    t->nvocab = n;
    t->nids = n ? (size_t)maxid + 1 : 0;
    return CIS2_OK;
}

static int load_merges(cis2_tokenizer *t, json_t *merges, const char *path, cis2_error *err)
{
    size_t n = merges ? json_array_size(merges) : 0;
    t->mcap = pow2_at_least(2 * n + 2);
    t->merges = malloc(t->mcap * sizeof *t->merges);
    if (!t->merges) return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < t->mcap; i++) t->merges[i].key = MSLOT_EMPTY;
    char *cat = NULL; size_t catcap = 0;
    int rc = CIS2_OK;
    for (size_t r = 0; r < n; r++) {
        json_t *m = json_array_get(merges, r);
        const char *a, *b; size_t al, bl;
        if (json_is_string(m)) {                 /* "a b" (split at the first space) */
            a = json_string_value(m);
            const char *sp = memchr(a, ' ', json_string_length(m));
            if (!sp) { rc = cis2_fail(err, CIS2_E_FORMAT, "%s: model.merges[%zu] \"%.40s\" is not \"a b\"", path, r, a); break; }
            al = (size_t)(sp - a); b = sp + 1; bl = json_string_length(m) - al - 1;
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {   /* ["a", "b"] */
            a = json_string_value(json_array_get(m, 0)); al = json_string_length(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1)); bl = json_string_length(json_array_get(m, 1));
        } else { rc = cis2_fail(err, CIS2_E_FORMAT, "%s: model.merges[%zu] is neither \"a b\" nor [\"a\",\"b\"]", path, r); break; }
        vslot *va = vocab_find(t, a, al), *vb = vocab_find(t, b, bl);
        if (va->id == UINT32_MAX || vb->id == UINT32_MAX) {
            rc = cis2_fail(err, CIS2_E_FORMAT, "%s: model.merges[%zu] names a token not in model.vocab (\"%.*s\")",
                           path, r, (int)(va->id == UINT32_MAX ? (al > 40 ? 40 : al) : (bl > 40 ? 40 : bl)),
                           va->id == UINT32_MAX ? a : b);
            break;
        }
        if (al + bl > catcap) {
            catcap = 2 * (al + bl) + 64;
            char *c = realloc(cat, catcap);
            if (!c) { rc = cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path); break; }
            cat = c;
        }
        memcpy(cat, a, al); memcpy(cat + al, b, bl);
        vslot *vm = vocab_find(t, cat, al + bl);
        if (vm->id == UINT32_MAX) {
            rc = cis2_fail(err, CIS2_E_FORMAT, "%s: model.merges[%zu]: merged token \"%.*s\" is not in model.vocab",
                           path, r, (int)(al + bl > 40 ? 40 : al + bl), cat);
            break;
        }
        /* §3.1.5.c: list position = rank; a repeated pair keeps its last rank,
         * as the reference's HashMap insertion does. */
        uint64_t key = ((uint64_t)va->id << 32) | vb->id;
        size_t mask = t->mcap - 1, i = hash_pair(key) & mask;
        while (t->merges[i].key != MSLOT_EMPTY && t->merges[i].key != key) i = (i + 1) & mask;
        if (t->merges[i].key == MSLOT_EMPTY) t->nmerges++;
        t->merges[i].key = key; t->merges[i].rank = (uint32_t)r; t->merges[i].new_id = vm->id;
    }
    free(cat);
    return rc;
}

static int load_added(cis2_tokenizer *t, json_t *arr, const char *path, cis2_error *err)
{
    if (!arr || json_is_null(arr)) return CIS2_OK;
    if (!json_is_array(arr)) return cis2_fail(err, CIS2_E_FORMAT, "%s: added_tokens is not an array", path);
    size_t n = json_array_size(arr);
    if (n > CIS2_TOK_MAX_ADDED)
        return cis2_fail(err, CIS2_E_FORMAT, "%s: %zu added_tokens, more than the limit of %u", path, n,
                         CIS2_TOK_MAX_ADDED);
    t->added = calloc(n ? n : 1, sizeof *t->added);
    /* contents seen so far: open addressing on hash_bytes, slots hold index + 1 */
    size_t scap = pow2_at_least(2 * n + 2), total = 0;
    uint32_t *seen = calloc(scap, sizeof *seen);
    if (!t->added || !seen) { free(seen); return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path); }
    uint32_t mx = 0; /* the largest id added so far */
    int rc = CIS2_OK;
#define AFAIL(code, ...) do { rc = cis2_fail(err, code, __VA_ARGS__); goto done; } while (0)
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        json_t *id = json_object_get(o, "id"), *c = json_object_get(o, "content");
        if (!json_is_object(o) || !json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) >= MAX_ID || !json_is_string(c) || json_string_length(c) == 0)
            AFAIL(CIS2_E_FORMAT, "%s: added_tokens[%zu] needs an id (0..%u) and a non-empty content", path, i,
                  MAX_ID - 1);
        static const char *const refused[] = {"single_word", "lstrip", "rstrip"};
        for (int k = 0; k < 3; k++) {
            int v;
            if (get_bool(o, refused[k], 0, &v))
                AFAIL(CIS2_E_FORMAT, "%s: added_tokens[%zu].%s is not a boolean", path, i, refused[k]);
            if (v) AFAIL(CIS2_E_UNSUPPORTED, "%s: added_tokens[%zu].%s=true is not supported", path, i, refused[k]);
        }
        int special, normalized;
        if (get_bool(o, "special", 0, &special) || get_bool(o, "normalized", !special, &normalized))
            AFAIL(CIS2_E_FORMAT, "%s: added_tokens[%zu] has a non-boolean flag", path, i);
        const char *cs = json_string_value(c);
        size_t len = json_string_length(c);
        total += len;
        if (total > CIS2_TOK_MAX_ADDED_BYTES)
            AFAIL(CIS2_E_FORMAT, "%s: added_tokens hold more than %u bytes of content (the limit)", path,
                  CIS2_TOK_MAX_ADDED_BYTES);
        size_t bad;
        if (cis2_utf8_validate((const unsigned char *)cs, len, &bad))
            AFAIL(CIS2_E_FORMAT, "%s: added_tokens[%zu].content is not valid UTF-8", path, i);
        size_t h = hash_bytes(cs, len) & (scap - 1);
        for (; seen[h]; h = (h + 1) & (scap - 1)) {
            const added_tok *a = &t->added[seen[h] - 1];
            if (a->len == len && !memcmp(a->s, cs, len))
                AFAIL(CIS2_E_FORMAT, "%s: added_tokens[%zu].content \"%.40s\" appears twice", path, i, cs);
        }
        /* The reference ignores the declared id: a content in the vocab
         * (or already added) keeps that id, a new one gets the next id past
         * max(len(vocab), added ids) (AddedVocabulary::add_tokens).  A file
         * whose ids disagree with that is refused rather than renumbered. */
        uint32_t want, decl = (uint32_t)json_integer_value(id);
        vslot *vs = vocab_find(t, cs, len);
        if (vs->id != UINT32_MAX) want = vs->id;
        else {
            want = (uint32_t)t->nvocab;
            if (t->nadded && mx >= t->nvocab) want = mx + 1;
        }
        if (decl != want)
            AFAIL(CIS2_E_FORMAT, "%s: added_tokens[%zu] \"%.40s\" declares id %u but the reference library "
                  "assigns it %u", path, i, cs, decl, want);
        added_tok *a = &t->added[t->nadded];
        if (!(a->s = malloc(len))) AFAIL(CIS2_E_NOMEM, "%s: out of memory", path);
        memcpy(a->s, cs, len);
        a->len = len; a->id = decl; a->normalized = normalized; a->special = special;
        t->nadded++;
        seen[h] = (uint32_t)t->nadded;
        if (a->id > mx) mx = a->id;
        if (a->id + 1 > t->nids) t->nids = a->id + 1;
    }
#undef AFAIL
done:
    free(seen);
    return rc;
}

/* tokenizer.md "Added tokens": a token with normalized=true is matched,
 * as the reference's AddedVocabulary::refresh_added_tokens builds its
 * split_normalized_trie, by its content run through the normalizer (on
 * Llama-2, "<tool>" by "▁<tool>"), in the normalized pieces of the text;
 * the others by their content, in the raw text.  Two normalized tokens
 * the normalizer makes equal ("x y" and "x▁y" on Llama-2) are refused:
 * the reference matches either, from one process to the next (its
 * patterns come out of a hash map). */
#define PREVIEW(s, n) (int)((n) > 40 ? 40 : (n)), (s)   /* "%.*s" of at most 40 bytes of s[0..n) */
static int added_patterns(cis2_tokenizer *t, const char *path, cis2_error *err)
{
    size_t total = 0, scap = pow2_at_least(2 * t->nadded + 2);
    uint32_t *seen = NULL;                     /* normalized patterns: index + 1 */
    int rc = CIS2_OK;
    if (t->nnorm && !(seen = calloc(scap, sizeof *seen))) return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < t->nadded && !rc; i++) {
        added_tok *a = &t->added[i];
        size_t l;
        if (a->normalized && t->nnorm) {
            if (tokfam_normalize(t, a->s, a->len, &a->pn, &a->pnlen)) {
                rc = cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
                break;
            }
            const char *p = added_pat(a, 1, &l);
            if (l == 0) {
                rc = cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: added_tokens[%zu] \"%.*s\" is normalized to the empty "
                               "string (not supported)", path, i, PREVIEW(a->s, a->len));
                break;
            }
            size_t h = hash_bytes(p, l) & (scap - 1);
            for (; seen[h]; h = (h + 1) & (scap - 1)) {
                size_t ol;
                const added_tok *o = &t->added[seen[h] - 1];
                const char *op = added_pat(o, 1, &ol);
                if (ol == l && !memcmp(op, p, l)) {
                    rc = cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: added_tokens[%zu] \"%.*s\" and [%u] \"%.*s\" are "
                                   "both normalized to \"%.*s\" (which one matches is not defined: not supported)",
                                   path, i, PREVIEW(a->s, a->len), seen[h] - 1, PREVIEW(o->s, o->len), PREVIEW(p, l));
                    break;
                }
            }
            if (rc) break;
            seen[h] = (uint32_t)i + 1;
        }
        added_pat(a, a->normalized, &l);
        total += l;
        if (total > CIS2_TOK_MAX_ADDED_PATTERN_BYTES)
            rc = cis2_fail(err, CIS2_E_FORMAT, "%s: added_tokens, normalized, hold more than %u bytes (the limit)",
                           path, CIS2_TOK_MAX_ADDED_PATTERN_BYTES);
    }
    free(seen);
    return rc;
}

/* ---- added-token automaton (see ac_trie) ---- */
typedef struct { const uint8_t *s; uint32_t len, tok; } rpat;

static int rpat_cmp(const void *a, const void *b)
{
    const rpat *x = a, *y = b;
    size_t m = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, m);
    if (c) return c;
    return x->len < y->len ? -1 : x->len > y->len;
}
/* Builds t->trie[group] from the added tokens of that group: a trie of the
 * reversed contents in breadth-first order (from the sorted patterns: each
 * node is a run of patterns sharing its prefix), then failure links and
 * outputs.  Linear in the total content, plus the sort. */
static int ac_build(cis2_tokenizer *t, int group)
{
    ac_trie *T = &t->trie[group];
    size_t m = 0, total = 0;
    size_t l;
    for (size_t i = 0; i < t->nadded; i++)
        if (t->added[i].normalized == group) { m++; added_pat(&t->added[i], group, &l); total += l; }
    if (!m) return 0;
    rpat *P = malloc(m * sizeof *P);
    uint8_t *rev = malloc(total);
    size_t cap = total + 2; /* nodes <= 1 + total content */
    uint32_t *lo = malloc(cap * sizeof *lo), *hi = malloc(cap * sizeof *hi), *dep = malloc(cap * sizeof *dep);
    uint32_t *term = malloc(cap * sizeof *term);
    T->first = malloc((cap + 1) * sizeof *T->first);
    T->fail = malloc(cap * sizeof *T->fail);
    T->out = malloc(cap * sizeof *T->out);
    T->label = malloc(cap);
    int rc = -1;
    if (!P || !rev || !lo || !hi || !dep || !term || !T->first || !T->fail || !T->out || !T->label) goto out;
    size_t k = 0, off = 0;
    for (size_t i = 0; i < t->nadded; i++) {
        const added_tok *a = &t->added[i];
        if (a->normalized != group) continue;
        const char *ps = added_pat(a, group, &l);
        for (size_t j = 0; j < l; j++) rev[off + j] = (uint8_t)ps[l - 1 - j];
        P[k++] = (rpat){rev + off, (uint32_t)l, (uint32_t)i};
        off += l;
        if (l > T->maxlen) T->maxlen = l;
    }
    qsort(P, m, sizeof *P, rpat_cmp);
    uint32_t n = 1;
    lo[0] = 0; hi[0] = (uint32_t)m; dep[0] = 0; T->label[0] = 0;
    for (uint32_t v = 0; v < n; v++) {
        T->first[v] = n;
        uint32_t i = lo[v], d = dep[v];
        term[v] = AC_NONE;
        if (i < hi[v] && P[i].len == d) term[v] = P[i++].tok; /* unique patterns (added_patterns): at most one ends here */
        while (i < hi[v]) {
            uint8_t c = P[i].s[d];
            uint32_t j = i + 1;
            while (j < hi[v] && P[j].s[d] == c) j++;
            T->label[n] = c; lo[n] = i; hi[n] = j; dep[n] = d + 1;
            n++;
            i = j;
        }
    }
    T->first[n] = n;
    T->n = n;
    memset(T->root_next, 0, sizeof T->root_next);
    for (uint32_t u = T->first[0]; u < T->first[1]; u++) T->root_next[T->label[u]] = u;
    T->fail[0] = 0;
    T->out[0] = AC_NONE;
    for (uint32_t v = 0; v < n; v++) { /* parents before children: fail[v] is known here */
        if (v) T->out[v] = term[v] != AC_NONE ? term[v] : T->out[T->fail[v]];
        for (uint32_t u = T->first[v]; u < T->first[v + 1]; u++) {
            if (v == 0) { T->fail[u] = 0; continue; }
            uint32_t f = T->fail[v], x;
            for (;;) {
                x = ac_child(T, f, T->label[u]);
                if (x || f == 0) break;
                f = T->fail[f];
            }
            T->fail[u] = x;
        }
    }
    rc = 0;
out:
    free(P); free(rev); free(lo); free(hi); free(dep); free(term);
    if (rc) ac_free(T);
    return rc;
}

/* Per-id decode bytes, as the reference's ByteLevel decoder makes them for
 * every token, added tokens included: the token's string mapped back
 * through §3.1.5.a when every character is in the map, else its raw UTF-8
 * (so an added token "é" decodes to the byte 0xE9, as the reference does,
 * and "<|im_start|>" to itself). */
static int decode_one(cis2_tokenizer *t, const int16_t *inv, const char *str, size_t len, uint32_t fallback_off,
                      int have_off, uint32_t id, char **tmp, size_t *tmpcap)
{
    if (len > *tmpcap) {
        size_t nc = 2 * len;
        char *n = realloc(*tmp, nc);
        if (!n) return -1;
        *tmp = n; *tmpcap = nc;
    }
    const unsigned char *s = (const unsigned char *)str;
    size_t k = 0, j = 0, l;
    int mapped = !cis2_utf8_validate(s, len, NULL);
    while (mapped && j < len) {
        uint32_t cp = cis2_utf8_next(s + j, &l);
        int b = cp < 324 ? inv[cp] : -1;
        if (b < 0) mapped = 0;
        else (*tmp)[k++] = (char)b;
        j += l;
    }
    uint32_t off;
    if (mapped) {
        if (tok_arena_add(t, *tmp, k, &off)) return -1;
        t->dec_off[id] = off; t->dec_len[id] = (uint32_t)k;
    } else {
        if (!have_off && tok_arena_add(t, str, len, &fallback_off)) return -1;
        t->dec_off[id] = fallback_off; t->dec_len[id] = (uint32_t)len;
    }
    return 0;
}

static int build_decode(cis2_tokenizer *t, const char *path, cis2_error *err)
{
    t->dec_off = malloc((t->nids ? t->nids : 1) * sizeof *t->dec_off);
    t->dec_len = malloc((t->nids ? t->nids : 1) * sizeof *t->dec_len);
    if (!t->dec_off || !t->dec_len) return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < t->nids; i++) t->dec_len[i] = UINT32_MAX;
    char *tmp = NULL; size_t tmpcap = 0;
    int16_t inv[324];                                   /* §3.1.5.a inverse */
    for (int i = 0; i < 324; i++) inv[i] = -1;
    for (int b = 0; b < 256; b++) inv[t->b2u[b]] = (int16_t)b;
    int bad = 0;
    for (size_t i = 0; i < t->vcap && !bad; i++) {
        vslot v = t->vocab[i];
        if (v.id == UINT32_MAX) continue;
        /* str points into the arena: decode_one reads it whole before it adds to (and may move) the arena */
        bad = decode_one(t, inv, t->arena + v.off, v.len, v.off, 1, v.id, &tmp, &tmpcap);
        if (!bad && t->dec_len[v.id] > t->max_tok_bytes) t->max_tok_bytes = t->dec_len[v.id];
    }
    for (size_t i = 0; i < t->nadded && !bad; i++) {    /* a normalized token: its normalized content, as there */
        size_t l;
        const char *p = added_pat(&t->added[i], t->added[i].normalized, &l);
        bad = decode_one(t, inv, p, l, 0, 0, t->added[i].id, &tmp, &tmpcap);
    }
    free(tmp);
    if (bad) return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
    return CIS2_OK;
}

/* normalizer: null, or (non-normative) {"type": "NFC"}. */
static int load_normalizer(cis2_tokenizer *t, json_t *v, const char *path, cis2_error *err)
{
    if (!v || json_is_null(v)) return CIS2_OK;
    const char *ty = json_is_object(v) ? type_of(v) : NULL;
    int fam = ty && ((!strcmp(ty, "NFC") && json_object_size(v) == 1) || !strcmp(ty, "Prepend") ||
                     !strcmp(ty, "Replace") || !strcmp(ty, "Sequence"));
    if (!fam)
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: normalizer %s is not supported (CIS-2 v0.3b §3.1.3: none)",
                         path, ty ? ty : "(no type)");
    return tokfam_normalizer(t, v, path, err);   /* non-normative: tokenizer_family.c */
}

int cis2_tokenizer_load_mem(cis2_tokenizer **out, const char *buf, size_t len, const char *path, unsigned flags,
                            cis2_error *err)
{
    int rc = CIS2_OK;
    json_t *root = NULL;
    cis2_tokenizer *t = NULL;
    *out = NULL;
    if (!path) path = "tokenizer.json";
    /* the families' shapes load by default (docs/tokenizer.md; flags, e.g.
     * CIS2_TOK_ALLOW_NONNORMATIVE, are accepted and have no effect); they
     * stay outside v0.3b §3 (cis2_tokenizer_is_normative) */
    (void)flags;
    if (len > CIS2_TOK_MAX_FILE)
        FAIL(CIS2_E_FORMAT, "%s: larger than %u bytes, the limit for a tokenizer.json (%zu bytes)", path,
             CIS2_TOK_MAX_FILE, len);
    if ((rc = cis2_json_cost_check(buf, len, CIS2_TOK_MAX_JSON_COST, path, "a tokenizer.json", err))) goto out;
    json_error_t je;
    root = cis2_json_loadb_wide(buf, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je); /* inputs.md "JSON numbers" */
    if (!root) FAIL(CIS2_E_FORMAT, "%s: malformed JSON at line %d column %d: %s", path, je.line, je.column, je.text);
    if (!json_is_object(root)) FAIL(CIS2_E_FORMAT, "%s: top level is not a JSON object", path);
    t = calloc(1, sizeof *t);
    if (!t) FAIL(CIS2_E_NOMEM, "%s: out of memory", path);

    static const char *const nulls[] = {"truncation", "padding"};
    for (int i = 0; i < 2; i++)
        if (!absent_or_null(root, nulls[i]))
            FAIL(CIS2_E_UNSUPPORTED, "%s: %s is not null (cis2 implements none)", path, nulls[i]);
    if ((rc = load_normalizer(t, json_object_get(root, "normalizer"), path, err))) goto out;
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) FAIL(CIS2_E_FORMAT, "%s: model is missing", path);
    const char *mty = type_of(model);
    if (mty && strcmp(mty, "BPE")) FAIL(CIS2_E_UNSUPPORTED, "%s: model type %s is not supported (only BPE)", path, mty);
    json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    if (!json_is_object(vocab)) FAIL(CIS2_E_FORMAT, "%s: model.vocab is missing or not an object", path);
    if (!mty && !merges) FAIL(CIS2_E_UNSUPPORTED, "%s: model has no type and no merges (only BPE is supported)", path);
    if (merges && !json_is_array(merges)) FAIL(CIS2_E_FORMAT, "%s: model.merges is not an array", path);
    static const char *const mnulls[] = {"dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix"};
    json_t *unk = json_object_get(model, "unk_token");
    for (int i = 0; i < 4; i++) {
        json_t *mv = json_object_get(model, mnulls[i]);
        if (i >= 2 && json_is_string(mv) && json_string_length(mv) == 0) continue; /* "" = none (Qwen2.5's files) */
        if (i == 1 && json_is_string(mv)) continue; /* checked below */
        if (!absent_or_null(model, mnulls[i]))
            FAIL(CIS2_E_UNSUPPORTED, "%s: model.%s is not null (not supported)", path, mnulls[i]);
    }
    int bf, fu;
    if (get_bool(model, "byte_fallback", 0, &bf) || get_bool(model, "fuse_unk", 0, &fu) ||
        get_bool(model, "ignore_merges", 0, &t->ignore_merges))
        FAIL(CIS2_E_FORMAT, "%s: model has a non-boolean byte_fallback/fuse_unk/ignore_merges", path);

    if ((rc = load_pretok(t, json_object_get(root, "pre_tokenizer"), path, err))) goto out;
    if ((bf || json_is_string(unk)) && !t->sp)
        FAIL(CIS2_E_UNSUPPORTED, "%s: model.%s is supported only for SentencePiece-style BPE (no ByteLevel "
             "pre-tokenizer)", path, bf ? "byte_fallback=true" : "unk_token");
    t->byte_fallback = bf; t->fuse_unk = fu;
    if ((rc = load_passive(t, root, "post_processor", path, err))) goto out;
    if ((rc = load_passive(t, root, "decoder", path, err))) goto out;
    if ((rc = load_vocab(t, vocab, path, err))) goto out;
    t->unk_id = UINT32_MAX;
    if (json_is_string(unk)) {
        vslot *u = vocab_find(t, json_string_value(unk), json_string_length(unk));
        if (u->id == UINT32_MAX) FAIL(CIS2_E_FORMAT, "%s: model.unk_token \"%.40s\" is not in model.vocab", path,
                                      json_string_value(unk));
        t->unk_id = u->id;
    }
    if ((rc = load_merges(t, merges, path, err))) goto out;
    if ((rc = load_added(t, json_object_get(root, "added_tokens"), path, err))) goto out;
    if ((rc = added_patterns(t, path, err))) goto out;
    json_decref(root); /* everything needed is copied out: free the tree before building tables */
    root = NULL;

    /* Duplicate ids in the vocab (the reference would silently keep one). */
    {
        uint8_t *seen = calloc(t->nids ? t->nids : 1, 1);
        if (!seen) FAIL(CIS2_E_NOMEM, "%s: out of memory", path);
        for (size_t i = 0; i < t->vcap; i++) {
            vslot v = t->vocab[i];
            if (v.id == UINT32_MAX) continue;
            if (seen[v.id]) { free(seen); FAIL(CIS2_E_FORMAT, "%s: model.vocab id %u is used twice", path, v.id); }
            seen[v.id] = 1;
        }
        free(seen);
    }
    /* §3.1.5.b: each byte's one-character token (FACTS §2: some have none). */
    for (int b = 0; b < 256; b++) t->b2u[b] = cis2_byte_to_unicode((uint8_t)b);
    if (ac_build(t, 0) || ac_build(t, 1)) FAIL(CIS2_E_NOMEM, "%s: out of memory for the added tokens", path);
    for (int b = 0; b < 256; b++) {
        char u[8];
        size_t ul = utf8_put(t->b2u[b], u);
        vslot *v = vocab_find(t, u, ul);
        t->byte_id[b] = v->id == UINT32_MAX ? -1 : (int32_t)v->id;
        snprintf(u, sizeof u, "<0x%02X>", b);            /* byte_fallback's token (the reference's {:#04X}) */
        v = vocab_find(t, u, 6);
        t->fb_id[b] = t->byte_fallback && v->id != UINT32_MAX ? (int32_t)v->id : -1;
        if (t->sp && t->unk_id != UINT32_MAX && t->fb_id[b] < 0) t->can_unk = 1;
    }
    t->all_kept = 1;
    for (int b = 0; b < 256; b++)
        if ((t->sp ? t->fb_id[b] : t->byte_id[b]) < 0) t->all_kept = 0;
    if ((rc = t->sp ? tokfam_build_sp_decode(t, path, err) : build_decode(t, path, err))) goto out;
out:
    json_decref(root);
    if (rc) cis2_tokenizer_free(t);
    else *out = t;
    return rc;
}

int cis2_tokenizer_load_file(cis2_tokenizer **out, const char *path, unsigned flags, uint8_t sha[32],
                             cis2_error *err)
{
    *out = NULL;
    char *buf;
    size_t len;
    int rc = cis2_read_file(path, CIS2_TOK_MAX_FILE, "a tokenizer.json", &buf, &len, err);
    if (rc) return rc;
    if (sha) cis2_sha256(buf, len, sha); /* §2.1: the bytes parsed below */
    rc = cis2_tokenizer_load_mem(out, buf, len, path, flags, err);
    free(buf);
    return rc;
}

int cis2_tokenizer_load_ext(cis2_tokenizer **out, const char *path, unsigned flags, cis2_error *err)
{
    return cis2_tokenizer_load_file(out, path, flags, NULL, err);
}

int cis2_tokenizer_load(cis2_tokenizer **out, const char *path, cis2_error *err)
{
    return cis2_tokenizer_load_file(out, path, 0, NULL, err);
}
