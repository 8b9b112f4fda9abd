/*
 * cli_bench.c - `cis2 bench`: how fast this machine runs the pinned
 * arithmetic, against the memory-bandwidth bound.
 *
 * On a synthetic checkpoint by default (--shape, default smollm2-135m) or a
 * real one (--model-dir).  Prints the streaming read bandwidth (same
 * threads), weight bytes read per decoded token, decode ms/token and its
 * bound (bytes / bandwidth), prefill tokens/s, batched decode tokens/s at
 * batch 1/4/8/16, the wall time of a §13.1-shaped run (hash + load + both
 * decodes of 4+16 tokens), the scalar kernel's decode speed and the
 * speedup, peak RSS; --gen-toks N adds decode tokens/s at positions 16,
 * 512, 2048 (those below N).  A benchmark prints numbers; it asserts
 * nothing.
 */
#include "cli.h"
#include "decode.h"
#include "kernels.h"
#include "model.h"
#include "synth.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- streaming read bandwidth ---- */
typedef struct bw_ctx { const uint64_t *buf; size_t words, chunks; uint64_t sums[64]; } bw_ctx;

static void bw_task(void *ctx, size_t i)
{
    bw_ctx *b = ctx;
    size_t per = b->words / b->chunks, lo = i * per, hi = i + 1 == b->chunks ? b->words : lo + per;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t k = lo; k + 4 <= hi; k += 4) { s0 += b->buf[k]; s1 += b->buf[k + 1]; s2 += b->buf[k + 2]; s3 += b->buf[k + 3]; }
    b->sums[i % 64] += s0 + s1 + s2 + s3;
}

static double read_bandwidth(void)
{
    size_t bytes = (size_t)256 << 20;
    uint64_t *buf = malloc(bytes);
    if (!buf) return 0;
    memset(buf, 1, bytes);
    bw_ctx b = {buf, bytes / 8, 64, {0}};
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        cis2_parallel_for(b.chunks, bw_task, &b);
        double dt = now() - t0;
        if (dt > 0 && (double)bytes / dt > best) best = (double)bytes / dt;
    }
    free(buf);
    return best;
}

/* ---- decode timing through the progress callback ---- */
typedef struct timing { double t0, t_first, t_end, at[3]; size_t marks[3]; } timing;

static void on_step(void *ctx, size_t step, size_t total)
{
    timing *t = ctx;
    double x = now();
    if (step == 1) t->t_first = x;
    for (int i = 0; i < 3; i++)
        if (t->marks[i] && step == t->marks[i]) t->at[i] = x;
    if (step == total) t->t_end = x;
}

static int decode_timed(const cis2_model *m, size_t nseq, size_t nprompt, size_t gen, timing *t, cis2_error *err)
{
    uint32_t *ids = malloc(nseq * nprompt * sizeof(uint32_t));
    cis2_seq *seqs = calloc(nseq, sizeof *seqs);
    if (!ids || !seqs) { free(ids); free(seqs); return cis2_fail(err, CIS2_E_NOMEM, "out of memory"); }
    for (size_t s = 0; s < nseq; s++) {
        for (size_t i = 0; i < nprompt; i++) ids[s * nprompt + i] = (uint32_t)((s * 131 + i * 7919 + 13) % m->vocab);
        seqs[s].prompt = ids + s * nprompt;
        seqs[s].n_prompt = nprompt;
    }
    cis2_decode_opts o = {.gen_toks = gen, .progress = on_step, .progress_ctx = t};
    t->t0 = now();
    int rc = cis2_decode(m, seqs, nseq, &o, err);
    for (size_t s = 0; s < nseq; s++) cis2_seq_free(&seqs[s]);
    free(seqs);
    free(ids);
    return rc;
}

static const char bench_usage[] =
    "usage: cis2 bench [--model-dir DIR | --shape NAME] [--gen-toks N] [--kernel K] [--threads N] [--json]\n";

