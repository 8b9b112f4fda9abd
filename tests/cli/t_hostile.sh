#!/bin/sh
# tests/cli/t_hostile.sh - hostile inputs through the `cis2` command line
# (docs/inputs.md): each must end in exactly one stderr line naming the
# file or option and the problem, with the documented exit code, never a
# crash, hang or huge allocation.  Only the cases no other test covers are
# here; docs/inputs.md points every other line of the list at its test
# (tests/unit/test_safetensors.c, test_config.c, test_tokenizer.c, t_run.sh, ...).
set -eu
. tests/lib.sh
tmpdir T
TOK=$SHARED/models/smollm2-135m/tokenizer.json
n=0
# expect CODE NEEDLE cmd...: exit CODE, one stderr line containing NEEDLE.
# Every run is bounded: 60 s wall (no hang) and, on a build without ASan
# (which reserves terabytes of address space), 16 GiB of address space (no
# huge allocation: the `huge` config below describes 180 GB of weights; the
# cap leaves room for a thread stack and malloc arena per core on big
# machines).  ASan reports also fail the one-line check.
ULIM=""
nm "$CIS2" 2>/dev/null | grep -q __asan_init || ULIM="ulimit -v 16777216;"
expect() {
    code=$1; needle=$2; shift 2
    set +e
    sh -c "$ULIM"' exec timeout 60 "$@"' sh "$@" > "$T/out" 2> "$T/err" < /dev/null
    rc=$?
    set -e
    [ $rc -eq "$code" ] || { cat "$T/err"; fail "exit $rc, want $code: $*"; }
    [ "$(wc -l < "$T/err")" -eq 1 ] || { cat "$T/err"; fail "stderr is not one line: $*"; }
    grep -q -- "$needle" "$T/err" || fail "stderr lacks '$needle': $(cat "$T/err")"
    n=$((n + 1))
    echo "ok $n: exit $code: $(cut -c1-160 "$T/err")"
}
# st_edit SRC DST PYTHON: rewrite a safetensors file; the snippet edits `h`
# (the header dict) and `data` (the data-area bytes), then it is re-serialised.
st_edit() {
    python3 - "$1" "$2" "$3" <<'PY'
import json, struct, sys
src, dst, code = sys.argv[1:]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); data = b[8 + n:]
exec(code)
hb = json.dumps(h).encode()
open(dst, "wb").write(struct.pack("<Q", len(hb)) + hb + data)
PY
}
model() { rm -rf "$T/$1"; cp -r "$T/tiny" "$T/$1"; }
cfg_edit() { python3 -c "import json,sys; c=json.load(open(sys.argv[1])); $2; json.dump(c, open(sys.argv[1],'w'))" "$T/$1/config.json"; }

$CIS2 synth --shape tiny --seed 1 --out "$T/tiny" > /dev/null
$CIS2 synth --shape odd --seed 1 --out "$T/odd" > /dev/null
RUN="run --gen-toks 1"

# ---- model.safetensors, at the command line ----
model extra
st_edit "$T/tiny/model.safetensors" "$T/extra/model.safetensors" \
  'h["extra.bias"] = {"dtype": "BF16", "shape": [2], "data_offsets": [len(data), len(data) + 4]}; data += bytes(4)'
expect 4 "unexpected tensor extra.bias" $CIS2 $RUN --model-dir "$T/extra" --prompt-ids 1
model i16 # F16, like BF16 and F32, is a weight dtype cis2 runs (t_weight_dtypes); I16 is not
st_edit "$T/tiny/model.safetensors" "$T/i16/model.safetensors" 'h["model.norm.weight"]["dtype"] = "I16"'
expect 5 "model.norm.weight.*dtype 'I16' not supported" $CIS2 $RUN --model-dir "$T/i16" --prompt-ids 1
model bigheader
printf '\000\000\000\020\000\000\000\000{}' > "$T/bigheader/model.safetensors"   # 2^28-byte header
expect 4 "model.safetensors: header length 268435456 exceeds" $CIS2 $RUN --model-dir "$T/bigheader" --prompt-ids 1
model outside
st_edit "$T/tiny/model.safetensors" "$T/outside/model.safetensors" \
  'h["model.norm.weight"]["data_offsets"][1] += 1 << 40'
