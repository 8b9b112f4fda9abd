#!/bin/sh
# tests/cli/t_generation_config.sh - a model directory's generation_config.json
# (docs/sampling.md §S5.1, docs/inputs.md "generation_config.json"): its
# eos_token_id joins config.json's in the list stop-at-eos stops at.
#   - a tiny checkpoint whose config.json has eos_token_id 1 (never drawn
#     below) and a generation_config.json listing [a, 1, b], two ids drawn
#     by seeded runs: the run of one seed stops at a, another's at b, each
#     with finish eos; the independent route is the same run without the
#     file and with --stop-id a,b (the same ids, finish stop-id, same token
#     digest), and the receipt's stop-eos line is the list the sampling
#     reference (tests/sampling/sampling_ref.py, written from
#     docs/sampling.md) builds from the two files: 1,a,b
#   - cis2 verify and cis2 check --config accept that receipt with the file
#     beside config.json and name stop-eos without it (and the other way)
#   - without the file: config.json's list alone, the run to its end;
#     with it but without --stop-at-eos (and its sampling defaults such as
#     temperature present): the greedy run and its v1 receipt byte for byte
#   - malformed files: one line naming the file, exit 4 (3: a directory),
#     for run, verify and serve
#   - cis2 serve: /v1/models' eos_token_ids is the list, and a completion
#     with stop_at_eos stops at a (finish_reason stop, cis2.finish eos) with
#     the CLI run's receipt byte for byte
set -eu
. tests/lib.sh
[ -z "${RUNNER:-}" ] || skip "cross build (the host build checks this)"
PY=/usr/bin/python3
tmpdir T
P="Once upon a time"

$CIS2 synth --shape tiny --seed 7 --out "$T/base" > /dev/null
mkdir "$T/m"
cp "$T/base/model.safetensors" "$T/base/tokenizer.json" "$T/m/"
$PY - "$T" <<'PY'
import json, sys
t = sys.argv[1]
cfg = json.load(open(t + "/base/config.json"))
assert "eos_token_id" not in cfg
cfg["eos_token_id"] = 1
json.dump(cfg, open(t + "/m/config.json", "w"), indent=2)
PY

# runs to the end (the eos list [1] is never drawn): the ids a and b, and
# the seeds whose runs meet a first and b first
for s in 1 2 3 4 5 6 7 8; do
    $CIS2 run --model-dir "$T/m" --prompt "$P" --gen-toks 16 --temperature 1 --seed $s --stop-at-eos --json > "$T/u$s.json"
done
set -- $($PY - "$T" <<'PY'
import json, sys
t = sys.argv[1]
runs = {s: json.load(open(f"{t}/u{s}.json")) for s in range(1, 9)}
ids = {s: r["generated_token_ids"] for s, r in runs.items()}
for s, r in runs.items():
    assert 1 not in ids[s] and r["finish_reason"] == "length" and len(ids[s]) == 16, (s, r)

def first(seq, stops):
    return next((i for i, x in enumerate(seq) if x in stops), None)

for a in sorted({x for v in ids.values() for x in v}):
    for b in sorted({x for v in ids.values() for x in v}):
        if a == b:
            continue
        # met after two tokens at least and before the last few: the stop cuts the run short
        sa = [s for s in ids if (i := first(ids[s], {a, b})) is not None and 2 <= i <= 12 and ids[s][i] == a]
        sb = [s for s in ids if (i := first(ids[s], {a, b})) is not None and 2 <= i <= 12 and ids[s][i] == b]
        if sa and sb:
            print(a, b, sa[0], sb[0])
            sys.exit(0)
sys.exit("no pair of ids found")
PY
)
a=$1 b=$2 sa=$3 sb=$4
echo "eos ids from generation_config.json: $a (seed $sa meets it first) and $b (seed $sb)"
printf '{\n  "bos_token_id": 0,\n  "do_sample": true,\n  "eos_token_id": [%s, 1, %s],\n  "temperature": 0.6,\n  "top_p": 0.9\n}\n' \
    "$a" "$b" > "$T/gen.json"
want_eos=$($PY -c '
import json, sys
sys.path.insert(0, "tests/sampling")
import sampling_ref as R
print(",".join(map(str, R.eos_ids_from_config(json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))))))' \
    "$T/m/config.json" "$T/gen.json")
