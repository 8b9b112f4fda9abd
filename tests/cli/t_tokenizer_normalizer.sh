#!/bin/sh
# tests/cli/t_tokenizer_normalizer.sh - a hostile normalizer is refused or
# runs in linear time (docs/tokenizer.md "Normalizers", docs/inputs.md
# "tokenizer.json"): a Replace whose content is longer than its pattern
# multiplies the text, and chained in a Sequence each step multiplies again
# (7 bytes of input took 57 s and 1 GB).  cis2 bounds at load what the
# normalizer can make of a text (F*n + C bytes, F + C <= 32) and refuses
# the file otherwise: one stderr line naming it, exit 5, at once, under a
# 1 GiB address-space cap and a timeout.  A Replace's pattern is found in
# linear time (a 1 MiB pattern against 4 MiB of text that almost matches
# it everywhere was n * pattern-length byte comparisons).  The real family
# tokenizers, whose normalizers grow text at most 12-fold, still load and
# match the oracle (t_tokenizer_families, t_tokenizer_added_families); and
# Replace replaces what the oracle's does (tests/tokenizer/diff-replace.js,
# when node and the npm oracle are there).
set -u
. tests/lib.sh
tmpdir d

# mk NORMALIZER_JSON: a byte-level tokenizer.json with that normalizer
mk() {
    printf '{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":%s,' "$1"
    printf '"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true},'
    printf '"post_processor":null,"decoder":{"type":"ByteLevel"},"model":{"type":"BPE","vocab":{"a":0,"b":1},"merges":[]}}'
}
rep() { printf '{"type":"Replace","pattern":{"String":"%s"},"content":"%s"}' "$1" "$2"; }
# the address-space cap (1 GiB), not under ASan (its shadow memory needs terabytes of it)
ULIM=1048576
nm "$CIS2" 2>/dev/null | grep -q __asan_init && ULIM=unlimited
run() {   # FILE [--text T | < input]: cis2 tokenize, capped, into $d/out, $d/err, $rc
    f=$1; shift
    ( ulimit -v $ULIM; exec timeout 120 "$CIS2" tokenize --tokenizer "$f" "$@" ) > "$d/out" 2> "$d/err"
    rc=$?
}
refused() {   # NAME WORDS...: $d/NAME.json is refused with one line naming it and the words
    n=$1; shift
    run "$d/$n.json" --text aaaaaaa
    [ $rc -eq 5 ] || { fail_later "$n: exit $rc, want 5 (a refusal at load): $(head -c 300 "$d/err")"; return; }
    [ "$(wc -l < "$d/err")" -eq 1 ] || fail_later "$n: stderr is not one line: $(cat "$d/err")"
    for w in "$d/$n.json" "$@"; do grep -qF -- "$w" "$d/err" || fail_later "$n: message lacks '$w': $(cat "$d/err")"; done
    echo "ok: $n refused: $(cat "$d/err")"
}
A1000=$(head -c 1000 /dev/zero | tr '\0' a)
A32=$(head -c 32 /dev/zero | tr '\0' a)
A33=$(head -c 33 /dev/zero | tr '\0' a)

# 1. chained Replace of "a" by 1,000 bytes: 10^9 per byte, refused at load
R=$(rep a "$A1000")
mk "{\"type\":\"Sequence\",\"normalizers\":[$R,$R,$R]}" > "$d/chain.json"
refused chain "normalizer can make a text more than" "times longer" "Replace of 1 bytes by 1000" "limit of 32"
# one such Replace alone (1,000-fold)
mk "$R" > "$d/one.json"
refused one "normalizer can make a text up to 1000 times longer"
# the limit: 32-fold loads and runs, 33-fold is refused
mk "$(rep a "$A33")" > "$d/over.json"
refused over "up to 33 times longer" "limit of 32"
mk "$(rep a "$A32")" > "$d/at.json"
run "$d/at.json" --text aaaaaaa
[ $rc -eq 0 ] || fail_later "at the limit (32-fold): exit $rc: $(cat "$d/err")"
[ "$(tr ',' '\n' < "$d/out" | wc -l)" -eq 224 ] || fail_later "at the limit: $(head -c 200 "$d/out"), want 224 ids"
# growth through Prepend and NFC counts too: NFC x 3 of (n + 11 bytes) <= 36 n
mk '{"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"bbbbbbbbbbb"},{"type":"NFC"}]}' > "$d/prepend.json"
refused prepend "up to 36 times longer"
# two doubling steps are 4-fold: loads, and doubles twice
mk "{\"type\":\"Sequence\",\"normalizers\":[$(rep a aa),$(rep a aa)]}" > "$d/double.json"
run "$d/double.json" --text ab
[ $rc -eq 0 ] && [ "$(cat "$d/out")" = "0,0,0,0,1" ] || fail_later "two doubling Replace: exit $rc, $(cat "$d/out" "$d/err")"
echo "ok: bounded growth loads and runs"

# 2. a Replace pattern of 1 MiB ("a" x 2^20 then "b") against 4 MiB of "a":
#    every position almost matches; linear search: well under the timeout
P=$(head -c 1048576 /dev/zero | tr '\0' a)b
mk "$(rep "$P" b)" > "$d/longpat.json"
head -c 4194304 /dev/zero | tr '\0' a > "$d/text"
run "$d/longpat.json" < "$d/text"
[ $rc -eq 0 ] || fail_later "1 MiB pattern: exit $rc (124: not done in 120 s): $(head -c 300 "$d/err")"
[ "$(tr ',' '\n' < "$d/out" | wc -l)" -eq 4194304 ] || fail_later "1 MiB pattern: not 4194304 ids"
echo "ok: 1 MiB Replace pattern over 4 MiB of text"
# ... and where it occurs it is replaced, leftmost first, without overlaps:
# "a" P "b" P "aa" -> "a" "b" "b" "b" "aa"
printf 'a%sb%saa' "$P" "$P" > "$d/text2"
run "$d/longpat.json" < "$d/text2"
[ $rc -eq 0 ] && [ "$(cat "$d/out")" = "0,1,1,1,0,0" ] ||
    fail_later "1 MiB pattern replaced: exit $rc, $(head -c 200 "$d/out")"

# 3. which occurrences a Replace replaces, against the oracle (when it is there)
if command -v node >/dev/null 2>&1 && [ -d tests/tokenizer/node_modules/tokenizers ]; then
    node tests/tokenizer/diff-replace.js "$CIS2" "$d" || fail_later "Replace against the oracle"
else
    echo "note: node or the oracle missing: Replace not compared with it (cd tests/tokenizer && npm ci)"
fi
end_fails
echo "normalizer bounds ok"
