/*
 * tokenizer.c - byte-level BPE encoding and decoding (CIS-2 §3.1), exact to
 * Hugging Face `tokenizers` 0.23.1 (§3.1.2; FACTS §1.14, §2).
 *
 * Owns: encoding text with a loaded tokenizer (the added-token split
 * (§3.1.6), the rank-ordered merge loop (§3.1.5.c), the concatenation of
 * the ids (§3.1.5.d)) and decode (ids -> bytes -> text), with the
 * tokenizer's accessors.  Loading tokenizer.json into the tables used here
 * (tokenizer_impl.h) is tokenizer_load.c; the pre-tokenizer scanner is
 * pretok.c.  Encode pipeline (§3.1.3), as the reference runs
 * encode(text, false):
 *   1. added tokens are matched leftmost-longest: those with
 *      normalized=false in the raw text, then those with normalized=true
 *      in each piece between them, after the normalizer, by their
 *      normalized contents (docs/tokenizer.md "Added tokens");
 *   2. each remaining piece: Digits, then the GPT-2 pattern (§3.1.4);
 *   3. each pre-token: its bytes -> single-byte tokens (bytes without a
 *      vocab entry are dropped, FACTS §2), then the merge loop;
 *   4. ids concatenated; no post-processing (§3.1.3, §3.3).
 *
 * NON-NORMATIVE extension (a tokenizer loaded with
 * CIS2_TOK_ALLOW_NONNORMATIVE, see tokenizer_load.c; outside CIS-2 v0.3b
 * §3, FACTS §2): Qwen2.5's shape, normalizer NFC (nfc.c) applied to each
 * piece between the normalized=false added tokens (as the reference's
 * AddedVocabulary::extract_and_normalize does), and pre_tokenizer
 * Sequence [Split(Qwen regex, Isolated), ByteLevel(use_regex=false)]
 * (pretok.c) in step 2.  Also the model families' shapes (docs/tokenizer.md
 * "Which tokenizers", tokenizer_family.c): their normalizers in step 1, Llama-3's Split,
 * Metaspace or no pre-tokenizer in step 2, SentencePiece-style symbols
 * (characters, byte_fallback, unk) in step 3, the TemplateProcessing ids
 * with CIS2_TOK_ADD_SPECIAL in step 4, and their decoder.
 *
 * Bounds (docs/inputs.md "tokenizer.json", "Work is linear"): added tokens are matched with an
 * Aho-Corasick automaton over the reversed contents (one per normalized
 * group, built by tokenizer_load.c): scanning the text backwards gives,
 * for every position, the longest added token starting there in O(1)
 * amortized, so leftmost-longest matching is linear in the text whatever
 * the tokens (no rescans, unlike a forward leftmost search).
 * cis2_tokenizer_encode_max stops once the ids exceed its limit.
 *
 * Callers: the library API (cis2.h: cis2_tokenizer_encode,
 * cis2_tokenizer_decode), engine.c, session.c, verify.c and judge.c (the
 * prompt's ids, the generated text), the CLI.
 */
#include "tokenizer_impl.h"
#include "nfc.h"
#include "pretok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_MAX_WORD 128          /* pre-tokens up to this many bytes are cached */

/* ---- lookups in the tables tokenizer_load.c built ---- */
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

static inline uint32_t ac_step(const ac_trie *T, uint32_t v, uint8_t c)
{
    for (;;) {
        uint32_t x = ac_child(T, v, c);
        if (x || v == 0) return x;
        v = T->fail[v];
    }
}

/* ---- accessors ---- */
size_t cis2_tokenizer_vocab_size(const cis2_tokenizer *t) { return t->nids; }
int cis2_tokenizer_is_normative(const cis2_tokenizer *t)
{
    return !t->nfc && !t->nnorm && !t->split_rx && !t->sp && !t->has_template;
}
int cis2_tokenizer_adds_special(const cis2_tokenizer *t) { return t->npost_pre + t->npost_post > 0; }

void cis2_tokenizer_special_ids(const cis2_tokenizer *t, const uint32_t **pre, size_t *npre, const uint32_t **post,
                                size_t *npost)
{
    *pre = t->post_pre; *npre = t->npost_pre;
    *post = t->post_post; *npost = t->npost_post;
}

