"""
test_hybrid_ref.py - checks that torch_ref.py's hybrid families (qwen3_5,
qwen3_5_moe, qwen3_next: Gated DeltaNet linear attention + gated full
attention) compute what transformers' modeling files define, by second
routes where there is one:

  - the gated delta rule's two forms, token by token (decode) and chunked
    (prefill, chunk 64), agree in float64 to ~1e-15 on lengths 1, 5, 63,
    64, 65, 130 from a nonzero state, and both reproduce a 2-token example
    computed by hand;
  - the causal conv against torch's F.conv1d with padding K-1 (the
    modeling files' prefill route), and fed in pieces with its carried
    window;
  - the whole model fed one token at a time with the carried state (conv
    windows, delta-rule states, KV cache) equals one prefill pass, also
    when the prefill is shorter than the conv window or crosses a chunk;
  - a Qwen3-Next checkpoint (fused in_proj_qkvz / in_proj_ba grouped per
    key head, plain RoPE) and a Qwen3.5-MoE one (separate projections,
    interleaved M-RoPE with text positions) holding the same weights give
    bit-identical logits; so do fused and per-expert MoE tensors;
  - M-RoPE's interleaving on hand-built streams, and its reduction to
    plain RoPE when the three streams are equal;
  - float32 against float64 within 1e-5;
  - every hybrid ablation moves the logits by > 2e-3 and check rejects it,
    except chunked_vs_recurrent, a positive control that must not move
    them (1e-12 in float64);
  - the real configs read as transformers reads them, the tensor names
    synth_hybrid.py writes, and the CLI (logits, check, crosscheck).

Run: /usr/bin/python3 -m pytest -q tests/oracle/test_hybrid_ref.py
"""
import copy
import io
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
torch = pytest.importorskip("torch")
import torch_ref as R  # noqa: E402
import synth_hybrid  # noqa: E402

torch.set_grad_enabled(False)
FAMILIES = "/work/shared/models/families"
PY = "/usr/bin/python3"
SEQ = 20                                                 # positions for the ablation checks
LONG = 70                                                # crosses the 64-token chunk boundary

LAYERS_4 = ["linear_attention"] * 3 + ["full_attention"]


def template(name, fallback):
    """The real config if the shared models folder is there, else a copy
    of its architecture keys (so the test runs in a bare checkout)."""
    path = os.path.join(FAMILIES, name)
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return fallback


_LIN = {"linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
        "linear_num_key_heads": 16, "full_attention_interval": 4, "head_dim": 256, "hidden_act": "silu",
        "rms_norm_eps": 1e-06, "attention_bias": False, "attn_output_gate": True, "mtp_num_hidden_layers": 1}
Q35_TEMPLATE = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
                "tie_word_embeddings": True, "text_config": dict(
                    _LIN, model_type="qwen3_5_text", hidden_size=1024, intermediate_size=3584,
                    num_hidden_layers=24, num_attention_heads=8, num_key_value_heads=2, linear_num_value_heads=16,
                    layer_types=LAYERS_4 * 6, vocab_size=248320, tie_word_embeddings=True,
                    rope_parameters={"mrope_interleaved": True, "mrope_section": [11, 11, 10],
                                     "rope_type": "default", "rope_theta": 10000000,
                                     "partial_rotary_factor": 0.25}),
                "vision_config": {"model_type": "qwen3_5", "depth": 12}}
Q35M_TEMPLATE = {"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
                 "tie_word_embeddings": False, "text_config": dict(
                     _LIN, model_type="qwen3_5_moe_text", hidden_size=2048, num_hidden_layers=40,
                     num_attention_heads=16, num_key_value_heads=2, linear_num_value_heads=32,
                     layer_types=LAYERS_4 * 10, vocab_size=248320, tie_word_embeddings=False,
                     moe_intermediate_size=512, num_experts=256, num_experts_per_tok=8,
                     shared_expert_intermediate_size=512, partial_rotary_factor=0.25,
                     rope_parameters={"mrope_interleaved": True, "mrope_section": [11, 11, 10],
                                      "partial_rotary_factor": 0.25, "rope_theta": 10000000,
                                      "rope_type": "default"}),
                 "vision_config": {"model_type": "qwen3_5_moe_vision", "depth": 27}}
