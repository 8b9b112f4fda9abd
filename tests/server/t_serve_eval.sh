#!/bin/sh
# tests/server/t_serve_eval.sh - an evaluation run against `cis2 serve` and
# its verification afterwards (docs/eval.md), on synthetic checkpoints:
#   - tests/server/lmeval.py sends lm-evaluation-harness 0.4.x's requests,
#     byte for byte its payloads (the remote tokenizer's probe of
#     /tokenizer_info and /tokenize, token-id prompts, echo with max_tokens
#     1 and 0 and logprobs 1, batches of 4, 3 at once; generate_until with
#     `until` + the eos_token; local-chat-completions' messages) behind
#     --api-key-file, and checks every figure it reads against `cis2 score`
#     and `cis2 run` (the CLI, given the very ids);
#   - `--receipt-log DIR` holds every receipt the server handed out (the
#     completions' and the score receipts of every scored prompt), each
#     file byte for byte the one in the response, and `cis2 verify
#     --manifest DIR/manifest.txt` verifies all of them; one doctored bit
#     fails it; a manifest torn by an earlier run is cut back to its last
#     whole line at start-up;
#   - score_receipt: true returns the ext-score-1 receipt `cis2 score
#     --continuation-ids ... --receipt` writes, byte for byte;
#   - the stopper checkpoint (tests/server/stopper.py), whose eos_token is
#     <|im_end|>: generation with the harness's stop list ends at the end
#     of text (finish stop-string, the text cut before it);
#   - refusals: more prompts than --max-batch (400 naming the option), a
#     --receipt-log that is a file (exit 3) or empty (exit 2).
set -u
. tests/lib.sh
FAIL_TAIL=15
[ -z "${RUNNER:-}" ] || skip "cross build (the server is tested on the host build)"
command -v curl > /dev/null || skip "curl is not installed (tools/install-deps)"
PY=/usr/bin/python3
[ -x "$PY" ] || skip "no $PY"
TOK=$SHARED/models/smollm2-135m/tokenizer.json
TEMPLATE=$SHARED/models/smollm2-135m-instruct/chat_template.jinja
[ -f "$TOK" ] && [ -f "$TEMPLATE" ] || skip "$TOK or $TEMPLATE missing"
tmpdir d
J='Content-Type: application/json'

# ------------------------------------------------------------ checkpoints
cat > "$d/mid.json" <<'EOF'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "hidden_size": 64,
 "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
 "vocab_size": 49152, "max_position_embeddings": 2048, "rms_norm_eps": 1e-05, "rope_theta": 10000,
 "bos_token_id": 0, "eos_token_id": 0, "tie_word_embeddings": true, "torch_dtype": "bfloat16"}
EOF
"$CIS2" synth --config "$d/mid.json" --seed 3 --out "$d/mid" --tokenizer "$TOK" > /dev/null || fail "synth mid"
$PY -c 'import json,sys; json.dump({"chat_template": open(sys.argv[1]).read(), "bos_token": "<|endoftext|>",
  "eos_token": "<|endoftext|>"}, open(sys.argv[2], "w"))' "$TEMPLATE" "$d/mid/tokenizer_config.json"
"$CIS2" synth --shape tiny --seed 5 --out "$d/tiny" > /dev/null || fail "synth tiny"
$PY -c 'import json,sys; c=json.load(open(sys.argv[1])); c.update(tie_word_embeddings=False, eos_token_id=257); json.dump(c, open(sys.argv[2], "w"))' \
    "$d/tiny/config.json" "$d/stop.json"
"$CIS2" synth --config "$d/stop.json" --seed 5 --out "$d/stop" > /dev/null || fail "synth stop"
$PY tests/server/stopper.py "$d/stop" "$TEMPLATE" || fail "stopper.py"

printf 'eval-key\n' > "$d/key"
start ev "$d/mid" --max-batch 4 --receipt-log "$d/log" --api-key-file "$d/key" --access-log off
B=http://127.0.0.1:$port_ev
export KEY=eval-key

echo "== lm-evaluation-harness's requests (tests/server/lmeval.py) against cis2 score and cis2 run"
for mode in loglikelihood generate chat; do
    timeout 300 $PY tests/server/lmeval.py $mode "$B" mid "$CIS2" "$d/mid" "$d/harness.jsonl" || fail "lmeval.py $mode"
done

