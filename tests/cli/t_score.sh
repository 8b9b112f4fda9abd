#!/bin/sh
# tests/cli/t_score.sh - `cis2 score` (docs/sampling.md §S11) against a
# second route through the sampling code: the tokens `cis2 run --logprobs N
# --json` generates (greedy and seeded sampling), scored after the same
# prompt, must have exactly the logprob and top-N bits the run reported
# (the run's cached decode rows against the score's teacher-forced
# prefill); ranks and greedy flags against the run's own logits
# (--dump-logits) ranked in Python; the sums recomputed from the per-token
# bits; a --batch of four continuations of one context (computed once)
# against each scored alone; and the refusals with their exit codes.
set -eu
. tests/lib.sh
PY=/usr/bin/python3
[ -x "$PY" ] || skip "no $PY"
tmpdir d
"$CIS2" synth --shape tiny --seed 7 --out "$d/m" > /dev/null || fail "synth"
m=$d/m
P="Once upon a time"

for mode in greedy sampled; do
    extra=""
    [ $mode = sampled ] && extra="--temperature 0.9 --top-k 40 --seed 5"
    # shellcheck disable=SC2086
    "$CIS2" run --model-dir "$m" --prompt "$P" --gen-toks 12 --logprobs 3 --json --dump-logits "$d/$mode.f32" $extra \
        > "$d/$mode.run.json" || fail "run $mode"
    ids=$("$PY" -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["generated_token_ids"])))' \
          "$d/$mode.run.json")
    "$CIS2" score --model-dir "$m" --context "$P" --continuation-ids "$ids" --top-logprobs 3 --json \
        > "$d/$mode.score.json" || fail "score $mode"
    "$PY" - "$d/$mode.run.json" "$d/$mode.score.json" "$d/$mode.f32" $mode <<'EOF' || fail "score vs run ($mode)"
import json, struct, sys
run = json.load(open(sys.argv[1]))
sc = json.load(open(sys.argv[2]))
raw = open(sys.argv[3], "rb").read()
mode = sys.argv[4]
c = sc["continuations"][0]
assert sc["context_token_ids"] == run["prompt_token_ids"], "context ids"
assert c["token_ids"] == run["generated_token_ids"] and c["first_scored"] == 0
n = len(c["token_ids"])
V = len(raw) // 4 // n
for k, (s, r) in enumerate(zip(c["logprobs"], run["logprobs"])):
    assert (s["id"], s["bits"]) == (r["id"], r["bits"]), ("step", k, s, r)
    assert [(t["id"], t["bits"]) for t in s["top"]] == [(t["id"], t["bits"]) for t in r["top"]], ("top", k)
    row = struct.unpack("<%df" % V, raw[k * V * 4:(k + 1) * V * 4])
    tok = s["id"]
    x = row[tok]
    rank = 1 + sum(1 for i, v in enumerate(row) if v == v and (v > x or (v == x and i < tok)))
    best = max(range(V), key=lambda i: (row[i], -i))          # §11.2: the first maximum
    assert s["rank"] == rank, ("rank", k, s["rank"], rank)
    assert s["greedy"] == (best == tok), ("greedy", k)
f32 = lambda v: struct.unpack("<f", struct.pack("<f", v))[0]   # one rounding of an exact double sum
frombits = lambda h: struct.unpack(">f", bytes.fromhex(h))[0]
s32, s64 = 0.0, 0.0
for t in c["logprobs"]:
    s32 = f32(s32 + frombits(t["bits"]))
    s64 = s64 + frombits(t["bits"])
assert c["sum_bits"] == struct.pack(">f", s32).hex(), ("sum", c["sum_bits"], s32)
assert c["sum_f64_bits"] == struct.pack(">d", s64).hex(), ("sum_f64", c["sum_f64_bits"], s64)
assert c["all_greedy"] == all(t["greedy"] for t in c["logprobs"])
if mode == "greedy":
    assert c["all_greedy"] and all(t["rank"] == 1 for t in c["logprobs"])
else:
    assert not c["all_greedy"], "a seeded T=0.9 run of 12 tokens took the argmax every time: the test proves nothing"
EOF
done
echo "ok: score bits = run --logprobs bits (greedy and sampled), ranks/greedy from the run's logits, sums from the bits"

