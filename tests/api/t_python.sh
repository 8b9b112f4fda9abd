#!/bin/sh
# tests/api/t_python.sh - the Python package (python/, docs/python.md) with Debian's
# /usr/bin/python3 (the python3 first on PATH may be another interpreter,
# without Debian's numpy and pytest):
#   1. its pytest suite (python/tests) against the build tree's libcis2.so
#      through $CIS2_LIBRARY, comparing with the cis2 program byte for byte;
#   2. packaging, offline: `pip install --no-build-isolation --no-index` of a
#      copy of python/ into a --target directory and into the prefix of a
#      `make install`, then imported from there with $CIS2_LIBRARY unset:
#      the library found through LD_LIBRARY_PATH and through the package's
#      own prefix, the prefix's library preferred to a stale libcis2.so.0
#      the loader would find first (docs/python.md "Finding the library"), and a clear error when
#      it is nowhere or of another version.
# Skips (77) in a cross build (RUNNER set: the host interpreter cannot load
# a target library) and when /usr/bin/python3 lacks pytest or numpy.
set -u
. tests/lib.sh
PY=/usr/bin/python3
[ -z "${RUNNER:-}" ] || skip "cross build (the Python package is checked on the host build)"
[ -x "$PY" ] || skip "no $PY"
for m in pytest numpy; do
    "$PY" -c "import $m" 2>/dev/null ||
        skip "$PY has no $m (apt-get install python3-$m, or sh tools/install-deps)"
done
[ -f "$BUILD/libcis2.so" ] || fail "$BUILD/libcis2.so not built"
tmpdir d
export PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PIP_NO_INPUT=1

# under `make check SAN=1` libcis2.so needs the ASan runtime loaded first;
# Python itself is not built with it, so its leaks are not ours to report
if [ "${SAN:-}" = 1 ]; then
    LD_PRELOAD="$(${CC:-cc} -print-file-name=libasan.so) $(${CC:-cc} -print-file-name=libubsan.so)"
    ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}
    export LD_PRELOAD ASAN_OPTIONS
fi

# 1. the test suite, on the build tree
CIS2_LIBRARY="$(pwd)/$BUILD/libcis2.so" CIS2="$CIS2" BUILD="$BUILD" \
    "$PY" -m pytest -q -p no:cacheprovider -rs python/tests || fail "pytest python/tests"

# 2. packaging: pip builds in the source directory, so it gets a copy
cp -r python "$d/src"
rm -rf "$d/src/tests"
"$PY" -m pip install -q --no-build-isolation --no-index --no-deps --target "$d/site" "$d/src" > "$d/pip.log" 2>&1 ||
    { cat "$d/pip.log"; fail "pip install --target"; }
[ -f "$d/site/cis2/__init__.py" ] && [ -f "$d/site/cis2/_lib.py" ] || fail "pip installed no cis2 package"
ls "$d"/site/cis2-*.dist-info/METADATA > /dev/null 2>&1 || fail "pip installed no metadata"
make -s install PREFIX="$d/prefix" BUILD="$BUILD" SAN="${SAN:-}" CC="${CC:-cc}" OPT="${OPT:--O2}" > "$d/install.log" 2>&1 ||
    { cat "$d/install.log"; fail "make install"; }
"$PY" -m pip install -q --no-build-isolation --no-index --no-deps --prefix "$d/prefix" "$d/src" > "$d/pip2.log" 2>&1 ||
    { cat "$d/pip2.log"; fail "pip install --prefix"; }
psite=$(dirname "$(find "$d/prefix" -path '*/cis2/__init__.py' | head -n 1)")
[ -n "$psite" ] && [ "$psite" != . ] || fail "pip install --prefix installed no cis2 package"
psite=$(dirname "$psite")

"$CIS2" synth --shape tiny --seed 7 --out "$d/m" > /dev/null || fail "synth"
ref=$("$CIS2" run --model-dir "$d/m" --gen-toks 4 --receipt "$d/r" | sed -n 's/^CIS2_REF digest=\([0-9a-f]*\).*/\1/p')
probe='import sys, cis2
e = cis2.Engine(sys.argv[1])
r = e.generate("Once upon a time", gen_toks=4, logits=True)
assert r.receipt == open(sys.argv[2]).read(), "receipt differs"
print(cis2.__file__)
print(cis2.library_path())
print(r.witness)'
# from the --target directory, the library through LD_LIBRARY_PATH (no $CIS2_LIBRARY)
(cd "$d" && env -u CIS2_LIBRARY LD_LIBRARY_PATH="$d/prefix/lib" PYTHONPATH="$d/site" "$PY" -c "$probe" "$d/m" "$d/r") \
    > "$d/out1" 2>&1 || { cat "$d/out1"; fail "the --target install does not run"; }
