#!/usr/bin/python3
"""
torch_ref.py - an independent fp32 forward-pass oracle for `cis2 run`.

Reads a checkpoint directory (model.safetensors + config.json) with its own
small safetensors parser, runs the standard Llama / Qwen2 decoder forward
pass (spec §2.5, §7-§11, written from the architecture description, not from
cis2's code) in torch float32 with plain ops, and compares it with the
logits cis2 dumped (`cis2 run --json --dump-logits FILE`).

The families of docs/models.md, from Hugging Face transformers' semantics (not
from cis2's code or docs/models.md's pinned order):
  - Llama 3.1's RoPE scaling (rope_scaling / rope_parameters with
    rope_type "llama3"): modeling_rope_utils._compute_llama3_parameters,
    here in float64 on the float64 default table (wavelen = 2*pi/inv_freq;
    above original/low_freq_factor divide by factor; below
    original/high_freq_factor keep; between, the smooth interpolation
    (1 - s) * inv / factor + s * inv with s = (original/wavelen - low) /
    (high - low));
  - Qwen3 (model_type qwen3): q_proj/o_proj of heads*head_dim, an RMSNorm
    over each head's head_dim values of q and k (self_attn.q_norm /
    k_norm weights, eps rms_norm_eps) after the projection, before RoPE.
  - SmolLM3 (model_type smollm3): Llama, except that a layer whose
    no_rope_layers entry is 0 applies no rotary embedding to q and k
    (SmolLM3Attention.use_rope); without the list, layer l has none when
    (l + 1) % no_rope_layer_interval == 0 (default interval 4); the RoPE
    base defaults to 2e6 (SmolLM3Config).
  - OLMo-2 (model_type olmo2): no input_layernorm; q_norm / k_norm are
    RMSNorms over the whole q_proj / k_proj output (heads*head_dim and
    kv_heads*head_dim values) before the split into heads and RoPE; the
    attention block's output goes through post_attention_layernorm and the
    MLP's through post_feedforward_layernorm before each residual add
    (Olmo2Attention, Olmo2DecoderLayer); the MLP reads the residual stream
    itself.
  - Mistral and Phi-3 (model_type mistral / phi3) with sliding_window W
    set: the causal mask and'ed with transformers' sliding_window_overlay,
    key kv visible from query q iff kv > q - W (masking_utils), so each
    position sees its own key and the W - 1 before it.
  - Phi-3 (model_type phi3): self_attn.qkv_proj holds q_proj's rows
    (heads*head_dim), then k_proj's and v_proj's (kv_heads*head_dim each),
    sliced in that order (Phi3Attention's query_pos); mlp.gate_up_proj is
    chunk(2) of the output: the first intermediate_size rows the gate, the
    rest up (Phi3MLP); split here at load, the arithmetic then Llama's.
  - Gemma-3 text (model_type gemma3_text; Gemma3TextConfig,
    Gemma3TextModel, Gemma3DecoderLayer, Gemma3Attention, Gemma3MLP,
    Gemma3RMSNorm in modeling_gemma3.py): defaults head_dim 256,
    query_pre_attn_scalar 256, rope_theta 1e6, rope_local_base_freq 1e4,
    sliding_window 4096, sliding_window_pattern (or the saved
    _sliding_window_pattern) 6, rms_norm_eps 1e-6, tie_word_embeddings true,
    hidden_activation gelu_pytorch_tanh; layer_types, else layer i slides
    iff (i + 1) % pattern != 0; the embedding times sqrt(hidden) as a
    float32 tensor (the LM head is the unscaled tied embedding); every
    RMSNorm's gain is (1 + weight), in float32; per layer x += post_attn_norm(
    attn(input_norm(x))), x += post_ffw_norm(mlp(pre_ffw_norm(x))); q_norm /
    k_norm per head before RoPE; scores times query_pre_attn_scalar ** -0.5;
    full layers: RoPE base rope_theta with rope_scaling ("linear": inv_freq
    / factor); sliding layers: base rope_local_base_freq, unscaled, and the
    window kv > q - W; transformers 5's rope_parameters {"full_attention":
    {...}, "sliding_attention": {...}} read the same way; MLP
    down(gelu_tanh(gate(x)) * up(x)).  Softcapping, bidirectional
    attention and a scaled local RoPE are refused.
  - Qwen3-MoE (model_type qwen3_moe; Qwen3MoeConfig, Qwen3MoeDecoderLayer,
    Qwen3MoeSparseMoeBlock in modeling_qwen3_moe.py): Qwen3's attention
    (per-head q/k RMSNorm before RoPE, head_dim from the config); layer l
    has a routed block iff l is not in mlp_only_layers and num_experts > 0
    and (l + 1) % decoder_sparse_step == 0, else the dense MLP of
    intermediate_size.  Router mlp.gate.weight [E, H], no bias; softmax over
    all E in float32, top num_experts_per_tok of the probabilities,
    divided by their sum iff norm_topk_prob (default false); experts
    mlp.experts.{e}.{gate,up,down}_proj.weight (SwiGLU of
    moe_intermediate_size; transformers 5's fused mlp.experts.gate_up_proj
    [E, 2I, H] (gate rows first) / down_proj [E, H, I] are split at load);
    out = sum_k w_k * expert_k(x).  use_sliding_window true is refused.
  - gpt-oss (model_type gpt_oss; GptOssConfig, GptOssAttention,
    eager_attention_forward, GptOssTopKRouter, GptOssExperts in
    modeling_gpt_oss.py; convert_moe_packed_tensors in
    integrations/mxfp4.py; _compute_yarn_parameters in
    modeling_rope_utils.py): q/k/v/o with biases; per-head learned sinks
    (self_attn.sinks [heads]) as one more softmax logit per row whose
    probability is dropped (mass, no value); layer_types (default: even
    layers sliding) with the window kv > q - sliding_window on the sliding
    ones; YaRN RoPE (below) whose attention factor multiplies cos and sin;
    router mlp.router.weight [E, H] + .bias: top-k of the raw logits, then
    a softmax over those k; experts x @ gate_up_proj[e] + bias [E, H, 2I],
    gate = even columns, up = odd, gate clamped above at swiglu_limit, up
    to [-limit, limit], glu = gate * sigmoid(swiglu_alpha * gate), then
    ((up + 1) * glu) @ down_proj[e] [E, I, H] + down bias, and that sum
    times the routing weight; untied lm_head.  Experts from MXFP4
    (mlp.experts.{gate_up,down}_proj_{blocks,scales}: uint8 [E, R, G, 16]
    and [E, R, G], e2m1 codes, byte's low nibble first, value * 2^(scale -
    127), then [E, R, G*32] transposed to [E, G*32, R]) or unquantised
    (mlp.experts.gate_up_proj [E, H, 2I], down_proj [E, I, H]).
  - YaRN (rope_type "yarn", gpt_oss and qwen3_moe only), in float64:
    dim = head_dim; factor = max_position_embeddings /
    original_max_position_embeddings when the latter is given (refused if
    that differs from rope factor: transformers versions disagree there);
    attention factor = attention_factor, else get_mscale(factor, mscale) /
    get_mscale(factor, mscale_all_dim) when both are set, else 0.1 ln(factor)
    + 1 (1 for factor <= 1); low/high = dim ln(orig / (2 pi beta)) / (2 ln
    base) for beta_fast (default 32) / beta_slow (default 1), floored /
    ceiled only when truncate (default true), clamped to [0, dim - 1],
    high += 0.001 if equal; ramp_i = clamp((i - low) / (high - low), 0, 1);
    inv_freq = (1 / base^(2i/dim)) (1 - ramp) + (1 / (factor base^(2i/dim)))
    ramp.
  - Qwen3.5 / Qwen3.5-MoE / Qwen3-Next (model_type qwen3_5 (the
    multimodal wrapper: text_config read, vision_config not), qwen3_5_text,
    qwen3_5_moe(_text), qwen3_next; modeling_qwen3_5.py,
    modeling_qwen3_5_moe.py, modeling_qwen3_next.py): layer_types
    linear_attention / full_attention (default: every
    full_attention_interval-th full); every RMSNorm (input, post-attention,
    final, q_norm, k_norm) x * rsqrt(mean x^2 + eps) * (1 + w).  Linear
    layers, Gated DeltaNet: in_proj_qkv (flat q | k | v), in_proj_z,
    in_proj_b, in_proj_a (Qwen3.5) or in_proj_qkvz / in_proj_ba grouped per
    key head (Qwen3-Next); the depthwise causal conv1d (kernel
    linear_conv_kernel_dim, no bias) over q | k | v, then SiLU; q, k
    l2-normalised (x * rsqrt(sum x^2 + 1e-6)), then q times dk^-0.5; beta =
    sigmoid(b), g = -exp(A_log) softplus(a + dt_bias); key heads repeated
    (repeat_interleave) to the value heads; the gated delta rule per value
    head with state S [dk, dv]: S *= exp(g); u = beta (v - S^T k); S += k
    u^T; o = S^T q -- chunked (64) for a prefill, token by token for a
    decode step (hybrid_forward's carried state); RMSNorm over dv with the
    plain weight times silu(z); out_proj.  Full layers: q_proj gives per
    head D query values then D gate values; q_norm / k_norm per head; RoPE
    (rotate-half) on the first head_dim * partial_rotary_factor dims
    (default 0.25), theta from rope_parameters / rope_theta, Qwen3.5's
    interleaved M-RoPE with the three text position streams equal (plain
    RoPE); scores * head_dim^-0.5; output times sigmoid(gate); o_proj.  MLP:
    SwiGLU; routed layers (Qwen3.5-MoE: all, top-k always renormalised;
    Qwen3-Next: Qwen3-MoE's layer rule, norm_topk_prob default true):
    softmax over the experts, top-k, experts as Qwen3-MoE's (fused
    gate_up_proj [E, 2I, H] / down_proj [E, H, I] split at load), plus
    shared_expert(x) * sigmoid(shared_expert_gate(x)).  mtp.* and the vision
    tower are ignored.
  - Routed top-k in both families is an explicit stable selection: value
    descending, and among exactly equal values the LOWER expert index
    (cis2's pinned rule); experts whose router rows (and biases) are
    bit-identical get bit-identical logits here (computed once), and
    exactly equal logits get exactly equal probabilities.
`check --ablate llama3|llama3_smooth|qk_norm|nope|post_norm|qk_norm_per_head|window|window_off_by_one`
drops the feature from the oracle (post_norm: OLMo-2's block outputs added
unnormalised; qk_norm_per_head: OLMo-2's q/k norm taken per head, Qwen3's
way, with each head's slice of the weight; window: full attention;
window_off_by_one: W + 1 keys, the older flash-attention reading); for
Gemma-3 also gemma_norm (gain w, not 1 + w), embed_scale (no sqrt(hidden)),
gelu_erf (the exact GELU), local_rope (the global table in every layer),
query_scale (1/sqrt(head_dim)), layer_pattern (layer l takes layer l-1's
type): the test shows that the comparison then fails (the feature is
effective).  gelu_erf moves N(0, 1)-gated random checkpoints' logits by
only ~5e-5, under the tolerance: its control needs gate pre-activations in
GELU's negative tail (selftest's gemma3-gelu-tail).
For the mixture-of-experts families (negative controls likewise; each
raises where the config makes it a no-op): softmax_then_topk (gpt-oss:
softmax over all E, top k of that, not renormalised), topk_then_softmax
(qwen3_moe: top k of the logits, softmax over the k; a no-op when
norm_topk_prob), no_norm_topk (qwen3_moe), tie_high_index (exact ties go
to the higher expert index), no_sinks, no_yarn (plain RoPE, factor 1),
no_yarn_scale (YaRN frequencies, cos/sin unscaled), yarn_truncate (flip
truncate), no_swiglu_clamp, no_interleave (gate / up as the first / second
half), bias_after_weight (down bias added after the routing weight),
mxfp4_high_nibble_first (gpt-oss).
For the hybrid families (tests/oracle/test_hybrid_ref.py; checkpoints from
tests/oracle/synth_hybrid.py): no_conv, no_conv_silu, no_l2norm,
no_q_scale, no_decay (g = 0), no_dt_bias, no_beta (beta = 1), no_z_gate,
gated_norm_1p (the gated norm's weight as 1 + w), kv_head_tile (v-head j
reads k-head j % Hk), qkvz_flat (Qwen3-Next's fused projections read as
flat [q | k | v | z]), no_output_gate, gate_halves (q_proj as [all q | all
gates]), full_rotary, norm_plain_w (RMSNorm gains w, not 1 + w),
no_shared_expert, no_shared_gate, and qk_norm, no_norm_topk,
topk_then_softmax, tie_high_index from above; chunked_vs_recurrent (the
delta rule token by token in the prefill too) is the positive control: the
same function, so it must NOT move the logits beyond rounding.

It deliberately does NOT reproduce cis2's pinned arithmetic (§5-§6): torch
uses its own matmul order and libm exp/sin/cos.  What it checks is that
cis2 computes the right function: per-step relative L2 error of the logits
and the greedy tokens wherever the top-1/top-2 margin is unambiguous.

Run it with Debian's python (/usr/bin/python3), which has torch.

  torch_ref.py check  --model-dir D --json CIS2_STDOUT --logits FILE
                      [--tol 1e-4] [--margin 1e-3] [--min-checked 3]
  torch_ref.py greedy --model-dir D --prompt-ids 1,2,3 --gen-toks N
  torch_ref.py crosscheck --model-dir D --prompt-ids 1,2,3 --gen-toks N
        torch fp32 (one causal pass) vs a second, plain numpy float64
        implementation (token-by-token with a KV cache); for the hybrid
        families vs torch float64 fed one token at a time with the carried
        state (the recurrent rule, the conv window, the KV cache)
  torch_ref.py selftest [--keep DIR]
        writes small random checkpoints (tied/untied, biases, GQA,
        head_dim != hidden/heads, the families above) and crosschecks
        each; also checks that `check` rejects perturbed logits, and that
        each Gemma-3 ablation moves the logits by > 2e-3 (check rejects).
  torch_ref.py logits --model-dir D --ids 1,2,3 [--out FILE] [--from P]
                      [--f64] [--out-f64] [--ablate F ...]
        the oracle's logits at positions P.. of one causal pass over the
        ids (f32 little-endian [n, vocab], or f64 with --out-f64), and a
        JSON line with the shape and each position's argmax.
  --f64 (check, greedy, logits): the torch pass in float64 instead of
  float32 (a tolerance reference; float32 is what transformers computes).
  The mixture-of-experts tests are tests/oracle/test_moe_ref.py (pytest),
  on checkpoints from tests/oracle/synth_moe.py.

Exit status: 0 pass, 1 mismatch / failure, 2 usage or unreadable input.
"""
import argparse
import copy
import json
import math
import os
import struct
import sys
import tempfile

import numpy as np

try:
    import torch
except ImportError:  # the shell test probes this separately
    torch = None


# --------------------------------------------------------------------------
# safetensors + config

