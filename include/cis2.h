/*
 * cis2.h - the public API of cis2, a canonical fp32 transformer engine
 * implementing CIS-2 v0.3b (../shared/spec/CIS2_SPEC_v0.3b.md).
 *
 * This header is the engine's contract: a program embeds cis2 with it and
 * libcis2 (libcis2.so or libcis2.a, `pkg-config cis2`), and the `cis2`
 * command line, the HTTP server and the Python package are its clients.
 * Every floating-point operation behind these functions is pinned by the
 * spec: FTZ/DAZ on (§1.3), no FMA (§1.4), no reassociation (§1.5), the
 * sequential reduction orders (§5) and the pinned transcendental routes
 * (§6), so the same inputs give the same bits on every conforming build.
 * What the program and the tests use around an engine (files written
 * whole, the pinned functions one by one, SHA-256, the tokenizer without
 * weights, synthetic checkpoints) is the toolkit, include/cis2_toolkit.h.
 *
 * Contents
 *   1. Version, errors, memory
 *   2. Floating-point environment
 *   3. Engines: open a checkpoint, its configuration and digests
 *   4. Tokens: tokenize and detokenize
 *   5. Generation: many sequences sharing every weight pass
 *      (sampling, stop rules and logprobs: the EXTENSION of
 *      docs/sampling.md, beyond CIS-2 v0.3b, marked where it begins)
 *   6. Sessions: sequences that join and leave a running batch
 *   7. Receipts and verdicts: make, write, parse, verify, check, compare
 *   8. Traces: every intermediate tensor, and where two runs diverge
 *   9. Scoring: the logprobs of given text (EXTENSION, docs/sampling.md §S11)
 *
 * Conventions
 *   - Functions that can fail return an enum cis2_status code (CIS2_OK is
 *     0) and, when `err` is not NULL, fill it with a one-line message; the
 *     first error recorded in an err wins.  The codes are the `cis2`
 *     program's exit codes (README "Exit codes").
 *   - Every buffer the library returns through a pointer argument (ids,
 *     text, logits) is released with cis2_free(); handles have their own
 *     *_free/_close function.  NULL is accepted by every free function.
 *   - Floating-point environment: every function that computes pins FTZ/DAZ
 *     and round-to-nearest-even for its own work on the calling thread and
 *     restores the caller's MXCSR (x86-64) or FPCR (aarch64), status flags
 *     included, before it returns; callbacks into the caller run with the
 *     caller's register restored.  An embedder never needs to pin, and its
 *     own arithmetic is never affected (section 2).
 *   - Threads: an engine owns a pool of worker threads (section 3).  A
 *     handle may be used from any thread, but not from two at once, except
 *     engines: any calls on one engine may run concurrently from several
 *     threads (generate, sessions, each with its own session handle,
 *     verify, tokenize, receipts); cis2_engine_set_kernel/_set_threads
 *     wait until no call computes with it.  Only cis2_engine_close must
 *     not overlap another call on the engine.  Results never depend on
 *     threads, kernels or batching.
 */
#ifndef CIS2_H
#define CIS2_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CIS2_API __attribute__((visibility("default")))
#else
#define CIS2_API
#endif

/* ======================================================================
 * 1. Version, errors, memory
 * ====================================================================== */

#define CIS2_VERSION "0.3.0"
#define CIS2_SPEC_VERSION "0.3b"
/* Bumped whenever a public struct's layout or a function's meaning
 * changes, so that bindings and dynamically linked programs can refuse a
 * library they were not built for. */
#define CIS2_ABI_VERSION 3u

/* "0.3.0": the library's CIS2_VERSION (compare with the header's). */
CIS2_API const char *cis2_version(void);
/* The library's CIS2_ABI_VERSION: a program or binding built against
 * another value must not use the library. */
CIS2_API unsigned cis2_abi_version(void);
/* What this build runs beyond CIS-2 v0.3b (a bit set). */
#define CIS2_FEATURE_SAMPLING 1u    /* cis2_sampling (docs/sampling.md) */
#define CIS2_FEATURE_STOP_RULES 2u  /* cis2_stop */
#define CIS2_FEATURE_LOGPROBS 4u    /* cis2_request.logprobs / top_logprobs */
#define CIS2_FEATURE_SCORE 8u       /* cis2_score (section 9) */
CIS2_API unsigned cis2_features(void);

enum cis2_status {
    CIS2_OK = 0,
    CIS2_E_MISMATCH = 1,    /* a conformance/verification value differs   */
    CIS2_E_USAGE = 2,       /* bad arguments                              */
    CIS2_E_IO = 3,          /* file missing, unreadable, unwritable       */
    CIS2_E_FORMAT = 4,      /* malformed input (json, safetensors, ...)   */
    CIS2_E_UNSUPPORTED = 5, /* well-formed but outside what cis2 runs     */
    CIS2_E_HASH = 6,        /* artifact sha256 differs from the expected  */
    CIS2_E_FPENV = 7,       /* FTZ/DAZ pin or self-test failed (§1.3)     */
    CIS2_E_NONDET = 8,      /* two in-process runs differ (§12.4)         */
    CIS2_E_NOMEM = 9,       /* allocation failed / size limit exceeded    */
    CIS2_E_INTERNAL = 10,   /* a bug                                      */
    CIS2_E_CANCELLED = 11   /* a callback asked to stop                   */
};

