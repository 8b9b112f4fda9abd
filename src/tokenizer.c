/*
 * tokenizer.c - byte-level BPE from tokenizer.json (CIS-2 §3.1), exact to
 * Hugging Face `tokenizers` 0.23.1 (§3.1.2; FACTS §1.14, §2).
 *
 * Owns: loading and validating tokenizer.json (only the SmolLM2 shape and
 * its subsets are admitted; anything else is refused by name), the
 * added-token split, the byte->unicode map (§3.1.5.a), the rank-ordered
 * merge loop (§3.1.5.c) and decode.  The pre-tokenizer scanner is
 * pretok.c.  Encode pipeline, as the reference runs encode(text, false):
 *   1. added tokens are matched in the raw text, leftmost-longest, first
 *      those with normalized=false, then (no normalizer) the others;
 *   2. each remaining piece: Digits, then the GPT-2 pattern (§3.1.4);
 *   3. each pre-token: its bytes -> single-byte tokens (bytes without a
 *      vocab entry are dropped, FACTS §2), then the merge loop;
 *   4. ids concatenated; no post-processing (§3.1.3, §3.3).
 *
 * NON-NORMATIVE extension (cis2_tokenizer_load_ext with
 * CIS2_TOK_ALLOW_NONNORMATIVE; outside CIS-2 v0.3b §3, FACTS §2): Qwen2.5's
 * shape, normalizer NFC (nfc.c) applied to each piece between the
 * normalized=false added tokens (as the reference's
 * AddedVocabulary::extract_and_normalize does), and pre_tokenizer
 * Sequence [Split(Qwen regex, Isolated), ByteLevel(use_regex=false)]
 * (pretok.c).  The strict loader refuses both, pointing to the flag and
 * to --prompt-ids.
 *
 * Bounds (issue 16, docs/inputs.md): the file is read once (fileio.h) and
 * parsed from that buffer, which is also what cis2_tokenizer_load_file
 * hashes; its JSON's heap cost is bounded before jansson runs (jsonlim.h).
 * Loading is linear: vocab, merges and added tokens go through hash
 * tables.  Added tokens are matched with an Aho-Corasick automaton over the
 * reversed contents (one per normalized group): scanning the text
 * backwards gives, for every position, the longest added token starting
 * there in O(1) amortized, so leftmost-longest matching is linear in the
 * text whatever the tokens (no rescans, unlike a forward leftmost search).
 * cis2_tokenizer_encode_max stops once the ids exceed its limit.
 *
 * Callers: the library API (cis2.h), model.c's caller through
 * cis2_tokenizer_load_mem, the CLI.
 */
#include "tokenizer.h"
#include "fileio.h"
#include "jsonlim.h"
#include "nfc.h"
#include "pretok.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_ID (1u << 24)           /* ids beyond this are refused (memory bound) */
#define CACHE_MAX_WORD 128          /* pre-tokens up to this many bytes are cached */

/* ---- hashing ---- */
static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}
static uint64_t hash_pair(uint64_t k)
{
    k *= 0x9E3779B97F4A7C15ull;
    return k ^ (k >> 31);
}
static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

typedef struct { uint32_t off, len, id; } vslot;             /* vocab: string -> id */
typedef struct { uint64_t key; uint32_t rank, new_id; } mslot; /* merges: pair -> rank, id */
#define MSLOT_EMPTY UINT64_MAX

typedef struct {
    char *s;
    size_t len;
    uint32_t id;
    int normalized;
} added_tok;

/* Aho-Corasick automaton over the REVERSED contents of one group of added
 * tokens, in breadth-first order: node 0 is the root, the children of node
 * v are [first[v], first[v+1]), sorted by label (the byte on the edge into
 * them).  out[v]: the added token (index) that is the longest pattern
 * among v's suffixes in the automaton (v itself, then its failure chain),
 * or AC_NONE. */
#define AC_NONE UINT32_MAX
typedef struct {
    uint32_t n;               /* nodes; 0: no tokens in the group */
    uint32_t *first, *fail, *out;
    uint8_t *label;
    uint32_t root_next[256];  /* goto from the root; 0 = stay */
    size_t maxlen;            /* longest content in the group */
} ac_trie;

struct cis2_tokenizer {
    char *arena;              /* vocab strings, then decode bytes */
    size_t arena_len, arena_cap;
    vslot *vocab; size_t vcap; size_t nvocab;
    mslot *merges; size_t mcap; size_t nmerges;
    uint32_t b2u[256];        /* §3.1.5.a byte -> code point */
    int32_t byte_id[256];     /* §3.1.5.b: id of each byte's one-char token, -1 none */
    uint32_t *dec_off, *dec_len; /* per id; dec_len UINT32_MAX = unknown id */
    size_t nids;              /* max id + 1 */
    added_tok *added; size_t nadded;
    ac_trie trie[2];          /* added tokens with normalized = 0, 1 */
    size_t max_tok_bytes;     /* most bytes one vocab token covers (encode_max's bound) */
    int digits_mode, use_regex, ignore_merges;
    int nfc, split_qwen;      /* non-normative extension (see the top) */
};

