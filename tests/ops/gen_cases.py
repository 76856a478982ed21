"""Writes every op test case (inputs and numpy reference outputs) into OUTDIR for tests/test_ops.c.

usage: gen_cases.py OUTDIR [GROUP...]    groups: the cases_<group>.py modules beside this file
"""
import importlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from opcase import write_manifest  # noqa: E402

GROUPS = ["core", "elementwise", "shape", "nn", "reduce", "math", "misc", "onnx", "onnx2",
          "nngrad", "dtypes", "nan", "image"]


def main():
    outdir = sys.argv[1]
    groups = sys.argv[2:] or GROUPS
    cases = []
    for g in groups:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases_%s.py" % g)
        if not os.path.exists(path):
            continue
        mod = importlib.import_module("cases_" + g)
        rng = np.random.default_rng(1234)
        cases.extend(mod.cases(rng))
    n = write_manifest(cases, outdir)
    print("wrote %d op cases to %s" % (n, outdir))


if __name__ == "__main__":
    main()
