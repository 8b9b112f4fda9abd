"""
test_moe_ref.py - checks that torch_ref.py's mixture-of-experts families
(qwen3_moe, gpt_oss) compute what transformers' modeling files define, by
second routes where there is one:

  - the MXFP4 decode against the OCP MX e2m1 table written out here, a
    hand-built block, and a byte-by-byte loop; the [E, G*32, R] transpose
    against an unquantised checkpoint holding the decoded weights in
    GptOssExperts' [E, H, 2I] layout (same logits, bit for bit);
  - YaRN's frequencies against mpmath (50 digits) of the formulas, and the
    attention factor against 0.1 ln(32) + 1 (gpt-oss's);
  - the sink softmax against a 3-key example computed by hand (mpmath);
  - the top-k tie rule (lower index) on hand arrays, and on checkpoints
    whose router rows tie exactly (synth_moe.py --router-tie-group);
  - Qwen3MoeDecoderLayer's routed-layer rule on hand cases;
  - torch float32 against torch float64 and against the separately written
    numpy float64 path (token by token) to 1e-5 relative;
  - every MoE ablation moves the logits by > 2e-3 (20x check's tolerance),
    check rejects it, and the numpy path computes the same ablated function;
  - the CLI (logits, then check on that dump) accepts and rejects.

Run: /usr/bin/python3 -m pytest -q tests/oracle/test_moe_ref.py  (about 15 s)
Written from the same transformers files as torch_ref.py (see its
docstring and tests/oracle/README.md), checked here by other means.
"""
import copy
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
mpmath = pytest.importorskip("mpmath")
import torch_ref as R  # noqa: E402
import synth_moe  # noqa: E402

torch.set_grad_enabled(False)
FAMILIES = "/work/shared/models/families"
GPT_REAL = os.path.join(FAMILIES, "gpt-oss-20b.json")
QWEN_REAL = os.path.join(FAMILIES, "Qwen3-30B-A3B.json")
PY = "/usr/bin/python3"
SEQ = 16                                                 # positions per test sequence (> the window of 4)


def template(path, fallback):
    """The real config if the shared models folder is there, else a copy
    of its fields that matter (so the test runs in a bare checkout)."""
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return fallback


GPT_TEMPLATE = {
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "attention_bias": True, "head_dim": 64,
    "hidden_act": "silu", "hidden_size": 2880, "intermediate_size": 2880, "num_attention_heads": 64,
    "num_key_value_heads": 8, "num_local_experts": 32, "num_experts_per_tok": 4, "experts_per_token": 4,
    "num_hidden_layers": 24, "layer_types": ["sliding_attention", "full_attention"] * 12,
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 150000, "sliding_window": 128,
    "swiglu_limit": 7.0, "tie_word_embeddings": False, "vocab_size": 201088, "eos_token_id": 200002,
    "pad_token_id": 199999, "quantization_config": {"quant_method": "mxfp4"},
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                     "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": False}}
QWEN_TEMPLATE = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "attention_bias": False,
    "decoder_sparse_step": 1, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048,
    "intermediate_size": 6144, "max_position_embeddings": 40960, "mlp_only_layers": [],
    "moe_intermediate_size": 768, "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 1000000.0, "sliding_window": None, "tie_word_embeddings": False,
    "use_sliding_window": False, "vocab_size": 151936, "bos_token_id": 151643, "eos_token_id": 151645}


# --------------------------------------------------------------------------
# fixtures: small checkpoints from synth_moe.py

