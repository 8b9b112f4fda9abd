#!/usr/bin/python3
"""tests/server/chat_oracle.py TEMPLATE < cases.jsonl

The reference for cis2's chat rendering: renders each chat request (one
JSON object per line: {"messages": [...], "add_generation_prompt": bool,
"tools": [...]?}) with Debian's python3-jinja2 running the template itself,
in the environment Hugging Face transformers' apply_chat_template uses
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, the
loopcontrols extension, its tojson filter and raise_exception), and prints
one JSON line each: {"text": "..."} or {"error": "..."}.
"""
import json
import sys

import jinja2.ext
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def main():
    with open(sys.argv[1], encoding="utf-8", newline="") as f:
        src = f.read()
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    tmpl = env.from_string(src)
    for line in sys.stdin:
        req = json.loads(line)
        try:
            text = tmpl.render(messages=req.get("messages"), tools=req.get("tools"),
                               add_generation_prompt=req.get("add_generation_prompt", True),
                               bos_token="<|im_start|>", eos_token="<|im_end|>")
            out = {"text": text}
        except Exception as e:  # the template refused, or Jinja failed on the input
            out = {"error": "%s: %s" % (type(e).__name__, e)}
        print(json.dumps(out, ensure_ascii=True))


main()
