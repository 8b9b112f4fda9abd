#!/bin/sh
# tests/cli/t_outputs.sh - outputs are written whole or not at all
# (docs/inputs.md "Outputs"), through the `cis2` command line:
#   - on a full filesystem (a 1 MiB tmpfs, when running as root; skipped
#     otherwise): `run --receipt`, `run --trace --trace-dump` and `synth`
#     exit 3 and leave the existing files byte for byte as they were, and
#     no temporary file behind (the receipt used to be truncated first);
#   - the same with no /proc (a private mount namespace, when unshare
#     works): the O_TMPFILE file cannot be named through /proc/self/fd, so
#     the named NAME.tmp.XXXXXX of the fallback is written instead;
#   - two `cis2 synth` into one directory at the same time, with different
#     seeds and tokenizers (two rounds): each exits 0 or fails cleanly,
#     and the directory then holds one complete, consistent set (weights,
#     tokenizer and config of the same synth), and no temporary file (the
#     fixed NAME.tmp made each report success with the other's file).
set -eu
. tests/lib.sh
tmpdir T
M=""
at_exit '[ -z "$M" ] || umount "$M" 2>/dev/null'
TOK=$SHARED/models/smollm2-135m/tokenizer.json
temps() { find "$1" -name '*.tmp.*' | wc -l; }

$CIS2 synth --shape tiny --seed 1 --out "$T/tiny" > /dev/null

# NOPROC: a command prefix that runs without /proc (cis2's outputs then take
# the named-temporary fallback), or empty where unshare cannot
printf '#!/bin/sh\numount -l /proc && exec "$@"\n' > "$T/noproc"; chmod +x "$T/noproc"
NOPROC="unshare -m $T/noproc"
# (a sanitizer build or an emulator needs /proc itself: the probe fails there)
if $NOPROC sh -c '! [ -e /proc/self ]' 2> /dev/null && $NOPROC $CIS2 version > /dev/null 2>&1; then
    $NOPROC $CIS2 synth --shape tiny --seed 1 --out "$T/tiny-np" > /dev/null
    for f in model.safetensors config.json tokenizer.json; do cmp -s "$T/tiny/$f" "$T/tiny-np/$f" || fail "no /proc: $f differs"; done
    [ "$(temps "$T/tiny-np")" -eq 0 ] || fail "no /proc: temporary files left"
    echo "ok: without /proc (the named-temporary fallback) synth writes the same files, no temporaries"
else
    NOPROC=""; echo "note: no unshare -m, or this cis2 cannot run without /proc: the fallback is not run"
fi

# ---- a full filesystem ----
if [ "$(id -u)" -eq 0 ] && mkdir "$T/full" && mount -t tmpfs -o size=1m tmpfs "$T/full" 2>/dev/null; then
    M=$T/full
    $CIS2 run --model-dir "$T/tiny" --prompt-ids 1,2 --gen-toks 2 --receipt "$M/r" \
        --trace "$M/tr" --trace-dump > /dev/null
    $CIS2 synth --shape tiny --seed 7 --out "$M/s" > /dev/null 2>&1 || true   # fills the disk, or fits: either way
    rm -rf "$M/s"
    mkdir "$M/s"; cp "$T/tiny/config.json" "$M/s/"; echo old > "$M/s/model.safetensors"
    for f in r tr tr.f32 s/config.json s/model.safetensors; do cp "$M/$f" "$T/before.$(echo $f | tr / _)"; done
    dd if=/dev/zero of="$M/filler" bs=4k 2>/dev/null || true               # now it is full
    run_full() { # NAME CODE cmd...
        name=$1; shift
        set +e; "$@" > "$T/out" 2> "$T/err"; rc=$?; set -e
        [ $rc -eq 3 ] || { cat "$T/err"; fail "$name on a full disk: exit $rc, want 3"; }
        grep -q "No space left on device" "$T/err" || fail "$name: message: $(cat "$T/err")"
        echo "ok: $name on a full disk: exit 3: $(cut -c1-140 "$T/err")"
    }
    for np in "" ${NOPROC:+"$NOPROC"}; do
        w=${np:+" (no /proc)"}
        run_full "run --receipt$w" $np $CIS2 run --model-dir "$T/tiny" --prompt-ids 3,4 --gen-toks 8 --receipt "$M/r"
        run_full "run --trace$w" $np $CIS2 run --model-dir "$T/tiny" --prompt-ids 3,4 --gen-toks 8 --trace "$M/tr" --trace-dump
        run_full "synth$w" $np $CIS2 synth --shape tiny --seed 9 --out "$M/s"
    done
    for f in r tr tr.f32 s/config.json s/model.safetensors; do
        cmp -s "$M/$f" "$T/before.$(echo $f | tr / _)" || fail "$f changed after a failed write"
    done
    [ ! -e "$M/s/tokenizer.json" ] || fail "a failed synth left a new tokenizer.json"
    [ "$(temps "$M")" -eq 0 ] || fail "temporary files left: $(find "$M" -name '*.tmp.*')"
    echo "ok: the old receipt, trace, dump and checkpoint files are intact, no temporary files"
    umount "$M"; M=""
