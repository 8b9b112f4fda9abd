#!/bin/sh
# t_doc_reimpl.sh - docs/arithmetic.md, with docs/models.md §M2 and §M8 for
# qwen3 and qwen3_moe, §M5, §M8 and §M9 for gpt_oss and §M10 for qwen3_5,
# qwen3_5_moe and qwen3_next, is enough to reproduce cis2 bit for bit.
# tests/oracle/doc_reimpl.py is a numpy float32 re-implementation of the
# greedy decode written from those documents alone (each rule cites its
# section there; cis2's C sources were not read).  This test:
#   - checks it against the document's known answers (doc §13: exp, ln,
#     silu, sin/cos, rsqrt, dot_seq, argmax, RMSNorm, softmax, attention,
#     RoPE tables, table_digest, inv_freq_table_digest);
#   - runs `cis2 run --dump-logits --receipt` on synthetic checkpoints
#     (`cis2 synth`: tiny, tiny-qwen with q/k/v biases and an untied head,
#     odd with head_dim 24, GQA 3:1, vocab 300; tests/families/q3.json,
#     qwen3 with head_dim 24 != hidden/heads; tests/families/q3moe.json,
#     qwen3_moe with 8 experts, 3 per token, layer 1 dense, renormalised,
#     the same with norm_topk_prob false, and one whose routers' rows tie
#     in pairs so that every choice meets an exact tie), and compares
#     every logit bit for bit with the re-implementation's, and the
#     receipt's file hashes, table digests, generated ids, argmax digest
#     and witness digest (CIS2_REF, recomputed from the document's byte
#     order, doc §11) with the re-implementation's; the printed CIS2_REF
#     line too;
#   - checks docs/models.md §M8.9's known answer (its CIS2_REF line and
#     generated ids, read from the document) against cis2 and the
#     re-implementation;
#   - for gpt_oss (docs/models.md §M9, with §M5's window and §M8's frame;
#     tests/families/gpto.json: sliding/full/sliding layers with a 5-key
#     window, learned sinks, YaRN factor 4 over 64 positions, 8 experts, 3
#     per token, MXFP4 experts as U8 blocks and scales, BF16 biases and
#     sinks): the same comparison on that checkpoint, on a 70-id prompt
#     (positions up to 77, past original_max_position_embeddings), with
#     truncate true, with gpt-oss-20b's RoPE (head_dim 64, factor 32 over
#     4096), and with every expert holding an MXFP4 weight that overflows
#     to +Inf (scale byte 254, code 6; clamped to +-LIM as up) and a row
#     flushed to zero (scale byte 1, codes +-0.5; doc_reimpl.py
#     edge-scales); scale bytes 0 and 255 refused by both; and §M9.9's
#     known answers read from the document: the YaRN tables' digests (cis2's
#     printed inv_freq_table_digest, the re-implementation's for the real
#     gpt-oss-20b config.json) and attention factors, the CIS2_REF line and
#     generated ids.
# It can fail: changing one rule in doc_reimpl.py makes it fail (checked
# when written; the variants are not kept): RMSNorm as x*(inv*w) (FACTS
# §1.3) or numpy's pairwise sum in place of dot_seq's running sum (§5.1)
# make the logits differ at step 0 on every shape (the tokens stay the
# same); the witness with config.json's hash before tokenizer.json's
# (FACTS §1.11) changes only witness-digest and CIS2_REF.  For qwen3_moe:
# the combination in the order chosen instead of increasing expert index
# (§M8.5), the softmax over the k chosen logits instead of all E, or
# dropping §M2.3's q/k norms fail every qwen3_moe case (and the last the
# qwen3 one) at step 0 and §M8.9; the renormalising sum in reverse order
# (§M8.3) fails q3moe (seed 1 at step 1, seed 3 at step 0), the paired
# one at step 4 and §M8.9; ties given to the higher index (>= for >,
# §M8.3) fail only the paired checkpoint, at step 0, with other tokens
# (no other run meets an exact tie).  For gpt_oss (§M9), each of these
# fails every gpto case at step 0 (and §M9.9's CIS2_REF): the sink's term
# first in the denominator's sum instead of last, or the sink left out of
# the maximum (§M9.3); the gate clamped from below too, gate/up as the two
# halves instead of interleaved, sigmoid(gate) for sigmoid(gate * ALPHA),
# `up` for `up + 1`, the router's bias dropped, the softmax over the k in
# increasing expert index instead of the order chosen, or over all E then
# renormalised (§M9.5); the o_proj bias dropped (§M9.2); MXFP4 nibbles high
# first (§M9.6; also §M9.9's decodings); no attention factor, or YaRN's ramp
# unclamped (§M9.4; the latter also every YaRN digest of §M9.9); every
# layer sliding, or W + 1 keys (§M5.2; the 20b-RoPE case from step 2, the
# edge-scales one from step 1).  The first three and the two softmax ones
# leave every token as it is; the others change tokens too.  truncate
# ignored fails only the truncate case and §M9.9's gpto-truncate row.  Two
# readings no logit here tells apart, and only §M9.9's MXFP4 decodings
# (goldens) reject: no flush of 2^-127 (a DAZ input to the product gives
# the same sums), and an overflowing weight saturated to the largest f32
# instead of Inf (the clamp makes both LIM).
#   - for the §M10 hybrids (tests/families/q35.json, q35moe.json, q3next.json,
#     each on §M10.9-§M10.11's run, whose CIS2_REF, ids, argmax and table
#     digests and file hashes are read from the document; q35 with an mtp.*
#     and a model.visual.* tensor added (the same logits), with dt_bias at
#     +-30 (edge-gates), with r = 1, a 2-tap conv and rd 10 from a factor
#     0.33, and with no layer_types, one key head for three value heads, a
#     6-tap conv, whole-head RoPE and rms_norm_eps 1e-5; q35moe with routers
#     tied in pairs; q3next with 3 key heads and sparse layers by
#     decoder_sparse_step 2, not renormalised) the same comparison; and the
#     real Qwen3.5-0.8B, -35B-A3B and Qwen3-Next configs' partial RoPE
#     digests, read by the re-implementation, against §M10.9's and §M10.11's.
#     Each of these changes to doc_reimpl.py fails at step 0 on every hybrid
#     case it can reach, leaving the tokens (§M10.9's list, checked when
#     written): the conv's taps newest first (not with 2 taps: a sum of two
#     commutes), l2norm as x / sqrt(t), QS folded into l2norm's inv (not with
#     dk 16: QS a power of two), kv from the undecayed S times decay, u =
#     v*beta - kv*beta, the read-out over d decreasing, softplus as
#     ln_pinned(1 + e), sigmoid as e^x / (1 + e^x), the gated norm as
#     o * (inv * w); l2norm's eps as rms_norm_eps fails only the 1e-5
#     case; and these fail too, most with other tokens: 1 + w for the gated
#     norm, silu(z) before the norm, key heads tiled (j mod Hk; not with r = 1
#     or Hk = 1), no 1 + w on q_norm/k_norm, the gates as q_proj's second
#     half, RoPE over the whole head (not the factor-1 case) or on pairs (2i,
#     2i+1), NA = -A_log, no dt_bias, the conv's window starting from the
#     first row instead of zeros.  For the experts: the shared expert's term
#     first, or s applied to hs, fails every q35moe/q3next case at step 0
#     (tokens kept); no renormalisation fails them all but the
#     norm_topk_prob-false one; the gate_up halves swapped fails q35moe; ties
#     to the higher index fails only the paired one; qwen3_next's flat reading
#     of in_proj_qkvz/in_proj_ba, or a before b, fails both q3next cases.
# To try one, point DOC_REIMPL at a modified copy:
#     DOC_REIMPL=/tmp/wrong.py BUILD=build/x sh tests/oracle/t_doc_reimpl.sh
# About 25 s (the gpt_oss cases about 3 s of CPU, the §M10 ones about 8).
# Skips when Debian's python has no numpy.
# san: skip - logits against the document's re-implementation: numbers, not
#   memory
set -u
. tests/lib.sh
PY=/usr/bin/python3
REIMPL=${DOC_REIMPL:-tests/oracle/doc_reimpl.py}
export PYTHONDONTWRITEBYTECODE=1

