#!/bin/sh
# tests/cli/t_tokenizer_added.sh - added tokens that overlap (issue 16 item 4):
# cis2 matches added tokens with an Aho-Corasick automaton over the
# reversed contents; on SmolLM2's tokenizer.json plus ~250 added tokens that
# are prefixes, suffixes and infixes of each other (ASCII, multi-byte,
# special and not; tests/tokenizer/make-added-tok.js) it must agree with
# the oracle (npm tokenizers 0.23.2) on every string of a corpus built from
# the same pieces: zero mismatches, encode and decode (diff.js).
# Skips without node, the oracle or the shared tokenizer.
set -u
CIS2=${CIS2:-build/cis2}
SHARED=${SHARED:-../shared}
TOK=$SHARED/models/smollm2-135m/tokenizer.json
[ -f "$TOK" ] || { echo "SKIP: $TOK missing"; exit 77; }
command -v node >/dev/null 2>&1 || { echo "SKIP: node not installed"; exit 77; }
[ -d tests/tokenizer/node_modules/tokenizers ] || { echo "SKIP: oracle missing (cd tests/tokenizer && npm ci)"; exit 77; }
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
node tests/tokenizer/make-added-tok.js "$TOK" "$d/tok.json" "$d/corpus.json" || { echo "FAIL: make-added-tok.js"; exit 1; }
node tests/tokenizer/diff.js "$CIS2" "$d/tok.json" --corpus-file "$d/corpus.json"