/* ---- §3.1.5.a byte -> unicode ---- */
uint32_t cis2_byte_to_unicode(uint8_t b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
    uint32_t n = 0;                         /* rank of b among the other 68 bytes */
    for (unsigned c = 0; c < b; c++)
        if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE)) n++;
    return 256 + n;
}
static size_t utf8_put(uint32_t cp, char *o)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F)); return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F)); return 4;
}

/* ---- arena and tables ---- */
static int arena_add(cis2_tokenizer *t, const char *s, size_t n, uint32_t *off)
{
    if (t->arena_len + n > t->arena_cap) {
        size_t cap = t->arena_cap ? t->arena_cap : 1 << 16;
        while (cap < t->arena_len + n) cap *= 2;
        if (cap > UINT32_MAX) return -1;
        char *a = realloc(t->arena, cap);
        if (!a) return -1;
        t->arena = a; t->arena_cap = cap;
    }
    memcpy(t->arena + t->arena_len, s, n);
    *off = (uint32_t)t->arena_len;
    t->arena_len += n;
    return 0;
}

static vslot *vocab_find(const cis2_tokenizer *t, const char *s, size_t n)
{
    size_t mask = t->vcap - 1;
    for (size_t i = hash_bytes(s, n) & mask;; i = (i + 1) & mask) {
        vslot *v = &t->vocab[i];
        if (v->id == UINT32_MAX) return v; /* empty */
        if (v->len == n && !memcmp(t->arena + v->off, s, n)) return v;
    }
}

static const mslot *merge_find(const cis2_tokenizer *t, uint32_t a, uint32_t b)
{
    uint64_t key = ((uint64_t)a << 32) | b;
    size_t mask = t->mcap - 1;
    for (size_t i = hash_pair(key) & mask;; i = (i + 1) & mask) {
        const mslot *m = &t->merges[i];
        if (m->key == key) return m;
        if (m->key == MSLOT_EMPTY) return NULL;
    }
}

static void ac_free(ac_trie *T)
{
    free(T->first); free(T->fail); free(T->out); free(T->label);
    memset(T, 0, sizeof *T);
}

void cis2_tokenizer_free(cis2_tokenizer *t)
{
    if (!t) return;
    ac_free(&t->trie[0]); ac_free(&t->trie[1]);
    for (size_t i = 0; i < t->nadded; i++) free(t->added[i].s);
    free(t->added); free(t->arena); free(t->vocab); free(t->merges);
    free(t->dec_off); free(t->dec_len); free(t);
}

size_t cis2_tokenizer_vocab_size(const cis2_tokenizer *t) { return t->nids; }
int cis2_tokenizer_is_normative(const cis2_tokenizer *t) { return !t->nfc && !t->split_qwen; }

const char *cis2_tokenizer_token_bytes(const cis2_tokenizer *t, uint32_t id, size_t *len)
{
    if (id >= t->nids || t->dec_len[id] == UINT32_MAX) return NULL;
    *len = t->dec_len[id];
    return t->arena + t->dec_off[id];
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

/* The message for a part of Qwen2.5's shape when the flag is absent. */
static int refuse_ext(cis2_error *err, const char *path, const char *what)
{
    return cis2_fail(err, CIS2_E_UNSUPPORTED,
                     "%s: %s is outside CIS-2 v0.3b §3 (Qwen2.5 shape): give token ids with --prompt-ids, "
                     "or allow the non-normative extension with --tokenizer-ext", path, what);
}

/* NON-NORMATIVE: Qwen2.5's Split pre-tokenizer: exactly its regex, Isolated. */
static int load_split(cis2_tokenizer *t, json_t *o, unsigned flags, const char *path, cis2_error *err)
{
    json_t *pat = json_object_get(o, "pattern"), *beh = json_object_get(o, "behavior");
    json_t *rx = json_is_object(pat) ? json_object_get(pat, "Regex") : NULL;
    int inv;
    if (!json_is_string(rx) || json_object_size(pat) != 1 || !json_is_string(beh) ||
        get_bool(o, "invert", 0, &inv))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: pre_tokenizer Split needs pattern {\"Regex\": ...}, "
                         "behavior and a boolean invert", path);
    if (strcmp(json_string_value(rx), CIS2_QWEN_SPLIT_REGEX) || json_string_length(rx) != strlen(CIS2_QWEN_SPLIT_REGEX) ||
        strcmp(json_string_value(beh), "Isolated") || inv)
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: pre_tokenizer Split is supported only with Qwen2.5's "
                         "regex, behavior Isolated and invert false", path);
    if (!(flags & CIS2_TOK_ALLOW_NONNORMATIVE))
        return refuse_ext(err, path, "pre_tokenizer Split (Qwen2.5 regex)");
    t->split_qwen = 1;
    return CIS2_OK;
}