QN_TEMPLATE = dict(_LIN, architectures=["Qwen3NextForCausalLM"], model_type="qwen3_next", hidden_size=2048,
                   intermediate_size=5120, num_hidden_layers=48, num_attention_heads=16, num_key_value_heads=2,
                   linear_num_value_heads=32, layer_types=LAYERS_4 * 12, vocab_size=151936,
                   decoder_sparse_step=1, mlp_only_layers=[], moe_intermediate_size=512, norm_topk_prob=True,
                   num_experts=512, num_experts_per_tok=10, shared_expert_intermediate_size=512,
                   partial_rotary_factor=0.25, rope_scaling=None, rope_theta=5000000, tie_word_embeddings=False,
                   bos_token_id=151643, eos_token_id=151645)
TEMPLATES = {"q35": ("Qwen3.5-0.8B.json", Q35_TEMPLATE), "q35m": ("Qwen3.5-35B-A3B.json", Q35M_TEMPLATE),
             "qn": ("Qwen3-Next-80B-A3B.json", QN_TEMPLATE)}

# the same weights in both layouts: F32 A_log / gated-norm weight, one theta
SAME = ["--seed", "31", "--rope-theta", "1000000", "--a-log-dtype", "F32", "--norm-dtype", "F32"]
SHAPES = {
    "q35": ("q35", ["--seed", "11", "--tied", "0"]),
    "q35_tied": ("q35", ["--seed", "12", "--layers", "2", "--pattern", "lf"]),
    "q35m": ("q35m", ["--seed", "13"]),
    "qn": ("qn", ["--seed", "14", "--layers", "5", "--mlp-only-layers", "4"]),
    # Qwen3-Next without renormalised top-k, for topk_then_softmax
    "qn_nonorm": ("qn", ["--seed", "15", "--layers", "4", "--norm-topk-prob", "0"]),
    "same_next": ("qn", SAME),
    "same_35": ("q35m", SAME),
    "same_35_split": ("q35m", SAME + ["--expert-layout", "split"]),
}


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    base = tmp_path_factory.mktemp("hybrid")
    tm = {}
    for fam, (name, fallback) in TEMPLATES.items():
        tm[fam] = base / f"{fam}-template.json"
        tm[fam].write_text(json.dumps(template(name, fallback)))
    out = {}
    for name, (fam, args) in SHAPES.items():
        d = str(base / name)
        assert synth_hybrid.main(["--family-config", str(tm[fam]), "--out", d] + args) == 0
        out[name] = d
    return out


def ids_for(cfg, n=SEQ, seed=7):
    return [int(x) for x in np.random.default_rng(seed).integers(0, cfg.vocab, size=n)]


def worst(a, b):
    return max(R.rel_l2(a[i], b[i]) for i in range(len(a)))


def f64(cfg):
    c = copy.deepcopy(cfg)
    c.f64 = True
    return c


def rand_rule_inputs(T, Hv=3, dk=8, dv=5, seed=0):
    gen = torch.Generator().manual_seed(seed)
    d = torch.float64
    q = R.l2norm_last(torch.randn(T, Hv, dk, generator=gen, dtype=d)) * dk ** -0.5
    k = R.l2norm_last(torch.randn(T, Hv, dk, generator=gen, dtype=d))
    v = torch.randn(T, Hv, dv, generator=gen, dtype=d)
    g = -2.0 * torch.rand(T, Hv, generator=gen, dtype=d)
    beta = torch.rand(T, Hv, generator=gen, dtype=d)
    S0 = torch.randn(Hv, dk, dv, generator=gen, dtype=d)
    return q, k, v, g, beta, S0


# --------------------------------------------------------------------------
# the gated delta rule

@pytest.mark.parametrize("T", [1, 5, 63, 64, 65, 130])
def test_recurrent_equals_chunked_f64(T):
    q, k, v, g, beta, S0 = rand_rule_inputs(T, seed=T)
    for init in (None, S0):
        o1, s1 = R.gated_delta_recurrent(q, k, v, g, beta, init)
        o2, s2 = R.gated_delta_chunked(q, k, v, g, beta, init)
        assert (o1 - o2).abs().max().item() < 1e-12
        assert (s1 - s2).abs().max().item() < 1e-12


