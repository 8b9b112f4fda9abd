"""`python3 -m cis2 COMMAND ...`: the basic commands of the cis2 program,
on the Python binding, with the same output and exit codes.

    run       [--model-dir DIR] [--prompt TEXT | --prompt-ids CSV] [--gen-toks N]
              [--json] [--receipt FILE] [--dump-logits FILE] [--kernel K] [--threads N]
    verify    RECEIPT... [--model-dir DIR] [--replay prefill|decode] [--twice]
    check     RECEIPT [--tokenizer FILE] [--config FILE] [--tokenizer-ext]
    compare   A B
    tokenize  --tokenizer FILE [--text TEXT] [--json]
    detokenize --tokenizer FILE IDS
    synth     --shape NAME --seed N --out DIR [--tokenizer FILE]
    version

Errors print `cis2: MESSAGE` on stderr and exit with the library's code
(README "Exit codes").  This file owns only argument parsing and printing.
"""
import argparse
import json
import os
import sys

import cis2

DEFAULT_MODEL_DIR = "models/SmolLM2-135M"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # bad command line: exit 2 like the cis2 program
        self.print_usage(sys.stderr)
        sys.stderr.write("cis2 %s: %s\n" % (self.prog.split()[-1], message))
        sys.exit(2)


def _ids(s):
    try:
        s = s.strip()
        if s.startswith("["):
            v = json.loads(s)
        else:
            v = [int(x) for x in s.split(",")]
        if not v or not all(isinstance(x, int) and 0 <= x <= 0xFFFFFFFF for x in v):
            raise ValueError
        return v
    except ValueError:
        raise cis2.UsageError("'%s' is not a comma-separated list of u32 ids (like 1,2,3)" % s)


def _engine(a):
    return cis2.Engine(a.model_dir, threads=a.threads, kernel=a.kernel, tokenizer_ext=a.tokenizer_ext)


def _run(a):
    if a.prompt is not None and a.prompt_ids is not None:
        raise cis2.UsageError("give at most one of --prompt, --prompt-ids")
    prompt = _ids(a.prompt_ids) if a.prompt_ids is not None else (
        a.prompt if a.prompt is not None else "Once upon a time")
    if isinstance(prompt, str):
        prompt = os.fsencode(prompt)   # the command line's bytes, as the C program takes them
    with _engine(a) as e:
        r = e.generate(prompt, gen_toks=a.gen_toks, logits=a.dump_logits is not None)
        if a.receipt:
            cis2.Receipt.parse(r.receipt).save(a.receipt)
        if a.dump_logits:
            tmp = a.dump_logits + ".tmp"   # whole or not at all, like the cis2 program
            with open(tmp, "wb") as f:
                f.write(r.logits.astype("<f4").tobytes())
            os.replace(tmp, a.dump_logits)
        if a.json:
            o = {"weights_sha256": e.weights_sha256, "config_sha256": e.config_sha256,
                 "tokenizer_sha256": e.tokenizer_sha256, "prompt_token_ids": r.prompt_ids,
                 "generated_token_ids": r.token_ids, "table_digest": e.table_digest,
                 "inv_freq_table_digest": e.inv_freq_table_digest, "argmax_digest": r.argmax_digest,
                 "cis2_ref": r.witness, "prompt_idx": 0, "prompt_toks": len(r.prompt_ids),
                 "gen_toks": len(r.token_ids), "dtype": "fp32", "completion": r.text}
            print(json.dumps(o, indent=2, ensure_ascii=False))
            return 0
        csv = lambda v: ",".join(map(str, v))
        print("weights_sha256 = %s" % e.weights_sha256)
        print("config_sha256 = %s" % e.config_sha256)
        print("tokenizer_sha256 = %s" % e.tokenizer_sha256)
        print("prompt_token_ids = %s" % csv(r.prompt_ids))
        print("generated_token_ids = %s" % csv(r.token_ids))
        print("table_digest = %s" % e.table_digest)
        print("inv_freq_table_digest = %s" % e.inv_freq_table_digest)
        print("argmax_digest = %s" % r.argmax_digest)
        print(r.cis2_ref)
        print("completion = %s" % json.dumps(r.text, ensure_ascii=False))
    return 0


def _verify(a):
    rs, bad = [], {}
    for p in a.receipts:
        try:
            rs.append(cis2.Receipt.load(p))
        except (cis2.FormatError, cis2.FileError) as ex:
            if len(a.receipts) == 1:
                print("verdict: MALFORMED")
                raise
            rs.append(None)
            bad[p] = ex
    todo = [r for r in rs if r is not None]
    vs = iter([])
    if todo:
        with _engine(a) as e:
            vs = iter(e.verify(todo, replay=a.replay, twice=a.twice))
    worst, counts, names, malformed = 0, {}, {}, 0
    for p, r in zip(a.receipts, rs):
        if r is None:
            print("%s: verdict: MALFORMED (%s)" % (p, bad[p].message))
            worst, malformed = max(worst, bad[p].code), malformed + 1
            continue
        v = next(vs)
        if len(a.receipts) == 1:
            sys.stdout.write(v.report())
        else:
            print("%s: verdict: %s" % (p, v.summary))
        worst = max(worst, v.code)
        counts[v.kind] = counts.get(v.kind, 0) + 1
        names[v.kind] = v.name
    if len(a.receipts) > 1:
        parts = ["%d %s" % (counts[k], names[k]) for k in sorted(counts)]
        if malformed:
            parts.append("%d MALFORMED" % malformed)
        print("summary: %d receipts: %s" % (len(a.receipts), ", ".join(parts)))
    return worst