/* Admitted: ByteLevel, or Sequence [ByteLevel] / [Digits, ByteLevel] (§3.1.4);
 * with the flag also Sequence [Split, ByteLevel(use_regex=false)]. */
static int load_pretok(cis2_tokenizer *t, json_t *p, unsigned flags, const char *path, cis2_error *err)
{
    if (!p || json_is_null(p))
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: pre_tokenizer is null (cis2 needs a ByteLevel pre-tokenizer)", path);
    const char *ty = json_is_object(p) ? type_of(p) : NULL;
    if (!ty) return cis2_fail(err, CIS2_E_FORMAT, "%s: pre_tokenizer has no type", path);
    if (!strcmp(ty, "ByteLevel")) return load_bytelevel(t, p, path, err);
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
        else if (!strcmp(et, "Split") && i == 0 && n == 2) rc = load_split(t, e, flags, path, err);
        else if (!strcmp(et, "ByteLevel") && i == n - 1) { rc = load_bytelevel(t, e, path, err); have_bl = 1; }
        else
            return cis2_fail(err, CIS2_E_UNSUPPORTED,
                             "%s: pre_tokenizer Sequence item %zu (%s) is not supported "
                             "(cis2 admits [Digits,] ByteLevel)", path, i, et);
        if (rc) return rc;
    }
    if (!have_bl)
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: pre_tokenizer Sequence has no ByteLevel", path);
    if (t->split_qwen && t->use_regex)      /* Split then the GPT-2 pattern: not Qwen2.5's shape */
        return cis2_fail(err, CIS2_E_UNSUPPORTED,
                         "%s: pre_tokenizer Split must be followed by ByteLevel with use_regex=false", path);
    return CIS2_OK;
}

/* post_processor / decoder: null or ByteLevel (neither adds tokens). */
static int load_passive(json_t *root, const char *key, const char *path, cis2_error *err)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return CIS2_OK;
    const char *ty = json_is_object(v) ? type_of(v) : NULL;
    if (!ty) return cis2_fail(err, CIS2_E_FORMAT, "%s: %s has no type", path, key);
    if (strcmp(ty, "ByteLevel"))
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: %s type %s is not supported", path, key, ty);
    return CIS2_OK;
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
        if (arena_add(t, key, klen, &off)) return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
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
        if (t->nfc && normalized) {    /* non-normative: the reference would match its NFC */
            char *nc = NULL; size_t nl;
            if (cis2_nfc(cs, len, &nc, &nl)) AFAIL(CIS2_E_NOMEM, "%s: out of memory", path);
            int same = !nc || (nl == len && !memcmp(nc, cs, len));
            free(nc);
            if (!same)
                AFAIL(CIS2_E_UNSUPPORTED, "%s: added_tokens[%zu] is normalized but its content is not NFC "
                      "(not supported)", path, i);
        }
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
        a->len = len; a->id = decl; a->normalized = normalized;
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

static inline uint32_t ac_child(const ac_trie *T, uint32_t v, uint8_t c)
{
    if (v == 0) return T->root_next[c];
    uint32_t lo = T->first[v], hi = T->first[v + 1];
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (T->label[mid] < c) lo = mid + 1;
        else hi = mid;
    }
    return lo < T->first[v + 1] && T->label[lo] == c ? lo : 0;
}

static inline uint32_t ac_step(const ac_trie *T, uint32_t v, uint8_t c)
{
    for (;;) {
        uint32_t x = ac_child(T, v, c);
        if (x || v == 0) return x;
        v = T->fail[v];
    }
}

/* Builds t->trie[group] from the added tokens of that group: a trie of the
 * reversed contents in breadth-first order (from the sorted patterns: each
 * node is a run of patterns sharing its prefix), then failure links and
 * outputs.  Linear in the total content, plus the sort. */
