#!/bin/sh
# Sharded checkpoints (docs/inputs.md "Sharded checkpoints"):
# DIR/model.safetensors.index.json plus the shards its weight_map names,
# made here by an independent splitter (tests/cli/shard_split.py, python,
# from the safetensors format alone) out of a `cis2 synth` checkpoint.
#   1. the sharded checkpoint decodes exactly as the one file: the same
#      tokens, argmax digest and every logit (--dump-logits, byte for byte);
#   2. its weights_sha256 is the documented rule, recomputed by python's
#      hashlib and by the doc's sha256sum pipeline, never from cis2, and
#      docs/inputs.md's worked example holds; the one file's stays
#      sha256sum model.safetensors;
#   3. its CIS2_REF is the witness chain (FACTS §1.11) recomputed by python
#      from that weights_sha256 and the ONE-FILE run's logits: the witness
#      differs only through weights_sha256;
#   4. cis2 verify: its receipt verifies against its directory and not
#      against the one file's; the Python package opens it too;
#   5. every hostile variant is refused with one line on stderr naming the
#      file and the key, the documented exit code, and (strace, where it
#      works) before any weight is read: under 100 KB read in all, where a
#      load reads the 780 KB of shards.
set -eu
. tests/lib.sh
PY=/usr/bin/python3
[ -x "$PY" ] || skip "no $PY"
tmpdir T
ROOT=$(pwd)
SPLIT=tests/cli/shard_split.py
$CIS2 synth --shape tiny-qwen --seed 5 --out "$T/one" > /dev/null
$PY $SPLIT "$T/one" "$T/sh" 3
$PY $SPLIT "$T/one" "$T/sh1" 1
ls "$T/sh" | grep -q '^model-00003-of-00003.safetensors$' || fail "the splitter made no third shard"

# ---- 1-3: the same decode, the documented hash, the witness
for d in one sh sh1; do
    $CIS2 run --model-dir "$T/$d" --prompt-ids 4,8,15,16 --gen-toks 6 --json --dump-logits "$T/$d.f32" \
        --receipt "$T/$d.r" > "$T/$d.json" || fail "cis2 run on $d"
done
field() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
for d in sh sh1; do
    cmp "$T/one.f32" "$T/$d.f32" || fail "$d: logits differ from the one file's"
    for k in generated_token_ids argmax_digest config_sha256 tokenizer_sha256; do
        [ "$(field "$T/one.json" $k)" = "$(field "$T/$d.json" $k)" ] || fail "$d: $k differs from the one file's"
    done
    want=$($PY $SPLIT --weights-sha "$T/$d")
    [ "$(field "$T/$d.json" weights_sha256)" = "$want" ] || fail "$d: weights_sha256 is not the documented rule ($want)"
done
one_sha=$(sha256sum "$T/one/model.safetensors" | cut -d' ' -f1)
[ "$(field "$T/one.json" weights_sha256)" = "$one_sha" ] || fail "one file: weights_sha256 is not sha256sum's"
# the doc's worked recipe (docs/inputs.md), a third route
doc_sha=$(cd "$T/sh" && {
    sha256sum model.safetensors.index.json
    $PY -c 'import json; print("\n".join(set(json.load(open("model.safetensors.index.json"))["weight_map"].values())))' |
        LC_ALL=C sort | while read -r s; do sha256sum "$s"; done
} | sha256sum | cut -d' ' -f1)
[ "$(field "$T/sh.json" weights_sha256)" = "$doc_sha" ] || fail "weights_sha256 differs from the doc's sha256sum recipe"
[ "$doc_sha" != "$(field "$T/sh1.json" weights_sha256)" ] || fail "3 shards and 1 shard give one weights_sha256"

