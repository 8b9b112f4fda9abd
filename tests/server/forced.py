#!/usr/bin/python3
"""tests/server/forced.py DIR PLAN.json - turns a synthetic checkpoint made
by `cis2 synth --config` (untied, any family of tests/families but Gemma)
into one whose greedy decode writes chosen texts, for
tests/server/t_serve_tools.sh: a real model, run by the real engine, that
emits a tool call, a reasoning block, a harmony message, so that the
server's answer parsing is tested on what a model wrote and not on a
hook.

PLAN.json: {"paths": [{"after": TEXT, "emit": [PIECE, ...], "stop": TEXT},
...], "window": W, "markers": [TEXT, ...]} (the last two optional, together).
TEXT is one token's text (an added token's content, or a vocabulary
token's bytes); a PIECE is {"special": TEXT} (that added token), {"token":
TEXT} (that one token) or a string (written with ordinary vocabulary
tokens).  After the token `after` (the last token of the prompt the chat
template renders) the model writes the pieces, then `stop`.

How: the model is a bigram machine.  Every tensor of the layers is zero
except the norms' weights (one) and MXFP4 scale bytes (kept: their zero
blocks are zero weights), so each attention and MLP block adds zero and
the last hidden state is the current token's embedding; the final norm's
weight is one.  Each token of a path that has a successor (the `after`
token, every emitted token) gets a one-hot code of the hidden width H:
embed_tokens[t] = code(t), lm_head[next] += 8 * code(t), every other row
zero.  After t the normalised hidden state is sqrt(H) * code(t), so the
next token's logit is 8 * sqrt(H) = 64 and every other token's 0: the
argmax by 64 (greedy always; sampling at temperature 1 too, but for
chances near e^-50).  Such a machine cannot write a token twice with two
different successors, so each string piece is cut into vocabulary tokens
none of which is used elsewhere: a depth-first search, longer tokens
first, remembering dead ends (a text with no such cut is refused: pick
another spelling of it, white space or JSON spacing).  SentencePiece's
byte-fallback tokens (<0x22>) are not used: the library's raw bytes of
them are their text, not the byte.

With a window (gpt-oss, whose harmony messages repeat <|channel|> and
<|message|>): layer 0 must be a sliding-window layer of W tokens.  Its
attention has q = k = 0 (uniform weights over the window, docs/models.md
§M5.2) and sinks of -9984 (no weight), v_proj copies marker m's code into
value dimension m of kv head 0 and o_proj writes 2x that into a residual
dimension of its own: after a step, marker m's dimension is 16 / W when m
is among the window's W tokens (the step's own and the W - 1 before it),
else 0.  A step's state is its token and the set A of markers in its
window; a token may repeat when its states differ.  For a token with
several states, the successor of state (t, A) also gets, per marker, +4
on the marker's dimension when m is in A, else -4, and +4 on code(t) per
marker not in A: its logit is then highest in exactly the state A (by 4
times the marker's normalised value, 2 x 16/W > 1 of code(t), for each
marker that differs), and logits of 12 (not 8) on the code keep every
other token below.  The prompt's tokens are taken to hold no marker in
the window (the test's generated ids show if they did).

Prints, one JSON line per path: {"after": ID, "ids": [...], "stop": ID,
"text": the emitted pieces' bytes as UTF-8}.  Only numpy and the standard
library; the safetensors file is read and written here (struct + json).
"""
import json
import struct
import sys

import numpy as np

d, plan = sys.argv[1], json.load(open(sys.argv[2]))
cfg = json.load(open(d + "/config.json"))
assert not cfg.get("tie_word_embeddings", False), "needs an untied config (tie_word_embeddings false)"
assert not cfg.get("model_type", "").startswith("gemma"), "Gemma's norms are (1 + w): not modelled here"
H = cfg["hidden_size"]

# ------------------------------------------------------------ the vocabulary's bytes
tok = json.load(open(d + "/tokenizer.json"))


def gpt2_decoder():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, k = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + k)
            k += 1
    return {chr(c): b for b, c in zip(bs, cs)}