static int ac_build(cis2_tokenizer *t, int group)
{
    ac_trie *T = &t->trie[group];
    size_t m = 0, total = 0;
    for (size_t i = 0; i < t->nadded; i++)
        if (t->added[i].normalized == group) { m++; total += t->added[i].len; }
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
        for (size_t j = 0; j < a->len; j++) rev[off + j] = (uint8_t)a->s[a->len - 1 - j];
        P[k++] = (rpat){rev + off, (uint32_t)a->len, (uint32_t)i};
        off += a->len;
        if (a->len > T->maxlen) T->maxlen = a->len;
    }
    qsort(P, m, sizeof *P, rpat_cmp);
    uint32_t n = 1;
    lo[0] = 0; hi[0] = (uint32_t)m; dep[0] = 0; T->label[0] = 0;
    for (uint32_t v = 0; v < n; v++) {
        T->first[v] = n;
        uint32_t i = lo[v], d = dep[v];
        term[v] = AC_NONE;
        if (i < hi[v] && P[i].len == d) term[v] = P[i++].tok; /* unique contents: at most one ends here */
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
        if (arena_add(t, *tmp, k, &off)) return -1;
        t->dec_off[id] = off; t->dec_len[id] = (uint32_t)k;
    } else {
        if (!have_off && arena_add(t, str, len, &fallback_off)) return -1;
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
    for (size_t i = 0; i < t->nadded && !bad; i++)
        bad = decode_one(t, inv, t->added[i].s, t->added[i].len, 0, 0, t->added[i].id, &tmp, &tmpcap);
    free(tmp);
    if (bad) return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
    return CIS2_OK;
}

/* normalizer: null, or (non-normative, with the flag) {"type": "NFC"}. */
static int load_normalizer(cis2_tokenizer *t, json_t *v, unsigned flags, const char *path, cis2_error *err)
{
    if (!v || json_is_null(v)) return CIS2_OK;
    const char *ty = json_is_object(v) ? type_of(v) : NULL;
    if (ty && !strcmp(ty, "NFC") && json_object_size(v) == 1) {
        if (!(flags & CIS2_TOK_ALLOW_NONNORMATIVE)) return refuse_ext(err, path, "normalizer NFC");
        t->nfc = 1;
        return CIS2_OK;
    }
    return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: normalizer %s is not supported (CIS-2 v0.3b §3.1.3: none)",
                     path, ty ? ty : "(no type)");
}

int cis2_tokenizer_load_mem(cis2_tokenizer **out, const char *buf, size_t len, const char *path, unsigned flags,
                            cis2_error *err)
{
    int rc = CIS2_OK;
    json_t *root = NULL;
    cis2_tokenizer *t = NULL;
    *out = NULL;
    if (!path) path = "tokenizer.json";
    if (len > CIS2_TOK_MAX_FILE)
        FAIL(CIS2_E_FORMAT, "%s: larger than %u bytes, the limit for a tokenizer.json (%zu bytes)", path,
             CIS2_TOK_MAX_FILE, len);
    if ((rc = cis2_json_cost_check(buf, len, CIS2_TOK_MAX_JSON_COST, path, "a tokenizer.json", err))) goto out;
    json_error_t je;
    root = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!root) FAIL(CIS2_E_FORMAT, "%s: malformed JSON at line %d column %d: %s", path, je.line, je.column, je.text);
    if (!json_is_object(root)) FAIL(CIS2_E_FORMAT, "%s: top level is not a JSON object", path);
    t = calloc(1, sizeof *t);
    if (!t) FAIL(CIS2_E_NOMEM, "%s: out of memory", path);

    static const char *const nulls[] = {"truncation", "padding"};
    for (int i = 0; i < 2; i++)
        if (!absent_or_null(root, nulls[i]))
            FAIL(CIS2_E_UNSUPPORTED, "%s: %s is not null (cis2 implements none)", path, nulls[i]);
    if ((rc = load_normalizer(t, json_object_get(root, "normalizer"), flags, path, err))) goto out;
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) FAIL(CIS2_E_FORMAT, "%s: model is missing", path);
    const char *mty = type_of(model);
    if (mty && strcmp(mty, "BPE")) FAIL(CIS2_E_UNSUPPORTED, "%s: model type %s is not supported (only BPE)", path, mty);
    json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    if (!json_is_object(vocab)) FAIL(CIS2_E_FORMAT, "%s: model.vocab is missing or not an object", path);
    if (!mty && !merges) FAIL(CIS2_E_UNSUPPORTED, "%s: model has no type and no merges (only BPE is supported)", path);
    if (merges && !json_is_array(merges)) FAIL(CIS2_E_FORMAT, "%s: model.merges is not an array", path);
    static const char *const mnulls[] = {"dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 4; i++) {
        json_t *mv = json_object_get(model, mnulls[i]);
        if (i >= 2 && json_is_string(mv) && json_string_length(mv) == 0) continue; /* "" = none (Qwen2.5's files) */
        if (!absent_or_null(model, mnulls[i]))
            FAIL(CIS2_E_UNSUPPORTED, "%s: model.%s is not null (not supported)", path, mnulls[i]);
    }
    int bf, fu;
    if (get_bool(model, "byte_fallback", 0, &bf) || get_bool(model, "fuse_unk", 0, &fu) ||
        get_bool(model, "ignore_merges", 0, &t->ignore_merges))
        FAIL(CIS2_E_FORMAT, "%s: model has a non-boolean byte_fallback/fuse_unk/ignore_merges", path);
    if (bf) FAIL(CIS2_E_UNSUPPORTED, "%s: model.byte_fallback=true is not supported", path);

    if ((rc = load_pretok(t, json_object_get(root, "pre_tokenizer"), flags, path, err))) goto out;
    if ((rc = load_passive(root, "post_processor", path, err))) goto out;
    if ((rc = load_passive(root, "decoder", path, err))) goto out;
    if ((rc = load_vocab(t, vocab, path, err))) goto out;
    if ((rc = load_merges(t, merges, path, err))) goto out;
    if ((rc = load_added(t, json_object_get(root, "added_tokens"), path, err))) goto out;
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
        char u[4];
        size_t ul = utf8_put(t->b2u[b], u);
        vslot *v = vocab_find(t, u, ul);
        t->byte_id[b] = v->id == UINT32_MAX ? -1 : (int32_t)v->id;
    }
    if ((rc = build_decode(t, path, err))) goto out;
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

