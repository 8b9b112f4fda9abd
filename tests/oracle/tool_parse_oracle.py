#!/usr/bin/python3
"""tests/oracle/tool_parse_oracle.py - serve/serve_parse.c (docs/chat-output.md
"Tool calls and reasoning") against what the families' real chat templates
write for an assistant turn, rendered by Debian's python3-jinja2 in
transformers' environment (chat_render.py).

For each conversation below and each template that renders tool calls or
reasoning (Qwen3, Qwen3.5, SmolLM3, Llama-3.1/3.2, Mistral v0.3, gpt-oss):

    prompt = render(messages[:-1], add_generation_prompt=True)
    whole  = render(messages,      add_generation_prompt=False)

whole must start with prompt; what follows, less the turn's stop token
(<|im_end|>, <|eot_id|>, </s>, <|call|>, <|return|>), is what the model
would have generated.  The parser (the unit test's driver, configured by
--detect on the template and serve_parse_prompt_in_think on the prompt)
must give back the assistant message: its content, its reasoning, its
tool calls' names and arguments (the arguments JSON-equal to the message's
and, where the template writes them as JSON, the same text as the
template's tojson), finish_reason "tool_calls" exactly when there are
calls, and the same answer when fed byte by byte.

    tool_parse_oracle.py TEMPLATES_DIR CORPUS_JSON DRIVER [RUNNER...]

prints one line per case and exits 1 on any difference.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "the city"},
                "days": {"type": "integer"},
                "metric": {"type": "boolean"},
                "temp": {"type": ["number", "null"]},
                "opts": {"type": "object"},
                "tags": {"type": "array"},
                "zip": {"type": "string"},
            },
            "required": ["city"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}
TOOLS = [WEATHER, SEARCH]

ARGS = [
    {"city": "Paris", "days": 3},
    {"city": "K\u00f6ln \U0001F327", "metric": True, "temp": 21.5, "zip": "50667"},
    {"city": "a \"quoted\" back\\slash\nnew line", "opts": {"a": [1, 2, {"b": None}], "c": "x"}, "tags": ["x", "y"]},
    {"query": "tool calls in C"},
    {"city": "Oslo", "temp": None, "metric": False, "days": 0},
]


def call(i, name, args, as_string=False):
    return {"id": "chatcmpl-tool-%d" % i, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False) if as_string else args}}


def mistral_id(i):
    return "abcDEF%03d" % i  # Mistral's ids are 9 alphanumerics


USER = {"role": "user", "content": "What's the weather in Paris, and search for tool calls?"}

# name -> conversations: (label, messages, tool calls expected [(name, args)], reasoning, content)
def conversations(name):
    out = []
    if name.startswith("Qwen3"):
        xml = name.startswith("Qwen3.5")
        out.append(("reasoning, content, two calls", [USER, {
            "role": "assistant", "reasoning_content": "The user wants weather.\nThen a search.",
            "content": "Let me look both up.",
            "tool_calls": [call(0, "get_weather", ARGS[0]), call(1, "search", ARGS[3])]}]))
        out.append(("reasoning, one call with every kind of value", [USER, {
            "role": "assistant", "reasoning_content": "Typed values.", "content": "",
            "tool_calls": [call(2, "get_weather", ARGS[2])]}]))
        out.append(("Unicode, booleans, numbers", [USER, {
            "role": "assistant", "reasoning_content": "K\u00f6ln it is.", "content": "",
            "tool_calls": [call(3, "get_weather", ARGS[1]), call(4, "get_weather", ARGS[4])]}]))
        out.append(("reasoning and an answer", [USER, {
            "role": "assistant", "reasoning_content": "Easy.\n\nTwo lines.", "content": "It is sunny in Paris."}]))
        if not xml:
            out.append(("arguments as a string", [USER, {
                "role": "assistant", "reasoning_content": "String arguments.", "content": "",
                "tool_calls": [call(5, "get_weather", {"city": "Paris", "days": 2}, as_string=True)]}]))
    elif name.startswith("SmolLM3"):
        out.append(("think in content", [USER, {
            "role": "assistant", "content": "<think>\nThe user wants weather.\n</think>\nIt is sunny."}]))
    elif name.startswith("Llama-3.1") or name.startswith("Llama-3.2"):
        for i, a in enumerate((ARGS[0], ARGS[1], ARGS[2])):
            out.append(("one call %d" % i, [USER, {
                "role": "assistant", "content": "", "tool_calls": [call(10 + i, "get_weather", a)]}]))
    elif name.startswith("Mistral"):
        c1 = call(20, "get_weather", ARGS[1])
        c1["id"] = mistral_id(1)
        c2 = call(21, "search", ARGS[3])
        c2["id"] = mistral_id(2)
        c3 = call(22, "get_weather", ARGS[2])
        c3["id"] = mistral_id(3)
        out.append(("one call", [USER, {"role": "assistant", "content": "", "tool_calls": [c1]}]))
        out.append(("two calls", [USER, {"role": "assistant", "content": "", "tool_calls": [c2, c3]}]))
    elif name.startswith("gpt-oss"):
        out.append(("thinking and a call", [USER, {
            "role": "assistant", "thinking": "Need the weather tool.",
            "tool_calls": [call(30, "get_weather", ARGS[0])]}]))
        out.append(("a call with every kind of value", [USER, {
            "role": "assistant", "thinking": "Typed.", "tool_calls": [call(31, "get_weather", ARGS[2])]}]))
        out.append(("a call, no thinking", [USER, {
            "role": "assistant", "tool_calls": [call(32, "search", ARGS[3])]}]))
        out.append(("thinking and a final answer", [USER, {
            "role": "assistant", "thinking": "Simple arithmetic.", "content": "2 + 2 = 4, K\u00f6ln."}]))
    return out


STOPS = ["<|im_end|>\n", "<|im_end|>", "<|eot_id|>", "</s>", "<|call|>", "<|return|>"]


def expected(name, msg):
    """The fields the parser must give back for the assistant message msg."""
    calls = [(c["function"]["name"], c["function"]["arguments"]) for c in msg.get("tool_calls", [])]
    if name.startswith("gpt-oss"):
        calls = calls[:1]  # the template writes the first call only
        return msg.get("thinking", ""), msg.get("content", "") if not calls else "", calls
    if name.startswith("SmolLM3"):
        c = msg["content"]
        r, _, rest = c.partition("</think>")
        return r.split("<think>")[-1].strip("\n"), rest.lstrip("\n"), calls
    return msg.get("reasoning_content", ""), msg.get("content", ""), calls


def render(template, cases):
    p = subprocess.run([sys.executable, os.path.join(HERE, "chat_render.py"), "render", template],
                       input="".join(json.dumps(c, ensure_ascii=True) + "\n" for c in cases),
                       capture_output=True, text=True, check=True)
    return [json.loads(l) for l in p.stdout.splitlines()]


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    tdir, corpus, driver = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(corpus, encoding="utf-8") as f:
        tokens = json.load(f)["tokens"]
    jobs = []   # (name, label, expected, driver line)
    bad = 0
    for fn in sorted(os.listdir(tdir)):
        if not fn.endswith(".jinja"):
            continue
        name = fn[:-len(".jinja")]
        convs = conversations(name)
        if not convs:
            continue
        path = os.path.join(tdir, fn)
        det = subprocess.run(driver + ["--detect", path], capture_output=True, text=True, check=True).stdout.split()
        toks = tokens.get(name, tokens["default"])
        cases = []
        for label, msgs in convs:
            base = dict(toks, tools=TOOLS)
            cases.append(dict(base, messages=msgs[:-1], add_generation_prompt=True))
            cases.append(dict(base, messages=msgs, add_generation_prompt=False))
        outs = render(path, cases)
        for i, (label, msgs) in enumerate(convs):
            a, b = outs[2 * i], outs[2 * i + 1]
            if "text" not in a or "text" not in b or not b["text"].startswith(a["text"]):
                print("FAIL %s / %s: the rendering is not prompt + answer: %s %s" % (name, label, a, b))
                bad += 1
                continue
            gen = b["text"][len(a["text"]):]
            for s in STOPS:
                if gen.endswith(s):
                    gen = gen[:-len(s)]
                    break
            line = {"tools": det[0], "reasoning": det[1], "tools_on": True, "prompt": a["text"],
                    "schema": TOOLS, "text": gen}
            jobs.append((name, label, expected(name, msgs[-1]), line))
    if not jobs:
        print("no template to check")
        return 1
    p = subprocess.run(driver + ["--parse"], input="".join(json.dumps(j[3]) + "\n" for j in jobs),
                       capture_output=True, text=True)
    res = [json.loads(l) for l in p.stdout.splitlines()]
    if p.returncode or len(res) != len(jobs):
        print("FAIL: the driver exited %d with %d results for %d cases: %s" % (p.returncode, len(res), len(jobs),
                                                                                p.stderr.strip()))
        return 1
    for (name, label, (reasoning, content, calls), line), r in zip(jobs, res):
        why = []
        if r["reasoning"] != reasoning:
            why.append("reasoning %r, want %r" % (r["reasoning"], reasoning))
        if r["content"] != content:
            why.append("content %r, want %r" % (r["content"], content))
        if len(r["calls"]) != len(calls):
            why.append("%d calls, want %d" % (len(r["calls"]), len(calls)))
        for k, (got, (cname, cargs)) in enumerate(zip(r["calls"], calls)):
            if got["name"] != cname:
                why.append("call %d name %r, want %r" % (k, got["name"], cname))
            want_obj = json.loads(cargs) if isinstance(cargs, str) else cargs
            try:
                got_obj = json.loads(got["arguments"])
            except ValueError:
                got_obj = "(not JSON) " + got["arguments"]
            # canonical text: true is not 1, 3 is not 3.0
            if json.dumps(got_obj, sort_keys=True) != json.dumps(want_obj, sort_keys=True):
                why.append("call %d arguments %s, want %s" % (k, got["arguments"], json.dumps(want_obj)))
            # where the template writes the arguments as JSON text, the parser passes that text on
            text = cargs if isinstance(cargs, str) else json.dumps(cargs, ensure_ascii=False)
            if not name.startswith("Qwen3.5") and got["arguments"] != text:
                why.append("call %d arguments text %r, want the template's %r" % (k, got["arguments"], text))
            if got["id"] != "call_%d" % k:
                why.append("call %d id %r" % (k, got["id"]))
        if r["finish"] != ("tool_calls" if calls else "stop"):
            why.append("finish %s" % r["finish"])
        if not r["stream_same"]:
            why.append("byte by byte differs from whole")
        if why:
            bad += 1
            print("FAIL %s / %s (%s %s): %s\n  text: %r" % (name, label, line["tools"], line["reasoning"],
                                                           "; ".join(why), line["text"]))
        else:
            print("ok   %s / %s (%s %s, %d calls)" % (name, label, line["tools"], line["reasoning"], len(calls)))
    print("%d cases, %d differ" % (len(jobs), bad))
    return 1 if bad else 0


sys.exit(main())
