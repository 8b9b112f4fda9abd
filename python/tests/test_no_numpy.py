"""numpy is optional: without it the package imports and generates, and
logits=True (or TokenEvent.logits) raises a clear ImportError."""
import os
import subprocess
import sys

import cis2

SCRIPT = r'''
import sys
sys.modules["numpy"] = None          # as if numpy were not installed
import cis2
e = cis2.Engine(sys.argv[1])
r = e.generate("Once upon a time", gen_toks=2)
print("witness", r.witness)
try:
    e.generate("Once upon a time", gen_toks=2, logits=True)
except ImportError as ex:
    print("logits:", ex)
def cb(ev):
    try:
        ev.logits
    except ImportError as ex:
        print("event:", ex)
e.generate("x", gen_toks=1, on_token=cb)
'''


def test_without_numpy(engine, tiny):
    p = subprocess.run([sys.executable, "-c", SCRIPT, tiny], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       cwd=os.path.dirname(cis2.__path__[0]))
    out = p.stdout.decode()
    assert p.returncode == 0, p.stderr.decode()
    assert "witness " + engine.generate("Once upon a time", gen_toks=2).witness in out
    msg = "cis2: logits=True needs numpy, which is not importable here (Debian: apt-get install python3-numpy)"
    assert "logits: " + msg in out and "event: " + msg in out