expect 4 "model.norm.weight.*beyond the data area" $CIS2 $RUN --model-dir "$T/outside" --prompt-ids 1
model deepst   # a header nested 100000 deep (jansson stops at 2048)
python3 -c "import struct,sys; h=b'['*100000+b']'*100000; sys.stdout.buffer.write(struct.pack('<Q',len(h))+h)" > "$T/deepst/model.safetensors"
expect 4 "model.safetensors: header is not valid JSON (maximum parsing depth" $CIS2 $RUN --model-dir "$T/deepst" --prompt-ids 1
model noname
st_edit "$T/tiny/model.safetensors" "$T/noname/model.safetensors" 'h[""] = h.pop("model.norm.weight")'
expect 4 "model.safetensors: empty tensor name" $CIS2 $RUN --model-dir "$T/noname" --prompt-ids 1
model nost; rm "$T/nost/model.safetensors"
expect 3 "model.safetensors: cannot open" $CIS2 $RUN --model-dir "$T/nost" --prompt-ids 1
model dirst; rm "$T/dirst/model.safetensors"; mkdir "$T/dirst/model.safetensors"
expect 3 "model.safetensors: not a regular file" $CIS2 $RUN --model-dir "$T/dirst" --prompt-ids 1

# ---- tensors against config.json (model.c) ----
model shape; cfg_edit shape 'c["intermediate_size"] = 128'
expect 4 "gate_proj.weight has shape \[160,64\], config expects \[128,64\]" \
  $CIS2 $RUN --model-dir "$T/shape" --prompt-ids 1
model untied; cfg_edit untied 'c["tie_word_embeddings"] = False'
expect 4 "tie_word_embeddings is false but lm_head.weight is missing" \
  $CIS2 $RUN --model-dir "$T/untied" --prompt-ids 1
rm -rf "$T/tied"; cp -r "$T/odd" "$T/tied"; cfg_edit tied 'c["tie_word_embeddings"] = True'
expect 5 "tie_word_embeddings is true but lm_head.weight is present" \
  $CIS2 $RUN --model-dir "$T/tied" --prompt-ids 1
# a config near the size limits (~45e9 parameters, 180 GB of f32) against a
# 240 KB file: refused on the first tensor's shape, before any allocation
model huge
cfg_edit huge 'c.update(hidden_size=65536, intermediate_size=65536, num_hidden_layers=2, num_attention_heads=64, num_key_value_heads=8, vocab_size=4096, max_position_embeddings=1048576)'
expect 4 "model.embed_tokens.weight has shape \[512,64\], config expects \[4096,65536\]" \
  $CIS2 $RUN --model-dir "$T/huge" --prompt-ids 1

# ---- each family's tensors (docs/inputs.md "Which tensors each family has"; Hugging Face's modeling code) ----
$CIS2 synth --shape tiny-qwen --seed 1 --out "$T/tq" > /dev/null
qmodel() { rm -rf "$T/$1"; cp -r "$T/tq" "$T/$1"; }
# llama without attention_bias has no q/k/v biases: present, they are unexpected
qmodel lnb; cfg_edit lnb 'c["model_type"] = "llama"; c["attention_bias"] = False'
expect 4 "unexpected tensor model.layers.0.self_attn.[qkv]_proj.bias" $CIS2 $RUN --model-dir "$T/lnb" --prompt-ids 1
qmodel lna; cfg_edit lna 'c["model_type"] = "llama"; c.pop("attention_bias", None)'
expect 4 "unexpected tensor model.layers.0.self_attn.[qkv]_proj.bias" $CIS2 $RUN --model-dir "$T/lna" --prompt-ids 1
# llama with attention_bias: q/k/v biases required, and its o_proj.bias is refused (§9.5 has none)
model lab; cfg_edit lab 'c["attention_bias"] = True'
expect 4 "missing tensor model.layers.0.self_attn.q_proj.bias" $CIS2 $RUN --model-dir "$T/lab" --prompt-ids 1
qmodel lob; cfg_edit lob 'c["model_type"] = "llama"; c["attention_bias"] = True'
st_edit "$T/tq/model.safetensors" "$T/lob/model.safetensors" \
  'h["model.layers.0.self_attn.o_proj.bias"] = {"dtype": "BF16", "shape": [96], "data_offsets": [len(data), len(data) + 192]}; data += bytes(192)'
