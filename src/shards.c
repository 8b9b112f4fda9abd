/*
 * shards.c - a checkpoint's weights as one stream, one file or a sharded
 * set (contract and the weights_sha256 rule in shards.h; §2.1 hashes,
 * §2.5 tensors; docs/inputs.md "Sharded checkpoints").  Callers: model.c.
 *
 * The index is read once (fileio.h), its JSON cost bounded before jansson
 * parses it (jsonlim.h), duplicate keys refused.  Shard names are plain
 * file names ([A-Za-z0-9._-], not starting with '.', ending in
 * ".safetensors"): no path separator, no "..", so every shard is a file
 * of the directory (a symbolic link is followed, as a Hugging Face cache's
 * snapshot has them).  Each shard is opened once (safetensors.h, header
 * only) and checked against the index before the next is opened, so the
 * tensor tables held never exceed the index's entries.
 */
#include "shards.h"
#include "digest.h"
#include "fileio.h"
#include "jsonlim.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A name for a one-line message: at most 80 bytes, bytes outside
 * printable ASCII as '?'. */
static const char *shown(const char *s, char out[84])
{
    size_t i = 0;
    for (; s[i] && i < 80; i++) out[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    if (s[i]) { out[i++] = '.'; out[i++] = '.'; out[i++] = '.'; }
    out[i] = 0;
    return out;
}

static char *join(const char *dir, const char *file)
{
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

/* Whether path exists (a dangling symbolic link does not). */
static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 || errno != ENOENT;
}

static int plain_shard_name(const char *s)
{
    size_t n = strlen(s), suf = sizeof ".safetensors" - 1;
    if (n <= suf || n > 255 || s[0] == '.' || strcmp(s + n - suf, ".safetensors")) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return 0;
    }
    return 1;
}

/* One weight_map entry: a tensor and the index of its shard. */
typedef struct entry { const char *tensor, *shard; size_t s; } entry;

static int cmp_entry_tensor(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->tensor, ((const entry *)b)->tensor);
}
static int cmp_entry_shard(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->shard, ((const entry *)b)->shard);
}

static const entry *find_entry(const entry *e, size_t n, const char *tensor)
{
    entry key = {tensor, NULL, 0};
    return bsearch(&key, e, n, sizeof *e, cmp_entry_tensor);
}

/* The index's top level: {"metadata": {...}, "weight_map": {tensor: shard}}. */
static int parse_index(cis2_wset *w, json_t *root, entry **out, size_t *nout, cis2_error *err)
{
    const char *P = w->label, *key;
    char a[84], b[84];
    json_t *val;
    if (!json_is_object(root)) return cis2_fail(err, CIS2_E_FORMAT, "%s: not a JSON object", P);
    json_object_foreach(root, key, val) {
        if (strcmp(key, "metadata") && strcmp(key, "weight_map"))
            return cis2_fail(err, CIS2_E_FORMAT, "%s: unknown key '%s' (an index has metadata and weight_map)", P,
                             shown(key, a));
    }
    json_t *md = json_object_get(root, "metadata"), *wm = json_object_get(root, "weight_map");
    if (md && !json_is_object(md)) return cis2_fail(err, CIS2_E_FORMAT, "%s: metadata is not an object", P);
    json_t *ts = md ? json_object_get(md, "total_size") : NULL;
    if (ts && (!json_is_integer(ts) || json_integer_value(ts) < 0))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: metadata.total_size is not a non-negative integer", P);
    if (!wm) return cis2_fail(err, CIS2_E_FORMAT, "%s: missing weight_map", P);
    if (!json_is_object(wm)) return cis2_fail(err, CIS2_E_FORMAT, "%s: weight_map is not an object", P);
    size_t n = json_object_size(wm);
    if (!n) return cis2_fail(err, CIS2_E_FORMAT, "%s: weight_map is empty", P);
    entry *e = malloc(n * sizeof *e);
    if (!e) return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory for %zu weight_map entries", P, n);
    size_t k = 0;
    json_object_foreach(wm, key, val) {
        const char *s = json_is_string(val) ? json_string_value(val) : NULL;
        int rc = CIS2_OK;
        if (!*key) rc = cis2_fail(err, CIS2_E_FORMAT, "%s: weight_map has an empty tensor name", P);
        else if (!s)
            rc = cis2_fail(err, CIS2_E_FORMAT, "%s: weight_map[\"%s\"] is not a string", P, shown(key, a));
        else if (!plain_shard_name(s))
            rc = cis2_fail(err, CIS2_E_FORMAT,
                           "%s: weight_map[\"%s\"]: shard name \"%s\" is not a plain file name ending in "
                           ".safetensors (letters, digits, '.', '_', '-'; no path)",
                           P, shown(key, a), shown(s, b));
        if (rc) { free(e); return rc; }
        e[k++] = (entry){key, s, 0};
    }
    *out = e;
    *nout = n;
    return CIS2_OK;
}

