#!/bin/sh
# tests/oracle/t_tool_parse.sh - the parsing of a chat model's output into
# content, reasoning_content and tool_calls (serve/serve_parse.c,
# docs/chat-output.md) against the families' real chat templates
# ($SHARED/models/templates, SOURCES.md there):
#   - the convention each template selects (serve_parse_detect's table),
#     against the answers written below from reading each template: which
#     syntax it tells the model to call tools with, and whether it writes
#     <think> or harmony channels;
#   - an assistant turn with reasoning and tool calls, rendered by Debian's
#     python3-jinja2 in transformers' environment (chat_render.py), cut
#     after the prompt the same template renders with
#     add_generation_prompt: parsing it gives back the message's
#     reasoning, content, tool names and arguments (tool_parse_oracle.py),
#     whole and fed byte by byte.
# The driver is the build's tests/unit/test_serve_parse.  Under a second.
# Skips when $SHARED/models/templates is absent, Debian's python3 cannot
# import jinja2, or the driver is not built (make tests).
set -u
. tests/lib.sh
PY=/usr/bin/python3
export PYTHONDONTWRITEBYTECODE=1
T=$SHARED/models/templates
[ -d "$T" ] || skip "$T is absent: the families' templates are not here"
[ -x "$PY" ] && "$PY" -c 'import jinja2' > /dev/null 2>&1 || skip "$PY cannot import jinja2 (apt-get install python3-jinja2)"
DRV=$BUILD/tests/test_serve_parse
[ -x "$DRV" ] || skip "$DRV is not built (make tests)"

# template -> "TOOLS REASONING" (docs/chat-output.md "Which convention")
while read -r name want; do
    f=$T/$name.jinja
    [ -f "$f" ] || { echo "note: no $name.jinja in $T"; continue; }
    got=$($RUNNER "$DRV" --detect "$f") || fail_later "--detect $name exited $?"
    [ "$got" = "$want" ] || fail_later "$name: detected '$got', want '$want'"
done << 'EOF'
gpt-oss-20b harmony harmony
Qwen3-0.6B hermes think
Qwen3.5-4B hermes think
SmolLM3-3B hermes think
Llama-3.1-8B-Instruct llama3_json none
Llama-3.2-1B-Instruct llama3_json none
Meta-Llama-3-8B-Instruct none none
Mistral-7B-Instruct-v0.3 mistral none
gemma-3-it none none
Phi-3-mini-4k-instruct none none
EOF

# shellcheck disable=SC2086
"$PY" tests/oracle/tool_parse_oracle.py "$T" tests/oracle/chat_corpus.json $RUNNER "$DRV" ||
    fail_later "the parser did not give back what the templates wrote (above)"
end_fails
echo ok
