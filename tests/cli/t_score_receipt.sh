#!/bin/sh
# tests/cli/t_score_receipt.sh - score receipts, "CIS-2-RECEIPT
# ext-score-1" (docs/receipts.md "Score receipts").
# The expected receipt is built in Python, line for line, from a second
# route: `cis2 run --logprobs 3 --json --dump-logits` generating the same
# tokens after the same prompt (its v1 receipt gives the artifact hashes
# and table digests; its dumped logits rows, hashed in Python, the witness;
# its reported bits, with ranks and greedy flags ranked in Python from the
# rows, the logprob digest and the sums), and must equal `cis2 score
# --receipt` byte for byte.  Then `cis2 verify` re-derives it (alone,
# several at once, and mixed with a v1 receipt), names each doctored
# field (a logprob, a token, a sum, a context, an artifact hash), and the
# parser refuses malformed ones (exit 4); `cis2 check` recomputes the sums
# from logprob-bits without weights; `cis2 compare` judges two.
set -eu
. tests/lib.sh
PY=/usr/bin/python3
[ -x "$PY" ] || skip "no $PY"
tmpdir d
"$CIS2" synth --shape tiny --seed 7 --out "$d/m" > /dev/null || fail "synth"
m=$d/m
P="Once upon a time"

"$CIS2" run --model-dir "$m" --prompt "$P" --gen-toks 9 --logprobs 3 --json --dump-logits "$d/run.f32" \
    --receipt "$d/run.receipt" > "$d/run.json" || fail "run"
ids=$("$PY" -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["generated_token_ids"])))' \
      "$d/run.json")
"$CIS2" score --model-dir "$m" --context "$P" --continuation-ids "$ids" --top-logprobs 3 --receipt "$d/s" \
    > /dev/null || fail "score --receipt"
[ -f "$d/s" ] || fail "one continuation: the receipt is FILE itself"

"$PY" - "$d/run.json" "$d/run.f32" "$d/run.receipt" "$d/s" <<'EOF' || fail "receipt vs the independent route"
import hashlib, json, struct, sys
run = json.load(open(sys.argv[1]))
raw = open(sys.argv[2], "rb").read()
v1 = dict(l.split(" ", 1) for l in open(sys.argv[3]).read().splitlines()[1:])
got = open(sys.argv[4], "rb").read().decode()
lines = dict(l.split(" ", 1) for l in got.splitlines()[1:])
ctx, gen = run["prompt_token_ids"], run["generated_token_ids"]
n = len(gen)
V = len(raw) // 4 // n
u32 = lambda v: struct.pack("<I", v)
# witness: §12.1 items 1-6 over context ++ continuation, the context's length, then (row, token) per scored token
w = hashlib.sha256()
for k in ("weights-sha256", "tokenizer-sha256", "config-sha256", "table-digest", "inv-freq-table-digest"):
    w.update(bytes.fromhex(v1[k]))
for t in ctx + gen: w.update(u32(t))
w.update(u32(len(ctx)))
lpd = hashlib.sha256()
f32 = lambda v: struct.unpack("<f", struct.pack("<f", v))[0]
frombits = lambda h: struct.unpack(">f", bytes.fromhex(h))[0]
s32 = s64 = 0.0
greedy_all = True
for k, tok in enumerate(gen):
    rowb = raw[k * V * 4:(k + 1) * V * 4]
    row = struct.unpack("<%df" % V, rowb)
    assert all(x == x for x in row), "no NaN in this model's logits"
    w.update(rowb); w.update(u32(tok))
    lp = run["logprobs"][k]
    assert lp["id"] == tok
    x = row[tok]
    rank = 1 + sum(1 for i, v in enumerate(row) if v > x or (v == x and i < tok))
    greedy = max(range(V), key=lambda i: (row[i], -i)) == tok
    greedy_all = greedy_all and greedy
    lpd.update(u32(int(lp["bits"], 16)) + u32(rank) + bytes([1 if greedy else 0]))
    for t in lp["top"]: lpd.update(u32(t["id"]) + u32(int(t["bits"], 16)))
    s32 = f32(s32 + frombits(lp["bits"])); s64 = s64 + frombits(lp["bits"])
want = ["CIS-2-RECEIPT ext-score-1", "spec-version 0.3b", "extension score-1"]
want += ["%s %s" % (k, v1[k]) for k in ("weights-sha256", "config-sha256", "tokenizer-sha256")]
want += ["dtype fp32"] + ["%s %s" % (k, v1[k]) for k in ("table-digest", "inv-freq-table-digest")]
want += ["context-from text", "context-hex " + v1["prompt-hex"], "context-token-ids " + ",".join(map(str, ctx))]
want += ["continuation-from ids", "continuation-hex " + lines["continuation-hex"],
         "continuation-token-ids " + ",".join(map(str, gen)), "first-scored 0", "top-logprobs 3",
         "logprob-bits " + ",".join(lp["bits"] for lp in run["logprobs"]), "all-greedy %d" % greedy_all,
         "sum-bits " + struct.pack(">f", s32).hex(), "sum-f64-bits " + struct.pack(">d", s64).hex(),
         "logprob-digest " + lpd.hexdigest(), "witness-digest " + w.hexdigest()]
