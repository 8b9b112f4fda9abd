/*
 * safetensors.h - reader and validator for the safetensors checkpoint
 * format (spec §2.1 the file's sha256, §2.5 tensor layout, §4 bf16 -> f32
 * widening).  Callers: model.c (streaming), tests and the fuzz target
 * (whole file).
 *
 * The file is read exactly once, sequentially, through fileio.h (a regular
 * file, opened so that a FIFO cannot block, checked unchanged at the end);
 * every byte read, header included, goes into one SHA-256, so the hash is
 * of exactly the bytes parsed and packed.  Nothing is mmap'ed: a file
 * truncated during the load is a clean CIS2_E_IO, never SIGBUS.
 *
 * Two ways to read the data area:
 *  - cis2_st_open_stream reads the header only; the caller then takes the
 *    data area in order with cis2_st_read (tensors tile it, validated, so
 *    cis2_st_file.order lists them by offset) and ends with cis2_st_finish,
 *    which checks the file ended where the data area does and was not
 *    changed, and gives the sha256.  model.c packs each tensor from a
 *    bounded staging buffer this way: the packed copy is the only full one.
 *  - cis2_st_open reads the whole file into memory the process owns and
 *    points each tensor's data into it (tests, fuzzing, small files).
 * Tensor offsets are any byte offset (the header length is arbitrary), so
 * no alignment is ever assumed.  BF16, F16 and F32 tensors are accepted
 * (docs/inputs.md "Weight dtypes"), each widened exactly to f32 (cis2_st_widen_f32), and U8
 * (MXFP4 blocks and scales, docs/models.md §M9.6: the loader says where); any other
 * dtype is CIS2_E_UNSUPPORTED naming the tensor.
 */
#ifndef CIS2_SAFETENSORS_H
#define CIS2_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "cis2_toolkit.h" /* and cis2.h */
#include "digest.h"
#include "fileio.h"

/* Largest header cis2 accepts (the JSON after the 8-byte length). */
#define CIS2_ST_MAX_HEADER 100000000u
/* jansson heap budget for the header (jsonlim.h): about 180,000 tensors;
 * a model cis2 can run has at most 3 + 13 x 1024 of them. */
#define CIS2_ST_MAX_HEADER_COST (256ull << 20)

typedef enum { CIS2_ST_BF16 = 1, CIS2_ST_F32 = 2, CIS2_ST_F16 = 3, CIS2_ST_U8 = 4 } cis2_st_dtype;

typedef struct cis2_st_tensor {
    char *name;
    cis2_st_dtype dtype;
    int ndim;               /* 1 or 2 in our checkpoints; accepts 0..4 */
    uint64_t shape[4];      /* unused dims are 0 */
    uint64_t offset;        /* byte offset in the data area */
    const uint8_t *data;    /* cis2_st_open: into the file's bytes, ANY alignment; NULL when streaming */
    uint64_t nbytes;        /* == numel * dtype size (validated) */
} cis2_st_tensor;

typedef struct cis2_st_file {
    cis2_st_tensor *t; size_t n; /* sorted by name (cis2_st_find bisects) */
    size_t *order;               /* indices into t, by offset: the order of the data area */
    char *path;                  /* for error messages */
    uint64_t header_len;         /* N, the JSON's length */
    uint64_t data_len;           /* bytes of the data area */
    uint64_t file_size;          /* 8 + N + data_len */
    uint8_t *data;               /* cis2_st_open: the data area, at the file's alignment mod 8 */
    uint8_t *data_alloc;         /* what was malloc'ed for it */
    /* streaming state (cis2_st_open_stream) */
    cis2_in in;
    cis2_sha sha;
    int streaming;
} cis2_st_file;

/* Reads the whole file and validates it.  On failure returns CIS2_E_IO /
 * CIS2_E_FORMAT / CIS2_E_UNSUPPORTED / CIS2_E_NOMEM with a one-line message
 * and leaves *f empty (cis2_st_close on it is harmless).  sha may be NULL. */
int cis2_st_open(cis2_st_file *f, const char *path, uint8_t sha[32], cis2_error *err);
/* Reads and validates the header only (hashing it); the data area follows
 * with cis2_st_read, in file order, then cis2_st_finish. */
int cis2_st_open_stream(cis2_st_file *f, const char *path, cis2_error *err);
/* The next n bytes of the data area into buf, hashed. */
int cis2_st_read(cis2_st_file *f, void *buf, size_t n, cis2_error *err);
/* After the whole data area: checks the file ends there and did not change
 * while read (CIS2_E_IO otherwise) and gives the sha256 of every byte. */
int cis2_st_finish(cis2_st_file *f, uint8_t sha[32], cis2_error *err);
/* NULL if absent. */
const cis2_st_tensor *cis2_st_find(const cis2_st_file *f, const char *name);
void cis2_st_close(cis2_st_file *f);

/* Number of elements (product of the shape; 1 for ndim 0). */
uint64_t cis2_st_numel(const cis2_st_tensor *t);
/* Size in bytes of one element of a dtype (1, 2 or 4). */
unsigned cis2_st_dtype_size(cis2_st_dtype d);

/* Finds `name` and checks it has exactly this rank and shape (d1 ignored
 * when ndim == 1).  Returns NULL with CIS2_E_FORMAT ("missing tensor" or
 * "shape [a, b], expected [c, d]") naming the file. */
const cis2_st_tensor *cis2_st_expect(const cis2_st_file *f, const char *name, int ndim,
                                     uint64_t d0, uint64_t d1, cis2_error *err);

/* Exact f32 values of elements [first, first+count) of bytes src laid out
 * as t's dtype: BF16 widened by (b << 16) (§4.1), F16 by
 * cis2_f16_to_f32_bits, F32 copied bit for bit; all read little-endian
 * bytes one element at a time, so any alignment is fine.  cis2_st_read_f32 reads t->data (cis2_st_open); precondition:
 * first + count <= cis2_st_numel(t); elements past the end read as +0. */
void cis2_st_read_f32(const cis2_st_tensor *t, uint64_t first, uint64_t count, float *out);
void cis2_st_widen_f32(cis2_st_dtype dtype, const uint8_t *src, uint64_t count, float *out);
/* The binary32 bits of a binary16 value (exact: every binary16 is a
 * binary32; subnormals become normal binary32s, a NaN keeps its payload). */
uint32_t cis2_f16_to_f32_bits(uint16_t h);

#endif