typedef struct cis2_error {
    int code;       /* enum cis2_status                                 */
    char msg[512];  /* one line, no trailing newline                    */
} cis2_error;

/* Records code and a printf-formatted message (first error wins); returns code. */
CIS2_API int cis2_fail(cis2_error *err, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* "ok", "mismatch", "usage", ... for a status code. */
CIS2_API const char *cis2_status_name(int code);
/* Releases a buffer this library returned (ids, text, logits).  NULL is fine. */
CIS2_API void cis2_free(void *p);

/* ======================================================================
 * 2. Floating-point environment (§1.3)
 *
 * The library pins for itself (see Conventions).  These are for programs
 * that do pinned arithmetic of their own, and for the self-test.
 * ====================================================================== */

/* Pins FTZ+DAZ, round-to-nearest-even and masked traps (x86-64 MXCSR) or
 * FZ and round-to-nearest (aarch64 FPCR) for the calling thread, by
 * read-modify-write, and reads it back.  CIS2_OK or CIS2_E_FPENV. */
CIS2_API int cis2_fpenv_pin(cis2_error *err);
/* 1 if the calling thread's control register is pinned as above. */
CIS2_API int cis2_fpenv_is_pinned(void);
/* The adversarial self-test (§1.3, FACTS §1.1, §3) under the pin; the
 * caller's register is restored afterwards.  CIS2_OK or CIS2_E_FPENV. */
CIS2_API int cis2_fpenv_selftest(cis2_error *err);
/* Name of the ISA leg compiled in: "x86-64" or "aarch64". */
CIS2_API const char *cis2_isa_name(void);

/* ======================================================================
 * 3. Engines
 *
 * An engine is one loaded checkpoint: DIR/model.safetensors (or a sharded
 * checkpoint: DIR/model.safetensors.index.json and its shards, whose
 * weights_sha256 is docs/inputs.md's "Sharded checkpoints" rule),
 * config.json and tokenizer.json, each read once and hashed (§2.1) from
 * exactly the bytes that are used, the weights packed for the matrix
 * kernels, plus its worker threads and kernel choice.
 * ====================================================================== */

typedef struct cis2_engine cis2_engine;

/* Accepted, no effect: the model families' tokenizer.json
 * shapes (Qwen, Llama-3, Llama-2/Mistral, Gemma-3; outside CIS-2 v0.3b §3,
 * docs/tokenizer.md) load without it; tokenizer_normative tells them apart. */
#define CIS2_OPEN_TOKENIZER_EXT 1u
/* Fail the open when tokenizer.json does not load (its error: file and
 * key, CIS2_E_UNSUPPORTED for what cis2 does not implement), before any
 * weight is read; without it such an engine opens for ids prompts. */
#define CIS2_OPEN_NEED_TOKENIZER 2u

typedef struct cis2_engine_opts {
    int threads;            /* worker threads incl. the caller; <= 0: online CPUs */
    const char *kernel;     /* "auto" (NULL), "scalar", "avx2", "avx512", "neon" */
    unsigned flags;         /* CIS2_OPEN_* */
    /* Optional pinned hashes (32 raw bytes each, NULL: not checked).  A
     * difference fails the open with CIS2_E_HASH naming both values. */
    const uint8_t *expect_weights_sha256;
    const uint8_t *expect_config_sha256;
    const uint8_t *expect_tokenizer_sha256;
} cis2_engine_opts;

/* Opens the checkpoint in model_dir (opts may be NULL: defaults).  Runs the
 * §1.3 self-test first (CIS2_E_FPENV).  A tokenizer.json the tokenizer
 * cannot load does not fail the open (it is still hashed, §12.1): the
 * engine then runs prompts given as ids, and cis2_engine_tokenize reports
 * the loader's error.  A generation_config.json in model_dir adds its
 * eos_token_id to the eos list (cis2_model_info.eos_ids); one that is
 * malformed fails the open (CIS2_E_FORMAT, naming the file). */
CIS2_API int cis2_engine_open(cis2_engine **out, const char *model_dir, const cis2_engine_opts *opts,
                              cis2_error *err);
CIS2_API void cis2_engine_close(cis2_engine *e);

/* The configuration, artifact hashes and digests of an engine. */
typedef struct cis2_model_info {
    char model_type[32];            /* "llama", "qwen2" */
    size_t hidden_size, intermediate_size, num_layers, num_heads, num_kv_heads, head_dim;
    size_t vocab_size, max_position_embeddings;
    float rms_norm_eps;             /* §2.3 f32 cast */
    float rope_theta;               /* §7.1 f32 cast */
    int tied;                       /* §11.1 LM head = embed_tokens */
    int qkv_bias;                   /* §9.1 biases present */
    size_t weight_bytes;            /* packed weight bytes read per decoded token */
    uint8_t weights_sha256[32], config_sha256[32], tokenizer_sha256[32]; /* §2.1 */
    uint8_t table_digest[32];       /* §6.6 */
    uint8_t inv_freq_table_digest[32]; /* §7.2 */
    size_t n_eos;                   /* the eos list (docs/sampling.md §S5.1): config.json's
                                       eos_token_id(s), then the new ones of
                                       generation_config.json's when the
                                       directory has one */
    uint32_t eos_ids[64];
    int eos_malformed;              /* eos_token_id is there but not u32s: stop-at-eos is refused */
    int has_tokenizer;              /* tokenizer.json loaded */
    int tokenizer_normative;        /* 0: a family's shape outside v0.3b §3 (docs/tokenizer.md) */
    const char *kernel;             /* the matrix kernel in use */
    int threads;                    /* worker threads incl. the caller */
    const char *model_dir;
} cis2_model_info;
CIS2_API const cis2_model_info *cis2_engine_info(const cis2_engine *e);

/* Changes the kernel / thread count; never changes a bit.  Waits until no
 * call computes with the engine (other threads' calls finish first); from
 * inside a call (a token callback) CIS2_E_USAGE. */
CIS2_API int cis2_engine_set_kernel(cis2_engine *e, const char *kernel, cis2_error *err);
CIS2_API int cis2_engine_set_threads(cis2_engine *e, int threads, cis2_error *err);
/* Speculative decoding for every later generate and session step:
 * "lookup" or "lookup:K" drafts up to K (1..16, default 4) tokens per step
 * by prompt lookup (the latest earlier match of the last 3, 2 or 1 tokens
 * in the prompt and the text so far), "draft:DIR" or "draft:DIR:K" by the
 * greedy decoding of the model in DIR (loaded here; its tokenizer.json
 * must be this model's, else CIS2_E_USAGE; unreadable, CIS2_E_IO), and
 * checks them in one pass of K+1 rows; "off" (or NULL, the default)
 * decodes one token per pass.  Never
 * changes a bit: tokens, logprobs, witness, finish and receipts are plain
 * decoding's (docs/speculate.md); only the time can differ.  Not used by
 * traced or recompute runs.  Waits like set_kernel; a bad spec is
 * CIS2_E_USAGE and leaves the setting as it was. */
CIS2_API int cis2_engine_set_speculate(cis2_engine *e, const char *spec, cis2_error *err);
/* The grammar of a speculate spec alone, with no engine and nothing
 * loaded: CIS2_OK, or CIS2_E_USAGE with the message
 * cis2_engine_set_speculate would give ("off", "lookup", "lookup:K",
 * "draft:DIR", "draft:DIR:K", K 1..16; docs/speculate.md).  Whether DIR
 * holds a model is set_speculate's to find out.  For clients that refuse
 * a bad option before any work (the CLI, the server). */
CIS2_API int cis2_speculate_check(const char *spec, cis2_error *err);
/* A drafter of the caller's own for speculative decoding: given a decoding
 * sequence's prompt ids and the tokens it generated so far, writes up to
 * max_k proposed next tokens into out and returns how many (0: no draft
 * this step; more than max_k count as max_k; an id >= vocab_size ends the
 * draft there).  Every draft is checked against the model's own choice,
 * as lookup's are, so none can change a bit of any output; a wrong one
 * only costs time.  Called during cis2_generate and session steps, on the
 * stepping thread, once per decoding sequence per step; it must not call
 * the engine. */
typedef size_t (*cis2_draft_fn)(void *ctx, const uint32_t *prompt, size_t n_prompt, const uint32_t *gen,
                                size_t n_gen, size_t max_k, uint32_t *out);
/* Speculation with fn as the drafter, up to k (1..16) drafted tokens per
 * step; fn NULL turns speculation off.  Replaces the setting of
 * cis2_engine_set_speculate (and that one replaces this).  Waits like
 * set_kernel; k out of range is CIS2_E_USAGE, the setting unchanged. */
CIS2_API int cis2_engine_set_drafter(cis2_engine *e, cis2_draft_fn fn, void *ctx, unsigned k, cis2_error *err);
/* 1 if this build and CPU can run the named kernel ("auto" always). */
CIS2_API int cis2_kernel_available(const char *name);

/* ======================================================================
 * 4. Tokens (§3.1)
 * ====================================================================== */

/* UTF-8 text (len bytes) to ids, as the reference's encode(text, false):
 * added tokens matched first, no special tokens inserted.  Invalid UTF-8 is
 * CIS2_E_FORMAT; an engine without a tokenizer reports why.  *ids is
 * cis2_free()d by the caller. */
CIS2_API int cis2_engine_tokenize(const cis2_engine *e, const char *text, size_t len, uint32_t **ids, size_t *n,
                                  cis2_error *err);
/* A text prompt's ids as a run computes them (docs/receipts.md "Prompt
 * tokens"): cis2_engine_tokenize's with the tokenizer's special tokens, as
 * transformers' encode(text) (add_special_tokens=True: Llama-2's and
 * Gemma-3's BOS; nothing for SmolLM2 and Qwen).  *ids is cis2_free()d. */
CIS2_API int cis2_engine_tokenize_prompt(const cis2_engine *e, const char *text, size_t len, uint32_t **ids,
                                         size_t *n, cis2_error *err);
/* The prompt bytes a receipt records for an ids prompt (docs/receipts.md
 * "Prompt tokens"): bytes whose tokenization as a text prompt (with the
 * tokenizer's special tokens, as transformers' encode(text)) gives exactly
 * these ids; the post-processor's ids (Llama-2's BOS) must lead them and
 * have no bytes of their own.  CIS2_E_USAGE when no bytes reproduce the
 * ids: such a prompt still runs, and its receipt records it as ids
 * (docs/receipts.md "Prompts given as ids").  *text (NUL-terminated) is
 * cis2_free()d. */
CIS2_API int cis2_engine_prompt_bytes(const cis2_engine *e, const uint32_t *ids, size_t n, char **text, size_t *len,
                                      cis2_error *err);
/* Ids to the bytes they stand for, concatenated (raw: may be invalid UTF-8
 * or hold NULs; *text is NUL-terminated, *len excludes the NUL).  Unknown
 * ids are skipped.  With `display`, invalid UTF-8 becomes U+FFFD. */
CIS2_API int cis2_engine_detokenize(const cis2_engine *e, const uint32_t *ids, size_t n, int display, char **text,
                                    size_t *len, cis2_error *err);

/* ======================================================================
 * 5. Generation
 *
 * A request is one sequence: a prompt (text or ids) and how to continue
 * it.  cis2_generate decodes many requests together, sharing every weight
 * pass (continuous batching, bounded memory); each result is bit for bit
 * the result of the same request run alone.
 * ====================================================================== */

/* ---- EXTENSION (docs/sampling.md; CIS2_FEATURE_SAMPLING, _STOP_RULES,
 * _LOGPROBS): beyond CIS-2 v0.3b, which is greedy only.  Requests without
 * sampling or stop rules are the spec's run, and their receipts the spec's
 * v1; the rest give ext-sampling-1 receipts (docs/sampling.md §S7-§S8). ---- */

/* Seeded sampling (docs/sampling.md, an extension beyond the greedy-only
 * spec).  A NULL pointer is greedy (§11.2); CIS2_SAMPLING_GREEDY is the
 * §S2.1 defaults to start from (top_p is 1.0: a zeroed struct's top_p 0
 * is refused).  Floats are taken by their bits and checked against
 * docs/sampling.md §S2.2 (CIS2_E_USAGE naming the parameter, never
 * clamped or repaired): -0.0, subnormals, NaN, infinities and top_p 0 are
 * refused. */
typedef struct cis2_sampling {
    float temperature;      /* +0: greedy; else a positive normal finite */
    uint32_t top_k;         /* 0: off */
    float top_p;            /* 1.0: off; else in (0, 1), a positive normal */
    float min_p;            /* 0: off */
    uint64_t seed;
    uint32_t sequence;      /* the sample's index within a request (OpenAI's n) */
} cis2_sampling;
/* The §S2.1 defaults: greedy, every filter off (an initializer). */
#define CIS2_SAMPLING_GREEDY {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 0, .sequence = 0}
/* docs/sampling.md §S2.2 on s for the engine's vocabulary: the one check
 * (generation makes the same), for a client that refuses a request before
 * queueing it.  CIS2_OK, or CIS2_E_USAGE with *param (may be NULL) the
 * parameter's name ("temperature", "top_k", "top_p", "min_p") and the
 * reason in err. */
CIS2_API int cis2_sampling_validate(const cis2_engine *e, const cis2_sampling *s, const char **param, cis2_error *err);
/* docs/sampling.md §S2.3: a float parameter given as decimal text,
 * s[0..len), to binary32 by one correctly rounded conversion (to nearest,
 * ties to even; never through a double, whatever the caller's rounding
 * mode or locale).  The text is an optional sign, digits with an optional
 * '.' and fraction (at least one digit in all), an optional exponent
 * ([eE][+-]?digits): JSON's numbers and the CLI's, nothing else.
 * CIS2_OK with *out set, or CIS2_E_USAGE with the reason in err: "not a
 * decimal number", "overflows binary32" (beyond its largest finite
 * value), "is below the smallest normal binary32" (a nonzero value that
 * would round to 0 or a subnormal, which flush-to-zero takes as 0, §1.3).
 * Ranges are cis2_sampling_validate's.  The one conversion behind the
 * CLI's options and the server's JSON bodies. */
CIS2_API int cis2_decimal_to_f32(const char *s, size_t len, float *out, cis2_error *err);

/* Stop rules (docs/sampling.md).  NULL: none (exactly max_tokens tokens,
 * EOS not special, §3.4). */
typedef struct cis2_stop {
    int eos;                          /* stop at the eos list (cis2_model_info.eos_ids:
                                         config.json's and generation_config.json's) */
    const uint32_t *ids;              /* stop token ids */
    size_t n_ids;
    const char *const *strings;       /* stop strings (raw bytes) */
    const size_t *string_lens;
    size_t n_strings;
} cis2_stop;

enum cis2_finish {
    CIS2_FINISH_NONE = 0,   /* still running */
    CIS2_FINISH_LENGTH,     /* max_tokens generated */
    CIS2_FINISH_EOS,
    CIS2_FINISH_STOP_ID,
    CIS2_FINISH_STOP_STRING,
    CIS2_FINISH_CANCELLED
};
/* "length", "eos", "stop-id", "stop-string", "cancelled" ("" for NONE). */
CIS2_API const char *cis2_finish_name(int reason);

typedef struct cis2_request {
    const char *text;         /* prompt bytes (UTF-8), tokenized by the engine, or: */
    size_t text_len;
    const uint32_t *ids;      /* the prompt as token ids (text NULL) */
    size_t n_ids;
    size_t max_tokens;        /* tokens to generate, >= 1 (fewer only if a stop rule fires) */
    const cis2_sampling *sampling; /* NULL: greedy (extension) */
    const cis2_stop *stop;         /* NULL: none (extension) */
    unsigned top_logprobs;    /* 0..20 alternatives per step (implies logprobs; extension) */
    int logprobs;             /* also report each chosen token's logprob (extension) */
    void *user;               /* handed back in events */
} cis2_request;

#define CIS2_MAX_TOP_LOGPROBS 20

/* One generated token, reported as soon as it is chosen. */
typedef struct cis2_token_event {
    uint64_t seq;             /* generate: the request's index; session: its id */
    void *user;               /* the request's user pointer */
    size_t step;              /* 0-based generation step */
    uint32_t token;
    const float *logits;      /* the vocab logits this token was chosen from;
                                 valid during the callback only */
    size_t vocab;
    int finish;               /* enum cis2_finish: nonzero if this token ends it */
    float logprob;            /* when requested, else 0 */
    size_t n_top;             /* top alternatives (= top_logprobs) */
    const uint32_t *top_ids;  /* candidate order (docs/sampling.md); fewer candidates
                                 than asked: the rest are id UINT32_MAX, logprob 0 */
    const float *top_logprobs;
} cis2_token_event;
/* Return 0 to go on, nonzero to cancel (generate fails with CIS2_E_CANCELLED;
 * in a session only that sequence ends, as CIS2_FINISH_CANCELLED). */
typedef int (*cis2_token_fn)(void *ctx, const cis2_token_event *ev);

/* Observer of intermediate tensors (section 8): the decode step, the row's
 * position, the layer (-1 after the last one), the tensor name, n values. */
typedef void (*cis2_trace_fn)(void *ctx, size_t step, size_t pos, int layer, const char *tensor, const float *v,
                              size_t n);

typedef struct cis2_gen_opts {
    int twice;                /* §12.4: decode twice, compare (CIS2_E_NONDET) */
    cis2_token_fn on_token;   /* called for each token of each request, in order */
    void *on_token_ctx;
    cis2_trace_fn on_trace;   /* one request only (the first §12.4 run) */
    void *on_trace_ctx;
    size_t max_batch;         /* sequences decoded together; 0: 32.  Any value
                                 above the number of requests means all of them
                                 (SIZE_MAX: no limit); it never wraps */
    int recompute;            /* test mode: no KV reuse, every step from scratch */
} cis2_gen_opts;

typedef struct cis2_result {
    char *prompt;             /* the prompt bytes: the text, or for ids the bytes they
                                 decode to if those re-encode to the same ids, else NULL
                                 (the receipt then records the ids: docs/receipts.md
                                 "Prompts given as ids") */
    size_t prompt_len;
    uint32_t *prompt_ids;
    size_t n_prompt;
    uint32_t *tokens;         /* the generated ids */
    size_t n_tokens;
    int finish;               /* enum cis2_finish */
    uint8_t witness[32];      /* §12.1 CIS2_REF (extension runs: docs/sampling.md) */
    uint8_t argmax_digest[32];/* §12.2 over prompt ++ generated ids */
    char *text;               /* the completion for display (U+FFFD for invalid UTF-8;
                                 stop text cut, docs/sampling.md); NULL without tokenizer */
    size_t text_len;
    float *logprobs;          /* n_tokens, when requested, else NULL */
    size_t n_top;             /* alternatives per step */
    uint32_t *top_ids;        /* n_tokens * n_top, padded as in cis2_token_event */
    float *top_logprobs;
    struct cis2_result_priv *priv; /* what a receipt needs besides (internal) */
} cis2_result;

/* Decodes the n requests; *results gets n results in request order (free
 * with cis2_results_free).  opts may be NULL (one pass, no callbacks). */
CIS2_API int cis2_generate(cis2_engine *e, const cis2_request *reqs, size_t n, const cis2_gen_opts *opts,
                           cis2_result **results, cis2_error *err);
CIS2_API void cis2_results_free(cis2_result *results, size_t n);
/* 1 if the run is an extension run (docs/sampling.md §S7.1: T > 0 or a stop
 * rule; its receipt is ext-sampling-1 and it has a finish reason), 0 if it
 * is the spec's §3.4 run (a CIS-2-RECEIPT v1).  The library decides; a
 * client never needs to. */
CIS2_API int cis2_result_is_extension(const cis2_result *r);

/* ======================================================================
 * 6. Sessions (continuous batching)
 *
 * A session holds running sequences.  cis2_session_add queues a request;
 * each cis2_session_step is one pass of the model in which every running
 * sequence advances by one token, and queued ones join (their prompts
 * prefilled in chunks of prefill_chunk rows, so a long prompt does not
 * stall the others).  A sequence ends on its own (max_tokens, a stop rule,
 * cancel) and its result is then taken with cis2_session_take.  Every
 * sequence's tokens, logits and digests are bit for bit those of the same
 * request run alone.  One thread at a time per session.
 * ====================================================================== */

typedef struct cis2_session cis2_session;

typedef struct cis2_session_opts {
    size_t max_batch;          /* running sequences at most; 0: 16 */
    size_t prefill_chunk;      /* prompt rows per step in all; 0: 256 */
    cis2_token_fn on_token;    /* every chosen token; may be NULL */
    void *on_token_ctx;
    size_t kv_budget;          /* KV-cache bytes of the running sequences; a queued one
                                  waits until it fits (one always runs); 0: 1 GiB */
} cis2_session_opts;

typedef struct cis2_session_stats {
    size_t running;            /* admitted, decoding or prefilling */
    size_t queued;             /* added, waiting for a place */
    size_t finished;           /* done, not yet taken */
    size_t prefill_rows;       /* prompt rows the running sequences still have to prefill */
    size_t kv_bytes;           /* their KV caches */
    uint64_t steps;            /* cis2_session_step calls that ran the model */
} cis2_session_stats;

CIS2_API int cis2_session_open(cis2_session **out, cis2_engine *e, const cis2_session_opts *opts,
                               cis2_error *err);
CIS2_API void cis2_session_close(cis2_session *s);
/* Validates and queues a request (tokenizing a text prompt now); *id names
 * it in events and below. */
CIS2_API int cis2_session_add(cis2_session *s, const cis2_request *req, uint64_t *id, cis2_error *err);
/* One pass: returns CIS2_OK having advanced every running sequence (and
 * admitted queued ones) by one step; *running (may be NULL) gets the number
 * of sequences still running or queued. */
CIS2_API int cis2_session_step(cis2_session *s, size_t *running, cis2_error *err);
/* Ends a queued or running sequence now (finish CIS2_FINISH_CANCELLED). */
CIS2_API int cis2_session_cancel(cis2_session *s, uint64_t id);
/* 1 if the sequence has finished (its result can be taken), 0 if not,
 * -1 if the id is unknown. */
CIS2_API int cis2_session_done(const cis2_session *s, uint64_t id);
/* Moves a finished sequence's result out of the session (free it with
 * cis2_results_free(r, 1)). */
CIS2_API int cis2_session_take(cis2_session *s, uint64_t id, cis2_result **result, cis2_error *err);
/* Sequences running or queued. */
CIS2_API size_t cis2_session_pending(const cis2_session *s);
CIS2_API void cis2_session_stats_get(const cis2_session *s, cis2_session_stats *out);

/* ======================================================================
 * 7. Receipts and verdicts
 *
 * A receipt (FACTS.md §6, docs/receipts.md) records one run's inputs and
 * every digest, as text: `CIS-2-RECEIPT v1` for a greedy run without stop
 * rules (byte for byte the existing verifiers' format), or the
 * `CIS-2-RECEIPT ext-sampling-1` extension (docs/sampling.md) otherwise.
 * ====================================================================== */

typedef struct cis2_receipt cis2_receipt;

/* The receipt of a result from this engine.  A result without prompt
 * bytes (ids that no bytes reproduce: cis2_engine_prompt_bytes fails) gets
 * the receipt that records its prompt as ids, with a `prompt-from ids`
 * line (docs/receipts.md "Prompts given as ids"); every other receipt is
 * byte for byte what it was.  CIS2_E_USAGE for a cancelled or empty run,
 * or ids without prompt bytes on an engine without a tokenizer.json (the
 * receipt records the ids' bytes). */
CIS2_API int cis2_receipt_make(const cis2_engine *e, const cis2_result *res, cis2_receipt **out, cis2_error *err);
/* Strict parse (CIS2_E_FORMAT with "NAME: line N: reason"). */
CIS2_API int cis2_receipt_parse(const char *text, size_t len, const char *name, cis2_receipt **out,
                                cis2_error *err);
CIS2_API int cis2_receipt_load(const char *path, cis2_receipt **out, cis2_error *err);
/* The receipt's text (LF line ends); *text is NUL-terminated, cis2_free it. */
CIS2_API int cis2_receipt_render(const cis2_receipt *r, char **text, size_t *len, cis2_error *err);
/* Writes the text to path whole or not at all (cis2_toolkit.h section 1). */
CIS2_API int cis2_receipt_save(const cis2_receipt *r, const char *path, cis2_error *err);
/* The value of a key as written in the receipt ("witness-digest" -> 64 hex
 * digits), or NULL if the receipt has no such key.  Valid until the
 * receipt is freed. */
CIS2_API const char *cis2_receipt_get(const cis2_receipt *r, const char *key);
CIS2_API void cis2_receipt_free(cis2_receipt *r);

enum cis2_field_status {
    CIS2_FIELD_OK = 0,        /* recomputed and equal */
    CIS2_FIELD_MISMATCH,      /* recomputed and different */
    CIS2_FIELD_INPUT,         /* an input of the run, taken as given */
    CIS2_FIELD_UNVERIFIED,    /* cannot be recomputed from what was given */
    CIS2_FIELD_SAME,          /* compare: equal in both */
    CIS2_FIELD_DIFFERS,       /* compare: different */
    CIS2_FIELD_NOTE           /* a line of explanation (diff) */
};

enum cis2_verdict_kind {
    CIS2_VERDICT_OK = 0,            /* verify: every field recomputed and equal */
    CIS2_VERDICT_CONSISTENT,        /* check: nothing contradicts, some fields unverified */
    CIS2_VERDICT_ARTIFACT_MISMATCH, /* an artifact hash differs (code CIS2_E_HASH) */
    CIS2_VERDICT_OUTPUT_MISMATCH,   /* a recomputed output differs (CIS2_E_MISMATCH) */
    CIS2_VERDICT_UNSUPPORTED,       /* another spec version or dtype (CIS2_E_UNSUPPORTED) */
    CIS2_VERDICT_MALFORMED,         /* the receipt cannot be checked (CIS2_E_FORMAT) */
    CIS2_VERDICT_SAME,              /* compare */
    CIS2_VERDICT_DIFFERENT_RUN,
    CIS2_VERDICT_CONTRADICTION,
    CIS2_VERDICT_WITNESS_COLLISION,
    CIS2_VERDICT_IDENTICAL,         /* trace diff */
    CIS2_VERDICT_DIVERGED
};

typedef struct cis2_field {
    const char *key;          /* a receipt key ("witness-digest") or a diff label */
    int status;               /* enum cis2_field_status */
    const char *detail;       /* the rest of the report line: "ok",
                                 "MISMATCH expected=... got=...", "input (5 bytes)" */
} cis2_field;

typedef struct cis2_verdict {
    int kind;                 /* enum cis2_verdict_kind */
    int code;                 /* the status class of the verdict (0, 1, 4, 5, 6) */
    const char *name;         /* "OK", "OUTPUT-MISMATCH", ... */
    const char *summary;      /* the whole verdict: "OUTPUT-MISMATCH (witness-digest)" */
    const char *source;       /* the receipt's name (path), or "" */
    size_t n_fields;
    const cis2_field *fields; /* one per receipt key, in receipt order */
    /* verify: the first step whose claimed token is not the argmax (or not
     * the token the sampler picks), else -1; with the claimed and the
     * recomputed token and their logits' bits at that step. */
    long long first_bad_step;
    uint32_t claimed_token, expected_token;
    uint32_t claimed_logit_bits, expected_logit_bits;
    struct cis2_verdict_priv *priv; /* the strings above live here (internal) */
} cis2_verdict;

/* How verify recomputes a receipt's outputs. */
enum cis2_replay {
    CIS2_REPLAY_PREFILL = 0,  /* teacher-forced: prompt ++ claimed tokens as one batched
                                 prefill, then every step checked (fast, the default) */
    CIS2_REPLAY_DECODE        /* the whole decode again, token by token */
};

typedef struct cis2_verify_opts {
    int replay;               /* enum cis2_replay */
    int twice;                /* also run §12.4's determinism check (CIS2_E_NONDET) */
    cis2_token_fn on_step;    /* optional: every recomputed step of every receipt, in
                                 step order per receipt (seq = the receipt's index,
                                 token = the claimed token, logits = the recomputed
                                 ones); up to a receipt's first failing step.
                                 Nonzero cancels the verify (CIS2_E_CANCELLED) */
    void *on_step_ctx;
    /* optional: asked before every weight pass (prefill replay) or decode
     * step (decode replay); nonzero cancels the verify (CIS2_E_CANCELLED),
     * so a caller bounds its time or stops when its client has gone */
    int (*should_stop)(void *ctx);
    void *should_stop_ctx;
} cis2_verify_opts;

/* Recomputes every field of n receipts from the engine's files (sharing
 * each weight pass among them, and computing once the KV of a prompt
 * prefix of 16 or more ids that several share: the samples of one prompt);
 * verdicts[i] for receipts[i] (free with
 * cis2_verdicts_free).  A receipt that cannot be checked gets a MALFORMED
 * or UNSUPPORTED verdict; the call itself fails only for I/O, memory or
 * FP-environment errors. */
CIS2_API int cis2_verify(cis2_engine *e, cis2_receipt *const *receipts, size_t n, const cis2_verify_opts *opts,
                         cis2_verdict **verdicts, cis2_error *err);
/* The checks that need no weights: table-digest, the argmax/token digest
 * from the receipt's own ids, and with a tokenizer.json / config.json path
 * (either may be NULL) their hashes, the prompt's ids and the inv-freq
 * digest.  tokenizer_flags: 0 (CIS2_OPEN_TOKENIZER_EXT is accepted, no effect). */
CIS2_API int cis2_check(const cis2_receipt *r, const char *tokenizer_path, const char *config_path,
                        unsigned tokenizer_flags, cis2_verdict **verdict, cis2_error *err);
/* SAME, DIFFERENT-RUN, CONTRADICTION or WITNESS-COLLISION. */
CIS2_API int cis2_compare(const cis2_receipt *a, const cis2_receipt *b, cis2_verdict **verdict, cis2_error *err);
CIS2_API void cis2_verdicts_free(cis2_verdict *v, size_t n);

/* ======================================================================
 * 8. Traces ("CIS-2-TRACE v1", docs/receipts.md "Traces")
 * ====================================================================== */

typedef struct cis2_trace_writer cis2_trace_writer;
/* Creates the trace file (and path.f32 with dump), written whole or not at
 * all: they appear at cis2_trace_close. */
CIS2_API int cis2_trace_open(cis2_trace_writer **w, const char *path, int dump, cis2_error *err);
/* A cis2_trace_fn; ctx is the writer. */
CIS2_API void cis2_trace_record(void *ctx, size_t step, size_t pos, int layer, const char *tensor, const float *v,
                                size_t n);
/* Commits the files (CIS2_E_IO if any write failed: nothing is left). */
CIS2_API int cis2_trace_close(cis2_trace_writer *w, cis2_error *err);
/* Discards an open trace: nothing is written.  NULL is fine. */
CIS2_API void cis2_trace_abort(cis2_trace_writer *w);
/* IDENTICAL or DIVERGED: the first tensor whose hash differs, and with two
 * dump traces the first differing element; as fields with status NOTE. */
CIS2_API int cis2_trace_diff(const char *path_a, const char *path_b, cis2_verdict **verdict, cis2_error *err);

/* ======================================================================
 * 9. Scoring (EXTENSION, docs/sampling.md §S11)
 *
 * The logprob of every token of a given continuation after a given
 * context, as an evaluation harness asks for it (multiple choice,
 * perplexity): no token is chosen.  Context ++ continuation runs as one
 * teacher-forced prefill; continuation token i is scored by the logits
 * row computed after consuming every id before it (the row decode would
 * have chosen it from), with docs/sampling.md §S4's function on that row,
 * so its bits equal those cis2_generate reports (cis2_request.logprobs)
 * when the same tokens are generated, greedy or sampled.  A continuation
 * with no context has no score for its first token.  Many requests share
 * every weight pass, and requests whose context ids are equal compute the
 * context once.  Results never depend on threads, kernels or batching.
 * Memory: a pass's logits take at most 64 MiB; the engine keeps that
 * buffer for its next score or verify (at most 64 MiB, freed by
 * cis2_engine_close), since fresh memory is zero-filled page by page.
 * ====================================================================== */

typedef struct cis2_score_request {
    /* The context: text (tokenized alone, as cis2_engine_tokenize), or ids
     * (context NULL).  Both empty: no context. */
    const char *context;
    size_t context_len;
    const uint32_t *context_ids;
    size_t n_context_ids;
    /* The continuation: text (tokenized alone, not joined to the context:
     * §S11.1), or ids (continuation NULL); at least one token. */
    const char *continuation;
    size_t continuation_len;
    const uint32_t *continuation_ids;
    size_t n_continuation_ids;
    unsigned top_logprobs;    /* 0..CIS2_MAX_TOP_LOGPROBS alternatives per scored token */
    void *user;               /* the caller's, untouched */
} cis2_score_request;

typedef struct cis2_score_result {
    uint32_t *context_ids;    /* the context's ids (n_context may be 0) */
    size_t n_context;
    uint32_t *ids;            /* the continuation's ids */
    size_t n_ids;
    size_t first;             /* tokens [first, n_ids) are scored: 1 with no context, else 0 */
    float *logprobs;          /* n_ids: §S4 bits (QNAN for a NaN logit); 0 for unscored */
    uint32_t *ranks;          /* n_ids: 1-based place in §S3.3's candidate order; 0 unscored,
                                 or the logit is NaN (not a candidate) */
    unsigned char *greedy;    /* n_ids: 1 if the token is §11.2's argmax of its row */
    size_t n_top;             /* alternatives per token (= top_logprobs) */
    uint32_t *top_ids;        /* n_ids * n_top in candidate order, padded as in cis2_token_event
                                 (an unscored token's are all padding) */
    float *top_logprobs;
    size_t n_scored;          /* n_ids - first */
    float sum;                /* §S11.3: the scored logprobs summed in f32, in token order */
    double sum_f64;           /* the same in f64 (each logprob widened exactly) */
    int all_greedy;           /* every scored token greedy (lm-evaluation-harness's is_greedy) */
} cis2_score_result;

/* Scores n requests (sharing every weight pass); *results gets n results
 * in request order (free with cis2_score_results_free).  A bad request
 * fails the call (CIS2_E_USAGE naming it; CIS2_E_UNSUPPORTED past
 * max_position_embeddings) before any is computed. */
CIS2_API int cis2_score(cis2_engine *e, const cis2_score_request *reqs, size_t n, cis2_score_result **results,
                        cis2_error *err);

/* Options of cis2_score_ex (zero-initialise; NULL = none). */
typedef struct cis2_score_opts {
    /* Asked before every weight pass, with the caller's floating-point
     * environment; nonzero cancels the call (CIS2_E_CANCELLED, no results). */
    int (*should_stop)(void *ctx);
    void *should_stop_ctx;
} cis2_score_opts;

/* cis2_score with options: the same results, bit for bit. */
CIS2_API int cis2_score_ex(cis2_engine *e, const cis2_score_request *reqs, size_t n, const cis2_score_opts *opts,
                           cis2_score_result **results, cis2_error *err);
CIS2_API void cis2_score_results_free(cis2_score_result *results, size_t n);

/* Score receipts ("CIS-2-RECEIPT ext-score-1", docs/receipts.md "Score
 * receipts"): scores n requests as cis2_score does (same results, bit for
 * bit) and fills receipts[i] (the caller's array of n pointers; free each
 * with cis2_receipt_free) for request i: the model's hashes, the context's
 * and continuation's bytes and ids, the logprob bits and sums, a digest of
 * every figure and a witness over every logits row used.  cis2_verify
 * re-derives such a receipt by the same prefill (naming each field that
 * differs), cis2_check what needs no weights.  Needs the tokenizer for a
 * part given as ids (its bytes are recorded). */
CIS2_API int cis2_score_receipts(cis2_engine *e, const cis2_score_request *reqs, size_t n,
                                 cis2_score_result **results, cis2_receipt **receipts, cis2_error *err);
/* cis2_score_receipts with options (cis2_score_opts: should_stop is asked
 * before every weight pass, so a long score stops within one pass; a
 * cancelled call returns CIS2_E_CANCELLED with no results and no
 * receipts): the same results and receipts, byte for byte. */
CIS2_API int cis2_score_receipts_ex(cis2_engine *e, const cis2_score_request *reqs, size_t n,
                                    const cis2_score_opts *opts, cis2_score_result **results,
                                    cis2_receipt **receipts, cis2_error *err);

#ifdef __cplusplus
}
#endif
#endif /* CIS2_H */