want = "\n".join(want) + "\n"
if got != want:
    import difflib
    sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), got.splitlines(True), "python", "cis2"))
    sys.exit(1)
# the greedy run's tokens are all greedy
assert greedy_all and lines["all-greedy"] == "1"
EOF

# ---- verify: alone, several (shared context, no context), mixed with a v1 receipt
"$CIS2" verify --model-dir "$m" "$d/s" > "$d/v.out" || { cat "$d/v.out"; fail "verify of an honest receipt"; }
grep -qx "verdict: OK" "$d/v.out" || fail "verdict OK"
grep -qx "witness-digest ok" "$d/v.out" || fail "witness line"
"$CIS2" score --model-dir "$m" --context "$P" --continuation " there" --continuation " a dog" --continuation-ids 1,2 \
    --receipt "$d/b" > /dev/null || fail "score several"
for i in 0 1 2; do [ -f "$d/b.$i" ] || fail "FILE.$i"; done
[ ! -e "$d/b" ] || fail "several: no FILE itself"
"$CIS2" score --model-dir "$m" --continuation "no context here" --receipt "$d/nc" > /dev/null || fail "score no context"
grep -qx "first-scored 1" "$d/nc" && grep -qx "context-from none" "$d/nc" && grep -qx "context-token-ids none" "$d/nc" \
    || fail "no context: first-scored 1, none"
"$CIS2" verify --model-dir "$m" "$d/b.0" "$d/b.1" "$d/b.2" "$d/nc" "$d/run.receipt" "$d/s" > "$d/vm.out" \
    || { cat "$d/vm.out"; fail "verify several, mixed with v1"; }
grep -q "summary: 6 receipts: 6 OK" "$d/vm.out" || { cat "$d/vm.out"; fail "summary"; }
"$CIS2" verify --twice --model-dir "$m" "$d/b.1" > /dev/null || fail "verify --twice"

# ---- doctored receipts: each names its field (exit 1), an artifact exit 6
doctor() { # NAME SED-EXPR [SOURCE]: $d/NAME from SOURCE (default $d/s)
    sed "$2" "${3:-$d/s}" > "$d/$1"
    cmp -s "$d/$1" "${3:-$d/s}" && fail "doctor $1 changed nothing"
    return 0
}
expect() { # NAME CODE VERDICT-LINE (a basic regular expression)
    set +e
    "$CIS2" verify --model-dir "$m" "$d/$1" > "$d/$1.out" 2>&1
    c=$?
    set -e
    [ "$c" = "$2" ] || { cat "$d/$1.out"; fail "$1: exit $c, expected $2"; }
    grep -qx "$3" "$d/$1.out" || { cat "$d/$1.out"; fail "$1: expected '$3'"; }
}
first_bits=$(sed -n 's/^logprob-bits \([0-9a-f]*\).*/\1/p' "$d/s")
doctor lp "s/^logprob-bits $first_bits/logprob-bits 00000000/"
expect lp 1 "verdict: OUTPUT-MISMATCH (logprob-bits)"
grep -q "^logprob-bits MISMATCH at continuation token 0 (id [0-9]*): expected=00000000 got=$first_bits" "$d/lp.out" \
    || { cat "$d/lp.out"; fail "the doctored token named"; }