/* ---- encoding ---- */
typedef struct { uint32_t rank, pos, new_id; } qent;
typedef struct { uint32_t id; int32_t prev, next; uint32_t len; } sym;
typedef struct { const char *s; uint32_t len, off, n; uint64_t h; } centry;

typedef struct {
    const cis2_tokenizer *t;
    uint32_t *ids; size_t n, cap;
    sym *syms; size_t symcap;
    qent *heap; size_t heapcap;
    centry *cache; size_t ccap, cused;
    uint32_t *cids; size_t cn, ccidcap; /* ids of cached words */
    char **bufs; size_t nbufs;          /* NFC'd pieces (the cache points into them) */
    uint32_t *best[2]; size_t bestcap;  /* split_added's window (2 x bestcap), per group */
    size_t max_ids;                     /* encode_max's limit (SIZE_MAX: none) */
    int oom, over;                      /* either stops the encode */
} enc_ctx;

static int push_ids(uint32_t **v, size_t *n, size_t *cap, const uint32_t *src, size_t k)
{
    if (k == 0) return 0;
    if (*n + k > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *n + k) c *= 2;
        uint32_t *nv = realloc(*v, c * sizeof *nv);
        if (!nv) return -1;
        *v = nv; *cap = c;
    }
    memcpy(*v + *n, src, k * sizeof *src);
    *n += k;
    return 0;
}

/* Min-heap on (rank, pos): the reference's Merge ordering (§3.1.5.c.ii). */
static inline int qless(qent a, qent b) { return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos; }
static void qpush(qent *h, size_t *n, qent e)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!qless(e, h[p])) break;
        h[i] = h[p]; i = p;
    }
    h[i] = e;
}
static qent qpop(qent *h, size_t *n)
{
    qent top = h[0], e = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && qless(h[c + 1], h[c])) c++;
        if (!qless(h[c], e)) break;
        h[i] = h[c]; i = c;
    }
    if (*n) h[i] = e;
    return top;
}

