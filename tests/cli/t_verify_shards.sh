#!/bin/sh
# tests/cli/t_verify_shards.sh - many receipts verified as array jobs
# (docs/receipts.md "Verifying many receipts: shards").
#
# A manifest of 14 entries over 3 prompts of a `cis2 synth` checkpoint:
# greedy and sampled receipts, one given inline as a JSON line, 2 doctored
# (a token, a witness) and 1 malformed.
#  1. The unsharded `verify --manifest` prints the lines and exits as
#     `cis2 verify R1 ... Rn` of the same files does (the existing batch
#     verify), with the verdicts worked out by hand.
#  2. N = 1..4 shards, each N's shards run at once in the background, then
#     --merge: the same lines and exit status as the unsharded run; every
#     entry verified exactly once; each shard's receipts are those the
#     documented rule gives (SHA-256 of the three artifact hashes and the
#     prompt bytes, first 8 bytes big-endian mod N), computed here in Python,
#     so the receipts of one prompt share a shard.
#  3. The environment forms: a Slurm array (ids from SLURM_ARRAY_TASK_MIN,
#     with a step) and a Kubernetes Indexed Job give --shard I/N's files.
#  4. Refusals: bad --shard values and environments exit 2 with one line;
#     a merge of a missing, repeated, cut-short or foreign shard exits 4.
set -u
. tests/lib.sh
PY=/usr/bin/python3
[ -x "$PY" ] || skip "no Debian python3"
tmpdir d
m=$d/m
$CIS2 synth --shape tiny --seed 7 --out "$m" > /dev/null || fail synth

field() { sed -n "s/^$1 //p" "$2"; }
doctor() { awk -v k="$1" -v v="$2" '$1 == k { print k " " v; next } { print }' "$3" > "$4"; }
bump() { printf '%s' "$1" | awk -F, -v i="$2" '{ $i = ($i == 1 ? 2 : 1); print }' OFS=,; }
flip() { v=$1; c=$(printf '%s' "$v" | cut -c1); if [ "$c" = 0 ]; then n=1; else n=0; fi; printf '%s%s' "$n" "$(printf '%s' "$v" | cut -c2-)"; }

# three prompts: the first long enough (80 bytes, 80 ids here) that its samples share a prefix
p1="Once upon a time there was a tiny model that verified receipts in shards, again and"
p2="The quick brown fox"
p3="1234567890 + 9876543210 ="
run() { $CIS2 run --model-dir "$m" --gen-toks 6 "$@" > /dev/null || fail "run $*"; }
run --prompt "$p1" --receipt "$d/p1g"
for i in 0 1 2; do run --prompt "$p1" --temperature 1 --seed 11 --sequence $i --receipt "$d/p1s$i"; done
run --prompt "$p2" --receipt "$d/p2g"
for i in 0 1; do run --prompt "$p2" --temperature 0.8 --top-k 20 --seed 5 --sequence $i --receipt "$d/p2s$i"; done
run --prompt "$p3" --receipt "$d/p3g"
for i in 0 1; do run --prompt "$p3" --temperature 1.2 --seed 9 --sequence $i --receipt "$d/p3s$i"; done
doctor generated-token-ids "$(bump "$(field generated-token-ids "$d/p1s1")" 3)" "$d/p1s1" "$d/p1bad"
doctor witness-digest "$(flip "$(field witness-digest "$d/p3g")")" "$d/p3g" "$d/p3bad"
printf 'CIS-2-RECEIPT v1\nspec-version 0.3b\n' > "$d/junk"
cp "$d/p2g" "$d/p2json" # given inline below, named as this file so the batch verify can name it alike

names="p1g p2s0 p1s0 junk p3g p1bad p2g p3s0 p1s1 p2json p3bad p1s2 p2s1 p3s1"
{
    for n in $names; do
        if [ $n = p2json ]; then
            "$PY" -c 'import json,sys; print(json.dumps({"name": sys.argv[2], "receipt": open(sys.argv[1]).read()}))' "$d/p2g" "$d/p2json"
        else
            printf '%s\n' "$d/$n"
        fi
        [ $n = p3g ] && printf '\n' # an empty line is skipped
    done
} > "$d/manifest"