SHAPES = {
    # heads * head_dim = 96 != hidden 64 in both, as in the real models
    "gpt": ("gpt", ["--layers", "2", "--head-dim", "24", "--window", "4", "--seed", "11"]),
    "gpt_tie": ("gpt", ["--layers", "2", "--head-dim", "24", "--window", "4", "--seed", "12",
                        "--router-tie-group", "3"]),
    "gpt_plain": ("gpt", ["--layers", "2", "--head-dim", "24", "--window", "4", "--seed", "13",
                          "--unquantized"]),
    "qwen": ("qwen", ["--layers", "3", "--head-dim", "24", "--mlp-only-layers", "1", "--seed", "21"]),
    "qwen_tie": ("qwen", ["--layers", "4", "--head-dim", "24", "--decoder-sparse-step", "2",
                          "--norm-topk-prob", "0", "--router-tie-group", "3", "--seed", "22"]),
}


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    base = tmp_path_factory.mktemp("moe")
    tm = {"gpt": base / "gpt-template.json", "qwen": base / "qwen-template.json"}
    tm["gpt"].write_text(json.dumps(template(GPT_REAL, GPT_TEMPLATE)))
    tm["qwen"].write_text(json.dumps(template(QWEN_REAL, QWEN_TEMPLATE)))
    out = {}
    for name, (fam, args) in SHAPES.items():
        d = str(base / name)
        assert synth_moe.main(["--family-config", str(tm[fam]), "--out", d] + args) == 0
        out[name] = d
    return out


def ids_for(cfg, seed=7):
    return [int(x) for x in np.random.default_rng(seed).integers(0, cfg.vocab, size=SEQ)]


def worst(a, b):
    return max(R.rel_l2(a[i], b[i]) for i in range(len(a)))


# --------------------------------------------------------------------------
# MXFP4

# OCP Microscaling Formats (MX) v1.0, FP4 E2M1: S EE M, exponent bias 1,
# no inf / nan; written out from the spec's table, not computed
OCP_E2M1 = {0b0000: 0.0, 0b0001: 0.5, 0b0010: 1.0, 0b0011: 1.5, 0b0100: 2.0, 0b0101: 3.0, 0b0110: 4.0,
            0b0111: 6.0, 0b1000: -0.0, 0b1001: -0.5, 0b1010: -1.0, 0b1011: -1.5, 0b1100: -2.0,
            0b1101: -3.0, 0b1110: -4.0, 0b1111: -6.0}


def test_e2m1_tables_match_ocp():
    for code, v in OCP_E2M1.items():
        for got in (float(R.FP4_VALUES[code]), R.e2m1_value(code)):
            assert got == v and math.copysign(1, got) == math.copysign(1, v), (code, got, v)


def test_mxfp4_hand_block():
    # one expert, 2 rows (outputs), 2 blocks of 32 (64 inputs)
    blocks = np.zeros((1, 2, 2, 16), dtype=np.uint8)
    scales = np.full((1, 2, 2), 127, dtype=np.uint8)
    blocks[0, 0, 0, 0] = 0x21          # low nibble 1 (+0.5) -> input 0, high 2 (+1.0) -> input 1
    blocks[0, 0, 0, 15] = 0xF7         # low 7 (+6) -> input 30, high 15 (-6) -> input 31
    blocks[0, 0, 1, 3] = 0x9A          # block 1: low 10 (-1) -> input 32+6, high 9 (-0.5) -> 32+7
    scales[0, 0, 1] = 129              # block 1 times 2^2
    blocks[0, 1, 0, 1] = 0x0C          # row 1: low 12 (-2) -> input 2, high 0 -> input 3
    scales[0, 1, 0] = 125              # times 2^-2
    want = np.zeros((2, 64))           # [row, input]
    want[0, 0], want[0, 1], want[0, 30], want[0, 31] = 0.5, 1.0, 6.0, -6.0
    want[0, 38], want[0, 39] = -4.0, -2.0
    want[1, 2] = -0.5
    got = R.mxfp4_dequant(blocks, scales)
    assert got.shape == (1, 64, 2) and got.dtype == np.float32       # [E, inputs, rows]: x @ W
    assert np.array_equal(got[0].T, want)
    assert np.array_equal(R.mxfp4_expert_rows(blocks, scales, 0), want)
    hi = R.mxfp4_dequant(blocks, scales, lo_first=False)[0].T        # the ablation swaps each pair
    assert hi[0, 0] == 1.0 and hi[0, 1] == 0.5 and hi[1, 3] == -0.5


