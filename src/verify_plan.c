/*
 * verify_plan.c - the planning side of cis2_verify (verify.h): what run a
 * receipt's inputs describe, the prompt prefixes receipts may share, and
 * the verdict once the run is replayed.
 * Spec §2.1 (artifact hashes), §3.1 (the prompt's ids come from its
 * bytes), §6.6/§7.2 (table digests), §12.1, §12.2; docs/sampling.md §S8
 * for extension receipts.  The replays themselves (the model's
 * arithmetic, the hashing) are verify.c's; nothing here computes floats.
 *
 * Preparing (cis2_verify_prepare): verify trusts nothing in a receipt
 * but its inputs (prompt-hex, the number of tokens, and for the extension
 * the sampling parameters and stop rules).  The prompt's ids are
 * recomputed by the engine's tokenizer; for a receipt with `prompt-from
 * ids` the ids are the input and their bytes and the absence of a text
 * form are checked instead (docs/receipts.md "Prompts given as ids",
 * cis2_receipt_judge_ids_prompt, shared with cis2_check); a receipt that cannot be replayed
 * (unsupported version, ids outside the vocabulary, positions beyond the
 * model) gets its final verdict here and is skipped.
 *
 * Sharing (cis2_verify_share_rule): receipts that begin with the same
 * prompt ids (the samples of one prompt) compute those positions once:
 * one of them does, the others copy its KV there (the essay at "shared
 * prompt prefixes" below; the prefill planner, prefill.h, runs the plan).
 *
 * Judging (cis2_verify_judge): every field of the verdict from the
 * replayed run, hashes from the files, never from the receipt.
 */
#include "verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ preparing */

static void malformed(cis2_verdict *v, int code, const char *msg)
{
    v->n_fields = 0; /* no field report: the receipt cannot be replayed */
    cis2_vd_set(v, CIS2_VERDICT_MALFORMED, code, "MALFORMED", "(%s)", msg);
}

/* A receipt's run: its spec version and dtype, recomputed prompt ids, the
 * sampling and stop rules its inputs give (docs/sampling.md §S8). */
