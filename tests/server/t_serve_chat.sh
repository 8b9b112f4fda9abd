#!/bin/sh
# tests/server/t_serve_chat.sh - the prompt `cis2 serve` renders for a chat
# request (docs/serving.md "Chat templates"), through `cis2 serve
# --render-chat` (what the server tokenizes, one line per request), against
# tests/server/chat_oracle.py (transformers' apply_chat_template context,
# written from its documentation and vLLM's, rendered by Debian's
# python3-jinja2), byte for byte, on ~330 OpenAI-shaped request bodies
# (tests/server/chat_cases.py: tools, tool calls with JSON-string
# arguments, tool results, reasoning_content, text parts, documents,
# chat_template_kwargs such as enable_thinking):
#   - every family's published template ($SHARED/models/templates) with its
#     tokenizer_config.json where there is one (bos/eos and the other
#     special tokens), SmolLM2-Instruct's, the tests' ChatML variants;
#   - a tokenizer_config.json whose chat_template is transformers' named
#     list: the "tool_use" one for requests with tools, "default" else;
#   - strftime_now pinned by SOURCE_DATE_EPOCH on the server's side, as the
#     oracle pins it.
# A rendered text must be the oracle's; the template's raise_exception a
# 400 chat_template_refused with its message; what Jinja fails on never
# rendered; the cases chat_cases.py marks are refused before rendering.
# Then hostile templates: a syntax error, a template that raises or loops
# for a one-message conversation (the start refused in one line, exit 4,
# naming the file, in bounded time), and templates that loop, explode or
# raise only for some messages, and huge messages (a 400 naming the limit,
# quickly).
set -u
. tests/lib.sh
PY=/usr/bin/python3
export PYTHONDONTWRITEBYTECODE=1
$PY -c 'import jinja2' 2>/dev/null || skip "python3-jinja2 is not installed (tools/install-deps)"
tmpdir d
T=tests/server/templates
export SOURCE_DATE_EPOCH=1741356309 # 2025-03-07 14:05:09 UTC: chat_render.py's pinned strftime_now
$PY tests/server/chat_cases.py 300 > "$d/cases.jsonl" || fail "chat_cases.py"
smol=$SHARED/models/smollm2-135m-instruct/chat_template.jinja
[ -f "$smol" ] || fail "$smol is missing"

# compare NAME: $d/NAME.cis2 (--render-chat) against $d/NAME.jinja (the oracle)
compare() {
    $PY - "$d/cases.jsonl" "$d/$1.cis2" "$d/$1.jinja" "$1" <<'PYEOF' || exit 1
import json, sys
cases = [json.loads(l) for l in open(sys.argv[1])]
c = [json.loads(l) for l in open(sys.argv[2])]
o = [json.loads(l) for l in open(sys.argv[3])]
name = sys.argv[4]
if not (len(cases) == len(c) == len(o)):
    sys.exit("FAIL: %s: %d cases, %d lines from cis2, %d from the oracle" % (name, len(cases), len(c), len(o)))
n = {"text": 0, "raise": 0, "error": 0, "refused": 0}
for i, (case, a, b) in enumerate(zip(cases, c, o)):
    err = a.get("error")
    if err and err.get("status") != 400:  # never a 5xx, which clients retry (docs/serving.md "Errors")
        sys.exit("FAIL: %s: case %d refused with status %r: %s" % (name, i, err.get("status"), err))
    if case.get("_refuse"):
        if not err or err["code"] not in ("invalid_value", "invalid_type", "unsupported_parameter"):
            sys.exit("FAIL: %s: case %d should be refused before rendering: %s" % (name, i, a))
        n["refused"] += 1
    elif b.get("text") == "":  # nothing to tokenize: refused (docs/serving.md "Chat templates")
        if not err or "rendered no text" not in err["message"]:
            sys.exit("FAIL: %s: case %d renders nothing; cis2 says %s" % (name, i, a))
        n["refused"] += 1
    elif "text" in b:
        if a.get("text") != b["text"]:
            sys.exit("FAIL: %s: case %d differs:\n  case:   %s\n  cis2:   %r\n  oracle: %r" % (name, i, json.dumps(case)[:300], a, b["text"]))
        n["text"] += 1
    elif "raise" in b:
        if not err or err["code"] != "chat_template_refused" or err["message"] != b["raise"]:
            sys.exit("FAIL: %s: case %d: the template raises %r; cis2 says %s" % (name, i, b["raise"], a))
        n["raise"] += 1
    else:
        if "text" in a:
            sys.exit("FAIL: %s: case %d: cis2 rendered what Jinja fails on (%s)" % (name, i, b["error"]))
        n["error"] += 1
if n["text"] < 60:
    sys.exit("FAIL: %s: only %d cases rendered" % (name, n["text"]))
print("%s: %d texts identical to the oracle's, %d raise_exception messages, %d failing on both sides, %d refused (before rendering, or empty)"
      % (name, n["text"], n["raise"], n["error"], n["refused"]))
PYEOF
}
# one NAME TEMPLATE TOKCFG|-: renders the cases with TEMPLATE and TOKCFG's special tokens
one() {
    mkdir -p "$d/$1"
    [ "$3" = - ] || cp "$3" "$d/$1/tokenizer_config.json"
    "$CIS2" serve --model-dir "$d/$1" --render-chat --chat-template "$2" < "$d/cases.jsonl" > "$d/$1.cis2" ||
        fail "$1: cis2 serve --render-chat failed"
    $PY tests/server/chat_oracle.py "$2" "$3" < "$d/cases.jsonl" > "$d/$1.jinja" || fail "$1: the oracle failed"
    compare "$1"
}

