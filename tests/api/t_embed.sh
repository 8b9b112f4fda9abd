#!/bin/sh
# tests/api/t_embed.sh - the README's "Embedding" example, as a user would build
# it: `make install` into a scratch prefix, the program extracted from the
# README compiled with pkg-config against the installed header and
# libcis2.so (dynamically linked: ldd must show it), run on a synthetic
# checkpoint.  Its CIS2_REF must equal `cis2 run`'s, its receipt must be the
# one `cis2 run --receipt` writes, byte for byte, and `cis2 verify` must
# accept it.
set -u
. tests/lib.sh
[ -z "${RUNNER:-}" ] || skip "cross build (the example is checked on the host build)"
tmpdir d
make -s install PREFIX="$d/prefix" BUILD="$BUILD" SAN="${SAN:-}" CC="${CC:-cc}" OPT="${OPT:--O2}" > "$d/install.log" 2>&1 ||
    { cat "$d/install.log"; fail "make install"; }
for f in lib/libcis2.so lib/libcis2.so.0 lib/libcis2.a include/cis2.h lib/pkgconfig/cis2.pc bin/cis2; do
    [ -e "$d/prefix/$f" ] || fail "make install did not install $f"
done
awk '/<!-- example: embed.c -->/ { on = 1; next } on && /^```c/ { code = 1; next } code && /^```/ { exit } code { print }' \
    README.md > "$d/embed.c"
[ -s "$d/embed.c" ] || fail "no example in the README"
PKG_CONFIG_PATH="$d/prefix/lib/pkgconfig" pkg-config --cflags --libs cis2 > "$d/flags" || fail "pkg-config cis2"
# under `make check SAN=1` the example carries the sanitizer runtime the library needs
san=; [ "${SAN:-}" = 1 ] && san="-fsanitize=address,undefined"
${CC:-cc} -std=c11 -ffp-contract=off -Wall -Wextra -Werror $san "$d/embed.c" $(cat "$d/flags") -o "$d/embed" || fail "the example does not compile"
LD_LIBRARY_PATH="$d/prefix/lib" ldd "$d/embed" | grep -q "libcis2.so.0 => $d/prefix/lib/libcis2.so.0" ||
    fail "the example is not linked against the installed libcis2.so"
"$CIS2" synth --shape tiny --seed 7 --out "$d/m" > /dev/null || fail "synth"
LD_LIBRARY_PATH="$d/prefix/lib" "$d/embed" "$d/m" "$d/r" > "$d/out" || { cat "$d/out"; fail "the example failed"; }
cat "$d/out"
[ "$(grep -c '^step ' "$d/out")" -eq 8 ] || fail "expected 8 streamed tokens"
grep -q '^verdict: OK' "$d/out" || fail "the example's receipt did not verify"
ref=$("$CIS2" run --model-dir "$d/m" --prompt "Once upon a time" --gen-toks 8 --receipt "$d/r2" |
      sed -n 's/^CIS2_REF digest=\([0-9a-f]*\).*/\1/p')
grep -q "^CIS2_REF $ref\$" "$d/out" || fail "the example's CIS2_REF differs from cis2 run's ($ref)"
cmp "$d/r" "$d/r2" || fail "the example's receipt differs from cis2 run --receipt's"
"$CIS2" verify "$d/r" --model-dir "$d/m" > /dev/null || fail "cis2 verify rejects the example's receipt"
echo "embedding example ok"
