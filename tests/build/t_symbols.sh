#!/bin/sh
# tests/build/t_symbols.sh - the libraries export the API of include/cis2.h and
# nothing else (docs/architecture.md "Rules of the house"): every dynamic symbol of
# libcis2.so and every global symbol of the installed libcis2.a is a
# function declared CIS2_API in the header, every such function is
# exported, and the soname is libcis2.so.0.
set -u
. tests/lib.sh
so=$BUILD/libcis2.so
a=$BUILD/libcis2.a
[ -f "$so" ] && [ -f "$a" ] || fail "$so or $a missing (make)"
tmpdir d
# declared: 'CIS2_API <type> [*]name(' in the header, possibly across lines
cat include/cis2.h include/cis2_toolkit.h | grep -v '^#define CIS2_API' | tr '\n' ' ' | grep -o 'CIS2_API [^;{(]*(' | sed 's/($//; s/.*[ *]//' | sort -u > "$d/declared"
[ "$(wc -l < "$d/declared")" -ge 60 ] || fail "found only $(wc -l < "$d/declared") CIS2_API declarations"
NM=${NM:-nm}
$NM -D --defined-only "$so" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sort -u > "$d/so"
$NM -g --defined-only "$a" | awk 'NF == 3 && $2 ~ /^[TDBRVW]$/ {print $3}' | sort -u > "$d/a"
for lib in so a; do
    extra=$(comm -13 "$d/declared" "$d/$lib")
    [ -z "$extra" ] || fail "$lib exports symbols that are not the API: $(echo $extra)"
    missing=$(comm -23 "$d/declared" "$d/$lib")
    [ -z "$missing" ] || fail "$lib lacks API functions: $(echo $missing)"
done
grep -v '^cis2_' "$d/so" && fail "a non-cis2_ symbol is exported"
readelf -d "$so" | grep -q 'SONAME.*\[libcis2\.so\.0\]' || fail "soname is not libcis2.so.0"
echo "libcis2.so and libcis2.a export exactly the $(wc -l < "$d/declared") API functions"
