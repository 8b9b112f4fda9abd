#!/bin/sh
# tests/server/t_serve_chat.sh - chat templates (docs/serving.md "Chat templates"): for every
# template cis2 recognizes (SmolLM2-Instruct's own file, plain ChatML,
# Qwen1.5's, Qwen2.5-Instruct's, one with another default system prompt,
# SmolLM2's reformatted), `cis2 serve --render-chat` must render each of
# ~400 chat requests (tests/server/chat_cases.py) byte for byte as Debian's
# python3-jinja2 renders the template itself in Hugging Face's environment
# (tests/server/chat_oracle.py), or refuse it; it must never render what
# Jinja fails on.  Templates outside the family (a ChatML look-alike that
# trims content, Zephyr, Llama 3, SmolLM2's with a stray text, Qwen2.5's
# with two different defaults) must be refused at load, exit 5, naming the
# file.
set -u
. tests/lib.sh
PY=/usr/bin/python3
$PY -c 'import jinja2' 2>/dev/null || skip "python3-jinja2 is not installed (tools/install-deps)"
tmpdir d
T=tests/server/templates
$PY tests/server/chat_cases.py 400 > "$d/cases.jsonl" || fail "chat_cases.py"
smol=$SHARED/models/smollm2-135m-instruct/chat_template.jinja
[ -f "$smol" ] || fail "$smol is missing"
for t in "$smol" $T/chatml.jinja $T/qwen1.5-chat.jinja $T/qwen2.5-instruct.jinja $T/qwen2.5-custom-system.jinja \
         $T/smollm2-reformatted.jinja; do
    "$CIS2" serve --render-chat --chat-template "$t" < "$d/cases.jsonl" > "$d/cis2.jsonl" ||
        fail "$t: cis2 serve --render-chat failed"
    $PY tests/server/chat_oracle.py "$t" < "$d/cases.jsonl" > "$d/jinja.jsonl" || fail "$t: the oracle failed"
    $PY - "$d/cis2.jsonl" "$d/jinja.jsonl" "$t" <<'PYEOF' || exit 1
import json, sys
c = [json.loads(l) for l in open(sys.argv[1])]
o = [json.loads(l) for l in open(sys.argv[2])]
if len(c) != len(o):
    sys.exit("FAIL: %s: %d lines from cis2, %d from jinja" % (sys.argv[3], len(c), len(o)))
same = refused = 0
for i, (a, b) in enumerate(zip(c, o)):
    if "text" in a and "text" not in b:
        sys.exit("FAIL: %s: case %d: cis2 rendered what Jinja refuses (%s)" % (sys.argv[3], i, b["error"]))
    if "text" in a and a["text"] != b["text"]:
        sys.exit("FAIL: %s: case %d differs:\n  cis2:  %r\n  jinja: %r" % (sys.argv[3], i, a["text"], b["text"]))
    if "text" in a:
        same += 1
    else:
        st = a["error"].get("status")
        if st != 400:  # never a 5xx, which clients retry (docs/serving.md "Errors")
            sys.exit("FAIL: %s: case %d refused with status %r" % (sys.argv[3], i, st))
        refused += 1
if same < 300:
    sys.exit("FAIL: %s: only %d cases rendered" % (sys.argv[3], same))
print("%s: %d renderings identical to Jinja's, %d refused" % (sys.argv[3], same, refused))
PYEOF
done
for t in $T/refuse-*.jinja; do
    "$CIS2" serve --render-chat --chat-template "$t" < /dev/null > /dev/null 2> "$d/err"
    rc=$?
    [ $rc -eq 5 ] || fail "$t: expected exit 5 (unsupported template), got $rc"
    grep -q "$t" "$d/err" && grep -q "not supported" "$d/err" || fail "$t: the refusal does not name the template: $(cat "$d/err")"
done
echo "chat templates: every rendering equals Jinja's; unknown templates refused"
