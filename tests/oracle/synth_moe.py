#!/usr/bin/python3
"""
synth_moe.py - small synthetic checkpoints (model.safetensors + config.json)
of the two mixture-of-experts families, gpt-oss and Qwen3-MoE, for tests
that compare cis2 with tests/oracle/torch_ref.py.

Written from: the published configs (a family's real config.json, e.g.
/work/shared/models/families/gpt-oss-20b.json or Qwen3-30B-A3B.json, is the
template; its model_type picks the family) and the tensor names, shapes
and dtypes that transformers' modeling_gpt_oss.py / integrations/mxfp4.py
(Mxfp4GptOssExperts) and modeling_qwen3_moe.py give and the published
checkpoints carry.  It shares no code with torch_ref.py (its own
safetensors writer, struct + json), so a bug in one does not hide in the
other.

  synth_moe.py --family-config REAL.json --out DIR [--seed N]
      [--layers L] [--hidden H] [--heads N] [--kv-heads N] [--head-dim D]
      [--inter I] [--moe-inter I] [--experts E] [--top-k K] [--vocab V]
      [--window W] [--rope-original N]
      [--decoder-sparse-step S] [--mlp-only-layers 1,3] [--norm-topk-prob 0|1]
      [--router-tie-group G] [--unquantized]
      [--gate-up-scale C] [--down-scale C] [--scale-spread S]

The config is the template with those fields replaced (the rest kept:
rope_theta, rope_scaling, eps, ...; gpt-oss's layer_types repeat the
template's pattern; token ids beyond the vocab are moved into it; with
--rope-original the yarn original_max_position_embeddings is N and
max_position_embeddings is factor * N, so every transformers version reads
the same factor).  Weights are random from --seed:

  both:     model.embed_tokens.weight [V, H], lm_head.weight [V, H] (untied),
            model.norm.weight [H], per layer input_layernorm /
            post_attention_layernorm [H], self_attn.{q,k,v,o}_proj.weight
            ([heads*D, H], [kv*D, H], [kv*D, H], [H, heads*D]), all BF16.
  gpt_oss:  self_attn.{q,k,v,o}_proj.bias, self_attn.sinks [heads],
            mlp.router.weight [E, H], mlp.router.bias [E] (BF16);
            mlp.experts.gate_up_proj_blocks U8 [E, 2I, H/32, 16],
            _scales U8 [E, 2I, H/32], _bias BF16 [E, 2I];
            mlp.experts.down_proj_blocks U8 [E, H, I/32, 16], _scales U8
            [E, H, I/32], _bias BF16 [E, H].  Blocks are random bytes (any
            e2m1 code in either nibble); scales are 2^(byte - 127) bytes
            spread around a centre chosen from the fan-in so that gate/up
            pre-activations have a standard deviation near 4 (the +-7 clamp
            acts on some) and the down projection's output near 1
            (--gate-up-scale / --down-scale set the centres, --scale-spread
            the +- range).  --unquantized writes GptOssExperts' float
            tensors instead: mlp.experts.gate_up_proj BF16 [E, H, 2I] and
            down_proj [E, I, H] (no quantization_config in config.json).
  qwen3_moe: self_attn.q_norm / k_norm [D]; routed layers mlp.gate.weight
            [E, H], mlp.experts.{e}.{gate,up}_proj.weight [I, H],
            down_proj.weight [H, I] (I = moe_intermediate_size); dense
            layers mlp.{gate,up}_proj.weight [intermediate, H],
            down_proj.weight [H, intermediate].

--router-tie-group G copies router row (and bias) (e // G) * G to row e,
so each group of G consecutive experts gets bit-identical router logits;
with k % G != 0 every token's top-k boundary falls inside a group and the
tie rule (lower index wins) decides which experts run.

Prints one JSON line describing what it wrote.  Exit 0, or 2 on bad
arguments.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np


def bf16_bytes(a):
    """float -> bfloat16 by round-to-nearest-even on the float32 bits."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype("<u2").tobytes()


