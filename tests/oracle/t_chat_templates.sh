#!/bin/sh
# tests/oracle/t_chat_templates.sh - cis2's chat-template renderer
# (src/jinja*.c, docs/chat.md) against Debian's
# python3-jinja2 rendering in the environment transformers'
# apply_chat_template builds (tests/oracle/chat_render.py: the sandbox,
# trim_blocks, lstrip_blocks, loopcontrols, {% generation %}, its tojson,
# raise_exception, strftime_now pinned to 2025-03-07 14:05:09 on both
# sides), byte for byte:
#   - every chat template of $SHARED/models/templates (the families'
#     templates as published, SOURCES.md there), the server tests'
#     templates (tests/server/templates) and a ChatML template with tools
#     in Qwen2.5's shape written below, each over the conversations of
#     tests/oracle/chat_corpus.json (system or not, multi-turn, empty,
#     long, Unicode, content that looks like template syntax, tools,
#     tool calls and results, reasoning_content, enable_thinking absent/
#     true/false, add_generation_prompt true/false, each template's
#     raise_exception cases and kwargs): the text identical, or the same
#     raise_exception message, or an error on both sides;
#   - the snippets of tests/oracle/chat_snippets.txt: the subset feature
#     by feature (whitespace control, scoping, loops, macros, filters,
#     tests, methods, Python's str/repr, tojson, errors);
#   - the expectations written in tests/unit/test_jinja.c are jinja2's.
# The hostile templates (refused within the limits) are
# tests/unit/test_jinja.c's: jinja2 would loop or grow without end on them.
# This test runs in the sanitizer leg too: its driver is the build's
# tests/unit/test_jinja, so the real templates run under ASan/UBSan there.
# About 3 s.  Skips when Debian's python3 cannot import jinja2
# (apt-get install python3-jinja2) or the driver is not built (make tests).
set -u
. tests/lib.sh
PY=/usr/bin/python3
export PYTHONDONTWRITEBYTECODE=1
[ -x "$PY" ] && "$PY" -c 'import jinja2' > /dev/null 2>&1 || skip "$PY cannot import jinja2 (apt-get install python3-jinja2)"
DRV=$BUILD/tests/test_jinja
[ -x "$DRV" ] || skip "$DRV is not built (make tests)"
O=tests/oracle/chat_render.py
CORPUS=tests/oracle/chat_corpus.json
tmpdir d

# Every template's cases go through jinja2 in one python process
# (prepare), through cis2 one driver run each, and are compared in one
# process (compare-all); SPECS collects NAME=TEMPLATE[:TOKENS].
SPECS=""
NAMES=""
add() {   # NAME FILE [TOKENS]
    SPECS="$SPECS $1=$2${3:+:$3}"
    NAMES="$NAMES $1"
}
n=0
for f in "$SHARED"/models/templates/*.jinja; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    add "$(basename "$f" .jinja)" "$f"
done
[ $n -gt 0 ] || echo "note: no templates in $SHARED/models/templates: the families' templates are not checked"
for f in tests/server/templates/*.jinja; do
    add "server-$(basename "$f" .jinja)" "$f" chatml
done

# A ChatML template with tools in Qwen2.5-Instruct's shape: a default
# system prompt, the tools as JSON lines, tool calls as <tool_call> blocks,
# consecutive tool results folded into one user turn.
cat > "$d/chatml.jinja" << 'EOF'
{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nReturn each call as <tool_call>{\"name\": ..., \"arguments\": ...}</tool_call>.<|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
EOF
add chatml "$d/chatml.jinja"

# shellcheck disable=SC2086
"$PY" "$O" prepare "$CORPUS" "$d" $SPECS || fail "chat_render.py prepare"
for spec in $SPECS; do
    name=${spec%%=*}
    file=${spec#*=}
    file=${file%%:*}
    $RUNNER "$DRV" --render "$file" < "$d/$name.cases" > "$d/$name.cis2" || fail_later "test_jinja --render $file exited $?"
done
# compared NAME...: every NAME's results agree, or fail_later
compared() {
    if "$PY" "$O" compare-all "$d" "$@" > "$d/cmp"; then
        sed 's/^/ok: /' "$d/cmp"
    else
        cat "$d/cmp"
        fail_later "cis2 and jinja2 render differently (above)"
    fi
}
# shellcheck disable=SC2086
compared $NAMES

# the subset, snippet by snippet
"$PY" "$O" snippets tests/oracle/chat_snippets.txt > "$d/snippets.cases" || fail "chat_render.py snippets"
"$PY" "$O" render-each < "$d/snippets.cases" > "$d/snippets.jinja2" || fail "chat_render.py render-each"
$RUNNER "$DRV" --render-each < "$d/snippets.cases" > "$d/snippets.cis2" || fail_later "test_jinja --render-each exited $?"
compared snippets

# the unit test's expectations are jinja2's
$RUNNER "$DRV" --table > "$d/table.cases" || fail "test_jinja --table"
"$PY" "$O" render-each < "$d/table.cases" > "$d/table.jinja2" || fail "chat_render.py render-each (table)"
"$PY" - "$d/table.cases" "$d/table.jinja2" << 'EOF' || fail_later "tests/unit/test_jinja.c expects what jinja2 does not render"
import json, sys
bad = 0
cases = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
for c, l in zip(cases, open(sys.argv[2], encoding="utf-8")):
    r = json.loads(l)
    if r.get("text") != c["want"]:
        bad += 1
        print("test_jinja.c %r: expects %r, jinja2 renders %r" % (c["_case"], c["want"], r))
print("ok: test_jinja.c: %d expectations, %d not jinja2's" % (len(cases), bad))
sys.exit(1 if bad else 0)
EOF
end_fails