def test_chunked_in_pieces_equals_whole():
    """The state after one call is the next call's start (prefill then more)."""
    q, k, v, g, beta, S0 = rand_rule_inputs(100, seed=3)
    o, s = R.gated_delta_chunked(q, k, v, g, beta, S0)
    oa, sa = R.gated_delta_chunked(q[:37], k[:37], v[:37], g[:37], beta[:37], S0)
    ob, sb = R.gated_delta_chunked(q[37:], k[37:], v[37:], g[37:], beta[37:], sa)
    assert (torch.cat([oa, ob]) - o).abs().max().item() < 1e-12
    assert (sb - s).abs().max().item() < 1e-12


def test_chunked_f32_close_to_f64():
    q, k, v, g, beta, S0 = rand_rule_inputs(130, seed=5)
    o64, _ = R.gated_delta_chunked(q, k, v, g, beta, S0)
    o32, _ = R.gated_delta_chunked(*(x.float() for x in (q, k, v, g, beta, S0)))
    assert ((o32.double() - o64).norm() / o64.norm()).item() < 1e-5


def test_delta_rule_hand_example():
    """Two tokens, one head, dk = dv = 2, worked by hand:
    t=1: S = 0; u1 = 0.5 (v1 - 0) = (1, 2); S1 = k1 u1^T = [[1, 2], [0, 0]];
         o1 = S1^T q1 = (1, 2).
    t=2: S = 0.5 S1 = [[0.5, 1], [0, 0]]; S^T k2 = 0.6 (0.5, 1) = (0.3, 0.6);
         u2 = 0.25 ((1, -1) - (0.3, 0.6)) = (0.175, -0.4);
         S2 = S + k2 u2^T = [[0.605, 0.76], [0.14, -0.32]];
         o2 = S2^T q2 = 2 (0.14, -0.32) = (0.28, -0.64)."""
    d = torch.float64
    q = torch.tensor([[[1.0, 1.0]], [[0.0, 2.0]]], dtype=d)
    k = torch.tensor([[[1.0, 0.0]], [[0.6, 0.8]]], dtype=d)
    v = torch.tensor([[[2.0, 4.0]], [[1.0, -1.0]]], dtype=d)
    g = torch.tensor([[math.log(0.5)], [math.log(0.5)]], dtype=d)
    beta = torch.tensor([[0.5], [0.25]], dtype=d)
    want_o = torch.tensor([[[1.0, 2.0]], [[0.28, -0.64]]], dtype=d)
    want_s = torch.tensor([[[0.605, 0.76], [0.14, -0.32]]], dtype=d)
    for rule in (R.gated_delta_recurrent, R.gated_delta_chunked):
        o, s = rule(q, k, v, g, beta)
        assert (o - want_o).abs().max().item() < 1e-15, rule.__name__
        assert (s - want_s).abs().max().item() < 1e-15, rule.__name__


def test_l2norm_eps_inside_rsqrt():
    x = torch.tensor([3.0, 4.0], dtype=torch.float64)
    want = x / math.sqrt(25.0 + 1e-6)                    # x * rsqrt(sum x^2 + 1e-6), not x / (|x| + eps)
    assert (R.l2norm_last(x) - want).abs().max().item() < 1e-16


# --------------------------------------------------------------------------
# the causal conv

def test_conv_against_conv1d_and_in_pieces():
    gen = torch.Generator().manual_seed(1)
    T, C, K = 11, 6, 4
    x = torch.randn(T, C, generator=gen, dtype=torch.float64)
    wt = torch.randn(C, K, generator=gen, dtype=torch.float64)
    # the modeling files' prefill: F.conv1d(groups=C, padding=K-1), first T outputs
    ref = torch.nn.functional.conv1d(x.T[None], wt[:, None, :], padding=K - 1, groups=C)[0, :, :T].T
    out, win = R.causal_conv_step(x, wt, torch.zeros(K - 1, C, dtype=torch.float64))
    assert (out - ref).abs().max().item() < 1e-14
    assert torch.equal(win, x[-(K - 1):])                # the carried window: the last K-1 inputs, pre-conv
    prev, parts = torch.zeros(K - 1, C, dtype=torch.float64), []
    for t in range(T):                                   # decode: one input at a time
        o, prev = R.causal_conv_step(x[t:t + 1], wt, prev)
        parts.append(o)
    assert (torch.cat(parts) - ref).abs().max().item() < 1e-14