[ -x "$PY" ] && "$PY" -c 'import numpy' > /dev/null 2>&1 \
    || skip "$PY cannot import numpy (apt-get install python3-numpy)"
[ -x "$CIS2" ] || fail "$CIS2 is not an executable (run make)"

"$PY" "$REIMPL" goldens || fail_later "the re-implementation misses docs/arithmetic.md §13's known answers"

tmpdir tmp

# one_case SHAPE SEED PROMPT_IDS GEN_TOKS [FLAGS]
#   SHAPE is a `cis2 synth --shape` or a config (a FILE.json, for `cis2 synth
#   --config`); FLAGS, comma-separated: pair-routers rewrites the checkpoint
#   so that every router's rows tie in pairs (doc_reimpl.py pair-routers,
#   docs/models.md §M8.3); edge-scales gives every gpt_oss expert MXFP4
#   weights at the scale bytes' edges (doc_reimpl.py edge-scales,
#   docs/models.md §M9.6); edge-gates sets two dt_bias entries of every
#   Gated DeltaNet layer to +-30 (doc_reimpl.py edge-gates: softplus's
#   early returns, a decay of +0, docs/models.md §M10.6); add-unused adds
#   an mtp.* and a model.visual.* tensor (read, hashed, unused: §M10.2).
one_case() {
    shape=$1 seed=$2 ids=$3 n=$4 flags=,${5:-},
    case $shape in
    *.json) name=$(basename "$shape" .json); src="--config $shape" ;;
    *) name=$shape; src="--shape $shape" ;;
    esac
    case $flags in *,pair-routers,*) name=$name.paired ;; esac
    case $flags in *,edge-scales,*|*,edge-gates,*) name=$name.edge ;; esac
    case $flags in *,add-unused,*) name=$name.unused ;; esac
    d=$tmp/$name.$seed
    echo "=== $name (seed $seed, prompt $ids, $n tokens)"
    # $src is two words on purpose
    $CIS2 synth $src --seed "$seed" --out "$d" > /dev/null \
        || { fail_later "cis2 synth $src --seed $seed"; return; }
    case $flags in
    *,pair-routers,*) "$PY" "$REIMPL" pair-routers "$d" \
        || { fail_later "doc_reimpl.py pair-routers $d"; return; } ;;
    *,edge-scales,*) "$PY" "$REIMPL" edge-scales "$d" \
        || { fail_later "doc_reimpl.py edge-scales $d"; return; } ;;
    *,edge-gates,*) "$PY" "$REIMPL" edge-gates "$d" \
        || { fail_later "doc_reimpl.py edge-gates $d"; return; } ;;
    *,add-unused,*) "$PY" "$REIMPL" add-unused "$d" \
        || { fail_later "doc_reimpl.py add-unused $d"; return; } ;;
    esac
    $CIS2 run --model-dir "$d" --prompt-ids "$ids" --gen-toks "$n" \
            --receipt "$d/receipt" --dump-logits "$d/cis2.f32" > "$d/run.out" \
        || { fail_later "cis2 run on $name"; cat "$d/run.out"; return; }
    "$PY" "$REIMPL" run --model-dir "$d" --prompt-ids "$ids" --gen-toks "$n" \
            --logits "$d/doc.f32" > "$d/doc.out" \
        || { fail_later "doc_reimpl.py run on $name"; return; }
    if ! cmp -s "$d/cis2.f32" "$d/doc.f32"; then
        at=$(cmp "$d/cis2.f32" "$d/doc.f32" 2>&1 | sed -n 's/.* byte \([0-9]*\).*/\1/p')
        vocab=$(sed -n 's/.*"vocab_size": *\([0-9]*\).*/\1/p' "$d/config.json")
        if [ -n "$at" ] && [ -n "$vocab" ]; then
            i=$(((at - 1) / 4))
            fail_later "$name: logits differ first at step $((i / vocab)), entry $((i % vocab))"
        else
            fail_later "$name: logits differ: $(cmp "$d/cis2.f32" "$d/doc.f32" 2>&1)"
        fi
    fi
    # every field the re-implementation recomputed, against cis2's receipt
    # (a prompt given as ids that no bytes reproduce has one all the same:
    # docs/receipts.md "Prompts given as ids")
    while read -r key value; do
        got=$(sed -n "s/^$key //p" "$d/receipt")
        [ "$got" = "$value" ] \
            || fail_later "$name: $key: cis2 gives '$got', the documents give '$value'"
    done < "$d/doc.out"
    ref=$(sed -n 's/^witness-digest //p' "$d/doc.out")
    grep -q "^CIS2_REF digest=$ref prompt_idx=0 prompt_toks=" "$d/run.out" \
        || fail_later "$name: cis2 printed $(grep '^CIS2_REF' "$d/run.out"), the documents give $ref"
    cat "$d/doc.out"
}

