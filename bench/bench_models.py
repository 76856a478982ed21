#!/usr/bin/python3
"""Latency of real models: `weft run` on PyTorch-exported ONNX vs PyTorch eager on the same model and input.

usage: bench_models.py [BUILD] [--threads N] [--iterations N] [--models a,b] [--batches 1,16]

For resnet18 and mobilenet_v2 (random weights, tests/models/export_models.py) at batch 1 and 16, runs
`BUILD/weft run MODEL.onnx --input input=X.npy --iterations N --threads T` and parses its median, then
times PyTorch (torch.no_grad, eval mode, torch.set_num_threads(T)) on the same input in a subprocess.
Prints a table with the ratio. Numbers only, nothing is asserted.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))

# Debian's PyTorch slows down badly with these set (they are meant for the OpenBLAS in weft's
# environment); only the PyTorch measurement runs without them, weft keeps the environment as it is.
TORCH_UNSET = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

SHAPES = {"resnet18": (3, 224, 224), "mobilenet_v2": (3, 224, 224)}


def torch_worker(kind, x_path, threads, iterations):
    import numpy as np
    import torch
    import export_models as em
    torch.set_num_threads(threads)
    model = em.make_model(kind)
    x = torch.from_numpy(np.load(x_path))
    times = []
    with torch.no_grad():
        for _ in range(iterations + 1):
            t0 = time.perf_counter()
            model(x)
            times.append((time.perf_counter() - t0) * 1e3)
    print("time: first %.3f ms, median %.3f ms over %d runs" % (times[0], statistics.median(times[1:]),
                                                               iterations))


TIME_RE = re.compile(r"time: first ([0-9.eE+-]+) ms, median ([0-9.eE+-]+) ms over (\d+) runs")


def parse_time(text, what):
    m = TIME_RE.search(text)
    if not m:
        raise RuntimeError("%s printed no time line:\n%s" % (what, text[-2000:]))
    return float(m.group(1)), float(m.group(2))


def prepare(outdir, kind, batch):
    """Exports KIND once (the ONNX batch dim is dynamic) and writes a batch-BATCH input."""
    import numpy as np
    import torch
    import export_models as em
    folder = os.path.join(outdir, kind)
    onnx_path = os.path.join(folder, "model.onnx")
    if not em.up_to_date(folder):
        em.export_one(outdir, kind, kind, 13, SHAPES[kind], False, 1)
    x_path = os.path.join(folder, "input_b%d.npy" % batch)
    if not os.path.exists(x_path):
        g = torch.Generator().manual_seed(batch)
        np.save(x_path, torch.randn((batch,) + SHAPES[kind], generator=g).numpy())
    return onnx_path, x_path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--models", default="resnet18,mobilenet_v2")
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--torch-worker", nargs=2, metavar=("KIND", "INPUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_worker:
        torch_worker(args.torch_worker[0], args.torch_worker[1], args.threads, args.iterations)
        return 0

    weft = os.path.join(args.build, "weft")
    outdir = os.path.join(args.build, "bench-models")
    torch_env = {k: v for k, v in os.environ.items() if k not in TORCH_UNSET}
    unset = [k for k in TORCH_UNSET if k in os.environ]
    print("threads %d, %d iterations, median ms; PyTorch %s eager under torch.no_grad in a subprocess%s"
          % (args.threads, args.iterations, __import__("torch").__version__,
             " with %s unset" % " and ".join(unset) if unset else ""))
    print("%-14s %5s %12s %12s %12s %12s %8s" % ("model", "batch", "weft first", "weft median",
                                                "torch first", "torch median", "weft/torch"))
    rc = 0
    for kind in filter(None, args.models.split(",")):
        for batch in (int(b) for b in args.batches.split(",") if b):
            onnx_path, x_path = prepare(outdir, kind, batch)
            try:
                p = subprocess.run([weft, "run", onnx_path, "--input", "input=" + x_path, "--iterations",
                                    str(args.iterations), "--threads", str(args.threads), "--output-dir",
                                    os.path.join(outdir, kind, "out")],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
                if p.returncode != 0:
                    raise RuntimeError("weft run exited %d:\n%s" % (p.returncode, p.stdout[-2000:]))
                wf_first, wf_med = parse_time(p.stdout, "weft run")
                p = subprocess.run([sys.executable, os.path.abspath(__file__), "--torch-worker", kind, x_path,
                                    "--threads", str(args.threads), "--iterations", str(args.iterations)],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                                   env=torch_env)
                if p.returncode != 0:
                    raise RuntimeError("PyTorch worker exited %d:\n%s" % (p.returncode, p.stdout[-2000:]))
                pt_first, pt_med = parse_time(p.stdout, "PyTorch worker")
            except (RuntimeError, OSError) as e:
                print("%-14s %5d  error: %s" % (kind, batch, e))
                rc = 1
                continue
            print("%-14s %5d %12.2f %12.2f %12.2f %12.2f %8.2f" % (kind, batch, wf_first, wf_med, pt_first,
                                                                 pt_med, wf_med / pt_med), flush=True)
    print("weft/torch < 1 means weft is faster.")
    return rc


if __name__ == "__main__":
    sys.exit(main())
