/*
 * genconfig.c - generation_config.json's eos_token_id beside config.json's
 * (docs/sampling.md §S5.1: the eos list is config.json's ids, then the
 * ids of generation_config.json's not already in it; docs/inputs.md
 * "generation_config.json").  Transformers' generate() and vLLM stop at
 * the generation config's eos ids; Llama-3 instruct checkpoints list
 * several there (<|eom_id|>, <|eot_id|> beside <|end_of_text|>) and
 * gpt-oss-20b's lists <|return|> (200002) and <|endoftext|> (199999), so
 * without them stop-at-eos would run past the end of a turn.  Only eos_token_id is read: the sampling defaults
 * the file also holds are not applied (a request's parameters are its
 * own, docs/sampling.md §S2).
 * Callers: model.c (engine open), judge.c (cis2_check).
 */
#include "genconfig.h"
#include "fileio.h"
#include "jsonlim.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int cis2_genconfig_merge(cis2_config *c, const char *json, size_t len, const char *name, cis2_error *err)
{
    json_t *root;
    int rc = cis2_json_load_model_file(json, len, CIS2_CFG_MAX_JSON_COST, name, "a generation_config.json", &root, err);
    if (rc) return rc;
    uint32_t ids[64];
    size_t n = 0;
    json_t *v = json_is_object(root) ? json_object_get(root, "eos_token_id") : NULL;
    if (!json_is_object(root)) rc = cis2_fail(err, CIS2_E_FORMAT, "%s: not a JSON object", name);
    else if (cis2_config_eos_list(v, ids, &n))
        rc = cis2_fail(err, CIS2_E_FORMAT, "%s: eos_token_id must be an id or a list of at most 64 ids (0..4294967295)",
                       name);
    json_decref(root);
    if (rc || c->eos_malformed) return rc;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < c->n_eos && c->eos_ids[k] != ids[i]) k++;
        if (k < c->n_eos) continue; /* listed already (config.json's, or earlier in this file) */
        if (c->n_eos == 64)
            return cis2_fail(err, CIS2_E_FORMAT, "%s: eos_token_id: more than 64 eos ids with config.json's", name);
        c->eos_ids[c->n_eos++] = ids[i];
    }
    return CIS2_OK;
}

int cis2_genconfig_merge_dir(cis2_config *c, const char *dir, cis2_error *err)
{
    char path[4200];
    int n = snprintf(path, sizeof path, "%s/generation_config.json", dir);
    if (n < 0 || (size_t)n >= sizeof path) return cis2_fail(err, CIS2_E_USAGE, "%s: path too long", dir);
    struct stat st;
    if (stat(path, &st) != 0 && errno == ENOENT) return CIS2_OK; /* absent: config.json's list alone */
    char *buf;
    size_t len;
    int rc = cis2_read_file(path, CIS2_CFG_MAX_FILE, "a generation_config.json", &buf, &len, err);
    if (rc) return rc;
    rc = cis2_genconfig_merge(c, buf, len, path, err);
    free(buf);
    return rc;
}