def test_mxfp4_random_against_byte_loop():
    rng = np.random.default_rng(3)
    E, Rw, G = 2, 3, 2
    blocks = rng.integers(0, 256, size=(E, Rw, G, 16), dtype=np.uint8)
    scales = rng.integers(110, 140, size=(E, Rw, G)).astype(np.uint8)
    got = R.mxfp4_dequant(blocks, scales)
    for e in range(E):
        for r in range(Rw):
            for gi in range(G):
                for j in range(16):
                    byte = int(blocks[e, r, gi, j])
                    f = 2.0 ** (int(scales[e, r, gi]) - 127)
                    assert got[e, gi * 32 + 2 * j, r] == OCP_E2M1[byte & 15] * f
                    assert got[e, gi * 32 + 2 * j + 1, r] == OCP_E2M1[byte >> 4] * f
        assert np.array_equal(R.mxfp4_expert_rows(blocks, scales, e), got[e].T)


def test_mxfp4_orientation_equals_unquantised_layout(ckpt, tmp_path):
    """The MXFP4 checkpoint and a copy with the decoded weights stored as
    GptOssExperts' gate_up_proj [E, H, 2I] / down_proj [E, I, H] give the
    same logits, bit for bit, in both paths."""
    src = ckpt["gpt"]
    w = R.load_safetensors(os.path.join(src, "model.safetensors"))
    out = {}
    for name, arr in w.items():
        for n in ("gate_up_proj", "down_proj"):
            if name.endswith(f"experts.{n}_blocks"):
                p = name[: -len("_blocks")]
                out[p] = ("F32", R.mxfp4_dequant(arr, w[p + "_scales"]))
        if arr.dtype != np.uint8:
            out[name] = ("F32", arr)
    d = tmp_path / "plain"
    d.mkdir()
    R.write_safetensors(str(d / "model.safetensors"), out)
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg.pop("quantization_config", None)
    (d / "config.json").write_text(json.dumps(cfg))
    c1, w1 = R.load_model(src)
    c2, w2 = R.load_model(str(d))
    assert c1.mxfp4 and not c2.mxfp4
    ids = ids_for(c1)
    assert np.array_equal(R.torch_forward(c1, w1, ids), R.torch_forward(c2, w2, ids))
    assert np.array_equal(R.numpy_forward(c1, w1, ids), R.numpy_forward(c2, w2, ids))


# --------------------------------------------------------------------------
# YaRN

