#!/bin/sh
# tests/server/t_serve_abuse.sh - clients that once crashed, stalled or locked out
# `cis2 serve` (docs/serving.md "Hygiene", "Limits"), through tests/server/abuse.py on
# raw sockets, against servers on free loopback ports (every wait bounded,
# the trap kills them all).  The checkpoint is a small llama with a 4096
# context, so a receipt can claim 2000 tokens: a doctored one (its first
# claimed token changed) makes the verifier decode all of them, ~0.4 s
# each, which is what a hostile body of many such receipts costs.
#   A  --max-connections 8 --timeout 3 --request-timeout 4: eight slowloris
#      sockets are cut and /health answers; ambiguous framing is 400; two
#      verifications beside a stream, three rounds, same verdicts, no
#      crash; verifications whose clients left stop (their slots free up),
#      and so does an echo's scoring (a 499 counted in /metrics)
#   B  --verify-max-tokens / --verify-timeout: 413 verify_too_large at
#      once, 413 verify_timeout after about a second; the same for echo's
#      scoring (score_too_large, score_timeout)
#   C  SIGTERM while a long verification runs: the drain ends it, the
#      server exits 0, the client gets 503; a second SIGTERM ends the
#      drain at once
#   D  one long prompt (4000 ids) scored with its score receipt
#      (score_receipt, as --receipt-log scores them too): the scoring asks
#      between weight passes whether to stop, not only between prompts, so
#      a client that leaves gets its 499 within half the whole answer's
#      time, and --verify-timeout 1 answers 413 score_timeout within 2.5 s
#      (the whole scoring takes several seconds on one thread)
# serial: slots must free up within seconds of a client leaving
set -u
. tests/lib.sh
FAIL_TAIL=15   # fail shows the end of every $d/*.err
[ -z "${RUNNER:-}" ] || skip "cross build (the server is tested on the host build)"
"$CIS2" serve --help 2>&1 | grep -q -- --request-timeout || skip "this cis2 has no server"
PY=/usr/bin/python3
ABUSE="timeout 120 $PY tests/server/abuse.py"
tmpdir d

# start_long NAME ARGS...: a server of the long checkpoint (tests/lib.sh's start); sets port_NAME, pid_NAME
start_long() { long_name=$1; shift; start "$long_name" "$d/long" --max-body 8388608 --model-name m "$@"; }
# stopped PID SECS: the process exits within SECS; prints its status
stopped() {
    i=0
    while kill -0 "$1" 2> /dev/null; do
        i=$((i + 1)); [ $i -lt $(($2 * 10)) ] || return 1
        sleep 0.1
    done
    wait "$1"
}

# ------------------------------------------------------------ the receipts
cat > "$d/long.json" <<'EOF'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "hidden_size": 128,
 "intermediate_size": 320, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
 "vocab_size": 512, "max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "rope_theta": 10000,
 "tie_word_embeddings": true, "torch_dtype": "bfloat16"}
EOF
"$CIS2" synth --config "$d/long.json" --seed 3 --out "$d/long" > /dev/null || fail "synth"
"$CIS2" run --model-dir "$d/long" --prompt "Once upon a time" --gen-toks 2000 --receipt "$d/r2000" > /dev/null ||
    fail "run 2000"
"$CIS2" run --model-dir "$d/long" --prompt "The cat sat" --gen-toks 200 --receipt "$d/r200" > /dev/null ||
    fail "run 200"
# bodies: BODY NAME N RECEIPT DOCTOR(0|1) ...: {"receipts": [...]} of N copies each
$PY - "$d" <<'EOF' || fail "bodies"
import json, sys
d = sys.argv[1]
def doctored(text):
    out = []
    for line in text.split("\n"):
        if line.startswith("generated-token-ids "):
            ids = line.split(" ", 1)[1].split(",")
            ids[0] = str((int(ids[0]) + 1) % 512)  # the decode's first token is never this one
            line = "generated-token-ids " + ",".join(ids)
        out.append(line)
    return "\n".join(out)
r2000, r200 = open(d + "/r2000").read(), open(d + "/r200").read()
# echo: 16 prompts of 700 words each scored (max_tokens 0), several seconds
words = "once upon a time the cat sat on the mat and a dog ran far away".split()
json.dump({"model": "m", "prompt": [" ".join(words[(i * 7 + k) % len(words)] for i in range(700)) for k in range(16)], "echo": True,
           "logprobs": 1, "max_tokens": 0}, open(d + "/echo.body", "w"))