def write_safetensors(path, tensors):
    """tensors: list of (name, dtype "BF16" | "F32" | "U8", array)."""
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, dt, arr in tensors:
        if dt == "BF16":
            b = bf16_bytes(arr)
        elif dt == "F32":
            b = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        elif dt == "U8":
            b = np.ascontiguousarray(arr, dtype=np.uint8).tobytes()
        else:
            raise ValueError(dt)
        header[name] = {"dtype": dt, "shape": [int(x) for x in arr.shape], "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


E2M1_RMS = math.sqrt(sum(v * v for v in (0, .5, 1, 1.5, 2, 3, 4, 6)) / 8)   # of a uniformly random code


def scale_centre(fan_in, target_std, input_rms):
    """The scale byte whose 2^(byte - 127) makes random codes times inputs
    of this rms sum to about target_std over fan_in terms."""
    return 127 + int(round(math.log2(target_std / (E2M1_RMS * math.sqrt(fan_in) * input_rms))))


def mxfp4(rng, experts, rows, cols, centre, spread):
    if cols % 32:
        raise ValueError(f"MXFP4 needs the input width {cols} to be a multiple of 32")
    blocks = rng.integers(0, 256, size=(experts, rows, cols // 32, 16), dtype=np.uint8)
    scales = rng.integers(centre - spread, centre + spread + 1, size=(experts, rows, cols // 32))
    if scales.min() < 0 or scales.max() > 254:
        raise ValueError("MXFP4 scale bytes out of 0..254")
    return blocks, scales.astype(np.uint8)


def build(a, tmpl):
    mt = tmpl.get("model_type")
    if mt not in ("gpt_oss", "qwen3_moe"):
        raise ValueError(f"model_type {mt!r}: not gpt_oss or qwen3_moe")
    gpt = mt == "gpt_oss"
    rng = np.random.default_rng(a.seed)
    H, L, NH, KV, D, V = a.hidden, a.layers, a.heads, a.kv_heads, a.head_dim, a.vocab
    E = a.experts
    real_k = int(tmpl.get("num_experts_per_tok", 4))
    K = a.top_k if a.top_k else max(1, min(real_k, E // 2))
    I = a.inter if a.inter else (64 if gpt else 128)
    MI = a.moe_inter if a.moe_inter else 32
    if NH % KV or not 0 < K <= E:
        raise ValueError("heads must be a multiple of kv-heads, and 0 < top-k <= experts")
    if gpt and (H % 32 or I % 32) and not a.unquantized:
        raise ValueError("gpt-oss MXFP4 needs --hidden and --inter multiples of 32")
    if gpt and 2 * I == H:
        raise ValueError("2 * inter == hidden makes the [E, H, 2I] orientation ambiguous; pick another")

    cfg = dict(tmpl)
    cfg.update({"hidden_size": H, "num_hidden_layers": L, "num_attention_heads": NH, "num_key_value_heads": KV,
                "head_dim": D, "vocab_size": V, "num_experts_per_tok": K, "tie_word_embeddings": False})
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        if isinstance(cfg.get(key), int) and cfg[key] >= V:
            cfg[key] = V - 1 - ("pad_token_id", "bos_token_id", "eos_token_id").index(key)
    if gpt:
        pattern = tmpl.get("layer_types") or ["sliding_attention", "full_attention"]
        cfg.update({"intermediate_size": I, "num_local_experts": E, "experts_per_token": K,
                    "layer_types": [pattern[l % len(pattern)] for l in range(L)]})
        if a.window:
            cfg["sliding_window"] = a.window
        if a.unquantized:
            cfg.pop("quantization_config", None)
    else:
        cfg.update({"intermediate_size": I, "moe_intermediate_size": MI, "num_experts": E,
                    "max_window_layers": L})
        if a.decoder_sparse_step:
            cfg["decoder_sparse_step"] = a.decoder_sparse_step
        if a.mlp_only_layers is not None:
            cfg["mlp_only_layers"] = [int(x) for x in a.mlp_only_layers.split(",") if x.strip()]
        else:
            cfg["mlp_only_layers"] = [x for x in cfg.get("mlp_only_layers") or [] if x < L]
        if a.norm_topk_prob is not None:
            cfg["norm_topk_prob"] = bool(a.norm_topk_prob)
    rs = cfg.get("rope_scaling")
    if a.rope_original:
        if not rs or rs.get("rope_type", rs.get("type")) != "yarn":
            raise ValueError("--rope-original needs a yarn rope_scaling in the template")
        rs = dict(rs, original_max_position_embeddings=a.rope_original)
        cfg["rope_scaling"] = rs
        cfg["max_position_embeddings"] = int(round(float(rs["factor"]) * a.rope_original))
    if a.rope_theta:
        cfg["rope_theta"] = a.rope_theta

    # which layers route (Qwen3MoeDecoderLayer's rule; gpt-oss: all)
    step = int(cfg.get("decoder_sparse_step", 1) or 1)
    only = cfg.get("mlp_only_layers") or []
    routed = [True] * L if gpt else [(l not in only) and E > 0 and (l + 1) % step == 0 for l in range(L)]

    t = []
    nrm = lambda *s: rng.standard_normal(s)
    t.append(("model.embed_tokens.weight", "BF16", nrm(V, H)))
    for l in range(L):
        p = f"model.layers.{l}."
        t.append((p + "input_layernorm.weight", "BF16", 1 + 0.1 * nrm(H)))
        t.append((p + "post_attention_layernorm.weight", "BF16", 1 + 0.1 * nrm(H)))
        for n, rows, sd in (("q", NH * D, 2 / math.sqrt(H)), ("k", KV * D, 2 / math.sqrt(H)),
                            ("v", KV * D, 1 / math.sqrt(H))):
            t.append((p + f"self_attn.{n}_proj.weight", "BF16", sd * nrm(rows, H)))
            if gpt:
                t.append((p + f"self_attn.{n}_proj.bias", "BF16", 0.3 * nrm(rows)))
        t.append((p + "self_attn.o_proj.weight", "BF16", nrm(H, NH * D) / math.sqrt(NH * D)))
        if gpt:
            t.append((p + "self_attn.o_proj.bias", "BF16", 0.1 * nrm(H)))
            t.append((p + "self_attn.sinks", "BF16", 0.5 + nrm(NH)))
        else:
            t.append((p + "self_attn.q_norm.weight", "BF16", 1 + 0.3 * nrm(D)))
            t.append((p + "self_attn.k_norm.weight", "BF16", 1 + 0.3 * nrm(D)))
        if not routed[l]:
            t.append((p + "mlp.gate_proj.weight", "BF16", nrm(I, H) / math.sqrt(H)))
            t.append((p + "mlp.up_proj.weight", "BF16", nrm(I, H) / math.sqrt(H)))
            t.append((p + "mlp.down_proj.weight", "BF16", nrm(H, I) / math.sqrt(I)))
            continue
        rw = 2 * nrm(E, H) / math.sqrt(H)
        rb = 0.5 * nrm(E)
        if a.router_tie_group > 1:
            src = (np.arange(E) // a.router_tie_group) * a.router_tie_group
            rw, rb = rw[src], rb[src]
        if gpt:
            t.append((p + "mlp.router.weight", "BF16", rw))
            t.append((p + "mlp.router.bias", "BF16", rb))
            x = p + "mlp.experts."
            if a.unquantized:
                t.append((x + "gate_up_proj", "BF16", 4 * nrm(E, H, 2 * I) / math.sqrt(H)))
            else:
                c = a.gate_up_scale if a.gate_up_scale else scale_centre(H, 4.0, 1.0)
                blocks, scales = mxfp4(rng, E, 2 * I, H, c, a.scale_spread)
                t.append((x + "gate_up_proj_blocks", "U8", blocks))
                t.append((x + "gate_up_proj_scales", "U8", scales))
            t.append((x + "gate_up_proj_bias", "BF16", 0.5 * nrm(E, 2 * I)))
            if a.unquantized:
                t.append((x + "down_proj", "BF16", nrm(E, I, H) / (8 * math.sqrt(I))))
            else:
                c = a.down_scale if a.down_scale else scale_centre(I, 1.0, 8.0)
                blocks, scales = mxfp4(rng, E, H, I, c, a.scale_spread)
                t.append((x + "down_proj_blocks", "U8", blocks))
                t.append((x + "down_proj_scales", "U8", scales))
            t.append((x + "down_proj_bias", "BF16", 0.2 * nrm(E, H)))
        else:
            t.append((p + "mlp.gate.weight", "BF16", rw))
            for e in range(E):
                x = p + f"mlp.experts.{e}."
                t.append((x + "gate_proj.weight", "BF16", 1.5 * nrm(MI, H) / math.sqrt(H)))
                t.append((x + "up_proj.weight", "BF16", 1.5 * nrm(MI, H) / math.sqrt(H)))
                t.append((x + "down_proj.weight", "BF16", nrm(H, MI) / math.sqrt(MI)))
    t.append(("model.norm.weight", "BF16", 1 + 0.1 * nrm(H)))
    t.append(("lm_head.weight", "BF16", nrm(V, H) / math.sqrt(H)))
    return cfg, t, {"routed_layers": [l for l in range(L) if routed[l]], "top_k": K, "experts": E}


def main(argv):
    ap = argparse.ArgumentParser(prog="synth_moe.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--family-config", required=True, help="a real config.json of the family (the template)")
    ap.add_argument("--out", required=True, help="directory to write model.safetensors and config.json")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=16)
    ap.add_argument("--inter", type=int, help="intermediate_size (gpt-oss experts; qwen3_moe dense layers)")
    ap.add_argument("--moe-inter", type=int, help="qwen3_moe moe_intermediate_size (default 32)")
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, help="num_experts_per_tok (default min(real, experts/2))")
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--window", type=int, help="gpt-oss sliding_window (default: the template's)")
    ap.add_argument("--rope-original", type=int, help="yarn original_max_position_embeddings")
    ap.add_argument("--rope-theta", type=float)
    ap.add_argument("--decoder-sparse-step", type=int)
    ap.add_argument("--mlp-only-layers", help="comma-separated layer indices (qwen3_moe)")
    ap.add_argument("--norm-topk-prob", type=int, choices=(0, 1))
    ap.add_argument("--router-tie-group", type=int, default=1,
                    help="duplicate router rows in groups of G consecutive experts (exact ties)")
    ap.add_argument("--unquantized", action="store_true", help="gpt-oss: float experts instead of MXFP4")
    ap.add_argument("--gate-up-scale", type=int, help="gpt-oss gate_up scale byte centre")
    ap.add_argument("--down-scale", type=int, help="gpt-oss down scale byte centre")
    ap.add_argument("--scale-spread", type=int, default=1, help="scale bytes are centre +- this")
    a = ap.parse_args(argv)
    try:
        with open(a.family_config) as f:
            tmpl = json.load(f)
        cfg, tensors, info = build(a, tmpl)
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as e:
        print(f"synth_moe: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    if a.router_tie_group > 1 and info["top_k"] % a.router_tie_group == 0:
        print(f"synth_moe: note: top-k {info['top_k']} is a multiple of the tie group "
              f"{a.router_tie_group}, so ties never straddle the top-k boundary", file=sys.stderr)
    os.makedirs(a.out, exist_ok=True)
    write_safetensors(os.path.join(a.out, "model.safetensors"), tensors)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    info.update({"model_type": cfg["model_type"], "out": a.out, "tensors": len(tensors), "seed": a.seed})
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
