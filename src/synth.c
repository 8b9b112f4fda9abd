/*
 * synth.c - deterministic synthetic checkpoints for tests and benchmarks
 * (`cis2 synth`).  Tensor names/shapes follow spec §2.5, plus the §9.1
 * q/k/v biases (qwen2 shapes) and §11.1's lm_head.weight (untied shapes).
 *
 * Bit-exactness: each tensor has its own splitmix64 stream seeded from
 * (seed, FNV-1a of the tensor name).  Qwen3 shapes (docs/models.md §M2)
 * add q_norm/k_norm (norm weights) and size q/o by heads*head_dim; OLMo-2
 * shapes (§M4) drop input_layernorm, add post_feedforward_layernorm and
 * q_norm/k_norm of heads*head_dim and kv_heads*head_dim; SmolLM3's (§M3)
 * are llama's; Gemma-3's (§M7) have four norms per layer and q/k norms of
 * head_dim, every norm weight stored as w of (1 + w): uniform 0 +- 0.1;
 * Qwen3.5's (§M10) add Gated DeltaNet layers: their conv weights std 0.5,
 * A_log uniform in [0, 2.75) (A = exp(A_log) in [1, 15.6)), dt_bias
 * uniform in [-6.875, -2.375) (softplus of it from 1e-3 to 0.09: decays
 * neither 1 nor 0), the gated norm's plain weight 1 +- 0.1.
 * One 64-bit draw makes one element:
 *   normal-ish: S = sum of its four 16-bit fields - 131070 (an integer,
 *               Irwin-Hall, std 65536/sqrt(3)), value = (float)S * k;
 *   norm weight: 1 + ((top 24 bits) - 2^23) * (0.1 / 2^23).
 * Only integer ops, int->float conversion and single IEEE f32 multiplies/
 * adds are used, then an integer round-to-nearest-even to bf16, so the
 * output is identical on every ISA and compiler.  Per-tensor scales use
 * cis2_rsqrt_cr (§6.1, correctly rounded), not libm.
 *   embeddings / lm_head: std 1.5/sqrt(hidden)   (0.0625 at 576, 0.19 at 64)
 *   linear weights:       std 1/sqrt(in_features) (routers and experts too)
 *   q/k/v biases:         std 0.05
 *   norm weights:         uniform 1 +- 0.1
 *
 * Output (fileio.h; docs/inputs.md "Outputs"): the three files are written to unique
 * temporary files beside their targets and committed as one set (renamed
 * under a lock on the directory), never through a fixed temporary name.
 * Callers: cis2 synth, cis2 bench, tests.
 */
#include "synth.h"
#include "config.h"
#include "fileio.h"
#include "strbuf.h"
#include "tokenizer.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const cis2_synth_shape shapes[] = {
    /* name, type, hidden, inter, layers, heads, kv, vocab, max_pos, head_dim, eps, theta, tied, bias, odd */
    {"smollm2-135m", "llama", 576, 1536, 30, 9, 3, 49152, 8192, 0, "1e-05", "100000", 1, 0, 1},
    {"smollm2-360m", "llama", 960, 2560, 32, 15, 5, 49152, 8192, 0, "1e-05", "100000", 1, 0, 1},
    {"qwen2.5-0.5b", "qwen2", 896, 4864, 24, 14, 2, 151936, 32768, 0, "1e-06", "1000000.0", 0, 1, 0},
    {"tiny", "llama", 64, 160, 2, 4, 2, 512, 256, 0, "1e-05", "10000", 1, 0, 1},
    {"tiny-qwen", "qwen2", 96, 224, 3, 6, 2, 640, 512, 0, "1e-06", "1000000.0", 0, 1, 0},
    {"odd", "llama", 72, 200, 2, 3, 1, 300, 128, 24, "1e-05", "500000.0", 0, 0, 1},
};