def load_safetensors(path):
    """Return {name: np.float32 array}.  BF16 widened by <<16 (§4.2).
    U8 tensors (gpt-oss's MXFP4 blocks and scales) stay np.uint8."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: too short for a safetensors header")
    (hlen,) = struct.unpack("<Q", data[:8])
    if hlen > len(data) - 8:
        raise ValueError(f"{path}: header length {hlen} past end of file")
    header = json.loads(data[8:8 + hlen].decode("utf-8"))
    base = 8 + hlen
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, shape = info["dtype"], info["shape"]
        start, end = info["data_offsets"]
        n = int(np.prod(shape)) if shape else 1
        raw = data[base + start:base + end]
        if dtype == "BF16":
            if len(raw) != 2 * n:
                raise ValueError(f"{path}: {name}: {len(raw)} bytes for {n} bf16")
            u16 = np.frombuffer(raw, dtype="<u2").astype(np.uint32)
            arr = (u16 << 16).view(np.float32)
        elif dtype == "F32":
            if len(raw) != 4 * n:
                raise ValueError(f"{path}: {name}: {len(raw)} bytes for {n} f32")
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        elif dtype == "U8":
            if len(raw) != n:
                raise ValueError(f"{path}: {name}: {len(raw)} bytes for {n} u8")
            arr = np.frombuffer(raw, dtype=np.uint8).copy()
        else:
            raise ValueError(f"{path}: {name}: dtype {dtype} not supported")
        out[name] = arr.reshape(shape)
    return out


class Config:
    def __init__(self, path):
        with open(path) as f:
            c = json.load(f)
        mt = c.get("model_type")
        self.hybrid = None
        if mt in HYBRID_MODEL_TYPES:                             # Qwen3.5 / Qwen3-Next: their own reader
            hybrid_config(self, c, path)
            return
        self.gemma3 = mt == "gemma3_text"
        self.hidden = int(c["hidden_size"])
        self.inter = int(c["intermediate_size"])
        self.layers = int(c["num_hidden_layers"])
        self.heads = int(c["num_attention_heads"])
        self.kv_heads = int(c.get("num_key_value_heads") or self.heads)
        self.head_dim = int(c.get("head_dim") or (256 if self.gemma3 else self.hidden // self.heads))
        self.vocab = int(c["vocab_size"])
        self.eps = float(c.get("rms_norm_eps", 1e-6))
        self.theta = float(c.get("rope_theta", 2000000.0 if mt == "smollm3" else 10000.0))
        self.use_rope = [True] * self.layers                     # SmolLM3: per layer
        if mt == "smollm3":
            nrl = c.get("no_rope_layers")
            if nrl is None:
                every = int(c.get("no_rope_layer_interval", 4))
                nrl = [int((l + 1) % every != 0) for l in range(self.layers)]
            self.use_rope = [bool(nrl[l]) for l in range(self.layers)]
        self.tied = bool(c.get("tie_word_embeddings", self.gemma3))
        self.qk_norm = mt in ("qwen3", "olmo2", "gemma3_text", "qwen3_moe")
        self.olmo2 = mt == "olmo2"
        self.post_norm = self.olmo2
        self.qk_whole = self.olmo2                              # OLMo-2: over the whole projection
        self.window = None                                       # Mistral / Phi-3 / Gemma-3 sliding window
        self.sliding = [True] * self.layers                      # the layers the window applies to
        if mt in ("mistral", "phi3") and c.get("sliding_window") is not None:
            self.window = int(c["sliding_window"])
        self.fused = mt == "phi3"                                # Phi-3: qkv_proj, gate_up_proj
        self.llama3 = None
        self.linear = None                                       # rope_type "linear": inv_freq / factor
        # Gemma-3's knobs; these defaults are the Llama arithmetic
        self.embed_scale = False                                 # embeddings times sqrt(hidden)
        self.gemma_norm = False                                  # RMSNorm gain (1 + w)
        self.sandwich = False                                    # pre and post norms around both blocks
        self.act = "silu"
        self.qscale = None                                       # None: scores / sqrt(head_dim)
        self.local_rope = False                                  # sliding layers: their own RoPE table
        self.local_theta = None
        # the mixture-of-experts families' knobs (qwen3_moe, gpt_oss); these
        # defaults leave the dense arithmetic alone
        self.moe = mt if mt in ("qwen3_moe", "gpt_oss") else None
        self.sparse = [False] * self.layers                      # layers with a routed expert block
        self.yarn = None                                         # YaRN parameters (dict)
        self.rope_scale = 1.0                                    # YaRN's attention factor on cos and sin
        self.sinks = False                                       # gpt-oss: per-head sink logits
        self.f64 = False                                         # --f64: the torch pass in float64
        if self.gemma3:
            self._gemma3(c, path)
        elif self.moe == "gpt_oss":
            self._gpt_oss(c, path)
        elif self.moe == "qwen3_moe":
            self._qwen3_moe(c, path)
        else:
            for key in ("rope_scaling", "rope_parameters"):
                self._rope(c.get(key) or {}, key, path)
            if c.get("hidden_act", "silu") != "silu":
                raise ValueError(f"{path}: hidden_act {c.get('hidden_act')} is not silu")
        if c.get("rope_interleaved"):
            raise ValueError(f"{path}: rope_interleaved=true is not supported by the oracle")
        if self.heads % self.kv_heads or self.head_dim % 2:
            raise ValueError(f"{path}: heads/kv_heads/head_dim inconsistent")

    def _rope(self, rs, key, path, c=None):
        """One rope_scaling / rope_parameters dict: its base, and the
        scaling (modeling_rope_utils: "default", "linear", "llama3"; "yarn"
        only for the mixture-of-experts families, which pass their config
        as c)."""
        if "rope_theta" in rs:
            self.theta = float(rs["rope_theta"])
        t = rs.get("rope_type", rs.get("type", "default"))
        if t == "yarn" and c is not None:
            self._yarn(rs, c, path)
        elif t == "llama3":
            self.llama3 = {k: float(rs[k]) for k in ("factor", "low_freq_factor", "high_freq_factor",
                                                     "original_max_position_embeddings")}
        elif t == "linear":                                      # _compute_linear_scaling_rope_parameters
            self.linear = float(rs["factor"])
        elif t != "default":
            raise ValueError(f"{path}: {key} type {t} is not supported by the oracle")

    def _yarn(self, rs, c, path):
        """_compute_yarn_parameters' inputs, as transformers reads them
        (the table itself: yarn_inv_freq_f64)."""
        factor = float(rs["factor"])
        orig = rs.get("original_max_position_embeddings")
        maxpos = c.get("max_position_embeddings")
        if orig:
            orig = int(orig)
            # transformers 4.5x-5 take factor = max_position_embeddings / original
            # when the latter is given; earlier ones the rope factor as is
            if maxpos and not math.isclose(maxpos / orig, factor, rel_tol=1e-12):
                raise ValueError(f"{path}: yarn factor {factor} != max_position_embeddings / "
                                 f"original_max_position_embeddings = {maxpos}/{orig}: transformers "
                                 "versions differ on which one applies, refused")
        elif maxpos:
            orig = int(maxpos)
        else:
            raise ValueError(f"{path}: yarn needs original_max_position_embeddings or max_position_embeddings")
        if float(c.get("partial_rotary_factor", 1.0)) != 1.0:
            raise ValueError(f"{path}: partial_rotary_factor is not supported with yarn by the oracle")

        def mscale_of(scale, m=1.0):                             # get_mscale
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0
        af = rs.get("attention_factor")
        if af is None:
            ms, msa = rs.get("mscale"), rs.get("mscale_all_dim")
            af = mscale_of(factor, ms) / mscale_of(factor, msa) if (ms and msa) else mscale_of(factor)
        self.yarn = {"factor": factor, "original": orig,
                     "beta_fast": float(rs.get("beta_fast") or 32.0),
                     "beta_slow": float(rs.get("beta_slow") or 1.0),
                     "truncate": bool(rs.get("truncate", True))}
        self.rope_scale = float(af)

    def _gpt_oss(self, c, path):
        """GptOssConfig's defaults and the knobs GptOssAttention /
        GptOssTopKRouter / GptOssExperts use."""
        self.theta = float(c.get("rope_theta", 150000.0))        # GptOssConfig.default_theta
        rs = c.get("rope_parameters") or c.get("rope_scaling")
        if rs is None:                                           # GptOssConfig's default rope_parameters
            rs = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                  "truncate": False, "original_max_position_embeddings": 4096}
        self._rope(rs, "rope_scaling", path, c)
        self.sinks = True
        self.experts = int(c.get("num_local_experts", c.get("num_experts", 128)))
        self.top_k = int(c.get("num_experts_per_tok", c.get("experts_per_token", 4)))
        self.swiglu_limit = float(c.get("swiglu_limit", 7.0))
        self.swiglu_alpha = float(c.get("swiglu_alpha", 1.702))
        self.sparse = [True] * self.layers
        types = c.get("layer_types")
        if types is None:                                        # GptOssConfig: even layers slide
            types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(self.layers)]
        if len(types) != self.layers or not set(types) <= {"sliding_attention", "full_attention"}:
            raise ValueError(f"{path}: layer_types {types} is not {self.layers} sliding/full_attention")
        self.sliding = [t == "sliding_attention" for t in types]
        if any(self.sliding):
            if c.get("sliding_window", 128) is None:
                raise ValueError(f"{path}: sliding layers with sliding_window null")
            self.window = int(c.get("sliding_window", 128))
        self.tied = bool(c.get("tie_word_embeddings", False))
        self.route = "topk_softmax"                              # top-k of logits, softmax over k
        self.norm_topk = False
        self._moe_common()

    def _qwen3_moe(self, c, path):
        """Qwen3MoeConfig's defaults and Qwen3MoeDecoderLayer's layer rule."""
        for key in ("rope_scaling", "rope_parameters"):
            self._rope(c.get(key) or {}, key, path, c)
        if c.get("hidden_act", "silu") != "silu":
            raise ValueError(f"{path}: hidden_act {c.get('hidden_act')} is not silu")
        if c.get("use_sliding_window"):
            raise ValueError(f"{path}: use_sliding_window true is not supported by the oracle")
        self.experts = int(c.get("num_experts", c.get("num_local_experts", 128)))
        self.top_k = int(c.get("num_experts_per_tok", 8))
        self.norm_topk = bool(c.get("norm_topk_prob", False))
        self.moe_inter = int(c.get("moe_intermediate_size", 768))
        step = int(c.get("decoder_sparse_step", 1))
        only = [int(x) for x in (c.get("mlp_only_layers") or [])]
        self.sparse = [(l not in only) and self.experts > 0 and (l + 1) % step == 0 for l in range(self.layers)]
        self.route = "softmax_topk"                              # softmax over E, top-k, renormalise?
        self._moe_common()

    def _moe_common(self):
        if any(self.sparse) and not 0 < self.top_k <= self.experts:
            raise ValueError(f"num_experts_per_tok {self.top_k} not in 1..{self.experts}")
        self.tie_low = True                                      # exact ties: lower expert index
        self.swiglu_clamp = True                                 # gpt-oss's clamps
        self.interleave = True                                   # gpt-oss: gate even, up odd columns
        self.bias_weighted = True                                # gpt-oss: (h @ down + b) * weight
        self.nibble_lo_first = True                              # MXFP4: low nibble is element 2i

    def _gemma3(self, c, path):
        """Gemma3TextConfig's defaults and layer types, and the knobs that
        Gemma3TextModel / Gemma3DecoderLayer / Gemma3Attention use."""
        for k in ("final_logit_softcapping", "attn_logit_softcapping"):
            if c.get(k) is not None:
                raise ValueError(f"{path}: {k}={c[k]} is not supported by the oracle (null only)")
        if c.get("use_bidirectional_attention"):
            raise ValueError(f"{path}: use_bidirectional_attention is not a causal LM")
        act = c.get("hidden_activation") or "gelu_pytorch_tanh"  # hidden_act is not Gemma3TextConfig's key
        if act != "gelu_pytorch_tanh":
            raise ValueError(f"{path}: hidden_activation {act} is not gelu_pytorch_tanh")
        self.act = "gelu_tanh"
        self.embed_scale = self.gemma_norm = self.sandwich = self.local_rope = True
        self.qscale = float(c.get("query_pre_attn_scalar", 256)) ** -0.5
        if c.get("sliding_window", 4096) is None:
            raise ValueError(f"{path}: sliding_window null is not supported by the oracle")
        self.window = int(c.get("sliding_window", 4096))
        types = c.get("layer_types")
        if types is None:                                        # the BC rule: every pattern-th layer is full
            every = int(c.get("sliding_window_pattern", c.get("_sliding_window_pattern", 6)))
            types = ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(self.layers)]
        if len(types) != self.layers or not set(types) <= {"sliding_attention", "full_attention"}:
            raise ValueError(f"{path}: layer_types {types} is not {self.layers} sliding/full_attention")
        self.sliding = [t == "sliding_attention" for t in types]
        rp = c.get("rope_parameters") or {}
        if "full_attention" in rp or "sliding_attention" in rp:  # transformers 5: one dict per layer type
            full, local = rp.get("full_attention") or {}, rp.get("sliding_attention") or {}
        else:                                                    # 4.5x: rope_scaling is the global layers'
            full, local = c.get("rope_scaling") or rp, {}
        self.theta = float(c.get("rope_theta", 1000000.0))
        self._rope(full, "rope_parameters.full_attention", path)
        self.local_theta = float(local.get("rope_theta", c.get("rope_local_base_freq", 10000.0)))
        if local.get("rope_type", local.get("type", "default")) != "default":
            raise ValueError(f"{path}: a scaled RoPE on the sliding layers is not supported by the oracle")


def inv_freq_f64(cfg, local=False):
    """The RoPE inverse frequencies in float64: theta^(-2i/D), then the
    scaling the config asks for: "linear" divides by factor, Llama 3.1's
    (transformers' _compute_llama3_parameters, written from its
    definition) rescales by band.  local: Gemma-3's sliding layers, base
    rope_local_base_freq and no scaling (Gemma3TextModel.rotary_emb_local)."""
    D = cfg.head_dim
    theta = cfg.local_theta if local else cfg.theta
    inv = np.array([math.pow(theta, -(2.0 * j) / D) for j in range(D // 2)])
    if local:
        return inv
    if cfg.yarn:
        return yarn_inv_freq_f64(theta, D, **cfg.yarn)
    if cfg.linear:
        return inv / cfg.linear
    if not cfg.llama3:
        return inv
    p = cfg.llama3
    factor, low, high, old = p["factor"], p["low_freq_factor"], p["high_freq_factor"], \
        p["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    if getattr(cfg, "no_smooth", False):                 # ablation: the medium band left unscaled
        return scaled
    return np.where(medium, smoothed, scaled)


def yarn_correction_range(base, dim, original, beta_fast, beta_slow, truncate):
    """YaRN's ramp ends (low, high) in units of the half-dim index: the
    index whose wavelength makes beta rotations over `original` positions,
    dim * ln(original / (2 pi beta)) / (2 ln base), for beta_fast and
    beta_slow; whole numbers (floor / ceil) only when truncate; clamped to
    [0, dim - 1]."""
    def index_for(beta):
        return dim * math.log(original / (beta * 2.0 * math.pi)) / (2.0 * math.log(base))
    low, high = index_for(beta_fast), index_for(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, dim - 1)


def yarn_inv_freq_f64(base, dim, factor, original, beta_fast, beta_slow, truncate):
    """YaRN's inverse frequencies in float64 (transformers'
    _compute_yarn_parameters, written from its definition): below the ramp
    (fast rotations) the plain base^(-2i/dim), above it that divided by
    factor, linearly blended across it."""
    low, high = yarn_correction_range(base, dim, original, beta_fast, beta_slow, truncate)
    if low == high:
        high += 0.001                                    # the singularity guard
    out = np.empty(dim // 2)
    for i in range(dim // 2):
        plain = 1.0 / math.pow(base, 2.0 * i / dim)
        r = min(max((i - low) / (high - low), 0.0), 1.0)     # 0: keep, 1: interpolate
        out[i] = plain * (1.0 - r) + (plain / factor) * r
    return out


def local_layer(cfg, l):
    """Whether layer l uses the sliding layers' RoPE table (Gemma-3)."""
    return cfg.local_rope and cfg.sliding[l]


