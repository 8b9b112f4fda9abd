/*
 * pmath_dump.c - cis2's own exp_pinned / ln_pinned (src/pmath.c, spec §6.2,
 * §6.5) over inputs read from stdin, for the differential test of the
 * Python reference (tests/sampling/test_sampling_ref.py,
 * test_pmath_differential).  Input, little-endian u32 words: op (0 = exp,
 * 1 = ln), n, then n input bit patterns; output: n result bit patterns.
 * FTZ/DAZ are pinned first (§1.3), as for a decode.
 */
#include "cis2_toolkit.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    cis2_error err;
    if (cis2_fpenv_pin(&err) != CIS2_OK) { fprintf(stderr, "pmath_dump: fpenv pin failed\n"); return 7; }
    uint32_t hdr[2];
    if (fread(hdr, 4, 2, stdin) != 2) return 4;
    uint32_t *v = malloc((size_t)hdr[1] * 4 + 4);
    if (!v || fread(v, 4, hdr[1], stdin) != hdr[1]) return 4;
    for (uint32_t i = 0; i < hdr[1]; i++) {
        float x, y;
        memcpy(&x, &v[i], 4);
        y = hdr[0] == 0 ? cis2_exp_pinned(x) : cis2_ln_pinned(x);
        memcpy(&v[i], &y, 4);
    }
    fwrite(v, 4, hdr[1], stdout);
    free(v);
    return 0;
}
