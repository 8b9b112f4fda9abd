/*
 * safetensors.c - reader and validator for safetensors files (spec §2.1
 * the whole file's sha256, §2.5 names/shapes come from the header; §4.1
 * widening).  Callers: model.c (cis2_st_open_stream), tests and
 * fuzz/fuzz_safetensors.c (cis2_st_open).  Contract in safetensors.h.
 *
 * Layout: 8-byte little-endian header length N, N bytes of JSON (an object
 * mapping tensor name -> {"dtype", "shape", "data_offsets": [begin, end]},
 * plus an optional "__metadata__" object of strings), then the data area.
 * Offsets are relative to the data area, which starts at byte 8 + N: any
 * offset, odd included.  Every structural property is checked here so the
 * model code can trust the table: dtype known, shape product x element
 * size == byte span (overflow-checked), tensors tile the data area exactly
 * (no overlap, no hole, no trailing bytes).  The header's memory is bounded
 * before jansson parses it (N <= 100 MB, jsonlim.h cost <= 256 MiB); the
 * file is read once, sequentially, and hashed as it is read (fileio.h).
 */
#include "safetensors.h"
#include "jsonlim.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

unsigned cis2_st_dtype_size(cis2_st_dtype d) { return d == CIS2_ST_F32 ? 4u : d == CIS2_ST_U8 ? 1u : 2u; }

uint64_t cis2_st_numel(const cis2_st_tensor *t)
{
    uint64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i]; /* validated not to overflow */
    return n;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const cis2_st_tensor *)a)->name, ((const cis2_st_tensor *)b)->name);
}

typedef struct { uint64_t offset, nbytes; size_t idx; } by_off;
static int cmp_offset(const void *a, const void *b)
{
    const by_off *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return 0;
}

/* A JSON integer in [0, INT64_MAX]; -1 otherwise. */
static int64_t json_u(const json_t *v)
{
    if (!json_is_integer(v)) return -1;
    json_int_t x = json_integer_value(v);
    return x < 0 ? -1 : (int64_t)x;
}

/* Parses one tensor entry into *t (name not set); data_len is the size of
 * the data area. */
static int parse_entry(const char *path, const char *name, json_t *e, cis2_st_tensor *t, uint64_t data_len,
                       cis2_error *err)
{
    if (!json_is_object(e))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: tensor '%s': entry is not an object", path, name);
    const char *key;
    json_t *val;
    json_object_foreach(e, key, val) {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
            return cis2_fail(err, CIS2_E_FORMAT, "%s: tensor '%s': unknown key '%s'", path, name, key);
    }
    json_t *dt = json_object_get(e, "dtype"), *sh = json_object_get(e, "shape"),
           *off = json_object_get(e, "data_offsets");
    if (!dt) return cis2_fail(err, CIS2_E_FORMAT, "%s: tensor '%s': missing dtype", path, name);
    if (!sh) return cis2_fail(err, CIS2_E_FORMAT, "%s: tensor '%s': missing shape", path, name);
    if (!off) return cis2_fail(err, CIS2_E_FORMAT, "%s: tensor '%s': missing data_offsets", path, name);
    if (!json_is_string(dt))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: tensor '%s': dtype is not a string", path, name);
    const char *ds = json_string_value(dt);
    if (!strcmp(ds, "BF16")) t->dtype = CIS2_ST_BF16;
    else if (!strcmp(ds, "F32")) t->dtype = CIS2_ST_F32;
    else if (!strcmp(ds, "F16")) t->dtype = CIS2_ST_F16;
    else if (!strcmp(ds, "U8")) t->dtype = CIS2_ST_U8;
    else
        return cis2_fail(err, CIS2_E_UNSUPPORTED,
                         "%s: tensor '%s': dtype '%.32s' not supported (only BF16, F16, F32 and U8)", path, name, ds);

    if (!json_is_array(sh))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: tensor '%s': shape is not an array", path, name);
    size_t nd = json_array_size(sh);
    if (nd > 4)
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: tensor '%s': rank %zu > 4", path, name, nd);
    t->ndim = (int)nd;
    uint64_t numel = 1;
    for (size_t i = 0; i < nd; i++) {
        int64_t d = json_u(json_array_get(sh, i));
        if (d < 0)
            return cis2_fail(err, CIS2_E_FORMAT, "%s: tensor '%s': shape[%zu] is not a non-negative integer",
                             path, name, i);
        t->shape[i] = (uint64_t)d;
        if (d != 0 && numel > UINT64_MAX / (uint64_t)d)
            return cis2_fail(err, CIS2_E_FORMAT, "%s: tensor '%s': shape product overflows", path, name);
        numel *= (uint64_t)d;
    }
    unsigned es = cis2_st_dtype_size(t->dtype);
    if (numel > UINT64_MAX / es)
        return cis2_fail(err, CIS2_E_FORMAT, "%s: tensor '%s': byte size overflows", path, name);

    if (!json_is_array(off) || json_array_size(off) != 2)
        return cis2_fail(err, CIS2_E_FORMAT, "%s: tensor '%s': data_offsets is not a [begin, end] pair", path, name);
    int64_t b = json_u(json_array_get(off, 0)), en = json_u(json_array_get(off, 1));
    if (b < 0 || en < 0)
        return cis2_fail(err, CIS2_E_FORMAT, "%s: tensor '%s': data_offsets are not non-negative integers",
                         path, name);
    if (b > en)
        return cis2_fail(err, CIS2_E_FORMAT, "%s: tensor '%s': data_offsets begin %lld > end %lld", path, name,
                         (long long)b, (long long)en);
    if ((uint64_t)en > data_len)
        return cis2_fail(err, CIS2_E_FORMAT,
                         "%s: tensor '%s': data_offsets end %lld beyond the data area (%llu bytes)", path, name,
                         (long long)en, (unsigned long long)data_len);
    uint64_t span = (uint64_t)(en - b);
    if (numel * es != span)
        return cis2_fail(err, CIS2_E_FORMAT,
                         "%s: tensor '%s': shape needs %llu bytes but data_offsets span %llu", path, name,
                         (unsigned long long)(numel * es), (unsigned long long)span);
    t->offset = (uint64_t)b;
    t->data = NULL;
    t->nbytes = span;
    return CIS2_OK;
}