/* BPE of one pre-token (raw bytes): appends its ids to (*out, *n). */
static int bpe_word(enc_ctx *c, const unsigned char *w, size_t len, uint32_t **out, size_t *n, size_t *cap)
{
    const cis2_tokenizer *t = c->t;
    if (t->ignore_merges) {               /* whole word in the vocab: one token */
        char *m = calloc(len * 2 + 1, 1);
        if (!m) return -1;
        size_t k = 0;
        for (size_t i = 0; i < len; i++) k += utf8_put(t->b2u[w[i]], m + k);
        vslot *v = vocab_find(t, m, k);
        free(m);
        if (v->id != UINT32_MAX) return push_ids(out, n, cap, &v->id, 1);
    }
    if (len > c->symcap) {
        size_t nc = 2 * len;
        sym *s = realloc(c->syms, nc * sizeof *s);
        if (!s) return -1;
        c->syms = s;
        qent *q = realloc(c->heap, 2 * nc * sizeof *q);
        if (!q) return -1;
        c->heap = q; c->symcap = nc; c->heapcap = 2 * nc;
    }
    /* §3.1.5.b: one symbol per byte that has a token; others are dropped
     * and their neighbours become adjacent (FACTS §2). */
    sym *s = c->syms;
    size_t ns = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t id = t->byte_id[w[i]];
        if (id < 0) continue;
        s[ns].id = (uint32_t)id; s[ns].len = 1;
        s[ns].prev = (int32_t)ns - 1; s[ns].next = (int32_t)ns + 1;
        ns++;
    }
    if (ns == 0) return 0;
    s[ns - 1].next = -1;
    /* §3.1.5.c, exactly as the reference's Word::merge_all without dropout. */
    qent *h = c->heap;
    size_t hn = 0;
    for (size_t i = 0; i + 1 < ns; i++) {
        const mslot *m = merge_find(t, s[i].id, s[i + 1].id);
        if (m) qpush(h, &hn, (qent){m->rank, (uint32_t)i, m->new_id});
    }
    while (hn) {
        if (hn + 2 > c->heapcap) { /* cannot happen: at most one live entry per merge plus seeds */
            size_t ncap = 2 * c->heapcap;
            qent *q = realloc(c->heap, ncap * sizeof *q);
            if (!q) return -1;
            c->heap = h = q; c->heapcap = ncap;
        }
        qent top = qpop(h, &hn);
        sym *cur = &s[top.pos];
        if (cur->len == 0 || cur->next < 0) continue;   /* removed, or last symbol */
        sym right = s[cur->next];
        const mslot *m = merge_find(t, cur->id, right.id);
        if (!m || m->new_id != top.new_id) continue;     /* stale entry (iii) */
        int32_t rpos = cur->next;
        cur->id = top.new_id; cur->len += right.len; cur->next = right.next;   /* (iv) */
        s[rpos].len = 0;
        if (right.next >= 0) s[right.next].prev = (int32_t)top.pos;
        if (cur->prev >= 0) {
            const mslot *pm = merge_find(t, s[cur->prev].id, cur->id);
            if (pm) qpush(h, &hn, (qent){pm->rank, (uint32_t)cur->prev, pm->new_id});
        }
        if (cur->next >= 0) {
            const mslot *nm = merge_find(t, cur->id, s[cur->next].id);
            if (nm) qpush(h, &hn, (qent){nm->rank, top.pos, nm->new_id});
        }
    }
    for (int32_t i = 0; i >= 0; i = s[i].next)
        if (push_ids(out, n, cap, &s[i].id, 1)) return -1;
    return 0;
}

/* encode_max: would this pre-token take the ids past the limit?  Every
 * byte that has a token ends up in exactly one id, and one id covers at
 * most max_tok_bytes of them, so the word gives at least
 * ceil(kept / max_tok_bytes) ids: checked before any merging (a 100 MB
 * word is refused without allocating for it). */
static int word_too_long(enc_ctx *c, const char *w, size_t len)
{
    if (c->max_ids == SIZE_MAX) return 0;
    size_t kept = 0;
    for (size_t i = 0; i < len; i++) kept += c->t->byte_id[(unsigned char)w[i]] >= 0;
    size_t mt = c->t->max_tok_bytes ? c->t->max_tok_bytes : 1;
    size_t lb = kept / mt + (kept % mt != 0);
    return lb > c->max_ids || c->n > c->max_ids - lb;
}

/* Per-call word cache: pre-token bytes -> ids (the reference caches too;
 * it never changes results).  Returns nonzero to stop the scan. */
static int on_word(void *ctx, const char *w, size_t len)
{
    enc_ctx *c = ctx;
    if (c->oom || c->over) return 1;
    if (len > CACHE_MAX_WORD) {
        if (word_too_long(c, w, len)) { c->over = 1; return 1; }
        if (bpe_word(c, (const unsigned char *)w, len, &c->ids, &c->n, &c->cap)) c->oom = 1;
        if (c->n > c->max_ids) c->over = 1;
        return c->oom || c->over;
    }
    uint64_t h = hash_bytes(w, len);
    size_t mask = c->ccap - 1, i = h & mask;
    for (; c->cache[i].s; i = (i + 1) & mask) {
        centry *e = &c->cache[i];
        if (e->h == h && e->len == len && !memcmp(e->s, w, len)) {
            if (e->n > c->max_ids || c->n > c->max_ids - e->n) { c->over = 1; return 1; }
            if (push_ids(&c->ids, &c->n, &c->cap, e->n ? c->cids + e->off : NULL, e->n)) c->oom = 1;
            return c->oom;
        }
    }
    if (word_too_long(c, w, len)) { c->over = 1; return 1; }
    size_t before = c->cn;
    if (bpe_word(c, (const unsigned char *)w, len, &c->cids, &c->cn, &c->ccidcap) ||
        push_ids(&c->ids, &c->n, &c->cap, c->cn > before ? c->cids + before : NULL, c->cn - before)) {
        c->oom = 1;
        return 1;
    }
    if (c->n > c->max_ids) { c->over = 1; return 1; }
    c->cache[i] = (centry){w, (uint32_t)len, (uint32_t)before, (uint32_t)(c->cn - before), h};
    if (++c->cused * 2 > c->ccap) {                    /* grow */
        size_t ncap = c->ccap * 2;
        centry *nc = calloc(ncap, sizeof *nc);
        if (!nc) { c->oom = 1; return 1; }
        for (size_t j = 0; j < c->ccap; j++) {
            if (!c->cache[j].s) continue;
            size_t k = c->cache[j].h & (ncap - 1);
            while (nc[k].s) k = (k + 1) & (ncap - 1);
            nc[k] = c->cache[j];
        }
        free(c->cache);
        c->cache = nc; c->ccap = ncap;
    }
    return 0;
}

