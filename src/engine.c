/*
 * engine.c - engines (include/cis2.h sections 1, 3 and 4): open a
 * checkpoint directory, report its configuration and digests, tokenize and
 * detokenize through it, change its kernel and threads.
 *
 * Open order: the §1.3 self-test under the pin (a broken pin refuses to
 * run), the engine's kernel variant and its own worker pool (what every
 * call's context is made of, engine.h's cis2_engine_ctx), the model
 * (model.c: config.json and tokenizer.json read and hashed, §2.1; then,
 * before any weight is read, the tokenizer parsed from those bytes
 * (load_tokenizer; docs/inputs.md "tokenizer.json"); then model.safetensors
 * or its shards hashed, shards.h, and the weights packed), then the
 * optional expected hashes.  A tokenizer the loader refuses does not fail
 * the open unless CIS2_OPEN_NEED_TOKENIZER asks (text prompts): prompts
 * given as ids still run (the file is hashed into the witness either way,
 * §12.1).
 */
#include "engine.h"
#include "speculate.h"
#include "kernels.h"
#include "receipt.h"
#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>

const char *cis2_version(void) { return CIS2_VERSION; }

unsigned cis2_abi_version(void) { return CIS2_ABI_VERSION; }

unsigned cis2_features(void)
{
    return CIS2_FEATURE_SAMPLING | CIS2_FEATURE_STOP_RULES | CIS2_FEATURE_LOGPROBS | CIS2_FEATURE_SCORE;
}

void cis2_free(void *p) { free(p); }

static int check_hash(const char *file, const uint8_t *want, const uint8_t got[32], cis2_error *err)
{
    if (!want || !memcmp(want, got, 32)) return CIS2_OK;
    char a[65], b[65];
    cis2_hex(want, 32, a);
    cis2_hex(got, 32, b);
    return cis2_fail(err, CIS2_E_HASH, "%s: sha256 %s differs from the expected %s (§2.1)", file, b, a);
}

static void fill_info(cis2_engine *e)
{
    const cis2_model *m = &e->m;
    cis2_model_info *i = &e->info;
    snprintf(i->model_type, sizeof i->model_type, "%s", m->cfg.family->model_type); /* absent: llama (family.c) */
    i->hidden_size = m->hidden;
    i->intermediate_size = m->inter;
    i->num_layers = m->n_layers;
    i->num_heads = m->n_heads;
    i->num_kv_heads = m->n_kv;
    i->head_dim = m->head_dim;
    i->vocab_size = m->vocab;
    i->max_position_embeddings = (size_t)m->cfg.max_position_embeddings;
    i->rms_norm_eps = m->cfg.rms_norm_eps;
    i->rope_theta = m->cfg.rope_theta;
    i->tied = m->tied;
    i->qkv_bias = m->n_layers > 0 && m->layers[0].bq != NULL;
    i->weight_bytes = m->weight_bytes;
    memcpy(i->weights_sha256, m->weights_sha, 32);
    memcpy(i->config_sha256, m->config_sha, 32);
    memcpy(i->tokenizer_sha256, m->tokenizer_sha, 32);
    memcpy(i->table_digest, m->table_digest, 32);
    memcpy(i->inv_freq_table_digest, m->inv_freq_digest, 32);
    i->has_tokenizer = e->tok != NULL;
    i->tokenizer_normative = e->tok ? cis2_tokenizer_is_normative(e->tok) : 1;
    i->model_dir = e->dir;
    i->n_eos = m->cfg.n_eos;
    memcpy(i->eos_ids, m->cfg.eos_ids, sizeof i->eos_ids);
    i->eos_malformed = m->cfg.eos_malformed;
}

typedef struct open_tok {
    cis2_engine *e;
    const cis2_engine_opts *opts;
    const char *dir;
} open_tok;

/* cis2_model_load's hook, before any weight is read (docs/inputs.md
 * "tokenizer.json"):
 * parses the tokenizer.json bytes the model read and hashed (§2.1, not a
 * second read of the path).  A refused tokenizer fails the open only with
 * CIS2_OPEN_NEED_TOKENIZER (text prompts); else ids prompts still run. */