static int parse_header(cis2_st_file *f, const char *path, const uint8_t *hdr, size_t hlen, uint64_t data_len,
                        cis2_error *err)
{
    int rc = cis2_json_cost_check((const char *)hdr, hlen, CIS2_ST_MAX_HEADER_COST, path, "a safetensors header", err);
    if (rc) return rc;
    json_error_t je;
    json_t *root = json_loadb((const char *)hdr, hlen, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return cis2_fail(err, CIS2_E_FORMAT, "%s: header is not valid JSON (%s at byte %d)", path, je.text,
                         je.position);
    if (!json_is_object(root)) {
        rc = cis2_fail(err, CIS2_E_FORMAT, "%s: header is not a JSON object", path);
        goto out;
    }
    size_t cap = json_object_size(root);
    f->t = calloc(cap ? cap : 1, sizeof *f->t);
    if (!f->t) { rc = cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory for %zu tensors", path, cap); goto out; }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (!strcmp(key, "__metadata__")) {
            if (!json_is_object(val)) {
                rc = cis2_fail(err, CIS2_E_FORMAT, "%s: __metadata__ is not an object", path);
                goto out;
            }
            const char *mk;
            json_t *mv;
            json_object_foreach(val, mk, mv) {
                if (!json_is_string(mv)) {
                    rc = cis2_fail(err, CIS2_E_FORMAT, "%s: __metadata__ value '%s' is not a string", path, mk);
                    goto out;
                }
            }
            continue;
        }
        if (!*key) { rc = cis2_fail(err, CIS2_E_FORMAT, "%s: empty tensor name", path); goto out; }
        cis2_st_tensor *t = &f->t[f->n];
        if ((rc = parse_entry(path, key, val, t, data_len, err))) goto out;
        if (!(t->name = strdup(key))) { rc = cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path); goto out; }
        f->n++;
    }

    /* The tensors must tile the data area: sorted by offset, each begins
     * where the previous ended, and the last ends at the end of the file. */
    qsort(f->t, f->n, sizeof *f->t, cmp_name);
    if (!(f->order = malloc((f->n ? f->n : 1) * sizeof *f->order))) {
        rc = cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
        goto out;
    }
    by_off *bo = malloc((f->n ? f->n : 1) * sizeof *bo);
    if (!bo) { rc = cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path); goto out; }
    for (size_t i = 0; i < f->n; i++) bo[i] = (by_off){f->t[i].offset, f->t[i].nbytes, i};
    qsort(bo, f->n, sizeof *bo, cmp_offset);
    for (size_t i = 0; i < f->n; i++) f->order[i] = bo[i].idx;
    free(bo);
    uint64_t pos = 0;
    for (size_t i = 0; i < f->n && !rc; i++) {
        const cis2_st_tensor *t = &f->t[f->order[i]];
        if (t->offset < pos)
            rc = cis2_fail(err, CIS2_E_FORMAT, "%s: tensor '%s' overlaps tensor '%s'", path, t->name,
                           f->t[f->order[i - 1]].name);
        else if (t->offset > pos)
            rc = cis2_fail(err, CIS2_E_FORMAT, "%s: hole in the data area at bytes [%llu, %llu) before '%s'", path,
                           (unsigned long long)pos, (unsigned long long)t->offset, t->name);
        pos = t->offset + t->nbytes;
    }
    if (!rc && pos != data_len)
        rc = cis2_fail(err, CIS2_E_FORMAT, "%s: %llu bytes after the last tensor (hole at the end of the data area)",
                       path, (unsigned long long)(data_len - pos));
