/*
 * digest.c - SHA-256 through OpenSSL's EVP API (SHA-NI where present), hex
 * helpers, and whole-file hashing for the artifact hashes of §2.1/§12.1
 * (through fileio.h: regular files only, read once, unchanged while read).
 *
 * The witness chain (§12.1) is one continuous stream: callers keep a
 * cis2_sha open, update it in order and finalize once.
 */
#include "digest.h"
#include "cis2_toolkit.h" /* and cis2.h */
#include "fileio.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cis2_sha_init(cis2_sha *s)
{
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    if (!c) return -1;
    if (EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1) { EVP_MD_CTX_free(c); return -1; }
    s->md = c;
    return 0;
}

void cis2_sha_update(cis2_sha *s, const void *data, size_t len)
{
    if (len) EVP_DigestUpdate((EVP_MD_CTX *)s->md, data, len);
}

void cis2_sha_u32le(cis2_sha *s, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    cis2_sha_update(s, b, 4);
}

void cis2_sha_final(cis2_sha *s, uint8_t out[32])
{
    unsigned int n = 32;
    EVP_DigestFinal_ex((EVP_MD_CTX *)s->md, out, &n);
    EVP_MD_CTX_free((EVP_MD_CTX *)s->md);
    s->md = NULL;
}

void cis2_sha256(const void *data, size_t len, uint8_t out[32])
{
    unsigned int n = 32;
    if (EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) != 1) {
        fprintf(stderr, "cis2: OpenSSL SHA-256 failed\n");
        abort();
    }
}

int cis2_sha256_file(const char *path, uint8_t out[32], cis2_error *err)
{
    /* fileio.h: a regular file (a FIFO or /dev/zero is refused, not read
     * forever), read once, unchanged while read */
    cis2_in in;
    int rc = cis2_in_open(&in, path, 0, NULL, err);
    if (rc) return rc;
    cis2_sha s;
    if (cis2_sha_init(&s)) { cis2_in_close(&in); return cis2_fail(err, CIS2_E_NOMEM, "sha256: out of memory"); }
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK);
    if (!buf) rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    while (!rc && in.pos < in.size) {
        size_t n = in.size - in.pos < CHUNK ? (size_t)(in.size - in.pos) : CHUNK;
        if (!(rc = cis2_in_read(&in, buf, n, err))) cis2_sha_update(&s, buf, n);
    }
    if (!rc) rc = cis2_in_finish(&in, err);
    cis2_in_close(&in);
    free(buf);
    cis2_sha_final(&s, out);
    return rc;
}

void cis2_hex(const uint8_t *bytes, size_t n, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[bytes[i] >> 4];
        out[2 * i + 1] = d[bytes[i] & 15];
    }
    out[2 * n] = 0;
}

int cis2_unhex32(const char *hex, uint8_t out[32])
{
    for (int i = 0; i < 64; i++) {
        char c = hex[i];
        int v = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
        if (v < 0) return -1;
        if (i & 1) out[i / 2] = (uint8_t)(out[i / 2] | v);
        else out[i / 2] = (uint8_t)(v << 4);
    }
    return hex[64] == 0 ? 0 : -1;
}
