/*
 * cis2.h - the public API of cis2, a canonical fp32 transformer engine
 * implementing CIS-2 v0.3b (../shared/spec/CIS2_SPEC_v0.3b.md).
 *
 * Everything a program linking libcis2.a may call is declared here; the
 * per-module headers in src/ are internal.  Every floating-point operation
 * behind these functions is pinned by the spec: FTZ/DAZ on (§1.3), no FMA
 * (§1.4), no reassociation (§1.5), the sequential reduction order (§5) and
 * the pinned transcendental routes (§6).
 */
#ifndef CIS2_H
#define CIS2_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CIS2_VERSION "0.1.0"
#define CIS2_SPEC_VERSION "0.3b"

/* ---- Errors: one exit code per failure class (README "Exit codes"). ---- */
enum cis2_status {
    CIS2_OK = 0,
    CIS2_E_MISMATCH = 1,    /* a conformance/verification value differs   */
    CIS2_E_USAGE = 2,       /* bad command line                           */
    CIS2_E_IO = 3,          /* file missing, unreadable, unwritable       */
    CIS2_E_FORMAT = 4,      /* malformed input file (json, safetensors..) */
    CIS2_E_UNSUPPORTED = 5, /* well-formed but outside what cis2 runs     */
    CIS2_E_HASH = 6,        /* pinned artifact sha256 mismatch (§2.1)     */
    CIS2_E_FPENV = 7,       /* FTZ/DAZ pin or self-test failed (§1.3)     */
    CIS2_E_NONDET = 8,      /* two in-process runs differ (§12.4)         */
    CIS2_E_NOMEM = 9,       /* allocation failed / size limit exceeded    */
    CIS2_E_INTERNAL = 10    /* a bug                                      */
};

typedef struct cis2_error {
    int code;       /* enum cis2_status                                 */
    char msg[512];  /* one line, no trailing newline                    */
} cis2_error;