void cis2_verify_prepare(const cis2_engine *e, vjob *j)
{
    const cis2_receipt *r = j->r;
    cis2_verdict *v = j->v;
    char msg[700];
    if (cis2_vd_supported(v, r)) { j->skip = 1; return; }
    cis2_error e2 = {0};
    int bad;
    if (r->prompt_from_ids) { /* the ids are the input (docs/receipts.md "Prompts given as ids") */
        if (!e->tok) {
            e2 = e->tok_err;
            bad = 1;
        } else if (!(j->ids = malloc(r->n_prompt * sizeof *j->ids))) {
            malformed(v, CIS2_E_NOMEM, "out of memory");
            j->skip = 1;
            return;
        } else {
            memcpy(j->ids, r->prompt_ids, r->n_prompt * sizeof *j->ids);
            j->nids = r->n_prompt;
            bad = 0;
        }
    } else /* §3.1: the prompt bytes are the input; their ids are recomputed as a run makes them
            * (with the post-processor's special tokens, engine.h cis2_engine_encode_prompt) */
        bad = cis2_engine_encode_prompt(e, (const char *)r->prompt, r->prompt_len, SIZE_MAX, &j->ids, &j->nids, &e2) != 0;
    if (bad) {
        if (e2.code == CIS2_E_UNSUPPORTED) { /* a tokenizer.json outside what this engine runs */
            v->n_fields = 0;
            cis2_vd_set(v, CIS2_VERDICT_UNSUPPORTED, CIS2_E_UNSUPPORTED, "UNSUPPORTED", "(%s)", e2.msg);
        } else {
            snprintf(msg, sizeof msg, "%s: prompt-hex: %s", v->source, e2.msg);
            malformed(v, e2.code == CIS2_E_USAGE ? CIS2_E_FORMAT : e2.code, msg);
        }
        j->skip = 1;
        return;
    }
    size_t maxpos = (size_t)e->m.cfg.max_position_embeddings;
    if (j->nids == 0) {
        snprintf(msg, sizeof msg, "%s: prompt-hex encodes to no tokens", v->source);
        malformed(v, CIS2_E_FORMAT, msg);
        j->skip = 1;
        return;
    }
    for (size_t i = 0; i < j->nids; i++)
        if (j->ids[i] >= e->m.vocab) {
            if (r->prompt_from_ids) {
                snprintf(msg, sizeof msg, "%s: prompt-token-ids: id %u is outside the model's vocabulary (%zu)",
                         v->source, j->ids[i], e->m.vocab);
                malformed(v, CIS2_E_FORMAT, msg);
            } else
                malformed(v, CIS2_E_FORMAT, "the tokenizer gives ids outside the model's vocabulary");
            j->skip = 1;
            return;
        }
    j->claimed = r->gen_toks;
    j->ext = r->ext;
    j->stop = (cis2_stop_rule){.max_tokens = r->ext ? r->max_toks : r->gen_toks};
    if (r->ext) {
        j->samp = r->samp;
        if (r->has_eos) { j->stop.eos = e->info.eos_ids; j->stop.n_eos = e->info.n_eos; } /* the config's list */
        j->stop.ids = r->stop_ids;
        j->stop.n_ids = r->n_stop_ids;
        j->stop.strings = (char *const *)r->stop_str;
        j->stop.lens = r->stop_len;
        j->stop.n_strings = r->n_stop_str;
        if (r->n_stop_str && !e->tok) {
            v->n_fields = 0;
            cis2_vd_set(v, CIS2_VERDICT_UNSUPPORTED, CIS2_E_UNSUPPORTED, "UNSUPPORTED",
                        "(stop strings need the model's tokenizer: %s)", e->tok_err.msg);
            j->skip = 1;
            return;
        }
        char *lines = cis2_receipt_params_block(r), *run = cis2_params_block(&j->samp, &j->stop);
        if (!lines || !run) { free(lines); free(run); malformed(v, CIS2_E_NOMEM, "out of memory"); j->skip = 1; return; }
        cis2_sha256(lines, strlen(lines), j->params_lines); /* §S7.5 */
        cis2_sha256(run, strlen(run), j->params);
        free(lines);
        free(run);
        if (r->samp.top_k > e->m.vocab) j->samp.top_k = 0; /* reported as a mismatch; the run needs a valid k */
    }
    if (j->nids + j->stop.max_tokens > maxpos) {
        v->n_fields = 0;
        cis2_vd_set(v, CIS2_VERDICT_UNSUPPORTED, CIS2_E_UNSUPPORTED, "UNSUPPORTED",
                    "(%zu prompt tokens + %zu tokens exceed max_position_embeddings %zu)", j->nids,
                    j->stop.max_tokens, maxpos);
        j->skip = 1;
        return;
    }
    j->oov_step = j->claimed;
    for (size_t i = 0; i < j->claimed; i++)
        if (r->generated[i] >= e->m.vocab) { j->oov_step = i; break; }
}

/* ---- shared prompt prefixes (share.h): receipts of one prompt (an RL
 * group: many samples of one prompt; or one system prompt before many
 * questions) compute their common prefix once.  Sorted by their prompts'
 * ids, runs whose neighbours share at least CIS2_VERIFY_SHARE_MIN leading
 * ids; only positions before a job's last prompt token are shared (they
 * give no logits).  A receipt that is not replayed shares nothing. ---- */
void cis2_verify_share_rule(vjob *j)
{
    j->pj.sh = (cis2_share){.ids = j->ids, .len = j->skip ? 0 : j->nids, .cap = j->nids ? j->nids - 1 : 0,
                            .index = j->index, .skip = j->skip};
}

/* --------------------------------------------------------------- verdicts */

#define ART(key, w, g) do { if (cis2_vd_digest(v, key, w, g)) cis2_vd_name(art, sizeof art, key); } while (0)
#define OUT(cond, key) do { if (cond) cis2_vd_name(outs, sizeof outs, key); } while (0)

static void bad_step_note(cis2_verdict *v, const vjob *j)
{
    if (j->bad_step < 0) return;
    if (j->expected_tok == UINT32_MAX)
        cis2_vd_field(v, "first-bad-step", CIS2_FIELD_NOTE, "%lld: claimed %u, but the run stops before it",
                      j->bad_step, j->claimed_tok);
    else if (j->claimed_tok == UINT32_MAX)
        cis2_vd_field(v, "first-bad-step", CIS2_FIELD_NOTE, "%lld: no token claimed, but the run goes on with %u (logit 0x%08x)",
                      j->bad_step, j->expected_tok, j->expected_bits);
    else
        cis2_vd_field(v, "first-bad-step", CIS2_FIELD_NOTE,
                      "%lld: claimed %u (logit 0x%08x), the run's token %u (logit 0x%08x)", j->bad_step,
                      j->claimed_tok, j->claimed_bits, j->expected_tok, j->expected_bits);
}

