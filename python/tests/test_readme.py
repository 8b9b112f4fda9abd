"""The README's Python example, extracted from README.md and run with this
interpreter on a synthetic checkpoint: 8 streamed tokens, the CIS2_REF of
`cis2 run`, float32 logits [8, vocab], verdict OK, and the usage error."""
import os
import re
import subprocess
import sys

import cis2
from conftest import PROMPT, ROOT, cli


def extract():
    text = open(os.path.join(ROOT, "README.md")).read()
    m = re.search(r"<!-- example: example.py -->\n```python\n(.*?)\n```\n", text, re.S)
    assert m, "no Python example in README.md"
    return m.group(1) + "\n"


def test_readme_example(tiny, tmp_path):
    src = tmp_path / "example.py"
    src.write_text(extract())
    p = subprocess.run([sys.executable, str(src), tiny], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       cwd=str(tmp_path), env=dict(os.environ, PYTHONPATH=os.path.dirname(cis2.__path__[0])))
    out = p.stdout.decode()
    assert p.returncode == 0, out + p.stderr.decode()
    lines = out.splitlines()
    assert [l.split()[:2] for l in lines[:8]] == [["step", str(i)] for i in range(8)]
    ref = re.search(r"^CIS2_REF digest=([0-9a-f]{64})", cli("run", "--model-dir", tiny, "--prompt", PROMPT,
                                                           "--gen-toks", 8).stdout.decode(), re.M).group(1)
    assert "CIS2_REF %s" % ref in lines
    assert "logits float32 (8, 512)" in lines
    assert any(re.match(r"verdict: OK\b", l) for l in lines)
    assert "error 2 max_tokens must be at least 1" in lines