size_t cis2_synth_shape_count(void) { return sizeof shapes / sizeof shapes[0]; }
const cis2_synth_shape *cis2_synth_shape_at(size_t i) { return i < cis2_synth_shape_count() ? &shapes[i] : NULL; }

const cis2_synth_shape *cis2_synth_find_shape(const char *name)
{
    for (size_t i = 0; i < cis2_synth_shape_count(); i++)
        if (!strcmp(shapes[i].name, name)) return &shapes[i];
    return NULL;
}

/* ---- deterministic generator ---- */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t fnv1a64(const char *s)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001B3ull;
    return h;
}

static uint32_t f32_bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

/* f32 -> bf16, round to nearest even, by integer arithmetic (inputs are finite). */
static uint16_t bf16_rne(float f)
{
    uint32_t b = f32_bits(f);
    b += 0x7FFFu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}

/* K_NORM0: Gemma-3's stored w of (1 + w), docs/models.md §M7.2; K_CODES:
 * MXFP4 blocks, two random e2m1 codes a byte; K_SCALES: MXFP4 scale bytes
 * scale - 1, scale or scale + 1 (docs/models.md §M9.6) */
enum kind { K_NORMAL, K_NORM, K_NORM0, K_CODES, K_SCALES, K_UNIFORM };

typedef struct tdesc {
    char name[96];
    int ndim;
    uint64_t d0, d1, d2, d3;
    enum kind kind;
    float std;
    int scale;              /* K_SCALES: the middle scale byte */
    float lo, span;         /* K_UNIFORM: lo + [0, span) */
} tdesc;

static uint64_t numel(const tdesc *t)
{
    uint64_t n = t->d0;
    if (t->ndim > 1) n *= t->d1;
    if (t->ndim > 2) n *= t->d2;
    if (t->ndim > 3) n *= t->d3;
    return n;
}
static int is_u8(const tdesc *t) { return t->kind == K_CODES || t->kind == K_SCALES; }

/* n U8 elements of a K_CODES or K_SCALES tensor (bytes of out) */
static void fill_u8(uint64_t *state, const tdesc *t, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t x = splitmix64(state);
        out[i] = t->kind == K_CODES ? (uint8_t)x : (uint8_t)(t->scale - 1 + (int)((x >> 32) % 3));
    }
}

static void fill(uint64_t *state, const tdesc *t, uint16_t *out, size_t n)
{
    if (t->kind == K_NORM || t->kind == K_NORM0) {
        const float k = 0.1f / 8388608.0f; /* exact: 0.1f * 2^-23 */
        for (size_t i = 0; i < n; i++) {
            int32_t m = (int32_t)(splitmix64(state) >> 40) - 8388608;
            float p = (float)m * k;
            out[i] = bf16_rne(t->kind == K_NORM ? 1.0f + p : p); /* K_NORM0: Gemma-3's w of (1 + w) */
        }
    } else if (t->kind == K_UNIFORM) {
        const float k = t->span / 16777216.0f; /* exact: span * 2^-24 */
        for (size_t i = 0; i < n; i++) {
            float p = (float)(splitmix64(state) >> 40) * k;
            out[i] = bf16_rne(t->lo + p);
        }
    } else {
        /* (float)S is exact (|S| < 2^18); one RNE multiply; no contraction (-ffp-contract=off). */
        const float k = t->std * (1.7320508f / 65536.0f);
        for (size_t i = 0; i < n; i++) {
            uint64_t x = splitmix64(state);
            int32_t s = (int32_t)((x & 0xFFFF) + ((x >> 16) & 0xFFFF) + ((x >> 32) & 0xFFFF) + (x >> 48)) - 131070;
            out[i] = bf16_rne((float)s * k);
        }
    }
}

/* The tensor list of a config (family.h's plan, in its order) with each
 * tensor's initialisation: out[0..cap) filled, the count returned. */
