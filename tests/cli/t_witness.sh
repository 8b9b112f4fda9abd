#!/bin/sh
# The witness chain (§12.1) and argmax digest (§12.2) recomputed by an
# independent route: python's hashlib over the artifact files, the printed
# table digests, the prompt ids, cis2's --dump-logits and its tokens, in the
# order of FACTS §1.11.  Also a model whose logits contain NaNs produced by
# inf - inf: the witness hashes every NaN as 0x7FC00000 (docs/cross-isa.md).
set -eu
. tests/lib.sh
PY=python3
command -v $PY > /dev/null || skip "no python3"
tmpdir T
$CIS2 synth --shape tiny-qwen --seed 11 --out "$T/m" > /dev/null
cat > "$T/witness.py" <<'PYEOF'
import hashlib, json, struct, sys
d, run, dump = sys.argv[1], json.load(open(sys.argv[2])), open(sys.argv[3], 'rb').read()
sha = lambda p: hashlib.sha256(open(p, 'rb').read()).digest()
w = hashlib.sha256()
w.update(sha(d + '/model.safetensors'))      # weights, tokenizer, config (FACTS §1.11)
w.update(sha(d + '/tokenizer.json'))
w.update(sha(d + '/config.json'))
w.update(bytes.fromhex(run['table_digest']))
w.update(bytes.fromhex(run['inv_freq_table_digest']))
prompt, gen = run['prompt_token_ids'], run['generated_token_ids']
for t in prompt: w.update(struct.pack('<I', t))
step = len(dump) // len(gen)
nans = 0
for s, tok in enumerate(gen):
    words = struct.unpack('<%dI' % (step // 4), dump[s * step:(s + 1) * step])
    canon = [0x7FC00000 if (x & 0x7F800000) == 0x7F800000 and (x & 0x7FFFFF) else x for x in words]
    nans += sum(1 for x in words if (x & 0x7F800000) == 0x7F800000 and x & 0x7FFFFF)
    w.update(struct.pack('<%dI' % len(canon), *canon))
    w.update(struct.pack('<I', tok))
a = hashlib.sha256(b''.join(struct.pack('<I', t) for t in prompt + gen))
ok = w.hexdigest() == run['cis2_ref'] and a.hexdigest() == run['argmax_digest']
print('nan logits: %d; witness %s; argmax %s' % (nans, 'ok' if w.hexdigest() == run['cis2_ref'] else 'MISMATCH', 'ok' if a.hexdigest() == run['argmax_digest'] else 'MISMATCH'))
sys.exit(0 if ok else 1)
PYEOF
$CIS2 run --model-dir "$T/m" --prompt-ids 4,8,15,16 --gen-toks 5 --json --dump-logits "$T/l.f32" > "$T/r.json"
$PY "$T/witness.py" "$T/m" "$T/r.json" "$T/l.f32" || fail "witness recomputation"

# two final-norm gains set to +inf (bf16 0x7F80): LM-head sums meet inf - inf
$PY - "$T/m/model.safetensors" <<'PYEOF'
import json, struct, sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read())
n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n]); t = h['model.norm.weight']
assert t['dtype'] == 'BF16'
o = 8 + n + t['data_offsets'][0]
b[o:o + 4] = b'\x80\x7f\x80\x7f'
open(p, 'wb').write(b)
PYEOF
$CIS2 run --model-dir "$T/m" --prompt-ids 4,8,15,16 --gen-toks 3 --json --dump-logits "$T/l2.f32" > "$T/r2.json"
out=$($PY "$T/witness.py" "$T/m" "$T/r2.json" "$T/l2.f32") || { echo "$out"; fail "NaN witness"; }
echo "$out"
case "$out" in "nan logits: 0;"*) fail "the inf weights produced no NaN logits" ;; esac
echo ok