static void encode_piece(enc_ctx *c, const char *s, size_t n)
{
    if (c->oom || c->over) return;
    if (c->t->split_qwen) cis2_pretok_split_qwen(s, n, on_word, c);   /* non-normative */
    else cis2_pretok_split(s, n, c->t->digits_mode, c->t->use_regex, on_word, c);
}

static void split_added(enc_ctx *c, const char *s, size_t n, int group);

/* A piece between normalized=false added tokens: normalize it (non-normative
 * NFC, if the file has it), then split it at the normalized=true ones. */
static void normalize_piece(enc_ctx *c, const char *s, size_t n)
{
    if (c->oom || c->over) return;
    char *norm = NULL;
    size_t nn = n;
    if (c->t->nfc && n) {
        char **nb = realloc(c->bufs, (c->nbufs + 1) * sizeof *nb);
        if (!nb || cis2_nfc(s, n, &norm, &nn)) { c->bufs = nb ? nb : c->bufs; c->oom = 1; return; }
        c->bufs = nb;
        if (norm) c->bufs[c->nbufs++] = norm;
    }
    split_added(c, norm ? norm : s, nn, 1);
}

/* Added tokens of one group (normalized = 0 or 1), leftmost-longest, as
 * the reference's Aho-Corasick (MatchKind::LeftmostLongest, non-overlapping)
 * finds them; pieces between them go to the next group, then to the
 * pre-tokenizer.  The text is taken in windows of W >= the longest token:
 * scanning a window (plus maxlen - 1 bytes after it) backwards through the
 * reversed-content automaton gives the longest token starting at each
 * position where one does; the forward pass then takes the leftmost match,
 * skips past it and goes on.  Linear: each window costs W + maxlen and
 * advances by >= W. */
static void split_added(enc_ctx *c, const char *s, size_t n, int group)
{
    const ac_trie *T = &c->t->trie[group];
    if (!T->n || n == 0) {
        if (group == 0) normalize_piece(c, s, n);
        else encode_piece(c, s, n);
        return;
    }
    size_t W = c->bestcap;
    uint32_t *best = c->best[group];
    size_t pos = 0, seg = 0;
    while (pos < n && !c->oom && !c->over) {
        size_t a = pos, b = n - a < W ? n : a + W;
        size_t e = n - b < T->maxlen - 1 ? n : b + T->maxlen - 1;
        /* best[] holds (position, token) pairs, positions descending: only
         * where some token starts (most text has none) */
        uint32_t st = 0;
        size_t nh = 0;
        for (size_t k = e; k-- > a;) {
            uint8_t ch = (uint8_t)s[k];
            if (st == 0 && !T->root_next[ch]) continue; /* stays at the root, no output */
            st = ac_step(T, st, ch);
            if (k < b && T->out[st] != AC_NONE) { best[2 * nh] = (uint32_t)(k - a); best[2 * nh + 1] = T->out[st]; nh++; }
        }
        size_t j = a;
        while (nh && !c->oom && !c->over) {
            size_t at = a + best[2 * (nh - 1)];
            uint32_t tk = best[2 * (nh - 1) + 1];
            nh--;
            if (at < j) continue; /* inside the previous match */
            j = at;
            const added_tok *tok = &c->t->added[tk];
            if (group == 0) normalize_piece(c, s + seg, j - seg);
            else encode_piece(c, s + seg, j - seg);
            if (c->n >= c->max_ids) { c->over = 1; break; }
            if (push_ids(&c->ids, &c->n, &c->cap, &tok->id, 1)) c->oom = 1;
            j += tok->len;
            seg = j;
        }
        pos = j > b ? j : b;
    }
    if (group == 0) normalize_piece(c, s + seg, n - seg);
    else encode_piece(c, s + seg, n - seg);
}