typedef struct list_ctx {
    tdesc *out;
    size_t cap, n;
    enum kind norm;         /* K_NORM0 where the family's norms are (1 + w) (docs/models.md §M7.2) */
    float emb, lin_h, lin_i, lin_q, lin_moe, lin_v, lin_sh;
    int scale_gu, scale_down; /* gpt_oss's MXFP4 scale bytes (tensor_list) */
} list_ctx;

static int list_one(void *ctx, const cis2_tensor_spec *t)
{
    list_ctx *L = ctx;
    enum kind kd = K_NORMAL;
    float sd = 0.0f, lo = 0.0f, span = 0.0f;
    switch (t->role) {
    case CIS2_T_EMBED: case CIS2_T_LM_HEAD: sd = L->emb; break;
    case CIS2_T_FINAL_NORM: case CIS2_T_ATTN_NORM: case CIS2_T_ATTN_OUT_NORM: case CIS2_T_FFN_NORM:
    case CIS2_T_FFN_OUT_NORM: case CIS2_T_Q_NORM: case CIS2_T_K_NORM: kd = L->norm; break;
    case CIS2_T_Q: case CIS2_T_K: case CIS2_T_V: case CIS2_T_QKV:
    case CIS2_T_GATE: case CIS2_T_UP: case CIS2_T_GATE_UP: sd = L->lin_h; break;
    case CIS2_T_O: sd = L->lin_q; break;
    case CIS2_T_DOWN: sd = L->lin_i; break;
    case CIS2_T_Q_BIAS: case CIS2_T_K_BIAS: case CIS2_T_V_BIAS: sd = 0.05f; break;
    case CIS2_T_ROUTER: case CIS2_T_EXPERT_GATE: case CIS2_T_EXPERT_UP: sd = L->lin_h; break;
    /* qwen3_5_moe's (§M10.10): all experts' gate_up and down, the shared expert and its gate */
    case CIS2_T_EXPERTS_GATE_UP: case CIS2_T_SHARED_GATE: case CIS2_T_SHARED_UP: case CIS2_T_SHARED_ROUTER:
        sd = L->lin_h; break;
    case CIS2_T_EXPERTS_DOWN: sd = L->lin_moe; break;
    case CIS2_T_SHARED_DOWN: sd = L->lin_sh; break;
    case CIS2_T_EXPERT_DOWN: sd = L->lin_moe; break;
    case CIS2_T_O_BIAS: case CIS2_T_ROUTER_BIAS: case CIS2_T_EXPERTS_GU_BIAS: case CIS2_T_EXPERTS_DOWN_BIAS:
        sd = 0.05f; break;
    case CIS2_T_SINKS: sd = 1.0f; break;
    case CIS2_T_EXPERTS_GU_BLOCKS: case CIS2_T_EXPERTS_DOWN_BLOCKS: kd = K_CODES; break;
    case CIS2_T_EXPERTS_GU_SCALES: case CIS2_T_EXPERTS_DOWN_SCALES: kd = K_SCALES; break;
    /* a Gated DeltaNet layer's (docs/models.md §M10.2) */
    case CIS2_T_LIN_QKV: case CIS2_T_LIN_Z: case CIS2_T_LIN_B: case CIS2_T_LIN_A: sd = L->lin_h; break;
    case CIS2_T_LIN_QKVZ: case CIS2_T_LIN_BA: sd = L->lin_h; break; /* §M10.11 */
    case CIS2_T_LIN_OUT: sd = L->lin_v; break;
    case CIS2_T_LIN_CONV: sd = 0.5f; break;
    case CIS2_T_LIN_NORM: kd = K_NORM; break; /* a plain weight, near 1 */
    case CIS2_T_LIN_A_LOG: kd = K_UNIFORM; lo = 0.0f; span = 2.75f; break;    /* A = exp(A_log) in [1, 15.6) */
    case CIS2_T_LIN_DT_BIAS: kd = K_UNIFORM; lo = -6.875f; span = 4.5f; break; /* softplus(dt_bias): 1e-3 .. 0.1 */
    }
    if (L->n < L->cap) {
        tdesc *d = &L->out[L->n];
        snprintf(d->name, sizeof d->name, "%s", t->name);
        d->ndim = t->ndim; d->d0 = t->d0; d->d1 = t->d1; d->d2 = t->d2; d->d3 = t->d3; d->kind = kd; d->std = sd;
        d->scale = t->role == CIS2_T_EXPERTS_GU_SCALES ? L->scale_gu : L->scale_down;
        d->lo = lo;
        d->span = span;
    }
    L->n++;
    return 0;
}

