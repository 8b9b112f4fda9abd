/*
 * witness.c - §12.1's witness chain and §12.2's argmax digest (witness.h).
 */
#include "witness.h"
#include "pmath.h"

#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "cis2 hashes f32/u32 memory as little-endian bytes; big-endian hosts are not supported"
#endif

int cis2_witness_begin(cis2_sha *w, const cis2_model *m, const uint32_t *prompt, size_t n,
                       const uint8_t *params_digest)
{
    if (cis2_sha_init(w)) return -1;
    cis2_sha_update(w, m->weights_sha, 32);    /* 1 */
    cis2_sha_update(w, m->tokenizer_sha, 32);  /* 2 */
    cis2_sha_update(w, m->config_sha, 32);     /* 3 */
    cis2_sha_update(w, m->table_digest, 32);   /* 4 */
    cis2_sha_update(w, m->inv_freq_digest, 32); /* 5 */
    for (size_t i = 0; i < n; i++) cis2_sha_u32le(w, prompt[i]); /* 6 */
    if (params_digest) cis2_sha_update(w, params_digest, 32);    /* 6b, docs/sampling.md */
    return 0;
}

/* 1 if any of l[0..n) is a NaN.  A NaN-free row (every row of a sane
 * model) is then hashed as one run; the test compares, it changes no bit,
 * and it runs 16 elements at a time where the per-element loop below
 * branches on every one. */
static int any_nan(const float *l, size_t n)
{
    typedef float v4f __attribute__((vector_size(16), aligned(4))); /* the width every target has */
    typedef int32_t v4i __attribute__((vector_size(16)));
    v4i any = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v4f a, b, c, d;
        memcpy(&a, l + i, sizeof a);
        memcpy(&b, l + i + 4, sizeof b);
        memcpy(&c, l + i + 8, sizeof c);
        memcpy(&d, l + i + 12, sizeof d);
        any |= (a != a) | (b != b) | (c != c) | (d != d);
    }
    if (any[0] | any[1] | any[2] | any[3]) return 1;
    for (; i < n; i++)
        if (l[i] != l[i]) return 1;
    return 0;
}

void cis2_witness_logits(cis2_sha *w, const float *l, size_t n)
{
    size_t start = 0; /* 7a: the logits as u32 LE bits, NaN canonical */
    for (size_t i = any_nan(l, n) ? 0 : n; i < n; i++)
        if (l[i] != l[i]) {
            cis2_sha_update(w, l + start, (i - start) * sizeof(float));
            cis2_sha_u32le(w, CIS2_QNAN_BITS);
            start = i + 1;
        }
    cis2_sha_update(w, l + start, (n - start) * sizeof(float));
}

void cis2_witness_token(cis2_sha *w, uint32_t token) { cis2_sha_u32le(w, token); } /* 7b */

void cis2_witness_step(cis2_sha *w, const float *l, size_t n, uint32_t token)
{
    cis2_witness_logits(w, l, n);
    cis2_witness_token(w, token);
}

int cis2_argmax_digest(const uint32_t *prompt, size_t n_prompt, const uint32_t *gen, size_t n_gen, uint8_t out[32])
{
    cis2_sha a;
    if (cis2_sha_init(&a)) return -1;
    for (size_t i = 0; i < n_prompt; i++) cis2_sha_u32le(&a, prompt[i]);
    for (size_t i = 0; i < n_gen; i++) cis2_sha_u32le(&a, gen[i]);
    cis2_sha_final(&a, out);
    return 0;
}