def load_weights(model_dir):
    """model.safetensors, else the shards model.safetensors.index.json names."""
    one = os.path.join(model_dir, "model.safetensors")
    idx = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(one) or not os.path.exists(idx):
        return load_safetensors(one)
    with open(idx) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    w = {}
    for sh in shards:
        w.update(load_safetensors(os.path.join(model_dir, sh)))
    return w


def load_model(model_dir):
    cfg = Config(os.path.join(model_dir, "config.json"))
    w = load_weights(model_dir)
    if cfg.hybrid:                                               # Qwen3.5 / Qwen3-Next: own names and checks
        return cfg, hybrid_load(cfg, w)
    if cfg.fused:                                                # Phi-3: split as Phi3Attention / Phi3MLP slice
        qn, kn = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
        for l in range(cfg.layers):
            p = f"model.layers.{l}."
            qkv = w.pop(p + "self_attn.qkv_proj.weight")
            w[p + "self_attn.q_proj.weight"] = qkv[:qn]
            w[p + "self_attn.k_proj.weight"] = qkv[qn:qn + kn]
            w[p + "self_attn.v_proj.weight"] = qkv[qn + kn:]
            gu = w.pop(p + "mlp.gate_up_proj.weight")
            w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"] = gu[:cfg.inter], gu[cfg.inter:]
    if cfg.moe:
        moe_check_tensors(cfg, w)
    if "lm_head.weight" not in w:
        # tied (or a checkpoint that simply omits the head): reuse the embedding (§11.1)
        w["lm_head.weight"] = w["model.embed_tokens.weight"]
    return cfg, w


