#!/bin/sh
# tests/server/t_serve_readme.sh - the README's first request to `cis2 serve`
# works as written (it once answered 404 model_not_found, the model being
# named after the directory).  The ```sh block after the
# line `<!-- recipe: first-curl -->` in README.md is run as a newcomer
# would after the README's quick start, with only where it runs rewritten:
# `build/cis2` is $CIS2, `/tmp/` a temporary directory, port 8080 a free
# one.  The quick start's checkpoint (the directory name the README uses)
# is a synthetic one here, and its receipt comes from `cis2 run`, as the
# quick start makes it.  The recipe must exit 0 and print `same` (its own
# check: the served receipt is `cis2 run`'s, byte for byte), and it must
# stop the server it started.
set -u
. tests/lib.sh
PY=/usr/bin/python3
[ -z "${RUNNER:-}" ] || skip "cross build (the server is tested on the host build)"
command -v curl > /dev/null || skip "curl is not installed (tools/install-deps)"
command -v setsid > /dev/null || skip "setsid is not installed (util-linux)"
tmpdir d
README=${README:-README.md}   # another file only to try a recipe before it goes in

# the block after the marker, up to its closing fence
awk 'f == 2 && /^```/ { exit } f == 2 { print } f == 1 && /^```sh$/ { f = 2 } /^<!-- recipe: first-curl -->$/ { f = 1 }' \
    "$README" > "$d/recipe.txt"
[ -s "$d/recipe.txt" ] || fail "$README has no \`\`\`sh block after a line '<!-- recipe: first-curl -->'"
grep -q 'cis2 serve' "$d/recipe.txt" && grep -q 'curl' "$d/recipe.txt" ||
    fail "the first-curl recipe does not start a server and curl it: $(cat "$d/recipe.txt")"
dirs=$(grep -o -- '--model-dir /tmp/[A-Za-z0-9._-]*' "$d/recipe.txt" | sed 's|.*/tmp/||' | sort -u)
[ "$(echo "$dirs" | wc -w)" = 1 ] || fail "the recipe's --model-dir is not one /tmp/DIR: $(cat "$d/recipe.txt")"

# the quick start's checkpoint and receipt, under the names the README uses
"$CIS2" synth --shape tiny --seed 1 --out "$d/$dirs" > /dev/null || fail "synth"
"$CIS2" run --model-dir "$d/$dirs" --prompt "Once upon a time" --gen-toks 16 --receipt "$d/$dirs.receipt" > /dev/null ||
    fail "cis2 run"
port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# rewrite where it runs, nothing else
sed -e "s|build/cis2|$CIS2|g" -e "s|/tmp/|$d/|g" -e "s|8080|$port|g" "$d/recipe.txt" > "$d/recipe.sh"
echo "--- the recipe as run:"; cat "$d/recipe.sh"; echo "---"

# its own process group, so whatever it leaves running goes when the test ends
setsid sh "$d/recipe.sh" > "$d/recipe.out" 2> "$d/recipe.err" &
rpid=$!
at_exit "kill -9 -- -$rpid 2> /dev/null"
i=0
while kill -0 $rpid 2> /dev/null; do
    i=$((i + 1)); [ $i -lt 600 ] || fail "the recipe did not end within 60 s: $(cat "$d/recipe.out" "$d/recipe.err")"; sleep 0.1
done
wait $rpid; rc=$?
[ $rc -eq 0 ] || fail "the recipe exited $rc: $(cat "$d/recipe.out" "$d/recipe.err")"
grep -qx same "$d/recipe.out" || fail "the recipe did not print 'same': $(cat "$d/recipe.out" "$d/recipe.err")"
# the server it started stopped (SIGTERM: drain, "stopped")
i=0
until grep -q 'cis2 serve: stopped' "$d/recipe.err"; do
    i=$((i + 1)); [ $i -lt 100 ] || fail "the recipe's server did not stop: $(cat "$d/recipe.err")"; sleep 0.1
done
echo "the README's first request works as written"