static size_t tensor_list(const cis2_config *c, tdesc *out, size_t cap)
{
    uint64_t H = (uint64_t)c->hidden_size, Q = (uint64_t)c->num_attention_heads * (uint64_t)c->head_dim;
    float lin_h = cis2_rsqrt_cr((float)H);
    list_ctx L = {out, cap, 0, c->family->norm_plus_one ? K_NORM0 : K_NORM, 1.5f * lin_h, lin_h,
                  cis2_rsqrt_cr((float)c->intermediate_size), Q == H ? lin_h : cis2_rsqrt_cr((float)Q),
                  c->moe_intermediate_size ? cis2_rsqrt_cr((float)c->moe_intermediate_size) : 0.0f,
                  c->lin_v_heads ? cis2_rsqrt_cr((float)(c->lin_v_heads * c->lin_v_dim)) : 0.0f,
                  c->shared_inter ? cis2_rsqrt_cr((float)c->shared_inter) : 0.0f, 0, 0};
    /* MXFP4 scales (docs/models.md §M9.6): an e2m1 code's RMS is about 2.9,
     * so 2^-(floor(log2 H) / 2) puts gate/up near 3 (the clamp of 7
     * acts in the tails) and four more halvings keep down's outputs near 1 */
    int lg_h = 0, lg_i = 0;
    while (((uint64_t)2 << lg_h) <= (uint64_t)c->hidden_size) lg_h++;
    while (((uint64_t)2 << lg_i) <= (uint64_t)c->intermediate_size) lg_i++;
    L.scale_gu = 127 - lg_h / 2;
    L.scale_down = 127 - lg_i / 2 - 4;
    cis2_family_tensors(c, list_one, &L);
    return L.n;
}

/* ---- files ---- */

