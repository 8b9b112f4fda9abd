/*
 * safetensors.h - read-only loader for the safetensors checkpoint format
 * (spec §2.5 tensor layout, §4 bf16 -> f32 widening).
 *
 * The whole file is mmap'd; tensors point into the mapping at whatever byte
 * offset the header puts them (the header length is arbitrary, so no
 * alignment is ever assumed).  Only BF16 and F32 tensors are accepted.
 */
#ifndef CIS2_SAFETENSORS_H
#define CIS2_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "cis2.h"

/* Largest header cis2 accepts (the JSON after the 8-byte length). */
#define CIS2_ST_MAX_HEADER 100000000u

typedef enum { CIS2_ST_BF16 = 1, CIS2_ST_F32 = 2 } cis2_st_dtype;

typedef struct cis2_st_tensor {
    char *name;
    cis2_st_dtype dtype;
    int ndim;               /* 1 or 2 in our checkpoints; accepts 0..4 */
    uint64_t shape[4];      /* unused dims are 0 */
    const uint8_t *data;    /* points into the mapping: ANY alignment */
    uint64_t nbytes;        /* == numel * dtype size (validated) */
} cis2_st_tensor;

typedef struct cis2_st_file {
    void *map; size_t map_len;   /* mmap of the whole file */
    cis2_st_tensor *t; size_t n; /* sorted by name (cis2_st_find bisects) */
    char *path;                  /* for error messages */
} cis2_st_file;

/* Maps and validates `path`.  On failure returns CIS2_E_IO / CIS2_E_FORMAT /
 * CIS2_E_UNSUPPORTED / CIS2_E_NOMEM with a one-line message and leaves *f
 * zeroed (cis2_st_close on it is harmless). */
int cis2_st_open(cis2_st_file *f, const char *path, cis2_error *err);
/* NULL if absent. */
const cis2_st_tensor *cis2_st_find(const cis2_st_file *f, const char *name);
void cis2_st_close(cis2_st_file *f);

/* Number of elements (product of the shape; 1 for ndim 0). */
uint64_t cis2_st_numel(const cis2_st_tensor *t);
/* Size in bytes of one element of a dtype (2 or 4). */
unsigned cis2_st_dtype_size(cis2_st_dtype d);

/* Finds `name` and checks it has exactly this rank and shape (d1 ignored
 * when ndim == 1).  Returns NULL with CIS2_E_FORMAT ("missing tensor" or
 * "shape [a, b], expected [c, d]") naming the file. */
const cis2_st_tensor *cis2_st_expect(const cis2_st_file *f, const char *name, int ndim,
                                     uint64_t d0, uint64_t d1, cis2_error *err);

/* Exact f32 values of elements [first, first+count): BF16 widened by
 * (b << 16) (§4.1), F32 copied bit for bit; both read little-endian bytes
 * one element at a time, so any alignment is fine.  Precondition:
 * first + count <= cis2_st_numel(t); elements past the end read as +0. */
void cis2_st_read_f32(const cis2_st_tensor *t, uint64_t first, uint64_t count, float *out);

#endif
