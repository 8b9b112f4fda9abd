#!/bin/sh
# tests/cli/t_hostile_rss.sh - memory (docs/inputs.md "Memory"): a run
# never keeps two copies of the weights.  On a synthetic SmolLM2-135M-shape
# checkpoint, once decoding has started (the first logits are in the
# --dump-logits file) the process must no longer map model.safetensors (the
# mapping is unmapped after packing, model.c), and its resident set, now and
# at its peak (while loading), must be about one copy of the weights, not
# two.  Prints both.
# serial: reads a decoding process's maps and resident set while it runs
# san: skip - measures the resident set, which ASan's shadow memory and
#   quarantine distort
set -eu
. tests/lib.sh
tmpdir T
$CIS2 synth --shape smollm2-135m --seed 1 --out "$T/m" > /dev/null
st_kb=$(( $(stat -c %s "$T/m/model.safetensors") / 1024 ))
vocab=49152
# 200 tokens: long enough (seconds even on AVX-512) that the process is
# still there while /proc is read after the first logits (12 were not)
$CIS2 run --model-dir "$T/m" --prompt-ids 1,2,3 --gen-toks 200 --dump-logits "$T/logits" > "$T/out" 2> "$T/err" &
pid=$!; PIDS=$pid
# wait (at most 300 s) for the first step's logits in the dump: outputs get
# their name only when complete (fileio.h), so until then the dump is an
# unnamed O_TMPFILE file, seen through the process's fds, or the fallback's
# named $T/logits.tmp.XXXXXX
dump_size() {
    for f in /proc/$pid/fd/*; do
        case "$(readlink "$f" 2>/dev/null || :)" in
            "$T/m/"* | "$T/out" | "$T/err") ;;
            "$T/"*) stat -L -c %s "$f" 2>/dev/null || : ;;
        esac
    done
    stat -c %s "$T"/logits* 2>/dev/null || :   # (set -e: a failed stat would end the function)
    echo 0
}
i=0
while [ "$(dump_size | sort -n | tail -n 1)" -lt $((vocab * 4)) ]; do
    kill -0 "$pid" 2>/dev/null || { cat "$T/err"; fail "cis2 run ended before its first logits"; }
    i=$((i + 1)); [ $i -lt 6000 ] || fail "no logits after 300 s"
    sleep 0.05
done
maps=$(cat /proc/$pid/maps 2>/dev/null) || fail "cis2 run ended before its maps could be read (raise --gen-toks)"
status=$(cat /proc/$pid/status 2>/dev/null) || fail "cis2 run ended before its status could be read (raise --gen-toks)"
rss_kb=$(echo "$status" | sed -n 's/^VmRSS:[^0-9]*\([0-9]*\) kB/\1/p')
hwm_kb=$(echo "$status" | sed -n 's/^VmHWM:[^0-9]*\([0-9]*\) kB/\1/p')
echo "$maps" | grep -q 'model\.safetensors' && fail "model.safetensors is still mapped while decoding"
echo "decoding: model.safetensors not mapped; RSS ${rss_kb} kB, peak so far ${hwm_kb} kB, weights file ${st_kb} kB"
# one packed copy (bf16 stays bf16: the file's size) plus KV cache, activations,
# tokenizer and, under ASan, its shadow/quarantine: well under two copies
[ "$rss_kb" -lt $((st_kb * 3 / 2)) ] || fail "RSS ${rss_kb} kB while decoding is 1.5x the ${st_kb} kB weights or more"
# and the peak too: the load drops each tensor's file pages once packed
# (model.c drop_pages), so the mapping and the packed copy never coexist
[ "$hwm_kb" -lt $((st_kb * 3 / 2)) ] || fail "peak RSS ${hwm_kb} kB is 1.5x the ${st_kb} kB weights or more (two copies while loading?)"
wait "$pid" || { cat "$T/err"; fail "cis2 run failed"; }
PIDS=""
grep -q '^CIS2_REF ' "$T/out" || fail "no CIS2_REF line"
echo "ok"