def moe_check_tensors(cfg, w):
    """Splits transformers 5's fused Qwen3-MoE experts into the per-expert
    names of the published checkpoints, and checks every routed layer's
    tensors are there with the shapes the modeling files give."""
    E, H = cfg.experts, cfg.hidden
    cfg.mxfp4 = any(n.endswith("experts.gate_up_proj_blocks") for n in w)

    def need(name, shape):
        if name not in w:
            raise KeyError(f"{name} missing")
        if tuple(w[name].shape) != tuple(shape):
            raise ValueError(f"{name}: shape {list(w[name].shape)}, expected {list(shape)}")

    for l in range(cfg.layers):
        if not cfg.sparse[l]:
            continue
        p = f"model.layers.{l}.mlp."
        if cfg.moe == "qwen3_moe":
            I = cfg.moe_inter
            need(p + "gate.weight", (E, H))
            if p + "experts.gate_up_proj" in w:                  # transformers 5 (MixtralExperts layout)
                need(p + "experts.gate_up_proj", (E, 2 * I, H))
                need(p + "experts.down_proj", (E, H, I))
                gu, dn = w.pop(p + "experts.gate_up_proj"), w.pop(p + "experts.down_proj")
                for e in range(E):
                    w[p + f"experts.{e}.gate_proj.weight"] = gu[e, :I]
                    w[p + f"experts.{e}.up_proj.weight"] = gu[e, I:]
                    w[p + f"experts.{e}.down_proj.weight"] = dn[e]
            for e in range(E):
                need(p + f"experts.{e}.gate_proj.weight", (I, H))
                need(p + f"experts.{e}.up_proj.weight", (I, H))
                need(p + f"experts.{e}.down_proj.weight", (H, I))
        else:
            I = cfg.inter
            need(p + "router.weight", (E, H))
            need(p + "router.bias", (E,))
            need(p + "experts.gate_up_proj_bias", (E, 2 * I))
            need(p + "experts.down_proj_bias", (E, H))
            if p + "experts.gate_up_proj" in w:                  # unquantised GptOssExperts: x @ W
                need(p + "experts.gate_up_proj", (E, H, 2 * I))
                need(p + "experts.down_proj", (E, I, H))
            else:
                if H % 32 or I % 32:
                    raise ValueError(f"MXFP4 needs hidden {H} and intermediate {I} multiples of 32")
                need(p + "experts.gate_up_proj_blocks", (E, 2 * I, H // 32, 16))
                need(p + "experts.gate_up_proj_scales", (E, 2 * I, H // 32))
                need(p + "experts.down_proj_blocks", (E, H, I // 32, 16))
                need(p + "experts.down_proj_scales", (E, H, I // 32))
                for n in ("gate_up_proj", "down_proj"):
                    for part in ("blocks", "scales"):
                        if w[p + f"experts.{n}_{part}"].dtype != np.uint8:
                            raise ValueError(f"{p}experts.{n}_{part} is not U8")
            need(p.replace("mlp.", "self_attn.") + "sinks", (cfg.heads,))


# e2m1 (FP4) code -> value, as integrations/mxfp4.py's FP4_VALUES lists them
FP4_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                       -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=np.float32)
_DEQUANT_CACHE = {}
_DEQUANT_CACHE_LIMIT = 1 << 28                          # floats kept (1 GiB); beyond, decoded per use


def mxfp4_dequant(blocks, scales, lo_first=True):
    """convert_moe_packed_tensors, written from its definition: blocks
    uint8 [E, R, G, 16], scales uint8 [E, R, G]; byte j of a block holds
    elements 2j (low nibble) and 2j + 1 (high nibble) of the block's 32,
    each FP4_VALUES[code] * 2^(scale - 127); [E, R, G*32] transposed to
    [E, G*32, R] (float32; every value is exact)."""
    key = (id(blocks), id(scales), lo_first)
    hit = _DEQUANT_CACHE.get(key)
    if hit is not None and hit[0] is blocks:
        return hit[1]
    E, R, G, B = blocks.shape
    if scales.shape != (E, R, G):
        raise ValueError(f"MXFP4 scales {scales.shape} do not match blocks {blocks.shape}")
    lo, hi = blocks & 0x0F, blocks >> 4
    first, second = (lo, hi) if lo_first else (hi, lo)
    codes = np.stack([first, second], axis=-1).reshape(E, R, G, 2 * B)
    vals = FP4_VALUES[codes] * np.ldexp(np.float32(1.0), scales.astype(np.int32) - 127)[..., None]
    out = np.ascontiguousarray(vals.reshape(E, R, G * 2 * B).transpose(0, 2, 1))
    if sum(v[1].size for v in _DEQUANT_CACHE.values()) + out.size <= _DEQUANT_CACHE_LIMIT:
        _DEQUANT_CACHE[key] = (blocks, out)
    return out


def gpt_oss_experts(cfg, w, l):
    """Layer l's experts as GptOssExperts holds them: gate_up [E, H, 2I],
    its bias [E, 2I], down [E, I, H], its bias [E, H] (float32)."""
    p = f"model.layers.{l}.mlp.experts."
    if p + "gate_up_proj" in w:
        gu, dn = w[p + "gate_up_proj"], w[p + "down_proj"]
    else:
        gu = mxfp4_dequant(w[p + "gate_up_proj_blocks"], w[p + "gate_up_proj_scales"], cfg.nibble_lo_first)
        dn = mxfp4_dequant(w[p + "down_proj_blocks"], w[p + "down_proj_scales"], cfg.nibble_lo_first)
    return gu, w[p + "gate_up_proj_bias"], dn, w[p + "down_proj_bias"]


def softmax_with_sink(s, sink):
    """Attention probabilities [H, Tq, Tk] with gpt-oss's sinks (sink [H]):
    each row's softmax over its scores and the head's sink logit together,
    the sink's own probability then dropped, so the row sums to < 1."""
    H, Tq = s.shape[0], s.shape[1]
    comb = torch.cat([s, sink.view(H, 1, 1).expand(H, Tq, 1)], dim=-1)
    comb = comb - comb.max(dim=-1, keepdim=True).values
    return torch.softmax(comb, dim=-1)[..., :-1]


def select_topk(vals, k, low_first=True):
    """Per row of vals [T, E]: the k expert indices by value descending,
    exactly equal values in ascending index order (descending with
    low_first False, the tie ablation).  An explicit sort, not
    torch.topk, whose order among equal values is unspecified."""
    vals = np.asarray(vals)
    E = vals.shape[1]
    idx = np.arange(E) if low_first else -np.arange(E)
    out = np.empty((vals.shape[0], k), dtype=np.int64)
    for t in range(vals.shape[0]):
        order = np.lexsort((idx, -vals[t].astype(np.float64)))   # last key primary
        out[t] = order[:k]
    return out


def router_representatives(wr, br):
    """rep[e]: the first expert whose router row (and bias) is bit-identical
    to e's; such experts' logits are computed once and shared, so an exact
    tie in the weights is an exact tie in the logits."""
    seen, rep = {}, []
    for e in range(wr.shape[0]):
        key = wr[e].tobytes() + (b"" if br is None else br[e:e + 1].tobytes())
        rep.append(seen.setdefault(key, e))
    return np.array(rep)


# --------------------------------------------------------------------------
# implementation 1: torch float32, whole sequence in one causal pass

def torch_forward(cfg, w, ids, stats=None):
    """Logits [len(ids), vocab] (float32; float64 with cfg.f64) for every
    position.  stats (a dict), for the MoE families: the routing margins."""
    if cfg.hybrid:
        return hybrid_forward(cfg, w, ids, stats)
    T = len(ids)
    f32 = torch.float64 if cfg.f64 else torch.float32
    npdt = np.float64 if cfg.f64 else np.float32
    W = lambda name: torch.from_numpy(np.ascontiguousarray(w[name], dtype=npdt))
    eps = cfg.eps if cfg.f64 else float(np.float32(cfg.eps))
    H, KV, D = cfg.heads, cfg.kv_heads, cfg.head_dim
    group = H // KV

    def N(name):                                                 # a norm's gain
        g = W(name + ".weight")
        return 1.0 + g if cfg.gemma_norm else g                  # Gemma3RMSNorm: (1 + weight) in float32

    def rmsnorm(x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g

    # RoPE tables, rotate-half (§7): inv_freq[i] = theta^(-2i/D); Gemma-3's
    # sliding layers have their own (Gemma3TextModel.rotary_emb_local)
    pos = torch.arange(T, dtype=f32)
    tables = {}
    for local in sorted({local_layer(cfg, l) for l in range(cfg.layers)}):
        inv_freq = torch.from_numpy(inv_freq_f64(cfg, local).astype(npdt))
        ang = pos[:, None] * inv_freq[None, :]                   # [T, D/2]
        cos, sin = ang.cos(), ang.sin()
        if cfg.rope_scale != 1.0 and not local:                  # YaRN: cos and sin times the attention factor
            cos, sin = cos * cfg.rope_scale, sin * cfg.rope_scale
        tables[local] = (torch.cat([cos, cos], dim=-1),          # [T, D]
                         torch.cat([sin, sin], dim=-1))

    def rope(x, l):                                              # [h, T, D]
        cos, sin = tables[local_layer(cfg, l)]
        x1, x2 = x[..., :D // 2], x[..., D // 2:]
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    def linear(x, name):
        y = x @ W(name + ".weight").T
        if name + ".bias" in w:
            y = y + W(name + ".bias")
        return y

    causal = torch.ones(T, T, dtype=torch.bool).tril()
    qi, ki = torch.arange(T)[:, None], torch.arange(T)[None, :]
    windowed = causal & (ki > qi - cfg.window) if cfg.window else causal   # sliding_window_overlay: kv > q - W

    def attention(h, l):
        """The attention block's output (o_proj) for layer l."""
        p = f"model.layers.{l}.self_attn."
        q = linear(h, p + "q_proj")
        k = linear(h, p + "k_proj")
        if cfg.qk_norm and cfg.qk_whole:                         # OLMo-2: the whole projection
            q = rmsnorm(q, N(p + "q_norm"))
            k = rmsnorm(k, N(p + "k_norm"))
        q, k = q.view(T, H, D), k.view(T, KV, D)
        if cfg.qk_norm and not cfg.qk_whole and cfg.olmo2:       # ablation: per head, each head's weight slice
            q = rmsnorm(q, W(p + "q_norm.weight").view(H, D))
            k = rmsnorm(k, W(p + "k_norm.weight").view(KV, D))
        elif cfg.qk_norm and not cfg.qk_whole:                   # Qwen3 / Gemma-3: per head, before RoPE
            q = rmsnorm(q, N(p + "q_norm"))
            k = rmsnorm(k, N(p + "k_norm"))
        q, k = q.transpose(0, 1), k.transpose(0, 1)
        v = linear(h, p + "v_proj").view(T, KV, D).transpose(0, 1)
        if cfg.use_rope[l]:                                      # SmolLM3: NoPE layers skip it
            q, k = rope(q, l), rope(k, l)
        k = k.repeat_interleave(group, dim=0)                    # head h -> kv h//group
        v = v.repeat_interleave(group, dim=0)
        s = q @ k.transpose(1, 2)
        s = s * cfg.qscale if cfg.qscale else s / math.sqrt(D)   # Gemma-3: query_pre_attn_scalar ** -0.5
        s = s.masked_fill(~(windowed if cfg.sliding[l] else causal), float("-inf"))
        if cfg.sinks:                                            # gpt-oss: one more logit per row, no value
            a = softmax_with_sink(s, W(p + "sinks")) @ v
        else:
            a = torch.softmax(s, dim=-1) @ v                     # [H, T, D]
        return linear(a.transpose(0, 1).reshape(T, H * D), p + "o_proj")

    def route(h, l):
        """The router of layer l: (experts [T, k] numpy, weights [T, k])."""
        p = f"model.layers.{l}.mlp." + ("router" if cfg.moe == "gpt_oss" else "gate")
        wr = w[p + ".weight"]
        br = w.get(p + ".bias")
        rep = router_representatives(wr, br)
        uniq = sorted(set(rep.tolist()))
        col = torch.from_numpy(np.searchsorted(np.array(uniq), rep))
        lg = h @ W(p + ".weight")[uniq].T
        if br is not None:
            lg = lg + W(p + ".bias")[uniq]
        logits = lg[:, col]                                      # [T, E]; equal rows, equal logits
        k = cfg.top_k
        if cfg.route == "topk_softmax":                          # gpt-oss: top-k logits, softmax over k
            sel = select_topk(logits.numpy(), k, cfg.tie_low)
            wts = torch.softmax(torch.gather(logits, 1, torch.from_numpy(sel)), dim=-1)
            space = logits
        else:                                                    # qwen3-moe: softmax over E, top-k
            probs = torch.softmax(logits, dim=-1)
            first = (logits[:, :, None] == logits[:, None, :]).to(torch.int64).argmax(dim=-1)
            probs = torch.gather(probs, 1, first)                # equal logits, equal probabilities
            sel = select_topk(probs.numpy(), k, cfg.tie_low)
            wts = torch.gather(probs, 1, torch.from_numpy(sel))
            if cfg.norm_topk:
                wts = wts / wts.sum(dim=-1, keepdim=True)
            space = probs
        if stats is not None:
            stats.setdefault("selected", {})[l] = sel
            stats.setdefault("route_values", {})[l] = space.numpy().copy()
        if stats is not None and k < cfg.experts:                # the k-th vs the (k+1)-th value
            sv = np.sort(space.numpy().astype(np.float64), axis=1)[:, ::-1]
            gap = sv[:, k - 1] - sv[:, k]
            stats.setdefault("ties", 0)
            stats["ties"] += int((gap == 0).sum())
            nz = np.where(gap > 0, gap / np.maximum(np.abs(sv[:, 0]), 1e-30), np.inf)
            t = int(np.argmin(nz))
            if nz[t] < stats.get("gap", (np.inf,))[0]:
                stats["gap"] = (float(nz[t]), l, t)
        return sel, wts

    def experts(h, l):
        """Layer l's routed block: sum over the k chosen experts of
        weight * expert(h)."""
        sel, wts = route(h, l)
        out = torch.zeros_like(h)
        if cfg.moe == "gpt_oss":
            gu, gub, dn, dnb = gpt_oss_experts(cfg, w, l)
            I, lim, alpha = cfg.inter, cfg.swiglu_limit, cfg.swiglu_alpha
        for e in sorted(set(sel.flatten().tolist())):
            rows, slots = np.nonzero(sel == e)
            x = h[torch.from_numpy(rows)]
            wt = wts[torch.from_numpy(rows), torch.from_numpy(slots)][:, None]
            if cfg.moe == "gpt_oss":
                z = x @ torch.from_numpy(gu[e].astype(npdt)) + torch.from_numpy(gub[e].astype(npdt))
                if cfg.interleave:
                    gate, up = z[:, 0::2], z[:, 1::2]
                else:                                            # ablation: halves
                    gate, up = z[:, :I], z[:, I:]
                if cfg.swiglu_clamp:
                    gate = gate.clamp(max=lim)
                    up = up.clamp(min=-lim, max=lim)
                glu = gate * torch.sigmoid(gate * alpha)
                y = ((up + 1) * glu) @ torch.from_numpy(dn[e].astype(npdt))
                b = torch.from_numpy(dnb[e].astype(npdt))
                y = (y + b) * wt if cfg.bias_weighted else y * wt + b
            else:
                q = f"model.layers.{l}.mlp.experts.{e}."
                y = torch.nn.functional.silu(x @ W(q + "gate_proj.weight").T) * (x @ W(q + "up_proj.weight").T)
                y = (y @ W(q + "down_proj.weight").T) * wt
            out.index_add_(0, torch.from_numpy(rows), y)
        return out

    def mlp(h, l):
        if cfg.sparse[l]:
            return experts(h, l)
        p = f"model.layers.{l}.mlp."
        g = linear(h, p + "gate_proj")
        if cfg.act == "gelu_tanh":                               # gelu_pytorch_tanh (Gemma3MLP)
            g = torch.nn.functional.gelu(g, approximate="tanh")
        elif cfg.act == "gelu_erf":                              # ablation: the exact GELU
            g = torch.nn.functional.gelu(g)
        else:
            g = torch.nn.functional.silu(g)
        return linear(g * linear(h, p + "up_proj"), p + "down_proj")

    with torch.no_grad():
        x = W("model.embed_tokens.weight")[torch.tensor(ids, dtype=torch.long)]
        if cfg.embed_scale:                                      # Gemma3TextScaledWordEmbedding: a float32 buffer
            x = x * torch.tensor(cfg.hidden ** 0.5, dtype=f32)
        for l in range(cfg.layers):
            p = f"model.layers.{l}."
            if cfg.sandwich:                                     # Gemma3DecoderLayer
                o = attention(rmsnorm(x, N(p + "input_layernorm")), l)
                x = x + rmsnorm(o, N(p + "post_attention_layernorm"))
                m = mlp(rmsnorm(x, N(p + "pre_feedforward_layernorm")), l)
                x = x + rmsnorm(m, N(p + "post_feedforward_layernorm"))
                continue
            h = x if cfg.olmo2 else rmsnorm(x, N(p + "input_layernorm"))
            o = attention(h, l)
            if cfg.olmo2:                                        # OLMo-2: norms after the blocks
                if cfg.post_norm:
                    o = rmsnorm(o, N(p + "post_attention_layernorm"))
                x = x + o
                h = x
            else:
                x = x + o
                h = rmsnorm(x, N(p + "post_attention_layernorm"))
            m = mlp(h, l)
            if cfg.olmo2 and cfg.post_norm:
                m = rmsnorm(m, N(p + "post_feedforward_layernorm"))
            x = x + m
        x = rmsnorm(x, N("model.norm"))
        return (x @ W("lm_head.weight").T).numpy()


# --------------------------------------------------------------------------
# implementation 2: numpy float64, one token at a time with a KV cache
# (written independently of the torch path; used only to validate it)

def e2m1_value(code):
    """An FP4 (e2m1) code's value from its bits (OCP MX v1.0: sign, two
    exponent bits with bias 1, one mantissa bit; exponent 0 is subnormal,
    0.5 * mantissa).  numpy_forward's decoder, independent of FP4_VALUES."""
    sign = -1.0 if code & 8 else 1.0
    e, m = (code >> 1) & 3, code & 1
    return sign * (0.5 * m if e == 0 else 2.0 ** (e - 1) * (1.0 + 0.5 * m))


def mxfp4_expert_rows(blocks, scales, e, lo_first=True):
    """Expert e's matrix in nn.Linear orientation [R outputs, G*32 inputs],
    float64, decoded byte by byte (numpy_forward's route: no transpose)."""
    table = np.array([e2m1_value(c) for c in range(16)])
    b = blocks[e].astype(np.int64)                       # [R, G, 16]
    R, G, B = b.shape
    out = np.empty((R, G, 2 * B))
    a, c = (b & 15, b >> 4) if lo_first else (b >> 4, b & 15)
    out[:, :, 0::2] = table[a]
    out[:, :, 1::2] = table[c]
    out *= np.power(2.0, scales[e].astype(np.float64) - 127.0)[:, :, None]
    return out.reshape(R, G * 2 * B)


def numpy_forward(cfg, w, ids):
    D, H, KV = cfg.head_dim, cfg.heads, cfg.kv_heads
    g = {k: v.astype(np.float64) for k, v in w.items() if v.dtype != np.uint8}
    half = D // 2
    inv_freq = {l: inv_freq_f64(cfg, local_layer(cfg, l)) for l in range(cfg.layers)}
    erf = np.vectorize(math.erf)

    def gain(name):                                              # Gemma: the stored w is applied as 1 + w
        return g[name + ".weight"] + 1.0 if cfg.gemma_norm else g[name + ".weight"]

    def norm(v, gn):
        return v / math.sqrt(float(np.dot(v, v)) / v.shape[0] + cfg.eps) * gn

    def lin(name, v):
        y = g[name + ".weight"].dot(v)
        b = g.get(name + ".bias")
        return y if b is None else y + b

    def act(v):
        if cfg.act == "gelu_tanh":                               # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
            return 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))
        if cfg.act == "gelu_erf":
            return 0.5 * v * (1.0 + erf(v / math.sqrt(2.0)))
        return v / (1.0 + np.exp(-v))

    def qknorm(vec, nh, gn):
        if gn is None:
            return vec
        return np.concatenate([norm(vec[hh * D:(hh + 1) * D], gn) for hh in range(nh)])

    def rot(vec, nh, pos, l):
        if not cfg.use_rope[l]:
            return vec
        out = np.empty_like(vec)
        c, s = np.cos(pos * inv_freq[l]), np.sin(pos * inv_freq[l])
        if not local_layer(cfg, l):                              # YaRN's attention factor (1 otherwise)
            c, s = c * cfg.rope_scale, s * cfg.rope_scale
        for hh in range(nh):
            a = vec[hh * D:hh * D + half]
            b = vec[hh * D + half:(hh + 1) * D]
            out[hh * D:hh * D + half] = a * c - b * s
            out[hh * D + half:(hh + 1) * D] = b * c + a * s
        return out

    kcache = [[] for _ in range(cfg.layers)]
    vcache = [[] for _ in range(cfg.layers)]

    def attend(l, h, pos):
        """Appends this position's k, v to layer l's cache; returns o_proj."""
        p = f"model.layers.{l}.self_attn."
        qn = gain(p + "q_norm") if cfg.qk_norm else None
        kn = gain(p + "k_norm") if cfg.qk_norm else None
        if cfg.olmo2:                                            # whole projection, then no per-head norm
            q = rot(norm(lin(p + "q_proj", h), qn), H, pos, l)
            kcache[l].append(rot(norm(lin(p + "k_proj", h), kn), KV, pos, l))
        else:
            q = rot(qknorm(lin(p + "q_proj", h), H, qn), H, pos, l)
            kcache[l].append(rot(qknorm(lin(p + "k_proj", h), KV, kn), KV, pos, l))
        vcache[l].append(lin(p + "v_proj", h))
        win = cfg.window if cfg.sliding[l] else None
        lo = max(0, pos + 1 - win) if win else 0                 # the window's first key
        K = np.stack(kcache[l][lo:])                             # [pos+1-lo, KV*D]
        V = np.stack(vcache[l][lo:])
        scale = cfg.qscale if cfg.qscale else 1.0 / math.sqrt(D)
        att = np.empty(H * D)
        for hh in range(H):
            kv = hh // (H // KV)
            qs = q[hh * D:(hh + 1) * D]
            sc = K[:, kv * D:(kv + 1) * D].dot(qs) * scale
            if cfg.sinks:                                        # the sink: in the denominator only
                sk = g[p + "sinks"][hh]
                m = max(sc.max(), sk)
                e = np.exp(sc - m)
                att[hh * D:(hh + 1) * D] = (e / (e.sum() + math.exp(sk - m))).dot(V[:, kv * D:(kv + 1) * D])
                continue
            e = np.exp(sc - sc.max())
            att[hh * D:(hh + 1) * D] = (e / e.sum()).dot(V[:, kv * D:(kv + 1) * D])
        return lin(p + "o_proj", att)

    def expert_out(l, e, h):
        """One expert on one token (float64)."""
        p = f"model.layers.{l}.mlp.experts."
        if cfg.moe == "qwen3_moe":
            q = p + f"{e}."
            gt, up = g[q + "gate_proj.weight"].dot(h), g[q + "up_proj.weight"].dot(h)
            return g[q + "down_proj.weight"].dot(gt / (1.0 + np.exp(-gt)) * up)
        if p + "gate_up_proj" in g:                              # [E, H, 2I]: x @ W
            z = h.dot(g[p + "gate_up_proj"][e])
            dn = g[p + "down_proj"][e].T                         # [H, I]
        else:
            z = mxfp4_expert_rows(w[p + "gate_up_proj_blocks"], w[p + "gate_up_proj_scales"], e,
                                  cfg.nibble_lo_first).dot(h)
            dn = mxfp4_expert_rows(w[p + "down_proj_blocks"], w[p + "down_proj_scales"], e,
                                   cfg.nibble_lo_first)
        z = z + g[p + "gate_up_proj_bias"][e]
        pairs = z.reshape(-1, 2) if cfg.interleave else z.reshape(2, -1).T   # [I, (gate, up)]
        gt, up = pairs[:, 0], pairs[:, 1]
        if cfg.swiglu_clamp:
            gt = np.minimum(gt, cfg.swiglu_limit)
            up = np.clip(up, -cfg.swiglu_limit, cfg.swiglu_limit)
        hid = (up + 1.0) * (gt / (1.0 + np.exp(-cfg.swiglu_alpha * gt)))
        return dn.dot(hid), g[p + "down_proj_bias"][e]

    def routed(l, h):
        """The routed block on one token: exact dot products (fsum), an
        explicit ordered selection, the weighted sum."""
        p = f"model.layers.{l}.mlp." + ("router" if cfg.moe == "gpt_oss" else "gate")
        wr, br = g[p + ".weight"], g.get(p + ".bias")
        logit = [math.fsum(wr[e] * h) + (0.0 if br is None else br[e]) for e in range(cfg.experts)]
        sign = 1 if cfg.tie_low else -1
        if cfg.route == "topk_softmax":
            pick = sorted(range(cfg.experts), key=lambda e: (-logit[e], sign * e))[:cfg.top_k]
            m = max(logit[e] for e in pick)
            ex = [math.exp(logit[e] - m) for e in pick]
            wts = [x / math.fsum(ex) for x in ex]
        else:
            m = max(logit)
            ex = [math.exp(v - m) for v in logit]
            tot = math.fsum(ex)
            prob = [x / tot for x in ex]
            pick = sorted(range(cfg.experts), key=lambda e: (-prob[e], sign * e))[:cfg.top_k]
            wts = [prob[e] for e in pick]
            if cfg.norm_topk:
                s_ = math.fsum(wts)
                wts = [x / s_ for x in wts]
        out = np.zeros_like(h)
        for e, wt in zip(pick, wts):
            if cfg.moe == "qwen3_moe":
                out += wt * expert_out(l, e, h)
            else:
                y, b = expert_out(l, e, h)
                out += (y + b) * wt if cfg.bias_weighted else y * wt + b
        return out

    def ffn(l, h):
        if cfg.sparse[l]:
            return routed(l, h)
        p = f"model.layers.{l}.mlp."
        return lin(p + "down_proj", act(lin(p + "gate_proj", h)) * lin(p + "up_proj", h))

    logits = []
    for pos, tok in enumerate(ids):
        x = g["model.embed_tokens.weight"][tok].copy()
        if cfg.embed_scale:                                      # sqrt(hidden), rounded to float32 as the buffer is
            x = x * float(np.float32(math.sqrt(cfg.hidden)))
        for l in range(cfg.layers):
            p = f"model.layers.{l}."
            if cfg.sandwich:                                     # Gemma-3: pre and post norms on both blocks
                x = x + norm(attend(l, norm(x, gain(p + "input_layernorm")), pos),
                             gain(p + "post_attention_layernorm"))
                x = x + norm(ffn(l, norm(x, gain(p + "pre_feedforward_layernorm"))),
                             gain(p + "post_feedforward_layernorm"))
                continue
            if cfg.olmo2:
                x = x + norm(attend(l, x, pos), g[p + "post_attention_layernorm.weight"])
                x = x + norm(ffn(l, x), g[p + "post_feedforward_layernorm.weight"])
                continue
            x = x + attend(l, norm(x, g[p + "input_layernorm.weight"]), pos)
            x = x + ffn(l, norm(x, g[p + "post_attention_layernorm.weight"]))
        logits.append(g["lm_head.weight"].dot(norm(x, gain("model.norm"))))
    return np.stack(logits)


# --------------------------------------------------------------------------
# the hybrid families: Qwen3.5 (dense and MoE) and Qwen3-Next
#
# Written from transformers' modeling_qwen3_5.py, modeling_qwen3_5_moe.py /
# modular_qwen3_5_moe.py, modeling_qwen3_next.py and their configuration
# files (tests/oracle/README.md lists the commits), and from the gated delta
# rule's definition (S_t = a_t S_{t-1} + b_t (v_t - a_t S_{t-1}^T k_t) k_t^T,
# o_t = S_t^T q_t, a_t = exp(g_t)).  Facts, not code, were taken over.

HYBRID_MODEL_TYPES = ("qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_next")
HYBRID_FAMILY = {"qwen3_5": "qwen3_5", "qwen3_5_text": "qwen3_5", "qwen3_5_moe": "qwen3_5_moe",
                 "qwen3_5_moe_text": "qwen3_5_moe", "qwen3_next": "qwen3_next"}
LEGACY_LAYER_TYPES = {"mamba": "linear_attention", "attention": "full_attention"}   # remap_legacy_layer_types
L2NORM_EPS = 1e-6                                        # l2norm(x) = x * rsqrt(sum x^2 + 1e-6), fixed
GDN_CHUNK = 64                                           # torch_chunk_gated_delta_rule's chunk_size


def hybrid_config(cfg, c, path):
    """Qwen3_5TextConfig / Qwen3_5MoeTextConfig / Qwen3NextConfig, as those
    classes read a config.json (the multimodal wrapper's text_config for
    qwen3_5 / qwen3_5_moe; vision_config is not read)."""
    top = c
    fam = HYBRID_FAMILY[c["model_type"]]
    if isinstance(c.get("text_config"), dict):
        c = c["text_config"]

    def get(key, default=None):
        v = c.get(key)
        return default if v is None else v

    cfg.hybrid = fam
    cfg.hidden = int(c["hidden_size"])
    cfg.layers = int(c["num_hidden_layers"])
    cfg.heads = int(c["num_attention_heads"])
    cfg.kv_heads = int(get("num_key_value_heads", cfg.heads))
    cfg.head_dim = int(get("head_dim", 256))                 # the three classes' default
    cfg.vocab = int(c["vocab_size"])
    cfg.eps = float(get("rms_norm_eps", 1e-6))
    if get("hidden_act", "silu") != "silu":
        raise ValueError(f"{path}: hidden_act {c.get('hidden_act')} is not silu")
    if c.get("attn_output_gate") is False:
        raise ValueError(f"{path}: attn_output_gate false: transformers' Qwen3.5 / Qwen3-Next attention "
                         "always has the gate (q_proj of 2 * heads * head_dim), refused")
    cfg.attn_bias = bool(get("attention_bias", False))
    # tie_word_embeddings: the text config's and the wrapper's must agree
    flags = {bool(d["tie_word_embeddings"]) for d in (c, top) if d.get("tie_word_embeddings") is not None}
    if len(flags) > 1:
        raise ValueError(f"{path}: tie_word_embeddings differs between text_config and the wrapper")
    cfg.tied = flags.pop() if flags else False
    # layer schedule
    types = c.get("layer_types")
    if types is None:
        every = int(get("full_attention_interval", 4))
        types = ["linear_attention" if (i + 1) % every else "full_attention" for i in range(cfg.layers)]
    types = [LEGACY_LAYER_TYPES.get(t, t) for t in types]
    if len(types) != cfg.layers or not set(types) <= {"linear_attention", "full_attention"}:
        raise ValueError(f"{path}: layer_types {types} is not {cfg.layers} linear/full_attention")
    cfg.layer_types = types
    # Gated DeltaNet sizes
    cfg.lin_k_heads = int(get("linear_num_key_heads", 16))
    cfg.lin_v_heads = int(get("linear_num_value_heads", 32))
    cfg.lin_k_dim = int(get("linear_key_head_dim", 128))
    cfg.lin_v_dim = int(get("linear_value_head_dim", 128))
    cfg.conv_kernel = int(get("linear_conv_kernel_dim", 4))
    if cfg.lin_v_heads % cfg.lin_k_heads or cfg.conv_kernel < 1:
        raise ValueError(f"{path}: linear_num_value_heads must be a multiple of linear_num_key_heads")
    # RoPE: rope_parameters (transformers 5) or the top-level keys (4.5x)
    rp = c.get("rope_parameters") or c.get("rope_scaling") or {}
    if rp.get("rope_type", rp.get("type", "default")) != "default":
        raise ValueError(f"{path}: rope_type {rp.get('rope_type', rp.get('type'))} is not supported by the oracle")
    cfg.theta = float(rp.get("rope_theta", get("rope_theta", 10000.0)))
    prf = [float(d["partial_rotary_factor"]) for d in (rp, c) if d.get("partial_rotary_factor") is not None]
    if len(set(prf)) > 1:
        raise ValueError(f"{path}: partial_rotary_factor differs between rope_parameters and the config")
    cfg.partial_rotary = prf[0] if prf else 0.25          # kwargs.setdefault("partial_rotary_factor", 0.25)
    cfg.rotary_dim = int(cfg.head_dim * cfg.partial_rotary)
    if cfg.rotary_dim % 2 or not 0 < cfg.rotary_dim <= cfg.head_dim:
        raise ValueError(f"{path}: rotary dim {cfg.rotary_dim} (head_dim x partial_rotary_factor) not even in 2..head_dim")
    # Qwen3_5TextRotaryEmbedding: three position streams, sections [11, 11, 10] by default
    cfg.mrope = [int(x) for x in rp.get("mrope_section", [11, 11, 10])] if fam != "qwen3_next" else None
    # the MLP / MoE block of each layer
    cfg.moe = fam if fam in ("qwen3_5_moe", "qwen3_next") and int(get("num_experts", 0)) > 0 else None
    if fam == "qwen3_5_moe" and not cfg.moe:
        raise ValueError(f"{path}: qwen3_5_moe with num_experts 0")
    cfg.inter = int(get("intermediate_size", 0)) if fam != "qwen3_5_moe" else 0
    if cfg.moe:
        cfg.experts = int(c["num_experts"])
        cfg.top_k = int(get("num_experts_per_tok", 8 if fam == "qwen3_5_moe" else 10))
        cfg.moe_inter = int(get("moe_intermediate_size", 512))
        cfg.shared_inter = int(get("shared_expert_intermediate_size", 512))
        if fam == "qwen3_5_moe":                             # Qwen3_5MoeTopKRouter: always renormalises,
            cfg.norm_topk = True                             # every layer routed (the config deletes the knobs)
            cfg.sparse = [True] * cfg.layers
        else:
            cfg.norm_topk = bool(get("norm_topk_prob", True))
            step = int(get("decoder_sparse_step", 1))
            only = [int(x) for x in get("mlp_only_layers", [])]
            cfg.sparse = [(l not in only) and (l + 1) % step == 0 for l in range(cfg.layers)]
        cfg.route = "softmax_topk"
    else:
        cfg.sparse = [False] * cfg.layers
    if any(not s for s in cfg.sparse) and cfg.inter <= 0:
        raise ValueError(f"{path}: a dense layer needs intermediate_size")
    # what the other families' code reads, as no-ops
    cfg.gemma3 = cfg.olmo2 = cfg.post_norm = cfg.qk_whole = cfg.fused = False
    cfg.embed_scale = cfg.gemma_norm = cfg.sandwich = cfg.local_rope = cfg.sinks = False
    cfg.window, cfg.llama3, cfg.linear, cfg.yarn, cfg.qscale, cfg.local_theta = None, None, None, None, None, None
    cfg.sliding = [False] * cfg.layers
    cfg.use_rope = [True] * cfg.layers
    cfg.rope_scale = 1.0
    cfg.act = "silu"
    cfg.qk_norm = True                                       # q_norm / k_norm, (1 + w), per head
    cfg.f64 = False
    if cfg.moe:
        cfg._moe_common()
    # the hybrid knobs (the ablations below flip them)
    cfg.hy = dict(conv=True, conv_silu=True, l2norm=True, q_scale=True, decay=True, dt_bias=True, beta=True,
                  z_gate=True, gated_norm_1p=False, kv_interleave=True, qkvz_grouped=True, form="chunked",
                  out_gate=True, gate_per_head=True, partial=True, norm_1p=True, shared=True, shared_gate=True)
    if cfg.heads % cfg.kv_heads:
        raise ValueError(f"{path}: heads/kv_heads inconsistent")


def hybrid_load(cfg, w):
    """The published tensor names (Qwen3.5: model.language_model.*, Qwen3-Next:
    model.*) read into model.* names; mtp.* and the vision tower dropped
    (_keys_to_ignore_on_load_unexpected); transformers 5's fused experts
    split per expert; every tensor's shape checked."""
    out = {}
    for n, a in w.items():
        if n.startswith(("mtp.", "model.visual.", "visual.", "model.mtp.")):
            continue
        if n.startswith("model.language_model."):
            n = "model." + n[len("model.language_model."):]
        out[n] = a
    w = out
    H, L = cfg.hidden, cfg.layers
    Hk, Hv, dk, dv, K = cfg.lin_k_heads, cfg.lin_v_heads, cfg.lin_k_dim, cfg.lin_v_dim, cfg.conv_kernel
    kd, vd = Hk * dk, Hv * dv
    NH, KV, D = cfg.heads, cfg.kv_heads, cfg.head_dim

    def need(name, shape):
        if name not in w:
            raise KeyError(f"{name} missing")
        if tuple(w[name].shape) != tuple(shape):
            raise ValueError(f"{name}: shape {list(w[name].shape)}, expected {list(shape)}")

    need("model.embed_tokens.weight", (cfg.vocab, H))
    need("model.norm.weight", (H,))
    for l in range(L):
        p = f"model.layers.{l}."
        need(p + "input_layernorm.weight", (H,))
        need(p + "post_attention_layernorm.weight", (H,))
        if cfg.layer_types[l] == "linear_attention":
            a = p + "linear_attn."
            if cfg.hybrid == "qwen3_next":
                need(a + "in_proj_qkvz.weight", (2 * kd + 2 * vd, H))
                need(a + "in_proj_ba.weight", (2 * Hv, H))
            else:
                need(a + "in_proj_qkv.weight", (2 * kd + vd, H))
                need(a + "in_proj_z.weight", (vd, H))
                need(a + "in_proj_b.weight", (Hv, H))
                need(a + "in_proj_a.weight", (Hv, H))
            need(a + "conv1d.weight", (2 * kd + vd, 1, K))
            if a + "conv1d.bias" in w:
                raise ValueError(f"{a}conv1d.bias: the modeling files' conv1d has no bias")
            need(a + "A_log", (Hv,))
            need(a + "dt_bias", (Hv,))
            need(a + "norm.weight", (dv,))
            need(a + "out_proj.weight", (H, vd))
        else:
            s = p + "self_attn."
            for n_, shape in (("q_proj", (2 * NH * D, H)), ("k_proj", (KV * D, H)), ("v_proj", (KV * D, H)),
                              ("o_proj", (H, NH * D))):
                need(s + n_ + ".weight", shape)
                if cfg.attn_bias:
                    need(s + n_ + ".bias", (shape[0],))
            need(s + "q_norm.weight", (D,))
            need(s + "k_norm.weight", (D,))
        m = p + "mlp."
        if not cfg.sparse[l]:
            need(m + "gate_proj.weight", (cfg.inter, H))
            need(m + "up_proj.weight", (cfg.inter, H))
            need(m + "down_proj.weight", (H, cfg.inter))
            continue
        E, I, SI = cfg.experts, cfg.moe_inter, cfg.shared_inter
        need(m + "gate.weight", (E, H))
        if m + "experts.gate_up_proj" in w:                      # Qwen3NextExperts / Qwen3_5MoeExperts
            need(m + "experts.gate_up_proj", (E, 2 * I, H))      # gate rows first (chunk(2) of the output)
            need(m + "experts.down_proj", (E, H, I))
            gu, dn = w.pop(m + "experts.gate_up_proj"), w.pop(m + "experts.down_proj")
            for e in range(E):
                w[m + f"experts.{e}.gate_proj.weight"] = gu[e, :I]
                w[m + f"experts.{e}.up_proj.weight"] = gu[e, I:]
                w[m + f"experts.{e}.down_proj.weight"] = dn[e]
        for e in range(E):
            need(m + f"experts.{e}.gate_proj.weight", (I, H))
            need(m + f"experts.{e}.up_proj.weight", (I, H))
            need(m + f"experts.{e}.down_proj.weight", (H, I))
        need(m + "shared_expert.gate_proj.weight", (SI, H))
        need(m + "shared_expert.up_proj.weight", (SI, H))
        need(m + "shared_expert.down_proj.weight", (H, SI))
        need(m + "shared_expert_gate.weight", (1, H))
    if cfg.tied or "lm_head.weight" not in w:                    # tied: lm_head is the embedding
        w["lm_head.weight"] = w["model.embed_tokens.weight"]
    need("lm_head.weight", (cfg.vocab, H))
    return w


def hybrid_decode(cfg, w, ids, f64=None):
    """The logits of ids fed one token at a time with the carried state
    (conv windows, delta-rule states, KV cache): transformers' decode route
    (causal_conv1d_update, the recurrent rule)."""
    c = copy.copy(cfg)
    if f64 is not None:
        c.f64 = f64
    st = {}
    return np.concatenate([hybrid_forward(c, w, [t], state=st) for t in ids])


HYBRID_ABLATIONS = ("no_conv", "no_conv_silu", "no_l2norm", "no_q_scale", "no_decay", "no_dt_bias", "no_beta",
                    "no_z_gate", "gated_norm_1p", "kv_head_tile", "qkvz_flat", "chunked_vs_recurrent",
                    "no_output_gate", "gate_halves", "full_rotary", "norm_plain_w", "no_shared_expert",
                    "no_shared_gate")


def ablate_hybrid(cfg, f):
    """The hybrid families' negative controls (and one positive control:
    chunked_vs_recurrent computes the delta rule token by token instead of
    in chunks, the same function); each raises where the config makes it a
    no-op."""
    def need(ok, why):
        if not ok:
            raise ValueError(f"--ablate {f}: {why}")
    need(cfg.hybrid, "the config is not qwen3_5, qwen3_5_moe or qwen3_next")
    lin = "linear_attention" in cfg.layer_types
    full = "full_attention" in cfg.layer_types
    h = cfg.hy
    if f in ("no_conv", "no_conv_silu", "no_l2norm", "no_q_scale", "no_decay", "no_dt_bias", "no_beta",
             "no_z_gate", "gated_norm_1p", "chunked_vs_recurrent", "kv_head_tile", "qkvz_flat"):
        need(lin, "the config has no linear_attention layer")
    if f in ("no_output_gate", "gate_halves", "full_rotary"):
        need(full, "the config has no full_attention layer")
    key = {"no_conv": "conv", "no_conv_silu": "conv_silu", "no_l2norm": "l2norm", "no_q_scale": "q_scale",
           "no_decay": "decay", "no_dt_bias": "dt_bias", "no_beta": "beta", "no_z_gate": "z_gate",
           "no_output_gate": "out_gate", "norm_plain_w": "norm_1p", "no_shared_expert": "shared",
           "no_shared_gate": "shared_gate"}
    if f in key:
        if f in ("no_shared_expert", "no_shared_gate"):
            need(any(cfg.sparse), "the config has no routed layer")
        h[key[f]] = False
    elif f == "gated_norm_1p":
        h["gated_norm_1p"] = True                              # the gated norm's weight as 1 + w
    elif f == "kv_head_tile":
        need(1 < cfg.lin_k_heads < cfg.lin_v_heads, "repeat and repeat_interleave agree (one key head, or Hk == Hv)")
        h["kv_interleave"] = False                             # v-head j reads k-head j % Hk
    elif f == "qkvz_flat":
        need(cfg.hybrid == "qwen3_next", "only qwen3_next has the fused in_proj_qkvz / in_proj_ba")
        need(cfg.lin_k_heads > 1, "with one key head the grouped and flat layouts agree")
        h["qkvz_grouped"] = False
    elif f == "chunked_vs_recurrent":
        h["form"] = "recurrent"
    elif f == "gate_halves":
        need(cfg.heads > 1, "with one head the two layouts agree")
        h["gate_per_head"] = False                             # q_proj = [all q | all gates]
    elif f == "full_rotary":
        need(cfg.rotary_dim < cfg.head_dim, "partial_rotary_factor is 1")
        h["partial"] = False
    else:
        raise ValueError(f"--ablate {f}: unknown feature")


def l2norm_last(x):
    """l2norm as transformers' modeling files define it: x * rsqrt(sum x^2 + 1e-6)."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + L2NORM_EPS)


def gated_delta_recurrent(q, k, v, g, beta, state=None):
    """The gated delta rule one token at a time (the decode form).  q, k
    [T, Hv, dk] (already normalised and scaled), v [T, Hv, dv], g, beta
    [T, Hv], state [Hv, dk, dv] (zeros if None).  Per token: S *= exp(g);
    u = beta (v - S^T k); S += k u^T; o = S^T q.  Returns (o [T, Hv, dv],
    the final state)."""
    T, Hv, dk = k.shape
    dv = v.shape[-1]
    S = torch.zeros(Hv, dk, dv, dtype=v.dtype) if state is None else state.clone()
    out = torch.empty(T, Hv, dv, dtype=v.dtype)
    for t in range(T):
        S = S * torch.exp(g[t])[:, None, None]
        u = (v[t] - torch.einsum("hkv,hk->hv", S, k[t])) * beta[t][:, None]
        S = S + k[t][:, :, None] * u[:, None, :]
        out[t] = torch.einsum("hkv,hk->hv", S, q[t])
    return out, S


def gated_delta_chunked(q, k, v, g, beta, state=None, chunk=GDN_CHUNK):
    """The same function in chunks (the prefill form).  Within a chunk, with
    G_t the cumulative sum of g from the chunk's start and S0 the state
    before it, the updates u_t solve the unit lower triangular system
    u_t + sum_{s<t} beta_t e^{G_t - G_s} (k_t.k_s) u_s = beta_t (v_t - e^{G_t} S0^T k_t);
    then o_t = e^{G_t} S0^T q_t + sum_{s<=t} e^{G_t - G_s} (q_t.k_s) u_s and
    the state after the chunk is e^{G_n} S0 + sum_s e^{G_n - G_s} k_s u_s^T."""
    T, Hv, dk = k.shape
    dv = v.shape[-1]
    S = torch.zeros(Hv, dk, dv, dtype=v.dtype) if state is None else state.clone()
    out = torch.empty(T, Hv, dv, dtype=v.dtype)
    for c0 in range(0, T, chunk):
        c1 = min(T, c0 + chunk)
        n = c1 - c0
        qc, kc, vc = (x[c0:c1].transpose(0, 1) for x in (q, k, v))      # [Hv, n, d]
        bc = beta[c0:c1].transpose(0, 1)                                  # [Hv, n]
        G = torch.cumsum(g[c0:c1].transpose(0, 1), dim=-1)              # [Hv, n]
        diff = G[:, :, None] - G[:, None, :]                             # G_t - G_s
        strict = torch.ones(n, n, dtype=torch.bool).tril(-1)
        incl = torch.ones(n, n, dtype=torch.bool).tril()
        dec_strict = torch.exp(diff.masked_fill(~strict, float("-inf")))
        dec_incl = torch.exp(diff.masked_fill(~incl, float("-inf")))
        A = bc[:, :, None] * (kc @ kc.transpose(1, 2)) * dec_strict
        M = A + torch.eye(n, dtype=v.dtype)
        eG = torch.exp(G)[:, :, None]
        rhs = bc[:, :, None] * (vc - eG * (kc @ S))
        U = torch.linalg.solve_triangular(M, rhs, upper=False, unitriangular=True)
        out[c0:c1] = (eG * (qc @ S) + ((qc @ kc.transpose(1, 2)) * dec_incl) @ U).transpose(0, 1)
        last = G[:, -1:]                                                   # [Hv, 1]
        S = torch.exp(last)[:, :, None] * S + (kc * torch.exp(last - G)[:, :, None]).transpose(1, 2) @ U
    return out, S


def causal_conv_step(x, weight, prev):
    """The depthwise causal conv1d (no bias): x [T, C], weight [C, K], prev
    [K-1, C] the K-1 inputs before x (zeros at the start).  out[t, c] =
    sum_j weight[c, j] x[t - (K-1) + j], so weight[:, K-1] takes the current
    input.  Returns (out, the last K-1 inputs: the next call's prev)."""
    K = weight.shape[1]
    T = x.shape[0]
    win = torch.cat([prev, x], dim=0)                            # [K-1+T, C]
    out = torch.zeros_like(x)
    for j in range(K):
        out = out + win[j:j + T] * weight[:, j]
    return out, win[win.shape[0] - (K - 1):]


def hybrid_inv_freq(cfg, rd, f64):
    """Qwen3_5TextRotaryEmbedding / Qwen3NextRotaryEmbedding's default
    inv_freq over the rotary dims: 1 / theta^(2i/rd), i < rd/2 (computed in
    float32 as those classes do, float64 with --f64)."""
    if f64:
        return torch.tensor([1.0 / math.pow(cfg.theta, 2.0 * i / rd) for i in range(rd // 2)], dtype=torch.float64)
    return 1.0 / (cfg.theta ** (torch.arange(0, rd, 2, dtype=torch.float32) / rd))


def mrope_freqs(freqs3, section):
    """Qwen3.5's interleaved M-RoPE: freqs3 [3, T, rd/2] from the temporal,
    height and width position streams.  Frequency index i takes the height
    stream if i % 3 == 1 and i < 3 * section[1], the width stream if
    i % 3 == 2 and i < 3 * section[2], else the temporal one (so with three
    equal streams, as for text, it is ordinary RoPE)."""
    out = freqs3[0].clone()
    n = out.shape[-1]
    for s in (1, 2):
        idx = [i for i in range(s, min(n, 3 * section[s]), 3)]
        out[..., idx] = freqs3[s][..., idx]
    return out


def hybrid_rope_table(cfg, positions, rd, f64):
    """cos, sin [T, rd] for integer positions (a list), rotate-half layout
    (the rd/2 frequencies twice)."""
    dt = torch.float64 if f64 else torch.float32
    inv = hybrid_inv_freq(cfg, rd, f64)
    pos = torch.tensor(positions, dtype=dt)
    if cfg.mrope is not None:                                   # text: the three streams equal the position
        freqs = mrope_freqs(torch.stack([pos[:, None] * inv[None, :]] * 3), cfg.mrope)
    else:
        freqs = pos[:, None] * inv[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def hybrid_forward(cfg, w, ids, stats=None, state=None):
    """Logits [len(ids), vocab] of the hybrid families (float32, float64
    with cfg.f64).  state: None for one pass over ids from position 0;
    else a dict carried between calls (empty at the start) holding each
    linear layer's conv window and delta-rule state, each full layer's
    keys and values, and the position, so that feeding ids in pieces (one
    token at a time: decode) continues the sequence."""
    dt = torch.float64 if cfg.f64 else torch.float32
    npdt = np.float64 if cfg.f64 else np.float32
    cache = {}

    def W(name):
        if name not in cache:
            cache[name] = torch.from_numpy(np.ascontiguousarray(w[name], dtype=npdt))
        return cache[name]

    eps = cfg.eps if cfg.f64 else float(np.float32(cfg.eps))
    h = cfg.hy
    T = len(ids)
    st = {} if state is None else state
    p0 = st.get("pos", 0)
    H, L = cfg.hidden, cfg.layers
    NH, KV, D = cfg.heads, cfg.kv_heads, cfg.head_dim
    Hk, Hv, dk, dv, K = cfg.lin_k_heads, cfg.lin_v_heads, cfg.lin_k_dim, cfg.lin_v_dim, cfg.conv_kernel
    kd, vd, r = Hk * dk, Hv * dv, Hv // Hk

    def norm1p(x, name):                                         # Qwen3NextRMSNorm: x * rsqrt(mean x^2 + eps) * (1 + w)
        g = W(name + ".weight")
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * ((1.0 + g) if h["norm_1p"] else g)

    def linear(x, name):
        y = x @ W(name + ".weight").T
        return y + W(name + ".bias") if name + ".bias" in w else y

    rd = cfg.rotary_dim if h["partial"] else D
    cos, sin = hybrid_rope_table(cfg, list(range(p0, p0 + T)), rd, cfg.f64)

    def rope(x):                                                 # [heads, T, D]: the first rd dims rotate
        xr, xp = x[..., :rd], x[..., rd:]
        x1, x2 = xr[..., :rd // 2], xr[..., rd // 2:]
        return torch.cat([xr * cos + torch.cat([-x2, x1], dim=-1) * sin, xp], dim=-1)

    def gdn(x, l):
        """Gated DeltaNet (Qwen3_5GatedDeltaNet / Qwen3NextGatedDeltaNet)."""
        p = f"model.layers.{l}.linear_attn."
        if cfg.hybrid == "qwen3_next":
            qkvz = linear(x, p + "in_proj_qkvz")
            ba = linear(x, p + "in_proj_ba")
            if h["qkvz_grouped"]:                                # per key head: [q dk | k dk | v r*dv | z r*dv]
                g4 = qkvz.view(T, Hk, 2 * dk + 2 * r * dv)
                q_, k_ = g4[..., :dk], g4[..., dk:2 * dk]
                v_, z = g4[..., 2 * dk:2 * dk + r * dv], g4[..., 2 * dk + r * dv:]
                g2 = ba.view(T, Hk, 2 * r)
                b, a = g2[..., :r].reshape(T, Hv), g2[..., r:].reshape(T, Hv)
                mixed = torch.cat([q_.reshape(T, kd), k_.reshape(T, kd), v_.reshape(T, vd)], dim=-1)
                z = z.reshape(T, Hv, dv)
            else:                                                # ablation: read as flat [q | k | v | z], [b | a]
                mixed, z = qkvz[:, :2 * kd + vd], qkvz[:, 2 * kd + vd:].reshape(T, Hv, dv)
                b, a = ba[:, :Hv], ba[:, Hv:]
        else:
            mixed = linear(x, p + "in_proj_qkv")                 # flat [q | k | v]
            z = linear(x, p + "in_proj_z").view(T, Hv, dv)
            b, a = linear(x, p + "in_proj_b"), linear(x, p + "in_proj_a")
        C = 2 * kd + vd
        prev = st.get(("conv", l))
        if prev is None:
            prev = torch.zeros(K - 1, C, dtype=dt)
        if h["conv"]:
            conv, st[("conv", l)] = causal_conv_step(mixed, W(p + "conv1d.weight").view(C, K), prev)
        else:
            conv = mixed
        if h["conv_silu"]:
            conv = torch.nn.functional.silu(conv)
        q = conv[:, :kd].reshape(T, Hk, dk)
        k = conv[:, kd:2 * kd].reshape(T, Hk, dk)
        v = conv[:, 2 * kd:].reshape(T, Hv, dv)
        beta = torch.sigmoid(b) if h["beta"] else torch.ones_like(b)
        sp = torch.nn.functional.softplus(a + W(p + "dt_bias") if h["dt_bias"] else a)
        g = -torch.exp(W(p + "A_log")) * sp if h["decay"] else torch.zeros_like(a)
        if h["l2norm"]:
            q, k = l2norm_last(q), l2norm_last(k)
        if h["q_scale"]:
            q = q * (dk ** -0.5)
        if r > 1:                                                # v-head j reads k-head j // r
            if h["kv_interleave"]:
                q, k = q.repeat_interleave(r, dim=1), k.repeat_interleave(r, dim=1)
            else:
                q, k = q.repeat(1, r, 1), k.repeat(1, r, 1)
        S0 = st.get(("S", l))
        recurrent = h["form"] == "recurrent" or (S0 is not None and T == 1)
        o, st[("S", l)] = (gated_delta_recurrent if recurrent else gated_delta_chunked)(q, k, v, g, beta, S0)
        # Qwen3NextRMSNormGated: per v-head over dv, plain weight, then * silu(z)
        gw = W(p + "norm.weight")
        o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + eps) * ((1.0 + gw) if h["gated_norm_1p"] else gw)
        if h["z_gate"]:
            o = o * torch.nn.functional.silu(z)
        return linear(o.reshape(T, vd), p + "out_proj")

    def attention(x, l):
        """Gated full attention (Qwen3NextAttention / Qwen3_5Attention)."""
        p = f"model.layers.{l}.self_attn."
        qg = linear(x, p + "q_proj")
        if h["gate_per_head"]:                                   # per head: [q D | gate D]
            qg = qg.view(T, NH, 2 * D)
            q, gate = qg[..., :D], qg[..., D:].reshape(T, NH * D)
        else:                                                    # ablation: [all q | all gates]
            q, gate = qg[:, :NH * D].reshape(T, NH, D), qg[:, NH * D:]
        k = linear(x, p + "k_proj").view(T, KV, D)
        v = linear(x, p + "v_proj").view(T, KV, D).transpose(0, 1)
        if cfg.qk_norm:
            q, k = norm1p(q, p + "q_norm"), norm1p(k, p + "k_norm")
        q, k = rope(q.transpose(0, 1)), rope(k.transpose(0, 1))
        if ("k", l) in st:
            k = torch.cat([st[("k", l)], k], dim=1)
            v = torch.cat([st[("v", l)], v], dim=1)
        st[("k", l)], st[("v", l)] = k, v
        P = k.shape[1]                                           # keys at positions 0 .. P-1
        k = k.repeat_interleave(NH // KV, dim=0)
        v = v.repeat_interleave(NH // KV, dim=0)
        s = (q @ k.transpose(1, 2)) * (D ** -0.5)
        mask = torch.arange(P)[None, :] <= torch.arange(p0, p0 + T)[:, None]
        s = s.masked_fill(~mask, float("-inf"))
        a = (torch.softmax(s, dim=-1) @ v).transpose(0, 1).reshape(T, NH * D)
        if h["out_gate"]:
            a = a * torch.sigmoid(gate)
        return linear(a, p + "o_proj")

    def swiglu(x, p):
        return linear(torch.nn.functional.silu(linear(x, p + "gate_proj")) * linear(x, p + "up_proj"),
                      p + "down_proj")

    def moe(x, l):
        """Qwen3NextSparseMoeBlock / Qwen3_5MoeSparseMoeBlock: softmax over
        all experts, top-k (lower index on exact ties), renormalised iff
        norm_topk_prob (always for Qwen3.5), routed SwiGLU experts, plus the
        shared expert times sigmoid(shared_expert_gate(x))."""
        p = f"model.layers.{l}.mlp."
        wr = w[p + "gate.weight"]
        rep = router_representatives(wr, None)
        uniq = sorted(set(rep.tolist()))
        col = torch.from_numpy(np.searchsorted(np.array(uniq), rep))
        logits = (x @ W(p + "gate.weight")[uniq].T)[:, col]
        k = cfg.top_k
        if cfg.route == "topk_softmax":                          # ablation: top-k of the logits, softmax over k
            sel = select_topk(logits.numpy(), k, cfg.tie_low)
            wts = torch.softmax(torch.gather(logits, 1, torch.from_numpy(sel)), dim=-1)
            space = logits
        else:
            probs = torch.softmax(logits, dim=-1)
            first = (logits[:, :, None] == logits[:, None, :]).to(torch.int64).argmax(dim=-1)
            probs = torch.gather(probs, 1, first)                # equal logits, equal probabilities
            sel = select_topk(probs.numpy(), k, cfg.tie_low)
            wts = torch.gather(probs, 1, torch.from_numpy(sel))
            if cfg.norm_topk:
                wts = wts / wts.sum(dim=-1, keepdim=True)
            space = probs
        if stats is not None and k < cfg.experts:
            sv = np.sort(space.numpy().astype(np.float64), axis=1)[:, ::-1]
            gap = sv[:, k - 1] - sv[:, k]
            stats["ties"] = stats.get("ties", 0) + int((gap == 0).sum())
            nz = np.where(gap > 0, gap / np.maximum(np.abs(sv[:, 0]), 1e-30), np.inf)
            t = int(np.argmin(nz))
            if nz[t] < stats.get("gap", (np.inf,))[0]:
                stats["gap"] = (float(nz[t]), l, t)
        if stats is not None:
            stats.setdefault("selected", {})[l] = sel
        out = torch.zeros_like(x)
        for e in sorted(set(sel.flatten().tolist())):
            rows, slots = np.nonzero(sel == e)
            y = swiglu(x[torch.from_numpy(rows)], p + f"experts.{e}.")
            out.index_add_(0, torch.from_numpy(rows), y * wts[torch.from_numpy(rows), torch.from_numpy(slots)][:, None])
        if h["shared"]:
            sh = swiglu(x, p + "shared_expert.")
            if h["shared_gate"]:
                sh = torch.sigmoid(x @ W(p + "shared_expert_gate.weight").T) * sh
            out = out + sh
        return out

    with torch.no_grad():
        x = W("model.embed_tokens.weight")[torch.tensor(ids, dtype=torch.long)]
        for l in range(L):
            p = f"model.layers.{l}."
            a = norm1p(x, p + "input_layernorm")
            x = x + (gdn(a, l) if cfg.layer_types[l] == "linear_attention" else attention(a, l))
            m = norm1p(x, p + "post_attention_layernorm")
            x = x + (moe(m, l) if cfg.sparse[l] else swiglu(m, p + "mlp."))
        st["pos"] = p0 + T
        x = norm1p(x, "model.norm")
        return (x @ W("lm_head.weight").T).numpy()


# --------------------------------------------------------------------------
# helpers

def rel_l2(a, ref):
    a = np.asarray(a, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    return float(np.linalg.norm(a - ref) / max(np.linalg.norm(ref), 1e-300))


def first_argmax(v):
    return int(np.argmax(v))  # numpy returns the first occurrence on ties (§11.2)


def top2_margin(v):
    t = np.partition(np.asarray(v, dtype=np.float64), -2)[-2:]
    return float(t[1] - t[0])


def parse_ids(s):
    try:
        return [int(t) for t in s.split(",") if t.strip() != ""]
    except ValueError:
        raise SystemExit(f"torch_ref: bad id list '{s}'")


def check_ids(cfg, ids, what):
    for t in ids:
        if not 0 <= t < cfg.vocab:
            raise ValueError(f"{what}: token id {t} outside vocab {cfg.vocab}")


def greedy(cfg, w, prompt, n):
    ids = list(prompt)
    out = []
    for _ in range(n):
        lg = torch_forward(cfg, w, ids)[-1]
        t = first_argmax(lg)
        out.append(t)
        ids.append(t)
    return out


# --------------------------------------------------------------------------
# check: compare a cis2 run with the oracle

def compare(cfg, w, prompt, gen, cis2_logits, tol, margin_frac, min_checked, out=sys.stdout):
    """Returns True on pass.  cis2_logits: [len(gen), vocab] float32."""
    n = len(gen)
    seq = list(prompt) + list(gen[:-1])          # teacher forcing on cis2's tokens
    st = {}
    ref = torch_forward(cfg, w, seq, stats=st)[len(prompt) - 1:]
    assert ref.shape == (n, cfg.vocab)
    ok = True
    checked = 0
    worst = 0.0
    print(f"{'step':>4} {'rel_l2':>10} {'max_abs':>10} {'cis2_tok':>8} {'ref_tok':>8} "
          f"{'margin':>10} {'thresh':>10}  token", file=out)
    for s in range(n):
        c, r = cis2_logits[s].astype(np.float64), ref[s].astype(np.float64)
        e = rel_l2(c, r)
        worst = max(worst, e)
        mabs = float(np.max(np.abs(c - r)))
        rt = first_argmax(r)
        ct_own = first_argmax(cis2_logits[s])
        m = top2_margin(r)
        thresh = margin_frac * float(np.max(np.abs(r)))
        notes = []
        if not (e <= tol):                       # also catches NaN
            ok = False
            notes.append(f"FAIL rel_l2>{tol:g}")
        if ct_own != gen[s]:
            ok = False
            notes.append(f"FAIL cis2 token != argmax of its own dumped logits ({ct_own})")
        if m > thresh:
            checked += 1
            if gen[s] != rt:
                ok = False
                notes.append("FAIL token")
            else:
                notes.append("ok")
        else:
            notes.append("unchecked (small margin)" + ("" if gen[s] == rt else ", differs"))
        print(f"{s:>4} {e:>10.3e} {mabs:>10.3e} {gen[s]:>8} {rt:>8} {m:>10.3e} {thresh:>10.3e}  "
              + "; ".join(notes), file=out)
    if cfg.moe and st:                           # a routing flip would explain a large rel_l2
        gap, gl, gt = st.get("gap", (float("inf"), -1, -1))
        print(f"routing: smallest nonzero top-k boundary gap {gap:.3e} (relative, layer {gl}, position {gt}); "
              f"{st.get('ties', 0)} exact ties at the boundary (lower index chosen)", file=out)
    need = min(min_checked, n)
    if checked < need:
        ok = False
        print(f"FAIL: only {checked} token steps had a clear margin, need {need}", file=out)
    print(f"oracle: {'PASS' if ok else 'FAIL'}: {n} steps, worst rel_l2 {worst:.3e} "
          f"(tol {tol:g}), {checked}/{n} tokens checked", file=out)
    return ok


def read_logits(path, n, vocab):
    raw = np.fromfile(path, dtype="<f4")
    if raw.size != n * vocab:
        raise ValueError(f"{path}: {raw.size} floats, expected {n} x {vocab} = {n * vocab}")
    return raw.reshape(n, vocab)


def ablate(cfg, what):
    """Drops a family feature from the oracle (the negative controls)."""
    for f in what or []:
        if f == "llama3":
            if not cfg.llama3:
                raise ValueError("--ablate llama3: the config has no llama3 RoPE scaling")
            cfg.llama3 = None                                   # plain RoPE
        elif f == "llama3_smooth":
            if not cfg.llama3:
                raise ValueError("--ablate llama3_smooth: the config has no llama3 RoPE scaling")
            cfg.no_smooth = True                                # no interpolation in the medium band
        elif f == "qk_norm":
            if not cfg.qk_norm:
                raise ValueError("--ablate qk_norm: the config is not qwen3, olmo2 or gemma3_text")
            cfg.qk_norm = False
        elif f in ("window", "window_off_by_one"):
            if not cfg.window or not any(cfg.sliding):
                raise ValueError(f"--ablate {f}: the config has no sliding window")
            cfg.window = None if f == "window" else cfg.window + 1
        elif f in GEMMA3_ABLATIONS:
            if not cfg.gemma3:
                raise ValueError(f"--ablate {f}: the config is not gemma3_text")
            ablate_gemma3(cfg, f)
        elif f in MOE_ABLATIONS:
            ablate_moe(cfg, f)
        elif f in HYBRID_ABLATIONS:
            ablate_hybrid(cfg, f)
        elif f == "post_norm":
            if not cfg.olmo2:
                raise ValueError("--ablate post_norm: the config is not olmo2")
            cfg.post_norm = False
        elif f == "qk_norm_per_head":
            if not cfg.olmo2:
                raise ValueError("--ablate qk_norm_per_head: the config is not olmo2")
            cfg.qk_whole = False
        elif f == "nope":
            if all(cfg.use_rope):
                raise ValueError("--ablate nope: the config has no layer without RoPE")
            cfg.use_rope = [True] * cfg.layers                  # RoPE in every layer
        else:
            raise ValueError(f"--ablate {f}: unknown feature")


GEMMA3_ABLATIONS = ("gemma_norm", "embed_scale", "gelu_erf", "local_rope", "query_scale", "layer_pattern")
MOE_ABLATIONS = ("softmax_then_topk", "topk_then_softmax", "no_norm_topk", "tie_high_index", "no_sinks",
                 "no_yarn", "no_yarn_scale", "yarn_truncate", "no_swiglu_clamp", "no_interleave",
                 "bias_after_weight", "mxfp4_high_nibble_first")
ABLATIONS = ("llama3", "llama3_smooth", "qk_norm", "nope", "post_norm", "window", "window_off_by_one",
             "qk_norm_per_head") + GEMMA3_ABLATIONS + MOE_ABLATIONS + HYBRID_ABLATIONS


def ablate_moe(cfg, f):
    """The mixture-of-experts families' negative controls; each raises
    where the config makes it change nothing."""
    gpt = cfg.moe == "gpt_oss"

    def need(ok, why):
        if not ok:
            raise ValueError(f"--ablate {f}: {why}")
    need(cfg.moe, "the config is not qwen3_moe or gpt_oss")
    if f == "softmax_then_topk":
        need(gpt, "only gpt-oss routes top-k first")
        cfg.route, cfg.norm_topk = "softmax_topk", False       # softmax over all E; not renormalised
    elif f == "topk_then_softmax":
        need(not gpt, "only qwen3_moe routes softmax first")
        need(not cfg.norm_topk, "with norm_topk_prob the two orders are the same function")
        cfg.route = "topk_softmax"
    elif f == "no_norm_topk":
        need(not gpt and cfg.norm_topk, "the config does not renormalise (norm_topk_prob false or gpt-oss)")
        cfg.norm_topk = False
    elif f == "tie_high_index":
        cfg.tie_low = False
    elif f == "no_sinks":
        need(cfg.sinks, "the config has no sinks")
        cfg.sinks = False
    elif f in ("no_yarn", "no_yarn_scale", "yarn_truncate"):
        need(cfg.yarn, "the config has no yarn RoPE")
        if f == "no_yarn":
            cfg.yarn, cfg.rope_scale = None, 1.0
        elif f == "no_yarn_scale":
            need(cfg.rope_scale != 1.0, "the attention factor is 1")
            cfg.rope_scale = 1.0
        else:
            y = dict(cfg.yarn, truncate=not cfg.yarn["truncate"])
            need(not np.array_equal(yarn_inv_freq_f64(cfg.theta, cfg.head_dim, **y),
                                    yarn_inv_freq_f64(cfg.theta, cfg.head_dim, **cfg.yarn)),
                 "truncate changes no frequency here")
            cfg.yarn = y
    else:
        need(gpt, "only gpt-oss has it")
        if f == "no_swiglu_clamp":
            cfg.swiglu_clamp = False
        elif f == "no_interleave":
            cfg.interleave = False
        elif f == "bias_after_weight":
            cfg.bias_weighted = False
        elif f == "mxfp4_high_nibble_first":
            need(getattr(cfg, "mxfp4", True), "the checkpoint's experts are not MXFP4")
            cfg.nibble_lo_first = False


def ablate_gemma3(cfg, f):
    """Gemma-3's negative controls; each raises where it would change nothing."""
    if f == "gemma_norm":
        cfg.gemma_norm = False                                  # RMSNorm gains w, not 1 + w
    elif f == "embed_scale":
        cfg.embed_scale = False                                 # embeddings not times sqrt(hidden)
    elif f == "gelu_erf":
        cfg.act = "gelu_erf"                                    # the exact GELU, not the tanh one
    elif f == "local_rope":
        if not any(cfg.sliding) or np.array_equal(inv_freq_f64(cfg, True), inv_freq_f64(cfg)):
            raise ValueError("--ablate local_rope: the sliding layers' RoPE table is the global one")
        cfg.local_rope = False                                  # the global table in every layer
    elif f == "query_scale":
        if math.isclose(cfg.qscale, 1.0 / math.sqrt(cfg.head_dim), rel_tol=1e-12):
            raise ValueError("--ablate query_scale: query_pre_attn_scalar equals head_dim")
        cfg.qscale = None                                       # 1/sqrt(head_dim)
    elif f == "layer_pattern":
        shifted = cfg.sliding[-1:] + cfg.sliding[:-1]           # layer l takes layer l-1's type
        if shifted == cfg.sliding:
            raise ValueError("--ablate layer_pattern: every layer has the same type")
        cfg.sliding = shifted


def cmd_check(a):
    cfg, w = load_model(a.model_dir)
    ablate(cfg, a.ablate)
    cfg.f64 = a.f64
    with open(a.json) as f:
        j = json.load(f)
    prompt = [int(t) for t in j["prompt_token_ids"]]
    gen = [int(t) for t in j["generated_token_ids"]]
    if not prompt or not gen:
        raise ValueError(f"{a.json}: empty prompt_token_ids or generated_token_ids")
    check_ids(cfg, prompt + gen, a.json)
    logits = read_logits(a.logits, len(gen), cfg.vocab)
    return 0 if compare(cfg, w, prompt, gen, logits, a.tol, a.margin, a.min_checked) else 1


def cmd_logits(a):
    cfg, w = load_model(a.model_dir)
    ablate(cfg, a.ablate)
    cfg.f64 = a.f64
    ids = parse_ids(a.ids)
    if not ids:
        raise ValueError("--ids: empty")
    check_ids(cfg, ids, "--ids")
    if not 0 <= a.start < len(ids):
        raise ValueError(f"--from {a.start}: not a position of {len(ids)} ids")
    lg = torch_forward(cfg, w, ids)[a.start:]
    if a.out:
        lg.astype("<f8" if a.out_f64 else "<f4").tofile(a.out)
    print(json.dumps({"positions": int(lg.shape[0]), "vocab": int(lg.shape[1]), "from": a.start,
                      "compute": "f64" if a.f64 else "f32", "written": "f64" if a.out_f64 else "f32",
                      "argmax": [first_argmax(r) for r in lg]}))
    return 0


def cmd_greedy(a):
    cfg, w = load_model(a.model_dir)
    cfg.f64 = a.f64
    prompt = parse_ids(a.prompt_ids)
    check_ids(cfg, prompt, "--prompt-ids")
    print(",".join(str(t) for t in greedy(cfg, w, prompt, a.gen_toks)))
    return 0


def crosscheck(cfg, w, ids, tol, label=""):
    t = torch_forward(cfg, w, ids)
    if cfg.hybrid:                                               # second route: f64, token by token, carried state
        n, what = hybrid_decode(cfg, w, ids, f64=True), "torch f64 decode (recurrent, carried state)"
    else:
        n, what = numpy_forward(cfg, w, ids), "numpy f64"
    errs = [rel_l2(t[i], n[i]) for i in range(len(ids))]
    worst = max(errs)
    ok = worst <= tol
    print(f"crosscheck{label}: torch fp32 vs {what} over {len(ids)} positions: "
          f"worst rel_l2 {worst:.3e} (tol {tol:g}) {'PASS' if ok else 'FAIL'}")
    return ok


def cmd_crosscheck(a):
    cfg, w = load_model(a.model_dir)
    prompt = parse_ids(a.prompt_ids)
    check_ids(cfg, prompt, "--prompt-ids")
    ids = prompt + greedy(cfg, w, prompt, a.gen_toks)
    return 0 if crosscheck(cfg, w, ids, a.tol) else 1


# --------------------------------------------------------------------------
# selftest: random checkpoints written here, independent of `cis2 synth`

def write_safetensors(path, tensors):
    """tensors: {name: (dtype 'BF16'|'F32', float32 array)}.  BF16 by RNE."""
    header, blobs, off = {}, [], 0
    for name, (dt, arr) in tensors.items():
        a = np.ascontiguousarray(arr, dtype=np.float32)
        if dt == "BF16":
            u = a.view(np.uint32).astype(np.uint64)
            u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16          # round to nearest even
            b = u.astype("<u2").tobytes()
        else:
            b = a.astype("<f4").tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def make_checkpoint(d, rng, hidden, inter, layers, heads, kv_heads, vocab, head_dim=None,
                    bias=False, tied=True, theta=10000.0, eps=1e-5, norm_f32=False, qwen3=False,
                    llama3=None, extra=None, gelu_tail=False):
    """gelu_tail: embedding column 0 is 2.5 for every token and gate_proj
    reads it with weight -1 (the rest of gate_proj scaled by 0.3), so the
    gate's pre-activations sit near -2.3, where the tanh and erf GELUs
    differ by ~1% rather than the ~2e-4 of N(0, 1) inputs (deeper in the
    tail fp32's 1 + tanh cancels and torch's own error nears 1e-5)."""
    D = head_dim or hidden // heads
    gemma = (extra or {}).get("model_type") == "gemma3_text"
    t = {}
    nd = "F32" if norm_f32 else "BF16"
    sc = 1.0 / math.sqrt(hidden)
    t["model.embed_tokens.weight"] = ("BF16", rng.standard_normal((vocab, hidden)))
    if gelu_tail:
        t["model.embed_tokens.weight"][1][:, 0] = 2.5
    for l in range(layers):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = (nd, 1 + 0.1 * rng.standard_normal(hidden))
        t[p + "post_attention_layernorm.weight"] = (nd, 1 + 0.1 * rng.standard_normal(hidden))
        for n_, o in (("q", heads * D), ("k", kv_heads * D), ("v", kv_heads * D)):
            t[p + f"self_attn.{n_}_proj.weight"] = ("BF16", sc * 2 * rng.standard_normal((o, hidden)))
            if bias:
                t[p + f"self_attn.{n_}_proj.bias"] = ("BF16", 0.5 * rng.standard_normal(o))
        t[p + "self_attn.o_proj.weight"] = ("BF16", rng.standard_normal((hidden, heads * D)) / math.sqrt(heads * D))
        if (extra or {}).get("model_type") == "olmo2":
            del t[p + "input_layernorm.weight"]
            t[p + "post_feedforward_layernorm.weight"] = (nd, 1 + 0.1 * rng.standard_normal(hidden))
            t[p + "self_attn.q_norm.weight"] = (nd, 1 + 0.3 * rng.standard_normal(heads * D))
            t[p + "self_attn.k_norm.weight"] = (nd, 1 + 0.3 * rng.standard_normal(kv_heads * D))
        if qwen3:
            t[p + "self_attn.q_norm.weight"] = (nd, 1 + 0.3 * rng.standard_normal(D))
            t[p + "self_attn.k_norm.weight"] = (nd, 1 + 0.3 * rng.standard_normal(D))
        if gemma:                                        # Gemma3RMSNorm stores w, applied as 1 + w
            for n_ in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                       "post_feedforward_layernorm"):
                t[p + n_ + ".weight"] = (nd, 0.2 * rng.standard_normal(hidden))
            t[p + "self_attn.q_norm.weight"] = (nd, 0.3 * rng.standard_normal(D))
            t[p + "self_attn.k_norm.weight"] = (nd, 0.3 * rng.standard_normal(D))
        t[p + "mlp.gate_proj.weight"] = ("BF16", sc * rng.standard_normal((inter, hidden)))
        if gelu_tail:
            t[p + "mlp.gate_proj.weight"][1][:] *= 0.3
            t[p + "mlp.gate_proj.weight"][1][:, 0] = -1.0
        t[p + "mlp.up_proj.weight"] = ("BF16", sc * rng.standard_normal((inter, hidden)))
        t[p + "mlp.down_proj.weight"] = ("BF16", rng.standard_normal((hidden, inter)) / math.sqrt(inter))
    t["model.norm.weight"] = (nd, (0 if gemma else 1) + 0.1 * rng.standard_normal(hidden))
    if not tied:
        t["lm_head.weight"] = ("BF16", sc * rng.standard_normal((vocab, hidden)))
    os.makedirs(d, exist_ok=True)
    write_safetensors(os.path.join(d, "model.safetensors"), t)
    cfg = {"hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": kv_heads, "vocab_size": vocab,
           "rms_norm_eps": eps, "rope_theta": theta, "tie_word_embeddings": tied,
           "hidden_act": "silu"}
    if head_dim:
        cfg["head_dim"] = head_dim
    if gemma:                                            # Gemma3TextConfig names its activation so
        del cfg["hidden_act"]
        cfg["hidden_activation"] = "gelu_pytorch_tanh"
    if qwen3:
        cfg["model_type"] = "qwen3"
    if llama3:
        cfg["rope_scaling"] = dict(llama3, rope_type="llama3")
    cfg.update(extra or {})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)


def selftest_ablations(d, rng, label, need=2e-3, report_only=()):
    """Each Gemma-3 ablation must move the oracle's logits by more than
    `need` (20x check's tolerance) at some step of a sequence longer than
    the window, so that `check` rejects the plain oracle's own logits; the
    numpy path must compute the same ablated function (always required;
    to 3e-5, since torch's fp32 erf GELU itself errs by up to 1e-4 relative
    in gelu_tail's range).  Those in report_only are printed with their
    distance, not required."""
    cfg, w = load_model(d)
    prompt = [int(x) for x in rng.integers(0, cfg.vocab, size=6)]
    gen = greedy(cfg, w, prompt, 10)
    seq = prompt + gen[:-1]
    lg = torch_forward(cfg, w, seq)[len(prompt) - 1:]
    sink = open(os.devnull, "w")
    ok = True
    for f in GEMMA3_ABLATIONS + ("window", "window_off_by_one"):
        c = copy.deepcopy(cfg)
        ablate(c, [f])
        t = torch_forward(c, w, seq)
        dist = max(rel_l2(t[len(prompt) - 1 + i], lg[i]) for i in range(len(gen)))
        rejected = not compare(c, w, prompt, gen, lg, 1e-4, 1e-3, 3, out=sink)
        n = numpy_forward(c, w, seq)
        agree = max(rel_l2(t[i], n[i]) for i in range(len(seq)))
        good = (f in report_only or (dist > need and rejected)) and agree <= 3e-5
        ok &= good
        print(f"ablate {f} [{label}]: worst step rel_l2 {dist:.3e} from the plain oracle "
              f"({'reported only' if f in report_only else f'need > {need:g}'}), "
              f"check rejects {rejected}, torch vs numpy {agree:.1e}: {'PASS' if good else 'FAIL'}")
    return ok


def cmd_selftest(a):
    rng = np.random.default_rng(1234)
    ok = True
    base = a.keep or tempfile.mkdtemp(prefix="torch_ref_selftest.")
    shapes = [
        ("llama-tied", dict(hidden=64, inter=160, layers=2, heads=4, kv_heads=2, vocab=300)),
        ("qwen-bias-untied", dict(hidden=48, inter=96, layers=3, heads=6, kv_heads=2, vocab=257,
                                  bias=True, tied=False, theta=1e6, eps=1e-6)),
        ("odd-headdim-f32norm", dict(hidden=40, inter=72, layers=2, heads=3, kv_heads=1, vocab=131,
                                     head_dim=18, norm_f32=True, theta=100000.0)),
        ("mha", dict(hidden=32, inter=64, layers=1, heads=2, kv_heads=2, vocab=64)),
        ("llama3", dict(hidden=64, inter=128, layers=2, heads=4, kv_heads=2, vocab=200,
                        llama3={"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 64})),
        ("qwen3", dict(hidden=48, inter=96, layers=2, heads=4, kv_heads=2, vocab=150, head_dim=20,
                       qwen3=True, eps=1e-6, theta=1e6)),
        ("smollm3", dict(hidden=48, inter=96, layers=3, heads=4, kv_heads=2, vocab=150, theta=1e5,
                         extra={"model_type": "smollm3", "no_rope_layers": [1, 0, 1]})),
        ("olmo2", dict(hidden=48, inter=96, layers=2, heads=4, kv_heads=2, vocab=150, eps=1e-6,
                       extra={"model_type": "olmo2"})),
        # Gemma-3: heads*head_dim != hidden, query_pre_attn_scalar != head_dim,
        # sliding layers 0 and 2 by the pattern rule, window 5 < 14 positions,
        # rope_local_base_freq absent (default 1e4) != rope_theta 1e6
        ("gemma3", dict(hidden=64, inter=128, layers=4, heads=4, kv_heads=2, vocab=200, head_dim=16,
                        theta=1e6, eps=1e-6,
                        extra={"model_type": "gemma3_text", "query_pre_attn_scalar": 24,
                               "sliding_window": 5, "sliding_window_pattern": 2})),
        # transformers 5's form: layer_types, rope_parameters per layer type,
        # linear scaling on the full layers; untied, F32 norms
        ("gemma3-types-linear", dict(hidden=48, inter=96, layers=4, heads=6, kv_heads=3, vocab=150,
                                     head_dim=12, tied=False, theta=1e5, eps=1e-6, norm_f32=True,
                                     extra={"model_type": "gemma3_text", "query_pre_attn_scalar": 20,
                                            "sliding_window": 3,
                                            "layer_types": ["full_attention", "sliding_attention",
                                                            "sliding_attention", "full_attention"],
                                            "rope_parameters": {
                                                "full_attention": {"rope_type": "linear", "factor": 4.0,
                                                                   "rope_theta": 1e5},
                                                "sliding_attention": {"rope_type": "default",
                                                                      "rope_theta": 1000.0}}})),
        # the gemma3 shape with the gates in GELU's negative tail (gelu_erf shows)
        ("gemma3-gelu-tail", dict(hidden=64, inter=128, layers=4, heads=4, kv_heads=2, vocab=200,
                                  head_dim=16, theta=1e6, eps=1e-6, gelu_tail=True,
                                  extra={"model_type": "gemma3_text", "query_pre_attn_scalar": 24,
                                         "sliding_window": 5, "sliding_window_pattern": 2})),
    ]
    try:
        for name, kw in shapes:
            d = os.path.join(base, name)
            make_checkpoint(d, rng, **kw)
            cfg, w = load_model(d)
            prompt = [int(x) for x in rng.integers(0, cfg.vocab, size=5)]
            ids = prompt + greedy(cfg, w, prompt, 9)
            ok &= crosscheck(cfg, w, ids, 1e-5, f" [{name}]")
        # the parser: BF16 widening is exact (<<16) and F32 passes through
        d = os.path.join(base, "parse")
        os.makedirs(d, exist_ok=True)
        bits = np.array([0x3F80, 0xC000, 0x0001, 0x7F80, 0x8000], dtype=np.uint32)
        p = os.path.join(d, "model.safetensors")
        vals = (bits << 16).view(np.float32)
        write_safetensors(p, {"a": ("BF16", vals), "b": ("F32", np.array([0.1, -3.5], np.float32))})
        r = load_safetensors(p)
        parse_ok = (np.array_equal(r["a"].view(np.uint32), bits << 16)
                    and np.array_equal(r["b"], np.array([0.1, -3.5], np.float32)))
        print(f"parser: bf16 widening / f32 passthrough {'PASS' if parse_ok else 'FAIL'}")
        ok &= parse_ok
        # `check` must accept the oracle's own logits and reject perturbed ones
        d = os.path.join(base, "llama-tied")
        cfg, w = load_model(d)
        prompt = [3, 1, 4, 1, 5]
        gen = greedy(cfg, w, prompt, 6)
        lg = torch_forward(cfg, w, prompt + gen[:-1])[len(prompt) - 1:]
        sink = open(os.devnull, "w")
        good = compare(cfg, w, prompt, gen, lg, 1e-4, 1e-3, 3, out=sink)
        bad1 = lg.copy()
        bad1[2] *= 1.001                                  # rel error 1e-3 at one step
        bad2 = gen.copy()
        bad2[0] = (bad2[0] + 1) % cfg.vocab               # wrong token (and not argmax)
        r1 = compare(cfg, w, prompt, gen, bad1, 1e-4, 1e-3, 3, out=sink)
        r2 = compare(cfg, w, prompt, bad2, lg, 1e-4, 1e-3, 3, out=sink)
        neg_ok = good and not r1 and not r2
        print(f"check: accepts own logits {good}, rejects scaled logits {not r1}, "
              f"rejects wrong token {not r2}: {'PASS' if neg_ok else 'FAIL'}")
        ok &= neg_ok
        for name in ("gemma3", "gemma3-types-linear"):           # N(0, 1) gates: gelu_erf stays below 1e-4
            ok &= selftest_ablations(os.path.join(base, name), rng, name, report_only=("gelu_erf",))
        ok &= selftest_ablations(os.path.join(base, "gemma3-gelu-tail"), rng, "gemma3-gelu-tail")
    finally:
        if not a.keep:
            import shutil
            shutil.rmtree(base, ignore_errors=True)
    print(f"selftest: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def main(argv):
    ap = argparse.ArgumentParser(prog="torch_ref.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="compare a cis2 run (json stdout + logits dump) with torch")
    c.add_argument("--model-dir", required=True)
    c.add_argument("--json", required=True, help="file holding cis2 run --json stdout")
    c.add_argument("--logits", required=True, help="cis2 --dump-logits file (f32 LE)")
    c.add_argument("--tol", type=float, default=1e-4, help="max per-step relative L2 error")
    c.add_argument("--margin", type=float, default=1e-3,
                   help="check a token when top1-top2 > MARGIN * max|logit|")
    c.add_argument("--min-checked", type=int, default=3,
                   help="fail unless at least this many steps had a checkable margin")
    c.add_argument("--ablate", action="append", choices=ABLATIONS,
                   help="drop this family feature from the oracle (a negative control)")
    c.add_argument("--f64", action="store_true", help="the torch pass in float64")
    lg = sub.add_parser("logits", help="write the oracle's logits for a token list")
    lg.add_argument("--model-dir", required=True)
    lg.add_argument("--ids", required=True, help="comma-separated token ids (one causal pass)")
    lg.add_argument("--out", help="write f32 LE [n, vocab] here (f64 with --out-f64)")
    lg.add_argument("--from", dest="start", type=int, default=0, help="first position written (default 0)")
    lg.add_argument("--f64", action="store_true", help="the torch pass in float64")
    lg.add_argument("--out-f64", action="store_true", help="write float64 instead of float32")
    lg.add_argument("--ablate", action="append", choices=ABLATIONS, help="as check's")
    g = sub.add_parser("greedy", help="print the oracle's own greedy tokens")
    g.add_argument("--f64", action="store_true", help="the torch pass in float64")
    x = sub.add_parser("crosscheck", help="torch fp32 vs numpy float64 on a checkpoint")
    for p in (g, x):
        p.add_argument("--model-dir", required=True)
        p.add_argument("--prompt-ids", required=True)
        p.add_argument("--gen-toks", type=int, default=8)
    x.add_argument("--tol", type=float, default=1e-5)
    s = sub.add_parser("selftest", help="crosscheck on random checkpoints written here")
    s.add_argument("--keep", help="write the checkpoints to this dir and keep them")
    a = ap.parse_args(argv)
    if torch is None:
        print("torch_ref: torch is not importable by this python", file=sys.stderr)
        return 2
    torch.set_grad_enabled(False)
    try:
        return {"check": cmd_check, "greedy": cmd_greedy, "crosscheck": cmd_crosscheck,
                "selftest": cmd_selftest, "logits": cmd_logits}[a.cmd](a)
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as e:
        print(f"torch_ref: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
