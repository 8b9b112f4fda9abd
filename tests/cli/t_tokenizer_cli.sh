#!/bin/sh
# tests/cli/t_tokenizer_cli.sh - `cis2 tokenize` / `cis2 detokenize` (CIS-2 §3.1):
# output formats on the §3.1.7 worked example, and one-line errors with the
# README exit codes for bad command lines, missing, malformed and
# unsupported tokenizer.json files and invalid UTF-8 input.
set -u
. tests/lib.sh
TOK=$SHARED/models/smollm2-135m/tokenizer.json
tmpdir d

# expect CODE NEEDLE cmd...: exit code CODE, exactly one stderr line containing NEEDLE
expect() {
    code=$1; needle=$2; shift 2
    "$@" > "$d/out" 2> "$d/err" < "$d/in"
    rc=$?
    [ $rc -eq "$code" ] || fail "$* exited $rc, want $code ($(cat "$d/err"))"
    [ "$(wc -l < "$d/err")" -eq 1 ] || fail "$*: stderr is not one line: $(cat "$d/err")"
    grep -q -- "$needle" "$d/err" || fail "$*: stderr lacks '$needle': $(cat "$d/err")"
    echo "ok: exit $code: $(cat "$d/err")"
}
: > "$d/in"
expect 2 "tokenizer FILE" "$CIS2" tokenize --text x
expect 2 "unexpected" "$CIS2" tokenize --tokenizer "$d/x.json" --bogus
expect 2 "IDS" "$CIS2" detokenize --tokenizer "$d/x.json"
expect 2 "comma-separated" "$CIS2" detokenize --tokenizer "$d/x.json" 1,x
expect 3 "cannot open" "$CIS2" tokenize --tokenizer "$d/missing.json" --text x
printf '{"model": {"vocab": ' > "$d/bad.json"
expect 4 "malformed JSON" "$CIS2" tokenize --tokenizer "$d/bad.json" --text x
printf '{"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}}' > "$d/unk.json"
expect 4 "merges\[0\]" "$CIS2" tokenize --tokenizer "$d/unk.json" --text x
printf '{"normalizer": {"type": "NFKC"}, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}, "model": {"type": "BPE", "vocab": {"a": 0}}}' > "$d/nfc.json"
expect 5 "normalizer" "$CIS2" tokenize --tokenizer "$d/nfc.json" --text x
printf '{"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}, "model": {"type": "BPE", "vocab": {"a": 0}, "dropout": 0.5}}' > "$d/drop.json"
expect 5 "dropout" "$CIS2" detokenize --tokenizer "$d/drop.json" 0

[ -f "$TOK" ] || skip "$TOK missing (error tests passed)"
printf 'ab\300\200' > "$d/in"
expect 4 "UTF-8" "$CIS2" tokenize --tokenizer "$TOK"
printf '"ok"\n"bad \\u0000 is fine"\n42\n' > "$d/in"
expect 4 "line 3" "$CIS2" tokenize --tokenizer "$TOK" --batch

out=$("$CIS2" tokenize --tokenizer "$TOK" --text "Once upon a time") || fail "tokenize"
[ "$out" = "6403,1980,253,655" ] || fail "tokenize printed '$out' (§3.1.7)"
out=$("$CIS2" tokenize --tokenizer "$TOK" --json --text "Once upon a time") || fail "tokenize --json"
[ "$out" = "[6403,1980,253,655]" ] || fail "tokenize --json printed '$out'"
out=$(printf 'Once upon a time' | "$CIS2" tokenize --tokenizer "$TOK") || fail "tokenize stdin"
[ "$out" = "6403,1980,253,655" ] || fail "tokenize stdin printed '$out'"
out=$("$CIS2" detokenize --tokenizer "$TOK" 6403,1980,253,655) || fail "detokenize"
[ "$out" = "Once upon a time" ] || fail "detokenize printed '$out'"
out=$("$CIS2" detokenize --tokenizer "$TOK" "[6403, 1980, 253, 655]") || fail "detokenize json"
[ "$out" = "Once upon a time" ] || fail "detokenize of a JSON array printed '$out'"
echo "tokenize/detokenize CLI ok"