def yarn_mpmath(base, dim, factor, orig, beta_fast, beta_slow, truncate):
    """The YaRN table at 50 digits: the blend weight of the interpolated
    (divided by factor) frequency rises linearly from 0 at index `low` to 1
    at `high`, where an index's wavelength 2 pi base^(2i/dim) makes `beta`
    turns over the original context."""
    mp = mpmath.mp
    mp.dps = 50
    base, factor, orig = mp.mpf(base), mp.mpf(factor), mp.mpf(orig)

    def idx(beta):                     # solve orig / (2 pi base^(2i/dim)) = beta for i
        return mp.mpf(dim) * mp.log(orig / (2 * mp.pi * mp.mpf(beta))) / (2 * mp.log(base))
    lo, hi = idx(beta_fast), idx(beta_slow)
    if truncate:
        lo, hi = mp.floor(lo), mp.ceil(hi)
    lo, hi = max(lo, mp.mpf(0)), min(hi, mp.mpf(dim - 1))
    if lo == hi:
        hi += mp.mpf("0.001")
    out = []
    for i in range(dim // 2):
        theta_i = base ** (-mp.mpf(2 * i) / dim)
        t = min(max((i - lo) / (hi - lo), mp.mpf(0)), mp.mpf(1))
        out.append(theta_i / factor * t + theta_i * (1 - t))
    return (lo, hi), out


@pytest.mark.parametrize("params", [
    dict(base=150000.0, dim=64, factor=32.0, orig=4096, beta_fast=32.0, beta_slow=1.0, truncate=False),
    dict(base=150000.0, dim=64, factor=32.0, orig=4096, beta_fast=32.0, beta_slow=1.0, truncate=True),
    dict(base=150000.0, dim=24, factor=32.0, orig=4096, beta_fast=32.0, beta_slow=1.0, truncate=False),
    dict(base=1e6, dim=128, factor=4.0, orig=32768, beta_fast=32.0, beta_slow=1.0, truncate=True),
])
def test_yarn_table_against_mpmath(params):
    (lo, hi), want = yarn_mpmath(**params)
    args = dict(params)
    base, dim = args.pop("base"), args.pop("dim")
    args["original"] = args.pop("orig")
    glo, ghi = R.yarn_correction_range(base, dim, args["original"], args["beta_fast"], args["beta_slow"],
                                       args["truncate"])
    assert abs(glo - float(lo)) < 1e-12 and abs(ghi - float(hi)) < 1e-12
    got = R.yarn_inv_freq_f64(base, dim, **args)
    for g, x in zip(got, want):
        assert abs(g - float(x)) <= 1e-14 * float(x)
    if not params["truncate"] and dim == 64:             # gpt-oss: the ramp is fractional
        assert abs(glo - 8.0928) < 1e-3 and abs(ghi - 17.3980) < 1e-3


def test_gpt_oss_real_config_yarn_and_factor():
    cfg = R.Config(GPT_REAL) if os.path.exists(GPT_REAL) else None
    if cfg is None:
        pytest.skip("no shared gpt-oss config")
    assert cfg.rope_scale == 0.1 * math.log(32) + 1 and abs(cfg.rope_scale - 1.3465735902799727) < 1e-15
    assert cfg.yarn == {"factor": 32.0, "original": 4096, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False}
    assert cfg.theta == 150000.0 and cfg.head_dim == 64 and cfg.heads * cfg.head_dim != cfg.hidden
    assert cfg.sliding == [l % 2 == 0 for l in range(24)] and cfg.window == 128
    assert (cfg.experts, cfg.top_k, cfg.swiglu_limit, cfg.swiglu_alpha) == (32, 4, 7.0, 1.702)
    assert cfg.sinks and cfg.sparse == [True] * 24 and cfg.route == "topk_softmax" and not cfg.tied


def test_yarn_factor_disagreement_refused(tmp_path):
    c = dict(GPT_TEMPLATE, max_position_embeddings=65536)          # 65536 / 4096 = 16 != factor 32
    p = tmp_path / "config.json"
    p.write_text(json.dumps(c))
    with pytest.raises(ValueError, match="versions differ"):
        R.Config(str(p))


# --------------------------------------------------------------------------
# sinks

def test_sink_softmax_hand_example():
    s = torch.tensor([[[1.0, 2.0, 0.5]]], dtype=torch.float64)   # [H=1, Tq=1, Tk=3]
    p = R.softmax_with_sink(s, torch.tensor([1.5], dtype=torch.float64))
    # e^s / (e^1 + e^2 + e^0.5 + e^1.5), mpmath at 30 digits
    want = [0.16740509727844332, 0.45505423392341124, 0.1015363240915518]
    assert np.allclose(p[0, 0].numpy(), want, rtol=1e-15, atol=0)
    assert abs(1 - float(p.sum()) - 0.27600434470659363) < 1e-15    # the sink's mass, no value
    m = torch.tensor([[[0.25, float("-inf"), 3.0]]], dtype=torch.float64)   # a masked key
    p = R.softmax_with_sink(m, torch.tensor([-1.0], dtype=torch.float64))
    assert np.allclose(p[0, 0].numpy(), [0.059069757592510236, 0.0, 0.92400647350786695], rtol=1e-15, atol=0)
    p32 = R.softmax_with_sink(s.float(), torch.tensor([1.5]))
    assert np.allclose(p32[0, 0].numpy(), want, rtol=1e-6, atol=0)


# --------------------------------------------------------------------------
# routing

def test_select_topk_tie_rule():
    v = np.array([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0], [0.0, -0.0, 1.0, 0.0], [-1, -2, -3, 7]])
    assert R.select_topk(v, 2).tolist() == [[1, 2], [0, 1], [2, 0], [3, 0]]
    assert R.select_topk(v, 1).tolist() == [[1], [0], [2], [3]]
    assert R.select_topk(v, 3).tolist() == [[1, 2, 3], [0, 1, 2], [2, 0, 1], [3, 0, 1]]
    assert R.select_topk(v, 2, low_first=False).tolist() == [[2, 1], [3, 2], [2, 3], [3, 0]]
    wr = np.array([[1, 2], [1, 2], [3, 4], [1, 2]], dtype=np.float32)
    assert R.router_representatives(wr, None).tolist() == [0, 0, 2, 0]
    assert R.router_representatives(wr, np.array([0, 0, 0, 1], dtype=np.float32)).tolist() == [0, 0, 2, 3]