/* The verdict of one replayed receipt: every field as the run gives it. */
void cis2_verify_judge(const cis2_engine *e, vjob *j)
{
    const cis2_model *m = &e->m;
    const cis2_receipt *r = j->r;
    cis2_verdict *v = j->v;
    char art[256] = "", outs[512] = "";
    ART("weights-sha256", r->weights_sha, m->weights_sha); /* recomputed from the files, never trusted */
    ART("config-sha256", r->config_sha, m->config_sha);
    ART("tokenizer-sha256", r->tokenizer_sha, m->tokenizer_sha);
    if (r->prompt_from_ids) { /* docs/receipts.md "Prompts given as ids" */
        if (cis2_receipt_judge_ids_prompt(v, r, e->tok, outs, sizeof outs)) {
            malformed(v, CIS2_E_NOMEM, "out of memory");
            return;
        }
    } else {
        cis2_vd_field(v, "prompt-hex", CIS2_FIELD_INPUT, "input (%zu bytes)", r->prompt_len);
        OUT(cis2_vd_ids(v, "prompt-token-ids", r->prompt_ids, r->n_prompt, j->ids, j->nids), "prompt-token-ids");
    }
    if (!r->ext) {
        cis2_vd_field(v, "gen-toks", CIS2_FIELD_INPUT, "input (%u)", r->gen_toks);
        cis2_vd_field(v, "dtype", CIS2_FIELD_OK, "ok");
    } else { /* docs/sampling.md §S8 */
        cis2_vd_field(v, "dtype", CIS2_FIELD_OK, "ok");
        cis2_vd_field(v, "max-toks", CIS2_FIELD_INPUT, "input (%u)", r->max_toks);
        static const char *const ins[] = {"sampler", "temperature"};
        for (int k = 0; k < 2; k++) cis2_vd_field(v, ins[k], CIS2_FIELD_INPUT, "input");
        if (r->samp.top_k > m->vocab) {
            cis2_vd_field(v, "top-k", CIS2_FIELD_MISMATCH, "MISMATCH %u is larger than the vocabulary (%zu)", r->samp.top_k,
                          m->vocab);
            cis2_vd_name(outs, sizeof outs, "top-k");
        } else cis2_vd_field(v, "top-k", CIS2_FIELD_INPUT, "input");
        static const char *const ins2[] = {"top-p", "min-p", "seed", "sequence"};
        for (int k = 0; k < 4; k++) cis2_vd_field(v, ins2[k], CIS2_FIELD_INPUT, "input");
        if (r->has_eos)
            OUT(cis2_vd_ids(v, "stop-eos", r->stop_eos, r->n_stop_eos, e->info.eos_ids, e->info.n_eos), "stop-eos");
        else cis2_vd_field(v, "stop-eos", CIS2_FIELD_INPUT, "input (none)");
        cis2_vd_field(v, "stop-ids", CIS2_FIELD_INPUT, "input");
        cis2_vd_field(v, "stop-strings", CIS2_FIELD_INPUT, "input");
        OUT(cis2_vd_digest(v, "params-digest", r->params_digest, j->params_lines), "params-digest");
    }
    OUT(cis2_vd_digest(v, "table-digest", r->table_digest, m->table_digest), "table-digest");
    OUT(cis2_vd_digest(v, "inv-freq-table-digest", r->inv_freq_digest, m->inv_freq_digest), "inv-freq-table-digest");
    if (r->ext) {
        uint32_t got = (uint32_t)j->ndec;
        if (got == r->gen_toks) cis2_vd_field(v, "gen-toks", CIS2_FIELD_OK, "ok");
        else {
            cis2_vd_field(v, "gen-toks", CIS2_FIELD_MISMATCH, "MISMATCH expected=%u got=%u", r->gen_toks, got);
            cis2_vd_name(outs, sizeof outs, "gen-toks");
        }
        const char *want = cis2_finish_name(r->finish), *gotf = cis2_finish_name(j->finish);
        if (r->finish == j->finish) cis2_vd_field(v, "finish-reason", CIS2_FIELD_OK, "ok");
        else {
            cis2_vd_field(v, "finish-reason", CIS2_FIELD_MISMATCH, "MISMATCH expected=%s got=%s", want, gotf);
            cis2_vd_name(outs, sizeof outs, "finish-reason");
        }
    }
    OUT(cis2_vd_ids(v, "generated-token-ids", r->generated, r->gen_toks, j->decoded, j->ndec), "generated-token-ids");
    bad_step_note(v, j);
    const char *dk = r->ext ? "token-digest" : "argmax-digest";
    OUT(cis2_vd_digest(v, dk, r->argmax, j->argmax), dk);
    int wbad = cis2_vd_digest(v, "witness-digest", r->witness, j->witness);
    OUT(wbad, "witness-digest");
    if (wbad && j->bad_step < 0)
        cis2_vd_field(v, "note", CIS2_FIELD_NOTE, "every claimed token is the decode's; the witness differs");
    v->first_bad_step = j->bad_step;
    v->claimed_token = j->claimed_tok;
    v->expected_token = j->expected_tok;
    v->claimed_logit_bits = j->claimed_bits;
    v->expected_logit_bits = j->expected_bits;
    if (art[0])
        cis2_vd_set(v, CIS2_VERDICT_ARTIFACT_MISMATCH, CIS2_E_HASH, "ARTIFACT-MISMATCH", "(%s)%s%s", art,
                    outs[0] ? "; outputs differ too: " : "", outs);
    else if (outs[0])
        cis2_vd_set(v, CIS2_VERDICT_OUTPUT_MISMATCH, CIS2_E_MISMATCH, "OUTPUT-MISMATCH", "(%s)", outs);
    else
        cis2_vd_set(v, CIS2_VERDICT_OK, CIS2_OK, "OK", "(all fields recomputed from %s)", e->dir);
}