one_case tiny 1 1,7,3,2 6
one_case tiny 5 9 4
one_case tiny-qwen 2 5,1,9 5
one_case odd 3 2,11,4,6,1 5
# docs/models.md §M2 (qwen3: head_dim 24 != hidden/heads, q/k norms) and §M8
# (qwen3_moe: 8 experts, 3 per token, layer 1 dense), renormalised or not,
# and with routers that tie at every choice (§M8.3's lower index)
F=tests/families
one_case $F/q3.json 2 5,1,9,7,3 6
one_case $F/q3moe.json 1 2,11,4,6,1 6
sed 's/"norm_topk_prob": true/"norm_topk_prob": false/' $F/q3moe.json > "$tmp/q3moe-nonorm.json"
grep -q '"norm_topk_prob": false' "$tmp/q3moe-nonorm.json" \
    || fail_later "$F/q3moe.json: no '\"norm_topk_prob\": true' to turn off"
one_case "$tmp/q3moe-nonorm.json" 2 1,7,3,2,9,11,4 6
one_case $F/q3moe.json 4 13,5,77,6 6 pair-routers

# docs/models.md §M8.9's known answer: cis2's CIS2_REF line and generated
# ids for this run, as the document gives them (the re-implementation's
# witness equals cis2's in one_case; here cis2's line equals the text)
m89=$(sed -n '/^M8\.9\./,/^## /p' docs/models.md)
m89_ref=$(echo "$m89" | grep '^CIS2_REF digest=')
m89_ids=$(echo "$m89" | sed -n 's/^generated_token_ids = //p')
[ -n "$m89_ref" ] && [ -n "$m89_ids" ] \
    || fail_later "docs/models.md §M8.9 gives no CIS2_REF or generated_token_ids line"