# --------------------------------------------------------------------------
# whole model: decode with carried state vs prefill; f32 vs f64

MODELS = ["q35", "q35_tied", "q35m", "qn"]


@pytest.mark.parametrize("name", MODELS)
def test_decode_equals_prefill(ckpt, name):
    cfg, w = R.load_model(ckpt[name])
    ids = ids_for(cfg, LONG)
    c = f64(cfg)
    pre = R.torch_forward(c, w, ids)
    assert worst(R.hybrid_decode(c, w, ids), pre) < 1e-12
    for split, end in ((2, 12), (64, LONG)):            # prefill shorter than the conv window; a whole chunk
        st = {}
        a = R.hybrid_forward(c, w, ids[:split], state=st)
        b = np.concatenate([R.hybrid_forward(c, w, [t], state=st) for t in ids[split:end]])
        assert worst(np.concatenate([a, b]), pre[:end]) < 1e-12, split
    st = {}                                              # prefill, then another multi-token piece (chunked from a state)
    ab = np.concatenate([R.hybrid_forward(c, w, ids[:30], state=st), R.hybrid_forward(c, w, ids[30:], state=st)])
    assert worst(ab, pre) < 1e-12
    n = 24                                               # float32: decode against prefill
    assert worst(R.hybrid_decode(cfg, w, ids[:n]), R.torch_forward(cfg, w, ids[:n])) < 1e-5


@pytest.mark.parametrize("name", MODELS)
def test_f32_against_f64(ckpt, name):
    cfg, w = R.load_model(ckpt[name])
    ids = ids_for(cfg, LONG)
    t32 = R.torch_forward(cfg, w, ids)
    t64 = R.torch_forward(f64(cfg), w, ids)
    assert t32.dtype == np.float32 and t64.dtype == np.float64
    assert worst(t32, t64) < 1e-5


def test_fused_qkvz_layout_equals_separate(ckpt):
    """Qwen3-Next's in_proj_qkvz / in_proj_ba (grouped per key head) and
    plain RoPE, against Qwen3.5-MoE's in_proj_qkv / z / b / a and M-RoPE on
    text positions: the same weights (synth_hybrid draws them in one order),
    bit-identical logits; likewise fused against per-expert MoE tensors."""
    cn, wn = R.load_model(ckpt["same_next"])
    c5, w5 = R.load_model(ckpt["same_35"])
    cs, ws = R.load_model(ckpt["same_35_split"])
    assert cn.hybrid == "qwen3_next" and c5.hybrid == "qwen3_5_moe" and cn.mrope is None and c5.mrope
    ids = ids_for(cn, LONG)
    ln = R.torch_forward(cn, wn, ids)
    assert np.array_equal(ln, R.torch_forward(c5, w5, ids))
    assert np.array_equal(ln, R.torch_forward(cs, ws, ids))
    # and the flat reading of the fused tensor is a different function
    c = copy.deepcopy(cn)
    R.ablate(c, ["qkvz_flat"])
    assert worst(R.torch_forward(c, wn, ids), ln) > 2e-3


# --------------------------------------------------------------------------
# RoPE: partial rotary and M-RoPE

def test_mrope_interleave_layout():
    n = 32                                               # rotary_dim 64 (head_dim 256 x 0.25)
    streams = torch.stack([torch.full((1, n), float(s)) for s in range(3)])
    got = R.mrope_freqs(streams, [11, 11, 10])[0].tolist()
    want = [1.0 if i % 3 == 1 else 2.0 if i % 3 == 2 and i < 30 else 0.0 for i in range(n)]
    assert got == want
    assert got.count(0.0) == 11 and got.count(1.0) == 11 and got.count(2.0) == 10