else
    echo "note: not root or no tmpfs: the full-disk cases are skipped"
fi

# ---- concurrent synths into one directory ----
[ -f "$TOK" ] || TOK=""
$CIS2 synth --shape smollm2-135m --seed 1 --out "$T/ref1" ${TOK:+--tokenizer "$TOK"} > /dev/null
$CIS2 synth --shape smollm2-135m --seed 2 --out "$T/ref2" > /dev/null
w1=$(sha256sum < "$T/ref1/model.safetensors"); w2=$(sha256sum < "$T/ref2/model.safetensors")
t1=$(sha256sum < "$T/ref1/tokenizer.json"); t2=$(sha256sum < "$T/ref2/tokenizer.json")
# (without ../shared both get the minimal tokenizer: then only the weights differ)
[ "$w1" != "$w2" ] && { [ -z "$TOK" ] || [ "$t1" != "$t2" ]; } || fail "the two reference synths do not differ"
for round in 1 2; do
    rm -rf "$T/c"
    timeout 300 $CIS2 synth --shape smollm2-135m --seed 1 --out "$T/c" ${TOK:+--tokenizer "$TOK"} > "$T/o1" 2> "$T/e1" &
    p1=$!
    timeout 300 $CIS2 synth --shape smollm2-135m --seed 2 --out "$T/c" > "$T/o2" 2> "$T/e2" &
    p2=$!
    set +e; wait $p1; r1=$?; wait $p2; r2=$?; set -e
    for r in $r1 $r2; do [ "$r" -eq 0 ] || [ "$r" -eq 3 ] || fail "round $round: a synth exited $r"; done
    [ $r1 -eq 0 ] || [ $r2 -eq 0 ] || fail "round $round: both synths failed: $(cat "$T/e1" "$T/e2")"
    w=$(sha256sum < "$T/c/model.safetensors"); t=$(sha256sum < "$T/c/tokenizer.json")
    if [ "$w" = "$w1" ]; then [ "$t" = "$t1" ] || fail "round $round: seed 1's weights with seed 2's tokenizer"
    elif [ "$w" = "$w2" ]; then [ "$t" = "$t2" ] || fail "round $round: seed 2's weights with seed 1's tokenizer"
    else fail "round $round: model.safetensors is neither synth's"; fi
    [ "$(temps "$T/c")" -eq 0 ] || fail "round $round: temporary files left"
    timeout 120 $CIS2 run --model-dir "$T/c" --prompt-ids 1,2 --gen-toks 1 > /dev/null || fail "round $round: the set does not run"
    echo "ok: round $round: exits $r1 and $r2, one consistent set"
done
echo "t_outputs: ok"