int cis2_tokenizer_encode_max(const cis2_tokenizer *t, const char *text, size_t len, size_t max_ids,
                              uint32_t **ids, size_t *n, cis2_error *err)
{
    *ids = NULL; *n = 0;
    size_t bad;
    if (cis2_utf8_validate((const unsigned char *)text, len, &bad))
        return cis2_fail(err, CIS2_E_FORMAT, "tokenize: input is not valid UTF-8 (byte offset %zu)", bad);
    enc_ctx c = {.t = t, .max_ids = max_ids};
    c.ccap = 1024;
    c.cache = calloc(c.ccap, sizeof *c.cache);
    c.ids = malloc(256 * sizeof *c.ids);
    c.cap = 256;
    size_t maxlen = t->trie[0].maxlen > t->trie[1].maxlen ? t->trie[0].maxlen : t->trie[1].maxlen;
    c.bestcap = maxlen > 4096 ? maxlen : 4096;
    for (int g = 0; g < 2; g++)
        if (t->trie[g].n && !(c.best[g] = malloc(2 * c.bestcap * sizeof *c.best[g]))) c.oom = 1;
    if (!c.cache || !c.ids) c.oom = 1;
    if (!c.oom) split_added(&c, text, len, 0);
    free(c.cache); free(c.cids); free(c.syms); free(c.heap); free(c.best[0]); free(c.best[1]);
    for (size_t i = 0; i < c.nbufs; i++) free(c.bufs[i]);
    free(c.bufs);
    if (c.oom || c.over) {
        free(c.ids);
        if (c.oom) return cis2_fail(err, CIS2_E_NOMEM, "tokenize: out of memory");
        return cis2_fail(err, CIS2_E_USAGE, "prompt is longer than %zu tokens", max_ids);
    }
    *ids = c.ids; *n = c.n;
    return CIS2_OK;
}

int cis2_tokenizer_encode(const cis2_tokenizer *t, const char *text, size_t len,
                          uint32_t **ids, size_t *n, cis2_error *err)
{
    return cis2_tokenizer_encode_max(t, text, len, SIZE_MAX, ids, n, err);
}

/* ---- decoding ---- */
/* Appends s[0..n) as UTF-8 with U+FFFD for each maximal invalid subpart
 * (the substitution of Rust's String::from_utf8_lossy). */
static size_t lossy_utf8(const unsigned char *s, size_t n, char *o)
{
    size_t i = 0, k = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) { o[k++] = (char)c; i++; continue; }
        size_t need; unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c == 0xE0) { need = 2; lo = 0xA0; }
        else if (c == 0xED) { need = 2; hi = 0x9F; }
        else if (c >= 0xE1 && c <= 0xEF) need = 2;
        else if (c == 0xF0) { need = 3; lo = 0x90; }
        else if (c == 0xF4) { need = 3; hi = 0x8F; }
        else if (c >= 0xF1 && c <= 0xF3) need = 3;
        else { k += utf8_put(0xFFFD, o + k); i++; continue; }
        size_t j = 1;
        for (; j <= need && i + j < n; j++) {
            unsigned char d = s[i + j];
            if (d < (j == 1 ? lo : 0x80) || d > (j == 1 ? hi : 0xBF)) break;
        }
        if (j == need + 1) { memcpy(o + k, s + i, need + 1); k += need + 1; }
        else k += utf8_put(0xFFFD, o + k);
        i += j;
    }
    return k;
}

char *cis2_tokenizer_decode(const cis2_tokenizer *t, const uint32_t *ids, size_t n)
{
    size_t len;
    return cis2_tokenizer_decode_n(t, ids, n, &len);
}

char *cis2_tokenizer_decode_n(const cis2_tokenizer *t, const uint32_t *ids, size_t n, size_t *len)
{
    size_t total = 0, l;
    for (size_t i = 0; i < n; i++)
        if (cis2_tokenizer_token_bytes(t, ids[i], &l)) total += l;
    unsigned char *raw = malloc(total + 1);
    char *o = malloc(3 * total + 1);                 /* each bad byte -> 3 bytes */
    if (!raw || !o) { free(raw); free(o); return NULL; }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *b = cis2_tokenizer_token_bytes(t, ids[i], &l);
        if (b) { memcpy(raw + k, b, l); k += l; }
    }
    size_t m = lossy_utf8(raw, k, o);
    o[m] = 0;
    *len = m;
    free(raw);
    return o;
}

char *cis2_utf8_lossy(const char *s, size_t n, size_t *len)
{
    char *o = malloc(3 * n + 1); /* each bad byte -> 3 bytes */
    if (!o) return NULL;
    size_t m = lossy_utf8((const unsigned char *)s, n, o);
    o[m] = 0;
    *len = m;
    return o;
}