static int load_tokenizer(void *ctx, cis2_model *m, cis2_error *err)
{
    open_tok *o = ctx;
    cis2_engine *e = o->e;
    size_t pl = strlen(o->dir) + sizeof "/tokenizer.json";
    char *path = malloc(pl);
    if (!path) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    snprintf(path, pl, "%s/tokenizer.json", o->dir);
    if (cis2_tokenizer_load_mem(&e->tok, m->tokenizer_json, m->tokenizer_json_len, path, 0, &e->tok_err) != CIS2_OK)
        e->tok = NULL;
    free(m->tokenizer_json); /* the tokenizer holds what it needs */
    m->tokenizer_json = NULL;
    m->tokenizer_json_len = 0;
    free(path);
    if (!e->tok && (o->opts->flags & CIS2_OPEN_NEED_TOKENIZER))
        return cis2_fail(err, e->tok_err.code ? e->tok_err.code : CIS2_E_FORMAT, "%s", e->tok_err.msg);
    return CIS2_OK;
}

int cis2_engine_open(cis2_engine **out, const char *model_dir, const cis2_engine_opts *opts, cis2_error *err)
{
    *out = NULL;
    cis2_engine_opts dflt = {0};
    if (!opts) opts = &dflt;
    if (!model_dir || !*model_dir) return cis2_fail(err, CIS2_E_USAGE, "model directory: empty path");
    cis2_engine *e = calloc(1, sizeof *e);
    if (!e || !(e->dir = strdup(model_dir))) {
        free(e);
        return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    }
    e->kern = cis2_kernel_auto();
    pthread_rwlock_init(&e->calls, NULL);
    cis2_reuse_init(&e->logits);
    cis2_frame f;
    cis2_ctx cx;
    int rc = CIS2_OK;
    ENGINE_ENTER(e, f, err, rc, out);
    if ((rc = cis2_fpenv_selftest(err))) goto out; /* §1.3: before any decode-path arithmetic */
    if ((rc = cis2_kernel_find(opts->kernel ? opts->kernel : "auto", &e->kern, err))) goto out;
    if ((rc = cis2_pool_create(&e->pool, opts->threads, err))) goto out;
    cx = cis2_engine_ctx(e);
    open_tok ot = {e, opts, model_dir};
    if ((rc = cis2_model_load_hooked(&cx, &e->m, model_dir, load_tokenizer, &ot, err))) goto out;
    if ((rc = check_hash("the weights (model.safetensors or its shards)", opts->expect_weights_sha256,
                         e->m.weights_sha, err)) ||
        (rc = check_hash("config.json", opts->expect_config_sha256, e->m.config_sha, err)) ||
        (rc = check_hash("tokenizer.json", opts->expect_tokenizer_sha256, e->m.tokenizer_sha, err)))
        goto out;
    fill_info(e);
    e->info.kernel = cis2_kernel_name(e->kern);
    e->info.threads = cis2_pool_size(e->pool);
out:
    ENGINE_LEAVE(f);
    if (rc) {
        cis2_engine_close(e);
        return rc;
    }
    *out = e;
    return CIS2_OK;
}

void cis2_engine_close(cis2_engine *e)
{
    if (!e) return;
    cis2_dmodel_free(e->dm);
    cis2_model_free(&e->m);
    cis2_tokenizer_free(e->tok);
    cis2_pool_destroy(e->pool);
    pthread_rwlock_destroy(&e->calls);
    cis2_reuse_destroy(&e->logits);
    free(e->dir);
    free(e);
}

const cis2_model_info *cis2_engine_info(const cis2_engine *e) { return &e->info; }

/* Takes the engine for a change (engine.h): waits until no call computes
 * with it; refused from inside a call (a callback), which would wait for
 * itself. */
static int engine_change_begin(cis2_engine *e, const char *what, cis2_error *err)
{
    if (cis2_api_in_frame())
        return cis2_fail(err, CIS2_E_USAGE, "%s: not from inside a call of the library (a callback)", what);
    pthread_rwlock_wrlock(&e->calls);
    return CIS2_OK;
}

