#!/usr/bin/env python3
"""Checks a model weft exported: the ONNX checker with full shape inference, then onnx's reference
evaluator on an input, compared with weft's outputs.

usage: check_export.py MODEL.onnx INPUT.npy EXPECTED.npy [EXPECTED2.npy ...] [--rtol R] [--atol A]

The model must have one graph input without an initializer (fed INPUT.npy), IR version 8 and
default-domain opset 17; its outputs, in order, must match the EXPECTED files. Exits 1 on any failure.
Needs onnx >= 1.13 (build/venv from scripts/venv.sh has it) and numpy.
"""
import argparse
import sys

import numpy as np
import onnx
import onnx.checker
from onnx.reference import ReferenceEvaluator


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("input")
    ap.add_argument("expected", nargs="+")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    a = ap.parse_args()

    m = onnx.load(a.model)
    onnx.checker.check_model(m, full_check=True)
    opsets = {o.domain or "ai.onnx": o.version for o in m.opset_import}
    if m.ir_version != 8 or opsets.get("ai.onnx") != 17:
        print(f"{a.model}: IR {m.ir_version}, opsets {opsets}; expected IR 8, opset 17", file=sys.stderr)
        return 1
    inits = {t.name for t in m.graph.initializer}
    feeds = [i for i in m.graph.input if i.name not in inits]
    if len(feeds) != 1:
        print(f"{a.model}: {len(feeds)} inputs to feed, expected 1", file=sys.stderr)
        return 1
    if len(m.graph.output) != len(a.expected):
        print(f"{a.model}: {len(m.graph.output)} outputs but {len(a.expected)} expected files", file=sys.stderr)
        return 1
    x = np.load(a.input)
    outs = ReferenceEvaluator(m).run(None, {feeds[0].name: x})
    ok = True
    for vi, got, path in zip(m.graph.output, outs, a.expected):
        want = np.load(path)
        if got.shape != want.shape or got.dtype != want.dtype:
            print(f"{vi.name}: reference gives {got.dtype}{list(got.shape)}, weft {want.dtype}{list(want.shape)}",
                  file=sys.stderr)
            ok = False
            continue
        diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if got.size else 0.0
        close = np.allclose(got, want, rtol=a.rtol, atol=a.atol)
        print(f"{vi.name}: {got.dtype}{list(got.shape)} max |diff| {diff:.3g} {'ok' if close else 'MISMATCH'}",
              file=sys.stderr)
        ok &= bool(close)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
