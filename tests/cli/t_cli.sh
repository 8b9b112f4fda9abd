#!/bin/sh
# tests/cli/t_cli.sh - the command line as a newcomer meets it (README
# "Commands", "Exit codes"; docs/architecture.md "... a CLI option"):
#  - `cis2 CMD --help` works for every command (exit 0, a usage line naming
#    the command) and `cis2 help` shows every command's options;
#  - a repeated option is refused everywhere; an empty path is a usage
#    error; one id grammar for --prompt-ids and detokenize;
#  - exit classes: context overflow 5 in run and verify alike, a text
#    prompt whose ids the model lacks 4, out of memory 9;
#  - stdout write failures are exit 3 (>/dev/full), for every command that
#    prints a verdict or a result.
set -u
. tests/lib.sh
tmpdir d
# expect CODE NEEDLE CMD...: exit CODE and one stderr line containing NEEDLE
expect() {
    code=$1; needle=$2; shift 2
    "$@" > "$d/out" 2> "$d/err"; rc=$?
    [ $rc -eq "$code" ] || fail "$* exited $rc, want $code: $(cat "$d/err")"
    [ -z "$needle" ] || grep -q -- "$needle" "$d/err" || fail "$*: stderr lacks '$needle': $(cat "$d/err")"
    [ "$(wc -l < "$d/err")" -le 1 ] || fail "$*: stderr is more than one line: $(cat "$d/err")"
}

for c in selftest run tokenize detokenize conform bench synth verify check compare diff; do
    "$CIS2" "$c" --help > "$d/h" 2>&1 || fail "cis2 $c --help exited $?"
    grep -q "^usage: cis2 $c" "$d/h" || fail "cis2 $c --help: $(head -n 2 "$d/h")"
    "$CIS2" help "$c" | cmp -s - "$d/h" || fail "cis2 help $c differs from cis2 $c --help"
done
"$CIS2" help > "$d/all" || fail "cis2 help"
for flag in --receipt --trace --dump-logits --kernel --threads --tokenizer-ext --progress --batch --stats --replay --twice; do
    grep -q -- "$flag" "$d/all" || fail "cis2 help omits $flag"
