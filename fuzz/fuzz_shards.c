/*
 * fuzz_shards.c - libFuzzer target for a sharded checkpoint's index
 * (src/shards.c: model.safetensors.index.json's JSON, its weight_map and
 * metadata, the shard file names, the shard set checked against the map;
 * docs/inputs.md "Sharded checkpoints").
 *
 * The input is the index file.  Beside it, in a directory made once, lie
 * two fixed shards: model-00001-of-00002.safetensors (tensors "a" BF16
 * [2,3] and "b" F32 [2]) and model-00002-of-00002.safetensors ("c" BF16
 * [4]), plus a third file, other.safetensors ("d" F32 [1]), that only an
 * index naming it reads (all removed at exit).  Every failure must be a
 * known status with a one-line message.  On success the stream is read to
 * its end as the loader reads it (tensor by tensor in `order`) and
 * finished: every tensor named once, each with its own bytes, the stream
 * tiled exactly.
 */
#include "fuzz_util.h"

#include <sys/stat.h>

#include "shards.h"

static char dir[] = "/tmp/cis2-fuzz-shards-XXXXXX";
static char index_path[sizeof dir + 40];

static uint8_t pat(const char *name, size_t i) { return (uint8_t)(i * 37 + (unsigned char)name[0]); }

/* A safetensors file of the given tensors (name, dtype, shape text, bytes). */
static void put_shard(const char *file, const char *const *t, size_t n)
{
    char hdr[512] = "{", path[sizeof dir + 64];
    size_t pos = 0, len = 1;
    for (size_t k = 0; k < n; k++) {
        size_t nb = (size_t)atoi(t[4 * k + 3]);
        len += (size_t)snprintf(hdr + len, sizeof hdr - len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%zu,%zu]}",
                                k ? "," : "", t[4 * k], t[4 * k + 1], t[4 * k + 2], pos, pos + nb);
        pos += nb;
    }
    len += (size_t)snprintf(hdr + len, sizeof hdr - len, "}");
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); abort(); }
    uint64_t hl = len;
    uint8_t le[8];
    for (int b = 0; b < 8; b++) le[b] = (uint8_t)(hl >> (8 * b));
    fwrite(le, 1, 8, f);
    fwrite(hdr, 1, len, f);
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0, nb = (size_t)atoi(t[4 * k + 3]); i < nb; i++) fputc(pat(t[4 * k], i), f);
    if (fclose(f)) abort();
}

static void cleanup(void) /* at exit: the files setup made, and the directory */
{
    static const char *const files[] = {CIS2_SHARD_INDEX, "model-00001-of-00002.safetensors",
                                        "model-00002-of-00002.safetensors", "other.safetensors"};
    char path[sizeof dir + 64];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

static void setup(void)
{
    if (!mkdtemp(dir)) { perror("mkdtemp"); abort(); }
    atexit(cleanup);
    static const char *const s1[] = {"a", "BF16", "[2,3]", "12", "b", "F32", "[2]", "8"};
    static const char *const s2[] = {"c", "BF16", "[4]", "8"};
    static const char *const s3[] = {"d", "F32", "[1]", "4"};
    put_shard("model-00001-of-00002.safetensors", s1, 2);
    put_shard("model-00002-of-00002.safetensors", s2, 1);
    put_shard("other.safetensors", s3, 1);
    snprintf(index_path, sizeof index_path, "%s/%s", dir, CIS2_SHARD_INDEX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!index_path[0]) setup();
    FILE *f = fopen(index_path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f)) abort();
    cis2_wset w;
    cis2_error e = {0};
    int rc = cis2_wset_open(&w, dir, &e);
    fuzz_check_error(rc, &e);
    if (rc != CIS2_OK) return 0;
    if (!w.sharded || w.st.n == 0 || w.st.n > 4) abort();
    uint8_t buf[16], sha[32];
    int seen[4] = {0};
    for (size_t i = 0; i < w.st.n; i++) {
        const cis2_st_tensor *t = &w.st.t[w.st.order[i]];
        if (t->nbytes > sizeof buf || strlen(t->name) != 1 || t->name[0] < 'a' || t->name[0] > 'd') abort();
        if (seen[t->name[0] - 'a']++) abort(); /* a tensor twice */
        if ((rc = cis2_wset_read(&w, buf, t->nbytes, &e))) {
            fprintf(stderr, "read of a validated set failed: %s\n", e.msg);
            abort();
        }
        for (size_t k = 0; k < t->nbytes; k++)
            if (buf[k] != pat(t->name, k)) abort(); /* another tensor's bytes */
    }
    if ((rc = cis2_wset_finish(&w, sha, &e))) {
        fprintf(stderr, "finish of a validated set failed: %s\n", e.msg);
        abort();
    }
    cis2_wset_close(&w);
    return 0;
}
