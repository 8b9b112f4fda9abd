#!/usr/bin/env python3
"""fuzz/seeds.py - regenerate the seed corpora in fuzz/corpus/<target>/.

Small hand-made inputs (a few KB at most), valid and near-valid, so each
libFuzzer target starts from the interesting structure of its format.
Nothing is copied from ../shared (the real model files stay outside the
repo).  Run from the repo root: python3 fuzz/seeds.py
Files named regress_* are inputs that once failed a target (kept by hand,
not written here); docs/inputs.md and tests/cli/t_hostile.sh cover them too.
"""
import json, os, struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- safetensors: 8-byte LE header length, JSON header, data area ----
def st(tensors, meta=None, pad=b"", raw_header=None):
    """tensors: list of (name, dtype, shape, nbytes) laid out in order."""
    hdr, pos = {}, 0
    if meta is not None:
        hdr["__metadata__"] = meta
    data = b""
    for name, dt, shape, nb in tensors:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [pos, pos + nb]}
        data += bytes((i * 37 + 11) & 0xFF for i in range(nb))
        pos += nb
    h = raw_header if raw_header is not None else json.dumps(hdr, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h)) + h + data + pad


put("safetensors", "two_bf16", st([("a", "BF16", [2, 3], 12), ("b", "BF16", [4], 8)]))
put("safetensors", "f32_meta", st([("w", "F32", [3], 12)], meta={"format": "pt"}))
put("safetensors", "odd_header", st([("x.weight", "BF16", [1, 1], 2), ("y", "F32", [2], 8)], meta={"k": "v "}))
put("safetensors", "scalar_empty", st([("s", "F32", [], 4), ("e", "BF16", [0, 5], 0)]))
put("safetensors", "empty", st([]))
put("safetensors", "layers", st([("model.embed_tokens.weight", "BF16", [4, 2], 16),
                                  ("model.layers.0.input_layernorm.weight", "BF16", [2], 4),
                                  ("model.norm.weight", "F32", [2], 8)]))
put("safetensors", "overlap", st([], raw_header=b'{"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},'
                                  b'"b":{"dtype":"BF16","shape":[2],"data_offsets":[2,6]}}') + bytes(6))
put("safetensors", "hole", st([("a", "BF16", [1], 2)], pad=b"\0\0\0"))
put("safetensors", "len_past_end", struct.pack("<Q", 1 << 20) + b"{}")

# ---- config.json ----
base = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
        "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 256,
        "rms_norm_eps": 1e-05, "rope_theta": 10000, "tie_word_embeddings": True,
        "attention_bias": False, "rope_scaling": None, "torch_dtype": "bfloat16"}
put("config", "llama_tiny.json", json.dumps(base, indent=1))
q = dict(base, model_type="qwen2", hidden_size=96, intermediate_size=224, num_hidden_layers=3,
         num_attention_heads=6, vocab_size=640, rope_theta=1000000.0, tie_word_embeddings=False,
         use_sliding_window=False, sliding_window=None, rms_norm_eps=1e-06, attention_bias=True)
put("config", "qwen2.json", json.dumps(q))
minimal = {k: base[k] for k in ("hidden_size", "intermediate_size", "num_hidden_layers",
                                "num_attention_heads", "vocab_size", "rms_norm_eps")}
put("config", "minimal.json", json.dumps(minimal))
put("config", "head_dim.json", json.dumps(dict(base, head_dim=16, pretraining_tp=1, mlp_bias=False)))
put("config", "bad_heads.json", json.dumps(dict(base, num_attention_heads=7)))
put("config", "huge.json", json.dumps(dict(base, hidden_size=65536, intermediate_size=1 << 20,
                                           num_hidden_layers=1024, vocab_size=1 << 22)))