done
# every option any command parses (the option tables in cli/ and serve/) is in the help
for flag in $(grep -ho '{"--[a-z0-9-]*", OPT_' cli/*.c serve/*.c | sed 's/{"\(--[a-z0-9-]*\)".*/\1/' | sort -u); do
    grep -q -- "$flag" "$d/all" || fail "cis2 help omits $flag, which a command parses"
done
echo "ok: --help everywhere, cis2 help lists every option"

# `cis2 --version` and `cis2 version`: the version and
# ABI include/cis2.h defines (read from the header, not from the program)
hv=$(sed -n 's/^#define CIS2_VERSION "\(.*\)"$/\1/p' include/cis2.h)
ha=$(sed -n 's/^#define CIS2_ABI_VERSION \([0-9]*\)u$/\1/p' include/cis2.h)
[ -n "$hv" ] && [ -n "$ha" ] || fail "include/cis2.h: no CIS2_VERSION / CIS2_ABI_VERSION"
"$CIS2" --version > "$d/v1" || fail "cis2 --version exited $?"
"$CIS2" version > "$d/v2" || fail "cis2 version exited $?"
cmp -s "$d/v1" "$d/v2" || fail "cis2 --version and cis2 version differ"
grep -qx "cis2 $hv (library $hv, ABI $ha, CIS-2 v0.3b, [a-z0-9_-]*)" "$d/v1" || fail "cis2 --version: $(cat "$d/v1")"
echo "ok: --version: $(cat "$d/v1")"

"$CIS2" synth --shape tiny --seed 7 --out "$d/m" > /dev/null || fail synth
m=$d/m
expect 2 "--gen-toks given twice" "$CIS2" run --model-dir "$m" --gen-toks 2 --gen-toks 3
expect 2 "--model-dir given twice" "$CIS2" verify x --model-dir "$m" --model-dir "$m"
expect 2 "--tokenizer given twice" "$CIS2" tokenize --tokenizer a --tokenizer b
expect 2 "--seed given twice" "$CIS2" synth --shape tiny --seed 1 --seed 2 --out "$d/x"
expect 2 "empty path" "$CIS2" run --model-dir "" --prompt-ids 1
expect 2 "--receipt: empty path" "$CIS2" run --model-dir "$m" --prompt-ids 1 --receipt ""
expect 2 "--trace: empty path" "$CIS2" run --model-dir "$m" --prompt-ids 1 --trace ""
expect 2 "--out: empty path" "$CIS2" synth --shape tiny --seed 1 --out ""
for bad in "1,2," "1, 2" ",1" "01" "+1" "1,,2"; do
    expect 2 "not a comma-separated list" "$CIS2" run --model-dir "$m" --prompt-ids "$bad"
    expect 2 "not a comma-separated list" "$CIS2" detokenize --tokenizer "$m/tokenizer.json" "$bad"
done
"$CIS2" detokenize --tokenizer "$m/tokenizer.json" "[72, 105]" > "$d/o" || fail "detokenize JSON array"
[ "$(cat "$d/o")" = "Hi" ] || fail "detokenize [72, 105] printed $(cat "$d/o")"
"$CIS2" run --model-dir "$m" --prompt-ids "[72, 105]" --gen-toks 1 > /dev/null || fail "--prompt-ids JSON array"
echo "ok: repeated options, empty paths, one id grammar"

expect 5 "exceeds max_position_embeddings" "$CIS2" run --model-dir "$m" --prompt-ids 1 --gen-toks 256
printf 'CIS-2-RECEIPT v1\n' > /dev/null
"$CIS2" run --model-dir "$m" --prompt "ab" --gen-toks 2 --receipt "$d/r" > /dev/null || fail "run --receipt"
awk '$1 == "gen-toks" { print "gen-toks 300"; next } $1 == "generated-token-ids" { s = "1"; for (i = 1; i < 300; i++) s = s ",1"; print "generated-token-ids " s; next } { print }' \
    "$d/r" > "$d/long"
"$CIS2" verify "$d/long" --model-dir "$m" > "$d/out" 2>&1; rc=$?
[ $rc -eq 5 ] || fail "verify of a receipt longer than the context exited $rc, want 5 (as run)"
# a text prompt whose ids the model does not have: tokenizer and model disagree (format, 4)
python3 - "$m/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["vocab_size"] = 100
json.dump(c, open(sys.argv[1] + ".small", "w"))
EOF
mkdir -p "$d/small" && cp "$m/model.safetensors" "$m/tokenizer.json" "$d/small/" && mv "$m/config.json.small" "$d/small/config.json"
"$CIS2" run --model-dir "$d/small" --prompt "zzz" --gen-toks 1 > "$d/out" 2>&1; rc=$?
[ $rc -eq 4 ] || fail "a checkpoint whose tokenizer gives ids beyond the vocabulary exited $rc, want 4"
# out of memory is exit 9, not 2: the 135M shape under a 200 MB address-space cap
"$CIS2" synth --shape smollm2-360m --seed 1 --out "$d/big" > /dev/null || fail "synth 360m"
if [ "${SAN:-}" = 1 ]; then
    echo "note: the address-space cap is not checked under ASan (its shadow memory needs terabytes of it)"
else
    (ulimit -v 400000; "$CIS2" run --model-dir "$d/big" --prompt-ids 1 --gen-toks 1) > "$d/out" 2> "$d/err"; rc=$?
    [ $rc -eq 9 ] || fail "out of memory exited $rc, want 9: $(cat "$d/err")"
fi
echo "ok: exit classes (5 context, 4 tokenizer/model mismatch, 9 memory)"

if [ -w /dev/full ]; then
    for cmd in "selftest" "run --model-dir $m --prompt-ids 1 --gen-toks 1" "verify $d/r --model-dir $m" \
               "check $d/r" "compare $d/r $d/r" "tokenize --tokenizer $m/tokenizer.json --text ab" \
               "synth --list" "help" "version"; do
        $CIS2 $cmd > /dev/full 2> "$d/err"; rc=$?
        [ $rc -eq 3 ] || fail "cis2 $cmd > /dev/full exited $rc, want 3"
    done
    "$CIS2" run --model-dir "$m" --prompt-ids 1 --gen-toks 1 --trace "$d/t" > /dev/null || fail "trace"
    "$CIS2" diff "$d/t" "$d/t" > /dev/full 2> /dev/null; [ $? -eq 3 ] || fail "diff > /dev/full"
    echo "ok: unwritable stdout is exit 3"
fi
echo "cli ok"