# an output naming a shard or the index (or a link to one) is refused before
# the run, and the file is left as it was
ln -s model-00002-of-00003.safetensors "$T/sh/link.bin"
for out in "$T/sh/model-00002-of-00003.safetensors" "$T/sh/model.safetensors.index.json" "$T/sh/link.bin"; do
    before=$(sha256sum < "$out")
    for opt in --receipt --dump-logits; do
        rc=0
        $CIS2 run --model-dir "$T/sh" --prompt-ids 4,8 --gen-toks 1 $opt "$out" > /dev/null 2> "$T/err" || rc=$?
        [ $rc -eq 2 ] && grep -q "weights file of the checkpoint" "$T/err" ||
            fail "run $opt $out: exit $rc, not the usage refusal: $(cat "$T/err")"
    done
    rc=0
    $CIS2 verify "$T/sh.r" --model-dir "$T/sh" --dump-logits "$out" > /dev/null 2> "$T/err" || rc=$?
    [ $rc -eq 2 ] && grep -q "weights file of the checkpoint" "$T/err" ||
        fail "verify --dump-logits $out: exit $rc, not the usage refusal: $(cat "$T/err")"
    [ "$(sha256sum < "$out")" = "$before" ] || fail "$out was changed"
done
rm "$T/sh/link.bin"

# the doc's worked example, regenerated
$CIS2 synth --shape tiny --seed 1 --out "$T/ex1" > /dev/null
$PY $SPLIT "$T/ex1" "$T/ex" 2
ex=$($CIS2 run --model-dir "$T/ex" --prompt-ids 1 --gen-toks 1 | sed -n 's/^weights_sha256 = //p')
grep -qF "weights_sha256 = \`$ex\`" docs/inputs.md || fail "docs/inputs.md's worked example is not $ex"
for f in model.safetensors.index.json model-00001-of-00002.safetensors model-00002-of-00002.safetensors; do
    grep -qxF "$(cd "$T/ex" && sha256sum $f)" docs/inputs.md || fail "docs/inputs.md's worked example lacks $f's line"
done
rm -rf "$T/ex1" "$T/ex"

cat > "$T/witness.py" <<'PYEOF'
import hashlib, json, struct, sys
# the witness of the sharded run from its weights_sha256 and the one file's logits (FACTS §1.11)
d, wsha, run, dump = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3])), open(sys.argv[4], 'rb').read()
sha = lambda p: hashlib.sha256(open(p, 'rb').read()).digest()
w = hashlib.sha256()
w.update(bytes.fromhex(wsha))
w.update(sha(d + '/tokenizer.json'))
w.update(sha(d + '/config.json'))
w.update(bytes.fromhex(run['table_digest']))
w.update(bytes.fromhex(run['inv_freq_table_digest']))
prompt, gen = run['prompt_token_ids'], run['generated_token_ids']
for t in prompt: w.update(struct.pack('<I', t))
step = len(dump) // len(gen)
for s, tok in enumerate(gen):
    w.update(dump[s * step:(s + 1) * step])  # NaN-free: tiny-qwen's logits
    w.update(struct.pack('<I', tok))
print(w.hexdigest())
PYEOF
ref=$($PY "$T/witness.py" "$T/sh" "$($PY $SPLIT --weights-sha "$T/sh")" "$T/one.json" "$T/one.f32")
[ "$(field "$T/sh.json" cis2_ref)" = "$ref" ] || fail "CIS2_REF of the shards is not the one file's chain with the shards' weights_sha256"
[ "$(field "$T/one.json" cis2_ref)" != "$ref" ] || fail "CIS2_REF does not depend on weights_sha256"

# ---- 4: verify, and the library from Python
$CIS2 verify "$T/sh.r" --model-dir "$T/sh" > "$T/v.out" || { cat "$T/v.out"; fail "verify of the sharded receipt"; }
rc=0; $CIS2 verify "$T/sh.r" --model-dir "$T/one" > "$T/v2.out" 2>&1 || rc=$?
[ $rc -ne 0 ] || fail "the sharded receipt verified against the one file"
grep -q '^weights-sha256' "$T/v2.out" || fail "verify against the one file does not report weights-sha256"
if [ -z "${RUNNER:-}" ] && [ -f "$BUILD/libcis2.so" ] && [ "${SAN:-}" != 1 ]; then
    got=$(CIS2_LIBRARY="$(pwd)/$BUILD/libcis2.so" PYTHONPATH=python $PY -c \
        'import cis2, sys; e = cis2.Engine(sys.argv[1]); print(e.weights_sha256)' "$T/sh") ||
        fail "the Python package cannot open the sharded checkpoint"
    [ "$got" = "$doc_sha" ] || fail "Python's Engine.weights_sha256 $got"
fi