/* The distinct shard names, sorted; each entry's .s set to its shard. */
static int list_shards(cis2_wset *w, entry *e, size_t n, cis2_error *err)
{
    qsort(e, n, sizeof *e, cmp_entry_shard);
    size_t ns = 0;
    for (size_t i = 0; i < n; i++) ns += !i || strcmp(e[i].shard, e[i - 1].shard);
    if (ns > CIS2_SHARD_MAX_FILES)
        return cis2_fail(err, CIS2_E_FORMAT, "%s: weight_map names %zu shards, more than the limit of %d", w->label,
                         ns, CIS2_SHARD_MAX_FILES);
    w->names = calloc(ns, sizeof *w->names);
    w->sh = calloc(ns, sizeof *w->sh);
    w->sha = calloc(ns, sizeof *w->sha);
    if (!w->names || !w->sh || !w->sha) return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", w->label);
    w->nsh = ns; /* cis2_wset_close frees what is set */
    for (size_t i = 0; i < ns; i++) w->sh[i].in.fd = -1;
    for (size_t i = 0, s = 0; i < n; i++) {
        if (i && strcmp(e[i].shard, e[i - 1].shard)) s++;
        if (!w->names[s] && !(w->names[s] = strdup(e[i].shard)))
            return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", w->label);
        e[i].s = s;
    }
    qsort(e, n, sizeof *e, cmp_entry_tensor);
    for (size_t i = 1; i < n; i++) /* jansson refused duplicate keys; kept as a guard */
        if (!strcmp(e[i].tensor, e[i - 1].tensor))
            return cis2_fail(err, CIS2_E_FORMAT, "%s: weight_map has a tensor twice", w->label);
    return CIS2_OK;
}

/* Shard s, just opened, against the index: each of its tensors is mapped
 * to it, and each entry mapped to it is among its tensors. */
static int check_shard(cis2_wset *w, size_t s, const entry *e, size_t n, cis2_error *err)
{
    const cis2_st_file *f = &w->sh[s];
    char a[84], b[84];
    size_t mapped = 0;
    for (size_t i = 0; i < f->n; i++) {
        const entry *x = find_entry(e, n, f->t[i].name);
        if (!x)
            return cis2_fail(err, CIS2_E_FORMAT, "%s: tensor %s is not in %s's weight_map", f->path,
                             shown(f->t[i].name, a), CIS2_SHARD_INDEX);
        if (x->s != s)
            return cis2_fail(err, CIS2_E_FORMAT, "%s: tensor %s is here but %s maps it to %s", f->path,
                             shown(f->t[i].name, a), CIS2_SHARD_INDEX, shown(w->names[x->s], b));
    }
    for (size_t i = 0; i < n; i++)
        if (e[i].s == s) {
            mapped++;
            if (!cis2_st_find(f, e[i].tensor))
                return cis2_fail(err, CIS2_E_FORMAT, "%s: weight_map[\"%s\"] names %s, which has no such tensor",
                                 w->label, shown(e[i].tensor, a), shown(w->names[s], b));
        }
    if (mapped != f->n) /* unreachable: the two loops above make a bijection */
        return cis2_fail(err, CIS2_E_INTERNAL, "%s: shard tensor count differs from the index", f->path);
    return CIS2_OK;
}

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp(((const cis2_st_tensor *)a)->name, ((const cis2_st_tensor *)b)->name);
}

/* ws.st as every shard's tensors: t sorted by name (names borrowed from
 * the shards; unique across them, check_shard), order the stream's order. */
static int merge(cis2_wset *w, size_t n, cis2_error *err)
{
    cis2_st_file *m = &w->st;
    m->t = malloc(n * sizeof *m->t);
    m->order = malloc(n * sizeof *m->order);
    m->path = strdup(w->label);
    if (!m->t || !m->order || !m->path) return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", w->label);
    size_t k = 0;
    for (size_t s = 0; s < w->nsh; s++) {
        for (size_t i = 0; i < w->sh[s].n; i++) m->t[k++] = w->sh[s].t[i];
        m->data_len += w->sh[s].data_len;
    }
    m->n = k; /* == n (check_shard) */
    qsort(m->t, m->n, sizeof *m->t, cmp_tensor_name);
    k = 0;
    for (size_t s = 0; s < w->nsh; s++)
        for (size_t o = 0; o < w->sh[s].n; o++)
            m->order[k++] = (size_t)(cis2_st_find(m, w->sh[s].t[w->sh[s].order[o]].name) - m->t);
    return k == n ? CIS2_OK : cis2_fail(err, CIS2_E_INTERNAL, "%s: merged %zu of %zu tensors", w->label, k, n);
}