# four continuations of one context together (--batch: the context once) = each alone
ctx="The quick brown fox jumps over the lazy dog, and then"
cat > "$d/batch.jsonl" <<EOF
{"context": "$ctx", "continuations": [" it", " the dog ran away", "[x]", [5, 6, 7]]}
{"context": null, "continuations": ["no context at all"]}
{"context_ids": [1, 2, 3], "continuations": [" it"]}
EOF
"$CIS2" score --model-dir "$m" --batch "$d/batch.jsonl" --top-logprobs 2 --json > "$d/batch.out" || fail "batch"
[ "$(wc -l < "$d/batch.out")" -eq 3 ] || fail "batch: $(wc -l < "$d/batch.out") lines, want 3"
i=0
for c in " it" " the dog ran away" "[x]"; do
    "$CIS2" score --model-dir "$m" --context "$ctx" --continuation "$c" --top-logprobs 2 --json > "$d/one.$i" ||
        fail "alone $i"
    i=$((i + 1))
done
"$CIS2" score --model-dir "$m" --context "$ctx" --continuation-ids 5,6,7 --top-logprobs 2 --json > "$d/one.3" || fail "alone 3"
"$CIS2" score --model-dir "$m" --continuation "no context at all" --top-logprobs 2 --json > "$d/one.4" || fail "alone 4"
"$PY" - "$d" <<'EOF' || fail "batch differs from alone"
import json, sys
d = sys.argv[1]
lines = [json.loads(l) for l in open(d + "/batch.out")]
batch = lines[0]["continuations"] + lines[1]["continuations"]
for i, b in enumerate(batch):
    a = json.load(open("%s/one.%d" % (d, i)))["continuations"][0]
    for k in ("token_ids", "first_scored", "logprobs", "sum_bits", "sum_f64_bits", "all_greedy"):
        assert a[k] == b[k], (i, k)
assert lines[1]["continuations"][0]["logprobs"][0] is None and lines[1]["continuations"][0]["first_scored"] == 1
assert lines[2]["context_token_ids"] == [1, 2, 3]
EOF
echo "ok: a batch sharing a context = each continuation alone, bit for bit"

# refusals: one line on stderr, the documented exit code
expect() {
    code=$1; needle=$2; shift 2
    set +e; "$@" > "$d/out" 2> "$d/err"; rc=$?; set -e
    [ $rc -eq "$code" ] || fail "$* exited $rc, want $code: $(cat "$d/err")"
    grep -q -- "$needle" "$d/err" || fail "$*: stderr lacks '$needle': $(cat "$d/err")"
    [ "$(wc -l < "$d/err")" -le 1 ] || fail "$*: more than one line: $(cat "$d/err")"
}
expect 2 "continuation has no tokens" "$CIS2" score --model-dir "$m" --context x --continuation ""
expect 2 "give --continuation" "$CIS2" score --model-dir "$m" --context x
expect 2 "not both" "$CIS2" score --model-dir "$m" --context x --context-ids 1 --continuation y
expect 2 "outside the vocabulary" "$CIS2" score --model-dir "$m" --context x --continuation-ids 99999999
expect 2 "--top-logprobs" "$CIS2" score --model-dir "$m" --context x --continuation y --top-logprobs 21
expect 2 "--batch takes" "$CIS2" score --model-dir "$m" --batch "$d/batch.jsonl" --context x
echo '{"context": "x", "continuations": []}' > "$d/bad1"
expect 4 "line 1: continuations" "$CIS2" score --model-dir "$m" --batch "$d/bad1"
echo '{"context": "x", "continuation": ["y"]}' > "$d/bad2"
expect 4 'unknown key "continuation"' "$CIS2" score --model-dir "$m" --batch "$d/bad2"
printf '{"continuations": ["y"]}\nnot json\n' > "$d/bad3"
expect 4 "line 2" "$CIS2" score --model-dir "$m" --batch "$d/bad3"
long=$("$PY" -c 'print(",".join(["1"] * 5000))')
expect 5 "max_position_embeddings" "$CIS2" score --model-dir "$m" --context-ids "$long" --continuation y
echo "ok: refusals"