static int mkdir_p(const char *dir, cis2_error *err)
{
    char tmp[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof tmp) return cis2_fail(err, CIS2_E_IO, "%s: bad output directory name", dir);
    memcpy(tmp, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (tmp[i] == '/' || tmp[i] == '\0') {
            char c = tmp[i];
            tmp[i] = '\0';
            if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
                return cis2_fail(err, CIS2_E_IO, "%s: cannot create directory: %s", tmp, strerror(errno));
            tmp[i] = c;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return cis2_fail(err, CIS2_E_IO, "%s: not a directory", dir);
    return CIS2_OK;
}

static int write_safetensors(const char *shape_name, int odd_data_offset, const cis2_config *c, uint64_t seed,
                             FILE *f, cis2_error *err)
{
    size_t nt = tensor_list(c, NULL, 0);
    tdesc *t = calloc(nt, sizeof *t);
    uint16_t *buf = malloc((size_t)1 << 17);
    cis2_sb h = {0};
    int rc = CIS2_OK;
    if (!t || !buf) { rc = cis2_fail(err, CIS2_E_NOMEM, "synth: out of memory"); goto out; }
    tensor_list(c, t, nt);

    /* Header: metadata, then the tensors in file order with contiguous offsets. */
    cis2_sb_printf(&h, "{\"__metadata__\":{\"format\":\"pt\",\"cis2_synth_shape\":\"%s\",\"cis2_synth_seed\":\"%llu\"}",
              shape_name, (unsigned long long)seed);
    uint64_t off = 0;
    for (size_t i = 0; i < nt; i++) {
        uint64_t bytes = numel(&t[i]) * (is_u8(&t[i]) ? 1 : 2);
        const uint64_t d[4] = {t[i].d0, t[i].d1, t[i].d2, t[i].d3};
        cis2_sb_printf(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[i].name, is_u8(&t[i]) ? "U8" : "BF16");
        for (int k = 0; k < t[i].ndim; k++) cis2_sb_printf(&h, "%s%llu", k ? "," : "", (unsigned long long)d[k]);
        cis2_sb_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off, (unsigned long long)(off + bytes));
        off += bytes;
    }
    cis2_sb_printf(&h, "}");
    /* Pad with spaces: data area at an odd byte (exercises unaligned reads)
     * or at a multiple of 8 (what the safetensors library writes). */
    while (!h.oom && (odd_data_offset ? (8 + h.n) % 2 != 1 : (8 + h.n) % 8 != 0)) cis2_sb_printf(&h, " ");
    if (h.oom) { rc = cis2_fail(err, CIS2_E_NOMEM, "synth: out of memory"); goto out; }

    setvbuf(f, NULL, _IOFBF, (size_t)1 << 20);
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)h.n >> (8 * i));
    fwrite(len8, 1, 8, f);
    fwrite(h.p, 1, h.n, f);
    uint64_t base = 0x5EED0000C152ull ^ seed;
    base = splitmix64(&base);
    const size_t chunk = ((size_t)1 << 17) / 2;
    for (size_t i = 0; i < nt && !ferror(f); i++) {
        uint64_t state = base ^ fnv1a64(t[i].name);
        for (uint64_t done = 0, n = numel(&t[i]); done < n;) {
            size_t k = n - done < chunk ? (size_t)(n - done) : chunk;
            if (is_u8(&t[i])) { fill_u8(&state, &t[i], (uint8_t *)buf, k); fwrite(buf, 1, k, f); done += k; continue; }
            fill(&state, &t[i], buf, k);
            /* little-endian bf16 payload (§2.5); both supported ISAs are little-endian */
            fwrite(buf, 2, k, f);
            done += k;
        }
    }
out:
    free(h.p);
    free(buf);
    free(t);
    return rc; /* a failed fwrite leaves ferror set: the commit reports it */
}

/* The bos/eos (and pad, where it has one) ids of the real checkpoints
 * some shapes are modelled on (their config.json,
 * ../shared/models/NAME/config.json), written into the shape's
 * config.json so that stop-at-eos, a server's eos_token and an eval
 * harness's end of text work on the synthetic checkpoint as on the real
 * one.  pad -1: the real config.json has no pad_token_id. */
static const struct { const char *shape; int64_t bos, eos, pad; } real_ids[] = {
    {"smollm2-135m", 0, 0, -1},           /* HuggingFaceTB/SmolLM2-135M */
    {"smollm2-360m", 0, 0, -1},           /* HuggingFaceTB/SmolLM2-360M */
    {"qwen2.5-0.5b", 151643, 151643, -1}, /* Qwen/Qwen2.5-0.5B */
};

/* A built-in shape's config.json (llama or qwen2: families whose MLP is
 * silu's and whose norms are plain). */
