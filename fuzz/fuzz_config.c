/*
 * fuzz_config.c - libFuzzer target for the config.json parser
 * (src/config.c cis2_config_parse on the raw bytes).
 *
 * On success the documented limits must hold, so that every later size
 * product (model.c) stays within size_t, and the RoPE table the config
 * asks for (§7.1, docs/models.md §M1) must be finite and non-negative.
 * heads x head_dim may differ from hidden_size only where the family's
 * row says so (free_head_dim: docs/models.md §M2, §M7); it is bounded
 * through the parameter count.  A sliding window (§M5) only in a family
 * with a window rule, in [1, 2^31]; gemma3_text's query_pre_attn_scalar
 * is in [1, 2^24] and its second RoPE table (§M7.4) is finite and
 * non-negative too.
 */
#include "fuzz_util.h"

#include <math.h>
#include <string.h>

#include "config.h"
#include "family.h"

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
            c.head_dim <= 0 || c.head_dim > CIS2_CFG_MAX_HIDDEN || c.head_dim % 2 != 0 ||
            (c.head_dim * c.num_attention_heads != c.hidden_size && !c.family->free_head_dim) ||
            !(c.rms_norm_eps > 0.0f) || !(c.rope_theta > 0.0f) || c.sliding_window < 0 ||
            c.sliding_window > ((int64_t)1 << 31) ||
            (c.sliding_window && c.family->window == CIS2_WINDOW_NONE) ||
            (cis2_config_gemma3(&c) && (c.query_pre_attn_scalar < 1 || c.query_pre_attn_scalar > (1 << 24) ||
                                        !(c.rope_local_theta > 0.0f))) ||
            cis2_config_param_count(&c) > CIS2_CFG_MAX_PARAMS)
            abort();
        static float inv_freq[CIS2_CFG_MAX_HIDDEN]; /* two tables of head_dim / 2 at most */
        size_t n = cis2_config_inv_freq_len(&c);
        if (n > CIS2_CFG_MAX_HIDDEN) abort();
        cis2_config_inv_freq(&c, inv_freq);
        for (size_t i = 0; i < n; i++)
            if (!isfinite(inv_freq[i]) || inv_freq[i] < 0.0f) abort();
    }
    return 0;
}