one_case $F/q3moe.json 3 1,7,3,2,9,11,4,200,13,5,77,6 12
grep -qxF "$m89_ref" "$tmp/q3moe.3/run.out" \
    || fail_later "§M8.9: cis2 printed $(grep '^CIS2_REF' "$tmp/q3moe.3/run.out"), docs/models.md §M8.9 says $m89_ref"
grep -qxF "generated_token_ids = $m89_ids" "$tmp/q3moe.3/run.out" \
    || fail_later "§M8.9: cis2 generated $(sed -n 's/^generated_token_ids = //p' "$tmp/q3moe.3/run.out"), docs/models.md §M8.9 says $m89_ids"
grep -qx "witness-digest $(echo "$m89_ref" | sed -n 's/^CIS2_REF digest=\([0-9a-f]*\) .*/\1/p')" "$tmp/q3moe.3/doc.out" \
    || fail_later "§M8.9: doc_reimpl.py's witness is not docs/models.md §M8.9's"

# docs/models.md §M9 (gpt_oss): sinks, windows in layers 0 and 2 (5 keys),
# YaRN (factor 4 over 64 positions, truncate false), the biased router's
# softmax over the 3 chosen, clamped interleaved SwiGLU experts in MXFP4
one_case $F/gpto.json 2 5,1,9,7,3,12,40 8
# 70 ids (printable ASCII: they round-trip, so the receipt is written) and
# 8 tokens: positions 0..76, past original_max_position_embeddings (64)
ids70=$(i=0; s=; while [ $i -lt 70 ]; do s=$s${s:+,}$(((i * 37 + 11) % 94 + 33)); i=$((i + 1)); done; echo "$s")
one_case $F/gpto.json 5 "$ids70" 8
sed 's/"truncate": false/"truncate": true/' $F/gpto.json > "$tmp/gpto-trunc.json"
grep -q '"truncate": true' "$tmp/gpto-trunc.json" \
    || fail_later "$F/gpto.json: no '\"truncate\": false' to turn on"