# ---- 5: hostile variants
STRACE=""
if command -v strace > /dev/null && strace -f -e trace=read -o "$T/st.log" $CIS2 run --model-dir "$T/sh" \
    --prompt-ids 1 --gen-toks 1 > /dev/null 2>&1; then
    total=$(awk '/ read\(/ { n = $NF; if (n ~ /^[0-9]+$/) s += n } END { print s + 0 }' "$T/st.log")
    [ "$total" -gt 780000 ] && STRACE=1 || echo "note: strace saw $total bytes read by a load; not used"
fi
[ -n "$STRACE" ] || echo "note: strace unavailable: 'before any weight is read' is not measured"

n=0
# hostile NAME EXIT PATTERN EDIT-PYTHON: a copy of sh, edited by the python
# (cwd the copy; J the index as a dict, saved after), must be refused
hostile() {
    name=$1 code=$2 pat=$3
    n=$((n + 1))
    h="$T/h$n"
    cp -r "$T/sh" "$h"
    (cd "$h" && $PY -c "
import json, os, struct, sys
sys.path.insert(0, '$ROOT/tests/cli')
from shard_split import read_st, write_st
I = 'model.safetensors.index.json'
J = json.load(open(I))
def shard(fn):
    hdr, data = read_st(fn)
    return [(k, v['dtype'], v['shape'], data[v['data_offsets'][0]:v['data_offsets'][1]]) for k, v in sorted(hdr.items())]
$4
if J is not None: json.dump(J, open(I, 'w'))
") || fail "$name: the edit failed"
    rc=0
    if [ -n "$STRACE" ]; then
        strace -f -e trace=read -o "$T/st.log" $CIS2 run --model-dir "$h" --prompt-ids 1 --gen-toks 1 \
            > /dev/null 2> "$T/err" || rc=$?
    else
        $CIS2 run --model-dir "$h" --prompt-ids 1 --gen-toks 1 > /dev/null 2> "$T/err" || rc=$?
    fi
    [ "$rc" = "$code" ] || { cat "$T/err"; fail "$name: exit $rc, expected $code"; }
    [ "$(wc -l < "$T/err")" = 1 ] || { cat "$T/err"; fail "$name: not one line on stderr"; }
    grep -q -- "$pat" "$T/err" || { cat "$T/err"; fail "$name: stderr lacks '$pat'"; }
    if [ -n "$STRACE" ]; then
        total=$(awk '/ read\(/ { n = $NF; if (n ~ /^[0-9]+$/) s += n } END { print s + 0 }' "$T/st.log")
        isz=$(wc -c < "$h/model.safetensors.index.json")
        [ "$total" -lt $((100000 + isz)) ] ||
            fail "$name: $total bytes read before the refusal, the index $isz (weights were read)"
    fi
    echo "ok $name: exit $rc: $(cat "$T/err")"
    rm -rf "$h"
}
S1=model-00001-of-00003.safetensors S2=model-00002-of-00003.safetensors S3=model-00003-of-00003.safetensors
hostile "missing shard" 3 "$S2" "os.remove('$S2')"
hostile "tensor in two shards" 4 "$S3: tensor model.embed_tokens.weight is here but .* maps it to $S1" "
t = [x for x in shard('$S1') if x[0] == 'model.embed_tokens.weight']
write_st('$S3', shard('$S3') + t)"
hostile "tensor missing from the index" 4 "$S2: tensor .* is not in model.safetensors.index.json's weight_map" "
del J['weight_map'][sorted(k for k, v in J['weight_map'].items() if v == '$S2')[0]]"
hostile "index names a tensor absent from its shard" 4 \
    "model.safetensors.index.json: weight_map\[\"model.layers.9.mlp.up_proj.weight\"\] names $S1, which has no such tensor" "
J['weight_map']['model.layers.9.mlp.up_proj.weight'] = '$S1'"
hostile "tensor mapped to the wrong shard" 4 \
    "model.norm.weight.*\\(is here but model.safetensors.index.json maps it to\\|which has no such tensor\\)" "
J['weight_map']['model.norm.weight'] = '$S1' if J['weight_map']['model.norm.weight'] != '$S1' else '$S2'"
for bad in ../one/model.safetensors /etc/x.safetensors sub/x.safetensors .x.safetensors x.bin \
    model.safetensors.index.json 'a b.safetensors'; do
    hostile "shard name $bad" 4 "weight_map\[\"model.norm.weight\"\]: shard name \"$bad\" is not a plain file name" "
J['weight_map']['model.norm.weight'] = '$bad'"
done
hostile "index over 16 MiB" 4 "model.safetensors.index.json: larger than" "
os.truncate(I, 17 << 20); J = None"
hostile "index JSON cost" 4 "model.safetensors.index.json: its JSON would take" "
open(I, 'w').write('[' + '{},' * 5000000 + '{}]'); J = None"
hostile "total_size negative" 4 "metadata.total_size is not a non-negative integer" "J['metadata']['total_size'] = -1"
hostile "total_size a string" 4 "metadata.total_size is not a non-negative integer" "J['metadata']['total_size'] = '5'"
hostile "too many shards" 4 "weight_map names 303 shards, more than the limit of 256" "
for i in range(300): J['weight_map']['x.%d' % i] = 'x-%d.safetensors' % i"
hostile "duplicate key" 4 "model.safetensors.index.json: not valid JSON (duplicate object key" "
s = open(I).read().replace('\"weight_map\": {', '\"weight_map\": {\"model.norm.weight\": \"$S1\", ', 1)
open(I, 'w').write(s); J = None"
hostile "not JSON" 4 "model.safetensors.index.json: not valid JSON" "open(I, 'w').write('weight_map'); J = None"
hostile "not an object" 4 "model.safetensors.index.json: not a JSON object" "J = []"
hostile "no weight_map" 4 "model.safetensors.index.json: missing weight_map" "del J['weight_map']"
hostile "weight_map not an object" 4 "model.safetensors.index.json: weight_map is not an object" "J['weight_map'] = ['$S1']"
hostile "empty weight_map" 4 "model.safetensors.index.json: weight_map is empty" "J['weight_map'] = {}"
hostile "shard not a string" 4 "weight_map\[\"model.norm.weight\"\] is not a string" "J['weight_map']['model.norm.weight'] = 1"
hostile "unknown key" 4 "model.safetensors.index.json: unknown key 'format'" "J['format'] = 'pt'"
hostile "both layouts" 4 "both model.safetensors and model.safetensors.index.json are here" "
open('model.safetensors', 'wb').write(open('$T/one/model.safetensors', 'rb').read())"
hostile "tensor the config needs, in neither" 4 "model.safetensors.index.json: missing tensor model.norm.weight" "
s = J['weight_map'].pop('model.norm.weight')
write_st(s, [x for x in shard(s) if x[0] != 'model.norm.weight'])"
hostile "shard with a broken header" 4 "$S3: header length" "
b = open('$S3', 'rb').read(); open('$S3', 'wb').write(b'\xff' * 8 + b[8:])"

# ---- 6: memory stays one copy of the weights (docs/inputs.md "Memory"):
# a SmolLM2-135M-shape checkpoint in 4 shards peaks within 8 MiB of the one
# file's peak and within 32 MiB of the weights' bytes
if [ -z "${RUNNER:-}" ] && [ "${SAN:-}" != 1 ]; then
    $CIS2 synth --shape smollm2-135m --seed 1 --out "$T/big" > /dev/null
    $PY $SPLIT "$T/big" "$T/bigsh" 4
    rm -rf "$T/one" "$T/sh1"
    peak() { $PY -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' $CIS2 run --model-dir "$1" --prompt-ids 1,2 --gen-toks 1; }
    one_kb=$(peak "$T/big") || fail "run on the 135M shape"
    sh_kb=$(peak "$T/bigsh") || fail "run on the 135M shape in shards"
    w_kb=$(( $(stat -c %s "$T/big/model.safetensors") / 1024 ))
    echo "peak RSS: one file $one_kb KiB, 4 shards $sh_kb KiB, weights $w_kb KiB"
    [ "$sh_kb" -le $((one_kb + 8192)) ] || fail "the shards' peak RSS is over the one file's + 8 MiB"
    [ "$sh_kb" -le $((w_kb + 32768)) ] || fail "the shards' peak RSS is over the weights + 32 MiB"
fi
echo ok