json.dump({"model": "m", "prompt": [" ".join(words[(i * 7 + k) % len(words)] for i in range(700)) for k in range(7)], "echo": True,
           "logprobs": 1, "max_tokens": 0}, open(d + "/echo7.body", "w"))  # ~19300 prompt tokens, ~2 s
bodies = {"long": [doctored(r2000)] * 12,                  # ~5 s of decoding, 24192 positions claimed
          "eight": [doctored(r2000)] * 8,                  # ~3 s
          "beside": [r2000, doctored(r200), r2000, r200]}  # prefill passes and decode steps
for name, rs in bodies.items():
    json.dump({"receipts": rs}, open(f"{d}/{name}.body", "w"))
EOF

echo "== A: slowloris, framing, verify beside a stream, verify whose client left"
start_long A --max-connections 8 --timeout 3 --request-timeout 4
$ABUSE "$port_A" slowloris 8 4 || fail "slowloris"
$ABUSE "$port_A" framing || fail "framing"
$ABUSE "$port_A" verify-beside "$d/beside.body" || fail "verify beside a stream"
$ABUSE "$port_A" verify-gone "$d/long.body" || fail "verify of a client that left"
$ABUSE "$port_A" echo-gone "$d/echo.body" || fail "echo scoring of a client that left"
kill -0 "$pid_A" || fail "server A died"

echo "== B: a verification's (and an echo scoring's) work and time are bounded"
start_long B --verify-max-tokens 20000 --verify-timeout 1
$ABUSE "$port_B" verify-status "$d/long.body" 413 verify_too_large 1 || fail "verify_too_large"
$ABUSE "$port_B" verify-status "$d/eight.body" 413 verify_timeout 2.5 || fail "verify_timeout"
$ABUSE "$port_B" echo-status "$d/echo.body" 413 score_too_large 1 || fail "score_too_large (echo past --verify-max-tokens)"
$ABUSE "$port_B" echo-status "$d/echo7.body" 413 score_timeout 2.5 || fail "score_timeout (echo scoring past --verify-timeout)"
kill -TERM "$pid_B"
stopped "$pid_B" 15 || fail "server B did not stop within 15 s of SIGTERM"

echo "== C: SIGTERM while verifying: the drain's end cancels it; a second signal cuts the drain"
start_long C --drain-timeout 1
$ABUSE "$port_C" verify-hold "$d/long.body" > "$d/hold.out" 2>&1 &
hold=$!
sleep 1
kill -TERM "$pid_C"
stopped "$pid_C" 8 || fail "server C still runs 8 s after SIGTERM (drain 1 s): a verification was not cancelled"
wait $hold
grep -q "verify-hold: status 503 shutting_down" "$d/hold.out" || fail "the waiting client got: $(cat "$d/hold.out")"
start_long C2 --drain-timeout 60
$ABUSE "$port_C2" verify-hold "$d/long.body" > "$d/hold2.out" 2>&1 &
hold=$!
sleep 1
kill -TERM "$pid_C2"
sleep 0.5
kill -TERM "$pid_C2"
stopped "$pid_C2" 4 || fail "server C2 still runs 3.5 s after a second SIGTERM (drain 60 s)"
wait $hold
grep -q "verify-hold: status 503" "$d/hold2.out" || fail "the waiting client got: $(cat "$d/hold2.out")"
echo "== D: a long prompt scored with its receipt stops within a weight pass"
sed 's/"hidden_size": 128/"hidden_size": 384/; s/"intermediate_size": 320/"intermediate_size": 1024/;
     s/"num_hidden_layers": 4/"num_hidden_layers": 6/' "$d/long.json" > "$d/wide.json"
"$CIS2" synth --config "$d/wide.json" --seed 3 --out "$d/wide" > /dev/null || fail "synth wide"
$PY - "$d" <<'EOF' || fail "wide body"
import json, sys
ids = [(i * 7919 + 13) % 512 for i in range(4000)]  # ids as lm-eval sends them: one prompt, no bytes needed
json.dump({"model": "m", "prompt": ids, "echo": True, "logprobs": 1, "max_tokens": 0, "score_receipt": True},
          open(sys.argv[1] + "/wide.body", "w"))
EOF
start D "$d/wide" --max-body 8388608 --model-name m --threads 1
$ABUSE "$port_D" echo-gone "$d/wide.body" || fail "a long prompt's scoring (with its receipt) went on after its client left"
start E "$d/wide" --max-body 8388608 --model-name m --threads 1 --verify-timeout 1
$ABUSE "$port_E" echo-status "$d/wide.body" 413 score_timeout 2.5 || fail "score_timeout within a long prompt scored with its receipt"
echo "t_serve_abuse: all passed"