/* docs/receipts.md "Prompts given as ids": the ids are the input; the
 * prompt-hex line must be their raw bytes, and no bytes may reproduce
 * them (else the run's receipt is the one without prompt-from, which
 * records those bytes).  Appends the prompt-from, prompt-hex and
 * prompt-token-ids fields, names each mismatch in outs; returns nonzero
 * when out of memory. */
int cis2_receipt_judge_ids_prompt(cis2_verdict *v, const cis2_receipt *r, const cis2_tokenizer *tok, char *outs,
                                  size_t cap)
{
    size_t tl = 0, rl = 0;
    char *text = cis2_ids_text_bytes(tok, r->prompt_ids, r->n_prompt, &tl);
    char *raw = cis2_ids_raw_bytes(tok, r->prompt_ids, r->n_prompt, &rl);
    char *hx = raw ? malloc(2 * (rl > tl ? rl : tl) + 1) : NULL, *hr = NULL;
    if (hx && (hr = malloc(2 * r->prompt_len + 1))) cis2_hex(r->prompt, r->prompt_len, hr);
    if (!hr) { free(text); free(raw); free(hx); return 1; }
    if (text) {
        cis2_hex((const uint8_t *)text, tl, hx);
        cis2_vd_field(v, "prompt-from", CIS2_FIELD_MISMATCH,
                      "MISMATCH the prompt bytes %s reproduce these ids: their receipt records those bytes, "
                      "without a prompt-from line", hx);
        cis2_vd_name(outs, cap, "prompt-from");
    } else cis2_vd_field(v, "prompt-from", CIS2_FIELD_OK, "ok (ids: no prompt bytes reproduce them)");
    cis2_hex((const uint8_t *)raw, rl, hx);
    if (rl == r->prompt_len && (rl == 0 || !memcmp(raw, r->prompt, rl)))
        cis2_vd_field(v, "prompt-hex", CIS2_FIELD_OK, "ok (the ids' bytes)");
    else {
        cis2_vd_field(v, "prompt-hex", CIS2_FIELD_MISMATCH, "MISMATCH expected=%s got=%s (the ids' bytes)",
                      r->prompt_len ? hr : "none", rl ? hx : "none");
        cis2_vd_name(outs, cap, "prompt-hex");
    }
    cis2_vd_field(v, "prompt-token-ids", CIS2_FIELD_INPUT, "input (%zu ids)", r->n_prompt);
    free(text);
    free(raw);
    free(hx);
    free(hr);
    return 0;
}
