#!/bin/sh
# tests/oracle/t_tool_parse.sh - the parsing of a chat model's output into
# content, reasoning_content and tool_calls (serve/serve_parse.c,
# docs/chat-output.md) against the families' real chat templates
# ($SHARED/models/templates, SOURCES.md there):
#   - the convention each template selects (serve_parse_detect's table),
#     against the answers written below from reading each template: which
#     syntax it tells the model to call tools with, and whether it writes
#     <think> or harmony channels;
#   - assistant turns with reasoning and tool calls, rendered by Debian's
#     python3-jinja2 in transformers' environment (chat_render.py), cut
#     after the prompt the same template renders with
#     add_generation_prompt: parsing them gives back the messages'
#     reasoning, content, tool names and arguments (tool_parse_oracle.py),
#     whole and fed byte by byte.
# The driver is the build's tests/unit/test_serve_parse.  About a second.
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
tmpdir d

# template -> "TOOLS REASONING" (docs/chat-output.md "Which convention"),
# the answers read off each template by hand
cat > "$d/want" << 'EOF'
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
files=""
: > "$d/have"
while read -r name conv; do
    if [ -f "$T/$name.jinja" ]; then
        files="$files $T/$name.jinja"
        echo "$name $conv" >> "$d/have"
    else
        echo "note: no $name.jinja in $T: its convention is not checked"
    fi
done < "$d/want"
[ -n "$files" ] || fail "none of the families' templates is in $T"
# shellcheck disable=SC2086
$RUNNER "$DRV" --detect $files > "$d/got" || fail_later "--detect exited $?"
while read -r name _; do echo "$name"; done < "$d/have" | paste -d' ' - "$d/got" > "$d/gotn"
diff "$d/have" "$d/gotn" || fail_later "the conventions detected differ from the table (above: < want, > got)"

# shellcheck disable=SC2086
"$PY" tests/oracle/tool_parse_oracle.py "$T" tests/oracle/chat_corpus.json $RUNNER "$DRV" ||
    fail_later "the parser did not give back what the templates wrote (above)"
end_fails
echo ok