def _check(a):
    try:
        r = cis2.Receipt.load(a.receipt)
    except cis2.Error:
        print("verdict: MALFORMED")
        raise
    v = r.check(tokenizer=a.tokenizer, config=a.config, tokenizer_ext=a.tokenizer_ext)
    sys.stdout.write(v.report())
    return v.code


def _compare(a):
    try:
        ra, rb = cis2.Receipt.load(a.a), cis2.Receipt.load(a.b)
    except cis2.Error:
        print("verdict: MALFORMED")
        raise
    v = cis2.compare(ra, rb)
    sys.stdout.write(v.report())
    return v.code


def _tokenize(a):
    t = cis2.Tokenizer(a.tokenizer, ext=a.tokenizer_ext)
    text = os.fsencode(a.text) if a.text is not None else sys.stdin.buffer.read()
    ids = t.encode(text)
    print(json.dumps(ids, separators=(",", ":")) if a.json else ",".join(map(str, ids)))
    return 0


def _detokenize(a):
    t = cis2.Tokenizer(a.tokenizer, ext=a.tokenizer_ext)
    sys.stdout.write(t.decode(_ids(a.ids)) + "\n")
    return 0


def _synth(a):
    cis2.synth(a.shape, a.seed, a.out, tokenizer=a.tokenizer)
    print("synth: shape=%s seed=%d -> %s" % (a.shape, a.seed, a.out))
    return 0


def _version(a):
    print("cis2 %s (python package %s, library %s, %s, CIS-2 %s)" % (
        cis2.library_version(), cis2.__version__, cis2.library_path(), cis2.isa(), cis2.SPEC_VERSION))
    return 0


def _parser():
    p = _Parser(prog="python3 -m cis2", description="cis2 on the Python binding (libcis2.so)")
    sub = p.add_subparsers(dest="cmd", parser_class=_Parser)
    sub.required = True

    def engine_opts(q):
        q.add_argument("--model-dir", default=DEFAULT_MODEL_DIR)
        q.add_argument("--kernel")
        q.add_argument("--threads", type=int)
        q.add_argument("--tokenizer-ext", action="store_true")

    q = sub.add_parser("run", help="generate, print the §13.1 lines")
    engine_opts(q)
    q.add_argument("--prompt")
    q.add_argument("--prompt-ids")
    q.add_argument("--gen-toks", type=int, default=16)
    q.add_argument("--json", action="store_true")
    q.add_argument("--receipt")
    q.add_argument("--dump-logits")
    q.set_defaults(fn=_run)

    q = sub.add_parser("verify", help="recompute every field of receipts")
    engine_opts(q)
    q.add_argument("receipts", nargs="+")
    q.add_argument("--replay", default="prefill", choices=("prefill", "decode"))
    q.add_argument("--twice", action="store_true")
    q.set_defaults(fn=_verify)

    q = sub.add_parser("check", help="the checks that need no weights")
    q.add_argument("receipt")
    q.add_argument("--tokenizer")
    q.add_argument("--config")
    q.add_argument("--tokenizer-ext", action="store_true")
    q.set_defaults(fn=_check)

    q = sub.add_parser("compare", help="judge two receipts")
    q.add_argument("a")
    q.add_argument("b")
    q.set_defaults(fn=_compare)

    for name, fn in (("tokenize", _tokenize), ("detokenize", _detokenize)):
        q = sub.add_parser(name)
        q.add_argument("--tokenizer", required=True)
        q.add_argument("--tokenizer-ext", action="store_true")
        if name == "tokenize":
            q.add_argument("--text")
            q.add_argument("--json", action="store_true")
        else:
            q.add_argument("ids")
        q.set_defaults(fn=fn)

    q = sub.add_parser("synth", help="a synthetic checkpoint")
    q.add_argument("--shape", required=True)
    q.add_argument("--seed", type=int, required=True)
    q.add_argument("--out", required=True)
    q.add_argument("--tokenizer")
    q.set_defaults(fn=_synth)

    q = sub.add_parser("version")
    q.set_defaults(fn=_version)
    return p


def main(argv=None):
    a = _parser().parse_args(argv)
    try:
        rc = a.fn(a)
        sys.stdout.flush()
        return rc
    except cis2.Error as e:
        sys.stdout.flush()
        sys.stderr.write("cis2: %s\n" % e.message)
        return e.code
    except cis2.LibraryNotFound as e:
        sys.stderr.write("%s\n" % e)
        return 3
    except OSError as e:   # a Python-side file (--dump-logits)
        sys.stderr.write("cis2: %s\n" % e)
        return 3


if __name__ == "__main__":
    sys.exit(main())