expect 5 "o_proj.bias (llama attention_bias is true) is not supported" $CIS2 $RUN --model-dir "$T/lob" --prompt-ids 1
# qwen2: q/k/v biases always (missing: exit 4), never an o_proj bias
model qnb; cfg_edit qnb 'c["model_type"] = "qwen2"'
expect 4 "missing tensor model.layers.0.self_attn.q_proj.bias" $CIS2 $RUN --model-dir "$T/qnb" --prompt-ids 1
qmodel qob
st_edit "$T/tq/model.safetensors" "$T/qob/model.safetensors" \
  'h["model.layers.0.self_attn.o_proj.bias"] = {"dtype": "BF16", "shape": [96], "data_offsets": [len(data), len(data) + 192]}; data += bytes(192)'
expect 4 "unexpected tensor model.layers.0.self_attn.o_proj.bias" $CIS2 $RUN --model-dir "$T/qob" --prompt-ids 1
model mlpb; cfg_edit mlpb 'c["mlp_bias"] = True'
expect 5 "mlp_bias is true" $CIS2 $RUN --model-dir "$T/mlpb" --prompt-ids 1
# llama with attention_bias and q/k/v biases but no o_proj bias runs as §9.1
# describes: the same tokens and logits as the qwen2 spelling of that model
qmodel lqkv; cfg_edit lqkv 'c["model_type"] = "llama"; c["attention_bias"] = True; c.pop("use_sliding_window", None)'
$CIS2 run --model-dir "$T/tq" --prompt-ids 1,2,3 --gen-toks 4 --dump-logits "$T/lq.qwen" > "$T/o.qwen"
$CIS2 run --model-dir "$T/lqkv" --prompt-ids 1,2,3 --gen-toks 4 --dump-logits "$T/lq.llama" > "$T/o.llama"
cmp -s "$T/lq.qwen" "$T/lq.llama" || fail "llama+attention_bias and qwen2 logits differ"
[ "$(grep generated_token_ids "$T/o.qwen")" = "$(grep generated_token_ids "$T/o.llama")" ] || fail "tokens differ"
n=$((n + 1)); echo "ok $n: llama attention_bias + q/k/v biases runs as qwen2 does (same logits)"

# ---- config.json ----
model nocfg; rm "$T/nocfg/config.json"
expect 3 "config.json: cannot open" $CIS2 $RUN --model-dir "$T/nocfg" --prompt-ids 1
model bigcfg; truncate -s 17M "$T/bigcfg/config.json"
expect 4 "config.json: larger than 16777216 bytes" $CIS2 $RUN --model-dir "$T/bigcfg" --prompt-ids 1
model deepcfg; python3 -c "print('[' * 100000 + ']' * 100000)" > "$T/deepcfg/config.json"
expect 4 "config.json: invalid JSON (maximum parsing depth" $CIS2 $RUN --model-dir "$T/deepcfg" --prompt-ids 1
model negcfg; cfg_edit negcfg 'c["num_hidden_layers"] = -2'
expect 4 "config.json: num_hidden_layers must be a positive integer" $CIS2 $RUN --model-dir "$T/negcfg" --prompt-ids 1
model divcfg; cfg_edit divcfg 'c["num_attention_heads"] = 5'
expect 4 "config.json: hidden_size 64 is not divisible by num_attention_heads 5" \
  $CIS2 $RUN --model-dir "$T/divcfg" --prompt-ids 1