@pytest.mark.parametrize("name", ["gpt_tie", "qwen_tie"])
def test_tied_router_picks_lower_index(ckpt, name):
    cfg, w = R.load_model(ckpt[name])
    st = {}
    R.torch_forward(cfg, w, ids_for(cfg), stats=st)
    k = cfg.top_k
    assert st["ties"] == SEQ * sum(cfg.sparse)           # every token's boundary is inside a tie group
    for l, sel in st["selected"].items():
        vals = st["route_values"][l]
        for t in range(SEQ):
            chosen = sel[t].tolist()
            kth = vals[t, chosen[-1]]
            tied = [e for e in range(cfg.experts) if vals[t, e] == kth]      # ascending index
            above = [e for e in chosen if vals[t, e] > kth]
            assert len(tied) > k - len(above)                                # the boundary splits a group
            assert sorted(chosen) == sorted(above + tied[:k - len(above)])   # its lowest indices run


def test_qwen_sparse_layer_rule(tmp_path):
    def rule(**kw):
        c = dict(QWEN_TEMPLATE, num_hidden_layers=kw.pop("layers"), **kw)
        p = tmp_path / "config.json"
        p.write_text(json.dumps(c))
        return R.Config(str(p)).sparse
    T, F = True, False
    assert rule(layers=3) == [T, T, T]
    assert rule(layers=4, decoder_sparse_step=2) == [F, T, F, T]                # (l + 1) % step == 0
    assert rule(layers=6, decoder_sparse_step=3) == [F, F, T, F, F, T]
    assert rule(layers=3, mlp_only_layers=[1]) == [T, F, T]
    assert rule(layers=4, decoder_sparse_step=2, mlp_only_layers=[3]) == [F, T, F, F]
    assert rule(layers=2, num_experts=0) == [F, F]
    assert rule(layers=2, mlp_only_layers=None) == [T, T]


def test_qwen_real_config():
    if not os.path.exists(QWEN_REAL):
        pytest.skip("no shared Qwen3-MoE config")
    cfg = R.Config(QWEN_REAL)
    assert cfg.sparse == [True] * 48 and cfg.norm_topk and cfg.route == "softmax_topk"
    assert (cfg.experts, cfg.top_k, cfg.moe_inter, cfg.head_dim, cfg.qk_norm) == (128, 8, 768, 128, True)
    assert cfg.window is None and cfg.yarn is None and not cfg.sinks and not cfg.tied


def test_qwen_norm_topk_default_false(tmp_path):
    c = dict(QWEN_TEMPLATE)
    del c["norm_topk_prob"]                              # Qwen3MoeConfig's default
    p = tmp_path / "config.json"
    p.write_text(json.dumps(c))
    assert R.Config(str(p)).norm_topk is False


# --------------------------------------------------------------------------
# float32 vs float64, torch vs numpy

@pytest.mark.parametrize("name", list(SHAPES))
def test_f32_against_f64(ckpt, name):
    cfg, w = R.load_model(ckpt[name])
    ids = ids_for(cfg)
    t32 = R.torch_forward(cfg, w, ids)
    c64 = copy.deepcopy(cfg)
    c64.f64 = True
    t64 = R.torch_forward(c64, w, ids)
    n64 = R.numpy_forward(cfg, w, ids)
    assert t64.dtype == np.float64 and t32.dtype == np.float32
    assert worst(t32, t64) < 1e-5
    assert worst(t64, n64) < 1e-10                       # two float64 routes: only rounding apart
    assert worst(t32, n64) < 1e-5


