#!/bin/sh
# Receipts of prompts given as ids that no bytes reproduce (docs/receipts.md
# "Prompts given as ids"): any ids of the vocabulary run and get a receipt
# with the `prompt-from ids` line; every other receipt stays what it was.
#  - a Python reader written from that section alone (not from the C code)
#    reads the receipt: the key order with the optional line, prompt-hex as
#    the ids' token bytes (docs/sampling.md §S5.2, from tokenizer.json), the
#    absence of a text form (this tokenizer: one entry per byte, no merges,
#    no post-processor), and the argmax and witness digests (§12.2, §12.1)
#    recomputed over the given ids from `--json` and `--dump-logits`;
#  - the docs' worked example is what cis2 writes, byte for byte;
#  - verify, check and compare accept the honest receipts (v1 and
#    ext-sampling-1, one and several sharing a prompt, prefill and decode
#    replays), and name each doctored field: the ids, the bytes, the line
#    dropped (the ids become a claim about prompt-hex's tokenization), the
#    line added to a text prompt's receipt, an id outside the vocabulary;
#  - the parser's refusals for the line (exit 4, one line each);
#  - score receipts of such ids (ext-score-1 records parts given as ids);
#  - with the real SmolLM2 tokenizer (merges: "Once" is one token) from
#    $SHARED, check tells a split word (no text form) from the word's own
#    id (a text form: prompt-from MISMATCH).
set -u
. tests/lib.sh
command -v python3 > /dev/null || skip "no python3"
tmpdir d
expect() {   # expect RC CMD...: runs CMD (stdout to $d/out, stderr to $d/err), checks its exit code
    want=$1; shift
    "$@" > "$d/out" 2> "$d/err"; got=$?
    [ "$got" -eq "$want" ] || { fail_later "'$*' exited $got, expected $want"; sed 's/^/    /' "$d/out" "$d/err" | tail -n 20; }
}
field() { sed -n "s/^$1 //p" "$2"; }
doctor() { awk -v k="$1" -v v="$2" '$1 == k { print k " " v; next } { print }' "$3" > "$4"; }
has() { grep -q "$1" "$d/out" || fail_later "$2: no line '$1' in: $(tr '\n' '|' < "$d/out")"; }

m=$d/m
$CIS2 synth --shape tiny --seed 7 --out "$m" > /dev/null || fail "synth"

cat > "$d/reader.py" <<'EOF'
# A reader of docs/receipts.md "Prompts given as ids", written from the
# documents: argv = receipt, model dir, `cis2 run --json` output,
# --dump-logits file, the ids given to --prompt-ids.
import hashlib, json, struct, sys
path, mdir, runf, dumpf, given = sys.argv[1:6]
text = open(path, 'rb').read().decode('ascii')
assert text.endswith('\n') and '\n\n' not in text, 'line structure'
rows = text[:-1].split('\n')
keys = ['spec-version', 'weights-sha256', 'config-sha256', 'tokenizer-sha256', 'prompt-from', 'prompt-hex',
        'prompt-token-ids', 'gen-toks', 'dtype', 'table-digest', 'inv-freq-table-digest', 'generated-token-ids',
        'argmax-digest', 'witness-digest']
assert rows[0] == 'CIS-2-RECEIPT v1', rows[0]
kv = [r.split(' ') for r in rows[1:]]
assert all(len(x) == 2 for x in kv), 'one space per line'
assert [k for k, _ in kv] == keys, [k for k, _ in kv]
R = dict(kv)
assert R['prompt-from'] == 'ids'
ids = [int(x) for x in R['prompt-token-ids'].split(',')]
assert ids == [int(x) for x in given.split(',')], 'prompt-token-ids are the ids given'
gen = [int(x) for x in R['generated-token-ids'].split(',')]
assert len(gen) == int(R['gen-toks'])

