/*
 * jsonlim.c - the pre-scan behind cis2_json_cost_check (jsonlim.h): one
 * pass over the JSON text counting the values jansson would allocate, so
 * that every JSON input's memory is bounded before it is parsed
 * (docs/inputs.md "Memory").  No spec section: this is input hardening only.
 */
#include "jsonlim.h"

#include <stdlib.h>
#include <string.h>

#define COST_OBJECT 256u
#define COST_ARRAY 160u
#define COST_STRING 96u
#define COST_NUMBER 48u
#define COST_SLOT 32u

void cis2_json_cost_of(const char *buf, size_t len, cis2_json_cost *out)
{
    cis2_json_cost c = {0};
    const unsigned char *p = (const unsigned char *)buf, *end = p + len;
    while (p < end) {
        unsigned char ch = *p++;
        switch (ch) {
        case '{': c.objects++; break;
        case '[': c.arrays++; break;
        case '"': {
            const unsigned char *s = p;
            while (p < end && *p != '"') p += *p == '\\' ? 2 : 1;
            if (p > end) p = end;
            c.strings++;
            c.string_bytes += (uint64_t)(p - s);
            if (p < end) p++; /* the closing quote */
            break;
        }
        case '-': case '0': case '1': case '2': case '3': case '4':
        case '5': case '6': case '7': case '8': case '9':
            c.numbers++;
            while (p < end && ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' ||
                               *p == '-'))
                p++;
            break;
        case 't': case 'f': case 'n':
            c.literals++;
            while (p < end && *p >= 'a' && *p <= 'z') p++;
            break;
        default: break;
        }
    }
    uint64_t values = c.objects + c.arrays + c.strings + c.numbers + c.literals;
    c.bytes = c.objects * COST_OBJECT + c.arrays * COST_ARRAY + c.strings * COST_STRING + c.string_bytes +
              c.numbers * COST_NUMBER + values * COST_SLOT;
    if (out) *out = c;
}

int cis2_json_cost_check(const char *buf, size_t len, uint64_t max_bytes, const char *name, const char *what,
                         cis2_error *err)
{
    cis2_json_cost c;
    cis2_json_cost_of(buf, len, &c);
    if (c.bytes <= max_bytes) return CIS2_OK;
    return cis2_fail(err, CIS2_E_FORMAT,
                     "%s: its JSON would take about %llu MiB of memory to parse, over the %llu MiB limit for %s "
                     "(%llu objects, %llu arrays, %llu strings, %llu numbers)",
                     name, (unsigned long long)(c.bytes >> 20), (unsigned long long)(max_bytes >> 20),
                     what ? what : "this file", (unsigned long long)c.objects, (unsigned long long)c.arrays,
                     (unsigned long long)c.strings, (unsigned long long)c.numbers);
}

/* ------------------------------------------------ integers beyond int64 */

/* Whether the integer literal s[0..n) (an optional '-', then digits) is
 * outside int64, as jansson's strtoll finds it. */
static int int_overflows(const char *s, size_t n)
{
    int neg = s[0] == '-';
    size_t d = n - (size_t)neg;
    const char *lim = neg ? "9223372036854775808" : "9223372036854775807";
    return d > 19 || (d == 19 && memcmp(s + neg, lim, 19) > 0);
}

int cis2_json_wide_ints(const char *buf, size_t len, char **out, size_t *out_len, cis2_error *err)
{
    *out = NULL;
    *out_len = 0;
    char *o = NULL;
    size_t k = 0, from = 0; /* o[0..k) holds buf[0..from) rewritten */
    for (size_t i = 0; i < len;) {
        char c = buf[i];
        if (c == '"') { /* a string: skipped whole, escapes included */
            for (i++; i < len && buf[i] != '"'; i++)
                if (buf[i] == '\\') i++;
            i++;
            continue;
        }
        if (c != '-' && (c < '0' || c > '9')) { i++; continue; }
        size_t j = i + 1, integer = 1;
        while (j < len && ((buf[j] >= '0' && buf[j] <= '9') || buf[j] == '.' || buf[j] == 'e' || buf[j] == 'E' ||
                           buf[j] == '+' || buf[j] == '-')) {
            if (buf[j] < '0' || buf[j] > '9') integer = 0;
            j++;
        }
        if (integer && j - i >= 19 && int_overflows(buf + i, j - i)) {
            if (!o && !(o = malloc(len + len / 8 + 32)))
                return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
            memcpy(o + k, buf + from, i - from);
            k += i - from;
            size_t digits = j - i - (c == '-');
            if (digits <= 308) { /* the same digits as a real: ".0" (2 more bytes for at least 19) */
                memcpy(o + k, buf + i, j - i);
                k += j - i;
                memcpy(o + k, ".0", 2);
                k += 2;
            } else { /* beyond a double: its largest, in no more bytes than the literal */
                static const char dmax[] = "1.7976931348623157e308";
                if (c == '-') o[k++] = '-';
                memcpy(o + k, dmax, sizeof dmax - 1);
                k += sizeof dmax - 1;
            }
            from = j;
        }
        i = j;
    }
    if (!o) return CIS2_OK;
    memcpy(o + k, buf + from, len - from);
    k += len - from;
    o[k] = 0;
    *out = o;
    *out_len = k;
    return CIS2_OK;
}

json_t *cis2_json_loadb_wide(const char *buf, size_t len, size_t flags, json_error_t *je)
{
    char *wide = NULL;
    size_t wlen = 0;
    cis2_error err = {0};
    if (cis2_json_wide_ints(buf, len, &wide, &wlen, &err)) {
        memset(je, 0, sizeof *je);
        snprintf(je->text, sizeof je->text, "out of memory");
        return NULL;
    }
    json_t *root = json_loadb(wide ? wide : buf, wide ? wlen : len, flags, je);
    free(wide);
    return root;
}

int cis2_json_load_model_file(const char *buf, size_t len, uint64_t budget, const char *name, const char *what,
                              json_t **root, cis2_error *err)
{
    *root = NULL;
    int rc = cis2_json_cost_check(buf, len, budget, name, what, err);
    if (rc) return rc;
    json_error_t je;
    *root = cis2_json_loadb_wide(buf, len, JSON_REJECT_DUPLICATES, &je); /* inputs.md "JSON numbers" */
    if (!*root)
        return cis2_fail(err, CIS2_E_FORMAT, "%s: invalid JSON (%s, line %d column %d)", name, je.text, je.line,
                         je.column);
    return CIS2_OK;
}

uint64_t cis2_json_cost_bytes(const char *buf, size_t len)
{
    cis2_json_cost c;
    cis2_json_cost_of(buf, len, &c);
    return c.bytes;
}