const char *cis2_tokenizer_token_bytes(const cis2_tokenizer *t, uint32_t id, size_t *len)
{
    if (id >= t->nids || t->dec_len[id] == UINT32_MAX) return NULL;
    *len = t->dec_len[id];
    return t->arena + t->dec_off[id];
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
    const char *text;                   /* the input (Metaspace's "first" piece starts here) */
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

static inline void add_sym(sym *s, size_t *ns, uint32_t id)
{
    s[*ns].id = id; s[*ns].len = 1;
    s[*ns].prev = (int32_t)*ns - 1; s[*ns].next = (int32_t)*ns + 1;
    (*ns)++;
}

/* NON-NORMATIVE (tokenizer_family.c): the symbols of a word of
 * SentencePiece-style BPE, as the reference's BPE::merge_word builds them:
 * each character's own token, else (byte_fallback) its bytes' "<0xXX>"
 * tokens when all exist, else unk, consecutive unks fused (fuse_unk); a
 * pending unk is emitted before the next character found in the vocab (and
 * after byte-fallback tokens that come between, as there). */
static size_t sp_symbols(const cis2_tokenizer *t, const unsigned char *w, size_t len, sym *s)
{
    size_t ns = 0;
    int unk = 0;
    for (size_t i = 0, l; i < len; i += l) {
        cis2_utf8_next(w + i, &l);
        vslot *v = vocab_find(t, (const char *)w + i, l);
        if (v->id != UINT32_MAX) {
            if (unk) { add_sym(s, &ns, t->unk_id); unk = 0; }
            add_sym(s, &ns, v->id);
            continue;
        }
        if (t->byte_fallback) {
            size_t k = 0;
            while (k < l && t->fb_id[w[i + k]] >= 0) k++;
            if (k == l) {
                for (k = 0; k < l; k++) add_sym(s, &ns, (uint32_t)t->fb_id[w[i + k]]);
                continue;
            }
        }
        if (t->unk_id != UINT32_MAX) {
            if (unk && !t->fuse_unk) add_sym(s, &ns, t->unk_id);
            unk = 1;
        }
    }
    if (unk) add_sym(s, &ns, t->unk_id);
    return ns;
}

/* BPE of one pre-token (raw bytes): appends its ids to (*out, *n). */
static int bpe_word(enc_ctx *c, const unsigned char *w, size_t len, uint32_t **out, size_t *n, size_t *cap)
{
    const cis2_tokenizer *t = c->t;
    if (t->ignore_merges && t->sp) {
        vslot *v = vocab_find(t, (const char *)w, len);
        if (v->id != UINT32_MAX) return push_ids(out, n, cap, &v->id, 1);
    } else if (t->ignore_merges) {        /* whole word in the vocab: one token */
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
    if (t->sp) ns = sp_symbols(t, w, len, s);
    else
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
    if (c->t->sp) kept = c->t->can_unk ? 0 : len;   /* a fused unk covers any number of bytes */
    else
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

/* Keeps buf (the word cache may point into it) until the encode ends. */
static int keep_buf(enc_ctx *c, char *buf)
{
    char **nb = realloc(c->bufs, (c->nbufs + 1) * sizeof *nb);
    if (!nb) { free(buf); c->oom = 1; return -1; }
    c->bufs = nb;
    c->bufs[c->nbufs++] = buf;
    return 0;
}

#define META "\xe2\x96\x81"       /* U+2581, Metaspace's replacement */

/* NON-NORMATIVE: the Metaspace pre-tokenizer on one piece, as the
 * reference's: every ' ' becomes "▁"; "▁" is prepended unless the piece
 * starts with one (scheme always; first: only to the piece that starts the
 * input; never); with split, the piece is cut before each "▁" (each "▁"
 * merged with what follows it, MergedWithNext), else it is one word. */
static void metaspace_piece(enc_ctx *c, const char *s, size_t n)
{
    const cis2_tokenizer *t = c->t;
    if (n == 0) return;
    size_t sp = 0;
    for (size_t i = 0; i < n; i++) sp += s[i] == ' ';
    int pre = (t->ms_scheme == 2 || (t->ms_scheme == 1 && s == c->text)) &&
              !(n >= 3 ? !memcmp(s, META, 3) : 0) && !(s[0] == ' ');
    char *b = malloc(n + 2 * sp + 3 * (size_t)pre + 1);
    if (!b) { c->oom = 1; return; }
    size_t k = 0;
    if (pre) { memcpy(b, META, 3); k = 3; }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') { memcpy(b + k, META, 3); k += 3; }
        else b[k++] = s[i];
    }
    if (keep_buf(c, b)) return;
    if (!t->ms_split) { on_word(c, b, k); return; }
    /* MergedWithNext: a "▁" starts a piece, unless the next is also "▁"
     * (then it stands alone); text before the first "▁" is a piece. */
    size_t start = 0;
    for (size_t i = 0; i < k;) {
        if (i + 3 <= k && !memcmp(b + i, META, 3)) {
            if (i > start && on_word(c, b + start, i - start)) return;
            start = i;
            i += 3;
            if (i + 3 <= k && !memcmp(b + i, META, 3)) {    /* "▁" then "▁": alone */
                if (on_word(c, b + start, i - start)) return;
                start = i;
            }
            continue;
        }
        i++;
    }
    if (start < k) on_word(c, b + start, k - start);
}

static void encode_piece(enc_ctx *c, const char *s, size_t n)
{
    if (c->oom || c->over) return;
    const cis2_tokenizer *t = c->t;
    if (t->split_rx == SPLIT_RX_QWEN) cis2_pretok_split_qwen(s, n, on_word, c);   /* non-normative */
    else if (t->split_rx == SPLIT_RX_LLAMA3) cis2_pretok_split_llama3(s, n, on_word, c);
    else if (t->split_rx == SPLIT_RX_O200K) cis2_pretok_split_o200k(s, n, on_word, c);
    else if (t->split_lit) cis2_pretok_split_literal(s, n, t->split_lit, t->split_lit_len, on_word, c);
    else if (t->metaspace) metaspace_piece(c, s, n);
    else if (t->sp) { if (n) on_word(c, s, n); }                      /* no pre-tokenizer: one word */
    else cis2_pretok_split(s, n, t->digits_mode, t->use_regex, on_word, c);
}

static void split_added(enc_ctx *c, const char *s, size_t n, int group);

/* encode_max, before a piece of n bytes is normalized (tokenizer.md
 * "Normalizers"): it becomes at least n * norm_lo_num / norm_lo_den bytes,
 * every one of which ends up in an id (when every byte has a token or a
 * byte_fallback token), and one id covers at most the longest vocab token
 * or normalized added token: so a piece too long for the room left is
 * refused before the normalizer copies (and may grow) it. */
static int norm_too_long(enc_ctx *c, size_t n)
{
    const cis2_tokenizer *t = c->t;
    if (!t->norm_lo_num || !t->all_kept) return 0;
    size_t num = t->norm_lo_num, den = t->norm_lo_den;   /* both <= 2^20 */
    size_t bytes = n / den * num + n % den * num / den;  /* floor(n * num / den) */
    size_t cover = t->max_tok_bytes > t->trie[1].maxlen ? t->max_tok_bytes : t->trie[1].maxlen;
    if (!cover) cover = 1;
    size_t lb = bytes / cover + (bytes % cover != 0);
    return lb > c->max_ids || c->n > c->max_ids - lb;
}

/* A piece between normalized=false added tokens: normalize it (non-normative
 * NFC, if the file has it), then split it at the normalized=true ones. */
static void normalize_piece(enc_ctx *c, const char *s, size_t n)
{
    if (c->oom || c->over) return;
    char *norm = NULL;
    size_t nn = n;
    if (c->t->nnorm && n && c->max_ids != SIZE_MAX && norm_too_long(c, n)) { c->over = 1; return; }
    if (c->t->nnorm && n) {
        char **nb = realloc(c->bufs, (c->nbufs + 1) * sizeof *nb);
        if (!nb || tokfam_normalize(c->t, s, n, &norm, &nn)) { c->bufs = nb ? nb : c->bufs; c->oom = 1; return; }
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
            size_t pl;
            added_pat(tok, group, &pl);
            j += pl;
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
    return cis2_tokenizer_encode_flags(t, text, len, 0, max_ids, ids, n, err);
}

/* With CIS2_TOK_ADD_SPECIAL, the post-processor's ids around the text
 * (TemplateProcessing single, non-normative; tokenizer_family.c), as the
 * reference's encode(text, add_special_tokens=True). */
int cis2_tokenizer_encode_flags(const cis2_tokenizer *t, const char *text, size_t len, unsigned flags,
                                size_t max_ids, uint32_t **ids, size_t *n, cis2_error *err)
{
    size_t extra = flags & CIS2_TOK_ADD_SPECIAL ? t->npost_pre + t->npost_post : 0;
    if (extra) {
        if (max_ids < extra) return cis2_fail(err, CIS2_E_USAGE, "prompt is longer than %zu tokens", max_ids);
        uint32_t *body;
        size_t nb;
        int rc = cis2_tokenizer_encode_flags(t, text, len, 0, max_ids == SIZE_MAX ? SIZE_MAX : max_ids - extra,
                                             &body, &nb, err);
        if (rc) { *ids = NULL; *n = 0; return rc; }
        uint32_t *all = malloc((nb + extra) * sizeof *all);
        if (!all) { free(body); *ids = NULL; *n = 0; return cis2_fail(err, CIS2_E_NOMEM, "tokenize: out of memory"); }
        if (t->npost_pre) memcpy(all, t->post_pre, t->npost_pre * sizeof *all); /* NULL when none: memcpy's UB */
        if (nb) memcpy(all + t->npost_pre, body, nb * sizeof *all);
        if (t->npost_post) memcpy(all + t->npost_pre + nb, t->post_post, t->npost_post * sizeof *all);
        free(body);
        *ids = all; *n = nb + extra;
        return CIS2_OK;
    }
    *ids = NULL; *n = 0;
    size_t bad;
    if (cis2_utf8_validate((const unsigned char *)text, len, &bad))
        return cis2_fail(err, CIS2_E_FORMAT, "tokenize: input is not valid UTF-8 (byte offset %zu)", bad);
    enc_ctx c = {.t = t, .max_ids = max_ids, .text = text};
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

int cis2_tokenizer_encode_ext(const cis2_tokenizer *t, const char *text, size_t len, unsigned flags,
                              uint32_t **ids, size_t *n, cis2_error *err)
{
    return cis2_tokenizer_encode_flags(t, text, len, flags, SIZE_MAX, ids, n, err);
}

/* ---- decoding ---- */
char *cis2_tokenizer_decode(const cis2_tokenizer *t, const uint32_t *ids, size_t n)
{
    size_t len;
    return cis2_tokenizer_decode_n(t, ids, n, &len);
}

/* NON-NORMATIVE: SentencePiece-style decoding, as the reference's decoder
 * Sequence [Replace("▁", " "), ByteFallback, Fuse, Strip(" ", k, 0)]: each
 * token's text with "▁" as " " (tokenizer_family.c); a run of "<0xXX>"
 * tokens becomes its bytes when they are valid UTF-8, else one U+FFFD per
 * byte; the text joined; then up to k leading spaces removed. */
static char *decode_sp(const cis2_tokenizer *t, const uint32_t *ids, size_t n, size_t *len)
{
    size_t total = 0, l;
    for (size_t i = 0; i < n; i++)
        if (cis2_tokenizer_token_bytes(t, ids[i], &l)) total += l + 3;
    char *o = malloc(total + 1);
    unsigned char *run = malloc(n + 1);
    if (!o || !run) { free(o); free(run); return NULL; }
    size_t k = 0, nr = 0;
    for (size_t i = 0; i <= n; i++) {
        const char *b = i < n ? cis2_tokenizer_token_bytes(t, ids[i], &l) : NULL;
        if (i < n && !b) continue;                   /* unknown id: skipped */
        if (b && t->byte_val[ids[i]] >= 0) { run[nr++] = (unsigned char)t->byte_val[ids[i]]; continue; }
        if (nr) {
            if (!cis2_utf8_validate(run, nr, NULL)) { memcpy(o + k, run, nr); k += nr; }
            else for (size_t j = 0; j < nr; j++) { memcpy(o + k, "\xef\xbf\xbd", 3); k += 3; }
            nr = 0;
        }
        if (b) { memcpy(o + k, b, l); k += l; }
    }
    free(run);
    size_t cut = 0;
    while ((int)cut < t->strip_start && cut < k && o[cut] == ' ') cut++;
    memmove(o, o + cut, k - cut);
    k -= cut;
    o[k] = 0;
    *len = k;
    return o;
}

char *cis2_tokenizer_decode_n(const cis2_tokenizer *t, const uint32_t *ids, size_t n, size_t *len)
{
    if (t->sp) return decode_sp(t, ids, n, len);
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
    size_t m = cis2_utf8_lossy_into(raw, k, o); /* utf8.c */
    o[m] = 0;
    *len = m;
    free(raw);
    return o;
}