out:
    json_decref(root);
    return rc;
}

int cis2_st_open_stream(cis2_st_file *f, const char *path, cis2_error *err)
{
    memset(f, 0, sizeof *f);
    f->in.fd = -1;
    int rc = cis2_in_open(&f->in, path, 0, NULL, err);
    if (rc) return rc;
    if (cis2_sha_init(&f->sha)) {
        cis2_in_close(&f->in);
        return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
    }
    f->streaming = 1;
    if (!(f->path = strdup(path))) {
        cis2_st_close(f);
        return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
    }
    uint64_t size = f->in.size;
    if (size < 8) {
        cis2_st_close(f);
        return cis2_fail(err, CIS2_E_FORMAT, "%s: file is %llu bytes, shorter than the 8-byte header length", path,
                         (unsigned long long)size);
    }
    uint8_t p[8];
    if ((rc = cis2_in_read(&f->in, p, 8, err))) { cis2_st_close(f); return rc; }
    cis2_sha_update(&f->sha, p, 8);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | p[i]; /* little-endian u64 */
    if (hlen > CIS2_ST_MAX_HEADER)
        rc = cis2_fail(err, CIS2_E_FORMAT, "%s: header length %llu exceeds the %u-byte limit", path,
                       (unsigned long long)hlen, CIS2_ST_MAX_HEADER);
    else if (hlen > size - 8)
        rc = cis2_fail(err, CIS2_E_FORMAT, "%s: header length %llu runs past the end of the %llu-byte file", path,
                       (unsigned long long)hlen, (unsigned long long)size);
    if (rc) { cis2_st_close(f); return rc; }
    uint8_t *hdr = malloc(hlen ? (size_t)hlen : 1);
    if (!hdr) { cis2_st_close(f); return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory for the header", path); }
    if (!(rc = cis2_in_read(&f->in, hdr, (size_t)hlen, err))) {
        cis2_sha_update(&f->sha, hdr, (size_t)hlen);
        f->header_len = hlen;
        f->data_len = size - 8 - hlen;
        f->file_size = size;
        rc = parse_header(f, path, hdr, (size_t)hlen, f->data_len, err);
    }
    free(hdr);
    if (rc) cis2_st_close(f);
    return rc;
}

int cis2_st_read(cis2_st_file *f, void *buf, size_t n, cis2_error *err)
{
    int rc = cis2_in_read(&f->in, buf, n, err);
    if (!rc) cis2_sha_update(&f->sha, buf, n);
    return rc;
}

int cis2_st_finish(cis2_st_file *f, uint8_t sha[32], cis2_error *err)
{
    int rc = cis2_in_finish(&f->in, err);
    uint8_t d[32];
    cis2_sha_final(&f->sha, d);
    f->streaming = 0;
    if (!rc && sha) memcpy(sha, d, 32);
    return rc;
}

int cis2_st_open(cis2_st_file *f, const char *path, uint8_t sha[32], cis2_error *err)
{
    int rc = cis2_st_open_stream(f, path, err);
    if (rc) return rc;
    /* placed at the file's offset mod 8, so a misaligned tensor stays misaligned in memory */
    if (f->data_len >= SIZE_MAX - 16 || !(f->data_alloc = malloc((size_t)f->data_len + 8))) {
        cis2_st_close(f);
        return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory for %llu bytes of tensors", path,
                         (unsigned long long)f->data_len);
    }
    f->data = f->data_alloc + (8 + f->header_len) % 8;
    if ((rc = cis2_st_read(f, f->data, (size_t)f->data_len, err)) || (rc = cis2_st_finish(f, sha, err))) {
        cis2_st_close(f);
        return rc;
    }
    for (size_t i = 0; i < f->n; i++) f->t[i].data = f->data + f->t[i].offset;
    return CIS2_OK;
}