[ "$want_eos" = "1,$a,$b" ] || fail "sampling_ref's list: $want_eos"

# the same runs without stop-at-eos, greedy: the file changes nothing there
$CIS2 run --model-dir "$T/m" --prompt "$P" --gen-toks 8 --receipt "$T/plain0.r" > "$T/plain0.out"

cp "$T/gen.json" "$T/m/generation_config.json"
$CIS2 run --model-dir "$T/m" --prompt "$P" --gen-toks 8 --receipt "$T/plain1.r" > "$T/plain1.out"
cmp "$T/plain0.out" "$T/plain1.out" || fail "a greedy run without stop-at-eos changed with generation_config.json"
cmp "$T/plain0.r" "$T/plain1.r" || fail "its v1 receipt changed with generation_config.json"

for s in $sa $sb; do
    $CIS2 run --model-dir "$T/m" --prompt "$P" --gen-toks 16 --temperature 1 --seed $s --stop-at-eos --json \
        --receipt "$T/g$s.r" > "$T/g$s.json" || fail "run seed $s with generation_config.json"
done
mv "$T/m/generation_config.json" "$T/gen.away"
for s in $sa $sb; do
    $CIS2 run --model-dir "$T/m" --prompt "$P" --gen-toks 16 --temperature 1 --seed $s --stop-at-eos \
        --stop-id "$a,$b" --json --receipt "$T/x$s.r" > "$T/x$s.json" || fail "run seed $s with --stop-id"
    $CIS2 run --model-dir "$T/m" --prompt "$P" --gen-toks 16 --temperature 1 --seed $s --stop-at-eos \
        --receipt "$T/n$s.r" > /dev/null || fail "run seed $s without the file"
done
$PY - "$T" "$a" "$b" "$sa" "$sb" "$want_eos" <<'PY' || fail "stops"
import json, sys
t, a, b, sa, sb, want_eos = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]

def receipt(p):
    return dict(line.split(" ", 1) for line in open(p).read().splitlines()[1:])

for s, hit in ((sa, a), (sb, b)):
    u, g, x = (json.load(open(f"{t}/{k}{s}.json")) for k in "ugx")
    i = u["generated_token_ids"].index(hit)
    assert g["generated_token_ids"] == u["generated_token_ids"][:i + 1], (s, g, u)
    assert g["generated_token_ids"] == x["generated_token_ids"], (s, g, x)     # the explicit stop ids' run
    assert x["finish_reason"] == "stop-id", x
    G, X, N = receipt(f"{t}/g{s}.r"), receipt(f"{t}/x{s}.r"), receipt(f"{t}/n{s}.r")
    assert G["finish-reason"] == "eos" and G["stop-eos"] == want_eos and G["stop-ids"] == "none", G
    assert X["stop-eos"] == "1" and X["finish-reason"] == "stop-id", X
    assert G["token-digest"] == X["token-digest"] and G["generated-token-ids"] == X["generated-token-ids"]
    # without the file: config.json's list alone, never met
    assert N["stop-eos"] == "1" and N["finish-reason"] == "length" and N["gen-toks"] == "16", N
    assert N["generated-token-ids"] == ",".join(map(str, u["generated_token_ids"]))
    print(f"seed {s}: stops at {hit} after {i + 1} tokens (finish eos), as --stop-id {a},{b} does")
PY

# verify / check: the list the receipt claims is the directory's
expect_verdict() { # WANT(0|1) FIELD-STATUS CMD...
    want=$1 field=$2; shift 2
    set +e; "$@" > "$T/v.out" 2> "$T/v.err"; got=$?; set -e
    [ "$got" = "$want" ] || fail "$* exited $got, not $want: $(tail -3 "$T/v.out") $(cat "$T/v.err")"
    grep -q "^stop-eos $field" "$T/v.out" || fail "$*: no 'stop-eos $field' line: $(cat "$T/v.out")"
}
expect_verdict 1 MISMATCH $CIS2 verify "$T/g$sa.r" --model-dir "$T/m"
expect_verdict 1 MISMATCH $CIS2 check "$T/g$sa.r" --config "$T/m/config.json"
expect_verdict 0 ok $CIS2 verify "$T/n$sa.r" --model-dir "$T/m"
cp "$T/gen.away" "$T/m/generation_config.json"
expect_verdict 0 ok $CIS2 verify "$T/g$sa.r" --model-dir "$T/m"
expect_verdict 0 ok $CIS2 verify "$T/g$sb.r" --model-dir "$T/m"
expect_verdict 0 ok $CIS2 check "$T/g$sa.r" --config "$T/m/config.json"
expect_verdict 1 MISMATCH $CIS2 verify "$T/n$sa.r" --model-dir "$T/m"
abs=$(cd "$(dirname "$CIS2")" && pwd)/$(basename "$CIS2")
(cd "$T/m" && "$abs" check "$T/g$sb.r" --config config.json > "$T/v.out") ||
    fail "check --config config.json (the directory '.'): $(cat "$T/v.out")"
