#!/bin/sh
# tests/build/t_cli_client.sh - the `cis2` program is a client of the public API
# (docs/architecture.md "Rules of the house"): cli/ and serve/
# include no cis2 header but their own and include/'s, every one of their
# files compiles with include/ alone on the include path (so the engine's
# src/ headers are out of reach: a build property, checked here by
# compiling them so), and the binary links against the public libcis2.a
# (which has nothing else to offer, t_symbols.sh), so the CLI recomputes
# nothing the library owns.
set -u
. tests/lib.sh
for f in cli/*.c cli/*.h; do
    bad=$(grep -h '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | sed 's/.*"\(.*\)".*/\1/' |
          grep -v -x -e cis2.h -e cis2_toolkit.h -e cli.h)
    [ -z "$bad" ] || fail "$f includes $(echo $bad) (only cli.h and the public headers are allowed)"
done
grep -h '#include "' cli/cli.h | grep -v -q -e '"cis2.h"' -e '"cis2_toolkit.h"' && fail "cli.h includes more than the public headers"
CC=${CC:-cc}
for f in cli/*.c serve/*.c; do
    $CC -std=c11 -D_DEFAULT_SOURCE -fsyntax-only -Iinclude "$f" 2> /tmp/cli_client.$$ ||
        { cat /tmp/cli_client.$$; rm -f /tmp/cli_client.$$; fail "$f does not compile with include/ alone"; }
done
rm -f /tmp/cli_client.$$
grep -q 'libcis2.a' Makefile || fail "Makefile lost the public archive"
grep -E '^\$\(BUILD\)/cis2:.*libcis2\.a' Makefile | grep -q -v internal || fail "cis2 does not link the public archive"
echo "the CLI includes only the public headers and links the public archive"
