#!/usr/bin/python3
"""tests/server/stopper.py DIR TEMPLATE - turns a synthetic checkpoint made by
`cis2 synth --config` of an untied `tiny`-like config (vocab 512, byte-level
tokenizer, eos_token_id 257) into one whose decodes stop, for
tests/server/t_serve.sh's stop-rule and chat checks:

  - tokenizer.json gains the added tokens <|im_start|> (256) and <|im_end|>
    (257), so ChatML renders and <|im_end|> is one token;
  - tokenizer_config.json gets TEMPLATE as its chat_template;
  - lm_head.weight becomes zero except row 257 (<|im_end|>) = +c*w and row
    65 ("A") = -c*w for w = row 20 of the original and c = 64: every step's
    logits are 0 except +a and -a, so each step chooses "A" or <|im_end|>
    by the sign of a (greedily; sampling at temperature <= 1 does the same
    almost surely), and a run emits some "A"s and then <|im_end|> within a
    few tokens.

Only bytes of the BF16 tensor change (Python, no torch): the sign bit flips
and the exponent grows by 6 (x64) exactly.
"""
import json
import struct
import sys

d, template = sys.argv[1], sys.argv[2]
ROW = 20  # row 20 of the original: chat prompts get "A" then <|im_end|>, "Once upon a time" 5 "A"s

tok = json.load(open(d + "/tokenizer.json"))
assert tok["added_tokens"] == [] and len(tok["model"]["vocab"]) == 256, "expects cis2 synth's minimal tokenizer"
tok["added_tokens"] = [
    {"id": 256 + i, "content": c, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
     "special": True}
    for i, c in enumerate(["<|im_start|>", "<|im_end|>"])]
json.dump(tok, open(d + "/tokenizer.json", "w"), ensure_ascii=False, indent=1)
json.dump({"chat_template": open(template).read(), "eos_token": "<|im_end|>"}, open(d + "/tokenizer_config.json", "w"))

path = d + "/model.safetensors"
data = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
hdr = json.loads(data[8:8 + n])
t = hdr["lm_head.weight"]
assert t["dtype"] == "BF16" and t["shape"][0] == 512, t
rows, cols = t["shape"]
base = 8 + n + t["data_offsets"][0]
w = [struct.unpack_from("<H", data, base + 2 * (ROW * cols + k))[0] for k in range(cols)]  # row ROW of the original


def times64(h):
    e = (h >> 7) & 0xFF
    if e == 0:
        return h & 0x8000  # zero stays zero
    assert e + 6 < 0xFF
    return (h & 0x807F) | ((e + 6) << 7)


for r in range(rows):
    for k in range(cols):
        v = 0
        if r == 257:
            v = times64(w[k])
        elif r == 65:
            v = times64(w[k]) ^ 0x8000
        struct.pack_into("<H", data, base + 2 * (r * cols + k), v)
open(path, "wb").write(bytes(data))