int cis2_engine_set_kernel(cis2_engine *e, const char *kernel, cis2_error *err)
{
    int rc = engine_change_begin(e, "cis2_engine_set_kernel", err);
    if (rc) return rc;
    const struct cis2_variant *k;
    if (!(rc = cis2_kernel_find(kernel ? kernel : "auto", &k, err))) { /* refused: the kernel stays */
        e->kern = k;
        e->info.kernel = cis2_kernel_name(k);
    }
    pthread_rwlock_unlock(&e->calls);
    return rc;
}

int cis2_engine_set_threads(cis2_engine *e, int threads, cis2_error *err)
{
    int rc = engine_change_begin(e, "cis2_engine_set_threads", err);
    if (rc) return rc;
    cis2_pool_destroy(e->pool);
    e->pool = NULL; /* if no thread can start, calls run on their caller's thread */
    rc = cis2_pool_create(&e->pool, threads, err);
    e->info.threads = cis2_pool_size(e->pool);
    pthread_rwlock_unlock(&e->calls);
    return rc;
}

/* A draft model for e, loaded as any computing call runs (with e's pool,
 * beside other calls); the setting changes only after. */
static int load_draft(cis2_engine *e, const char *dir, cis2_dmodel **dm, cis2_error *err)
{
    cis2_frame f;
    cis2_ctx cx;
    int rc = CIS2_OK;
    ENGINE_ENTER(e, f, err, rc, out);
    cx = cis2_engine_ctx(e);
    rc = cis2_dmodel_load(&cx, dm, dir, &e->m, err);
out:
    ENGINE_LEAVE(f);
    return rc;
}

/* Speculation never changes a bit (session.c), so like the kernel it is
 * the engine's to set for every call. */
int cis2_engine_set_speculate(cis2_engine *e, const char *spec, cis2_error *err)
{
    int kind;
    unsigned k;
    char *dir;
    cis2_dmodel *dm = NULL;
    if (cis2_api_in_frame()) /* before a draft model's load, as engine_change_begin would refuse */
        return cis2_fail(err, CIS2_E_USAGE, "cis2_engine_set_speculate: not from inside a call of the library (a callback)");
    int rc = cis2_spec_parse(spec, &kind, &k, &dir, err);
    if (!rc && dir) rc = load_draft(e, dir, &dm, err);
    free(dir);
    if (rc) return rc; /* refused: the setting stays */
    if ((rc = engine_change_begin(e, "cis2_engine_set_speculate", err))) {
        cis2_dmodel_free(dm);
        return rc;
    }
    cis2_dmodel *old = e->dm;
    e->spec_kind = kind;
    e->spec_k = k;
    e->draft_fn = NULL;
    e->draft_ctx = NULL;
    e->dm = dm;
    pthread_rwlock_unlock(&e->calls);
    cis2_dmodel_free(old);
    return CIS2_OK;
}

int cis2_speculate_check(const char *spec, cis2_error *err)
{
    int kind;
    unsigned k;
    char *dir;
    int rc = cis2_spec_parse(spec, &kind, &k, &dir, err);
    free(dir);
    return rc;
}

int cis2_engine_set_drafter(cis2_engine *e, cis2_draft_fn fn, void *ctx, unsigned k, cis2_error *err)
{
    if (fn && (k < 1 || k > CIS2_SPEC_K_MAX))
        return cis2_fail(err, CIS2_E_USAGE, "cis2_engine_set_drafter: k %u is not in 1..%d", k, CIS2_SPEC_K_MAX);
    int rc = engine_change_begin(e, "cis2_engine_set_drafter", err);
    if (rc) return rc;
    e->spec_kind = fn ? CIS2_SPEC_CALLER : CIS2_SPEC_OFF;
    e->spec_k = fn ? k : 0;
    e->draft_fn = fn;
    e->draft_ctx = fn ? ctx : NULL;
    cis2_dmodel *old = e->dm;
    e->dm = NULL;
    pthread_rwlock_unlock(&e->calls);
    cis2_dmodel_free(old);
    return CIS2_OK;
}