# ---- tokenizer.json ----
model notok; rm "$T/notok/tokenizer.json"
expect 3 "tokenizer.json" $CIS2 $RUN --model-dir "$T/notok" --prompt-ids 1   # hashed even for ids (§2.1)
model badtok; printf '{"model": ' > "$T/badtok/tokenizer.json"
expect 4 "tokenizer.json: malformed JSON" $CIS2 $RUN --model-dir "$T/badtok" --prompt "hi"
model bigtok; truncate -s 300M "$T/bigtok/tokenizer.json"
expect 4 "tokenizer.json: larger than 67108864 bytes, the limit for a tokenizer.json (314572800 bytes)" \
  $CIS2 $RUN --model-dir "$T/bigtok" --prompt "hi"
mkdir "$T/dirtok"
expect 3 "dirtok: not a regular file" $CIS2 tokenize --tokenizer "$T/dirtok" --text x
python3 -c "print('{\"model\": ' + '[' * 100000 + ']' * 100000 + '}')" > "$T/deeptok.json"
expect 4 "malformed JSON.*maximum parsing depth" $CIS2 tokenize --tokenizer "$T/deeptok.json" --text x
printf '{"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}, "model": {"type": "BPE", "vocab": {"a": 0, "a": 1}}}' > "$T/duptok.json"
expect 4 "malformed JSON.*duplicate" $CIS2 tokenize --tokenizer "$T/duptok.json" --text x
printf '{"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}, "model": {"type": "BPE", "vocab": {"a": 0, "b": "1"}}}' > "$T/strid.json"
expect 4 "model.vocab entry \"b\" has no valid id" $CIS2 tokenize --tokenizer "$T/strid.json" --text x
printf '{"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}, "model": {"type": "BPE", "vocab": {"a": 0, "b": 4294967296}}}' > "$T/bigid.json"
expect 4 "model.vocab entry \"b\" has no valid id" $CIS2 tokenize --tokenizer "$T/bigid.json" --text x
# regression (fuzz_tokenizer_load): a word made only of bytes that have no
# token encodes to no ids (FACTS §2 drops them), exit 0, nothing on stderr;
# UBSan once flagged the empty id list here (NULL + 0 in tokenizer.c on_word)
printf '{"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}' > "$T/nobytes.json"
set +e; $CIS2 tokenize --tokenizer "$T/nobytes.json" --text "xyz a xyz" > "$T/out" 2> "$T/err"; rc=$?; set -e
[ $rc -eq 0 ] && [ ! -s "$T/err" ] || { cat "$T/err"; fail "tokenize of tokenless bytes: exit $rc"; }
[ "$(cat "$T/out")" = "0" ] || fail "tokenize of tokenless bytes printed '$(cat "$T/out")', want 0"
n=$((n + 1)); echo "ok $n: tokenless bytes encode to nothing"
# the same with the real tokenizer: SmolLM2 has no token for byte 0x04, so
# "\004y" must encode exactly as "y" (fuzz_tokenizer_encode regression)
if [ -f "$TOK" ]; then
    want=$($CIS2 tokenize --tokenizer "$TOK" --text y)
    set +e; printf '\004y' | $CIS2 tokenize --tokenizer "$TOK" > "$T/out" 2> "$T/err"; rc=$?; set -e
    [ $rc -eq 0 ] && [ ! -s "$T/err" ] || { cat "$T/err"; fail "tokenize of \\004y: exit $rc"; }
    [ "$(cat "$T/out")" = "$want" ] || fail "\\004y encodes to '$(cat "$T/out")', want '$want' (y alone)"
    n=$((n + 1)); echo "ok $n: a tokenless byte of the real tokenizer is dropped"
fi

