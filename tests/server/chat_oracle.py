#!/usr/bin/python3
"""tests/server/chat_oracle.py TEMPLATE TOKENIZER_CONFIG < bodies.jsonl

The reference for the prompt `cis2 serve` renders for a chat request
(docs/serving.md "Chat templates"): each stdin line is a chat request body
(messages, tools, documents, chat_template_kwargs, add_generation_prompt,
and whatever else a request carries), each stdout line the prompt
Hugging Face transformers' apply_chat_template renders for it, written here
from transformers' documentation and vLLM's, not from cis2:

  - the template: TEMPLATE, or with TEMPLATE "-" tokenizer_config.json's
    chat_template: a string, or the named list whose "tool_use" entry is
    taken when the request has tools (not None) and "default" otherwise;
  - the variables: the tokenizer's special_tokens_map (bos_token,
    eos_token, unk_token, sep_token, pad_token, cls_token, mask_token: a
    string or an AddedToken's content, only those set and non-empty;
    additional_special_tokens as a list), then chat_template_kwargs over
    them, then messages, tools, documents (None when absent) and
    add_generation_prompt (default True: the server's);
  - the messages as vLLM hands OpenAI's to the template: a tool call's
    function.arguments JSON string parsed (json.loads), content given as a
    list of text parts joined with "\\n".

The rendering is Debian's python3-jinja2 in transformers' environment,
tests/oracle/chat_render.py's (strftime_now pinned to 2025-03-07 14:05:09,
which is SOURCE_DATE_EPOCH=1741356309 for the server).  TOKENIZER_CONFIG
may be "-" (none).  Output: {"text": ...}, {"raise": message} (the
template's raise_exception), {"error": "Type: message"}.
"""
import copy
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
from chat_render import Raised, environment  # noqa: E402

SPECIAL = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]


def token_text(v):
    if isinstance(v, dict):
        v = v.get("content")
    return v if isinstance(v, str) else None


def special_tokens_map(cfg):
    out = {}
    for k in SPECIAL:
        t = token_text(cfg.get(k))
        if t:
            out[k] = t
    extra = [t for t in (token_text(x) for x in cfg.get("additional_special_tokens") or []) if t is not None]
    if extra:
        out["additional_special_tokens"] = extra
    return out


def openai_to_template(messages):
    msgs = copy.deepcopy(messages)
    for m in msgs:
        c = m.get("content")
        if isinstance(c, list):
            m["content"] = "\n".join(p["text"] for p in c)
        for tc in m.get("tool_calls") or []:
            f = tc.get("function", {})
            if isinstance(f.get("arguments"), str):
                f["arguments"] = json.loads(f["arguments"])
    return msgs


def main():
    tpath, cpath = sys.argv[1], sys.argv[2]
    cfg = {}
    if cpath != "-":
        with open(cpath, encoding="utf-8") as f:
            cfg = json.load(f)
    env = environment()
    if tpath != "-":
        with open(tpath, encoding="utf-8", newline="") as f:
            templates = {"default": f.read()}
    elif isinstance(cfg.get("chat_template"), list):
        templates = {t["name"]: t["template"] for t in cfg["chat_template"]}
    else:
        templates = {"default": cfg["chat_template"]}
    compiled = {k: env.from_string(v) for k, v in templates.items()}
    specials = special_tokens_map(cfg)
    for line in sys.stdin:
        body = json.loads(line)
        tools = body.get("tools")
        tmpl = compiled["tool_use"] if tools is not None and "tool_use" in compiled else compiled["default"]
        kwargs = dict(specials)
        kwargs.update(body.get("chat_template_kwargs") or {})
        agp = body.get("add_generation_prompt")
        try:
            text = tmpl.render(messages=openai_to_template(body["messages"]), tools=tools,
                               documents=body.get("documents"),
                               add_generation_prompt=True if agp is None else agp, **kwargs)
            out = {"text": text}
        except Raised as e:
            out = {"raise": str(e)}
        except Exception as e:  # the template failed on this input
            out = {"error": "%s: %s" % (type(e).__name__, e)}
        print(json.dumps(out, ensure_ascii=True))


main()
