#!/bin/sh
# tests/cli/t_sampling.sh - seeded sampling, logprobs and stop rules end to end
# (docs/sampling.md), through `cis2 run`, `verify`, `check` and `compare`.
#
# Oracle: the independent Python reference (tests/sampling/sampling_ref.py,
# written from docs/sampling.md alone) redoes every step from the logits
# cis2 dumps: the same token for the same (seed, sequence, step) and the
# same logprob bits (tests/sampling/check_run.py).  Also: a run equals
# itself, alone and in a batch; receipts verify by both replays and a
# doctored one fails by both; stop rules end runs where they should; every
# invalid parameter is a usage error; decimals round as §S2.3 says
# (params.json's table); a greedy run without stop rules still writes the
# v1 receipt whatever filters were given (§S7.1).
# san: skip - sampled decodes against the second sampler; the sampler's
#   memory is test_sample's and the server's
set -u
. tests/lib.sh
PY=/usr/bin/python3
$PY -c 'import numpy' 2> /dev/null || skip "$PY lacks numpy"
tmpdir d
field() { sed -n "s/^$1 //p" "$2"; }
f32hex() { $PY -c "import numpy as np,sys; print('%08x' % np.float32(sys.argv[1]).view(np.uint32))" "$1"; }

m=$d/tiny
$CIS2 synth --shape tiny --seed 7 --out "$m" > /dev/null || fail synth

# 1. the reference agrees on every token and logprob, for several samplers
check() { # label T topk topp minp seed seq topn [model] [prompt] [gen]
    label=$1; T=$2; K=$3; P=$4; M=$5; S=$6; Q=$7; N=$8; mm=${9:-$m}; pr=${10:-Once upon a time}; g=${11:-12}
    args="--temperature $T --seed $S --sequence $Q --logprobs $N"
    [ "$K" != 0 ] && args="$args --top-k $K"
    [ "$P" != 1 ] && args="$args --top-p $P"
    [ "$M" != 0 ] && args="$args --min-p $M"
    $CIS2 run --model-dir "$mm" --prompt "$pr" --gen-toks "$g" $args --json --dump-logits "$d/dump" --receipt "$d/$label.r" \
        > "$d/run.json" || fail "$label: run"
    $PY tests/sampling/check_run.py "$d/run.json" "$d/dump" "$(f32hex "$T")" "$K" "$(f32hex "$P")" "$(f32hex "$M")" \
        "$S" "$Q" "$N" || fail "$label: cis2 and the reference disagree"
}
check temp     0.8  0   1    0    42 0 3
check topk     1.3  5   1    0    7  2 0
check topp     1.0  0   0.8  0    1  0 5
check minp     0.9  0   1    0.1  99 1 2
check all      0.6  20  0.95 0.05 12345678901234567890 4294967295 20
check tinyT    1.17549435e-38 0 1 0 3 0 2
check hugeT    3.4028235e38   0 1 0 3 0 2
check greedyk1 0.7  1   1    0    5  0 2
if [ -f "$SHARED/models/smollm2-135m/tokenizer.json" ]; then
    $CIS2 synth --shape smollm2-135m --seed 1 --out "$d/s135" --tokenizer "$SHARED/models/smollm2-135m/tokenizer.json" > /dev/null
    check s135 0.7 50 0.9 0.02 2024 0 4 "$d/s135" "Once upon a time" 5
fi
echo "ok: tokens and logprobs equal the independent reference"

# 2. deterministic: the same request gives the same receipt, alone or batched
$CIS2 run --model-dir "$m" --prompt "Once upon a time" --gen-toks 12 --temperature 0.8 --seed 42 --sequence 0 \
    --logprobs 3 --receipt "$d/again.r" > /dev/null
cmp -s "$d/temp.r" "$d/again.r" || fail "the same seed gave another receipt"
head -n 1 "$d/temp.r" | grep -qx 'CIS-2-RECEIPT ext-sampling-1' || fail "a sampled run's receipt is not the extension"
printf 'Once upon a time\nThe quick brown fox\nHello\n' > "$d/prompts.txt"
$CIS2 run --model-dir "$m" --prompt-file "$d/prompts.txt" --gen-toks 12 --temperature 0.8 --seed 42 --receipt "$d/b.r" > /dev/null ||
    fail "batch run"
