#!/bin/sh
# tests/oracle/t_tokenizer_qwen.sh - the NON-NORMATIVE Qwen2.5 tokenizer extension
# (outside CIS-2 v0.3b §3, FACTS §2): a synthetic tokenizer.json of Qwen2.5's
# shape (tests/tokenizer/make-qwen-tok.js: NFC, Split regex, ByteLevel
# without regex, merges that fire, added tokens) must be
#   - refused by the strict loader (exit 5, one line naming the normalizer,
#     §3, --prompt-ids and --tokenizer-ext), by tokenize, detokenize and run;
#   - exact to the oracle (npm tokenizers 0.23.2) with --tokenizer-ext on the
#     corpus plus NFC / Split / CR-LF strings (corpus-qwen.js generate())
#     and on a sweep of every code point of planes 0, 1 and 14 in three
#     contexts (corpus-qwen.js sweep()): zero mismatches;
#   - NFC-invariant (composed and decomposed spellings encode alike: a
#     property, checked without the oracle);
#   - usable by `cis2 run --tokenizer-ext` with a text prompt on a synthetic
#     tiny-qwen checkpoint, whose prompt ids are the tokenizer's.
# Skips without node or the oracle (cd tests/tokenizer && npm ci).
set -u
. tests/lib.sh
command -v node >/dev/null 2>&1 || skip "node not installed"
[ -d tests/tokenizer/node_modules/tokenizers ] || skip "oracle missing (cd tests/tokenizer && npm ci)"
tmpdir d
TOK=$d/tokenizer.json
node tests/tokenizer/make-qwen-tok.js "$TOK" || fail "make-qwen-tok.js"

# 1. The strict (§3) loader refuses it, and says what to do instead.
refused() {
    "$@" > "$d/out" 2> "$d/err" < /dev/null
    rc=$?
    [ $rc -eq 5 ] || fail "$* exited $rc, want 5 ($(cat "$d/err"))"
    [ "$(wc -l < "$d/err")" -eq 1 ] || fail "$*: stderr is not one line: $(cat "$d/err")"
    for w in normalizer NFC "v0.3b §3" --prompt-ids --tokenizer-ext; do
        grep -q -- "$w" "$d/err" || fail "$*: message lacks '$w': $(cat "$d/err")"
    done
    echo "ok: refused: $(cat "$d/err")"
}
refused "$CIS2" tokenize --tokenizer "$TOK" --text "Hello"
refused "$CIS2" detokenize --tokenizer "$TOK" 1,2
# without the normalizer the Split pre-tokenizer is refused the same way
node -e 'const f=process.argv[1],j=JSON.parse(require("fs").readFileSync(f));j.normalizer=null;
require("fs").writeFileSync(process.argv[2],JSON.stringify(j))' "$TOK" "$d/split.json" || fail "split.json"
"$CIS2" tokenize --tokenizer "$d/split.json" --text x > /dev/null 2> "$d/err"
[ $? -eq 5 ] && grep -q "pre_tokenizer Split" "$d/err" && grep -q -- "--prompt-ids" "$d/err" ||
    fail "Split without the flag: $(cat "$d/err")"
out=$("$CIS2" tokenize --tokenizer "$d/split.json" --tokenizer-ext --text "Hi there") || fail "Split alone with the flag"
echo "ok: Split alone with the flag: $out"

# 2. Exact to the oracle.
node tests/tokenizer/diff.js "$CIS2" "$TOK" --ext --corpus qwen || fail "differential test (corpus)"
node tests/tokenizer/diff.js "$CIS2" "$TOK" --ext --corpus sweep || fail "differential test (code point sweep)"

