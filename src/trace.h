/*
 * trace.h - divergence-localisation traces ("CIS-2-TRACE v1"): one line per
 * intermediate tensor of every decode step, with the SHA-256 of its f32
 * bits (little-endian), and optionally a side file of the raw values.
 *
 * Trace file (text, LF):
 *   line 1: `CIS-2-TRACE v1` or `CIS-2-TRACE v1 dump` (values in PATH.f32)
 *   then one line per tensor, in the order the forward pass produced them:
 *     STEP POS LAYER TENSOR N SHA256
 *   STEP  decode step (0 = the prefill that yields the first token)
 *   POS   sequence position of the row (§3.4)
 *   LAYER 0..layers-1, or -1 for final_norm and logits (after the last layer)
 *   TENSOR a model.h trace name (ln1 q k v q_rope k_rope scores attn_out
 *         o_proj resid_attn ln2 gate up act down resid_mlp final_norm logits)
 *   N     element count; SHA256 = sha256 of the N f32 values' bits, u32 LE,
 *         64 lowercase hex.
 * The dump file PATH.f32 holds the same tensors' raw f32 bits (LE), N*4
 * bytes per line, concatenated in line order.
 */
#ifndef CIS2_TRACE_H
#define CIS2_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cis2_toolkit.h" /* and cis2.h */

#define CIS2_TRACE_MAGIC "CIS-2-TRACE v1"
#define CIS2_TRACE_MAX_LINES (64u << 20) /* larger traces are refused */
/* A trace file larger than this is refused before it is read (a run of
 * the 135M shape writes about 40 KB per decoded token); one record's
 * values larger than this many floats are refused before allocating
 * (the largest real tensor, the logits, is vocab <= 2^22 floats). */
#define CIS2_TRACE_MAX_FILE (256ull << 20)
#define CIS2_TRACE_MAX_VALUES (1u << 26)

/* ---- writer ---- */
typedef struct cis2_trace_writer cis2_trace_writer;
/* Starts path (and path.f32 when dump) as temporary files beside them
 * (fileio.h cis2_out): nothing replaces an existing file until close
 * commits both.  CIS2_E_IO / _NOMEM. */
int cis2_trace_open(cis2_trace_writer **w, const char *path, int dump, cis2_error *err);
/* The decode observer (cis2_decode_opts.trace, ctx = the writer). */
void cis2_trace_record(void *ctx, size_t step, size_t pos, int layer, const char *tensor, const float *v, size_t n);
/* Commits both files (flushed, fsync'ed, renamed into place, the dump
 * first) and frees w; CIS2_E_IO if any write failed, and then neither file
 * is replaced.  When err already holds an error (the run failed), the
 * trace is discarded instead: nothing is replaced, and CIS2_OK is
 * returned.  NULL is fine. */
int cis2_trace_close(cis2_trace_writer *w, cis2_error *err);

/* ---- reader ---- */
typedef struct cis2_trace_rec {
    uint32_t step, pos;
    int32_t layer;
    char tensor[24];
    uint64_t n;
    uint8_t sha[32];
    uint64_t offset;   /* byte offset of the values in the dump file */
    size_t line;       /* 1-based line in the trace file */
} cis2_trace_rec;

typedef struct cis2_trace {
    cis2_trace_rec *rec;
    size_t n;
    int dump;          /* values available in dump_path */
    char *path, *dump_path;
} cis2_trace;

/* Strict parse of a trace file (CIS2_E_FORMAT with "PATH: line N: why"),
 * read once as a regular file of at most CIS2_TRACE_MAX_FILE bytes. */
int cis2_trace_load(cis2_trace *t, const char *path, cis2_error *err);
/* Reads record i's values from the dump (malloc'ed into *v) and checks
 * they hash to the record's sha; CIS2_E_FORMAT if not.  Before allocating:
 * more than CIS2_TRACE_MAX_VALUES values is CIS2_E_NOMEM, a dump file
 * shorter than the record's end is CIS2_E_IO. */
int cis2_trace_values(const cis2_trace *t, size_t i, float **v, cis2_error *err);
void cis2_trace_free(cis2_trace *t);

#endif