echo "== score_receipt: true: each prompt's ext-score-1 receipt, cis2 score --receipt's bytes"
curl -s -o "$d/sr.json" -H "$J" -H "Authorization: Bearer eval-key" "$B/v1/completions" -d \
    '{"model": "mid", "prompt": ["The cat sat on the mat.", [504, 2821, 3470, 335]], "max_tokens": 0, "echo": true,
      "logprobs": 1, "score_receipt": true}' || fail "curl score_receipt"
$PY - "$d/sr.json" "$CIS2" "$d/mid" "$d" <<'EOF' || fail "score_receipt"
import hashlib, json, subprocess, sys
r, cis2, mdir, d = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], sys.argv[4]
args = [["--continuation", "The cat sat on the mat."], ["--continuation-ids", "504,2821,3470,335"]]
for k, c in enumerate(r["choices"]):
    x = c["cis2"]
    assert x["receipt"] is None and x["score_receipt"].startswith("CIS-2-RECEIPT ext-score-1\n"), x
    assert hashlib.sha256(x["score_receipt"].encode()).hexdigest() == x["score_receipt_sha256"]
    subprocess.run([cis2, "score", "--model-dir", mdir, "--top-logprobs", "1", "--receipt", d + "/cli.%d.receipt" % k] + args[k],
                   check=True, capture_output=True)
    want = open(d + "/cli.%d.receipt" % k).read()
    assert x["score_receipt"] == want, (k, x["score_receipt"], want)
    logged = open("%s/log/%s.p%d.score.receipt" % (d, r["id"], k)).read()
    assert logged == want, "the receipt log's copy differs"
print("ok: score_receipt is cis2 score --receipt's, byte for byte, and the log's copy")
EOF

echo "== more prompts than --max-batch: 400 naming the option"
code=$(curl -s -o "$d/mb.json" -w '%{http_code}' -H "$J" -H "Authorization: Bearer eval-key" "$B/v1/completions" \
       -d '{"model": "mid", "prompt": ["a", "b", "c", "d", "e"], "max_tokens": 1}')
[ "$code" = 400 ] && grep -q -- '--max-batch (4)' "$d/mb.json" && [ "$(wc -l < "$d/mb.json")" = 1 ] ||
    fail "5 prompts at --max-batch 4: $code $(cat "$d/mb.json")"

echo "== the stopper (eos_token <|im_end|>): the harness's stop list ends generation at the end of text"
start st "$d/stop" --receipt-log "$d/log2" --access-log off
KEY= timeout 120 $PY tests/server/lmeval.py generate "http://127.0.0.1:$port_st" stop "$CIS2" "$d/stop" "$d/stop.jsonl" ||
    fail "lmeval.py generate on the stopper"
KEY= timeout 120 $PY tests/server/lmeval.py chat "http://127.0.0.1:$port_st" stop "$CIS2" "$d/stop" "$d/stop.jsonl" ||
    fail "lmeval.py chat on the stopper"
grep -q '"kind": "generate".*"finish": "stop-string"' "$d/stop.jsonl" ||
    fail "no generation ended at <|im_end|>: $(cat "$d/stop.jsonl")"

echo "== the receipt log: every receipt handed out, byte for byte; cis2 verify --manifest verifies them all"
kill -TERM $pid_ev $pid_st
wait $pid_ev || fail "ev exited $?"
wait $pid_st || fail "st exited $?"
PIDS=""
$PY - "$d" <<'EOF' || fail "the receipt log"
import json, sys
d = sys.argv[1]
# mid: 9 prompts scored twice (max_tokens 1 and 0) + 2 with score_receipt; 9 + 3 + 2 completions; the stopper: 3 + 2
for log, f, scored, done in (("log", "harness.jsonl", 20, 14), ("log2", "stop.jsonl", 0, 5)):
    names = open("%s/%s/manifest.txt" % (d, log)).read().split("\n")
    assert names[-1] == "" and all(names[:-1]), "the manifest is not whole lines"
    names = set(names[:-1])
    n = 0
    for line in open(d + "/" + f):
        h = json.loads(line)
        if h["receipt"] is not None:
            name = "%s.%d.receipt" % (h["id"], h["index"])
            assert name in names, name + " is not in the manifest"
            assert open("%s/%s/%s" % (d, log, name)).read() == h["receipt"], name
            n += 1
    assert n == done and sum(x.endswith(".score.receipt") for x in names) == scored and len(names) == scored + done, \
        (log, len(names), n)
    print("ok: %s: %d receipts (%d score receipts); the %d completion receipts the harness got are the log's bytes"
          % (log, len(names), sum(x.endswith(".score.receipt") for x in names), n))