# --------------------------------------------------------------------------
# ablations

APPLICABLE = {
    "gpt": ["softmax_then_topk", "no_sinks", "no_yarn", "no_yarn_scale", "yarn_truncate", "no_swiglu_clamp",
            "no_interleave", "bias_after_weight", "mxfp4_high_nibble_first"],
    "gpt_tie": ["tie_high_index"],
    "gpt_plain": ["no_swiglu_clamp", "no_interleave", "bias_after_weight"],
    "qwen": ["no_norm_topk"],
    "qwen_tie": ["topk_then_softmax", "tie_high_index"],
}
REFUSED = {
    "gpt": ["topk_then_softmax", "no_norm_topk"],
    "gpt_plain": ["mxfp4_high_nibble_first"],
    "qwen": ["topk_then_softmax", "softmax_then_topk", "no_sinks", "no_yarn", "no_swiglu_clamp",
             "no_interleave", "mxfp4_high_nibble_first"],
    "qwen_tie": ["no_norm_topk"],
}


def test_every_moe_ablation_is_exercised():
    assert set(R.MOE_ABLATIONS) == {f for fs in APPLICABLE.values() for f in fs}


@pytest.mark.parametrize("name,feature", [(n, f) for n, fs in APPLICABLE.items() for f in fs])
def test_ablation_changes_logits(ckpt, name, feature):
    cfg, w = R.load_model(ckpt[name])
    prompt = ids_for(cfg)[:6]
    gen = R.greedy(cfg, w, prompt, SEQ - 5)
    seq = prompt + gen[:-1]
    plain = R.torch_forward(cfg, w, seq)
    c = copy.deepcopy(cfg)
    R.ablate(c, [feature])
    abl = R.torch_forward(c, w, seq)
    assert worst(abl, plain) > 2e-3, feature
    sink = open(os.devnull, "w")
    assert not R.compare(c, w, prompt, gen, plain[len(prompt) - 1:], 1e-4, 1e-3, 3, out=sink)
    assert R.compare(cfg, w, prompt, gen, plain[len(prompt) - 1:], 1e-4, 1e-3, 3, out=sink)
    assert worst(abl, R.numpy_forward(c, w, seq)) < 1e-5     # both paths implement the ablation


@pytest.mark.parametrize("name,feature", [(n, f) for n, fs in REFUSED.items() for f in fs])
def test_noop_ablation_refused(ckpt, name, feature):
    cfg, _ = R.load_model(ckpt[name])
    with pytest.raises(ValueError):
        R.ablate(cfg, [feature])


# --------------------------------------------------------------------------
# synth_moe.py's tensors, and the CLI

