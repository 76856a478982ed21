#!/usr/bin/python3
"""Every device against the CPU, in the same run: an f32 GEMM and the exported ResNet-18.

usage: bench_devices.py [BUILD] [--gemm 1024] [--batch 1] [--iterations N] [--devices CPU:0,OPENCL:0]

For each device `weft devices --json` lists (or --devices), runs
`weft run MODEL --device DEV --strict-placement --iterations N` on
  - gemm:     one MatMul [n,n] x [n,n] (2 n^3 FLOP), random inputs;
  - resnet18: torchvision ResNet-18 with random weights (tests/models/export_models.py), batch B,
and parses its median. Strict placement: a model with a node the device cannot run is reported as such,
never silently run on the CPU. Times include copying the inputs in and the outputs out, as a user of
`weft run --device` sees them. Prints the median, GFLOP/s for the GEMM and the ratio to CPU:0.
Numbers only; nothing is asserted.
"""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
TIME_RE = re.compile(r"time: first ([0-9.eE+-]+) ms, median ([0-9.eE+-]+) ms over (\d+) runs")


def make_gemm(path, n):
    import onnx
    from onnx import helper as h, TensorProto as T
    g = h.make_graph([h.make_node("MatMul", ["A", "B"], ["Y"])], "gemm",
                     [h.make_tensor_value_info("A", T.FLOAT, [n, n]), h.make_tensor_value_info("B", T.FLOAT, [n, n])],
                     [h.make_tensor_value_info("Y", T.FLOAT, [n, n])])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), path)


def make_resnet(outdir, batch):
    import numpy as np
    import torch
    import export_models as em
    folder = os.path.join(outdir, "resnet18")
    if not em.up_to_date(folder):
        em.export_one(outdir, "resnet18", "resnet18", 13, (3, 224, 224), False, 1)
    x_path = os.path.join(folder, "input_b%d.npy" % batch)
    if not os.path.exists(x_path):
        g = torch.Generator().manual_seed(batch)
        np.save(x_path, torch.randn((batch, 3, 224, 224), generator=g).numpy())
    return os.path.join(folder, "model.onnx"), x_path


def run(weft, model, device, iterations, extra):
    cmd = [weft, "run", model, "--device", device, "--strict-placement", "--iterations", str(iterations)] + extra
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if p.returncode != 0:
        last = [l for l in p.stdout.splitlines() if l.strip()]
        return None, (last[-1] if last else "exit %d" % p.returncode)[:160]
    m = TIME_RE.search(p.stdout)
    if not m:
        return None, "no time line"
    return float(m.group(2)), None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--gemm", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--devices", default="")
    args = ap.parse_args()
    weft = os.path.join(args.build, "weft")
    outdir = os.path.join(args.build, "bench-devices")
    if args.devices:
        devices = args.devices.split(",")
    else:
        p = subprocess.run([weft, "devices", "--json"], stdout=subprocess.PIPE, universal_newlines=True, check=True)
        devices = [d["name"].rsplit("device:", 1)[1] for d in json.loads(p.stdout)["devices"]]
    gemm = os.path.join(outdir, "gemm%d" % args.gemm, "model.onnx")
    if not os.path.exists(gemm):
        make_gemm(gemm, args.gemm)
    resnet, x_path = make_resnet(outdir, args.batch)
    flop = 2.0 * args.gemm ** 3
    cases = [("gemm %d^3 f32" % args.gemm, gemm, ["--random-inputs"], flop),
             ("resnet18 batch %d" % args.batch, resnet, ["--input", "input=" + x_path], 0)]
    print("median of %d runs of `weft run --device DEV --strict-placement` (copies in and out included)"
          % args.iterations)
    print("%-20s %-10s %12s %10s %10s" % ("case", "device", "median ms", "GFLOP/s", "CPU/dev"))
    rc = 0
    for name, model, extra, fl in cases:
        base = None
        for dev in devices:
            t, err = run(weft, model, dev, args.iterations, extra)
            if t is None:
                print("%-20s %-10s  not run: %s" % (name, dev, err))
                continue
            if dev.upper().startswith("CPU"):
                base = t
            print("%-20s %-10s %12.2f %10s %10s" % (name, dev, t, "%.1f" % (fl / t / 1e6) if fl else "-",
                                                     "%.2f" % (base / t) if base else "-"), flush=True)
    print("CPU/dev > 1: the device is faster than the CPU.")
    return rc


if __name__ == "__main__":
    sys.exit(main())
