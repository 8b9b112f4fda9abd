/*
 * session.h - sequences decoding together (internal side of include/cis2.h
 * sections 5 and 6; session.c).
 *
 * What a result carries besides its public fields (the inputs a receipt
 * records) and the few session knobs that only the library's own drivers
 * use (cis2_generate, verify.c's decode replay).
 */
#ifndef CIS2_SESSION_H
#define CIS2_SESSION_H

#include "cis2_toolkit.h" /* and cis2.h */
#include "engine.h"

/* A request's sampling and stop rule, owned (copied at add;
 * docs/sampling.md §S2, §S5). */
typedef struct cis2_rule {
    cis2_sampling samp;        /* checked (§S2.2) */
    int eos;                   /* stop at the engine's eos ids */
    uint32_t eos_ids[64];      /* copied from the engine when eos */
    size_t n_eos;
    uint32_t *stop_ids;
    size_t n_stop_ids;
    char **stop_str;
    size_t *stop_len;
    size_t n_stop_str;
    size_t max_tokens;
    int extension;             /* T > 0 or a stop rule: receipt ext-sampling-1 (§S7.1) */
    char *params_block;        /* §S7.5's 11 lines, when extension */
    uint8_t params_digest[32]; /* its sha256 */
} cis2_rule;

/* The stop rule of sample.h over a rule's lists. */
struct cis2_stop_rule;
void cis2_rule_stops(const cis2_rule *r, struct cis2_stop_rule *out);

struct cis2_result_priv {
    cis2_rule rule;
};

void cis2_rule_clear(cis2_rule *r);
int cis2_rule_copy(cis2_rule *dst, const cis2_rule *src, cis2_error *err);

/* Internal session options (on top of cis2_session_opts). */
typedef struct cis2_session_internal {
    int recompute;             /* no KV reuse: every step recomputes all positions */
    cis2_trace_fn trace;       /* rows of traced sequences are reported */
    void *trace_ctx;
    size_t kv_budget;          /* KV-cache bytes of admitted sequences (0: 1 GiB) */
} cis2_session_internal;

int cis2_session_open_internal(cis2_session **out, cis2_engine *e, const cis2_session_opts *opts,
                               const cis2_session_internal *in, cis2_error *err);
/* cis2_session_add with the internal per-sequence flags: `index` is what
 * events report as seq (generate: the request's index), `quiet` sends no
 * events (the second §12.4 copy), `traced` reports its rows. */
int cis2_session_add_internal(cis2_session *s, const cis2_request *req, uint64_t index, int quiet, int traced,
                              uint64_t *id, cis2_error *err);
/* Steps inside an already open frame (no frame of its own), on the
 * caller's context (kernels.h; the engine's, cis2_engine_ctx). */
int cis2_session_step_framed(cis2_session *s, const cis2_ctx *cx, size_t *running, cis2_error *err);

#endif
