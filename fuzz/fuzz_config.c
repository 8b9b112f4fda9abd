/*
 * fuzz_config.c - libFuzzer target for the config.json parser
 * (src/config.c cis2_config_parse on the raw bytes).
 *
 * On success the documented limits must hold, so that every later size
 * product (model.c) stays within size_t.
 */
#include "fuzz_util.h"

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cis2_config c;
    cis2_error e = {0};
    int rc = cis2_config_parse(&c, (const char *)data, size, "fuzz-config.json", &e);
    fuzz_check_error(rc, &e);
    if (rc == CIS2_OK) {
        if (c.hidden_size <= 0 || c.hidden_size > CIS2_CFG_MAX_HIDDEN || c.intermediate_size <= 0 ||
            c.intermediate_size > CIS2_CFG_MAX_INTER || c.num_hidden_layers <= 0 ||
            c.num_hidden_layers > CIS2_CFG_MAX_LAYERS || c.vocab_size <= 0 || c.vocab_size > CIS2_CFG_MAX_VOCAB ||
            c.max_position_embeddings <= 0 || c.max_position_embeddings > CIS2_CFG_MAX_POS ||
            c.num_attention_heads <= 0 || c.num_key_value_heads <= 0 ||
            c.num_attention_heads % c.num_key_value_heads != 0 ||
            c.head_dim * c.num_attention_heads != c.hidden_size || c.head_dim % 2 != 0 ||
            !(c.rms_norm_eps > 0.0f) || !(c.rope_theta > 0.0f) ||
            cis2_config_param_count(&c, 1) > CIS2_CFG_MAX_PARAMS)
            abort();
    }
    return 0;
}