# ---- prompts ----
expect 4 "not valid UTF-8" $CIS2 $RUN --model-dir "$T/tiny" --prompt "$(printf 'a\377')"
printf '' > "$T/empty.txt"
expect 4 "empty.txt: no prompts" $CIS2 $RUN --model-dir "$T/tiny" --prompt-file "$T/empty.txt"
printf '[]' > "$T/empty.json"
expect 4 "empty.json: no prompts" $CIS2 $RUN --model-dir "$T/tiny" --prompt-file "$T/empty.json"
printf '\r\n' > "$T/cr.txt"
expect 4 "cr.txt: line 1: empty prompt" $CIS2 $RUN --model-dir "$T/tiny" --prompt-file "$T/cr.txt"
printf '["a", ""]' > "$T/emptystr.json"
expect 4 "element 1 is an empty prompt" $CIS2 $RUN --model-dir "$T/tiny" --prompt-file "$T/emptystr.json"
printf '["a", 7]' > "$T/nonstr.json"
expect 4 "nonstr.json: element 1 is not a string" $CIS2 $RUN --model-dir "$T/tiny" --prompt-file "$T/nonstr.json"
printf '["a\377"]' > "$T/badutf8.json"
expect 4 "badutf8.json: line 1: unable to decode byte 0xff" $CIS2 $RUN --model-dir "$T/tiny" --prompt-file "$T/badutf8.json"
python3 -c "print('[' * 100000 + ']' * 100000)" > "$T/deep.json"
expect 4 "deep.json: line 1: maximum parsing depth" $CIS2 $RUN --model-dir "$T/tiny" --prompt-file "$T/deep.json"
expect 3 "nope.txt" $CIS2 $RUN --model-dir "$T/tiny" --prompt-file "$T/nope.txt"
expect 3 "not a regular file (a directory)" $CIS2 $RUN --model-dir "$T/tiny" --prompt-file "$T"
truncate -s 300M "$T/huge.txt"
expect 4 "huge.txt: larger than 268435456 bytes, the limit for a prompt file" $CIS2 $RUN --model-dir "$T/tiny" --prompt-file "$T/huge.txt"
rm -f "$T/huge.txt"
# a 400-token text prompt on a 256-position model
expect 5 "exceeds max_position_embeddings (256)" \
  $CIS2 $RUN --model-dir "$T/tiny" --prompt "$(python3 -c "print('a ' * 200, end='')")"
expect 5 "exceeds max_position_embeddings" $CIS2 run --model-dir "$T/tiny" --prompt-ids 1,2 --gen-toks 255
expect 2 "'4294967296' is not a comma-separated list" $CIS2 $RUN --model-dir "$T/tiny" --prompt-ids 4294967296
expect 2 "'1,' is not a comma-separated list" $CIS2 $RUN --model-dir "$T/tiny" --prompt-ids 1,
expect 2 "'' is not a comma-separated list" $CIS2 $RUN --model-dir "$T/tiny" --prompt-ids ""
expect 2 "'-1' is not a comma-separated list" $CIS2 $RUN --model-dir "$T/tiny" --prompt-ids -1

# ---- command-line arguments ----
set +e; $CIS2 > /dev/null 2>&1; rc=$?; set -e   # no command: the help text, on stderr
[ $rc -eq 2 ] || fail "cis2 with no arguments exited $rc, want 2"
expect 2 "unknown command 'frobnicate'" $CIS2 frobnicate
expect 2 "--gen-toks needs a value" $CIS2 run --gen-toks
expect 2 "'abc' is not a non-negative integer" $CIS2 run --gen-toks abc
expect 2 "--gen-toks: 99999999999999999999 is too large" $CIS2 run --gen-toks 99999999999999999999
expect 2 "--threads: 5000 is too large" $CIS2 run --threads 5000
expect 2 "at most one of --prompt" $CIS2 run --prompt a --prompt-ids 1
expect 5 "kernel 'nope' not available" $CIS2 $RUN --model-dir "$T/tiny" --prompt-ids 1 --kernel nope
expect 2 "path too long" $CIS2 $RUN --model-dir "$(python3 -c "print('d' * 5000)")" --prompt-ids 1
expect 3 "nodir/logits" $CIS2 $RUN --model-dir "$T/tiny" --prompt-ids 1 --dump-logits "$T/nodir/logits"
expect 2 "unknown shape 'nope'" $CIS2 synth --shape nope --seed 1 --out "$T/x"
expect 2 "--seed: '-1' is not a non-negative integer" $CIS2 synth --shape tiny --seed -1 --out "$T/x"
echo "t_hostile: $n hostile inputs refused cleanly"