def test_mrope_text_positions_are_plain_rope(ckpt):
    c5, _ = R.load_model(ckpt["same_35"])
    cn, _ = R.load_model(ckpt["same_next"])
    pos = list(range(0, 200, 3))
    for f in (False, True):
        a, b = R.hybrid_rope_table(c5, pos, c5.rotary_dim, f), R.hybrid_rope_table(cn, pos, cn.rotary_dim, f)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    cos, sin = R.hybrid_rope_table(c5, pos, c5.rotary_dim, False)
    half = c5.rotary_dim // 2
    assert cos.shape == (len(pos), c5.rotary_dim) and torch.equal(cos[:, :half], cos[:, half:])
    assert c5.rotary_dim == int(c5.head_dim * 0.25)


def test_inv_freq_float32_as_transformers():
    cfg, _ = R.Config.__new__(R.Config), None
    cfg.theta = 5e6
    inv = R.hybrid_inv_freq(cfg, 64, False)
    assert inv.dtype == torch.float32 and inv.shape == (32,)
    ref = np.array([1.0 / 5e6 ** (2 * i / 64) for i in range(32)])
    assert np.max(np.abs(inv.numpy() / ref - 1)) < 1e-6


# --------------------------------------------------------------------------
# ablations

APPLICABLE = {
    "q35": ["no_conv", "no_conv_silu", "no_l2norm", "no_q_scale", "no_decay", "no_dt_bias", "no_beta",
            "no_z_gate", "gated_norm_1p", "kv_head_tile", "no_output_gate", "gate_halves", "full_rotary",
            "norm_plain_w", "qk_norm"],
    "q35m": ["no_shared_expert", "no_shared_gate", "no_norm_topk"],
    "qn": ["qkvz_flat", "no_shared_expert", "no_shared_gate", "no_norm_topk"],
    "qn_nonorm": ["topk_then_softmax"],
}
REFUSED = {
    "q35": ["qkvz_flat", "no_shared_expert", "no_shared_gate", "no_norm_topk", "window", "no_sinks", "llama3"],
    "q35m": ["qkvz_flat", "topk_then_softmax"],
    "qn": ["topk_then_softmax"],
    "qn_nonorm": ["no_norm_topk"],
}


def test_every_hybrid_ablation_is_exercised():
    covered = {f for fs in APPLICABLE.values() for f in fs} | {"chunked_vs_recurrent"}
    assert set(R.HYBRID_ABLATIONS) <= covered


@pytest.mark.parametrize("name,feature", [(n, f) for n, fs in APPLICABLE.items() for f in fs])
def test_ablation_changes_logits(ckpt, name, feature):
    cfg, w = R.load_model(ckpt[name])
    prompt = ids_for(cfg)[:6]
    gen = R.greedy(cfg, w, prompt, SEQ - 5)
    seq = prompt + gen[:-1]
    plain = R.torch_forward(cfg, w, seq)
    c = copy.deepcopy(cfg)
    R.ablate(c, [feature])
    assert worst(R.torch_forward(c, w, seq), plain) > 2e-3, feature
    sink = open(os.devnull, "w")
    assert not R.compare(c, w, prompt, gen, plain[len(prompt) - 1:], 1e-4, 1e-3, 3, out=sink)
    assert R.compare(cfg, w, prompt, gen, plain[len(prompt) - 1:], 1e-4, 1e-3, 3, out=sink)


@pytest.mark.parametrize("name", ["q35", "qn"])
def test_chunked_vs_recurrent_is_a_positive_control(ckpt, name):
    cfg, w = R.load_model(ckpt[name])
    ids = ids_for(cfg, LONG)
    c = copy.deepcopy(cfg)
    R.ablate(c, ["chunked_vs_recurrent"])
    assert worst(R.torch_forward(f64(c), w, ids), R.torch_forward(f64(cfg), w, ids)) < 1e-12
    assert worst(R.torch_forward(c, w, ids), R.torch_forward(cfg, w, ids)) < 1e-5


@pytest.mark.parametrize("name,feature", [(n, f) for n, fs in REFUSED.items() for f in fs])
def test_noop_ablation_refused(ckpt, name, feature):
    cfg, _ = R.load_model(ckpt[name])
    with pytest.raises(ValueError):
        R.ablate(cfg, [feature])


