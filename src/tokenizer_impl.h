/*
 * tokenizer_impl.h - what the two halves of the tokenizer share, private to
 * them: the in-memory tokenizer (struct cis2_tokenizer) that
 * tokenizer_load.c builds from tokenizer.json and tokenizer.c reads to
 * encode and decode (CIS-2 §3.1), and the few lookups both use (the
 * hashes of its tables, the vocab lookup, UTF-8 output, a step of the
 * added-token automaton).  Nothing else includes it: the rest of the
 * engine sees the opaque cis2_tokenizer of cis2.h and tokenizer.h.
 */
#ifndef CIS2_TOKENIZER_IMPL_H
#define CIS2_TOKENIZER_IMPL_H

#include "tokenizer.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* split_rx: which Split regex (tokenizer.md "Which tokenizers") */
enum { SPLIT_RX_QWEN = 1, SPLIT_RX_LLAMA3 = 2, SPLIT_RX_O200K = 3 };

/* ---- hashing ---- */
static inline uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}
static inline uint64_t hash_pair(uint64_t k)
{
    k *= 0x9E3779B97F4A7C15ull;
    return k ^ (k >> 31);
}

typedef struct { uint32_t off, len, id; } vslot;             /* vocab: string -> id */
typedef struct { uint64_t key; uint32_t rank, new_id; } mslot; /* merges: pair -> rank, id */
#define MSLOT_EMPTY UINT64_MAX

/* An added token.  It is matched by its content (s), or, normalized with
 * a normalizer, by its content normalized (pn: the reference's
 * split_normalized_trie, docs/tokenizer.md "Added tokens"). */
typedef struct {
    char *s;
    size_t len;
    uint32_t id;
    int normalized, special;
    char *pn;                 /* the normalized content, when it differs from s; else NULL */
    size_t pnlen;
} added_tok;

/* what an added token of group g (normalized 0 or 1) is matched by */
static inline const char *added_pat(const added_tok *a, int g, size_t *len)
{
    if (g && a->pn) { *len = a->pnlen; return a->pn; }
    *len = a->len;
    return a->s;
}

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

/* One normalizer step (non-normative families, tokenizer_load.c). */
enum { NORM_NFC = 1, NORM_PREPEND, NORM_REPLACE };
typedef struct {
    int kind;
    char *a, *b; size_t al, bl;   /* Prepend a; Replace a -> b */
    uint32_t *kmp;                /* Replace: a's failure function (linear search) */
} norm_step;
#define CIS2_TOK_MAX_NORM 8

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
    int nfc, split_rx;        /* non-normative extension (tokenizer_load.c, tokenizer.c) */
    /* NON-NORMATIVE: the model families' shapes (docs/tokenizer.md "Which
     * tokenizers"; outside CIS-2 v0.3b §3).  split_rx: the Split regex,
     * SPLIT_RX_QWEN, SPLIT_RX_LLAMA3 (\p{N}{1,3}) or SPLIT_RX_O200K
     * (gpt-oss, tokenizer.md "The o200k pattern"), 0 none.  norm: the
     * normalizer's steps in order (nfc is also set when one is NFC).
     * sp: SentencePiece-style BPE (no ByteLevel): the symbols are the
     * characters of the normalized text, looked up in
     * the vocab as they are, else their bytes' "<0xXX>" tokens
     * (byte_fallback, fb_id), else unk (fuse_unk); decoding is the
     * Replace("▁"," "), ByteFallback, Fuse, Strip(" ", strip_start, 0)
     * decoder (byte_val: the byte of a "<0xXX>" token, -1 others).
     * split_lit: Split on that literal string, MergedWithPrevious.
     * post_pre / post_post: the TemplateProcessing ids around the text,
     * added by encode with CIS2_TOK_ADD_SPECIAL. */
    norm_step norm[CIS2_TOK_MAX_NORM]; int nnorm;
    /* the normalizer's bounds (tokenizer.md "Normalizers"): a piece of n
     * bytes normalizes to at most norm_f * n + norm_c bytes (norm_f +
     * norm_c <= CIS2_TOK_MAX_NORM_GROWTH, else the file is refused), and
     * to at least n * norm_lo_num / norm_lo_den (num 0: no bound) */
    size_t norm_f, norm_c, norm_lo_num, norm_lo_den;
    int all_kept;             /* every byte has a token (byte-level) or a byte_fallback token (sp): none is dropped */
    int sp, byte_fallback, fuse_unk, can_unk, strip_start;
    int32_t fb_id[256];
    uint32_t unk_id;          /* UINT32_MAX: none */
    int16_t *byte_val;        /* per id, sp only */
    char *split_lit; size_t split_lit_len;
    uint32_t *post_pre, *post_post; size_t npost_pre, npost_post;
    int has_template;
    int metaspace, ms_scheme, ms_split;  /* Metaspace pre-tokenizer: scheme 0 never, 1 first, 2 always */
};

/* tokenizer_family.c (non-normative families), called by tokenizer_load.c
 * (the load) and tokenizer.c (tokfam_normalize); it calls neither. */
#include <jansson.h>
int tokfam_normalizer(cis2_tokenizer *t, json_t *v, const char *path, cis2_error *err);
int tokfam_decoder_sp(cis2_tokenizer *t, json_t *v, const char *path, cis2_error *err);
int tokfam_post(cis2_tokenizer *t, json_t *v, const char *path, cis2_error *err);
int tokfam_build_sp_decode(cis2_tokenizer *t, const char *path, cis2_error *err);
void tokfam_free(cis2_tokenizer *t);
/* t's normalizer on s[0..n): *out (malloc'd) and *on; *out NULL when the
 * text is unchanged.  -1: out of memory. */
int tokfam_normalize(const cis2_tokenizer *t, const char *s, size_t n, char **out, size_t *on);

/* The string arena every token's bytes live in: s[0..n) appended, its
 * offset in *off; -1 when out of memory or beyond 4 GiB (offsets are
 * 32-bit).  Used while loading, by tokenizer_load.c and tokenizer_family.c. */
static inline int tok_arena_add(cis2_tokenizer *t, const char *s, size_t n, uint32_t *off)
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

/* cp as UTF-8 into o[0..4); returns its length */
static inline size_t utf8_put(uint32_t cp, char *o)
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

/* the vocab slot of the string s[0..n): its id, or the empty slot (id UINT32_MAX) */
static inline vslot *vocab_find(const cis2_tokenizer *t, const char *s, size_t n)
{
    size_t mask = t->vcap - 1;
    for (size_t i = hash_bytes(s, n) & mask;; i = (i + 1) & mask) {
        vslot *v = &t->vocab[i];
        if (v->id == UINT32_MAX) return v; /* empty */
        if (v->len == n && !memcmp(t->arena + v->off, s, n)) return v;
    }
}

/* the child of node v on byte c; 0 (the root) if none */
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

#endif
