/*
 * selftest.c - `cis2 selftest`: the checks a conforming build must pass
 * before any decode (§1.3 pin + adversarial self-test, §6.6 table_digest,
 * §7.2 inv_freq_table_digest for rope_theta 100000 / head_dim 64, §6.1
 * rsqrt(64) and the §5.1 cancellation regression).
 */
#include "cis2_toolkit.h" /* and cis2.h */
#include "pmath.h"

#include <string.h>

#define TABLE_DIGEST_V03B "23c7bfaf5cef0095fd021af2eb1808abb4928bae4219756d86bdac670a06b35d"
#define INV_FREQ_DIGEST_SMOLLM2 "da9f6dcfde0425588815509e874515cdcd3d6b8818b6d0136590052e7bbf6f12"

static int line(FILE *out, const char *name, int ok, const char *detail)
{
    if (out) fprintf(out, "%-28s %s%s%s\n", name, ok ? "ok" : "FAIL", detail ? "  " : "", detail ? detail : "");
    return ok;
}

int cis2_selftest(FILE *out, cis2_error *err)
{
    int rc = cis2_fpenv_pin(err);
    line(out, "fpenv pin", rc == CIS2_OK, cis2_isa_name());
    if (rc) return rc;
    rc = cis2_fpenv_selftest(err);
    line(out, "fpenv adversarial probes", rc == CIS2_OK, rc ? err->msg : NULL);
    if (rc) return rc;

    uint8_t d[32];
    char hex[65];
    cis2_table_digest(d);
    cis2_hex(d, 32, hex);
    if (out) fprintf(out, "table_digest = %s\n", hex);
    if (!line(out, "table_digest (§6.6)", strcmp(hex, TABLE_DIGEST_V03B) == 0, NULL))
        return cis2_fail(err, CIS2_E_MISMATCH, "table_digest %s != %s", hex, TABLE_DIGEST_V03B);

    float inv[32];
    volatile uint32_t theta_bits = 0x47C35000u; /* 100000.0 */
    cis2_rope_inv_freq(f32_from_bits(theta_bits), 64, inv);
    cis2_inv_freq_table_digest(inv, 32, d);
    cis2_hex(d, 32, hex);
    if (out) fprintf(out, "inv_freq_table_digest = %s\n", hex);
    if (!line(out, "inv_freq_table_digest (§7.2)", strcmp(hex, INV_FREQ_DIGEST_SMOLLM2) == 0, NULL))
        return cis2_fail(err, CIS2_E_MISMATCH, "inv_freq_table_digest %s != %s", hex,
                         INV_FREQ_DIGEST_SMOLLM2);

    volatile uint32_t sixty_four = 0x42800000u;
    uint32_t r = f32_bits(cis2_rsqrt_cr(f32_from_bits(sixty_four)));
    if (!line(out, "rsqrt(64) == 0x3E000000", r == 0x3E000000u, NULL))
        return cis2_fail(err, CIS2_E_MISMATCH, "rsqrt(64) = 0x%08X, want 0x3E000000", r);

    volatile uint32_t a_bits[3] = {0x4CBEBC20u, 0x3F800000u, 0xCCBEBC20u}; /* 1e8, 1, -1e8 */
    float a[3], b[3];
    for (int i = 0; i < 3; i++) { a[i] = f32_from_bits(a_bits[i]); b[i] = f32_from_bits(0x3F800000u); }
    uint32_t dot = f32_bits(cis2_dot_seq(a, b, 3));
    if (!line(out, "dot_seq([1e8,1,-1e8]) == 0", dot == 0, NULL))
        return cis2_fail(err, CIS2_E_MISMATCH, "dot_seq cancellation check = 0x%08X, want 0", dot);
    if (out) fprintf(out, "selftest=PASS\n");
    return CIS2_OK;
}
