#!/bin/sh
# tests/api/t_readme_recipes.sh - the README's install recipes, run as written
# (README "Embedding", "Python"), as tools/fresh-machine runs its Set-up block.
#
# Each recipe is the ```sh block right after a line `<!-- recipe: NAME -->`
# in README.md.  Its first line sets the one variable a reader may change
# (PREFIX=..., VENV=...); the test rewrites that line alone, to a temporary
# directory, so nothing is installed on the machine running the test, and
# runs the rest as the README shows it (sh -e: every line must succeed),
# with LD_LIBRARY_PATH, PKG_CONFIG_PATH and CIS2_LIBRARY unset, so what a
# recipe needs it must set itself:
#   install-lib     from the source tree: the library, headers, cis2.pc and
#                   the program in PREFIX; its cis2 runs;
#   embed-build     the README's embed.c built with pkg-config against
#                   that PREFIX, and run: it must find libcis2.so.0 without
#                   ldconfig, and its receipt must verify;
#   install-python  a virtual environment (PEP 668: Debian's own python3
#                   refuses `pip install` outside one) holding the
#                   package and the library beside it; the package must load
#                   that library, also with a stale libcis2.so.0 of another
#                   version first on LD_LIBRARY_PATH.
# The recipes need neither root nor sudo with a PREFIX of one's own, so the
# test runs the same as root (CI) and as a user.
# Skips (77) in a cross or sanitizer build (the recipes build the plain host
# library; t_embed and t_python cover those builds), and without Debian's
# venv module (apt-get install python3-venv, or sh tools/install-deps).
set -u
. tests/lib.sh
PY=/usr/bin/python3
[ -z "${RUNNER:-}" ] || skip "cross build (the README's recipes are checked on the host build)"
[ "${SAN:-}" != 1 ] || skip "sanitizer build (the recipes build the plain library)"
[ -f "$BUILD/libcis2.so" ] || fail "$BUILD/libcis2.so not built"
tmpdir d
root=$(pwd)
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PYTHONDONTWRITEBYTECODE=1
unset PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL   # a clean machine's pip
unset LD_LIBRARY_PATH PKG_CONFIG_PATH CIS2_LIBRARY

# recipe NAME VAR VALUE: the block after the marker, its first line (VAR=...)
# rewritten to VAR=VALUE, in $d/NAME.sh
recipe() {
    [ "$(grep -c "^<!-- recipe: $1 -->\$" README.md)" = 1 ] || fail "README.md has no single <!-- recipe: $1 --> line"
    awk -v m="<!-- recipe: $1 -->" '$0 == m { on = 1; next }
        on == 1 { if ($0 != "```sh") exit 1; on = 2; next }
        on == 2 && /^```/ { on = 3; exit }
        on == 2 { print }
        END { if (on != 3) exit 1 }' README.md > "$d/$1.raw" ||
        fail "recipe $1: the marker is not followed by a whole \`\`\`sh block"
    head -n 1 "$d/$1.raw" | grep -q "^$2=" || fail "recipe $1 does not start with $2=...: $(head -n 1 "$d/$1.raw")"
    [ "$(grep -c "^$2=" "$d/$1.raw")" = 1 ] || fail "recipe $1 sets $2 more than once"
    { echo "$2='$3'"; sed 1d "$d/$1.raw"; } > "$d/$1.sh"
}

# run NAME DIR: the recipe in DIR, its commands and output in $d/NAME.log
run() {
    (cd "$2" && sh -ex "$d/$1.sh") > "$d/$1.log" 2>&1 || { cat "$d/$1.log"; fail "recipe $1 failed as written"; }
}

# 1. install-lib
recipe install-lib PREFIX "$d/prefix"
run install-lib "$root"
for f in bin/cis2 lib/libcis2.so lib/libcis2.so.0 lib/libcis2.a include/cis2.h include/cis2_toolkit.h \
         lib/pkgconfig/cis2.pc; do
    [ -e "$d/prefix/$f" ] || fail "install-lib did not install PREFIX/$f"
done
"$d/prefix/bin/cis2" selftest > "$d/selftest.log" 2>&1 || { cat "$d/selftest.log"; fail "the installed cis2 selftest"; }

# 2. embed-build, in a directory holding the README's embed.c
mkdir "$d/embed"
awk '/<!-- example: embed.c -->/ { on = 1; next } on && /^```c/ { code = 1; next } code && /^```/ { exit } code { print }' \
    README.md > "$d/embed/embed.c"
[ -s "$d/embed/embed.c" ] || fail "no embed.c example in the README"
recipe embed-build PREFIX "$d/prefix"
run embed-build "$d/embed"
[ -x "$d/embed/embed" ] || fail "embed-build built no ./embed"
grep -q '^verdict: OK' "$d/embed-build.log" || fail "embed-build's run did not verify its receipt"
ldd "$d/embed/embed" | grep -q "libcis2.so.0 => $d/prefix/lib/libcis2.so.0" ||
    fail "./embed does not find PREFIX's libcis2.so.0 by itself: $(ldd "$d/embed/embed" | grep cis2)"

# 3. install-python
"$PY" -c 'import venv, ensurepip' 2>/dev/null || skip "$PY has no venv/ensurepip (apt-get install python3-venv)"
recipe install-python VENV "$d/venv"
run install-python "$root"
[ -x "$d/venv/bin/python" ] || fail "install-python made no virtual environment"
probe='import cis2; print(cis2.library_version(), cis2.library_path(), cis2.__file__)'
want="$d/venv/lib/libcis2.so.0"
"$d/venv/bin/python" -c "$probe" > "$d/py1" 2>&1 || { cat "$d/py1"; fail "the venv's cis2 does not load"; }
grep -q "^[0-9.]* $want $d/venv/lib/" "$d/py1" || fail "the venv's cis2: $(cat "$d/py1"), not $want"
# a stale libcis2.so.0 (another version) where the loader looks first
mkdir "$d/stale"
printf 'const char *cis2_version(void) { return "0.2.9"; }\nunsigned cis2_abi_version(void) { return 2; }\n' > "$d/stale.c"
${CC:-cc} -shared -fPIC -Wl,-soname,libcis2.so.0 "$d/stale.c" -o "$d/stale/libcis2.so.0" || fail "cc stale.c"
LD_LIBRARY_PATH="$d/stale" "$d/venv/bin/python" -c "$probe" > "$d/py2" 2>&1 || { cat "$d/py2"; fail "a stale copy shadows the venv's library"; }
grep -q "^[0-9.]* $want " "$d/py2" || fail "with a stale copy on LD_LIBRARY_PATH the venv's cis2 loaded: $(cat "$d/py2")"
# and it computes: python3 -m cis2 run prints what the cis2 program prints
"$CIS2" synth --shape tiny --seed 7 --out "$d/m" > /dev/null || fail "synth"
"$CIS2" run --model-dir "$d/m" --gen-toks 4 > "$d/ref" || fail "cis2 run"
grep -q '^CIS2_REF digest=' "$d/ref" || fail "cis2 run printed no CIS2_REF"
"$d/venv/bin/python" -m cis2 run --model-dir "$d/m" --gen-toks 4 > "$d/py3" 2> "$d/py3.err" ||
    { cat "$d/py3" "$d/py3.err"; fail "the venv's python -m cis2 run"; }
cmp "$d/ref" "$d/py3" || fail "the venv's python -m cis2 run differs from cis2 run"
echo "README recipes ok"
