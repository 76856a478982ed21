"""Every ctypes struct in weft/_lib.py has the size and field offsets of its C struct in weft.h: a
program compiled against the header prints them."""
import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

from weft import _lib

ROOT = Path(__file__).resolve().parents[2]
HEADER = ROOT / "include" / "weft" / "weft.h"


def test_structs_match_the_header(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to read the header's layout")
    if not HEADER.exists():
        pytest.skip("weft.h not found at %s" % HEADER)
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "weft/weft.h"', "int main(void) {"]
    for st in _lib.STRUCTS:
        c = st._c_name_
        lines.append('printf("%s %%zu\\n", sizeof(%s));' % (c, c))
        for f in st._fields_:
            lines.append('printf("%s.%s %%zu\\n", offsetof(%s, %s));' % (c, f[0], c, f[0]))
    lines.append("return 0; }")
    src = tmp_path / "abi.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "abi"
    subprocess.run([cc, "-std=c11", "-I", str(ROOT / "include"), str(src), "-o", str(exe)], check=True)
    got = dict(l.split() for l in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines())
    bad = []
    for st in _lib.STRUCTS:
        c = st._c_name_
        if int(got[c]) != ctypes.sizeof(st):
            bad.append("%s: C %s bytes, ctypes %d" % (c, got[c], ctypes.sizeof(st)))
        for f in st._fields_:
            off = getattr(st, f[0]).offset
            if int(got["%s.%s" % (c, f[0])]) != off:
                bad.append("%s.%s: C offset %s, ctypes %d" % (c, f[0], got["%s.%s" % (c, f[0])], off))
    assert not bad, "\n".join(bad)
    # and each C function the package binds exists in the library it loaded
    missing = [n for n in _lib._SIGS if getattr(_lib.lib, n, None) is None]
    assert not missing, missing