int cmd_bench(int argc, char **argv)
{
    cli_engine eng = {0};
    const char *shape = "smollm2-135m";
    size_t long_gen = 0;
    int json = 0, rc;
    for (int i = 1; i < argc; i++) {
        if ((rc = cli_engine_opt("bench", argc, argv, &i, &eng)) >= 0) { if (rc) return rc; continue; }
        if (!strcmp(argv[i], "--json")) { json = 1; continue; }
        if (!strcmp(argv[i], "--help")) { fputs(bench_usage, stdout); return 0; }
        if (i + 1 >= argc) return cli_usage_error("bench", "unknown option or missing value: %s", argv[i]);
        if (!strcmp(argv[i], "--shape")) shape = argv[++i];
        else if (!strcmp(argv[i], "--gen-toks")) { if ((rc = cli_parse_size("bench", "--gen-toks", argv[++i], 1u << 20, &long_gen))) return rc; }
        else return cli_usage_error("bench", "unknown option %s", argv[i]);
    }
    cis2_error err = {0};
    char tmpdir[] = "/tmp/cis2-bench-XXXXXX";
    int made_tmp = 0;
    if (!eng.model_dir) {
        if (!cis2_synth_find_shape(shape)) return cli_usage_error("bench", "unknown shape '%s'", shape);
        if (!mkdtemp(tmpdir)) { cis2_fail(&err, CIS2_E_IO, "cannot create a temporary directory"); return cli_report(&err); }
        made_tmp = 1;
        if (!json) fprintf(stderr, "bench: synthesizing a %s checkpoint in %s\n", shape, tmpdir);
        if ((rc = cis2_synth_write(shape, 1, tmpdir, NULL, &err))) goto cleanup;
        eng.model_dir = tmpdir;
    }
    /* §13.1-shaped run: hash + load + two decodes of 4+16 tokens */
    double t_load0 = now();
    cis2_model m;
    if ((rc = cli_engine_start(&eng, &m, &err))) goto cleanup;
    double t_load = now() - t_load0;
    double t_run0 = now();
    {
        uint32_t p[4];
        for (int i = 0; i < 4; i++) p[i] = (uint32_t)((i * 7919 + 13) % m.vocab);
        cis2_seq s = {.prompt = p, .n_prompt = 4};
        cis2_decode_opts o = {.gen_toks = 16};
        if ((rc = cis2_run(&m, &s, 1, &o, &err))) goto done;
        cis2_seq_free(&s);
    }
    double t_full = t_load + (now() - t_run0);

    double bw = read_bandwidth();
    timing t1 = {0};
    size_t gen = 33;
    if ((rc = decode_timed(&m, 1, 4, gen, &t1, &err))) goto done;
    double ms_tok = (t1.t_end - t1.t_first) * 1e3 / (double)(gen - 1);
    double bound_ms = bw > 0 ? (double)m.weight_bytes / bw * 1e3 : 0;
    timing tp = {0};
    size_t npre = 64;
    if ((rc = decode_timed(&m, 1, npre, 1, &tp, &err))) goto done;
    double prefill_tps = (double)npre / (tp.t_first - tp.t0);
    size_t batches[4] = {1, 4, 8, 16};
    double batch_tps[4];
    for (int b = 0; b < 4; b++) { /* the better of two runs: batch 1 is the noisiest figure */
        batch_tps[b] = 0;
        for (int rep = 0; rep < 2; rep++) {
            timing tb = {0};
            size_t g = 9;
            if ((rc = decode_timed(&m, batches[b], 4, g, &tb, &err))) goto done;
            double tps = (double)(batches[b] * (g - 1)) / (tb.t_end - tb.t_first);
            if (tps > batch_tps[b]) batch_tps[b] = tps;
        }
    }
    double long_tps[3] = {0, 0, 0};
    size_t long_pos[3] = {16, 512, 2048};
    if (long_gen) {
        size_t marks[3];
        for (int i = 0; i < 3; i++) marks[i] = long_pos[i] <= long_gen ? long_pos[i] : 0;
        /* a second pass with 8-step windows after each mark */
        for (int i = 0; i < 3; i++) {
            if (!marks[i]) continue; /* tokens/s over the 8 steps ending at step marks[i] */
            timing w = {0};
            w.marks[0] = marks[i] - 8;
            w.marks[1] = marks[i];
            if ((rc = decode_timed(&m, 1, 4, marks[i], &w, &err))) goto done;
            long_tps[i] = 8.0 / (w.at[1] - w.at[0]);
        }
    }
    const char *fast_kernel = cis2_kernel_name();
    int threads = cis2_threads_get();
    double scalar_ms = 0;
    {
        cis2_error e2 = {0};
        if (cis2_kernel_select("scalar", &e2) == CIS2_OK) {
            timing ts = {0};
            if ((rc = decode_timed(&m, 1, 4, 3, &ts, &err))) goto done;
            scalar_ms = (ts.t_end - ts.t_first) * 1e3 / 2.0;
            cis2_kernel_select(eng.kernel ? eng.kernel : "auto", &e2);
        }
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss_mb = (double)ru.ru_maxrss / 1024.0;
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "model", json_string(made_tmp ? shape : eng.model_dir));
        json_object_set_new(o, "kernel", json_string(fast_kernel));
        json_object_set_new(o, "threads", json_integer(threads));
        json_object_set_new(o, "read_bandwidth_gb_s", json_real(bw / 1e9));
        json_object_set_new(o, "weight_bytes_per_token", json_integer((json_int_t)m.weight_bytes));
        json_object_set_new(o, "decode_ms_per_token", json_real(ms_tok));
        json_object_set_new(o, "decode_tokens_per_s", json_real(1e3 / ms_tok));
        json_object_set_new(o, "bound_ms_per_token", json_real(bound_ms));
        json_object_set_new(o, "ratio_to_bound", json_real(ms_tok / bound_ms));
        json_object_set_new(o, "prefill_tokens_per_s", json_real(prefill_tps));
        json_t *bt = json_object();
        for (int b = 0; b < 4; b++) { char k[8]; snprintf(k, sizeof k, "%zu", batches[b]); json_object_set_new(bt, k, json_real(batch_tps[b])); }
        json_object_set_new(o, "batched_tokens_per_s", bt);
        json_object_set_new(o, "full_run_s", json_real(t_full));
        json_object_set_new(o, "scalar_ms_per_token", json_real(scalar_ms));
        json_object_set_new(o, "speedup_vs_scalar", json_real(scalar_ms / ms_tok));
        json_object_set_new(o, "peak_rss_mb", json_real(rss_mb));
        if (long_gen) {
            json_t *lt = json_object();
            for (int i = 0; i < 3; i++)
                if (long_tps[i] > 0) { char k[8]; snprintf(k, sizeof k, "%zu", long_pos[i]); json_object_set_new(lt, k, json_real(long_tps[i])); }
            json_object_set_new(o, "decode_tokens_per_s_at_position", lt);
        }
        char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
        printf("%s\n", s);
        free(s);
        json_decref(o);
    } else {
        printf("model                     %s\n", made_tmp ? shape : eng.model_dir);
        printf("kernel / threads          %s / %d\n", fast_kernel, threads);
        printf("read bandwidth            %.2f GB/s\n", bw / 1e9);
        printf("weight bytes per token    %.1f MB\n", (double)m.weight_bytes / 1e6);
        printf("decode                    %.2f ms/token (%.1f tokens/s)\n", ms_tok, 1e3 / ms_tok);
        printf("bandwidth bound           %.2f ms/token (achieved/bound = %.2fx)\n", bound_ms, ms_tok / bound_ms);
        printf("prefill (%zu tokens)       %.1f tokens/s\n", npre, prefill_tps);
        for (int b = 0; b < 4; b++)
            printf("batched decode, batch %-3zu %.1f tokens/s (%.2fx batch 1)\n", batches[b], batch_tps[b], batch_tps[b] / batch_tps[0]);
        for (int i = 0; i < 3; i++)
            if (long_tps[i] > 0) printf("decode at position %-6zu %.1f tokens/s\n", long_pos[i], long_tps[i]);
        printf("full §13.1-shaped run     %.3f s (hash + load + 2 x (4+16 tokens))\n", t_full);
        printf("scalar kernel             %.1f ms/token (speedup %.1fx)\n", scalar_ms, scalar_ms / ms_tok);
        printf("peak RSS                  %.0f MB\n", rss_mb);
    }
done:
    cis2_model_free(&m);
cleanup:
    if (made_tmp) {
        char p[256];
        const char *files[3] = {"model.safetensors", "config.json", "tokenizer.json"};
        for (int i = 0; i < 3; i++) { snprintf(p, sizeof p, "%s/%s", tmpdir, files[i]); unlink(p); }
        rmdir(tmpdir);
    }
    return rc ? cli_report(&err) : CIS2_OK;
}
