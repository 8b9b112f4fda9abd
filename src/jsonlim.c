/*
 * jsonlim.c - the pre-scan behind cis2_json_cost_check (jsonlim.h): one
 * pass over the JSON text counting the values jansson would allocate, so
 * that every JSON input's memory is bounded before it is parsed (issue 16;
 * docs/inputs.md).  No spec section: this is input hardening only.
 */
#include "jsonlim.h"

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