static void write_config(const cis2_synth_shape *s, const cis2_family *fam, FILE *f)
{
    int qwen = fam->attention_bias == CIS2_BIAS_QKV; /* Qwen2Config's keys: no attention_bias to write */
    fprintf(f, "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n  \"hidden_act\": \"silu\",\n",
            fam->architecture, fam->model_type);
    for (size_t i = 0; i < sizeof real_ids / sizeof real_ids[0]; i++)
        if (!strcmp(real_ids[i].shape, s->name)) {
            fprintf(f, "  \"bos_token_id\": %lld,\n  \"eos_token_id\": %lld,\n", (long long)real_ids[i].bos,
                    (long long)real_ids[i].eos);
            if (real_ids[i].pad >= 0) fprintf(f, "  \"pad_token_id\": %lld,\n", (long long)real_ids[i].pad);
        }
    fprintf(f, "  \"hidden_size\": %lld,\n  \"intermediate_size\": %lld,\n  \"num_hidden_layers\": %lld,\n"
               "  \"num_attention_heads\": %lld,\n  \"num_key_value_heads\": %lld,\n",
            (long long)s->hidden, (long long)s->inter, (long long)s->layers, (long long)s->heads,
            (long long)s->kv_heads);
    if (s->head_dim) fprintf(f, "  \"head_dim\": %lld,\n", (long long)s->head_dim);
    fprintf(f, "  \"vocab_size\": %lld,\n  \"max_position_embeddings\": %lld,\n  \"rms_norm_eps\": %s,\n"
               "  \"rope_theta\": %s,\n  \"tie_word_embeddings\": %s,\n",
            (long long)s->vocab, (long long)s->max_pos, s->eps_json, s->theta_json, s->tied ? "true" : "false");
    if (qwen) fprintf(f, "  \"use_sliding_window\": false,\n");
    else fprintf(f, "  \"attention_bias\": false,\n  \"rope_scaling\": null,\n");
    fprintf(f, "  \"torch_dtype\": \"bfloat16\"\n}\n");
}

/* Spec §3.1.5.a: byte -> codepoint (188 printable bytes map to themselves,
 * the other 68 to 256.. in ascending byte order). */
static void byte_to_cp(uint32_t cp[256])
{
    uint32_t n = 0;
    for (uint32_t b = 0; b < 256; b++) {
        int self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        cp[b] = self ? b : 256 + n++;
    }
}

char *cis2_synth_min_tokenizer_json(void)
{
    uint32_t cp[256];
    byte_to_cp(cp);
    json_t *vocab = json_object();
    for (uint32_t b = 0; b < 256; b++) {
        char s[4];
        if (cp[b] < 0x80) { s[0] = (char)cp[b]; s[1] = 0; }
        else { s[0] = (char)(0xC0 | (cp[b] >> 6)); s[1] = (char)(0x80 | (cp[b] & 0x3F)); s[2] = 0; } /* < 0x800 */
        json_object_set_new(vocab, s, json_integer(b));
    }
    json_t *bl = json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1,
                           "use_regex", 1);
    json_t *dec = json_deep_copy(bl);
    json_t *model = json_pack("{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:b, s:o, s:[]}", "type", "BPE", "dropout",
                              "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0,
                              "byte_fallback", 0, "ignore_merges", 0, "vocab", vocab, "merges");
    json_t *root = json_pack("{s:s, s:n, s:n, s:[], s:n, s:o, s:n, s:o, s:o}", "version", "1.0", "truncation",
                             "padding", "added_tokens", "normalizer", "pre_tokenizer", bl, "post_processor",
                             "decoder", dec, "model", model);
    char *out = root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    return out;
}

/* The three files of out_dir as one set (fileio.h): each written to a
 * unique temporary file beside its target, then committed together, so a
 * failed or interrupted synth leaves the directory as it was, and two
 * synths into one directory each rename a complete set (never one file of
 * each).  tok (NULL: the minimal tokenizer) and cfg (c parsed from it):
 * bytes to copy verbatim; the weights are c's tensors. */
