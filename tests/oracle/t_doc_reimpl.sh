#!/bin/sh
# t_doc_reimpl.sh - docs/arithmetic.md is enough to reproduce cis2 bit for
# bit.  tests/oracle/doc_reimpl.py is a numpy float32 re-implementation of
# the greedy decode written from that document alone (each rule cites its
# section there).  This test:
#   - checks it against the document's known answers (doc §13: exp, ln,
#     silu, sin/cos, rsqrt, dot_seq, argmax, RMSNorm, softmax, attention,
#     RoPE tables, table_digest, inv_freq_table_digest);
#   - runs `cis2 run --dump-logits --receipt` on synthetic checkpoints
#     (`cis2 synth`: tiny, tiny-qwen with q/k/v biases and an untied head,
#     odd with head_dim 24, GQA 3:1, vocab 300), and compares every logit
#     bit for bit with the re-implementation's, and the receipt's file
#     hashes, table digests, generated ids, argmax digest and witness
#     digest (CIS2_REF, recomputed from the document's byte order, doc §11)
#     with the re-implementation's; the printed CIS2_REF line too.
# It can fail: changing one rule in doc_reimpl.py makes it fail (checked
# when written; the variants are not kept): RMSNorm as x*(inv*w) (FACTS
# §1.3) or numpy's pairwise sum in place of dot_seq's running sum (§5.1)
# make the logits differ at step 0 on every shape (the tokens stay the
# same); the witness with config.json's hash before tokenizer.json's
# (FACTS §1.11) changes only witness-digest and CIS2_REF.  To try one,
# point DOC_REIMPL at a modified copy:
#     DOC_REIMPL=/tmp/wrong.py BUILD=build/x sh tests/oracle/t_doc_reimpl.sh
# About 10 s.  Skips when Debian's python has no numpy.
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

# one_case SHAPE SEED PROMPT_IDS GEN_TOKS
one_case() {
    shape=$1 seed=$2 ids=$3 n=$4
    d=$tmp/$shape.$seed
    echo "=== $shape (seed $seed, prompt $ids, $n tokens)"
    $CIS2 synth --shape "$shape" --seed "$seed" --out "$d" > /dev/null \
        || { fail_later "cis2 synth --shape $shape --seed $seed"; return; }
    $CIS2 run --model-dir "$d" --prompt-ids "$ids" --gen-toks "$n" \
            --receipt "$d/receipt" --dump-logits "$d/cis2.f32" > "$d/run.out" \
        || { fail_later "cis2 run on $shape"; cat "$d/run.out"; return; }
    "$PY" "$REIMPL" run --model-dir "$d" --prompt-ids "$ids" --gen-toks "$n" \
            --logits "$d/doc.f32" > "$d/doc.out" \
        || { fail_later "doc_reimpl.py run on $shape"; return; }
    if ! cmp -s "$d/cis2.f32" "$d/doc.f32"; then
        at=$(cmp "$d/cis2.f32" "$d/doc.f32" 2>&1 | sed -n 's/.* byte \([0-9]*\).*/\1/p')
        vocab=$(sed -n 's/.*"vocab_size": *\([0-9]*\).*/\1/p' "$d/config.json")
        if [ -n "$at" ] && [ -n "$vocab" ]; then
            i=$(((at - 1) / 4))
            fail_later "$shape: logits differ first at step $((i / vocab)), entry $((i % vocab))"
        else
            fail_later "$shape: logits differ: $(cmp "$d/cis2.f32" "$d/doc.f32" 2>&1)"
        fi
    fi
    # every field the re-implementation recomputed, against cis2's receipt
    while read -r key value; do
        got=$(sed -n "s/^$key //p" "$d/receipt")
        [ "$got" = "$value" ] \
            || fail_later "$shape: $key: cis2's receipt has '$got', docs/arithmetic.md gives '$value'"
    done < "$d/doc.out"
    ref=$(sed -n 's/^witness-digest //p' "$d/doc.out")
    grep -q "^CIS2_REF digest=$ref prompt_idx=0 prompt_toks=" "$d/run.out" \
        || fail_later "$shape: cis2 printed $(grep '^CIS2_REF' "$d/run.out"), docs/arithmetic.md gives $ref"
    cat "$d/doc.out"
}

one_case tiny 1 1,7,3,2 6
one_case tiny 5 9 4
one_case tiny-qwen 2 5,1,9 5
one_case odd 3 2,11,4,6,1 5

end_fails
echo ok