cmp -s "$d/temp.r" "$d/b.r.0" || fail "a sampled sequence in a batch differs from its solo run"
$CIS2 run --model-dir "$m" --prompt "Hello" --gen-toks 12 --temperature 0.8 --seed 42 --receipt "$d/hello.r" > /dev/null
cmp -s "$d/hello.r" "$d/b.r.2" || fail "batch sequence 2 differs from its solo run"
$CIS2 run --model-dir "$m" --prompt "Once upon a time" --gen-toks 12 --temperature 0.8 --seed 43 --receipt "$d/s43.r" > /dev/null
[ "$(field generated-token-ids "$d/s43.r")" != "$(field generated-token-ids "$d/temp.r")" ] || fail "seeds 42 and 43 sampled the same 12 tokens"
echo "ok: deterministic alone and in a batch; another seed samples otherwise"

# 3. receipts verify by both replays; doctored ones fail by both with one verdict
for r in temp topk topp minp all tinyT hugeT greedyk1; do
    $CIS2 verify "$d/$r.r" --model-dir "$m" > "$d/v1" || fail "verify $r: $(tail -n 2 "$d/v1")"
    $CIS2 verify "$d/$r.r" --model-dir "$m" --replay decode > "$d/v2" || fail "verify --replay decode $r"
    cmp -s "$d/v1" "$d/v2" || fail "$r: the two replays report differently"
done
gids=$(field generated-token-ids "$d/temp.r")
bad=$(printf '%s' "$gids" | awk -F, '{ $5 = ($5 == 1 ? 2 : 1); print }' OFS=,)
awk -v v="$bad" '$1 == "generated-token-ids" { print $1 " " v; next } { print }' "$d/temp.r" > "$d/bad.r"
$CIS2 verify "$d/bad.r" --model-dir "$m" > "$d/v1"; r1=$?
$CIS2 verify "$d/bad.r" --model-dir "$m" --replay decode > "$d/v2"; r2=$?
[ $r1 -eq 1 ] && [ $r2 -eq 1 ] || fail "a doctored sampled token: exits $r1 $r2"
cmp -s "$d/v1" "$d/v2" || fail "doctored: the two replays report differently"
grep -q '^first-bad-step 4: claimed ' "$d/v1" || fail "doctored: first-bad-step is not 4"
awk '$1 == "seed" { print "seed 41"; next } { print }' "$d/temp.r" > "$d/seed.r"
$CIS2 verify "$d/seed.r" --model-dir "$m" > "$d/v1"; [ $? -eq 1 ] || fail "a doctored seed verified"
grep -q '^params-digest MISMATCH' "$d/v1" || fail "a doctored seed: params-digest not named"
$CIS2 check "$d/temp.r" --tokenizer "$m/tokenizer.json" --config "$m/config.json" > "$d/c" || fail "check of a sampled receipt"
$CIS2 check "$d/seed.r" > "$d/c"; [ $? -eq 1 ] || fail "check did not catch the params-digest"
$CIS2 compare "$d/temp.r" "$d/again.r" | grep -q '^verdict: SAME' || fail "compare SAME"
$CIS2 compare "$d/temp.r" "$d/s43.r" | grep -q '^verdict: DIFFERENT-RUN (different seed)' || fail "compare: another seed"
echo "ok: sampled receipts verify by both replays; doctored tokens and seeds do not"

# 4. stop rules (greedy and sampled) end the run where they say
$CIS2 run --model-dir "$m" --prompt "Once upon a time" --gen-toks 12 --receipt "$d/g.r" > /dev/null
g=$(field generated-token-ids "$d/g.r")
t3=$(printf '%s' "$g" | cut -d, -f3)
first=$(printf '%s' "$g" | tr ',' '\n' | grep -n -x "$t3" | head -n 1 | cut -d: -f1)
$CIS2 run --model-dir "$m" --prompt "Once upon a time" --gen-toks 12 --stop-id "$t3" --receipt "$d/sid.r" > "$d/o" || fail "--stop-id"
[ "$(field gen-toks "$d/sid.r")" = "$first" ] && [ "$(field finish-reason "$d/sid.r")" = stop-id ] ||
    fail "--stop-id $t3: $(field gen-toks "$d/sid.r") tokens, $(field finish-reason "$d/sid.r")"
