#!/bin/sh
# tests/oracle/t_tokenizer_diff.sh - CIS-2 §3.1: cis2's tokenizer against the oracle
# (npm tokenizers 0.23.2 = Hugging Face tokenizers, FACTS §2) on the
# deterministic corpus of tests/tokenizer/corpus.js, encode and decode
# (tests/tokenizer/diff.js).  Needs node and `npm ci` in tests/tokenizer
# (tools/install-deps does it); skips without them.
set -u
. tests/lib.sh
TOK=$SHARED/models/smollm2-135m/tokenizer.json
[ -f "$TOK" ] || skip "$TOK missing"
command -v node >/dev/null 2>&1 || skip "node not installed"
[ -d tests/tokenizer/node_modules/tokenizers ] || skip "oracle missing (cd tests/tokenizer && npm ci)"
sum=$(sha256sum "$TOK" | cut -d' ' -f1)
[ "$sum" = 9ca9acddb6525a194ec8ac7a87f24fbba7232a9a15ffa1af0c1224fcd888e47c ] || fail "$TOK sha256 $sum (§3.1.1)"
exec node tests/tokenizer/diff.js "$CIS2" "$TOK"
