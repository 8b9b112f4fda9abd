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
        implementation (token-by-token with a KV cache)
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
             "qk_norm_per_head") + GEMMA3_ABLATIONS + MOE_ABLATIONS


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
    n = numpy_forward(cfg, w, ids)
    errs = [rel_l2(t[i], n[i]) for i in range(len(ids))]
    worst = max(errs)
    ok = worst <= tol
    print(f"crosscheck{label}: torch fp32 vs numpy f64 over {len(ids)} positions: "
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
