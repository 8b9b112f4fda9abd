/*
 * api_sampling.c - the public face of the sampling extension's rules
 * (include/cis2.h section 5, docs/sampling.md): §S2.3's decimal text to
 * binary32, the §S2.2 check and the §S7.1 decision "extension run or the
 * spec's run", each made in one place (here, sample.c's
 * cis2_sampling_check, session.c's rule) and offered to clients here so
 * that none of them repeats it.
 */
#define _GNU_SOURCE /* strtof_l, newlocale */
#include "api.h"
#include "sample.h"
#include "session.h"

#include <locale.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------ §S2.3 decimal text */

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void c_locale_init(void) { c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

/* s[0..len) is [+-]? (d+ (. d*)? | . d+) ([eE] [+-]? d+)?; *nonzero: a
 * nonzero digit before the exponent. */
static int decimal_syntax(const char *s, size_t len, int *nonzero)
{
    size_t i = 0, digits = 0;
    *nonzero = 0;
    if (i < len && (s[i] == '+' || s[i] == '-')) i++;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) { digits++; *nonzero |= s[i] != '0'; }
    if (i < len && s[i] == '.')
        for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++) { digits++; *nonzero |= s[i] != '0'; }
    if (!digits) return 0;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < len && (s[i] == '+' || s[i] == '-')) i++;
        size_t e0 = i;
        while (i < len && s[i] >= '0' && s[i] <= '9') i++;
        if (i == e0) return 0;
    }
    return i == len;
}

int cis2_decimal_to_f32(const char *s, size_t len, float *out, cis2_error *err)
{
    int nonzero;
    if (!s || !decimal_syntax(s, len, &nonzero))
        return cis2_fail(err, CIS2_E_USAGE, "'%.*s' is not a decimal number", (int)(len > 64 ? 64 : len), s ? s : "");
    char small[128], *buf = len < sizeof small ? small : malloc(len + 1);
    if (!buf) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    memcpy(buf, s, len);
    buf[len] = 0;
    pthread_once(&c_locale_once, c_locale_init);
    float f;
    cis2_frame fr;
    cis2_api_enter(&fr); /* round to nearest even, whatever the caller set (§1.3) */
    unsigned x87 = cis2_libc_round_begin();
    f = c_locale ? strtof_l(buf, NULL, c_locale) : strtof(buf, NULL); /* correctly rounded (glibc) */
    cis2_libc_round_end(x87);
    cis2_api_leave(&fr);
    if (buf != small) free(buf);
    uint32_t b;
    memcpy(&b, &f, 4);
    int shown = (int)(len > 64 ? 64 : len);
    if ((b & 0x7F800000u) == 0x7F800000u) return cis2_fail(err, CIS2_E_USAGE, "%.*s overflows binary32", shown, s);
    if (nonzero && (b & 0x7F800000u) == 0)
        return cis2_fail(err, CIS2_E_USAGE, "%.*s is below the smallest normal binary32 (it would be taken as 0)",
                         shown, s);
    *out = f;
    return CIS2_OK;
}

/* ------------------------------------------------------- §S2.2, §S7.1 */

int cis2_sampling_validate(const cis2_engine *e, const cis2_sampling *s, const char **param, cis2_error *err)
{
    cis2_error mine = {0};
    if (param) *param = NULL;
    int rc = cis2_sampling_check(s, cis2_engine_info(e)->vocab_size, &mine);
    if (!rc) return CIS2_OK;
    /* the check's message begins with the parameter's name (sample.c) */
    static const char *const names[] = {"temperature", "top_k", "top_p", "min_p"};
    for (size_t i = 0; param && i < sizeof names / sizeof names[0]; i++)
        if (!strncmp(mine.msg, names[i], strlen(names[i]))) *param = names[i];
    return cis2_fail(err, rc, "%s", mine.msg);
}

int cis2_result_is_extension(const cis2_result *r)
{
    return r && r->priv && r->priv->rule.extension;
}