static int write_set(const char *shape_name, int odd_data_offset, const cis2_config *c, uint64_t seed,
                     const char *out_dir, const char *tok, size_t tok_len, const char *cfg, size_t cfg_len,
                     cis2_error *err)
{
    static const char *const names[3] = {"tokenizer.json", "config.json", "model.safetensors"};
    cis2_out *o[3] = {NULL, NULL, NULL};
    int rc = mkdir_p(out_dir, err);
    for (int i = 0; i < 3 && !rc; i++) {
        char path[4200];
        int n = snprintf(path, sizeof path, "%s/%s", out_dir, names[i]);
        if (n < 0 || (size_t)n >= sizeof path) rc = cis2_fail(err, CIS2_E_USAGE, "%s: path too long", out_dir);
        else rc = cis2_out_open(&o[i], path, err);
    }
    if (!rc) {
        FILE *f = cis2_out_stream(o[0]);
        if (tok) fwrite(tok, 1, tok_len, f);
        else {
            char *js = cis2_synth_min_tokenizer_json();
            if (!js) rc = cis2_fail(err, CIS2_E_NOMEM, "synth: out of memory building tokenizer.json");
            else { fputs(js, f); fputc('\n', f); free(js); }
        }
    }
    if (!rc) fwrite(cfg, 1, cfg_len, cis2_out_stream(o[1]));
    if (!rc) rc = write_safetensors(shape_name, odd_data_offset, c, seed, cis2_out_stream(o[2]), err);
    if (rc) {
        for (int i = 0; i < 3; i++) cis2_out_abort(o[i]);
        return rc;
    }
    return cis2_out_commit_set(o, 3, err);
}

static int read_tokenizer_src(const char *src, char **buf, size_t *len, cis2_error *err)
{
    *buf = NULL;
    *len = 0;
    if (!src) return CIS2_OK;
    return cis2_read_file(src, CIS2_TOK_MAX_FILE, "a tokenizer.json", buf, len, err);
}

char *cis2_synth_shape_config(const char *shape, size_t *len)
{
    const cis2_synth_shape *s = cis2_synth_find_shape(shape);
    const cis2_family *fam = s ? cis2_family_find(s->model_type) : NULL;
    if (!fam) return NULL;
    char *cfg = NULL;
    size_t cl = 0;
    FILE *mf = open_memstream(&cfg, &cl);
    if (!mf) return NULL;
    write_config(s, fam, mf);
    if (fclose(mf)) { free(cfg); return NULL; }
    *len = cl;
    return cfg;
}

int cis2_synth_write(const char *shape, uint64_t seed, const char *out_dir, const char *tokenizer_src,
                     cis2_error *err)
{
    const cis2_synth_shape *s = cis2_synth_find_shape(shape);
    if (!s) return cis2_fail(err, CIS2_E_USAGE, "synth: unknown shape '%s'", shape);
    if (!cis2_family_find(s->model_type)) return cis2_fail(err, CIS2_E_INTERNAL, "synth: shape '%s' has no family", shape);
    char *tok = NULL;
    size_t cl = 0, tl;
    char *cfg = cis2_synth_shape_config(shape, &cl); /* parsed back for its tensors */
    int rc = cfg ? CIS2_OK : cis2_fail(err, CIS2_E_NOMEM, "synth: out of memory");
    cis2_config c;
    if (!rc) rc = cis2_config_parse(&c, cfg, cl, "synth", err);
    if (!rc) rc = read_tokenizer_src(tokenizer_src, &tok, &tl, err);
    if (!rc) rc = write_set(s->name, s->odd_data_offset, &c, seed, out_dir, tok, tl, cfg, cl, err);
    free(cfg);
    free(tok);
    return rc;
}

int cis2_synth_write_config(const char *config_path, uint64_t seed, const char *out_dir, const char *tokenizer_src,
                            cis2_error *err)
{
    char *cfg, *tok = NULL;
    size_t cl, tl = 0;
    int rc = cis2_read_file(config_path, CIS2_CFG_MAX_FILE, "a config.json", &cfg, &cl, err);
    if (rc) return rc;
    cis2_config c;
    if (!(rc = cis2_config_parse(&c, cfg, cl, config_path, err)) && !(rc = read_tokenizer_src(tokenizer_src, &tok, &tl, err)))
        rc = write_set("config", 1, &c, seed, out_dir, tok, tl, cfg, cl, err); /* the config byte for byte */
    free(cfg);
    free(tok);
    return rc;
}