dec = json.dumps(tok.get("decoder"))
byte_level = '"ByteLevel"' in dec
g2 = gpt2_decoder()


def piece_bytes(s):
    if byte_level:
        return bytes(g2[ch] for ch in s) if all(ch in g2 for ch in s) else None
    if len(s) == 6 and s.startswith("<0x") and s.endswith(">"):
        return None  # SentencePiece's byte fallback: the library's raw bytes of it are its text, not left out here
    return s.replace("\u2581", " ").encode()


added = {a["content"]: a["id"] for a in tok.get("added_tokens", [])}
added_ids = set(added.values())
by_bytes = {}
for s, i in tok["model"]["vocab"].items():
    if i in added_ids:
        continue
    b = piece_bytes(s)
    if b:
        by_bytes.setdefault(b, []).append(i)
for v in by_bytes.values():
    v.sort()
maxlen = max(len(b) for b in by_bytes)
id_bytes = {i: b for b, ids in by_bytes.items() for i in ids}
for c, i in added.items():
    id_bytes[i] = c.encode()


def one_token(text):
    if text in added:
        return added[text]
    ids = by_bytes.get(text.encode())
    assert ids, "%r is not one token" % text
    return ids[0]


# ------------------------------------------------------------ the paths
used = set(one_token(p["after"]) for p in plan["paths"])
assert len(used) == len(plan["paths"]), "two paths start after the same token"


def cut(text):
    """text's bytes as ordinary tokens none of which is used elsewhere: a
    depth-first search, longer tokens first, that remembers its dead ends
    (a position with the same used tokens among those that could still
    serve) and gives up after 200000 steps."""
    t = text.encode()
    cands = [[i for n in range(min(maxlen, len(t) - p), 0, -1) for i in by_bytes.get(t[p:p + n], [])]
             for p in range(len(t))]
    later = [set() for _ in range(len(t) + 1)]  # the tokens that could serve at positions >= p
    for p in range(len(t) - 1, -1, -1):
        later[p] = later[p + 1] | set(cands[p])
    dead, out, steps = set(), [], [200000]

    def go(pos):
        if pos == len(t):
            return True
        key = (pos, frozenset(used & later[pos]))
        steps[0] -= 1
        if key in dead or steps[0] < 0:
            return False
        for i in cands[pos]:
            if i in used:
                continue
            used.add(i)
            out.append(i)
            if go(pos + len(id_bytes[i])):
                return True
            out.pop()
            used.discard(i)
        dead.add(key)
        return False

    if not go(0):
        raise SystemExit("forced.py: no cut of %r into distinct unused tokens" % text)
    return out


W = plan.get("window")  # markers mode (below)
markers = [one_token(m) for m in plan.get("markers", [])]
assert bool(W) == bool(markers), "window and markers go together"
paths = []
for p in plan["paths"]:
    ids = []
    for piece in p["emit"]:
        if isinstance(piece, dict):  # one given token: an added one ("special") or any ("token")
            i = added[piece["special"]] if "special" in piece else one_token(piece["token"])
            assert W or i not in used, "%r twice: only with a window" % piece
            used.add(i)
            ids.append(i)
        else:
            ids += cut(piece)
    paths.append({"after": one_token(p["after"]), "ids": ids, "stop": one_token(p["stop"]),
                  "text": b"".join(id_bytes[i] for i in ids).decode("utf-8")})

# ------------------------------------------------------------ the weights
# each step's state: its token and, with a window, the markers among the
# window's tokens (the step's own and the W - 1 before it; the prompt's
# are taken to hold none); one successor per state
succ = {}
for p in paths:
    seq = [p["after"]] + p["ids"] + [p["stop"]]
    for i in range(len(seq) - 1):
        seen = frozenset(m for m in markers if m in seq[max(0, i - W + 1):i + 1]) if W else frozenset()
        st = (seq[i], seen)
        assert succ.get(st, seq[i + 1]) == seq[i + 1], "token %d is followed by two tokens in one state" % seq[i]
        succ[st] = seq[i + 1]
