#!/usr/bin/python3
"""tests/oracle/chat_render.py - the reference for cis2's chat-template
renderer (src/jinja*.c, docs/chat.md): Debian's
python3-jinja2 rendering a template in the environment Hugging Face
transformers' apply_chat_template builds:

    ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
        extensions=[the {% generation %} block, jinja2.ext.loopcontrols])
    filters["tojson"]  = json.dumps(x, ensure_ascii=False, indent=...,
                                    separators=..., sort_keys=...)
    globals["raise_exception"] = raises TemplateError(message)
    globals["strftime_now"]    = datetime.now().strftime(format)

with one change for reproducibility: strftime_now formats a pinned time,
2025-03-07 14:05:09 (the C side pins the same).

    chat_render.py cases CORPUS.json NAME      the corpus's conversations,
                                               expanded for template NAME,
                                               one JSON object per line
    chat_render.py render TEMPLATE < CASES     one result line per case:
                                               {"text": ...}, {"raise": msg}
                                               (raise_exception) or
                                               {"error": "Type: msg"}
    chat_render.py prepare CORPUS DIR NAME=TEMPLATE[:TOKENS]...
                                               both of the above for each
                                               template, in DIR/NAME.cases
                                               and DIR/NAME.jinja2
    chat_render.py compare-all DIR NAME...     compare (below) for each NAME:
                                               DIR/NAME.cases, .cis2, .jinja2
    chat_render.py snippets FILE               the cases of a snippet file:
                                               {"template": ..., "vars": ...}
    chat_render.py render-each < CASES         one result line per such case
    chat_render.py compare CASES OURS THEIRS   exit 1 on any difference:
                                               texts byte for byte, raise
                                               messages as text, errors as
                                               errors (messages differ)
"""
import datetime
import json
import sys

import jinja2.ext
from jinja2 import nodes
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

PINNED = datetime.datetime(2025, 3, 7, 14, 5, 9)


class Raised(TemplateError):
    """What the template's raise_exception raised."""


def raise_exception(message):
    raise Raised(message)


def strftime_now(fmt):
    return PINNED.strftime(fmt)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


class Generation(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: renders its body (transformers
    uses it to find the assistant's tokens; the text is the body's)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render_lines(path, lines):
    """The result line of each case line, rendering the template at path."""
    with open(path, encoding="utf-8", newline="") as f:
        src = f.read()
    try:
        tmpl = environment().from_string(src)
    except Exception as e:  # a syntax error: every case fails alike
        tmpl, perr = None, "%s: %s" % (type(e).__name__, e)
    for line in lines:
        case = json.loads(line)
        if tmpl is None:
            out = {"error": perr}
        else:
            try:
                out = {"text": tmpl.render(**case)}
            except Raised as e:
                out = {"raise": str(e)}
            except Exception as e:  # the template failed on this input
                out = {"error": "%s: %s" % (type(e).__name__, e)}
        yield json.dumps(out, ensure_ascii=True)


def render(path):
    for out in render_lines(path, sys.stdin):
        print(out)


def prepare(corpus_path, outdir, specs):
    """For each NAME=TEMPLATE[:TOKENS]: OUTDIR/NAME.cases (the corpus for
    TOKENS, default NAME) and OUTDIR/NAME.jinja2 (jinja2's results), in one
    process (a python start per template costs more than the renders)."""
    import contextlib
    import io
    for spec in specs:
        name, _, rest = spec.partition("=")
        path, _, tokens = rest.partition(":")
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            cases(corpus_path, tokens or name)
        lines = buf.getvalue().splitlines(True)
        with open("%s/%s.cases" % (outdir, name), "w", encoding="utf-8") as f:
            f.writelines(lines)
        with open("%s/%s.jinja2" % (outdir, name), "w", encoding="utf-8") as f:
            for out in render_lines(path, lines):
                f.write(out + "\n")


def render_each():
    """Each stdin line {"template": source, "vars": {...}}: one result line."""
    env = environment()
    for line in sys.stdin:
        case = json.loads(line)
        try:
            out = {"text": env.from_string(case["template"]).render(**case["vars"])}
        except Raised as e:
            out = {"raise": str(e)}
        except Exception as e:
            out = {"error": "%s: %s" % (type(e).__name__, e)}
        print(json.dumps(out, ensure_ascii=True))


def snippets(path):
    """A snippet file: a JSON object (the variables), then templates, each
    after a line "#---" (a name may follow it).  One case per template."""
    with open(path, encoding="utf-8", newline="") as f:
        parts = f.read().split("\n#---")
    variables = json.loads(parts[0])
    for part in parts[1:]:
        name, _, src = part.partition("\n")
        print(json.dumps({"_case": name.strip() or src[:60], "template": src, "vars": variables}, ensure_ascii=True))


def expand(value, lib):
    """{"$repeat": s, "times": n} -> s * n; {"$ref": name} -> lib[name]."""
    if isinstance(value, dict):
        if "$repeat" in value:
            return value["$repeat"] * value["times"]
        if "$ref" in value:
            return expand(lib[value["$ref"]], lib)
        return {k: expand(v, lib) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v, lib) for v in value]
    return value