/* Records code and a printf-formatted message (first error wins); returns code. */
int cis2_fail(cis2_error *err, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
const char *cis2_status_name(int code);

/* ---- §1.3 floating-point environment ---- */
/* Pins FTZ+DAZ (x86-64 MXCSR) or FZ (aarch64 FPCR) for the calling thread and
 * reads it back.  Returns CIS2_OK or CIS2_E_FPENV. */
int cis2_fpenv_pin(cis2_error *err);
/* 1 if the calling thread's control register has the pin bits set. */
int cis2_fpenv_is_pinned(void);
/* The adversarial self-test (§1.3 + FACTS §1.1, §3).  Requires the pin. */
int cis2_fpenv_selftest(cis2_error *err);
/* Name of the ISA leg compiled in: "x86-64" or "aarch64". */
const char *cis2_isa_name(void);

/* ---- §5 reductions, §6 transcendentals, §11.2 argmax ---- */
float cis2_dot_seq(const float *a, const float *b, size_t n);    /* §5.1 */
float cis2_sum_seq(const float *a, size_t n);                    /* §5.3 */
float cis2_exp_pinned(float x);                                  /* §6.2 */
float cis2_ldexp_exact(float x, int k);                          /* §6.2.1 */
float cis2_ln_pinned(float x);                                   /* §6.5 */
float cis2_frexp_exact(float x, int *exponent);                  /* §6.5.1 */
float cis2_sin_pinned(float x);                                  /* §6.3 */
float cis2_cos_pinned(float x);                                  /* §6.3 */
float cis2_rsqrt_cr(float x);                                    /* §6.1 */
float cis2_silu_pinned(float x);                                 /* §6.4 */
/* The same functions over arrays, four lanes at a time: the scalar bits. */
void cis2_exp_pinned_n(const float *x, float *out, size_t n);
void cis2_silu_pinned_n(const float *x, float *out, size_t n);
size_t cis2_argmax(const float *v, size_t n);                    /* §11.2 */

/* §8 RMSNorm: out[i] = (x[i]*inv)*w[i], inv = rsqrt(sum_seq(x*x)/n + eps). */
void cis2_rmsnorm(const float *x, const float *w, float eps, size_t n, float *out);
/* §9.3 softmax_seq in place: strict-> max, exp_pinned(v-max), sum_seq, divide. */
void cis2_softmax_seq(float *v, size_t n);
/* §7.4 rotate-half RoPE of one head in place (cos/sin of length half). */
void cis2_rope_rotate(float *head, const float *cosv, const float *sinv, size_t half);
/* §9.2-§9.4 for one query head over len cached positions: k and v rows are
 * `stride` floats apart; scores (len floats) receives the probabilities. */
void cis2_attend_head(const float *q, const float *k, const float *v, size_t stride, size_t len,
                      size_t head_dim, float *scores, float *out);

/* The same §9.2-§9.4 computation with the keys in the KV cache's blocked
 * layout: key j, dim d at kt[(j / 16) * kt_block + d * 16 + j % 16]
 * (kt_block = 16 * head_dim).  Lanes run across cached positions; each
 * position's dot product keeps §5.1's order, so the bits equal
 * cis2_attend_head's. */
void cis2_attend_head_kt(const float *q, const float *kt, const float *v, size_t v_stride, size_t len,
                         size_t head_dim, float *scores, float *out);

/* §7.1: inv_freq[0..head_dim/2) for rope_theta (as f32). */
void cis2_rope_inv_freq(float rope_theta, size_t head_dim, float *inv_freq);
/* §6.6 and §7.2 digests, 32 raw bytes each. */
void cis2_table_digest(uint8_t out[32]);
void cis2_inv_freq_table_digest(const float *inv_freq, size_t half, uint8_t out[32]);

/* ---- SHA-256 (OpenSSL EVP) ---- */
void cis2_sha256(const void *data, size_t len, uint8_t out[32]);
int cis2_sha256_file(const char *path, uint8_t out[32], cis2_error *err);
void cis2_hex(const uint8_t *bytes, size_t n, char *out /* 2n+1 */);
int cis2_unhex32(const char *hex, uint8_t out[32]); /* 0 ok, -1 bad */

/* ---- self-test (cis2 selftest) ---- */
/* Runs the §1.3 pin and probes plus the §6.6/§7.2 and §5.1/§6.1 checks,
 * printing one line per check to `out` (may be NULL).  Returns CIS2_OK or
 * the failure class. */
int cis2_selftest(FILE *out, cis2_error *err);

/* ---- §3.1 tokenizer: byte-level BPE from tokenizer.json, exact to Hugging
 * Face `tokenizers` 0.23.1 (src/tokenizer.c). ---- */
typedef struct cis2_tokenizer cis2_tokenizer;
/* Reads and validates tokenizer.json; CIS2_E_IO / _FORMAT / _UNSUPPORTED. */
int cis2_tokenizer_load(cis2_tokenizer **out, const char *path, cis2_error *err);
/* cis2_tokenizer_load with flags.  CIS2_TOK_ALLOW_NONNORMATIVE also admits
 * Qwen2.5's shape (normalizer NFC; pre_tokenizer Sequence [Split with its
 * regex, ByteLevel use_regex=false]), which is outside CIS-2 v0.3b §3: a
 * non-normative extension, exact to the reference library all the same. */
#define CIS2_TOK_ALLOW_NONNORMATIVE 1u
int cis2_tokenizer_load_ext(cis2_tokenizer **out, const char *path, unsigned flags, cis2_error *err);
void cis2_tokenizer_free(cis2_tokenizer *t);
/* Encodes UTF-8 text (len bytes) as the reference's encode(text, false):
 * added tokens matched first, no special tokens inserted.  Invalid UTF-8 is
 * CIS2_E_FORMAT.  *ids is malloc'ed (free it), *n its length. */
int cis2_tokenizer_encode(const cis2_tokenizer *t, const char *text, size_t len,
                          uint32_t **ids, size_t *n, cis2_error *err);
/* Decode for display: the bytes of all ids concatenated, rendered as UTF-8
 * with U+FFFD for invalid sequences; unknown ids are skipped.  Never fails
 * except for memory (NULL).  Returns a malloc'ed NUL-terminated string. */
char *cis2_tokenizer_decode(const cis2_tokenizer *t, const uint32_t *ids, size_t n);
/* Max id + 1 over the model vocab and the added tokens. */
size_t cis2_tokenizer_vocab_size(const cis2_tokenizer *t);
/* 0 when the file uses the non-normative extension (NFC / Qwen Split). */
int cis2_tokenizer_is_normative(const cis2_tokenizer *t);

#ifdef __cplusplus
}
#endif
#endif /* CIS2_H */
