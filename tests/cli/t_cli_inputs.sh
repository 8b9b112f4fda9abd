#!/bin/sh
# tests/cli/t_cli_inputs.sh - `cis2 run` inputs and outputs (docs/inputs.md
# "Prompts", "Outputs"):
#  - every output (--receipt, --dump-logits, --trace) is checked before the
#    model loads and anything decodes: a missing directory, and a directory
#    where creating a file fails although access() says it is writable
#    (root on sysfs), are exit 3 with one stderr line and no result printed
#    (--progress would print decoding lines); the check leaves nothing
#    behind and an old receipt intact when the run fails later;
#  - --prompt-file takes a pipe (/dev/stdin), `-` (stdin), a FIFO and a
#    character device, read whole and parsed as a file is (the same
#    results), within the same 256 MiB limit (exit 4 beyond), its errors
#    naming what was given.
set -u
. tests/lib.sh
tmpdir d
# expect CODE NEEDLE CMD...: exit CODE within 60 s, one stderr line containing NEEDLE (stdin: $IN, default /dev/null)
expect() {
    code=$1; needle=$2; shift 2
    timeout 60 "$@" < "${IN:-/dev/null}" > "$d/out" 2> "$d/err"; rc=$?
    [ $rc -eq "$code" ] || fail "$* exited $rc, want $code: $(cat "$d/err")"
    [ -z "$needle" ] || grep -qF -- "$needle" "$d/err" || fail "$*: stderr lacks '$needle': $(cat "$d/err")"
    [ "$(wc -l < "$d/err")" -le 1 ] || fail "$*: stderr is more than one line: $(cat "$d/err")"
}

"$CIS2" synth --shape tiny --seed 7 --out "$d/m" > /dev/null || fail synth
m=$d/m
RUN="$CIS2 run --model-dir $m --prompt ab --gen-toks 8 --progress"

echo "== outputs are checked before anything decodes"
for opt in --receipt --dump-logits --trace; do
    expect 3 "nodir/x: its directory" $RUN $opt "$d/nodir/x"
    [ ! -s "$d/out" ] || fail "$opt nodir/x printed results: $(head -n 3 "$d/out")"
done
# a directory access() calls writable where no file can be created: sysfs, as root
if [ -d /sys/kernel ] && [ -w /sys/kernel ] && ! touch /sys/kernel/cis2-probe 2> /dev/null; then
    for opt in --receipt --dump-logits --trace; do
        expect 3 "/sys/kernel/cis2-r: cannot create a file in its directory" $RUN $opt /sys/kernel/cis2-r
        [ ! -s "$d/out" ] || fail "$opt /sys/kernel/cis2-r decoded first: $(head -n 3 "$d/out")"
    done
    printf 'a\nb\n' > "$d/two.txt"
    IN=$d/two.txt expect 3 "/sys/kernel/cis2-r.0: cannot create" "$CIS2" run --model-dir "$m" --prompt-file /dev/stdin \
        --gen-toks 2 --receipt /sys/kernel/cis2-r
else
    echo "note: no directory here that access() calls writable and refuses a new file (run as root for /sys)"
fi
# the check leaves nothing behind; an old receipt stays as it was when the run then fails (context overflow)
mkdir "$d/o"
echo old > "$d/o/r"
expect 5 "exceeds max_position_embeddings" "$CIS2" run --model-dir "$m" --prompt ab --gen-toks 300 --receipt "$d/o/r" --dump-logits "$d/o/l" --trace "$d/o/t"
[ "$(cat "$d/o/r")" = old ] || fail "the old receipt changed: $(head -c 100 "$d/o/r")"
[ "$(ls "$d/o")" = r ] || fail "files left beside the receipt: $(ls "$d/o")"
$RUN --receipt "$d/o/r" > /dev/null 2>&1 || fail "run --receipt"
[ "$(ls "$d/o")" = r ] && head -n 1 "$d/o/r" | grep -q '^CIS-2-RECEIPT' || fail "after a run: $(ls "$d/o")"
echo "ok: outputs"

echo "== --prompt-file: a pipe, -, a FIFO, a character device"
printf 'Once upon\n["x"]\n' > "$d/p.txt"
printf '["a", "b\\nc"]' > "$d/p.json"
for f in p.txt p.json; do
    "$CIS2" run --model-dir "$m" --prompt-file "$d/$f" --gen-toks 3 > "$d/$f.ref" || fail "run --prompt-file $f"
    "$CIS2" run --model-dir "$m" --prompt-file /dev/stdin --gen-toks 3 < "$d/$f" > "$d/$f.file" || fail "/dev/stdin a file"
    cmp -s "$d/$f.ref" "$d/$f.file" || fail "$f through /dev/stdin (a file) differs"
    cat "$d/$f" | "$CIS2" run --model-dir "$m" --prompt-file /dev/stdin --gen-toks 3 > "$d/$f.pipe" || fail "/dev/stdin a pipe ($f)"
    cmp -s "$d/$f.ref" "$d/$f.pipe" || fail "$f through a pipe differs"
    cat "$d/$f" | "$CIS2" run --model-dir "$m" --prompt-file - --gen-toks 3 > "$d/$f.dash" || fail "--prompt-file - ($f)"
    cmp -s "$d/$f.ref" "$d/$f.dash" || fail "$f through - differs"
    mkfifo "$d/fifo"
    (cat "$d/$f" > "$d/fifo") &
    PIDS="$PIDS $!"
    timeout 60 "$CIS2" run --model-dir "$m" --prompt-file "$d/fifo" --gen-toks 3 > "$d/$f.fifo" || fail "a FIFO ($f)"
    cmp -s "$d/$f.ref" "$d/$f.fifo" || fail "$f through a FIFO differs"
    rm "$d/fifo"
done
grep -q 'prompt_idx=1' "$d/p.txt.pipe" || fail "two prompts from a pipe: $(cat "$d/p.txt.pipe")"
printf 'a\n\nb\n' > "$d/empty-line.txt"
IN=$d/empty-line.txt expect 4 "stdin: line 2: empty prompt" "$CIS2" run --model-dir "$m" --prompt-file - --gen-toks 1
printf 'a\n\nb\n' | IN=/dev/stdin expect 4 "/dev/stdin: line 2: empty prompt" "$CIS2" run --model-dir "$m" --prompt-file /dev/stdin --gen-toks 1
IN=/dev/null expect 4 "stdin: no prompts" "$CIS2" run --model-dir "$m" --prompt-file - --gen-toks 1
expect 4 "/dev/null: no prompts" "$CIS2" run --model-dir "$m" --prompt-file /dev/null --gen-toks 1
expect 4 "/dev/zero: larger than 268435456 bytes, the limit for a prompt file" \
    "$CIS2" run --model-dir "$m" --prompt-file /dev/zero --gen-toks 1
expect 3 "not a regular file (a directory)" "$CIS2" run --model-dir "$m" --prompt-file "$d" --gen-toks 1
expect 3 "nope.txt: cannot open" "$CIS2" run --model-dir "$m" --prompt-file "$d/nope.txt" --gen-toks 1
echo "ok: prompt files"
echo "cli inputs ok"