# --------------------------------------------------------------------------
# configs, tensors, CLI

def test_real_configs_read_as_transformers_does(tmp_path):
    def cfg_of(fam):
        name, fallback = TEMPLATES[fam]
        p = tmp_path / name
        p.write_text(json.dumps(template(name, fallback)))
        return R.Config(str(p))
    a = cfg_of("q35")
    assert (a.hybrid, a.hidden, a.layers, a.heads, a.kv_heads, a.head_dim) == ("qwen3_5", 1024, 24, 8, 2, 256)
    assert a.layer_types == LAYERS_4 * 6 and a.tied and not a.moe and a.inter == 3584
    assert (a.lin_k_heads, a.lin_v_heads, a.lin_k_dim, a.lin_v_dim, a.conv_kernel) == (16, 16, 128, 128, 4)
    assert a.rotary_dim == 64 and a.mrope == [11, 11, 10] and a.theta == 1e7 and a.eps == 1e-6
    b = cfg_of("q35m")
    assert (b.hybrid, b.moe, b.experts, b.top_k, b.moe_inter, b.shared_inter) == \
        ("qwen3_5_moe", "qwen3_5_moe", 256, 8, 512, 512)
    assert b.norm_topk and all(b.sparse) and not b.tied and b.lin_v_heads == 32 and b.rotary_dim == 64
    n = cfg_of("qn")
    assert (n.hybrid, n.experts, n.top_k, n.theta, n.mrope, n.rotary_dim) == \
        ("qwen3_next", 512, 10, 5e6, None, 64)
    assert n.norm_topk and all(n.sparse) and n.inter == 5120 and n.layer_types == LAYERS_4 * 12