doctor sum 's/^sum-bits c/sum-bits d/'
expect sum 1 "verdict: OUTPUT-MISMATCH (sum-bits)"
doctor sum64 's/^sum-f64-bits c/sum-f64-bits d/'
expect sum64 1 "verdict: OUTPUT-MISMATCH (sum-f64-bits)"
doctor digest 's/^logprob-digest ./logprob-digest 0/'
grep -q "^logprob-digest 0" "$d/s" && doctor digest 's/^logprob-digest ./logprob-digest 1/'
expect digest 1 "verdict: OUTPUT-MISMATCH (logprob-digest)"
# a doctored token: the ids no longer give the recorded bytes, and its scores are of another token
tok0=${ids%%,*}
other=$(( tok0 == 5 ? 6 : 5 ))
doctor tok "s/^continuation-token-ids $tok0,/continuation-token-ids $other,/"
expect tok 1 "verdict: OUTPUT-MISMATCH (continuation-hex logprob-bits .*logprob-digest witness-digest)"
# the same token doctored consistently (its bytes too): still named by the recomputation
"$CIS2" score --model-dir "$m" --context "$P" --continuation-ids "$other,${ids#*,}" --top-logprobs 3 --receipt "$d/s2" > /dev/null
h2=$(sed -n 's/^continuation-hex //p' "$d/s2")
doctor tok2 "s/^continuation-token-ids $tok0,/continuation-token-ids $other,/; s/^continuation-hex .*/continuation-hex $h2/"
expect tok2 1 "verdict: OUTPUT-MISMATCH (logprob-bits .*logprob-digest witness-digest)"
# a wrong context: its bytes (text) no longer give its ids; and with both changed, the scores differ
doctor ctx "s/^context-hex 4f/context-hex 6f/"
expect ctx 1 "verdict: OUTPUT-MISMATCH (context-token-ids)"
"$CIS2" score --model-dir "$m" --context "once upon a time" --continuation-ids "$ids" --top-logprobs 3 --receipt "$d/s3" > /dev/null
c3=$(sed -n 's/^context-token-ids //p' "$d/s3")
doctor ctx2 "s/^context-hex 4f/context-hex 6f/; s/^context-token-ids .*/context-token-ids $c3/"
grep -q "^logprob-bits" "$d/ctx2"
set +e; "$CIS2" verify --model-dir "$m" "$d/ctx2" > "$d/ctx2.out"; c=$?; set -e
[ "$c" = 1 ] || fail "a wrong context: exit $c"
grep -q "^verdict: OUTPUT-MISMATCH (.*witness-digest)" "$d/ctx2.out" || { cat "$d/ctx2.out"; fail "a wrong context: witness"; }
grep -qx "context-token-ids ok" "$d/ctx2.out" || fail "a wrong context: its ids are its text's"
doctor art 's/^weights-sha256 ./weights-sha256 0/'
grep -q "^weights-sha256 0" "$d/s" && doctor art 's/^weights-sha256 ./weights-sha256 1/'
expect art 6 "verdict: ARTIFACT-MISMATCH (weights-sha256)"

# ---- the parser: malformed score receipts are exit 4 (the v1/ext parsers are t_receipt*'s)
malformed() { # NAME SED-EXPR
    sed "$2" "$d/s" > "$d/$1"
    set +e; "$CIS2" check "$d/$1" > "$d/$1.out" 2>&1; c=$?; set -e
    [ "$c" = 4 ] || { cat "$d/$1.out"; fail "malformed $1: exit $c, expected 4"; }
}
malformed first 's/^first-scored 0/first-scored 1/'
malformed bits_upper 's/^logprob-bits c/logprob-bits C/'
malformed bits_short 's/^logprob-bits \([0-9a-f]*\),/logprob-bits /'
malformed bits_len 's/^logprob-bits c\([0-9a-f]*\)/logprob-bits c\1a/'
malformed sum64_len 's/^sum-f64-bits \(.*\)..$/sum-f64-bits \1/'
malformed from 's/^context-from text/context-from none/'
malformed ext 's/^extension score-1/extension sampling-1/'
malformed top 's/^top-logprobs 3/top-logprobs 21/'
malformed order '/^all-greedy/d'
malformed greedy 's/^all-greedy ./all-greedy 2/'

# ---- check: no weights; the sums from logprob-bits
"$CIS2" check "$d/s" --tokenizer "$m/tokenizer.json" --config "$m/config.json" > "$d/c.out" || { cat "$d/c.out"; fail "check"; }
grep -qx "sum-bits ok" "$d/c.out" && grep -qx "continuation-hex ok" "$d/c.out" && grep -q "^verdict: CONSISTENT" "$d/c.out" \
    || { cat "$d/c.out"; fail "check lines"; }
set +e; "$CIS2" check "$d/sum" > "$d/c2.out"; c=$?; set -e
[ "$c" = 1 ] && grep -qx "verdict: OUTPUT-MISMATCH (sum-bits)" "$d/c2.out" || { cat "$d/c2.out"; fail "check names the sum"; }

# ---- compare
"$CIS2" compare "$d/s" "$d/s" | grep -qx "verdict: SAME" || fail "compare SAME"
set +e; "$CIS2" compare "$d/s" "$d/lp" > "$d/cmp.out"; c=$?; set -e
[ "$c" = 1 ] && grep -q "CONTRADICTION" "$d/cmp.out" || { cat "$d/cmp.out"; fail "compare CONTRADICTION"; }
"$CIS2" compare "$d/s" "$d/run.receipt" | grep -q "DIFFERENT-RUN" || fail "compare with v1"

# ---- refusals before any work
set +e; "$CIS2" score --model-dir "$m" --continuation x --receipt "" > /dev/null 2>&1; c=$?; set -e
[ "$c" = 2 ] || fail "--receipt '': exit $c"
set +e; "$CIS2" score --model-dir "$m" --continuation x --receipt "$m/config.json" > /dev/null 2>&1; c=$?; set -e
[ "$c" = 2 ] || fail "--receipt over an input: exit $c"
echo "ok t_score_receipt"