static int open_sharded(cis2_wset *w, const char *dir, cis2_error *err)
{
    char *buf = NULL;
    size_t len = 0, n = 0;
    entry *e = NULL;
    json_t *root = NULL;
    int rc = cis2_read_file(w->label, CIS2_SHARD_MAX_INDEX, "a safetensors index", &buf, &len, err);
    if (rc) return rc;
    cis2_sha256(buf, len, w->index_sha); /* the bytes parsed (§2.1's rule) */
    if ((rc = cis2_json_cost_check(buf, len, CIS2_SHARD_MAX_INDEX_COST, w->label, "a safetensors index", err)))
        goto out;
    json_error_t je;
    if (!(root = cis2_json_loadb_wide(buf, len, JSON_REJECT_DUPLICATES, &je))) { /* inputs.md "JSON numbers" */
        char a[84];
        rc = cis2_fail(err, CIS2_E_FORMAT, "%s: not valid JSON (%s at byte %d)", w->label, shown(je.text, a),
                       je.position);
        goto out;
    }
    if ((rc = parse_index(w, root, &e, &n, err)) || (rc = list_shards(w, e, n, err))) goto out;
    for (size_t s = 0; s < w->nsh && !rc; s++) {
        char *path = join(dir, w->names[s]);
        if (!path) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); break; }
        if (!(rc = cis2_st_open_stream(&w->sh[s], path, err))) rc = check_shard(w, s, e, n, err);
        free(path);
    }
    if (!rc) rc = merge(w, n, err);
out:
    free(e); /* its strings point into root */
    json_decref(root);
    free(buf);
    return rc;
}

int cis2_wset_open(cis2_wset *w, const char *dir, cis2_error *err)
{
    memset(w, 0, sizeof *w);
    w->st.in.fd = -1;
    char *one = join(dir, "model.safetensors"), *idx = join(dir, CIS2_SHARD_INDEX);
    int rc = CIS2_OK;
    if (!one || !idx) rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    else if (!exists(idx)) { /* one file: exactly as before shards existed */
        w->label = one;
        one = NULL;
        rc = cis2_st_open_stream(&w->st, w->label, err);
    } else if (exists(one))
        rc = cis2_fail(err, CIS2_E_FORMAT,
                       "%s: both model.safetensors and %s are here: which is the checkpoint is ambiguous (remove one)",
                       dir, CIS2_SHARD_INDEX);
    else {
        w->label = idx;
        idx = NULL;
        w->sharded = 1;
        rc = open_sharded(w, dir, err);
    }
    free(one);
    free(idx);
    if (rc) cis2_wset_close(w);
    return rc;
}

int cis2_wset_read(cis2_wset *w, void *buf, size_t n, cis2_error *err)
{
    if (!w->sharded) return cis2_st_read(&w->st, buf, n, err);
    int rc;
    for (;;) { /* past every shard already read whole */
        if (w->cur >= w->nsh)
            return cis2_fail(err, CIS2_E_INTERNAL, "%s: read past the last shard", w->label);
        cis2_st_file *f = &w->sh[w->cur];
        uint64_t left = f->file_size - f->in.pos;
        if (left) {
            if (n > left) return cis2_fail(err, CIS2_E_INTERNAL, "%s: a read across its end", f->path);
            return cis2_st_read(f, buf, n, err);
        }
        if ((rc = cis2_st_finish(f, w->sha[w->cur], err))) return rc;
        w->cur++;
    }
}

int cis2_wset_finish(cis2_wset *w, uint8_t sha[32], cis2_error *err)
{
    if (!w->sharded) return cis2_st_finish(&w->st, sha, err);
    int rc;
    for (; w->cur < w->nsh; w->cur++) /* checks each ends where its reads did, unchanged */
        if ((rc = cis2_st_finish(&w->sh[w->cur], w->sha[w->cur], err))) return rc;
    cis2_sha h; /* weights_sha256 of a sharded checkpoint (shards.h) */
    if (cis2_sha_init(&h)) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    char hex[65];
    cis2_hex(w->index_sha, 32, hex);
    cis2_sha_update(&h, hex, 64);
    cis2_sha_update(&h, "  " CIS2_SHARD_INDEX "\n", sizeof "  " CIS2_SHARD_INDEX "\n" - 1);
    for (size_t s = 0; s < w->nsh; s++) {
        cis2_hex(w->sha[s], 32, hex);
        cis2_sha_update(&h, hex, 64);
        cis2_sha_update(&h, "  ", 2);
        cis2_sha_update(&h, w->names[s], strlen(w->names[s]));
        cis2_sha_update(&h, "\n", 1);
    }
    cis2_sha_final(&h, sha);
    return CIS2_OK;
}

void cis2_wset_close(cis2_wset *w)
{
    if (!w->sharded) cis2_st_close(&w->st);
    else { /* the merged table borrows the shards' names */
        free(w->st.t);
        free(w->st.order);
        free(w->st.path);
    }
    for (size_t s = 0; s < w->nsh; s++) {
        cis2_st_close(&w->sh[s]);
        free(w->names[s]);
    }
    free(w->sh);
    free(w->names);
    free(w->sha);
    free(w->label);
    memset(w, 0, sizeof *w);
    w->st.in.fd = -1;
}