def cases(corpus_path, name):
    with open(corpus_path, encoding="utf-8") as f:
        corpus = json.load(f)
    lib = corpus["library"]
    tokens = corpus["tokens"].get(name, corpus["tokens"]["default"])
    for conv in corpus["conversations"]:
        if "only" in conv and name not in conv["only"]:
            continue
        base = dict(tokens)
        base["messages"] = expand(conv["messages"], lib)
        if "tools" in conv:
            base["tools"] = expand(conv["tools"], lib)
        base.update(expand(conv.get("kwargs", {}), lib))
        for agp in (True, False):
            for think in conv.get("thinking", ["absent", True, False]):
                case = dict(base)
                case["add_generation_prompt"] = agp
                if think != "absent":
                    case["enable_thinking"] = think
                case["_case"] = "%s agp=%s thinking=%s" % (conv["name"], agp, think)
                print(json.dumps(case, ensure_ascii=True))


def compare_all(outdir, names):
    """compare for each NAME of OUTDIR (NAME.cases, NAME.cis2, NAME.jinja2)."""
    bad = 0
    for name in names:
        print("%s: " % name, end="")
        d = "%s/%s" % (outdir, name)
        bad += compare(d + ".cases", d + ".cis2", d + ".jinja2")
    return 1 if bad else 0


def compare(cases_path, ours_path, theirs_path):
    names = [json.loads(l).get("_case", "?") for l in open(cases_path, encoding="utf-8")]
    ours = [json.loads(l) for l in open(ours_path, encoding="utf-8")]
    theirs = [json.loads(l) for l in open(theirs_path, encoding="utf-8")]
    if len(ours) != len(names) or len(theirs) != len(names):
        print("result counts differ: %d cases, cis2 %d, jinja2 %d" % (len(names), len(ours), len(theirs)))
        return 1
    bad = texts = raised = errors = 0
    for name, a, b in zip(names, ours, theirs):
        if "text" in b and a.get("text") == b["text"]:
            texts += 1
            continue
        if "raise" in b and "raise" in a:
            want = b["raise"].replace("\n", " ").replace("\r", " ").replace("\0", " ")
            if a["raise"] == want or (len(want.encode()) > 511 and want.startswith(a["raise"])):
                raised += 1
                continue
        if "error" in b and "error" in a:
            errors += 1
            continue
        bad += 1
        if bad <= 5:
            print("DIFF %s\n  cis2:   %s\n  jinja2: %s" % (name, json.dumps(a)[:3000], json.dumps(b)[:3000]))
            if "text" in a and "text" in b:
                x, y = a["text"], b["text"]
                i = next((k for k in range(min(len(x), len(y))) if x[k] != y[k]), min(len(x), len(y)))
                print("  first difference at character %d: cis2 %r, jinja2 %r" % (i, x[i:i + 60], y[i:i + 60]))
    print("%d cases: %d texts identical, %d raise_exception messages identical, %d errors on both sides, %d differ"
          % (len(names), texts, raised, errors, bad))
    return 1 if bad else 0


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "render" and len(sys.argv) == 3:
        render(sys.argv[2])
    elif cmd == "cases" and len(sys.argv) == 4:
        cases(sys.argv[2], sys.argv[3])
    elif cmd == "prepare" and len(sys.argv) >= 4:
        prepare(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif cmd == "compare-all" and len(sys.argv) >= 3:
        sys.exit(compare_all(sys.argv[2], sys.argv[3:]))
    elif cmd == "render-each" and len(sys.argv) == 2:
        render_each()
    elif cmd == "snippets" and len(sys.argv) == 3:
        snippets(sys.argv[2])
    elif cmd == "compare" and len(sys.argv) == 5:
        sys.exit(compare(sys.argv[2], sys.argv[3], sys.argv[4]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