# 1. unsharded == the batch verify of the same files, verdicts as worked out
set --
for n in $names; do set -- "$@" "$d/$n"; done
$CIS2 verify "$@" --model-dir "$m" > "$d/batch.out"; rb=$?
$CIS2 verify --manifest "$d/manifest" --model-dir "$m" --verdicts "$d/all.jsonl" > "$d/one.out"; r1=$?
[ $rb -eq 4 ] && [ $r1 -eq 4 ] || fail "exit: batch $rb, manifest $r1 (want 4: a malformed receipt)"
cmp -s "$d/batch.out" "$d/one.out" || fail "the manifest run's lines differ from the batch verify's: $(diff "$d/batch.out" "$d/one.out")"
grep -qx 'summary: 14 receipts: 11 OK, 2 OUTPUT-MISMATCH, 1 MALFORMED' "$d/one.out" || fail "summary: $(tail -n 1 "$d/one.out")"
grep -q "^$d/p1bad: verdict: OUTPUT-MISMATCH (generated-token-ids" "$d/one.out" || fail "p1bad: $(grep p1bad "$d/one.out")"
grep -q "^$d/p3bad: verdict: OUTPUT-MISMATCH (witness-digest)" "$d/one.out" || fail "p3bad: $(grep p3bad "$d/one.out")"
grep -q "^$d/junk: verdict: MALFORMED (" "$d/one.out" || fail "junk: $(grep junk "$d/one.out")"
[ "$(grep -c ': verdict: OK (' "$d/one.out")" -eq 11 ] || fail "not 11 OK lines"
grep -q '"name":"'"$d"'/p1bad".*"differ":\["generated-token-ids"' "$d/all.jsonl" || fail "verdict line of p1bad: $(grep p1bad "$d/all.jsonl")"
[ "$(wc -l < "$d/all.jsonl")" -eq 15 ] || fail "all.jsonl: not a header and 14 lines"
echo "ok: the unsharded manifest run is the batch verify (exit 4, 11 OK, 2 OUTPUT-MISMATCH, 1 MALFORMED)"

# the documented shard rule, computed independently: entry -> shard for N
cat > "$d/rule.py" <<'EOF'
import hashlib, json, os, sys
man, n = sys.argv[1], int(sys.argv[2])
lines = [l for l in open(man, encoding="utf-8").read().split("\n") if l]
for i, line in enumerate(lines):
    text = json.loads(line)["receipt"] if line.startswith("{") else open(line, encoding="utf-8").read()
    kv = dict(l.split(" ", 1) for l in text.split("\n")[1:] if " " in l)
    keys = ["weights-sha256", "config-sha256", "tokenizer-sha256", "prompt-hex", "context-hex"]
    if "prompt-hex" in kv and "witness-digest" in kv:
        b = "".join(kv.get(k, "") + "\n" for k in keys).encode()
    else:  # a receipt that does not parse: its manifest line
        b = b"unparsed\n" + line.encode()
    print(i, int.from_bytes(hashlib.sha256(b).digest()[:8], "big") % n)
EOF

