"""The ctypes mirror against the real header: every struct's size and every
field's offset as a C compiler sees include/cis2.h, the enum values the
package hard-codes, the number of parameters of every prototype, and the
version the structs mirror."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT
from cis2 import _lib
from cis2.receipt import FIELD_STATUS

HEADERS = [os.path.join(ROOT, "include", h) for h in ("cis2.h", "cis2_toolkit.h")]  # the engine and its toolkit

CONSTANTS = {"CIS2_E_MISMATCH": _lib.E_MISMATCH, "CIS2_E_CANCELLED": _lib.E_CANCELLED,
             "CIS2_OPEN_TOKENIZER_EXT": _lib.OPEN_TOKENIZER_EXT,
             "CIS2_TOK_ALLOW_NONNORMATIVE": _lib.TOK_ALLOW_NONNORMATIVE,
             "CIS2_REPLAY_PREFILL": _lib.REPLAY_PREFILL, "CIS2_REPLAY_DECODE": _lib.REPLAY_DECODE,
             "CIS2_MAX_TOP_LOGPROBS": _lib.MAX_TOP_LOGPROBS}
CONSTANTS.update({"CIS2_FIELD_" + s.upper(): i for i, s in enumerate(FIELD_STATUS)})


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory):
    cc = os.environ.get("CC") or "cc"
    if not shutil.which(cc.split()[0]):
        pytest.skip("no C compiler (%s)" % cc)
    d = tmp_path_factory.mktemp("abi")
    lines = ['#include <cis2_toolkit.h>', '#include <stddef.h>', '#include <stdio.h>', 'int main(void) {']
    for cname, st in _lib.STRUCTS.items():
        lines.append('printf("%s sizeof %%zu\\n", sizeof(%s));' % (cname, cname))
        for f in st._fields_:
            lines.append('printf("%s %s %%zu %%zu\\n", offsetof(%s, %s), sizeof(((%s *)0)->%s));'
                         % (cname, f[0], cname, f[0], cname, f[0]))
    for k in CONSTANTS:
        lines.append('printf("const %s %%d\\n", (int)%s);' % (k, k))
    lines.append('printf("version %s\\n", CIS2_VERSION);')
    lines.append('return 0; }')
    src = d / "abi.c"
    src.write_text("\n".join(lines) + "\n")
    subprocess.run(cc.split() + ["-std=c11", "-I", os.path.join(ROOT, "include"), str(src), "-o", str(d / "abi")],
                   check=True)
    out = subprocess.run([str(d / "abi")], check=True, stdout=subprocess.PIPE).stdout.decode()
    return [l.split() for l in out.splitlines()]


def test_struct_layouts(c_layout):
    seen = 0
    for row in c_layout:
        if row[0] in _lib.STRUCTS:
            st = _lib.STRUCTS[row[0]]
            if row[1] == "sizeof":
                assert int(row[2]) == _ctypes_sizeof(st), row[0]
            else:
                f = getattr(st, row[1])
                assert (f.offset, f.size) == (int(row[2]), int(row[3])), "%s.%s" % (row[0], row[1])
            seen += 1
    assert seen == sum(len(s._fields_) + 1 for s in _lib.STRUCTS.values())


def _ctypes_sizeof(st):
    import ctypes
    return ctypes.sizeof(st)


def test_constants_and_version(c_layout):
    consts = {r[1]: int(r[2]) for r in c_layout if r[0] == "const"}
    assert consts == CONSTANTS
    version = [r[1] for r in c_layout if r[0] == "version"][0]
    import cis2
    assert cis2.library_version() == version
    assert version.split(".")[:2] == _lib.ABI_VERSION.split(".") == cis2.__version__.split(".")[:2]


def test_prototypes_match_the_header():
    """Each function the package declares exists in the header with as many
    parameters (argtypes) as the C declaration has."""
    text = "".join(open(h).read() for h in HEADERS)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    decls = {}
    for m in re.finditer(r"CIS2_API\s+[^;(]*?\b(cis2_\w+)\s*\(([^)]*)\)", text):
        args = m.group(2).strip()
        decls[m.group(1)] = 0 if args in ("void", "") else len(args.split(","))
    for name, (res, args) in _lib._PROTOS.items():
        assert name in decls, name
        # cis2_fail's "..." counts as one: it is always called with fmt "%s" and one string
        assert len(args) == decls[name], name
