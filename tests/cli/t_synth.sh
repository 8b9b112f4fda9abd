#!/bin/sh
# `cis2 synth`: every small shape (and smollm2-135m) is written, is
# deterministic (same seed -> same sha256, other seed -> different), and is
# read back by an independent python reader that checks the safetensors
# layout, the §2.5 names/shapes derived from config.json, and regenerates
# the tiny shapes' weights bit for bit from the documented generator
# (src/synth.c's header comment).  The minimal tokenizer.json is checked
# against §3.1.5.a and, when the node oracle is installed, loaded by Hugging
# Face tokenizers.  --tokenizer copies the file.
set -eu
. tests/lib.sh
command -v python3 >/dev/null || skip "python3 not installed"
tmpdir tmp

# The independent reader/regenerator (python, no numpy).
cat > "$tmp/check.py" <<'EOF'
import json, math, struct, sys
d, shape, seed, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
M = (1 << 64) - 1
# Architecture written down here (not read from synth.c):
# hidden, inter, layers, heads, kv, vocab, max_pos, eps, theta, tied, type, data-area parity
SHAPES = {
    "tiny": (64, 160, 2, 4, 2, 512, 256, 1e-05, 10000.0, True, "llama", "odd"),
    "tiny-qwen": (96, 224, 3, 6, 2, 640, 512, 1e-06, 1000000.0, False, "qwen2", "8"),
    "odd": (72, 200, 2, 3, 1, 300, 128, 1e-05, 500000.0, False, "llama", "odd"),
    "smollm2-135m": (576, 1536, 30, 9, 3, 49152, 8192, 1e-05, 100000.0, True, "llama", "odd"),
}
H, I, L, NH, KVH, V, MAXPOS, EPS, THETA, TIED, MT, PAR = SHAPES[shape]
cfg = json.load(open(d + "/config.json"))
got = (cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"],
       cfg.get("num_key_value_heads", cfg["num_attention_heads"]), cfg["vocab_size"],
       cfg.get("max_position_embeddings", 2048), cfg["rms_norm_eps"], float(cfg.get("rope_theta", 10000.0)),
       cfg.get("tie_word_embeddings", False), cfg.get("model_type", ""), PAR)
assert got == SHAPES[shape], (got, SHAPES[shape])
hd = cfg.get("head_dim", H // NH)
assert hd * NH == H
KV = KVH * hd
qwen = MT == "qwen2"

want = {"model.embed_tokens.weight": [V, H], "model.norm.weight": [H]}
if not TIED:
    want["lm_head.weight"] = [V, H]
for l in range(L):
    p = "model.layers.%d." % l
    want[p + "input_layernorm.weight"] = [H]
    want[p + "post_attention_layernorm.weight"] = [H]
    want[p + "self_attn.q_proj.weight"] = [H, H]
    want[p + "self_attn.k_proj.weight"] = [KV, H]
    want[p + "self_attn.v_proj.weight"] = [KV, H]
    want[p + "self_attn.o_proj.weight"] = [H, H]
    want[p + "mlp.gate_proj.weight"] = [I, H]
    want[p + "mlp.up_proj.weight"] = [I, H]
    want[p + "mlp.down_proj.weight"] = [H, I]
    if qwen:
        want[p + "self_attn.q_proj.bias"] = [H]
        want[p + "self_attn.k_proj.bias"] = [KV]
        want[p + "self_attn.v_proj.bias"] = [KV]

with open(d + "/model.safetensors", "rb") as f:
    raw = f.read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n].decode("utf-8"))
base_off = 8 + n
assert (base_off % 2 == 1) if PAR == "odd" else (base_off % 8 == 0), base_off
meta = hdr.pop("__metadata__")
assert all(isinstance(v, str) for v in meta.values())
assert set(hdr) == set(want), sorted(set(hdr) ^ set(want))[:5]
spans = []
for name, e in hdr.items():
    assert e["dtype"] == "BF16" and e["shape"] == want[name], (name, e)
    b, en = e["data_offsets"]
    numel = 1
    for x in e["shape"]:
        numel *= x
    assert en - b == 2 * numel
    spans.append((b, en, name))
