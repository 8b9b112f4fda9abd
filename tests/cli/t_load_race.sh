#!/bin/sh
# tests/cli/t_load_race.sh - inputs read exactly once (docs/inputs.md
# "Every input file"): through the `cis2 run` command line,
#   - each of the three model files as a FIFO (no writer) or as a symlink
#     to /dev/zero: exit 3 within seconds, naming what the path is;
#   - model.safetensors truncated while the load runs (a writer process,
#     several delays): never a signal (the old mmap gave SIGBUS), exit 3 or
#     4 when the truncation came during the load, 0 only when it came after;
#   - model.safetensors rewritten in place with another checkpoint of the
#     same size while the load runs: exit 0 only with a consistent run of
#     one version (its weights_sha256 AND its CIS2_REF), else exit 3
#     "changed while being read" (the old code hashed one read and packed
#     another: the first file's hash with mixed weights).
# At least one trial of each kind must land during the load, or the test
# would prove nothing.  Every run is bounded by `timeout`.
# serial: a file changed at chosen delays while the load runs
set -eu
. tests/lib.sh
tmpdir T
# the run in flight is `timeout`: SIGTERM, which it passes on to cis2 (PIDS' SIGKILL would leave cis2 running)
pids=""
at_exit 'for p in $pids; do kill "$p" 2>/dev/null || true; done'
RUN="run --prompt-ids 1,2,3 --gen-toks 1"

# ---- inputs that are not regular files ----
$CIS2 synth --shape tiny --seed 1 --out "$T/tiny" > /dev/null
for f in model.safetensors config.json tokenizer.json; do
    for kind in fifo zero; do
        rm -rf "$T/m"; cp -r "$T/tiny" "$T/m"; rm "$T/m/$f"
        if [ $kind = fifo ]; then mkfifo "$T/m/$f"; want="not a regular file (a FIFO)"
        else ln -s /dev/zero "$T/m/$f"; want="not a regular file (a character device)"; fi
        set +e; timeout 20 $CIS2 $RUN --model-dir "$T/m" > "$T/out" 2> "$T/err"; rc=$?; set -e
        [ $rc -eq 3 ] || { cat "$T/err"; fail "$f as $kind: exit $rc, want 3 (124 = it hung)"; }
        grep -q "$f: $want" "$T/err" || fail "$f as $kind: message: $(cat "$T/err")"
        echo "ok: $f as $kind: exit 3: $(cat "$T/err")"
    done
done

# ---- a checkpoint big enough for the load to take a while ----
$CIS2 synth --shape smollm2-135m --seed 1 --out "$T/a" > /dev/null
$CIS2 synth --shape smollm2-135m --seed 2 --out "$T/b" > /dev/null
[ "$(stat -c %s "$T/a/model.safetensors")" -eq "$(stat -c %s "$T/b/model.safetensors")" ] || fail "seeds differ in size"
ref() { timeout 120 $CIS2 $RUN --model-dir "$1" | sed -n -e 's/^weights_sha256 = //p' -e 's/^CIS2_REF digest=\([0-9a-f]*\).*/\1/p' | tr '\n' ' '; }
ref_a=$(ref "$T/a"); ref_b=$(ref "$T/b")
echo "version A: $ref_a"
echo "version B: $ref_b"
size=$(stat -c %s "$T/a/model.safetensors")

# trial KIND DELAY: start the run, change the file after DELAY seconds
hits_t=0; hits_w=0
trial() {
    kind=$1; delay=$2
    rm -rf "$T/m"; mkdir "$T/m"
    cp "$T/a/config.json" "$T/a/tokenizer.json" "$T/a/model.safetensors" "$T/m/"
    timeout 120 $CIS2 $RUN --model-dir "$T/m" > "$T/out" 2> "$T/err" &
    pid=$!; pids="$pid"
    sleep "$delay"
    if [ "$kind" = truncate ]; then truncate -s $((size / 2)) "$T/m/model.safetensors"
    else dd if="$T/b/model.safetensors" of="$T/m/model.safetensors" bs=1M conv=notrunc status=none; fi
    set +e; wait "$pid"; rc=$?; set -e
    pids=""
    [ $rc -lt 124 ] || { cat "$T/err"; fail "$kind after ${delay}s: exit $rc (a signal or a hang)"; }
    case $rc in
    0)
        got=$(sed -n -e 's/^weights_sha256 = //p' -e 's/^CIS2_REF digest=\([0-9a-f]*\).*/\1/p' "$T/out" | tr '\n' ' ')
        [ "$got" = "$ref_a" ] || [ "$got" = "$ref_b" ] || fail "$kind after ${delay}s: exit 0 with an inconsistent run: $got"
        echo "ok: $kind after ${delay}s: exit 0, a consistent run of one version" ;;
    3|4)
        [ "$(wc -l < "$T/err")" -eq 1 ] || { cat "$T/err"; fail "$kind: stderr is not one line"; }
        if grep -q "changed while being read" "$T/err"; then
            if [ "$kind" = truncate ]; then hits_t=$((hits_t + 1)); else hits_w=$((hits_w + 1)); fi
        fi
        echo "ok: $kind after ${delay}s: exit $rc: $(cut -c1-150 "$T/err")" ;;
    *) cat "$T/err"; fail "$kind after ${delay}s: exit $rc, want 0, 3 or 4" ;;
    esac
}
for d in 0.05 0.1 0.15 0.2 0.3 0.4; do trial truncate $d; done
for d in 0.05 0.1 0.15 0.2 0.3 0.4; do trial rewrite $d; done
[ $hits_t -gt 0 ] || fail "no truncation landed during a load (raise the delays' range?)"
[ $hits_w -gt 0 ] || fail "no rewrite landed during a load"
echo "t_load_race: $hits_t truncations and $hits_w rewrites during the load, all refused cleanly"