one_case "$tmp/gpto-trunc.json" 4 2,11,4,6,1,9 6
# gpt-oss-20b's RoPE on the small shape: head_dim 64, factor 32 over 4096
"$PY" -c 'import json, sys
c = json.load(open(sys.argv[1]))
c["head_dim"] = 64; c["max_position_embeddings"] = 131072
c["rope_scaling"].update(factor=32.0, original_max_position_embeddings=4096)
json.dump(c, open(sys.argv[2], "w"))' $F/gpto.json "$tmp/gpto-20b-rope.json" \
    || fail_later "could not write gpto-20b-rope.json"
one_case "$tmp/gpto-20b-rope.json" 1 13,5,77,6 5
one_case $F/gpto.json 6 1,7,3,2,9 6 edge-scales
# a scale byte 0 or 255 is refused (§M9.6), by cis2 (exit 4) and here
for sb in 0 255; do
    d=$tmp/gpto.scale$sb
    cp -r "$tmp/gpto.2" "$d"
    "$PY" -c 'import json, struct, sys
p = sys.argv[1] + "/model.safetensors"
raw = bytearray(open(p, "rb").read()); n = struct.unpack("<Q", raw[:8])[0]
v = json.loads(raw[8:8 + n])["model.layers.2.mlp.experts.down_proj_scales"]
raw[8 + n + v["data_offsets"][1] - 1] = int(sys.argv[2]); open(p, "wb").write(bytes(raw))' "$d" $sb
    rc=0; $CIS2 run --model-dir "$d" --prompt-ids 1,2 --gen-toks 1 > /dev/null 2>&1 || rc=$?
    [ $rc -eq 4 ] || fail_later "cis2 run with an MXFP4 scale byte $sb: exit $rc, not 4 (§M9.6)"
    "$PY" "$REIMPL" run --model-dir "$d" --prompt-ids 1,2 --gen-toks 1 --logits /dev/null \
            > /dev/null 2>&1 && fail_later "doc_reimpl.py accepts an MXFP4 scale byte $sb"
done

# docs/models.md §M9.9's known answers, read from the document: the YaRN
# tables' digests and attention factors (cis2 prints the digest; the
# re-implementation's are its goldens, and here of the real config.json),
# then the CIS2_REF line and generated ids of one run
m99=$(sed -n '/^M9\.9\./,/^## /p' docs/models.md)
m99_ref=$(echo "$m99" | grep '^CIS2_REF digest=')
m99_ids=$(echo "$m99" | sed -n 's/^generated_token_ids = //p')
[ -n "$m99_ref" ] && [ -n "$m99_ids" ] \
    || fail_later "docs/models.md §M9.9 gives no CIS2_REF or generated_token_ids line"
