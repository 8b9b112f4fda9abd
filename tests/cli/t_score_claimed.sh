#!/bin/sh
# tests/cli/t_score_claimed.sh - `cis2 score --batch` with claimed_logprobs
# (docs/eval.md "RL: measuring an inference engine's drift"): another
# engine's logprobs for the continuation tokens, compared with the exact
# ones.  Checked against what the input alone says, recomputed in Python:
#   1. claims copied from `cis2 run --logprobs 0 --json` (greedy and seeded,
#      the run's decimals as printed) and from `cis2 score --json` give
#      every diff exactly +0.0 and a summary of zeros;
#   2. perturbed claims (floats, integers, -0.0, nulls, huge values, ids
#      and text continuations, with and without a context) give the
#      "claimed", "diff" and "mismatch" figures Python computes from the
#      input and the exact logprobs' bits (binary64, bit for bit), in
#      --json and in the human output; the rest of each line's output is
#      what the line prints without claims, and a line without claims
#      prints byte for byte what it prints in a file without claims;
#   3. bad claims: one line on stderr naming the line, exit 4, nothing on
#      stdout, no receipt written;
#   4. on a checkpoint whose logits are +-inf and NaN, an -inf or NaN exact
#      logprob: its diff and its rollout's summary null (not finite);
#   5. the worked example of docs/eval.md, run as written, prints what the
#      page shows.
set -eu
. tests/lib.sh
PY=/usr/bin/python3
[ -x "$PY" ] || skip "no $PY"
tmpdir d
root=$(pwd)
case $CIS2 in /*) ;; *) CIS2=$root/$CIS2 ;; esac
"$CIS2" synth --shape tiny --seed 7 --out "$d/m" > /dev/null || fail "synth"
m=$d/m
P="Once upon a time"

# ---- 1. exact claims: diff 0
for mode in greedy sampled; do
    extra=""
    [ $mode = sampled ] && extra="--temperature 0.9 --top-k 40 --seed 5"
    # shellcheck disable=SC2086
    "$CIS2" run --model-dir "$m" --prompt "$P" --gen-toks 10 --logprobs 0 --json $extra > "$d/$mode.run.json" ||
        fail "run $mode"
done
cat > "$d/plain.jsonl" <<EOF
{"context": "$P", "continuations": [" it was", [5, 6, 7, 8]]}
{"context": null, "continuations": ["no context at all", [9, 10, 11]]}
{"context_ids": [1, 2, 3], "continuations": [" the dog"]}
EOF
"$CIS2" score --model-dir "$m" --batch "$d/plain.jsonl" --json > "$d/plain.out" || fail "score plain"
"$PY" - "$d" "$P" > "$d/exact.jsonl" <<'EOF' || fail "writing the exact claims"
import json, sys
d, P = sys.argv[1], sys.argv[2]
runs = [json.load(open("%s/%s.run.json" % (d, m))) for m in ("greedy", "sampled")]
# the run's own figures, its decimals as printed (json.load parses each to the double it names)
print(json.dumps({"context": P, "continuations": [r["generated_token_ids"] for r in runs],
                  "claimed_logprobs": [[t["logprob"] for t in r["logprobs"]] for r in runs]}))
# cis2 score's own figures, a line of plain.jsonl each (null for the unscored first token)
for src, out in zip(open(d + "/plain.jsonl"), open(d + "/plain.out")):
    line, o = json.loads(src), json.loads(out)
    line["claimed_logprobs"] = [[t and t["logprob"] for t in c["logprobs"]] for c in o["continuations"]]
    print(json.dumps(line))
EOF
"$CIS2" score --model-dir "$m" --batch "$d/exact.jsonl" --json > "$d/exact.out" || fail "score exact claims"
"$PY" - "$d/exact.jsonl" "$d/exact.out" "$d/greedy.run.json" "$d/sampled.run.json" <<'EOF' || fail "exact claims"
import json, math, struct, sys
ins = [json.loads(l) for l in open(sys.argv[1])]
outs = [json.loads(l) for l in open(sys.argv[2])]
runs = [json.load(open(p)) for p in sys.argv[3:5]]
assert len(ins) == len(outs) == 4
pos0 = lambda v: v == 0 and math.copysign(1, v) == 1
for r, c in zip(runs, outs[0]["continuations"]):        # the run's tokens after the run's prompt
    assert c["token_ids"] == r["generated_token_ids"]
    assert [t["bits"] for t in c["logprobs"]] == [t["bits"] for t in r["logprobs"]]
n = 0
for o in outs:
    for c in o["continuations"]:
        for t in c["logprobs"]:
            if t is None: continue
            assert t["claimed"] == t["logprob"] and pos0(t["diff"]), t
            n += 1
        mm = c["mismatch"]
        assert mm["n_compared"] == c["n_scored"], mm
        assert pos0(mm["max_abs_diff"]) and pos0(mm["mean_diff"]) and pos0(mm["log_ratio"]), mm
assert n >= 30, n
EOF
echo "ok: claims equal to cis2 run's and cis2 score's own logprobs give diff +0.0 exactly"

# ---- 2. perturbed claims against Python's arithmetic
"$PY" - "$d" <<'EOF' || fail "writing the perturbed claims"
import json, random, struct, sys
d = sys.argv[1]
rnd = random.Random(11)
src = [json.loads(l) for l in open(d + "/plain.jsonl")]
out = [json.loads(l) for l in open(d + "/plain.out")]
f32 = lambda h: struct.unpack(">f", bytes.fromhex(h))[0]
lines = []
for k, (line, o) in enumerate(zip(src, out)):
    cl = []
    for c in o["continuations"]:
        a = []
        for j, t in enumerate(c["logprobs"]):
            if t is None: a.append(None); continue
            x = f32(t["bits"])
            a.append([x + rnd.uniform(-0.5, 0.5), x * (1 + 1e-7), None, round(x), round(x, 3), -0.0,
                      x - 1e-12][(j + k) % 7])
        cl.append(a)
    line["claimed_logprobs"] = cl
    lines.append(line)
lines.insert(1, {"continuations": [" x"], "claimed_logprobs": [[None, None]]})     # nothing compared
lines.append({"context_ids": [1], "continuations": [[2, 3, 4]], "claimed_logprobs": [[-1e308, -1e308, -2]]})
lines.insert(3, {"context": "ab", "continuations": ["cd"]})                         # no claims among claims
lines.append({"context": "x", "continuations": [[7, 8]], "claimed_logprobs": None})  # null: as absent
with open(d + "/claims.jsonl", "w") as f, open(d + "/claims.plain.jsonl", "w") as g:   # the same lines without claims
    for l in lines:
        print(json.dumps(l), file=f)
        print(json.dumps({k: v for k, v in l.items() if k != "claimed_logprobs"}), file=g)
EOF
# check MODEL NAME: NAME.jsonl and NAME.plain.jsonl (the same lines without
# claims) scored with --json and without; every figure recomputed by
# $d/check.py (which writes the number of claims compared to $d/NAME.n)
check() {
    for f in "$2" "$2.plain"; do
        "$CIS2" score --model-dir "$1" --batch "$d/$f.jsonl" --json > "$d/$f.out" || fail "score $f.jsonl"
        "$CIS2" score --model-dir "$1" --batch "$d/$f.jsonl" > "$d/$f.txt" || fail "score $f.jsonl (human)"
    done
    "$PY" "$d/check.py" "$d/$2" || fail "$2: claims against Python"
}
cat > "$d/check.py" <<'EOF'
import json, math, struct, sys
d = sys.argv[1]
ins = [json.loads(l) for l in open(d + ".jsonl")]
raw = open(d + ".out").read().splitlines()
outs = [json.loads(l) for l in raw]
assert len(ins) == len(outs)
B = lambda v: None if v is None else struct.pack(">d", v)         # bits, so -0.0 != +0.0
f32 = lambda h: struct.unpack(">f", bytes.fromhex(h))[0]
fin = lambda v: v if math.isfinite(v) else None                    # --json: not finite is null
def g(v): return ("%.17g" % v).replace("-nan", "nan")            # the human form (a NaN's sign aside)
def human(path):    # the human output: [context line, [continuation blocks]] per line
    out = []
    for l in open(path).read().splitlines():
        if l.startswith("context_token_ids = "): out.append([l, []])
        elif l.startswith("continuation "): out[-1][1].append([l])
        else: out[-1][1][-1].append(l)
    return out
H, Hp = human(d + ".txt"), human(d + ".plain.txt")
assert len(H) == len(Hp) == len(ins)
plain = open(d + ".plain.out").read().splitlines()
checked = 0
for li, (i, o) in enumerate(zip(ins, outs)):
    cls = i.get("claimed_logprobs")
    assert H[li][0] == Hp[li][0]
    if cls is None:    # a line without claims: byte for byte as in the file without any
        assert raw[li] == plain[li], ("line", li + 1, "differs from the file without claims")
        assert H[li] == Hp[li], ("line", li + 1, "human output differs")
        assert all("mismatch" not in c for c in o["continuations"])
        continue
    p = json.loads(plain[li])
    for ci, (c, cl) in enumerate(zip(o["continuations"], cls)):
        assert len(cl) == len(c["token_ids"])
        n, mx, s, diffs = 0, 0.0, 0.0, []
        for k, (t, x) in enumerate(zip(c["logprobs"], cl)):
            if t is None:
                assert x is None and k < c["first_scored"]; diffs.append(None); continue
            exact = f32(t["bits"])
            if x is None:
                assert t["claimed"] is None and t["diff"] is None, t; diffs.append(None); continue
            x = float(x)
            dd = x - exact
            assert B(t["claimed"]) == B(x), (li, ci, k, t["claimed"], x)
            assert B(t["diff"]) == B(fin(dd)), (li, ci, k, t["diff"], dd)
            diffs.append(dd)
            n += 1
            if math.isnan(abs(dd)) or abs(dd) > mx: mx = abs(dd)
            s = s + dd
            checked += 1
        mean = s / n if n else float("nan")
        lr = 0.0
        for k, (t, x) in enumerate(zip(c["logprobs"], cl)):
            if t is not None and x is not None: lr = lr + (f32(t["bits"]) - float(x))
        assert B(lr) == B(0.0 - s), (lr, s)                             # the two forms agree
        want = {"n_compared": n, "max_abs_diff": fin(mx), "mean_diff": fin(mean), "log_ratio": fin(lr)}
        got = c["mismatch"]
        assert list(got) == list(want), got
        for key in want:
            assert B(got[key]) == B(want[key]) if key != "n_compared" else got[key] == want[key], (li, ci, key, got, want)
        # the rest of the entry is what the line gives without claims
        q = dict(c); q.pop("mismatch")
        q["logprobs"] = [t and {k: v for k, v in t.items() if k not in ("claimed", "diff")} for t in c["logprobs"]]
        assert q == p["continuations"][ci], (li, ci)
        # the human block: the summary line and two more columns, the rest as without claims
        blk, bp = H[li][1][ci], Hp[li][1][ci]
        assert blk[:3] == bp[:3] and len(blk) == len(bp) + 1, (blk, bp)
        assert blk[3].replace("-nan", "nan") == "  compared = %d, max_abs_diff = %s, mean_diff = %s, log_ratio = %s" % (
            n, g(mx), g(mean), g(lr)), blk[3]
        assert blk[4].split() == bp[3].split() + ["claimed", "diff"], blk[4]
        rows, rp = [l.replace("-nan", "nan").split() for l in blk[5:]], [l.split() for l in bp[4:]]
        assert len(rows) == len(cl)
        for k, (row, x) in enumerate(zip(rows, cl)):
            if k < c["first_scored"]: assert row == rp[k], row
            elif x is None: assert row == rp[k] + ["-"], row
            else: assert row == rp[k] + [g(float(x)), g(diffs[k])], (row, g(float(x)), g(diffs[k]))
open(d + ".n", "w").write("%d\n" % checked)
EOF
check "$m" claims
[ "$(cat "$d/claims.n")" -ge 30 ] || fail "only $(cat "$d/claims.n") claims compared"
"$PY" - "$d/claims.out" <<'EOF' || fail "the edge cases"
import json, sys
outs = [json.loads(l) for l in open(sys.argv[1])]
assert len(outs) == 7
assert outs[1]["continuations"][0]["mismatch"] == {"n_compared": 0, "max_abs_diff": 0.0, "mean_diff": None, "log_ratio": 0.0}
big = outs[5]["continuations"][0]["mismatch"]     # a sum past binary64's range: null
assert big["n_compared"] == 3 and big["max_abs_diff"] > 9e307 and big["mean_diff"] is None and big["log_ratio"] is None, big
EOF
echo "ok: claimed, diff and the summary = Python's binary64 from the input and the bits (--json and human); the rest unchanged"

# ---- 3. refusals: one line naming the line, exit 4, nothing written
good='{"context_ids": [1, 2], "continuations": [[5, 6]], "claimed_logprobs": [[-1.5, null]]}'
refuse() {    # refuse NEEDLE LINE2: a file of a good line, then LINE2
    printf '%s\n%s\n' "$good" "$2" > "$d/bad.jsonl"
    rm -f "$d"/rcpt*
    set +e; "$CIS2" score --model-dir "$m" --batch "$d/bad.jsonl" --json --receipt "$d/rcpt" > "$d/out" 2> "$d/err"; rc=$?; set -e
    [ $rc -eq 4 ] || fail "$2: exit $rc, want 4: $(cat "$d/err")"
    [ "$(wc -l < "$d/err")" -eq 1 ] || fail "$2: not one line: $(cat "$d/err")"
    grep -q "bad.jsonl: line 2: " "$d/err" || fail "$2: the error does not name line 2: $(cat "$d/err")"
    grep -qF -- "$1" "$d/err" || fail "$2: stderr lacks '$1': $(cat "$d/err")"
    [ ! -s "$d/out" ] || fail "$2: wrote to stdout: $(head -c 200 "$d/out")"
    for f in "$d"/rcpt*; do [ ! -e "$f" ] || fail "$2: wrote a receipt: $f"; done
}
refuse "claimed_logprobs[0] has 1 values, continuations[0] has 2 tokens" \
    '{"context_ids": [1], "continuations": [[5, 6]], "claimed_logprobs": [[-1]]}'
refuse "claimed_logprobs[1] has 3 values, continuations[1] has 2 tokens" \
    '{"context_ids": [1], "continuations": [[5], [5, 6]], "claimed_logprobs": [[-1], [-1, -2, -3]]}'
refuse "claimed_logprobs[0] has 2 values, continuations[0] has 8 tokens" \
    '{"context": "ab", "continuations": ["the text"], "claimed_logprobs": [[-1, -2]]}'
for v in '"NaN"' '"-inf"' '"Infinity"' '"-1.5"' 'true' '{}' '[-1]'; do
    refuse "claimed_logprobs[0][1] is not a JSON number or null" \
        "{\"context_ids\": [1], \"continuations\": [[5, 6]], \"claimed_logprobs\": [[-1, $v]]}"
done
refuse "invalid token" '{"context_ids": [1], "continuations": [[5, 6]], "claimed_logprobs": [[-1, NaN]]}'
refuse "invalid token" '{"context_ids": [1], "continuations": [[5, 6]], "claimed_logprobs": [[-Infinity, -1]]}'
refuse "real number overflow" '{"context_ids": [1], "continuations": [[5, 6]], "claimed_logprobs": [[-1, -1e999]]}'
refuse "claimed_logprobs is not an array" '{"context_ids": [1], "continuations": [[5]], "claimed_logprobs": {"0": [-1]}}'
refuse "claimed_logprobs has 1 entries, continuations has 2" \
    '{"context_ids": [1], "continuations": [[5], [6]], "claimed_logprobs": [[-1]]}'
refuse "claimed_logprobs[0] is not an array" '{"context_ids": [1], "continuations": [[5]], "claimed_logprobs": [-1]}'
refuse "claimed_logprobs[0][0] must be null" '{"continuations": [[5, 6]], "claimed_logprobs": [[-1, -2]]}'
refuse "claimed_logprobs[1][0] must be null" \
    '{"context": "", "continuations": [[5], "ab"], "claimed_logprobs": [[null], [-1, -2]]}'
refuse 'unknown key "claimed"' '{"context_ids": [1], "continuations": [[5]], "claimed": [[-1]]}'
echo "ok: bad claims refused with one line naming the line, exit 4, no output, no receipt"

# ---- 4. exact logprobs that are not finite: the ±inf checkpoint of
# t_reliability3 (every logit ±inf, token 65, "A", of the other sign than
# the rest), token 66 ("B") a NaN logit: -inf and NaN logprobs
"$CIS2" synth --shape odd --seed 1 --out "$d/inf" > /dev/null || fail "synth odd"
"$PY" - "$d/inf/model.safetensors" <<'EOF' || fail "editing the checkpoint"
import json, struct, sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); base = 8 + n
def at(name): e = h[name]; return base + e["data_offsets"][0], e["shape"]
o, (H,) = at("model.norm.weight")          # +inf at 0, 0 elsewhere: the logits are +-inf
for i in range(H): b[o + 2 * i:o + 2 * i + 2] = struct.pack("<H", 0x7f80 if i == 0 else 0)
o, (V, H) = at("lm_head.weight")           # column 0: -1 for "A", NaN for "B", +1 for the others
for v in range(V): b[o + 2 * v * H:o + 2 * v * H + 2] = struct.pack("<H", {65: 0xbf80, 66: 0x7fc0}.get(v, 0x3f80))
open(p, "wb").write(b)
EOF
cat > "$d/inf.jsonl" <<'EOF'
{"context": "ab", "continuations": ["A", "B", "C", "CA", "BC", "CCA"], "claimed_logprobs": [[-5], [-5], [-5], [-5, -5], [-5, -1], [-5, -6.5, null]]}
{"context": "ab", "continuations": ["A"]}
EOF
"$PY" -c 'import json, sys
for l in open(sys.argv[1]):
    o = json.loads(l); o.pop("claimed_logprobs", None); print(json.dumps(o))' "$d/inf.jsonl" > "$d/inf.plain.jsonl"
check "$d/inf" inf
"$PY" - "$d/inf.out" <<'EOF' || fail "not finite: the wrong nulls"
import json, sys
ins = json.loads(open(sys.argv[1].replace(".out", ".jsonl")).readline())["claimed_logprobs"]
c = json.loads(open(sys.argv[1]).readline())["continuations"]
nul = {"max_abs_diff": None, "mean_diff": None, "log_ratio": None}
seen = set()
for x, cl in zip(c, ins):
    bits = [t["bits"] for t, y in zip(x["logprobs"], cl) if y is not None]    # the compared tokens'
    bad = [b for b in bits if b in ("ff800000", "7fc00000")]
    seen.update(bad or ["finite"])
    m = {k: x["mismatch"][k] for k in nul}
    assert (m == nul) if bad else (None not in m.values()), (bits, x["mismatch"])
    for t, y in zip(x["logprobs"], cl):
        if y is not None: assert (t["diff"] is None) == (t["bits"] in ("ff800000", "7fc00000")), t
assert seen == {"ff800000", "7fc00000", "finite"}, "the checkpoint gave %s, not -inf, NaN and finite" % seen
EOF
echo "ok: an -inf or NaN exact logprob: its diff and its rollout's summary null, as Python's inf/NaN"

# ---- 5. the worked example of docs/eval.md, as written
ex() {    # the block right after <!-- example: NAME -->
    [ "$(grep -c "^<!-- example: $1 -->\$" docs/eval.md)" = 1 ] || fail "docs/eval.md has no single example $1"
    awk -v m="<!-- example: $1 -->" '$0 == m { on = 1; next } on == 1 { if ($0 !~ /^```/) exit 1; on = 2; next }
        on == 2 && /^```/ { on = 3; exit } on == 2 { print } END { if (on != 3) exit 1 }' docs/eval.md ||
        fail "example $1 is not followed by a whole block"
}
mkdir "$d/ex" "$d/bin"
ex rl-rollouts.jsonl > "$d/ex/rollouts.jsonl"
ex rl-mismatch.py > "$d/ex/mismatch.py"
ex rl-commands > "$d/ex/run.sh"
ex rl-output > "$d/ex/want.txt"
printf '#!/bin/sh\nexec "%s" "$@"\n' "$CIS2" > "$d/bin/cis2"
chmod +x "$d/bin/cis2"
(cd "$d/ex" && PATH="$d/bin:$PATH" sh -e run.sh) > "$d/ex/got.txt" 2> "$d/ex/err" ||
    fail "the worked example failed as written: $(cat "$d/ex/err")"
cmp -s "$d/ex/got.txt" "$d/ex/want.txt" ||
    fail "the worked example prints otherwise than docs/eval.md shows: $(diff "$d/ex/want.txt" "$d/ex/got.txt")"
echo "ok: docs/eval.md's worked example runs as written and prints what it shows"
