/*
 * digest.h - streaming SHA-256 (OpenSSL EVP) used by the witness chain.
 */
#ifndef CIS2_DIGEST_H
#define CIS2_DIGEST_H

#include <stddef.h>
#include <stdint.h>

typedef struct cis2_sha {
    void *md; /* EVP_MD_CTX* */
} cis2_sha;

int cis2_sha_init(cis2_sha *s);                 /* 0 ok, -1 out of memory */
void cis2_sha_update(cis2_sha *s, const void *data, size_t len);
void cis2_sha_u32le(cis2_sha *s, uint32_t v);  /* 4 little-endian bytes */
void cis2_sha_final(cis2_sha *s, uint8_t out[32]); /* also frees */

#endif