EOF
n_mid=$(wc -l < "$d/log/manifest.txt")
grep -q 'score.receipt' "$d/log/manifest.txt" || fail "no score receipt in the log"
"$CIS2" verify --manifest "$d/log/manifest.txt" --model-dir "$d/mid" > "$d/verify.out" || { tail -n 5 "$d/verify.out"; fail "verify --manifest (mid)"; }
grep -q "^summary: $n_mid receipts: $n_mid OK" "$d/verify.out" || fail "verify --manifest: $(tail -n 1 "$d/verify.out")"
"$CIS2" verify --manifest "$d/log2/manifest.txt" --model-dir "$d/stop" > "$d/verify2.out" || { tail -n 5 "$d/verify2.out"; fail "verify --manifest (stop)"; }
echo "ok: $(tail -n 1 "$d/verify.out") (mid); $(tail -n 1 "$d/verify2.out") (stopper)"
# one flipped bit in one score receipt's logprobs fails the verification, naming the field
f=log/$(cd "$d/log" && grep -l '^logprob-bits [0-9a-f]' $(grep 'score.receipt' manifest.txt) | head -n 1)
cp "$d/$f" "$d/keep"
$PY -c 'import sys; p=sys.argv[1]; t=open(p).read().split("\n")
i=[k for k, l in enumerate(t) if l.startswith("logprob-bits ")][0]; v=t[i][13:]; t[i]="logprob-bits "+("%08x" % (int(v[:8], 16) ^ 1))+v[8:]
open(p, "w").write("\n".join(t))' "$d/$f" || fail "doctoring $f"
"$CIS2" verify --manifest "$d/log/manifest.txt" --model-dir "$d/mid" > "$d/verify.out"
rc=$?
[ $rc = 1 ] && grep -q 'OUTPUT-MISMATCH (logprob-bits' "$d/verify.out" || fail "a doctored score receipt: exit $rc, $(grep -v ': verdict: OK' "$d/verify.out")"
cp "$d/keep" "$d/$f"
echo "ok: a doctored logprob bit is OUTPUT-MISMATCH (logprob-bits), exit 1"

echo "== a manifest torn by an earlier run is cut back to its last whole line"
lines=$(wc -l < "$d/log/manifest.txt")
printf 'cmpl-torn.0.rec' >> "$d/log/manifest.txt"
start ev2 "$d/mid" --receipt-log "$d/log" --access-log off
grep -q 'ended inside a line' "$d/ev2.err" || fail "no word of the torn line: $(cat "$d/ev2.err")"
curl -s -o /dev/null -H "$J" "http://127.0.0.1:$port_ev2/v1/completions" -d '{"model": "mid", "prompt": "Hi", "max_tokens": 2}'
[ "$(wc -l < "$d/log/manifest.txt")" = $((lines + 1)) ] && ! grep -q torn "$d/log/manifest.txt" ||
    fail "the manifest after the torn line: $(tail -n 3 "$d/log/manifest.txt")"
tail -n 1 "$d/log/manifest.txt" | sed "s|^|$d/log/|" > "$d/last.manifest"
"$CIS2" verify --manifest "$d/last.manifest" --model-dir "$d/mid" > /dev/null || fail "the receipt after the cut"
kill -TERM $pid_ev2; wait $pid_ev2 || fail "ev2 exited $?"
PIDS=""
echo "ok: cut back to $lines lines, the next receipt appended whole"

echo "== --receipt-log refusals"
: > "$d/afile"
"$CIS2" serve --model-dir "$d/mid" --port 0 --receipt-log "$d/afile" > /dev/null 2> "$d/err"; rc=$?
[ $rc = 3 ] && [ "$(wc -l < "$d/err")" = 1 ] && grep -q 'not a directory' "$d/err" || fail "--receipt-log FILE: exit $rc, $(cat "$d/err")"
"$CIS2" serve --model-dir "$d/mid" --port 0 --receipt-log "" > /dev/null 2> "$d/err"; rc=$?
[ $rc = 2 ] || fail "--receipt-log '': exit $rc, $(cat "$d/err")"
echo "serve eval: all checks passed"