echo "ok: verify and check read the generation_config.json beside config.json"

# malformed: one line naming the file
one_line_error() { # EXIT TEXT CMD...
    want=$1 text=$2; shift 2
    set +e; "$@" > /dev/null 2> "$T/e.err"; got=$?; set -e
    [ "$got" = "$want" ] && [ "$(wc -l < "$T/e.err")" = 1 ] && grep -q "$T/m/generation_config.json: .*$text" "$T/e.err" ||
        fail "$*: exit $got (want $want), stderr: $(cat "$T/e.err")"
}
for bad in '{"eos' '[1]' '{"eos_token_id": "2"}' '{"eos_token_id": [1, -1]}' '{"eos_token_id": 1.5}'; do
    printf '%s\n' "$bad" > "$T/m/generation_config.json"
    one_line_error 4 "" $CIS2 run --model-dir "$T/m" --prompt "$P" --gen-toks 2
done
one_line_error 4 "eos_token_id must be" $CIS2 verify "$T/plain0.r" --model-dir "$T/m"
rm "$T/m/generation_config.json"
mkdir "$T/m/generation_config.json"
one_line_error 3 "not a regular file" $CIS2 run --model-dir "$T/m" --prompt "$P" --gen-toks 2
rmdir "$T/m/generation_config.json"
echo "ok: malformed generation_config.json files refused in one line naming them"

# the server: /v1/models and a completion with stop_at_eos
if "$CIS2" serve --help 2>&1 | grep -q -- --port; then
    printf '%s\n' '{"eos' > "$T/m/generation_config.json"
    set +e; $CIS2 serve --model-dir "$T/m" --port 0 > /dev/null 2> "$T/s.err"; got=$?; set -e
    [ "$got" = 4 ] && [ "$(grep -vc '^cis2 serve: loading ' "$T/s.err")" = 1 ] && grep -q "$T/m/generation_config.json: invalid JSON" "$T/s.err" ||
        fail "serve with a malformed generation_config.json: exit $got: $(cat "$T/s.err")"
    cp "$T/gen.json" "$T/m/generation_config.json"
    start S "$T/m" --model-name m
    curl -s "http://127.0.0.1:$port_S/v1/models" > "$T/models.json"
    curl -s "http://127.0.0.1:$port_S/v1/completions" -H 'Content-Type: application/json' \
        -d "{\"model\": \"m\", \"prompt\": \"$P\", \"max_tokens\": 16, \"temperature\": 1, \"seed\": $sa, \"stop_at_eos\": true}" \
        > "$T/c.json"
    $PY - "$T" "$want_eos" "$sa" <<'PY' || fail "served"
import json, sys
t, want_eos, sa = sys.argv[1], sys.argv[2], sys.argv[3]
m = json.load(open(t + "/models.json"))["data"][0]
assert m["cis2"]["eos_token_ids"] == [int(x) for x in want_eos.split(",")], m
assert m["max_model_len"] == 256, m   # config.json's max_position_embeddings (the tiny shape's)
c = json.load(open(t + "/c.json"))["choices"][0]
assert c["finish_reason"] == "stop" and c["cis2"]["finish"] == "eos", c
assert c["cis2"]["receipt"] == open(f"{t}/g{sa}.r").read(), c["cis2"]["receipt"]
print("ok: served: eos_token_ids", m["cis2"]["eos_token_ids"], "and the CLI's receipt, byte for byte")
PY
fi
echo "t_generation_config: all passed"