/* ------------------------------------------------------------- tokens */

int cis2_engine_encode(const cis2_engine *e, const char *text, size_t len, uint32_t **ids, size_t *n,
                       cis2_error *err)
{
    return cis2_engine_encode_max(e, text, len, SIZE_MAX, ids, n, err);
}

int cis2_engine_encode_max(const cis2_engine *e, const char *text, size_t len, size_t max_ids, uint32_t **ids,
                           size_t *n, cis2_error *err)
{
    *ids = NULL;
    *n = 0;
    if (!e->tok) return cis2_fail(err, e->tok_err.code ? e->tok_err.code : CIS2_E_USAGE, "%s", e->tok_err.msg);
    return cis2_tokenizer_encode_max(e->tok, text, len, max_ids, ids, n, err);
}

int cis2_engine_encode_prompt(const cis2_engine *e, const char *text, size_t len, size_t max_ids, uint32_t **ids,
                              size_t *n, cis2_error *err)
{
    *ids = NULL;
    *n = 0;
    if (!e->tok) return cis2_fail(err, e->tok_err.code ? e->tok_err.code : CIS2_E_USAGE, "%s", e->tok_err.msg);
    return cis2_tokenizer_encode_flags(e->tok, text, len, CIS2_TOK_ADD_SPECIAL, max_ids, ids, n, err);
}

int cis2_engine_prompt_bytes(const cis2_engine *e, const uint32_t *ids, size_t n, char **text, size_t *len,
                             cis2_error *err)
{
    *text = NULL;
    *len = 0;
    if (!e->tok) return cis2_fail(err, e->tok_err.code ? e->tok_err.code : CIS2_E_USAGE, "%s", e->tok_err.msg);
    if (!(*text = cis2_ids_text_bytes(e->tok, ids, n, len))) /* receipt.c: the rule receipts record and verify checks */
        return cis2_fail(err, CIS2_E_USAGE, "the ids do not round-trip through the tokenizer (decode then encode, "
                         "with its special tokens, gives other ids), so no prompt bytes reproduce them");
    return CIS2_OK;
}

int cis2_engine_tokenize(const cis2_engine *e, const char *text, size_t len, uint32_t **ids, size_t *n,
                         cis2_error *err)
{
    return cis2_engine_encode(e, text, len, ids, n, err); /* no float arithmetic: no frame needed */
}

int cis2_engine_tokenize_prompt(const cis2_engine *e, const char *text, size_t len, uint32_t **ids, size_t *n,
                                cis2_error *err)
{
    return cis2_engine_encode_prompt(e, text, len, SIZE_MAX, ids, n, err);
}

int cis2_engine_bytes(const cis2_engine *e, const uint32_t *ids, size_t n, char **text, size_t *len,
                      cis2_error *err)
{
    *text = NULL;
    *len = 0;
    if (!e->tok) return cis2_fail(err, e->tok_err.code ? e->tok_err.code : CIS2_E_USAGE, "%s", e->tok_err.msg);
    size_t total = 0, l;
    for (size_t i = 0; i < n; i++)
        if (cis2_tokenizer_token_bytes(e->tok, ids[i], &l)) total += l;
    char *o = malloc(total + 1);
    if (!o) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *b = cis2_tokenizer_token_bytes(e->tok, ids[i], &l);
        if (b) { memcpy(o + k, b, l); k += l; }
    }
    o[k] = 0;
    *text = o;
    *len = k;
    return CIS2_OK;
}

int cis2_engine_detokenize(const cis2_engine *e, const uint32_t *ids, size_t n, int display, char **text,
                           size_t *len, cis2_error *err)
{
    if (!display) return cis2_engine_bytes(e, ids, n, text, len, err);
    *text = NULL;
    *len = 0;
    if (!e->tok) return cis2_fail(err, e->tok_err.code ? e->tok_err.code : CIS2_E_USAGE, "%s", e->tok_err.msg);
    *text = cis2_tokenizer_decode_n(e->tok, ids, n, len);
    return *text ? CIS2_OK : cis2_fail(err, CIS2_E_NOMEM, "out of memory");
}