def test_config_defaults_and_refusals(tmp_path):
    base = dict(QN_TEMPLATE, num_hidden_layers=8)
    del base["layer_types"], base["partial_rotary_factor"], base["norm_topk_prob"]
    p = tmp_path / "c.json"
    p.write_text(json.dumps(dict(base, layer_types=None)))
    c = R.Config(str(p))
    assert c.layer_types == LAYERS_4 * 2                 # full_attention_interval 4
    assert c.rotary_dim == 64 and c.norm_topk            # partial_rotary_factor 0.25, norm_topk_prob true
    p.write_text(json.dumps(dict(base, layer_types=["mamba", "mamba", "mamba", "attention"] * 2)))
    assert R.Config(str(p)).layer_types == LAYERS_4 * 2  # remap_legacy_layer_types
    for bad in ({"attn_output_gate": False}, {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
                {"partial_rotary_factor": 0.5, "rope_parameters": {"partial_rotary_factor": 0.25}},
                {"linear_num_value_heads": 24}):
        p.write_text(json.dumps(dict(base, **bad)))
        with pytest.raises(ValueError):
            R.Config(str(p))


def header(d):
    with open(os.path.join(d, "model.safetensors"), "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n))


def test_synth_tensor_names_and_shapes(ckpt):
    h = header(ckpt["q35"])
    p = "model.language_model.layers.0.linear_attn."
    # Hk 2, Hv 4, dk dv 16, hidden 64: conv_dim 2*32 + 64 = 128
    assert h[p + "in_proj_qkv.weight"]["shape"] == [128, 64] and h[p + "in_proj_z.weight"]["shape"] == [64, 64]
    assert h[p + "in_proj_b.weight"]["shape"] == [4, 64] and h[p + "in_proj_a.weight"]["shape"] == [4, 64]
    assert h[p + "conv1d.weight"]["shape"] == [128, 1, 4] and h[p + "out_proj.weight"]["shape"] == [64, 64]
    assert h[p + "A_log"]["dtype"] == "F32" and h[p + "norm.weight"]["dtype"] == "F32"
    assert h[p + "dt_bias"]["shape"] == [4] and h[p + "norm.weight"]["shape"] == [16]
    s = "model.language_model.layers.3.self_attn."
    assert h[s + "q_proj.weight"]["shape"] == [256, 64] and h[s + "o_proj.weight"]["shape"] == [64, 128]
    assert h[s + "q_norm.weight"]["shape"] == [32] and "mtp.fc.weight" in h and "lm_head.weight" in h
    assert "lm_head.weight" not in header(ckpt["q35_tied"])
    n = header(ckpt["qn"])
    p = "model.layers.0.linear_attn."
    assert n[p + "in_proj_qkvz.weight"]["shape"] == [192, 64] and n[p + "in_proj_ba.weight"]["shape"] == [8, 64]
    assert n["model.layers.0.mlp.experts.7.gate_proj.weight"]["shape"] == [32, 64]
    assert n["model.layers.0.mlp.shared_expert_gate.weight"]["shape"] == [1, 64]
    assert n["model.layers.4.mlp.gate_proj.weight"]["shape"] == [96, 64]          # mlp_only_layers: dense
    m = header(ckpt["q35m"])
    assert m["model.language_model.layers.1.mlp.experts.gate_up_proj"]["shape"] == [8, 64, 64]
    assert m["model.language_model.layers.1.mlp.experts.down_proj"]["shape"] == [8, 64, 32]
    assert m["model.language_model.layers.1.mlp.shared_expert.down_proj.weight"]["shape"] == [64, 48]
    with open(os.path.join(ckpt["q35"], "config.json")) as f:
        c = json.load(f)
    tc = c["text_config"]
    assert tc["rope_parameters"]["mrope_section"] == [1, 1, 2] and tc["layer_types"] == LAYERS_4


def test_loader_drops_mtp_and_prefix(ckpt):
    cfg, w = R.load_model(ckpt["q35"])
    assert not any(n.startswith(("mtp.", "model.language_model.")) for n in w)
    assert "model.layers.0.linear_attn.in_proj_qkv.weight" in w
    cfg, w = R.load_model(ckpt["q35_tied"])
    assert w["lm_head.weight"] is w["model.embed_tokens.weight"]


def test_decay_in_a_meaningful_range(ckpt):
    """synth_hybrid's A_log / dt_bias put exp(g) mostly in (0.2, 1), not ~0."""
    cfg, w = R.load_model(ckpt["q35"])
    p = "model.layers.0.linear_attn."
    A, dtb = np.exp(w[p + "A_log"].astype(np.float64)), w[p + "dt_bias"].astype(np.float64)
    decay = np.exp(-A * np.log1p(np.exp(dtb)))           # a = 0
    assert np.all(decay > 0.15) and np.all(decay < 0.9999)


def test_cli_logits_check_crosscheck(ckpt, tmp_path):
    """The logits subcommand as a real process; check and crosscheck
    through main() in this process (torch imports once)."""
    d = ckpt["qn"]
    cfg, w = R.load_model(d)
    prompt = ids_for(cfg)[:5]
    gen = R.greedy(cfg, w, prompt, 8)
    seq = prompt + gen[:-1]
    tr = os.path.join(HERE, "torch_ref.py")
    dump = tmp_path / "l.f32"
    r = subprocess.run([PY, tr, "logits", "--model-dir", d, "--ids", ",".join(map(str, seq)),
                        "--from", str(len(prompt) - 1), "--out", str(dump)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["argmax"] == gen
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"prompt_token_ids": prompt, "generated_token_ids": gen}))
    base = ["check", "--model-dir", d, "--json", str(run), "--logits", str(dump)]
    assert R.main(base) == 0
    buf = io.StringIO()                                  # check's report (compare's default out is bound at import)
    assert R.compare(cfg, w, prompt, gen, np.fromfile(str(dump), dtype="<f4").reshape(len(gen), -1),
                     1e-4, 1e-3, 3, out=buf)
    assert "routing: smallest nonzero top-k boundary gap" in buf.getvalue()
    assert R.main(base + ["--f64"]) == 0
    assert R.main(base + ["--ablate", "no_conv"]) == 1
    assert R.main(base + ["--ablate", "chunked_vs_recurrent"]) == 0
    assert R.main(base + ["--ablate", "qkvz_flat", "--ablate", "no_shared_gate"]) == 1
    assert R.main(base + ["--ablate", "no_sinks"]) == 2             # not this family's: refused, usage error
    assert R.main(["crosscheck", "--model-dir", d, "--prompt-ids", "1,2,3", "--gen-toks", "4"]) == 0
