#!/usr/bin/python3
"""tests/server/chat_family_tok.py TOKENIZER_JSON FIRST_ID [--bos TEXT] TOKEN...

Adds a family's chat control tokens to a tokenizer.json in place, for
tests/server/t_serve_chat_families.sh where the family's own tokenizer is
not at hand (Phi-3's <|user|>, SmolLM3's <|im_start|>, Mistral's [INST]):
each TOKEN not already there becomes an added token as a checkpoint's
tokenizer.json lists its special tokens (special true, normalized false,
no stripping), with the ids FIRST_ID, FIRST_ID + 1, ... in order.  --bos
TEXT (one of them) also gives the file the post-processor Llama 2's and
Phi-3's have (TemplateProcessing: TEXT before every encoded sequence), so
a test can tell a prompt that got a second BOS."""
import json
import sys

path, nxt = sys.argv[1], int(sys.argv[2])
args = sys.argv[3:]
bos = None
if args[:1] == ["--bos"]:
    bos, args = args[1], args[2:]
with open(path, encoding="utf-8") as f:
    j = json.load(f)
have = {a["content"]: a["id"] for a in j.get("added_tokens") or []}
for t in args:
    if t in have:
        continue
    j.setdefault("added_tokens", []).append({"id": nxt, "content": t, "single_word": False, "lstrip": False,
                                             "rstrip": False, "normalized": False, "special": True})
    have[t] = nxt
    nxt += 1
if bos is not None:
    j["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {bos: {"id": bos, "ids": [have[bos]], "tokens": [bos]}}}
with open(path, "w", encoding="utf-8") as f:
    json.dump(j, f, ensure_ascii=False)