def test_synth_tensor_names_and_shapes(ckpt):
    def header(d):
        with open(os.path.join(d, "model.safetensors"), "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            return json.loads(f.read(n))
    h = header(ckpt["gpt"])
    p = "model.layers.1."
    assert h[p + "mlp.experts.gate_up_proj_blocks"]["shape"] == [8, 128, 2, 16]
    assert h[p + "mlp.experts.gate_up_proj_scales"]["shape"] == [8, 128, 2]
    assert h[p + "mlp.experts.down_proj_blocks"]["shape"] == [8, 64, 2, 16]
    assert h[p + "mlp.experts.down_proj_scales"]["shape"] == [8, 64, 2]
    assert {h[p + f"mlp.experts.{n}"]["dtype"] for n in ("gate_up_proj_blocks", "gate_up_proj_scales",
                                                         "down_proj_blocks", "down_proj_scales")} == {"U8"}
    assert h[p + "mlp.experts.gate_up_proj_bias"]["shape"] == [8, 128]
    assert h[p + "mlp.experts.down_proj_bias"]["shape"] == [8, 64]
    assert h[p + "mlp.router.weight"]["shape"] == [8, 64] and h[p + "mlp.router.bias"]["shape"] == [8]
    assert h[p + "self_attn.sinks"]["shape"] == [4] and h[p + "self_attn.q_proj.bias"]["shape"] == [96]
    assert h["lm_head.weight"]["shape"] == [256, 64]
    hp = header(ckpt["gpt_plain"])
    assert hp[p + "mlp.experts.gate_up_proj"]["shape"] == [8, 64, 128]
    assert hp[p + "mlp.experts.down_proj"]["shape"] == [8, 64, 64]
    q = header(ckpt["qwen"])
    assert q["model.layers.0.mlp.gate.weight"]["shape"] == [8, 64]
    assert q["model.layers.0.mlp.experts.7.gate_proj.weight"]["shape"] == [32, 64]
    assert q["model.layers.0.mlp.experts.7.down_proj.weight"]["shape"] == [64, 32]
    assert q["model.layers.1.mlp.gate_proj.weight"]["shape"] == [128, 64]         # mlp_only layer: dense
    assert "model.layers.1.mlp.gate.weight" not in q
    assert q["model.layers.0.self_attn.q_norm.weight"]["shape"] == [24]
    with open(os.path.join(ckpt["gpt"], "config.json")) as f:
        c = json.load(f)
    assert c["layer_types"] == ["sliding_attention", "full_attention"] and c["sliding_window"] == 4
    assert c["eos_token_id"] < 256 and c["pad_token_id"] < 256


def test_qwen_fused_experts_split(ckpt, tmp_path):
    """transformers 5's fused [E, 2I, H] gate_up (gate rows first) and
    [E, H, I] down read as the per-expert tensors they were made from."""
    src = ckpt["qwen"]
    w = R.load_safetensors(os.path.join(src, "model.safetensors"))
    out = {}
    for l in (0, 2):
        p = f"model.layers.{l}.mlp.experts."
        gu = np.stack([np.concatenate([w.pop(p + f"{e}.gate_proj.weight"), w.pop(p + f"{e}.up_proj.weight")])
                       for e in range(8)])
        dn = np.stack([w.pop(p + f"{e}.down_proj.weight") for e in range(8)])
        out[p + "gate_up_proj"], out[p + "down_proj"] = ("F32", gu), ("F32", dn)
    out.update({k: ("F32", v) for k, v in w.items()})
    d = tmp_path / "fused"
    d.mkdir()
    R.write_safetensors(str(d / "model.safetensors"), out)
    (d / "config.json").write_text(open(os.path.join(src, "config.json")).read())
    c1, w1 = R.load_model(src)
    c2, w2 = R.load_model(str(d))
    ids = ids_for(c1)
    assert np.array_equal(R.torch_forward(c1, w1, ids), R.torch_forward(c2, w2, ids))


def test_cli_logits_then_check(ckpt, tmp_path):
    d = ckpt["gpt"]
    cfg, w = R.load_model(d)
    prompt = ids_for(cfg)[:5]
    gen = R.greedy(cfg, w, prompt, 8)
    seq = prompt + gen[:-1]
    dump = tmp_path / "l.f32"
    r = subprocess.run([PY, os.path.join(HERE, "torch_ref.py"), "logits", "--model-dir", d,
                        "--ids", ",".join(map(str, seq)), "--from", str(len(prompt) - 1), "--out", str(dump)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["positions"] == len(gen) and info["argmax"] == gen
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"prompt_token_ids": prompt, "generated_token_ids": gen}))
    base = [PY, os.path.join(HERE, "torch_ref.py"), "check", "--model-dir", d, "--json", str(run),
            "--logits", str(dump)]
    ok = subprocess.run(base, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "routing: smallest nonzero top-k boundary gap" in ok.stdout
    ok64 = subprocess.run(base + ["--f64"], capture_output=True, text=True)
    assert ok64.returncode == 0, ok64.stdout + ok64.stderr
    bad = subprocess.run(base + ["--ablate", "no_sinks"], capture_output=True, text=True)
    assert bad.returncode == 1, bad.stdout + bad.stderr