spans.sort()
pos = 0
for b, en, name in spans:
    assert b == pos, name
    pos = en
assert pos == len(raw) - base_off

def bf16_to_f32(u):
    return struct.unpack("<f", struct.pack("<I", u << 16))[0]

# norm weights 1 +- 0.1; a linear weight's spread about 1/sqrt(in)
def vals(name, count=None):
    b, en = hdr[name]["data_offsets"]
    cnt = (en - b) // 2 if count is None else count
    return [bf16_to_f32(u) for u in struct.unpack_from("<%dH" % cnt, raw, base_off + b)]
nw = vals("model.norm.weight")
assert all(0.89 < x < 1.11 for x in nw) and len(set(nw)) >= min(H // 4, 20)  # bf16: ~39 values in 1 +- 0.1
w = vals("model.layers.0.mlp.up_proj.weight", 4096)
sd = math.sqrt(sum(x * x for x in w) / len(w))
assert abs(sd * math.sqrt(H) - 1.0) < 0.1, sd

if mode == "full":
    # Regenerate every tensor from the documented generator (src/synth.c header).
    f32s = struct.Struct("<f")
    u32s = struct.Struct("<I")
    def f32(x):
        return f32s.unpack(f32s.pack(x))[0]  # one RNE rounding of an exact double
    def bf16(x):
        b = u32s.unpack(f32s.pack(x))[0]
        return ((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFFFFFF) >> 16
    def mix(z):
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
        return z ^ (z >> 31)
    def fnv(s):
        h = 0xCBF29CE484222325
        for c in s.encode():
            h = ((h ^ c) * 0x100000001B3) & M
        return h
    G = 0x9E3779B97F4A7C15
    base = mix(((0x5EED0000C152 ^ seed) + G) & M)
    rsqrt = lambda x: f32(1.0 / f32(math.sqrt(x)))
    emb, lin_h, lin_i = f32(1.5 * rsqrt(H)), rsqrt(H), rsqrt(I)
    c = f32(1.7320508) / 65536.0
    kn = f32(0.1) / 8388608.0
    for b, en, name in spans:
        if name.endswith("layernorm.weight") or name == "model.norm.weight":
            k = None
        elif name.endswith(".bias"):
            k = f32(f32(0.05) * c)
        elif name in ("model.embed_tokens.weight", "lm_head.weight"):
            k = f32(emb * c)
        elif name.endswith("down_proj.weight"):
            k = f32(lin_i * c)
        else:
            k = f32(lin_h * c)
        st = base ^ fnv(name)
        out = []
        for _ in range((en - b) // 2):
            st = (st + G) & M
            x = mix(st)
            if k is None:
                m = (x >> 40) - 8388608
                out.append(bf16(f32(1.0 + f32(m * kn))))
            else:
                s = (x & 0xFFFF) + ((x >> 16) & 0xFFFF) + ((x >> 32) & 0xFFFF) + (x >> 48) - 131070
                out.append(bf16(f32(s * k)))
        if struct.pack("<%dH" % len(out), *out) != raw[base_off + b:base_off + en]:
            sys.exit("FAIL: %s: %s differs from the documented generator" % (shape, name))

# tokenizer.json: §3.1.5.a byte -> unicode, id == byte
tok = json.load(open(d + "/tokenizer.json", encoding="utf-8"))
bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
cs = bs[:]
k = 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + k); k += 1
want_vocab = {chr(c): b for b, c in zip(bs, cs)}
m = tok["model"]
assert m["type"] == "BPE" and m["merges"] == [] and m["vocab"] == want_vocab
assert tok["normalizer"] is None and tok["post_processor"] is None and tok["added_tokens"] == []
assert tok["pre_tokenizer"] == {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
assert V >= len(m["vocab"]) == 256
print("%s: layout%s ok (%d tensors, data area at byte %d)" % (shape, " and weights" if mode == "full" else "", len(spans), base_off))
EOF

sha() { sha256sum "$1" | cut -d' ' -f1; }

for shape in tiny tiny-qwen odd; do
    $CIS2 synth --shape $shape --seed 7 --out "$tmp/$shape" >/dev/null
    python3 "$tmp/check.py" "$tmp/$shape" $shape 7 full
done

# determinism, and the seed matters
$CIS2 synth --shape tiny --seed 7 --out "$tmp/tiny-again" >/dev/null
for f in model.safetensors config.json tokenizer.json; do
    [ "$(sha "$tmp/tiny/$f")" = "$(sha "$tmp/tiny-again/$f")" ] || fail "$f differs between runs"
done
$CIS2 synth --shape tiny --seed 8 --out "$tmp/tiny-8" >/dev/null
[ "$(sha "$tmp/tiny/model.safetensors")" != "$(sha "$tmp/tiny-8/model.safetensors")" ] ||
    fail "seed does not change the weights"

# smollm2-135m: time it, twice for determinism; layout check without regenerating
start=$(date +%s)
$CIS2 synth --shape smollm2-135m --seed 1 --out "$tmp/s135/a" >/dev/null
echo "smollm2-135m synthesized in $(( $(date +%s) - start ))s"
$CIS2 synth --shape smollm2-135m --seed 1 --out "$tmp/s135/b" >/dev/null
[ "$(sha "$tmp/s135/a/model.safetensors")" = "$(sha "$tmp/s135/b/model.safetensors")" ] ||
    fail "smollm2-135m not deterministic"
python3 "$tmp/check.py" "$tmp/s135/a" smollm2-135m 1 layout
rm -rf "$tmp/s135"

# HF tokenizers (the tokenizer oracle) loads the minimal tokenizer: id == byte
if [ -d tests/tokenizer/node_modules/tokenizers ] && command -v node >/dev/null; then
    (cd tests/tokenizer && node -e '
const {Tokenizer}=require("tokenizers");
const t=Tokenizer.fromFile(process.argv[1]);
const s="Hi there,\n\u00e9\u{1F600} x\t0";
t.encode(s, null, {addSpecialTokens:false}).then(e=>{
  const want=[...Buffer.from(s,"utf8")];
  if (JSON.stringify(e.getIds())!==JSON.stringify(want) || t.getVocabSize()!==256) {
    console.log("FAIL: tokenizers gives", JSON.stringify(e.getIds())); process.exit(1); }
  console.log("tokenizers oracle: ids == utf-8 bytes");
});' "$tmp/tiny/tokenizer.json")
else
    echo "(node tokenizers oracle not installed: skipped that check)"
fi

# --tokenizer copies the file byte for byte
src="$SHARED/models/smollm2-135m/tokenizer.json"
[ -f "$src" ] || { printf '{"not":"checked"}\n' > "$tmp/tok.json"; src="$tmp/tok.json"; }
$CIS2 synth --shape odd --seed 3 --tokenizer "$src" --out "$tmp/withtok" >/dev/null
cmp "$src" "$tmp/withtok/tokenizer.json"

# usage errors exit 2, unreadable tokenizer exits 3
set +e
$CIS2 synth --shape nope --seed 1 --out "$tmp/x" 2>/dev/null; [ $? -eq 2 ] || fail "unknown shape"
$CIS2 synth --shape tiny --seed 1 2>/dev/null; [ $? -eq 2 ] || fail "missing --out"
$CIS2 synth --shape tiny --seed -1 --out "$tmp/x" 2>/dev/null; [ $? -eq 2 ] || fail "bad seed"
$CIS2 synth --shape tiny --seed 1x --out "$tmp/x" 2>/dev/null; [ $? -eq 2 ] || fail "bad seed"
$CIS2 synth --shape tiny --seed 1 --out "$tmp/x" --bogus 2>/dev/null; [ $? -eq 2 ] || fail "bogus arg"
$CIS2 synth --shape tiny --seed 1 --out "$tmp/x" --tokenizer "$tmp/missing" 2>/dev/null
[ $? -eq 3 ] || fail "missing tokenizer not an io error"
set -e
$CIS2 synth --list | grep -q '^qwen2.5-0.5b ' || fail "--list"
echo ok