# 2. N shards at once, merged
for N in 1 2 3 4; do
    pids=""
    I=0
    while [ $I -lt $N ]; do
        ( $CIS2 verify --manifest "$d/manifest" --model-dir "$m" --threads 1 --shard $I/$N --verdicts "$d/v$N.$I" \
            > "$d/s$N.$I.out" 2> "$d/s$N.$I.err"; echo $? > "$d/s$N.$I.rc" ) &
        pids="$pids $!"
        I=$((I + 1))
    done
    PIDS="$PIDS $pids"
    wait $pids
    PIDS=""
    set --
    I=0
    while [ $I -lt $N ]; do
        [ -s "$d/s$N.$I.err" ] && fail "shard $I/$N: stderr: $(cat "$d/s$N.$I.err")"
        set -- "$@" "$d/v$N.$I"
        I=$((I + 1))
    done
    $CIS2 verify --merge "$@" > "$d/merge$N.out"; rm=$?
    [ $rm -eq $r1 ] || fail "N=$N: merge exits $rm, the unsharded run $r1"
    cmp -s "$d/merge$N.out" "$d/one.out" || fail "N=$N: merged lines differ: $(diff "$d/one.out" "$d/merge$N.out")"
    # each entry in exactly one shard, each shard's exit its worst verdict
    cat "$@" | grep -o '"entry":[0-9]*,' | sort > "$d/entries"
    [ "$(wc -l < "$d/entries")" -eq 14 ] && [ -z "$(uniq -d "$d/entries")" ] || fail "N=$N: entries verified: $(tr '\n' ' ' < "$d/entries")"
    grep -hv '^summary: ' "$d"/s$N.*.out | sort > "$d/lines"
    grep -v '^summary: ' "$d/one.out" | sort | cmp -s - "$d/lines" || fail "N=$N: the shards' lines are not the unsharded run's"
    # the shards are the rule's; receipts of one prompt together
    "$PY" "$d/rule.py" "$d/manifest" $N > "$d/rule$N" || fail "rule.py"
    I=0
    while [ $I -lt $N ]; do
        want=$(awk -v s=$I '$2 == s { print $1 }' "$d/rule$N" | tr '\n' ' ')
        got=$(grep -o '"entry":[0-9]*,' "$d/v$N.$I" | tr -dc '0-9\n' | tr '\n' ' ')
        [ "$want" = "$got" ] || fail "N=$N shard $I: entries '$got', the rule gives '$want'"
        worst=$(grep -o '"code":[0-9]*' "$d/v$N.$I" | tr -dc '0-9\n' | sort -n | tail -n 1)
        [ "$(cat "$d/s$N.$I.rc")" -eq "${worst:-0}" ] || fail "N=$N shard $I exits $(cat "$d/s$N.$I.rc"), worst verdict ${worst:-0}"
        I=$((I + 1))
    done
    for g in p1 p2 p3; do
        k=$(grep -l "^$d/$g" "$d"/s$N.*.out | wc -l)
        [ "$k" -eq 1 ] || fail "N=$N: the receipts of prompt $g are in $k shards"
    done
    echo "ok: N=$N: $N shards at once, merged = the unsharded run; each receipt once, in the rule's shard, prompts together"
done

# 3. the environment forms give --shard I/N's files (verdict files are byte for byte)
for id in 1 2 3; do # sbatch --array=1-3: ids from 1
    SLURM_ARRAY_TASK_ID=$id SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_MAX=3 SLURM_ARRAY_TASK_COUNT=3 \
        $CIS2 verify --manifest "$d/manifest" --model-dir "$m" --shard auto --verdicts "$d/slurm" > /dev/null
    cmp -s "$d/slurm" "$d/v3.$((id - 1))" || fail "Slurm task $id of 1-3 is not shard $((id - 1))/3"
done
SLURM_ARRAY_TASK_ID=6 SLURM_ARRAY_TASK_MIN=2 SLURM_ARRAY_TASK_MAX=6 SLURM_ARRAY_TASK_STEP=2 SLURM_ARRAY_TASK_COUNT=3 \
    $CIS2 verify --manifest "$d/manifest" --model-dir "$m" --shard auto --verdicts "$d/slurm" > /dev/null
cmp -s "$d/slurm" "$d/v3.2" || fail "Slurm task 6 of 2-6:2 is not shard 2/3"
for i in 0 3; do
    JOB_COMPLETION_INDEX=$i $CIS2 verify --manifest "$d/manifest" --model-dir "$m" --shard-count 4 --verdicts "$d/k8s" > /dev/null
    cmp -s "$d/k8s" "$d/v4.$i" || fail "JOB_COMPLETION_INDEX=$i --shard-count 4 is not shard $i/4"
done
JOB_COMPLETION_INDEX=1 $CIS2 verify --manifest "$d/manifest" --model-dir "$m" --shard auto --shard-count 2 --verdicts "$d/k8s" > /dev/null
cmp -s "$d/k8s" "$d/v2.1" || fail "JOB_COMPLETION_INDEX=1 --shard auto --shard-count 2 is not shard 1/2"
echo "ok: Slurm arrays (1-3, 2-6:2) and Indexed Jobs give the --shard I/N files"

# a manifest of relative paths (resolved from its directory, not the working directory)
mkdir "$d/rel" && printf '{"entries": 1}\n' > "$d/rel/list.json" && cp "$d/p1g" "$d/p1bad" "$d/rel/" && printf 'p1g\np1bad\n' > "$d/rel/list"
$CIS2 verify --manifest "$d/rel/list" --model-dir "$m" > "$d/rel.out"; rc=$?
[ $rc -eq 1 ] && grep -q "^$d/rel/p1g: verdict: OK" "$d/rel.out" || fail "relative manifest: exit $rc: $(cat "$d/rel.out")"