toks = sorted({t for t, _ in succ})
ambiguous = {t for t in toks if sum(1 for u, _ in succ if u == t) > 1}
mdim = {m: H - 1 - k for k, m in enumerate(markers)}
assert len(toks) <= H - len(markers), "too many tokens for the hidden width"
code = {t: k for k, t in enumerate(toks)}
S, T = (12.0, 4.0) if W else (8.0, 0.0)

path = d + "/model.safetensors"
data = open(path, "rb").read()
hn = struct.unpack("<Q", data[:8])[0]
hdr = json.loads(data[8:8 + hn])
V = next(t["shape"][0] for k, t in hdr.items() if k.endswith("embed_tokens.weight"))
emb = np.zeros((V, H), np.float32)
head = np.zeros((V, H), np.float32)
for t in toks:
    emb[t, code[t]] = 1.0
for (t, seen), n in succ.items():
    head[n, code[t]] += S
    if t in ambiguous:  # T for each marker whose presence or absence agrees with the state's
        for m in markers:
            head[n, mdim[m]] += T if m in seen else -T
        head[n, code[t]] += T * sum(1 for m in markers if m not in seen)
attn = {}
if W:  # one sliding-window layer: uniform weights (q, k zero) over the window, no sink;
    # v_proj copies a marker token's code into value dim k of kv head 0, o_proj
    # (query head 0's slice) writes twice that into the marker's residual dim
    cfg_ok = cfg.get("layer_types", [""])[0] == "sliding_attention" and cfg.get("sliding_window") == W
    assert cfg_ok, "markers need layer 0 to slide with a window of %d" % W
    heads, kvh = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or H // heads
    v = np.zeros((kvh * hd, H), np.float32)
    o = np.zeros((H, heads * hd), np.float32)
    for k, m in enumerate(markers):
        v[k, code[m]] = 1.0
        o[mdim[m], k] = 2.0
    attn = {"self_attn.v_proj.weight": v, "self_attn.o_proj.weight": o,
            "self_attn.sinks": np.full((heads,), -9984.0, np.float32)}


def as_dtype(a, dt):
    a = np.ascontiguousarray(a, np.float32)
    if dt == "F32":
        return a.astype("<f4").tobytes()
    if dt == "BF16":  # exact for every value written here
        return (a.view(np.uint32) >> 16).astype("<u2").tobytes()
    if dt == "F16":
        return a.astype("<f2").tobytes()
    raise SystemExit("forced.py: dtype %s" % dt)


out = {}
body = bytearray()
for k in sorted((k for k in hdr if k != "__metadata__"), key=lambda k: hdr[k]["data_offsets"][0]):
    t = hdr[k]
    size = t["data_offsets"][1] - t["data_offsets"][0]
    attn_key = k.split("layers.0.", 1)[-1]
    if k.endswith("embed_tokens.weight"):
        b = as_dtype(emb, t["dtype"])
    elif "layers.0." in k and attn_key in attn:
        assert list(attn[attn_key].shape) == t["shape"], k
        b = as_dtype(attn[attn_key], t["dtype"])
    elif k == "lm_head.weight":
        b = as_dtype(head, t["dtype"])
    elif k.endswith("norm.weight"):  # input_layernorm, post_attention_layernorm, q_norm, k_norm, model.norm
        b = as_dtype(np.ones(t["shape"], np.float32), t["dtype"])
    elif k.endswith("_scales"):  # MXFP4 scales as they were (the blocks, zero, make zero weights)
        b = data[8 + hn + t["data_offsets"][0]:8 + hn + t["data_offsets"][1]]
    else:  # every projection, bias, router, expert block and sink
        b = bytes(size)
    assert len(b) == size, k
    out[k] = dict(t, data_offsets=[len(body), len(body) + size])
    body += b
if "__metadata__" in hdr:
    out["__metadata__"] = hdr["__metadata__"]
h = json.dumps(out).encode()
h += b" " * (-len(h) % 8)
open(path, "wb").write(struct.pack("<Q", len(h)) + h + bytes(body))
for p in paths:
    print(json.dumps(p, ensure_ascii=False))
