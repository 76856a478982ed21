#!/usr/bin/python3
"""Runs PyTorch-exported ONNX models through `weft run` and compares weft's outputs with PyTorch's.

usage: run_models.py [--build DIR] [--models DIR] [--only NAME,...] [--rtol R] [--atol A]

Exports the models first (tests/models/export_models.py, skipped when up to date), then for each model
runs `DIR/weft run MODEL.onnx --input input=input.npy --output-dir OUT` and checks weft's output.npy
against expected.npy (PyTorch's output) with numpy.allclose. Prints PASS/FAIL per model with the max
absolute and relative error, then "N passed, N failed"; exits 1 if anything failed.
"""
import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def npy_name(value_name):
    # Mirrors `weft run`'s rule for output file names.
    return re.sub(r"[^A-Za-z0-9._-]", "_", value_name) + ".npy"


def read_info(folder):
    inputs, outputs = [], []
    with open(os.path.join(folder, "info.txt")) as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] == "input":
                inputs.append(parts[1])
            elif parts and parts[0] == "output":
                outputs.append(parts[1])
    return inputs, outputs


def compare(got, want, rtol, atol):
    """Returns (ok, message)."""
    if got.shape != want.shape:
        return False, "shape %s, PyTorch %s" % (got.shape, want.shape)
    if got.dtype != want.dtype:
        return False, "dtype %s, PyTorch %s" % (got.dtype, want.dtype)
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    if not np.all(np.isfinite(g)):
        return False, "%d non-finite values" % int(np.sum(~np.isfinite(g)))
    diff = np.abs(g - w)
    max_abs = float(diff.max()) if diff.size else 0.0
    # Relative error over elements large enough for it to mean something.
    big = np.abs(w) > atol
    max_rel = float((diff[big] / np.abs(w[big])).max()) if np.any(big) else 0.0
    ok = bool(np.allclose(g, w, rtol=rtol, atol=atol))
    msg = "max abs err %.3g, max rel err %.3g" % (max_abs, max_rel)
    if not ok:
        worst = np.unravel_index(int(np.argmax(diff - rtol * np.abs(w))), w.shape)
        msg += ", worst at %s: weft %.7g vs PyTorch %.7g" % (tuple(int(i) for i in worst), g[worst], w[worst])
    return ok, msg


def run_model(weft, folder, name, rtol, atol, device=None, opt_level=None):
    inputs, outputs = read_info(folder)
    out_dir = os.path.join(folder, "weft-out" + ("-" + device.replace(":", "_") if device else "") +
                           ("-O%d" % opt_level if opt_level is not None else ""))
    os.makedirs(out_dir, exist_ok=True)
    for f in os.listdir(out_dir):
        os.remove(os.path.join(out_dir, f))
    cmd = [weft, "run", os.path.join(folder, "model.onnx")]
    for i in inputs:
        cmd += ["--input", "%s=%s" % (i, os.path.join(folder, "input.npy"))]
    # Two timed runs after the first: the compared output comes from a run on the cached plan.
    cmd += ["--output-dir", out_dir, "--iterations", "2"]
    if opt_level is not None:
        cmd += ["--opt-level", str(opt_level)]
    if device:
        # the whole model on that device, strictly: an op without a kernel there is an error, never a
        # silent run on the CPU
        cmd += ["--device", device, "--strict-placement"]
    t0 = time.time()
    if not os.access(weft, os.X_OK):
        return False, "no executable %s (build weft first)" % weft
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300,
                           universal_newlines=True)
    except subprocess.TimeoutExpired:
        return False, "timed out after 300 s"
    secs = time.time() - t0
    if p.returncode != 0:
        tail = "\n".join("    " + l for l in p.stdout.strip().splitlines()[-8:])
        return False, "weft run exited %d:\n%s" % (p.returncode, tail)
    want = np.load(os.path.join(folder, "expected.npy"))
    msgs, ok_all = [], True
    for o in outputs:
        path = os.path.join(out_dir, npy_name(o))
        if not os.path.exists(path):
            return False, "weft wrote no %s (output %s)" % (path, o)
        ok, msg = compare(np.load(path), want, rtol, atol)
        ok_all &= ok
        msgs.append(("%s: " % o if len(outputs) > 1 else "") + msg)
    return ok_all, "; ".join(msgs) + " (%.1f s)" % secs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default=None, help="default: BUILD/models")
    ap.add_argument("--only", default="")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--device", default=None, help="run on this device spec, e.g. OPENCL:0")
    ap.add_argument("--opt-level", type=int, default=None, help="weft run --opt-level (default: weft's)")
    args = ap.parse_args()
    models = args.models or os.path.join(args.build, "models")
    weft = os.path.abspath(os.path.join(args.build, "weft"))

    export = [sys.executable, os.path.join(HERE, "export_models.py"), models]
    if args.only:
        export += ["--only", args.only]
    r = subprocess.run(export, stdout=subprocess.DEVNULL if args.device else None)
    if r.returncode != 0:
        print("FAIL export (exit %d)" % r.returncode)
        print("0 passed, 1 failed")
        return 1
    with open(os.path.join(models, "models.txt")) as f:
        names = f.read().split()

    passed = failed = 0
    for name in names:
        ok, msg = run_model(weft, os.path.join(models, name), name, args.rtol, args.atol, args.device, args.opt_level)
        print("%s %s%s%s: %s" % ("PASS" if ok else "FAIL", name, " on " + args.device if args.device else "",
                                 " at --opt-level %d" % args.opt_level if args.opt_level is not None else "", msg),
              flush=True)
        if ok:
            passed += 1
        else:
            failed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