# 3. NFC invariance, without the oracle: decomposed == composed.
enc() { "$CIS2" tokenize --tokenizer "$TOK" --tokenizer-ext --text "$1" || fail "tokenize '$1'"; }
same() {
    a=$(enc "$1"); b=$(enc "$2")
    [ "$a" = "$b" ] || fail "'$1' -> $a but '$2' -> $b (NFC)"
}
same "$(printf 'Cafe\314\201')" "$(printf 'Caf\303\251')"                  # e U+0301 = U+00E9
same "$(printf '\341\204\222\341\205\241\341\206\253')" "$(printf '\355\225\234')" # jamo = U+D55C
same "$(printf 'a\314\201\314\243')" "$(printf 'a\314\243\314\201')"        # ccc 230/220 reordered
same "$(printf '\342\204\253')" "$(printf '\303\205')"                      # U+212B = U+00C5
a=$(enc "$(printf '\340\245\230')"); b=$(enc "$(printf '\340\244\225\340\244\274')") # U+0958 excluded
[ "$a" = "$b" ] || fail "U+0958 -> $a, U+0915 U+093C -> $b"
echo "ok: NFC invariance"

# 4. cis2 run --tokenizer-ext on a synthetic tiny-qwen checkpoint.
"$CIS2" synth --shape tiny-qwen --seed 1 --out "$d/m" --tokenizer "$TOK" > /dev/null || fail "synth"
want=$(enc "Hello world")
"$CIS2" run --model-dir "$d/m" --prompt "Hello world" --gen-toks 3 > "$d/err" 2>&1 && fail "run without the flag succeeded"
grep -q -- "--tokenizer-ext" "$d/err" || fail "run without the flag: $(cat "$d/err")"
"$CIS2" run --model-dir "$d/m" --prompt "Hello world" --gen-toks 3 --tokenizer-ext > "$d/run" 2> "$d/err" ||
    fail "run --tokenizer-ext: $(cat "$d/err")"
grep -q "^prompt_token_ids = $want\$" "$d/run" || fail "run: prompt ids are not $want: $(cat "$d/run")"
grep -q "^completion = " "$d/run" || fail "run: no completion: $(cat "$d/run")"
"$CIS2" run --model-dir "$d/m" --prompt-ids "$want" --gen-toks 3 > "$d/run2" 2> "$d/err" ||
    fail "run --prompt-ids without the flag: $(cat "$d/err")"
g1=$(grep '^generated_token_ids' "$d/run"); g2=$(grep '^generated_token_ids' "$d/run2")
[ "$g1" = "$g2" ] || fail "run --prompt-ids: $g2, with the text prompt: $g1"
echo "ok: run --tokenizer-ext ($want)"

# 5. receipts of such runs verify (issue "Reliability" item 7): verify and
# check take --tokenizer-ext; without it verify says what to do (exit 5).
"$CIS2" run --model-dir "$d/m" --prompt "Hello world" --gen-toks 3 --tokenizer-ext --receipt "$d/r" > /dev/null 2>&1 ||
    fail "run --tokenizer-ext --receipt"
"$CIS2" verify "$d/r" --model-dir "$d/m" --tokenizer-ext > "$d/v" 2> "$d/err" || fail "verify --tokenizer-ext: $(cat "$d/v" "$d/err")"
grep -q '^verdict: OK' "$d/v" || fail "verify --tokenizer-ext: $(cat "$d/v")"
"$CIS2" verify "$d/r" --model-dir "$d/m" > "$d/v" 2>&1; rc=$?
[ $rc -eq 5 ] || fail "verify without --tokenizer-ext exited $rc, want 5"
grep -q -- "--tokenizer-ext" "$d/v" || fail "verify without the flag does not name it: $(cat "$d/v")"
"$CIS2" check "$d/r" --tokenizer "$d/m/tokenizer.json" --config "$d/m/config.json" --tokenizer-ext > "$d/v" 2>&1 ||
    fail "check --tokenizer-ext: $(cat "$d/v")"
echo "ok: receipts of --tokenizer-ext runs verify with --tokenizer-ext"
echo "qwen tokenizer extension ok"