# token bytes, docs/sampling.md §S5.2: an added token's content; a vocab
# string mapped back through §3.1.5.a's byte map when every character is in
# it, else its own UTF-8; an id with neither has no bytes
def byte_map():
    bs = list(range(ord('!'), ord('~') + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    return {chr(c): b for b, c in zip(bs, cs)}
u2b = byte_map()
tok = json.load(open(mdir + '/tokenizer.json'))
inv = {i: s for s, i in tok['model']['vocab'].items()}
added = {a['id']: a['content'] for a in tok['added_tokens']}
def token_bytes(i):
    if i in added: return added[i].encode()
    s = inv.get(i)
    if s is None: return b''
    return bytes(u2b[c] for c in s) if all(c in u2b for c in s) else s.encode()
raw = b''.join(token_bytes(i) for i in ids)
assert R['prompt-hex'] == (raw.hex() if raw else 'none'), (R['prompt-hex'], raw.hex())

# no text form: this tokenizer (no merges, no post-processor, no added
# tokens) encodes a text to one id per byte, the byte's entry, and refuses
# bytes that are not UTF-8; the decoded text is the raw bytes with U+FFFD
# for each invalid sequence, whose encoding is longer than the ids then
assert not tok['model'].get('merges') and tok['post_processor'] is None and not added
def encode(b):
    b.decode('utf-8')                          # raises on invalid UTF-8
    return [tok['model']['vocab'][next(c for c, v in u2b.items() if v == x)] for x in b]
def reproduces(b):
    try: return len(b) > 0 and encode(b) == ids
    except UnicodeDecodeError: return False
assert not reproduces(raw) and not reproduces(raw.decode('utf-8', 'replace').encode()), 'the ids have a text form'

# digests over the ids given: §12.2 and §12.1 from the run's own outputs
run, dump = json.load(open(runf)), open(dumpf, 'rb').read()
a = hashlib.sha256(b''.join(struct.pack('<I', t) for t in ids + gen)).hexdigest()
assert a == R['argmax-digest'] == run['argmax_digest'], 'argmax-digest'
sha = lambda p: hashlib.sha256(open(p, 'rb').read()).digest()
w = hashlib.sha256()
for f in ('model.safetensors', 'tokenizer.json', 'config.json'): w.update(sha(mdir + '/' + f))
w.update(bytes.fromhex(R['table-digest'])); w.update(bytes.fromhex(R['inv-freq-table-digest']))
for t in ids: w.update(struct.pack('<I', t))
step = len(dump) // len(gen)
for s, t in enumerate(gen):
    words = struct.unpack('<%dI' % (step // 4), dump[s * step:(s + 1) * step])
    w.update(struct.pack('<%dI' % len(words), *[0x7FC00000 if (x & 0x7F800000) == 0x7F800000 and x & 0x7FFFFF else x for x in words]))
    w.update(struct.pack('<I', t))
assert w.hexdigest() == R['witness-digest'] == run['cis2_ref'], 'witness-digest'
assert gen == run['generated_token_ids']
print('reader: ok (%d ids, %d bytes, %d generated)' % (len(ids), len(raw), len(gen)))
EOF

# --- the receipts, read from the documents ---
ids1=79,110,99,101,32,195          # "Once " and half a character: raw bytes not UTF-8
ids2=300,301                       # ids above the tokenizer's entries: no bytes at all
ids3=79,110,300,99,101             # bytes "Once", an id without bytes inside
ids4=79,110,99,101,32,117,112,111,110,32,97,32,116,105,109,101,511   # "Once upon a time" and a trailing 511
n=0
for ids in $ids1 $ids2 $ids3 $ids4; do
    n=$((n + 1))
    expect 0 $CIS2 run --model-dir "$m" --prompt-ids "$ids" --gen-toks 4 --receipt "$d/r$n" --json --dump-logits "$d/l$n"
    cp "$d/out" "$d/j$n"
    [ -f "$d/r$n" ] || { fail_later "no receipt for --prompt-ids $ids"; continue; }
    python3 "$d/reader.py" "$d/r$n" "$m" "$d/j$n" "$d/l$n" "$ids" || fail_later "the reader refuses the receipt of $ids"
    expect 0 $CIS2 verify "$d/r$n" --model-dir "$m"
    has '^prompt-from ok' "verify $ids"; has '^prompt-hex ok' "verify $ids"
    has "^prompt-token-ids input ($(echo "$ids" | tr ',' '\n' | wc -l | tr -d ' ') ids)" "verify $ids"
    has '^verdict: OK' "verify $ids"
    expect 0 $CIS2 verify "$d/r$n" --model-dir "$m" --replay decode
    expect 0 $CIS2 check "$d/r$n" --tokenizer "$m/tokenizer.json" --config "$m/config.json"
    has '^prompt-from ok' "check $ids"; has '^verdict: CONSISTENT' "check $ids"
    expect 0 $CIS2 check "$d/r$n"
    has '^prompt-from unverified (needs --tokenizer)' "check without the tokenizer"
done
[ "$(field prompt-hex "$d/r2")" = none ] || fail_later "ids without bytes: prompt-hex $(field prompt-hex "$d/r2")"

# --- the worked example of docs/receipts.md, byte for byte ---
python3 - docs/receipts.md > "$d/doc.r" <<'EOF' || fail_later "no worked example in docs/receipts.md \"Prompts given as ids\""
import sys
s = open(sys.argv[1]).read().split('## Prompts given as ids')[1].split('\n## ')[0]
blk = [b for b in s.split('```') if b.startswith('\nCIS-2-RECEIPT v1\n')]
assert len(blk) == 1
sys.stdout.write(blk[0][1:])
EOF
expect 0 $CIS2 run --model-dir "$m" --prompt-ids $ids1 --gen-toks 4 --receipt "$d/doc.cis2"
cmp -s "$d/doc.r" "$d/doc.cis2" || fail_later "docs/receipts.md's worked example differs from what cis2 writes"
# without the half character the ids are the text's: the text prompt's v1 receipt, no line
expect 0 $CIS2 run --model-dir "$m" --prompt-ids 79,110,99,101,32 --gen-toks 4 --receipt "$d/t.ids"
expect 0 $CIS2 run --model-dir "$m" --prompt "Once " --gen-toks 4 --receipt "$d/t.text"
cmp -s "$d/t.ids" "$d/t.text" || fail_later "ids with a text form: not the text prompt's receipt"
grep -q '^prompt-from' "$d/t.ids" && fail_later "a prompt-from line in a receipt of ids with a text form"

# --- sampled and stopped runs (ext-sampling-1), several of one prompt verified together ---
long=$ids4,79,110,99,101,32,195    # 23 ids: the samples share more than 16 (a shared prefill)
for s in 1 2 3; do
    expect 0 $CIS2 run --model-dir "$m" --prompt-ids "$long" --gen-toks 5 --temperature 0.9 --seed $s --receipt "$d/s$s"
done
[ "$(sed -n 7p "$d/s1")" = "prompt-from ids" ] && [ "$(sed -n 6p "$d/s1" | cut -d' ' -f1)" = tokenizer-sha256 ] \
    && [ "$(sed -n 8p "$d/s1" | cut -d' ' -f1)" = prompt-hex ] || fail_later "ext-sampling-1: the line is not just before prompt-hex"
expect 0 $CIS2 run --model-dir "$m" --prompt-ids "$long" --gen-toks 5 --stop-id 15 --receipt "$d/s4"
expect 0 $CIS2 verify "$d/s1" "$d/s2" "$d/s3" "$d/s4" "$d/r1" --model-dir "$m"
has '^summary: 5 receipts: 5 OK' "verify together"

# --- doctored receipts: each named ---
# the ids changed, bytes kept: another run (the witness), and the bytes no longer the ids' (c4 for c3)
doctor prompt-token-ids 79,110,99,101,32,196 "$d/r1" "$d/bad"
expect 1 $CIS2 verify "$d/bad" --model-dir "$m"
has '^prompt-hex MISMATCH expected=4f6e636520c3 got=4f6e636520c4 (the ids' "doctored id"
has '^verdict: OUTPUT-MISMATCH (prompt-hex .*witness-digest' "doctored id"
# an id swapped for another without bytes: the bytes still fit, the digests do not
doctor prompt-token-ids 301,300 "$d/r2" "$d/bad"
expect 1 $CIS2 verify "$d/bad" --model-dir "$m"
has '^prompt-hex ok' "swapped ids"; has '^witness-digest MISMATCH' "swapped ids"
expect 1 $CIS2 check "$d/bad"
has '^argmax-digest MISMATCH' "check: swapped ids"
# the bytes changed: prompt-hex
doctor prompt-hex 4f6e636520c4 "$d/r1" "$d/bad"
expect 1 $CIS2 verify "$d/bad" --model-dir "$m"
has '^verdict: OUTPUT-MISMATCH (prompt-hex)' "doctored prompt-hex"
expect 1 $CIS2 check "$d/bad" --tokenizer "$m/tokenizer.json"
has '^prompt-hex MISMATCH' "check: doctored prompt-hex"
# the line dropped: the ids become a claim about prompt-hex's tokenization ("Once upon a time")
grep -v '^prompt-from ' "$d/r4" > "$d/bad"
expect 1 $CIS2 verify "$d/bad" --model-dir "$m"
has '^prompt-token-ids MISMATCH' "line dropped"
# the line added to a text prompt's receipt (its prompt-hex is its ids' bytes on this tokenizer)
sed 's/^prompt-hex /prompt-from ids\nprompt-hex /' "$d/t.text" > "$d/bad"
expect 1 $CIS2 verify "$d/bad" --model-dir "$m"
has '^prompt-from MISMATCH the prompt bytes 4f6e636520 reproduce these ids' "line added"
has '^verdict: OUTPUT-MISMATCH (prompt-from)' "line added"
expect 1 $CIS2 check "$d/bad" --tokenizer "$m/tokenizer.json"
# an id outside the model's vocabulary (512): MALFORMED, exit 4
doctor prompt-token-ids 300,512 "$d/r2" "$d/bad"
expect 4 $CIS2 verify "$d/bad" --model-dir "$m"
grep -q 'prompt-token-ids: id 512 is outside the model.s vocabulary (512)' "$d/out" "$d/err" || fail_later "id 512: message"

# --- compare: with the line, the ids are the input ---
expect 0 $CIS2 compare "$d/r1" "$d/r1"
has '^verdict: SAME' "compare SAME"
# the same bytes (none), other ids: different inputs, not a contradiction
expect 0 $CIS2 run --model-dir "$m" --prompt-ids 301,300 --gen-toks 4 --receipt "$d/r2b"
[ "$(field prompt-hex "$d/r2b")" = none ] || fail_later "301,300: prompt-hex"
expect 0 $CIS2 compare "$d/r2" "$d/r2b"
has '^verdict: DIFFERENT-RUN (different prompt-token-ids)' "compare: other ids, same bytes"
# the ids doctored, the witness kept: a forgery (the witness binds the ids)
doctor prompt-token-ids 301,300 "$d/r2" "$d/bad"
expect 1 $CIS2 compare "$d/r2" "$d/bad"
has '^verdict: WITNESS-COLLISION (different prompt-token-ids' "compare: doctored ids"
# a text prompt's receipt and one with the line: different inputs even if prompt-hex were equal
expect 0 $CIS2 compare "$d/t.text" "$d/r1"
has '^prompt-from DIFFERS a=(absent) b=ids' "compare: text and ids"

# --- the parser (exit 4, one line each) ---
sed 's/^prompt-from ids$/prompt-from text/' "$d/r1" > "$d/bad"
expect 4 $CIS2 verify "$d/bad" --model-dir "$m"
grep -q 'line 6: prompt-from: must be ids' "$d/err" || fail_later "prompt-from text: message"
awk '/^prompt-from /{ l = $0; next } { print } /^prompt-hex /{ print l }' "$d/r1" > "$d/bad"
expect 4 $CIS2 check "$d/bad"
grep -q 'line 7: prompt-from out of order' "$d/err" || fail_later "prompt-from after prompt-hex: message"
grep -v '^prompt-from ' "$d/r2" > "$d/bad"
expect 4 $CIS2 check "$d/bad"
grep -q 'line 6: prompt-hex: none only after a prompt-from ids line' "$d/err" || fail_later "prompt-hex none without the line: message"
sed 's/^prompt-from ids$/prompt-from ids\nprompt-from ids/' "$d/r1" > "$d/bad"
expect 4 $CIS2 check "$d/bad"
grep -q "line 7: duplicate key 'prompt-from'" "$d/err" || fail_later "prompt-from twice: message"
for f in "$d"/err; do [ "$(wc -l < "$f")" -le 1 ] || fail_later "a refusal of more than one line: $(cat "$f")"; done

# --- scoring (ext-score-1): parts given as ids are recorded as ids there (context-from ids), whatever they are ---
expect 0 $CIS2 score --model-dir "$m" --context-ids $ids1 --continuation-ids 300,67 --receipt "$d/sc"
grep -qx "context-from ids" "$d/sc" && grep -qx "context-hex 4f6e636520c3" "$d/sc" && grep -qx "continuation-hex 43" "$d/sc" \
    || fail_later "score receipt of ids without a text form: $(tr '\n' '|' < "$d/sc")"
expect 0 $CIS2 verify "$d/sc" "$d/r1" --model-dir "$m"
has '^summary: 2 receipts: 2 OK' "a score receipt and a generation receipt of ids, verified together"

# --- merges: the real SmolLM2 tokenizer ("Once" is one token, 6403) ---
src=$SHARED/models/smollm2-135m
if [ -f "$src/tokenizer.json" ] && [ -f "$src/config.json" ]; then
    # a hand-written receipt (no weights: check only); argmax-digest from its own ids
    mk() {   # mk IDS HEX OUT
        a=$(python3 -c 'import hashlib,struct,sys; print(hashlib.sha256(b"".join(struct.pack("<I", int(t)) for t in (sys.argv[1] + ",28").split(","))).hexdigest())' "$1")
        printf 'CIS-2-RECEIPT v1\nspec-version 0.3b\nweights-sha256 %s\nconfig-sha256 %s\ntokenizer-sha256 %s\nprompt-from ids\nprompt-hex %s\nprompt-token-ids %s\ngen-toks 1\ndtype fp32\ntable-digest 23c7bfaf5cef0095fd021af2eb1808abb4928bae4219756d86bdac670a06b35d\ninv-freq-table-digest da9f6dcfde0425588815509e874515cdcd3d6b8818b6d0136590052e7bbf6f12\ngenerated-token-ids 28\nargmax-digest %s\nwitness-digest %s\n' \
            "$(printf 0%.0s $(seq 64))" "$(sha256sum < "$src/config.json" | cut -c1-64)" \
            "$(sha256sum < "$src/tokenizer.json" | cut -c1-64)" "$2" "$1" "$a" "$(printf 0%.0s $(seq 64))" > "$3"
    }
    split=$($CIS2 tokenize --tokenizer "$src/tokenizer.json" --text O),$($CIS2 tokenize --tokenizer "$src/tokenizer.json" --text n),$($CIS2 tokenize --tokenizer "$src/tokenizer.json" --text c),$($CIS2 tokenize --tokenizer "$src/tokenizer.json" --text e)
    mk "$split" 4f6e6365 "$d/sm.split"
    expect 0 $CIS2 check "$d/sm.split" --tokenizer "$src/tokenizer.json" --config "$src/config.json"
    has '^prompt-from ok' "SmolLM2: O,n,c,e"; has '^prompt-hex ok' "SmolLM2: O,n,c,e"
    mk 6403 4f6e6365 "$d/sm.word"
    expect 1 $CIS2 check "$d/sm.word" --tokenizer "$src/tokenizer.json" --config "$src/config.json"
    has '^prompt-from MISMATCH the prompt bytes 4f6e6365 reproduce these ids' "SmolLM2: 6403 has a text form"
else
    echo "note: no $src: the merges case is not run"
fi

end_fails
echo ok