const cis2_st_tensor *cis2_st_find(const cis2_st_file *f, const char *name)
{
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, f->t[mid].name);
        if (c == 0) return &f->t[mid];
        if (c < 0) hi = mid; else lo = mid + 1;
    }
    return NULL;
}

const cis2_st_tensor *cis2_st_expect(const cis2_st_file *f, const char *name, int ndim, uint64_t d0, uint64_t d1,
                                     cis2_error *err)
{
    const char *path = f->path ? f->path : "safetensors";
    const cis2_st_tensor *t = cis2_st_find(f, name);
    if (!t) {
        cis2_fail(err, CIS2_E_FORMAT, "%s: missing tensor '%s'", path, name);
        return NULL;
    }
    int ok = t->ndim == ndim && (ndim < 1 || t->shape[0] == d0) && (ndim < 2 || t->shape[1] == d1);
    if (!ok) {
        char got[96] = "[", want[64];
        for (int i = 0; i < t->ndim; i++) {
            size_t l = strlen(got);
            snprintf(got + l, sizeof got - l, "%s%llu", i ? ", " : "", (unsigned long long)t->shape[i]);
        }
        strcat(got, "]");
        if (ndim == 2) snprintf(want, sizeof want, "[%llu, %llu]", (unsigned long long)d0, (unsigned long long)d1);
        else if (ndim == 1) snprintf(want, sizeof want, "[%llu]", (unsigned long long)d0);
        else snprintf(want, sizeof want, "rank %d", ndim);
        cis2_fail(err, CIS2_E_FORMAT, "%s: tensor '%s' has shape %s, expected %s", path, name, got, want);
        return NULL;
    }
    return t;
}

/* IEEE binary16 -> binary32, exactly, by integer operations (never a
 * conversion instruction, whose subnormal handling the §1.3 pin could
 * change): every binary16 is a binary32.  Normal: rebias the exponent
 * (15 -> 127) and shift the 10 mantissa bits to the top of the 23;
 * subnormal (m x 2^-24): normalised, a normal binary32; +-0 stays +-0;
 * Inf stays Inf and a NaN keeps its sign and payload (quiet bit
 * included), as numpy's half -> float conversion does. */
uint32_t cis2_f16_to_f32_bits(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1F) return sign | 0x7F800000u | m << 13;
    if (e) return sign | (e + 112) << 23 | m << 13; /* 112 = 127 - 15 */
    if (!m) return sign;
    int32_t ex = 113; /* the exponent of 2^-14, the binary16 subnormals' scale, plus one shift */
    while (!(m & 0x400u)) { m <<= 1; ex--; }
    return sign | (uint32_t)ex << 23 | (m & 0x3FFu) << 13;
}

void cis2_st_widen_f32(cis2_st_dtype dtype, const uint8_t *p, uint64_t n, float *out)
{
    if (dtype == CIS2_ST_F16) {
        for (uint64_t i = 0; i < n; i++, p += 2) {
            uint32_t bits = cis2_f16_to_f32_bits((uint16_t)(p[0] | p[1] << 8));
            memcpy(&out[i], &bits, 4);
        }
    } else if (dtype == CIS2_ST_U8) { /* never a weight (the loader refuses it there); each byte's value */
        for (uint64_t i = 0; i < n; i++) out[i] = (float)p[i];
    } else if (dtype == CIS2_ST_BF16) {
        for (uint64_t i = 0; i < n; i++, p += 2) {
            uint32_t bits = ((uint32_t)p[0] | (uint32_t)p[1] << 8) << 16; /* §4.1: (b as u32) << 16 */
            memcpy(&out[i], &bits, 4);
        }
    } else {
        for (uint64_t i = 0; i < n; i++, p += 4) {
            uint32_t bits = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
            memcpy(&out[i], &bits, 4);
        }
    }
}

void cis2_st_read_f32(const cis2_st_tensor *t, uint64_t first, uint64_t count, float *out)
{
    uint64_t numel = cis2_st_numel(t), avail = first < numel ? numel - first : 0;
    uint64_t n = count < avail ? count : avail;
    if (n) cis2_st_widen_f32(t->dtype, t->data + first * cis2_st_dtype_size(t->dtype), n, out);
    for (uint64_t i = n; i < count; i++) out[i] = 0.0f;
}

void cis2_st_close(cis2_st_file *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->n; i++) free(f->t[i].name);
    free(f->t);
    free(f->order);
    free(f->path);
    free(f->data_alloc);
    if (f->streaming) {
        uint8_t d[32];
        cis2_sha_final(&f->sha, d);
    }
    cis2_in_close(&f->in);
    memset(f, 0, sizeof *f);
    f->in.fd = -1;
}