# yarn_row NAME RUN-DIR [CONFIG]: §M9.9's row NAME (digest, MS) against
# cis2's inv_freq_table_digest in RUN-DIR/run.out and, for CONFIG,
# doc_reimpl.py rope
yarn_row() {
    row=$(echo "$m99" | sed -n "s/^$1  *\([0-9a-f]\{64\}\)  *\(0x[0-9A-F]\{8\}\)\$/\1 \2/p")
    [ -n "$row" ] || { fail_later "docs/models.md §M9.9 has no YaRN row for $1"; return; }
    dig=${row% *} ms=${row#* }
    grep -qx "inv_freq_table_digest = $dig" "$2/run.out" \
        || fail_later "§M9.9 $1: cis2 printed $(grep '^inv_freq_table_digest' "$2/run.out"), the document says $dig"
    if [ -n "${3:-}" ]; then
        got=$("$PY" "$REIMPL" rope "$3" | tr '\n' ' ')
        [ "$got" = "inv-freq-table-digest $dig attention-factor $ms " ] \
            || fail_later "§M9.9 $1: doc_reimpl.py rope $3 gives '$got', the document says $dig $ms"
    fi
}
yarn_row gpto "$tmp/gpto.2" $F/gpto.json
yarn_row gpto-truncate "$tmp/gpto-trunc.4" "$tmp/gpto-trunc.json"
gpt20=$SHARED/models/families/gpt-oss-20b.json
[ -f "$gpt20" ] || gpt20=
yarn_row gpt-oss-20b "$tmp/gpto-20b-rope.1" $gpt20
one_case $F/gpto.json 3 1,7,3,2,9,11,4,200,13,5,77,6 12
grep -qxF "$m99_ref" "$tmp/gpto.3/run.out" \
    || fail_later "§M9.9: cis2 printed $(grep '^CIS2_REF' "$tmp/gpto.3/run.out"), docs/models.md §M9.9 says $m99_ref"
grep -qxF "generated_token_ids = $m99_ids" "$tmp/gpto.3/run.out" \
    || fail_later "§M9.9: cis2 generated $(sed -n 's/^generated_token_ids = //p' "$tmp/gpto.3/run.out"), docs/models.md §M9.9 says $m99_ids"
grep -qx "witness-digest $(echo "$m99_ref" | sed -n 's/^CIS2_REF digest=\([0-9a-f]*\) .*/\1/p')" "$tmp/gpto.3/doc.out" \
    || fail_later "§M9.9: doc_reimpl.py's witness is not docs/models.md §M9.9's"

# docs/models.md §M10 (qwen3_5, qwen3_5_moe, qwen3_next): Gated DeltaNet
# layers with their recurrent state, gated partial-RoPE attention, 1 + w
# norms; the mixtures of experts with the shared expert; the fused
# projections.  known_run SECTION NEXT CASE-DIR: the section's known
# answers, read from the document (its CIS2_REF, generated ids,
# argmax_digest and inv_freq_table_digest lines against cis2's run, the
# witness against the re-implementation's, the two file hashes' prefixes
# against the re-implementation's)
known_run() {
    sec=$(sed -n "/^$1\. /,/^$2/p" docs/models.md)
    ref=$(echo "$sec" | grep '^CIS2_REF digest=')
    [ -n "$ref" ] || { fail_later "docs/models.md §$1 gives no CIS2_REF line"; return; }
    for key in inv_freq_table_digest generated_token_ids argmax_digest; do
        line=$(echo "$sec" | grep "^$key = ")
        [ -n "$line" ] || { fail_later "docs/models.md §$1 gives no $key line"; continue; }
        grep -qxF "$line" "$3/run.out" \
            || fail_later "§$1: cis2 printed $(grep "^$key = " "$3/run.out"), the document says $line"
    done
    grep -qxF "$ref" "$3/run.out" \
        || fail_later "§$1: cis2 printed $(grep '^CIS2_REF' "$3/run.out"), the document says $ref"
    grep -qx "witness-digest $(echo "$ref" | sed -n 's/^CIS2_REF digest=\([0-9a-f]*\) .*/\1/p')" "$3/doc.out" \
        || fail_later "§$1: doc_reimpl.py's witness is not the document's"
    hashes=$(echo "$sec" | grep -o '[0-9a-f]\{16\}\.\.\.' | tr -d . | head -2 | tr '\n' ' ')
    got=$(for key in weights-sha256 config-sha256; do
        sed -n "s/^$key \([0-9a-f]\{16\}\).*/\1/p" "$3/doc.out"; done | tr '\n' ' ')
    [ "$hashes" = "$got" ] \
        || fail_later "§$1: model.safetensors and config.json hash to $got, the document says $hashes"
}
P12=1,7,3,2,9,11,4,200,13,5,77,6
one_case $F/q35.json 3 $P12 12
known_run M10.9 M10.10 "$tmp/q35.3"
# §M10.2: the vision tower's and the MTP head's tensors change the
# weights' hash and no logit
one_case $F/q35.json 3 $P12 12 add-unused
cmp -s "$tmp/q35.3/cis2.f32" "$tmp/q35.unused.3/cis2.f32" \
    || fail_later "q35: an mtp.* / model.visual.* tensor changed cis2's logits (§M10.2)"
one_case $F/q35.json 5 2,11,4,6,1,9,3 6 edge-gates
# other shapes: r = 1, a 2-tap conv, dk 16 != dv 24, partial_rotary_factor
# 0.33 (rd = int(32 x 0.33) = 10); no layer_types (full_attention_interval
# 2 over 5 layers), one key head for 3 value heads, a 6-tap conv, RoPE
# over the whole head (factor 1), rms_norm_eps 1e-5 (l2norm's L2EPS stays
# 1e-6); qwen3_next with 3 key heads of r = 2, dense and sparse layers by
# decoder_sparse_step 2, norm_topk_prob false
"$PY" -c 'import json, sys
f, tmp = sys.argv[1], sys.argv[2]
c = json.load(open(f + "/q35.json")); t = c["text_config"]
t.update(linear_num_key_heads=4, linear_num_value_heads=4, linear_key_head_dim=16,
         linear_value_head_dim=24, linear_conv_kernel_dim=2)
t["rope_parameters"]["partial_rotary_factor"] = 0.33
json.dump(c, open(tmp + "/q35-r1.json", "w"))
c = json.load(open(f + "/q35.json")); t = c["text_config"]
del t["layer_types"]
t.update(full_attention_interval=2, num_hidden_layers=5, linear_num_key_heads=1, linear_num_value_heads=3,
         linear_conv_kernel_dim=6, head_dim=24, rms_norm_eps=1e-5)
t["rope_parameters"].update(partial_rotary_factor=1.0, rope_theta=10000)
json.dump(c, open(tmp + "/q35-interval.json", "w"))
c = json.load(open(f + "/q3next.json"))
del c["layer_types"]
c.update(full_attention_interval=4, linear_num_key_heads=3, linear_num_value_heads=6, linear_key_head_dim=8,
         linear_value_head_dim=8, decoder_sparse_step=2, mlp_only_layers=[], norm_topk_prob=False)
json.dump(c, open(tmp + "/q3next-hk3.json", "w"))' $F "$tmp" \
    || fail_later "could not write the §M10 variants"
one_case "$tmp/q35-r1.json" 7 5,1,9,7,3,12,40,8,2 8
one_case "$tmp/q35-interval.json" 1 13,5,77,6,2,2,9 8
one_case $F/q35moe.json 3 $P12 12
known_run M10.10 M10.11 "$tmp/q35moe.3"
one_case $F/q35moe.json 4 13,5,77,6 6 pair-routers
one_case $F/q3next.json 3 $P12 12
known_run M10.11 '## ' "$tmp/q3next.3"
one_case "$tmp/q3next-hk3.json" 2 2,11,4,6,1,9 8
# the real configs' partial RoPE tables, read by the re-implementation
# (§M10.1's defaults and keys), against §M10.9's and §M10.11's digests
# (Qwen3.5-35B-A3B has Qwen3.5-0.8B's rope_theta and rd)
for pair in Qwen3.5-0.8B:M10.9 Qwen3.5-35B-A3B:M10.9 Qwen3-Next-80B-A3B:M10.11; do
    cfg=$SHARED/models/families/${pair%%:*}.json
    [ -f "$cfg" ] || continue
    got=$("$PY" "$REIMPL" rope "$cfg" | sed -n 's/^inv-freq-table-digest //p')
    [ -n "$got" ] && sed -n "/^${pair#*:}\. /,\$p" docs/models.md | grep -q "$got" \
        || fail_later "${pair%%:*}: doc_reimpl.py rope gives '$got', not §${pair#*:}'s digest"
done

end_fails
echo ok