sed -n 1p "$d/out1" | grep -q "^$d/site/cis2/__init__.py\$" || fail "imported $(sed -n 1p "$d/out1"), not the installed package"
sed -n 3p "$d/out1" | grep -qx "$ref" || fail "the installed package's witness differs from cis2 run's"
# from the prefix, the library found beside the package (no LD_LIBRARY_PATH, no ldconfig)
(cd "$d" && env -u CIS2_LIBRARY -u LD_LIBRARY_PATH PYTHONPATH="$psite" "$PY" -c "$probe" "$d/m" "$d/r") \
    > "$d/out2" 2>&1 || { cat "$d/out2"; fail "the --prefix install does not find $d/prefix/lib/libcis2.so.0"; }
sed -n 2p "$d/out2" | grep -qx "$d/prefix/lib/libcis2.so.0" || fail "loaded $(sed -n 2p "$d/out2"), not the prefix's library"
# a stale libcis2.so.0 where the dynamic loader looks first (docs/python.md
# "Finding the library": an older `make install` in the ld.so cache; LD_LIBRARY_PATH stands in for
# it, the system cache is left alone): one of another version, and one that
# claims this version but is not the library make install put beside the
# package.  The package's own prefix must win over both.
mkdir "$d/stale" "$d/stale2"
ver=$(sed -n 's/^#define CIS2_VERSION "\(.*\)"/\1/p' include/cis2.h)
abi=$(sed -n 's/^#define CIS2_ABI_VERSION \([0-9]*\)u*$/\1/p' include/cis2.h)
[ -n "$ver" ] && [ -n "$abi" ] || fail "no CIS2_VERSION / CIS2_ABI_VERSION in include/cis2.h"
printf 'const char *cis2_version(void) { return "0.2.9"; }\nunsigned cis2_abi_version(void) { return 2; }\n' > "$d/stale.c"
printf 'const char *cis2_version(void) { return "%s"; }\nunsigned cis2_abi_version(void) { return %s; }\n' "$ver" "$abi" > "$d/stale2.c"
for s in stale stale2; do
    ${CC:-cc} -shared -fPIC -Wl,-soname,libcis2.so.0 "$d/$s.c" -o "$d/$s/libcis2.so.0" || fail "cc $s.c"
done
for s in stale stale2; do
    (cd "$d" && env -u CIS2_LIBRARY LD_LIBRARY_PATH="$d/$s" PYTHONPATH="$psite" "$PY" -c "$probe" "$d/m" "$d/r") \
        > "$d/out_$s" 2>&1 || { cat "$d/out_$s"; fail "a $s libcis2.so.0 on LD_LIBRARY_PATH shadows the prefix's library"; }
    sed -n 2p "$d/out_$s" | grep -qx "$d/prefix/lib/libcis2.so.0" ||
        fail "with a $s copy on LD_LIBRARY_PATH: loaded $(sed -n 2p "$d/out_$s"), not the prefix's library"
done
# no library beside the package, only the stale one: refused, naming its path
# and version and where the package looked
(cd "$d" && env -u CIS2_LIBRARY LD_LIBRARY_PATH="$d/stale" PYTHONPATH="$d/site" "$PY" -c 'import cis2; cis2.Engine(".")') \
    > "$d/out_stale3" 2>&1 && fail "a stale library alone was not refused"
grep -q "LibraryNotFound: " "$d/out_stale3" && grep -q "$d/stale/libcis2.so.0.* 0\.2\.9 (ABI 2)" "$d/out_stale3" ||
    { cat "$d/out_stale3"; fail "unclear error for a stale library"; }
# python3 -m cis2 from the installed package
(cd "$d" && env -u CIS2_LIBRARY PYTHONPATH="$psite" "$PY" -m cis2 verify "$d/r" --model-dir "$d/m") > "$d/out3" 2>&1 ||
    { cat "$d/out3"; fail "python3 -m cis2 verify"; }
grep -q '^verdict: OK' "$d/out3" || fail "python3 -m cis2 verify: $(tail -n 1 "$d/out3")"
# nowhere to be found: one clear error naming what was tried
(cd "$d" && CIS2_LIBRARY="$d/nowhere/libcis2.so" PYTHONPATH="$d/site" "$PY" -c 'import cis2; cis2.Engine(".")') \
    > "$d/out4" 2>&1 && fail "a missing library was not reported"
grep -q "LibraryNotFound: cis2: cannot load libcis2.so; set CIS2_LIBRARY" "$d/out4" &&
    grep -q "CIS2_LIBRARY=$d/nowhere/libcis2.so" "$d/out4" || { cat "$d/out4"; fail "unclear error for a missing library"; }
echo "python package ok"