[ "$(field sampler "$d/sid.r")" = greedy ] || fail "a greedy stopped run's sampler"
grep -q '^finish_reason = stop-id$' "$d/o" || fail "run does not print the finish reason"
# --stop-at-eos: the config's eos_token_id (a copy of the checkpoint with one)
mkdir "$d/eos" && cp "$m/model.safetensors" "$m/tokenizer.json" "$d/eos/"
t2=$(printf '%s' "$g" | cut -d, -f2)
$PY -c "import json,sys; c=json.load(open(sys.argv[1])); c['eos_token_id']=[999999, int(sys.argv[3])]; json.dump(c, open(sys.argv[2],'w'))" \
    "$m/config.json" "$d/eos/config.json" "$t2"
$CIS2 run --model-dir "$d/eos" --prompt "Once upon a time" --gen-toks 12 --stop-at-eos --receipt "$d/eos.r" > /dev/null || fail "--stop-at-eos"
[ "$(field finish-reason "$d/eos.r")" = eos ] && [ "$(field stop-eos "$d/eos.r")" = "999999,$t2" ] || fail "--stop-at-eos: $(cat "$d/eos.r")"
$CIS2 verify "$d/eos.r" --model-dir "$d/eos" > /dev/null || fail "verify an eos-stopped receipt"
$CIS2 run --model-dir "$m" --prompt "x" --stop-at-eos > "$d/o" 2>&1; [ $? -eq 2 ] || fail "--stop-at-eos without eos_token_id"
# --stop TEXT spanning two tokens (real text: the 135M shape's tokenizer):
# the run stops at the first token that completes it, and the completion
# ends before it (§S5.3-§S5.4); the expectation is computed here
if [ -d "$d/s135" ]; then
    $CIS2 run --model-dir "$d/s135" --prompt "Once upon a time" --gen-toks 8 --json > "$d/g135.json" || fail "s135 greedy"
    $PY - "$CIS2" "$d" <<'EOF' || exit 1
import json, subprocess, sys
cis2, d = sys.argv[1:3]
tok = d + "/s135/tokenizer.json"
ids = json.load(open(d + "/g135.json"))["generated_token_ids"]
raw = [subprocess.run([cis2, "detokenize", "--tokenizer", tok, str(i)], capture_output=True).stdout[:-1] for i in ids]
for k in range(1, len(ids)):  # a stop string of the last byte of token k-1 and the first of token k
    if raw[k - 1] and raw[k] and raw[k - 1][-1:].isalnum() and raw[k][:1].isascii() and raw[k][:1] != b"-":
        stop = raw[k - 1][-1:] + raw[k][:1]
        break
else:
    print("SKIP-PART: no two adjacent printable tokens"); sys.exit(0)
B, want = b"", None
for s, b in enumerate(raw):
    before = len(B)
    B += b
    j = B.find(stop, max(0, before - len(stop) + 1))
    if j >= 0 and j + len(stop) > before:
        want = (s + 1, B[:B.find(stop)])
        break
p = subprocess.run([cis2, "run", "--model-dir", d + "/s135", "--prompt", "Once upon a time", "--gen-toks", "8",
                    "--stop", stop.decode(), "--json", "--receipt", d + "/ss.r"], capture_output=True, text=True)
if p.returncode:
    sys.exit("FAIL: --stop %r: %s" % (stop, p.stderr))
out = json.loads(p.stdout)
if out["finish_reason"] != "stop-string" or out["gen_toks"] != want[0] or out["completion"].encode() != want[1]:
    sys.exit("FAIL: --stop %r: %s after %d tokens, completion %r; want %d tokens, %r" % (
        stop, out["finish_reason"], out["gen_toks"], out["completion"], want[0], want[1]))
print("ok: --stop %r ends the run after %d tokens" % (stop, want[0]))
EOF
    [ -f "$d/ss.r" ] && { $CIS2 verify "$d/ss.r" --model-dir "$d/s135" > /dev/null || fail "verify a stop-string receipt"; }
    [ -f "$d/ss.r" ] && { $CIS2 check "$d/ss.r" --tokenizer "$d/s135/tokenizer.json" > /dev/null || fail "check a stop-string receipt"; }
