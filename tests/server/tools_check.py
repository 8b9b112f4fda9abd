#!/usr/bin/python3
"""tests/server/tools_check.py CASES_DIR PLAN EXPECT - the parsed chat
answers of tests/server/t_serve_tools.sh (client.js `tools` case files,
each already equal whole and streamed) against what the model was made to
write and what a reader of docs/serving.md "Tool calls and reasoning"
expects of it:

  - PLAN: tests/server/forced.py's lines ({after, ids, stop, text}): each
    answer's cis2.generated_token_ids are the path that follows its
    prompt's last token, then the stop token (the model wrote that text and
    nothing else, and chat stopped at that token);
  - EXPECT: {"ids": "call" | "mistral", "cases": {NAME: {"reasoning": S or
    null, "content": S or null, "calls": [[NAME, ARGUMENTS], ...],
    "finish": F, "tool_parser": T, "reasoning_parser": R}}}, hand-written
    in the test from the emitted text and the document's rules;
  - every call's id, recomputed here with hashlib from cis2.prompt (the
    rendered prompt): "call_" + its sha256's first 12 hex digits + "_" +
    the choice index + "_" + the call's index, or, for Mistral, the first
    8 hex digits of the sha256 of that prefix (without the call's index)
    + the call's index: 9 alphanumerics;
  - a case NAME-2 (the next turn, the calls and a tool result sent back;
    held to EXPECT's NAME-2, else to NAME's) has ids none of which NAME
    had.

Exit 1 naming the first difference.
"""
import glob
import hashlib
import json
import os
import sys

cases_dir, plan_file, expect = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3]))
plan = {p["after"]: p for p in map(json.loads, open(plan_file))}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def want_id(prompt, choice, k):
    prefix = "call_%s_%d_" % (hashlib.sha256(prompt.encode()).hexdigest()[:12], choice)
    if expect["ids"] == "mistral":
        return hashlib.sha256(prefix.encode()).hexdigest()[:8] + str(k)
    return prefix + str(k)


ids_of = {}
seen = set()
for f in sorted(glob.glob(cases_dir + "/*.json")):
    name = os.path.basename(f)[:-5]
    c = json.load(open(f))
    x, m = c["cis2"], c["message"]
    base = name.split(".")[0]
    e = expect["cases"].get(base) or expect["cases"].get(base[:-2] if base.endswith("-2") else base)
    if e is None:
        fail("%s: no expectation" % name)
    seen.add(base)
    p = plan.get(x["prompt_token_ids"][-1])
    if p is None:
        fail("%s: the prompt ends with token %d, which starts no path" % (name, x["prompt_token_ids"][-1]))
    if x["generated_token_ids"] != p["ids"] + [p["stop"]]:
        fail("%s: generated %s, the path is %s then %d" % (name, x["generated_token_ids"], p["ids"], p["stop"]))
    got = {"reasoning": m.get("reasoning_content"), "content": m.get("content"),
           "calls": [[t["function"]["name"], t["function"]["arguments"]] for t in m.get("tool_calls") or []],
           "finish": c["finish"], "tool_parser": x.get("tool_parser"), "reasoning_parser": x.get("reasoning_parser")}
    for k, v in got.items():
        if e[k] != v:
            fail("%s: %s %r, expected %r (the model wrote %r)" % (name, k, v, e[k], p["text"]))
    if set(m) - {"role", "content", "reasoning_content", "tool_calls", "refusal"}:
        fail("%s: message keys %s" % (name, sorted(m)))
    for k, t in enumerate(m.get("tool_calls") or []):
        if t["type"] != "function" or t["id"] != want_id(x["prompt"], c["index"], k):
            fail("%s: call %d: id %r type %r, expected %r" % (name, k, t["id"], t["type"],
                                                              want_id(x["prompt"], c["index"], k)))
    ids_of[name] = {t["id"] for t in m.get("tool_calls") or []}
for name, ids in ids_of.items():
    if name.endswith("-2") and ids & ids_of.get(name[:-2], set()):
        fail("%s: the next turn's ids %s repeat the first turn's" % (name, ids))
missing = set(expect["cases"]) - seen - {n for n in expect["cases"] if n.endswith("-2")}
if missing:
    fail("no answer for %s" % sorted(missing))
print("%d answers: the model's text, parsed as the document says, ids as documented" % len(ids_of))
