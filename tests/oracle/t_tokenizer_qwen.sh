#!/bin/sh
# tests/oracle/t_tokenizer_qwen.sh - the NON-NORMATIVE Qwen2.5 tokenizer extension
# (outside CIS-2 v0.3b §3, FACTS §2): a synthetic tokenizer.json of Qwen2.5's
# shape (tests/tokenizer/make-qwen-tok.js: NFC, Split regex, ByteLevel
# without regex, merges that fire, added tokens) must be
#   - loaded without --tokenizer-ext (docs/tokenizer.md: it is accepted as a no-op)
#     by tokenize, detokenize, run, verify and check, giving the same ids and
#     text as with the flag;
#   - exact to the oracle (npm tokenizers 0.23.2) on the
#     corpus plus NFC / Split / CR-LF strings (corpus-qwen.js generate())
#     and on a sweep of every code point of planes 0, 1 and 14 in three
#     contexts (corpus-qwen.js sweep()): zero mismatches;
#   - NFC-invariant (composed and decomposed spellings encode alike: a
#     property, checked without the oracle);
#   - usable by `cis2 run` with a text prompt on a synthetic tiny-qwen
#     checkpoint, whose prompt ids are the tokenizer's, with receipts that
#     verify with and without the flag.
# Skips without node or the oracle (cd tests/tokenizer && npm ci).
set -u
. tests/lib.sh
command -v node >/dev/null 2>&1 || skip "node not installed"
[ -d tests/tokenizer/node_modules/tokenizers ] || skip "oracle missing (cd tests/tokenizer && npm ci)"
tmpdir d
TOK=$d/tokenizer.json
node tests/tokenizer/make-qwen-tok.js "$TOK" || fail "make-qwen-tok.js"

# 1. Loaded without the flag, the same as with it (a no-op).
same_flag() {   # ARGS...: the command's stdout with and without --tokenizer-ext
    "$@" > "$d/a" 2> "$d/err" < /dev/null || fail "$* (without --tokenizer-ext): $(cat "$d/err")"
    "$@" --tokenizer-ext > "$d/b" 2> "$d/err" < /dev/null || fail "$* --tokenizer-ext: $(cat "$d/err")"
    cmp -s "$d/a" "$d/b" || fail "$*: $(cat "$d/a") without the flag, $(cat "$d/b") with it"
    [ -s "$d/a" ] || fail "$*: no output"
    echo "ok: without the flag: $* -> $(cat "$d/a")"
}
same_flag "$CIS2" tokenize --tokenizer "$TOK" --text "Hello"
same_flag "$CIS2" detokenize --tokenizer "$TOK" 1,2
# without the normalizer the Split pre-tokenizer alone loads too
node -e 'const f=process.argv[1],j=JSON.parse(require("fs").readFileSync(f));j.normalizer=null;
require("fs").writeFileSync(process.argv[2],JSON.stringify(j))' "$TOK" "$d/split.json" || fail "split.json"
same_flag "$CIS2" tokenize --tokenizer "$d/split.json" --text "Hi there"

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

# 4. cis2 run on a synthetic tiny-qwen checkpoint (the flag is a no-op).
"$CIS2" synth --shape tiny-qwen --seed 1 --out "$d/m" --tokenizer "$TOK" > /dev/null || fail "synth"
want=$(enc "Hello world")
"$CIS2" run --model-dir "$d/m" --prompt "Hello world" --gen-toks 3 > "$d/run" 2> "$d/err" ||
    fail "run without the flag: $(cat "$d/err")"
"$CIS2" run --model-dir "$d/m" --prompt "Hello world" --gen-toks 3 --tokenizer-ext > "$d/run1" 2> "$d/err" ||
    fail "run --tokenizer-ext: $(cat "$d/err")"
cmp -s "$d/run" "$d/run1" || fail "run: the flag changes the output"
grep -q "^prompt_token_ids = $want\$" "$d/run" || fail "run: prompt ids are not $want: $(cat "$d/run")"
grep -q "^completion = " "$d/run" || fail "run: no completion: $(cat "$d/run")"
"$CIS2" run --model-dir "$d/m" --prompt-ids "$want" --gen-toks 3 > "$d/run2" 2> "$d/err" ||
    fail "run --prompt-ids without the flag: $(cat "$d/err")"
g1=$(grep '^generated_token_ids' "$d/run"); g2=$(grep '^generated_token_ids' "$d/run2")
[ "$g1" = "$g2" ] || fail "run --prompt-ids: $g2, with the text prompt: $g1"
echo "ok: run with and without --tokenizer-ext ($want)"

# 5. receipts of such runs verify, with
# --tokenizer-ext (a no-op) and without it.
"$CIS2" run --model-dir "$d/m" --prompt "Hello world" --gen-toks 3 --receipt "$d/r" > /dev/null 2>&1 ||
    fail "run --receipt"
"$CIS2" verify "$d/r" --model-dir "$d/m" --tokenizer-ext > "$d/v" 2> "$d/err" || fail "verify --tokenizer-ext: $(cat "$d/v" "$d/err")"
grep -q '^verdict: OK' "$d/v" || fail "verify --tokenizer-ext: $(cat "$d/v")"
"$CIS2" verify "$d/r" --model-dir "$d/m" > "$d/v" 2> "$d/err" || fail "verify: $(cat "$d/v" "$d/err")"
grep -q '^verdict: OK' "$d/v" || fail "verify: $(cat "$d/v")"
"$CIS2" check "$d/r" --tokenizer "$d/m/tokenizer.json" --config "$d/m/config.json" > "$d/v" 2>&1 ||
    fail "check: $(cat "$d/v")"
"$CIS2" check "$d/r" --tokenizer "$d/m/tokenizer.json" --config "$d/m/config.json" --tokenizer-ext > "$d/v" 2>&1 ||
    fail "check --tokenizer-ext: $(cat "$d/v")"
echo "ok: receipts verify, with and without --tokenizer-ext"
echo "qwen tokenizer extension ok"
