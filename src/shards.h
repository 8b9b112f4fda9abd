/*
 * shards.h - the weights of a checkpoint directory as one stream: either
 * DIR/model.safetensors alone (§2.1) or a sharded checkpoint,
 * DIR/model.safetensors.index.json plus the shards its "weight_map" names
 * (docs/inputs.md "Sharded checkpoints").  Caller:
 * model.c.
 *
 * cis2_wset_open reads the headers only: the one file's, or the index and
 * then every shard's header, each shard validated against the index as it
 * is opened (every tensor of a shard is in the weight_map and mapped to
 * that shard, every weight_map entry is in its shard under the header's
 * own name, so no tensor is in two shards and none is missing), all
 * before any weight is read.  ws.st is then the tensor table the loader
 * plans from (for shards: every shard's tensors merged, sorted by name,
 * with .order the order of the stream: the shards in the byte order of
 * their names, each in its offset order).  cis2_wset_read takes the data
 * in that order, each shard read exactly once, sequentially, and hashed
 * as read (safetensors.h); cis2_wset_finish checks every file ended and
 * is unchanged and gives weights_sha256:
 *   one file:  the sha256 of model.safetensors (§2.1, unchanged);
 *   shards:    the sha256 of the text made of one line per file,
 *              "<sha256 hex>  <file name>\n" (sha256sum's format), the
 *              index first, then each shard in the byte order of its
 *              name; every byte read is pinned by it.
 * Both files present is ambiguous and refused (CIS2_E_FORMAT).
 */
#ifndef CIS2_SHARDS_H
#define CIS2_SHARDS_H

#include <stddef.h>
#include <stdint.h>

#include "cis2_toolkit.h" /* and cis2.h */
#include "safetensors.h"

#define CIS2_SHARD_INDEX "model.safetensors.index.json"
/* Largest index.json (Llama-3.1-405B's is about 120 KB). */
#define CIS2_SHARD_MAX_INDEX ((size_t)16 << 20)
/* jansson heap budget for it (jsonlim.h). */
#define CIS2_SHARD_MAX_INDEX_COST ((uint64_t)64 << 20)
/* Most shards one checkpoint may have (each is held open while the
 * weights stream; Llama-3.1-405B has 191). */
#define CIS2_SHARD_MAX_FILES 256

typedef struct cis2_wset {
    cis2_st_file st;        /* the tensor table (see above) */
    int sharded;
    char *label;            /* for messages: DIR/model.safetensors or DIR/model.safetensors.index.json */
    /* sharded only */
    cis2_st_file *sh;       /* the shards, in the byte order of their names */
    char **names;           /* their file names */
    size_t nsh, cur;        /* cur: the shard being read */
    uint8_t index_sha[32];
    uint8_t (*sha)[32];     /* each shard's sha256, as it is finished */
} cis2_wset;

/* Opens DIR's weights, headers only (above).  Errors: CIS2_E_IO (a file
 * missing or unreadable), CIS2_E_FORMAT (malformed index, a shard set that
 * does not match it, both layouts present), CIS2_E_NOMEM; one line naming
 * the file and the key.  *w is left closed on failure. */
int cis2_wset_open(cis2_wset *w, const char *dir, cis2_error *err);
/* The next n bytes of the stream (never across a shard's end). */
int cis2_wset_read(cis2_wset *w, void *buf, size_t n, cis2_error *err);
/* After the whole stream: weights_sha256 (above). */
int cis2_wset_finish(cis2_wset *w, uint8_t sha[32], cis2_error *err);
void cis2_wset_close(cis2_wset *w);

#endif
