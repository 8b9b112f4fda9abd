#!/bin/sh
# tests/cli/t_tokenizer_added.sh - added tokens that overlap (docs/inputs.md "Work is linear"):
# cis2 matches added tokens with an Aho-Corasick automaton over the
# reversed contents; on SmolLM2's tokenizer.json plus ~250 added tokens that
# are prefixes, suffixes and infixes of each other (ASCII, multi-byte,
# special and not; tests/tokenizer/make-added-tok.js) it must agree with
# the oracle (npm tokenizers 0.23.2) on every string of a corpus built from
# the same pieces: zero mismatches, encode and decode (diff.js).
# Skips without node, the oracle or the shared tokenizer.
set -u
. tests/lib.sh
TOK=$SHARED/models/smollm2-135m/tokenizer.json
[ -f "$TOK" ] || skip "$TOK missing"
command -v node >/dev/null 2>&1 || skip "node not installed"
[ -d tests/tokenizer/node_modules/tokenizers ] || skip "oracle missing (cd tests/tokenizer && npm ci)"
tmpdir d
node tests/tokenizer/make-added-tok.js "$TOK" "$d/tok.json" "$d/corpus.json" || fail "make-added-tok.js"
node tests/tokenizer/diff.js "$CIS2" "$d/tok.json" --corpus-file "$d/corpus.json"
