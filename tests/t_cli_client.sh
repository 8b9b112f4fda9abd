#!/bin/sh
# tests/t_cli_client.sh - the `cis2` program is a client of the public API
# (issue "The engine as a library"): main.c and cli_*.c include no cis2
# header but cli.h and include/cis2.h, cli.h includes only cis2.h, and the
# binary links against the public libcis2.a (which has nothing else to
# offer, t_symbols.sh), so the CLI recomputes nothing the library owns.
set -u
fail() { echo "FAIL: $*"; exit 1; }
for f in src/main.c src/cli_*.c src/cli.h; do
    bad=$(grep -h '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | sed 's/.*"\(.*\)".*/\1/' |
          grep -v -x -e cis2.h -e cli.h)
    [ -z "$bad" ] || fail "$f includes $(echo $bad) (only cli.h and cis2.h are allowed)"
done
grep -h '#include "' src/cli.h | grep -v -q '"cis2.h"' && fail "cli.h includes more than cis2.h"
grep -q 'libcis2.a' Makefile || fail "Makefile lost the public archive"
grep -E '^\$\(BUILD\)/cis2:.*libcis2\.a' Makefile | grep -q -v internal || fail "cis2 does not link the public archive"
echo "the CLI includes only cis2.h and links the public archive"