# 4. refusals: exit 2, one line
expect() {
    code=$1; needle=$2; shift 2
    "$@" > "$d/out" 2> "$d/err"; rc=$?
    [ $rc -eq "$code" ] || fail "$* exited $rc, want $code: $(cat "$d/err")"
    grep -q -- "$needle" "$d/err" || fail "$*: stderr lacks '$needle': $(cat "$d/err")"
    [ "$(wc -l < "$d/err")" -eq 1 ] || fail "$*: stderr is not one line: $(cat "$d/err")"
    [ ! -s "$d/out" ] || [ "$code" -ne 2 ] || fail "$*: a usage error printed to stdout: $(cat "$d/out")"
}
V="$CIS2 verify --manifest $d/manifest --model-dir $m"
for bad in 3/3 1/0 0/0 x 1 /2 1/ -1/2 01/2 1/02 1/2/3 " 1/2" 4294967296/4294967297 autox; do
    expect 2 "--shard" $V --shard "$bad"
done
expect 2 "neither SLURM_ARRAY_TASK_ID nor JOB_COMPLETION_INDEX" env -u SLURM_ARRAY_TASK_ID -u JOB_COMPLETION_INDEX $V --shard auto
expect 2 "both" env SLURM_ARRAY_TASK_ID=0 JOB_COMPLETION_INDEX=0 $V --shard auto
expect 2 "needs --shard-count" env -u SLURM_ARRAY_TASK_ID JOB_COMPLETION_INDEX=0 $V --shard auto
expect 2 "not below --shard-count" env -u SLURM_ARRAY_TASK_ID JOB_COMPLETION_INDEX=4 $V --shard-count 4
expect 2 "JOB_COMPLETION_INDEX" env -u SLURM_ARRAY_TASK_ID JOB_COMPLETION_INDEX=x $V --shard-count 4
expect 2 "is not MIN, MIN+STEP" env -u JOB_COMPLETION_INDEX SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_MAX=9 SLURM_ARRAY_TASK_COUNT=3 $V --shard auto
expect 2 "SLURM_ARRAY_TASK_MIN" env -u JOB_COMPLETION_INDEX -u SLURM_ARRAY_TASK_MIN SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_MAX=9 SLURM_ARRAY_TASK_COUNT=3 $V --shard auto
expect 2 "SLURM_ARRAY_TASK_COUNT is 3" env -u JOB_COMPLETION_INDEX SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_MAX=3 SLURM_ARRAY_TASK_COUNT=3 $V --shard-count 4
expect 2 "--shard-count goes with --shard auto" $V --shard 0/2 --shard-count 2
expect 2 "--shard-count" $V --shard-count 0
expect 2 "go with --manifest" $CIS2 verify "$d/p1g" --model-dir "$m" --shard 0/2
expect 2 "not both" $V "$d/p1g"
expect 2 "--merge takes verdict files only" $CIS2 verify --merge "$d/v2.0" --shard 0/2
expect 2 "needs the shards' verdict files" $CIS2 verify --merge
echo "ok: bad --shard values and environments refused (exit 2, one line)"
expect 4 "shard 1/2 is missing" $CIS2 verify --merge "$d/v2.0"
expect 4 "given twice" $CIS2 verify --merge "$d/v2.0" "$d/v2.0" "$d/v2.1"
expect 4 "another manifest or count" $CIS2 verify --merge "$d/v2.0" "$d/v3.1"
head -n 2 "$d/v1.0" > "$d/cut"
expect 4 "cut short" $CIS2 verify --merge "$d/cut"
expect 4 "line 1: not JSON" $CIS2 verify --merge "$d/manifest"
expect 4 "not a verdict file" $CIS2 verify --merge "$d/rel/list.json"
expect 3 "nonexistent" $CIS2 verify --merge "$d/v2.0" "$d/nonexistent"
printf '' > "$d/empty"
expect 4 "lists no receipts" $CIS2 verify --manifest "$d/empty" --model-dir "$m"
echo "ok: a merge of a missing, repeated, foreign or cut-short shard exits 4"