# the families of docs/models.md: llama3 RoPE (§M1), qwen3's own head_dim
# (§M2), smollm3's no-RoPE layers (§M3), olmo2 (§M4), mistral unwindowed
# and windowed, phi3 (§M5, §M6), gemma3_text (§M7)
put("config", "llama3_rope.json", json.dumps(dict(base, head_dim=16, rope_theta=500000.0, rope_scaling={
    "rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64})))
put("config", "qwen3.json", json.dumps(dict(base, model_type="qwen3", head_dim=32, sliding_window=None,
                                            use_sliding_window=False, max_window_layers=2)))
put("config", "smollm3.json", json.dumps(dict(base, model_type="smollm3", num_hidden_layers=4,
                                              no_rope_layers=[1, 1, 1, 0], no_rope_layer_interval=4,
                                              use_sliding_window=False, sliding_window=None)))
put("config", "olmo2.json", json.dumps(dict(base, model_type="olmo2", tie_word_embeddings=False)))
put("config", "mistral.json", json.dumps(dict(base, model_type="mistral", sliding_window=None)))
put("config", "mistral_window.json", json.dumps(dict(base, model_type="mistral", sliding_window=4096)))
put("config", "phi3.json", json.dumps(dict(base, model_type="phi3", sliding_window=2047, embd_pdrop=0.0,
                                           resid_pdrop=0.0, original_max_position_embeddings=4096)))
put("config", "gemma3.json", json.dumps(dict(base, model_type="gemma3_text", hidden_act=None, head_dim=16,
                                             sliding_window=5, sliding_window_pattern=2, query_pre_attn_scalar=24,
                                             rope_local_base_freq=10000.0, hidden_activation="gelu_pytorch_tanh",
                                             final_logit_softcapping=None)))

# ---- tokenizer.json (the SmolLM2 shape, a small vocab) ----
def b2u():
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


M = b2u()
def tok(vocab_words, merges, added=(), pre="seq", merges_as_pairs=False, extra_model=None):
    vocab = {M[b]: i for i, b in enumerate(range(256))}
    for w in vocab_words:
        vocab[w] = len(vocab)
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    pt = {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, bl]} \
        if pre == "seq" else bl
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
             "ignore_merges": False, "vocab": vocab,
             "merges": [m.split(" ") for m in merges] if merges_as_pairs else list(merges)}
    model.update(extra_model or {})
    return json.dumps({"version": "1.0", "truncation": None, "padding": None,
                       # ids after the vocab, where the reference library puts
                       # added tokens that are not vocab entries
                       "added_tokens": [dict(id=len(vocab) + k, content=c, single_word=False, lstrip=False,
                                             rstrip=False, normalized=False, special=True)
                                        for k, c in enumerate(added)],
                       "normalizer": None, "pre_tokenizer": pt, "post_processor": None,
                       "decoder": bl, "model": model}, ensure_ascii=False, separators=(",", ":"))


words = ["Ġt", "he", "Ġthe", "in", "Ġa", "er", "on", "Ġo", "Ġon", "ce"]
merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ o", "Ġo n", "c e"]
put("tokenizer_load", "smollm_shape.json", tok(words, merges, added=["<|endoftext|>", "<|im_start|>"]))
put("tokenizer_load", "pair_merges.json", tok(words, merges, pre="bytelevel", merges_as_pairs=True))
put("tokenizer_load", "ignore_merges.json", tok(words, merges, extra_model={"ignore_merges": True}))
put("tokenizer_load", "bytes_only.json", tok([], []))
put("tokenizer_load", "unknown_merge.json", tok(words, merges + ["x yz"]))
# Qwen2.5's shape (normalizer NFC, Split + ByteLevel): only the non-normative
# extension (cis2_tokenizer_load_ext) admits it
QWEN_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")
q = json.loads(tok(words, merges, added=["<|endoftext|>"]))
q["normalizer"] = {"type": "NFC"}
q["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": QWEN_RE}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}
q["model"].update(continuing_subword_prefix="", end_of_word_suffix="")
put("tokenizer_load", "qwen_shape.json", json.dumps(q, ensure_ascii=False, separators=(",", ":")))
# gpt-oss's shape (Split with the o200k pattern + ByteLevel, ignore_merges;
# docs/tokenizer.md "The o200k pattern"): the extension only, too
O200K_RE = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
            r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")
o = json.loads(tok(words, merges, added=["<|start|>", "<|channel|>", "<|message|>", "<|end|>"],
                   extra_model={"ignore_merges": True}))
o["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": O200K_RE}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
put("tokenizer_load", "o200k_shape.json", json.dumps(o, ensure_ascii=False, separators=(",", ":")))

# ---- text for encode (with the real SmolLM2 tokenizer) ----
put("tokenizer_encode", "english", "Once upon a time, there was a little robot.\n")
put("tokenizer_encode", "digits_ws", "In 2024 we had 1,234,567.89 items;   spaces\t\ttabs\r\n\n  end ")
put("tokenizer_encode", "unicode", "Café naïve — 日本語のテキスト 🤖👍🏽 Ελληνικά русский عربى\u00a0nbsp")
put("tokenizer_encode", "special", "<|im_start|>user\nhi<|im_end|><|endoftext|>x<|endoftext")
put("tokenizer_encode", "contractions", "I'm you're he'll we've they'd it's DON'T 'S 's")
put("tokenizer_encode", "invalid_utf8", b"ok\xff\xfe bad \xc3( \xed\xa0\x80 surrogate \xf4\x90\x80\x80")
put("tokenizer_encode", "code", "def f(x):\n    return {'a': [1, 2]}  # done\n\n\n")

# ---- CIS-2-RECEIPT v1 (FACTS.md §6) ----
def receipt(prompt=b"Once upon a time", ids="6403,1980,253,655", gen="3", generated="1,2,3"):
    h = lambda c: c * 64
    lines = ["CIS-2-RECEIPT v1", "spec-version 0.3b", "weights-sha256 " + h("a"), "config-sha256 " + h("b"),
             "tokenizer-sha256 " + h("c"), "prompt-hex " + prompt.hex(), "prompt-token-ids " + ids,
             "gen-toks " + gen, "dtype fp32", "table-digest " + h("d"), "inv-freq-table-digest " + h("e"),
             "generated-token-ids " + generated, "argmax-digest " + h("f"), "witness-digest " + h("0")]
    return "\n".join(lines) + "\n"


put("receipt", "valid", receipt())
put("receipt", "one_token", receipt(prompt=b"x", ids="0", gen="1", generated="4294967295"))
put("receipt", "crlf", receipt().replace("\n", "\r\n"))
put("receipt", "gen_mismatch", receipt(gen="4"))
put("receipt", "leading_zero", receipt(ids="06403,1980"))
# a prompt given as ids (docs/receipts.md "Prompts given as ids"): the optional line, bytes or none
put("receipt", "ids_form", receipt(prompt=b"Once \xc3", ids="79,110,99,101,32,195").replace(
    "\nprompt-hex ", "\nprompt-from ids\nprompt-hex "))
put("receipt", "ids_none", receipt(ids="300,301").replace("\nprompt-hex 4f6e63652075706f6e20612074696d65\n",
                                                          "\nprompt-from ids\nprompt-hex none\n"))

# ---- CIS-2-RECEIPT ext-sampling-1 (docs/sampling.md), from the vectors ----
VEC = os.path.join(os.path.dirname(OUT), "..", "tests", "vectors", "sampling", "receipts.json")
for v in json.load(open(VEC))["receipts"]:
    put("receipt", "ext_" + v["name"], v["expect"]["receipt"])
ext = json.load(open(VEC))["receipts"][0]["expect"]["receipt"]
put("receipt", "ext_no_stop", "\n".join(l for l in ext.split("\n") if not l.startswith("stop-")))

# ---- prompt files (cis2_prompts_load: JSON array or one per line) ----
put("prompts", "lines", "Once upon a time\nThe capital of France is\r\nx\n")
put("prompts", "no_final_lf", "one\ntwo")
put("prompts", "blank_line", "one\n\ntwo\n")
put("prompts", "json", json.dumps(["a", "Caf\u00e9 \u65e5\u672c", "tab\tand\nnewline"]))
put("prompts", "json_ws", "  \n[ \"x\" ,\n \"y\\u0041\" ]\n")
put("prompts", "json_nul", "[\"a\\u0000b\"]")
put("prompts", "json_empty", "[]")
put("prompts", "json_nested", "[[\"a\"], {\"b\": 1}, 2]")
put("prompts", "nul_line", b"a\x00b\n")

# ---- a sharded checkpoint's index (fuzz_shards: the shards beside it are
# fixed, a, b in model-00001-of-00002, c in model-00002-of-00002, d in
# other.safetensors) ----
S1, S2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
wm = {"a": S1, "b": S1, "c": S2}
put("shards", "valid", json.dumps({"metadata": {"total_size": 28}, "weight_map": wm}, indent=1))
put("shards", "no_metadata", json.dumps({"weight_map": wm}))
put("shards", "with_other", json.dumps({"weight_map": dict(wm, d="other.safetensors")}))
put("shards", "missing_c", json.dumps({"weight_map": {"a": S1, "b": S1}}))
put("shards", "wrong_shard", json.dumps({"weight_map": {"a": S2, "b": S1, "c": S2}}))
put("shards", "absent_file", json.dumps({"weight_map": dict(wm, c="model-00003-of-00003.safetensors")}))
put("shards", "traversal", json.dumps({"weight_map": dict(wm, c="../" + S2)}))
put("shards", "dotfile", json.dumps({"weight_map": dict(wm, c=".hidden.safetensors")}))
put("shards", "extra_key", json.dumps({"weight_map": wm, "format": "pt"}))
put("shards", "bad_total", json.dumps({"metadata": {"total_size": -1}, "weight_map": wm}))
put("shards", "empty_map", json.dumps({"weight_map": {}}))
put("shards", "not_object", "[1, 2, 3]")

# ---- chat templates (fuzz_jinja: a template, then optionally NUL and a
# JSON object of variables; without one the target's fixed conversation
# with a system prompt, tool calls, a tool result and tools).  Small
# hand-written templates, one or a few features each (docs/chat.md "The
# language"), and the hostile shapes of "Limits" at a small scale ----
def jinja(name, tmpl, vars=None):
    data = tmpl.encode("utf-8")
    if vars is not None:
        data += b"\0" + json.dumps(vars, ensure_ascii=False).encode("utf-8")
    put("jinja", name, data)


CHATML = ("{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' }}"
          "{%- if message.content is string %}{{- message.content }}{%- else %}"
          "{%- for part in message.content %}{{- part.text }}{%- endfor %}{%- endif %}"
          "{%- if message.tool_calls %}{%- for tc in message.tool_calls %}\n<tool_call>\n"
          "{{- tc.function | tojson }}\n</tool_call>{%- endfor %}{%- endif %}"
          "{{- '<|im_end|>\\n' }}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}\n")
jinja("chatml", CHATML)
jinja("chatml_own_vars", CHATML, {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": False})
jinja("whitespace", "a\n  {% if true %}\n  x\n  {%- endif %}\n{{- ' b ' -}}\n{%+ if 1 +%}\r\nc{# note #}{% endif %}\n{% raw %}{{ x }}{% endraw %}\n\n")
jinja("literals", "{{ 'a\\nb\\x41\\u00e9\\101' \"q\" }}{{ 1_000 + 0x1f + 0o17 + 0b101 }}{{ 1.5e3 }}{{ [1, (2,), {'k': none}, True, false] }}")
jinja("operators", "{{ 7 / 2 }}{{ 7 // 2 }}{{ -7 % 3 }}{{ 2 ** 10 }}{{ 'a' ~ 1 }}{{ 1 < 2 <= 2 }}{{ 2 in [1, 2] }}"
      "{{ 3 not in [1] }}{{ not 0 and 1 or 2 }}{{ 'y' if n else 'n' }}{{ -f }}{{ +n }}")
jinja("access", "{{ messages[0].role }}{{ messages[-1]['content'][0].text }}{{ tools.0.function.name }}"
      "{{ messages[1:3] | length }}{{ 'hello'[::-1] }}{{ z.x }}{{ nothing }}")
jinja("for_loop", "{% for m in messages if m.role != 'tool' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
      "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}[{% if not loop.first %}{{ loop.previtem.role }}{% endif %}|{{ loop.nextitem.role if not loop.last }}]"
      "{{ loop.depth }}{{ loop.cycle('a', 'b') }}{{ loop.changed(m.role) }}{% else %}none{% endfor %}")
jinja("for_break", "{% for i in range(10) %}{% if i is odd %}{% continue %}{% endif %}{% if i > 6 %}{% break %}{% endif %}"
      "{{ i }}{% endfor %}{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }}{% endfor %}")
jinja("set_namespace", "{% set x = 1 %}{% set a, b = 1, 2 %}{% set ns = namespace(t=0, last=none) %}"
      "{% for m in messages %}{% set ns.t = ns.t + 1 %}{% set ns.last = m.role %}{% endfor %}{{ ns.t }}{{ ns.last }}{{ a + b + x }}"
      "{% set blk | upper %}b{{ x }}{% endset %}{{ blk }}")
jinja("macro", "{% macro m(a, b=2) -%}<{{ a }}{{ b }}{{ varargs }}{{ kwargs }}>{%- endmacro %}{{ m(1) }}{{ m(1, 2, 3, k=4) }}"
      "{% macro w() %}[{{ caller(5) }}]{% endmacro %}{% call(v) w() %}c{{ v }}{% endcall %}")
jinja("filter_with_generation", "{% filter upper %}up {{ 'x' }}{% endfilter %}{% with q = 3 %}{{ q }}{% endwith %}"
      "{% generation %}gen{% endgeneration %}")
jinja("raise", "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}")
jinja("strftime", "{{ strftime_now('%Y-%m-%d %H:%M:%S %a %b %d %B %j %p %%') }}")
jinja("globals", "{{ range(3) | list }}{{ range(5, 0, -2) | list }}{{ dict(a=1, b=[2]) }}{% set c = cycler('x', 'y') %}"
      "{{ c.next() }}{{ c.next() }}{{ c.current }}{% set j = joiner(', ') %}{{ j() }}a{{ j() }}b")
FILTERS = [
    "-3 | abs", "messages[0] | attr('role')", "[1, 2, 3, 4, 5] | batch(2, 0) | list", "'ab cd' | capitalize",
    "'x' | center(9)", "[1, 2] | count", "nothing | default('d')", "z | d('e', true)", "{'b': 1, 'a': 2} | dictsort",
    "'<a>&' | e", "'<b>' | escape", "[3, 4] | first", "'1.5' | float", "'<i>' | forceescape", "'%s-%d' | format('a', 3)",
    "'a\\nb' | indent(2, true)", "'12' | int", "'ff' | int(base=16)", "{'k': 1} | items | list", "[1, 2] | join('-')",
    "[1, 2] | last", "'abc' | length", "'xy' | list", "'AB' | lower", "messages | map(attribute='role') | list",
    "['a'] | map('upper') | list", "[3, 1] | max", "[3, 1] | min", "[1, 2, 3] | reject('odd') | list",
    "messages | rejectattr('role', 'equalto', 'user') | list | length", "'aXa' | replace('a', 'b', 1)",
    "[1, 2] | reverse | list", "'ab' | reverse", "2.675 | round(2)", "2.5 | round(0, 'floor')", "'<s>' | safe",
    "[1, 2, 3] | select('even') | list", "messages | selectattr('content', 'string') | list | length",
    "[3, 1, 2] | sort(reverse=true)", "messages | sort(attribute='role') | map(attribute='role') | join",
    "1 | string", "[1, 2] | sum(start=10)", "'ab cd' | title", "tools | tojson", "{'a': [1]} | tojson(indent=2)",
    "'\\u00e9' | tojson(ensure_ascii=true)", "' x ' | trim", "[1, 1, 2] | unique | list", "'ab' | upper",
    "'a b c' | wordcount", "{'b': 2} | dictsort(reverse=true)",
]
jinja("filters", "".join("{{ %s }}|" % f for f in FILTERS))
TESTS = ["true is boolean", "range is callable", "x is defined", "4 is divisibleby 2", "1 is eq 1", "1 is equalto 1",
         "1 is ne 2", "1 is lt 2", "1 is lessthan 2", "1 is le 1", "2 is gt 1", "2 is greaterthan 1", "2 is ge 2",
         "'<' | e is escaped", "2 is even", "1 is odd", "false is false", "true is true", "'upper' is filter",
         "'odd' is test", "1.0 is float", "1 is integer", "1 is number", "1 is in [1]", "'' is iterable",
         "[] is sequence", "{} is mapping", "'' is string", "none is none", "1 is sameas 1", "'a' is lower",
         "'A' is upper", "q is undefined", "1 is not string", "1 == 1"]
jinja("tests", "".join("{{ %s }}," % t for t in TESTS))
METHODS = ["'ab'.capitalize()", "'AB'.casefold()", "'a'.center(5, '*')", "'aab'.count('a')", "'ab'.endswith('b')",
           "'ab'.find('b')", "'{}-{x}'.format(1, x=2)", "'ab'.index('b')", "'a1'.isalnum()", "'a'.isalpha()",
           "'1'.isdigit()", "'a'.islower()", "' '.isspace()", "'A'.isupper()", "','.join(['a', 'b'])", "'a'.ljust(3)",
           "'A'.lower()", "'  a'.lstrip()", "'a=b'.partition('=')", "'ab'.removeprefix('a')", "'ab'.removesuffix('b')",
           "'aa'.replace('a', 'b')", "'aba'.rfind('a')", "'aba'.rindex('a')", "'a'.rjust(3)", "'a=b=c'.rpartition('=')",
           "'a b c'.rsplit(' ', 1)", "'a  '.rstrip()", "'a,b'.split(',')", "'a\\nb\\r\\nc'.splitlines()",
           "'ab'.startswith(('a', 'x'))", "' a '.strip()", "'aB'.swapcase()", "'ab cd'.title()", "'a'.upper()",
           "'7'.zfill(3)", "[1, 1].count(1)", "[1, 2].index(2)", "{'a': 1}.get('a')", "{'a': 1}.get('b', 0)",
           "{'a': 1}.items()", "{'a': 1}.keys()", "{'a': 1}.values()", "{'a': 1}.copy()"]
jinja("methods", "".join("{{ %s }};" % m for m in METHODS))
jinja("percent", "{{ '%s|%r|%d|%5.2f|%-4s|%x|%o|%e|%%' % ('a', 'b', 3, 1.5, 'c', 255, 8, 1e10) }}{{ '%(k)s' % {'k': 1} }}")
jinja("calls", "{% macro m(a, b) %}{{ a }}{{ b }}{% endmacro %}{{ m(*[1, 2]) }}{{ m(**{'a': 3, 'b': 4}) }}"
      "{{ dict(**{'x': 1}) }}")
jinja("markup", "{{ ('<b>' | safe) + '<i>' }}{{ '<' ~ ('&' | safe) }}{{ ('%s' | safe) % '<' }}{{ ('a' | safe).upper() }}")
jinja("unicode", "{{ 'Σίσυφος'.upper() }}{{ 'ÉCOLE' | lower }}{{ '日本語'[1] }}{{ '🎉x'.title() }}{{ 'ǅ'.swapcase() }}")
jinja("errors_runtime", "{{ 1 + 'a' }}")
jinja("error_syntax", "{% if x %}{% for %}")
jinja("unsafe", "{{ messages.append(1) }}{{ messages.__class__ }}{{ ''._x }}")
jinja("vars_nested", "{{ a | tojson }}{{ a }}", {"a": {"b": [[[[[{"c": [1.5, None, True, "\u0000"]}]]]]]}})
jinja("vars_numbers", "{{ big + 1 }}{{ neg * 2 }}{{ fl }}{{ fl | round(3) }}", {"big": 9223372036854775806,
                                                                                 "neg": -4611686018427387904, "fl": 1e300})
# the limits' shapes, small (docs/chat.md "Limits")
jinja("limit_recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}")
jinja("limit_loops", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
jinja("limit_repeat", "{{ 'x' * 1000000000 }}")
jinja("limit_doubling", "{% set ns = namespace(s='ab', l=[1], d={}) %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
      "{% set ns.l = ns.l + ns.l %}{% set ns.d = dict(ns.d, **{i | string: ns.l}) %}{% endfor %}")
jinja("limit_nesting", "{{ " + "(" * 300 + "1" + ")" * 300 + " }}" + "{% if 1 %}" * 250 + "{% endif %}" * 250)
