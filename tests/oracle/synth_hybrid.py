#!/usr/bin/python3
"""
synth_hybrid.py - small synthetic checkpoints (model.safetensors + config.json)
of the hybrid Gated DeltaNet + gated attention families, Qwen3.5 (qwen3_5,
dense), Qwen3.5-MoE (qwen3_5_moe) and Qwen3-Next (qwen3_next), for tests
that compare cis2 with tests/oracle/torch_ref.py.

Written from: the published configs (a family's real config.json, e.g.
/work/shared/models/families/Qwen3.5-0.8B.json, Qwen3.5-35B-A3B.json or
Qwen3-Next-80B-A3B.json, is the template; its model_type picks the family)
and the tensor names and shapes of transformers' modeling_qwen3_5.py,
modeling_qwen3_5_moe.py and modeling_qwen3_next.py.  It shares no code with
torch_ref.py (its own safetensors writer), so a bug in one does not hide in
the other.

  synth_hybrid.py --family-config REAL.json --out DIR [--seed N]
      [--layers L] [--pattern lllf] [--hidden H] [--heads N] [--kv-heads N]
      [--head-dim D] [--partial-rotary F] [--rope-theta T]
      [--lin-k-heads N] [--lin-v-heads N] [--lin-k-dim D] [--lin-v-dim D]
      [--conv-kernel K] [--inter I] [--moe-inter I] [--shared-inter I]
      [--experts E] [--top-k K] [--vocab V] [--tied 0|1]
      [--expert-layout fused|split] [--a-log-dtype F32|BF16]
      [--norm-dtype F32|BF16] [--mlp-only-layers 1,3] [--decoder-sparse-step S]
      [--norm-topk-prob 0|1] [--no-mtp]

The config is the template with those fields replaced (qwen3_5 and
qwen3_5_moe keep the multimodal wrapper: the text model's keys in
text_config, vision_config kept as it is).  layer_types is --pattern
repeated (l = linear_attention, f = full_attention; default: the
template's own pattern, 3 linear then 1 full).  mrope_section is scaled to
the reduced rotary dim (its three parts sum to rotary_dim / 2, as
[11, 11, 10] does for 64).

Tensors (Qwen3.5 under model.language_model., Qwen3-Next under model.;
lm_head.weight unless tied; all BF16 except where said):
  model.embed_tokens.weight [V, H], model.norm.weight [H];
  per layer input_layernorm / post_attention_layernorm [H] (stored w,
  applied as 1 + w);
  linear_attention layers, linear_attn.:
    Qwen3.5:    in_proj_qkv [2*Hk*dk + Hv*dv, H] (flat q | k | v),
                in_proj_z [Hv*dv, H], in_proj_b [Hv, H], in_proj_a [Hv, H]
    Qwen3-Next: in_proj_qkvz [2*Hk*dk + 2*Hv*dv, H], rows grouped per key
                head g: q_g (dk), k_g (dk), v of g's r = Hv/Hk value heads
                (r*dv), z of the same (r*dv); in_proj_ba [2*Hv, H] grouped
                per key head: b of g's r value heads, then a of them
    conv1d.weight [2*Hk*dk + Hv*dv, 1, K] (channels in q | k | v order),
    A_log [Hv] (--a-log-dtype, default F32 for Qwen3.5, BF16 for
    Qwen3-Next), dt_bias [Hv], norm.weight [dv] (--norm-dtype; plain
    weight near 1), out_proj.weight [H, Hv*dv];
  full_attention layers, self_attn.: q_proj [2*heads*D, H] (per head: D
    query rows, then D gate rows), k_proj / v_proj [kv*D, H], o_proj
    [H, heads*D], q_norm / k_norm [D] (applied as 1 + w);
  MLP: dense mlp.{gate,up}_proj [I, H], down_proj [H, I]; routed
    mlp.gate.weight [E, H], experts fused (mlp.experts.gate_up_proj
    [E, 2*MI, H], gate rows first, down_proj [E, H, MI]) or split
    (mlp.experts.{e}.{gate,up}_proj.weight [MI, H], down_proj.weight
    [H, MI]) by --expert-layout (default fused for qwen3_5_moe, split for
    qwen3_next), mlp.shared_expert.{gate,up}_proj [SI, H], down_proj
    [H, SI], mlp.shared_expert_gate.weight [1, H];
  mtp.fc.weight [H, 2H] and mtp.norm.weight [H] (which readers must
  ignore), unless --no-mtp.

Magnitudes: A = exp(A_log) uniform in [1, 16] (the modeling files' init
range) and dt_bias = softplus^-1(dt) with dt log-uniform in [1e-3, 1e-1]
(the Mamba-2 convention), so the decay exp(g) = exp(-A softplus(a +
dt_bias)) spreads over about (0.2, 1): state that is neither kept whole nor
wiped every token.  beta = sigmoid(b) spreads over (0.1, 0.9).

Every weight is drawn in one fixed order from --seed whatever the family
(the Qwen3-Next fused tensors are assembled from the same q, k, v, z, b, a
rows Qwen3.5 writes separately), so two families written with the same
seed and sizes hold the same function up to what the families differ in.

Prints one JSON line describing what it wrote.  Exit 0, or 2 on bad
arguments.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

FAMILIES = {"qwen3_5": "qwen3_5", "qwen3_5_text": "qwen3_5", "qwen3_5_moe": "qwen3_5_moe",
            "qwen3_5_moe_text": "qwen3_5_moe", "qwen3_next": "qwen3_next"}


# the safetensors writer is synth_moe.py's (BF16, F32 and U8), in this folder
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from synth_moe import write_safetensors  # noqa: E402


def scaled_sections(half):
    """mrope_section for a rotary half-width: three parts in the real
    [11, 11, 10] proportions, summing to half."""
    a = max(0, round(half * 11 / 32))
    b = max(0, round(half * 11 / 32))
    return [a, b, max(0, half - a - b)]


def build(a, tmpl):
    mt = tmpl.get("model_type")
    if mt not in FAMILIES:
        raise ValueError(f"model_type {mt!r}: not one of {sorted(FAMILIES)}")
    fam = FAMILIES[mt]
    wrapped = isinstance(tmpl.get("text_config"), dict)
    tc = dict(tmpl["text_config"]) if wrapped else dict(tmpl)
    rng = np.random.default_rng(a.seed)
    H, L, NH, KV, D, V = a.hidden, a.layers, a.heads, a.kv_heads, a.head_dim, a.vocab
    Hk, Hv, dk, dv, K = a.lin_k_heads, a.lin_v_heads, a.lin_k_dim, a.lin_v_dim, a.conv_kernel
    if NH % KV or Hv % Hk:
        raise ValueError("heads must be a multiple of kv-heads and lin-v-heads of lin-k-heads")
    r = Hv // Hk
    kd, vd = Hk * dk, Hv * dv
    moe = fam in ("qwen3_5_moe", "qwen3_next")
    E = a.experts
    K_top = a.top_k if a.top_k else max(1, min(int(tc.get("num_experts_per_tok", 8)), E // 2))
    I, MI, SI = a.inter, a.moe_inter, a.shared_inter
    if moe and not 0 < K_top <= E:
        raise ValueError("0 < top-k <= experts")
    pattern = a.pattern
    if pattern is None:
        tl = tc.get("layer_types") or []
        pattern = "".join("f" if t == "full_attention" else "l" for t in tl[:4]) or "lllf"
    if set(pattern) - {"l", "f"}:
        raise ValueError("--pattern: letters l (linear_attention) and f (full_attention)")
    types = ["full_attention" if pattern[i % len(pattern)] == "f" else "linear_attention" for i in range(L)]
    prf = a.partial_rotary if a.partial_rotary is not None else float(
        (tc.get("rope_parameters") or {}).get("partial_rotary_factor", tc.get("partial_rotary_factor", 0.25)))
    rd = int(D * prf)
    if rd % 2 or rd <= 0:
        raise ValueError(f"rotary dim {rd} = head_dim x partial_rotary_factor must be even and positive")
    tied = bool(a.tied) if a.tied is not None else bool(tc.get("tie_word_embeddings", tmpl.get("tie_word_embeddings", False)))

    # config: the template's text part with the sizes replaced
    tc.update({"hidden_size": H, "num_hidden_layers": L, "num_attention_heads": NH, "num_key_value_heads": KV,
               "head_dim": D, "vocab_size": V, "layer_types": types, "linear_num_key_heads": Hk,
               "linear_num_value_heads": Hv, "linear_key_head_dim": dk, "linear_value_head_dim": dv,
               "linear_conv_kernel_dim": K, "tie_word_embeddings": tied})
    if "partial_rotary_factor" in tc or fam == "qwen3_next":
        tc["partial_rotary_factor"] = prf
    rp = tc.get("rope_parameters")
    if rp is not None:
        rp = dict(rp, partial_rotary_factor=prf)
        if "mrope_section" in rp:
            rp["mrope_section"] = scaled_sections(rd // 2)
        if a.rope_theta:
            rp["rope_theta"] = a.rope_theta
        tc["rope_parameters"] = rp
    if a.rope_theta and (rp is None or "rope_theta" in tc):
        tc["rope_theta"] = a.rope_theta
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        if isinstance(tc.get(key), int) and tc[key] >= V:
            tc[key] = V - 1 - ("pad_token_id", "bos_token_id", "eos_token_id").index(key)
    if fam != "qwen3_5_moe":
        tc["intermediate_size"] = I
    if moe:
        tc.update({"num_experts": E, "num_experts_per_tok": K_top, "moe_intermediate_size": MI,
                   "shared_expert_intermediate_size": SI})
    if fam == "qwen3_next":
        if a.mlp_only_layers is not None:
            tc["mlp_only_layers"] = [int(x) for x in a.mlp_only_layers.split(",") if x.strip()]
        else:
            tc["mlp_only_layers"] = [x for x in tc.get("mlp_only_layers") or [] if x < L]
        if a.decoder_sparse_step:
            tc["decoder_sparse_step"] = a.decoder_sparse_step
        if a.norm_topk_prob is not None:
            tc["norm_topk_prob"] = bool(a.norm_topk_prob)
    elif a.mlp_only_layers or a.decoder_sparse_step or a.norm_topk_prob is not None:
        raise ValueError("--mlp-only-layers / --decoder-sparse-step / --norm-topk-prob are Qwen3-Next's")
    if wrapped:
        cfg = dict(tmpl)
        cfg["text_config"] = tc
        cfg["tie_word_embeddings"] = tied
        for key in ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id"):
            cfg.pop(key, None) if isinstance(cfg.get(key), int) and cfg[key] >= V else None
    else:
        cfg = tc
    step = int(tc.get("decoder_sparse_step", 1) or 1)
    only = tc.get("mlp_only_layers") or []
    if fam == "qwen3_5_moe":
        routed = [True] * L
    elif fam == "qwen3_next":
        routed = [(l not in only) and E > 0 and (l + 1) % step == 0 for l in range(L)]
    else:
        routed = [False] * L

    # weights, drawn in one order for every family
    pre = "model.language_model." if fam != "qwen3_next" else "model."
    layout = a.expert_layout or ("fused" if fam == "qwen3_5_moe" else "split")
    a_log_dt = a.a_log_dtype or ("F32" if fam != "qwen3_next" else "BF16")
    norm_dt = a.norm_dtype or ("F32" if fam != "qwen3_next" else "BF16")
    nrm = lambda *s: rng.standard_normal(s)
    t = [(pre + "embed_tokens.weight", "BF16", nrm(V, H))]
    for l in range(L):
        p = pre + f"layers.{l}."
        t.append((p + "input_layernorm.weight", "BF16", 0.1 * nrm(H)))
        t.append((p + "post_attention_layernorm.weight", "BF16", 0.1 * nrm(H)))
        if types[l] == "linear_attention":
            x = p + "linear_attn."
            q, k = 1.5 * nrm(kd, H) / math.sqrt(H), 1.5 * nrm(kd, H) / math.sqrt(H)
            v, z = nrm(vd, H) / math.sqrt(H), nrm(vd, H) / math.sqrt(H)
            b, al = nrm(Hv, H) / math.sqrt(H), 0.5 * nrm(Hv, H) / math.sqrt(H)
            conv = 0.5 * nrm(2 * kd + vd, 1, K)
            A = rng.uniform(1.0, 16.0, Hv)
            dtv = np.exp(rng.uniform(math.log(1e-3), math.log(1e-1), Hv))
            dt_bias = np.log(np.expm1(dtv))                     # softplus(dt_bias) = dt
            gnorm = 1 + 0.1 * nrm(dv)
            out = nrm(H, vd) / math.sqrt(vd)
            if fam == "qwen3_next":                             # per key head g: [q_g k_g v_g z_g], [b_g a_g]
                rows, ba = [], []
                for g in range(Hk):
                    rows += [q[g * dk:(g + 1) * dk], k[g * dk:(g + 1) * dk],
                             v[g * r * dv:(g + 1) * r * dv], z[g * r * dv:(g + 1) * r * dv]]
                    ba += [b[g * r:(g + 1) * r], al[g * r:(g + 1) * r]]
                t.append((x + "in_proj_qkvz.weight", "BF16", np.concatenate(rows)))
                t.append((x + "in_proj_ba.weight", "BF16", np.concatenate(ba)))
            else:
                t.append((x + "in_proj_qkv.weight", "BF16", np.concatenate([q, k, v])))
                t.append((x + "in_proj_z.weight", "BF16", z))
                t.append((x + "in_proj_b.weight", "BF16", b))
                t.append((x + "in_proj_a.weight", "BF16", al))
            t.append((x + "conv1d.weight", "BF16", conv))
            t.append((x + "A_log", a_log_dt, np.log(A)))
            t.append((x + "dt_bias", "BF16", dt_bias))
            t.append((x + "norm.weight", norm_dt, gnorm))
            t.append((x + "out_proj.weight", "BF16", out))
        else:
            x = p + "self_attn."
            t.append((x + "q_proj.weight", "BF16", nrm(2 * NH * D, H) / math.sqrt(H)))
            t.append((x + "k_proj.weight", "BF16", nrm(KV * D, H) / math.sqrt(H)))
            t.append((x + "v_proj.weight", "BF16", nrm(KV * D, H) / math.sqrt(H)))
            t.append((x + "o_proj.weight", "BF16", nrm(H, NH * D) / math.sqrt(NH * D)))
            t.append((x + "q_norm.weight", "BF16", 0.3 * nrm(D)))
            t.append((x + "k_norm.weight", "BF16", 0.3 * nrm(D)))
        m = p + "mlp."
        if not routed[l]:
            t.append((m + "gate_proj.weight", "BF16", nrm(I, H) / math.sqrt(H)))
            t.append((m + "up_proj.weight", "BF16", nrm(I, H) / math.sqrt(H)))
            t.append((m + "down_proj.weight", "BF16", nrm(H, I) / math.sqrt(I)))
            continue
        t.append((m + "gate.weight", "BF16", 2 * nrm(E, H) / math.sqrt(H)))
        gate, up = 1.5 * nrm(E, MI, H) / math.sqrt(H), 1.5 * nrm(E, MI, H) / math.sqrt(H)
        down = nrm(E, H, MI) / math.sqrt(MI)
        if layout == "fused":
            t.append((m + "experts.gate_up_proj", "BF16", np.concatenate([gate, up], axis=1)))
            t.append((m + "experts.down_proj", "BF16", down))
        else:
            for e in range(E):
                t.append((m + f"experts.{e}.gate_proj.weight", "BF16", gate[e]))
                t.append((m + f"experts.{e}.up_proj.weight", "BF16", up[e]))
                t.append((m + f"experts.{e}.down_proj.weight", "BF16", down[e]))
        t.append((m + "shared_expert.gate_proj.weight", "BF16", 1.5 * nrm(SI, H) / math.sqrt(H)))
        t.append((m + "shared_expert.up_proj.weight", "BF16", 1.5 * nrm(SI, H) / math.sqrt(H)))
        t.append((m + "shared_expert.down_proj.weight", "BF16", nrm(H, SI) / math.sqrt(SI)))
        t.append((m + "shared_expert_gate.weight", "BF16", 2 * nrm(1, H) / math.sqrt(H)))
    t.append((pre + "norm.weight", "BF16", 0.1 * nrm(H)))
    head = nrm(V, H) / math.sqrt(H)
    if not tied:
        t.append(("lm_head.weight", "BF16", head))
    if not a.no_mtp:                                            # multi-token prediction head: not in the forward pass
        t.append(("mtp.fc.weight", "BF16", nrm(H, 2 * H) / math.sqrt(2 * H)))
        t.append(("mtp.norm.weight", "BF16", 0.1 * nrm(H)))
    info = {"family": fam, "layer_types": types, "routed_layers": [l for l in range(L) if routed[l]],
            "rotary_dim": rd, "expert_layout": layout if moe else None, "tied": tied}
    return cfg, t, info


def main(argv):
    ap = argparse.ArgumentParser(prog="synth_hybrid.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--family-config", required=True, help="a real config.json of the family (the template)")
    ap.add_argument("--out", required=True, help="directory to write model.safetensors and config.json")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--pattern", help="layer types repeated: l linear_attention, f full_attention (default: template's)")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--partial-rotary", type=float, help="partial_rotary_factor (default: template's, 0.25)")
    ap.add_argument("--rope-theta", type=float)
    ap.add_argument("--lin-k-heads", type=int, default=2)
    ap.add_argument("--lin-v-heads", type=int, default=4)
    ap.add_argument("--lin-k-dim", type=int, default=16)
    ap.add_argument("--lin-v-dim", type=int, default=16)
    ap.add_argument("--conv-kernel", type=int, default=4)
    ap.add_argument("--inter", type=int, default=96, help="intermediate_size (dense layers)")
    ap.add_argument("--moe-inter", type=int, default=32)
    ap.add_argument("--shared-inter", type=int, default=48)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, help="num_experts_per_tok (default min(real, experts/2))")
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--tied", type=int, choices=(0, 1), help="tie_word_embeddings (default: template's)")
    ap.add_argument("--expert-layout", choices=("fused", "split"))
    ap.add_argument("--a-log-dtype", choices=("F32", "BF16"))
    ap.add_argument("--norm-dtype", choices=("F32", "BF16"), help="linear_attn.norm.weight's dtype")
    ap.add_argument("--mlp-only-layers", help="comma-separated layer indices (qwen3_next)")
    ap.add_argument("--decoder-sparse-step", type=int)
    ap.add_argument("--norm-topk-prob", type=int, choices=(0, 1))
    ap.add_argument("--no-mtp", action="store_true", help="leave out the mtp.* tensors")
    a = ap.parse_args(argv)
    try:
        with open(a.family_config) as f:
            tmpl = json.load(f)
        cfg, tensors, info = build(a, tmpl)
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as e:
        print(f"synth_hybrid: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    write_safetensors(os.path.join(a.out, "model.safetensors"), tensors)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    info.update({"model_type": cfg["model_type"], "out": a.out, "tensors": len(tensors), "seed": a.seed})
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