fi
$CIS2 verify "$d/sid.r" --model-dir "$m" --replay decode > /dev/null || fail "decode replay of a stop-id receipt"
# a receipt that claims to go on past its stop, or to stop early, fails
awk '$1 == "finish-reason" { print "finish-reason length"; next } { print }' "$d/sid.r" > "$d/x.r"
$CIS2 verify "$d/x.r" --model-dir "$m" > /dev/null 2>&1; [ $? -ne 0 ] || fail "a wrong finish reason verified"
echo "ok: stop ids, eos and stop strings"

# 5. invalid parameters are usage errors, never clamped
for a in "--temperature -1" "--temperature nan" "--temperature inf" "--temperature 1e-40" "--temperature 1e39" \
         "--temperature -0" "--top-p 0" "--top-p 1.5" "--top-p -0.5" "--top-k 0" "--top-k 100000" "--min-p 1e-30" \
         "--min-p 2" "--seed 18446744073709551616" "--sequence 4294967296" "--logprobs 21" "--max-tokens 2 --gen-toks 2" "--top-logprobs 1 --logprobs 1" "--stop-id 1,,2"; do
    $CIS2 run --model-dir "$m" --prompt x --gen-toks 1 $a > "$d/o" 2> "$d/e"; rc=$?
    [ $rc -eq 2 ] || fail "run $a exited $rc, want 2: $(cat "$d/e")"
    [ "$(wc -l < "$d/e")" -eq 1 ] || fail "run $a: not one line on stderr"
done
echo "ok: invalid parameters refused"

# 5b. the other surfaces' names are aliases (docs/receipts.md "Names across surfaces"): --max-tokens is
# --gen-toks, --top-logprobs is --logprobs, --stop-token-ids is --stop-id
$CIS2 run --model-dir "$m" --prompt x --gen-toks 3 --temperature 0.5 --seed 3 --logprobs 2 --stop-id 5 --json \
    > "$d/a1.json" || fail "run with the CLI's names"
$CIS2 run --model-dir "$m" --prompt x --max-tokens 3 --temperature 0.5 --seed 3 --top-logprobs 2 --stop-token-ids 5 \
    --json > "$d/a2.json" || fail "run with the aliases"
cmp -s "$d/a1.json" "$d/a2.json" || fail "the aliases gave another run"
$PY - "$d/a1.json" <<'EOF' || fail "--logprobs 2: not 2 alternatives a step"
import json, sys
r = json.load(open(sys.argv[1]))
assert [len(s["top"]) for s in r["logprobs"]] == [2] * r["gen_toks"], r["logprobs"]
EOF
echo "ok: aliases; --logprobs N gives N alternatives"

# 6. decimals round once (params.json's table, §S2.3); T = 0 is v1 (§S7.1)
$PY - "$CIS2" "$m" "$d" <<'EOF' || exit 1
import json, subprocess, sys
cis2, m, d = sys.argv[1:4]
tab = json.load(open("tests/vectors/sampling/params.json"))["decimal"]
for row in tab:
    p = subprocess.run([cis2, "run", "--model-dir", m, "--prompt", "x", "--gen-toks", "1", "--temperature", row["text"],
                        "--receipt", d + "/dec.r"], capture_output=True, text=True)
    if not row["accepted"]:
        if p.returncode != 2:
            sys.exit("FAIL: --temperature %r exited %d, want 2" % (row["text"], p.returncode))
        continue
    if p.returncode != 0:
        sys.exit("FAIL: --temperature %r exited %d: %s" % (row["text"], p.returncode, p.stderr))
    rec = open(d + "/dec.r").read().splitlines()
    if row["bits"] == "00000000":
        if rec[0] != "CIS-2-RECEIPT v1":
            sys.exit("FAIL: --temperature %r is greedy but wrote %s" % (row["text"], rec[0]))
        continue
    t = [l.split(" ", 1)[1] for l in rec if l.startswith("temperature ")]
    if t != [row["bits"]]:
        sys.exit("FAIL: --temperature %r recorded %s, want %s" % (row["text"], t, row["bits"]))
print("ok: %d decimal conversions" % len(tab))
EOF
$CIS2 run --model-dir "$m" --prompt "Once upon a time" --gen-toks 12 --temperature 0 --top-k 5 --top-p 0.5 --seed 9 \
    --receipt "$d/g2.r" > /dev/null || fail "greedy with filters"
cmp -s "$d/g.r" "$d/g2.r" || fail "a greedy run with filters but no stop rule did not write the plain v1 receipt"
echo "sampling ok"