# the families' templates, with their tokenizer_config.json or the special
# tokens the family's has (tests/oracle/chat_corpus.json's table)
n=0
for t in "$SHARED"/models/templates/*.jinja; do
    [ -f "$t" ] || continue
    name=$(basename "$t" .jinja)
    cfg=$SHARED/models/templates/$name.tokenizer_config.json
    if [ ! -f "$cfg" ]; then
        cfg=$d/$name.tokcfg.json
        $PY -c 'import json,sys; t=json.load(open("tests/oracle/chat_corpus.json"))["tokens"]
json.dump(t.get(sys.argv[1], t["default"]), open(sys.argv[2], "w"))' "$name" "$cfg" || fail "$name: tokens"
    fi
    one "$name" "$t" "$cfg"
    n=$((n + 1))
done
[ $n -ge 9 ] || fail "only $n templates in $SHARED/models/templates"
printf '{"eos_token": "<|im_end|>", "bos_token": "<|im_start|>"}\n' > "$d/chatml.tokcfg.json"
one smollm2-instruct "$smol" "$d/chatml.tokcfg.json"
for t in $T/*.jinja; do
    one "server-$(basename "$t" .jinja)" "$t" "$d/chatml.tokcfg.json"
done

# transformers' named list: "tool_use" for requests with tools, "default" else
mkdir -p "$d/named"
$PY -c 'import json,sys
json.dump({"eos_token": "<|im_end|>", "bos_token": {"content": "<|begin_of_text|>", "special": True},
           "chat_template": [{"name": "default", "template": open(sys.argv[1]).read()},
                             {"name": "tool_use", "template": open(sys.argv[2]).read()}]}, open(sys.argv[3], "w"))' \
    "$SHARED/models/templates/Qwen3-0.6B.jinja" "$SHARED/models/templates/Llama-3.1-8B-Instruct.jinja" \
    "$d/named/tokenizer_config.json" || fail "named list"
"$CIS2" serve --model-dir "$d/named" --render-chat < "$d/cases.jsonl" > "$d/named.cis2" || fail "named: --render-chat failed"
$PY tests/server/chat_oracle.py - "$d/named/tokenizer_config.json" < "$d/cases.jsonl" > "$d/named.jinja" || fail "named: the oracle"
compare named
grep -q 'Environment: ipython' "$d/named.cis2" && grep -q '<|im_start|>' "$d/named.cis2" ||
    fail "the named list: not both templates were used"

# ------------------------------------------------------------------ hostile
# start_refused FILE WORDS: --render-chat (the server's start) refuses the
# template in one line naming FILE and WORDS, exit 4, within 10 s
start_refused() {
    t0=$(date +%s)
    timeout 30 "$CIS2" serve --model-dir "$d/named" --chat-template "$1" --render-chat < /dev/null > /dev/null 2> "$d/err"
    rc=$?
    t1=$(date +%s)
    [ $rc -eq 4 ] || fail "$1: exit $rc, expected 4: $(cat "$d/err")"
    [ "$(wc -l < "$d/err")" = 1 ] && grep -qF "$1" "$d/err" && grep -qF "$2" "$d/err" ||
        fail "$1: the refusal is not one line naming the file and '$2': $(cat "$d/err")"
    [ $((t1 - t0)) -le 10 ] || fail "$1: refused after $((t1 - t0)) s"
}
printf '{%% for m in messages %%}{{ m.content }\n' > "$d/syntax.jinja"
start_refused "$d/syntax.jinja" "does not parse: template line 1:"
printf '{{ raise_exception("this template refuses everything") }}' > "$d/raises.jinja"
start_refused "$d/raises.jinja" "this template refuses everything"
printf '{%% for i in range(100000) %%}{%% for j in range(100000) %%}{%% endfor %%}{%% endfor %%}' > "$d/loops.jinja"
start_refused "$d/loops.jinja" "max_steps"
printf '{%% macro f(x) %%}{{ f(x) }}{%% endmacro %%}{{ f(1) }}' > "$d/recurses.jinja"
start_refused "$d/recurses.jinja" "max_depth"

# templates that fail only for some messages: one line each, 400, in bounded time
cat > "$d/picky.jinja" <<'EOF'
{%- for m in messages %}
{%- if m.content == 'forbidden' %}{{ raise_exception('You may not say "forbidden" (message ' ~ loop.index ~ ')') }}{% endif %}
{%- if m.content == 'boom' %}{{ 'x' * 100000000 }}{% endif %}
{%- if m.content == 'grow' %}{% set ns = namespace(s='xx') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{% endif %}
{%- if m.content == 'spin' %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{% endif %}
{%- if m.content == 'oops' %}{{ m.content.nosuchmethod() }}{% endif %}
{{- m.role }}: {{ m.content * 10 }}
{% endfor %}
EOF
big=$($PY -c 'print("y" * 2000000)')
{
    for c in forbidden boom grow spin oops Hello; do printf '{"messages": [{"role": "user", "content": "%s"}]}\n' "$c"; done
    printf '{"messages": [{"role": "user", "content": "%s"}]}\n' "$big"
} > "$d/picky.jsonl"
t0=$(date +%s)
timeout 60 "$CIS2" serve --model-dir "$d/named" --chat-template "$d/picky.jinja" --render-chat < "$d/picky.jsonl" > "$d/picky.out" ||
    fail "picky: --render-chat failed"
t1=$(date +%s)
[ $((t1 - t0)) -le 15 ] || fail "picky: $((t1 - t0)) s for seven renders"
$PY - "$d/picky.out" <<'EOF' || exit 1
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
want = [("chat_template_refused", 'You may not say "forbidden" (message 1)'), ("chat_template_limit", "max_output"),
        ("chat_template_limit", "max_"), ("chat_template_limit", "max_steps"), ("chat_template_error", "template line 6:"),
        (None, "user: " + "Hello" * 10 + "\n"), ("chat_template_limit", "max_output")]
for i, (x, (code, words)) in enumerate(zip(r, want)):
    if code is None:
        assert x.get("text") == words, (i, x)
        continue
    e = x.get("error")
    assert e and e["status"] == 400 and e["code"] == code and e["param"] == "messages" and words in e["message"], (i, x)
    assert code != "chat_template_refused" or e["message"] == words, (i, x)
    assert "\n" not in e["message"], (i, x)
assert len(r) == 7, len(r)
print("hostile: raise, output, memory, steps, a runtime error and a 2 MB message x 10: each a one-line 400")
EOF
echo "chat templates: every rendering equals the oracle's; hostile templates refused in one line"
