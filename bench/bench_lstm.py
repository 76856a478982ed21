#!/usr/bin/python3
"""A 2-layer LSTM classifier through `weft run`, before and after, and through ONNX Runtime if given.

usage: bench_lstm.py [BUILD] [--base REV] [--rounds N] [--iterations N] [--ort-python PY]
                     [--cell lstm|gru|rnn] [--seq 32] [--batch 8] [--input 64] [--hidden 128]

Exports torch.nn.LSTM(input, hidden, num_layers=2) (or GRU, which exports as ONNX GRU with
linear_before_reset=1, or RNN with tanh) + Linear(hidden, 10) on the last step (random weights, opset 13) with Debian's torch into BUILD/bench-lstm, builds the baseline weft of REV as
bench_before_after.py does (BUILD/bench-baseline/REV, once), and runs baseline, current and, with
--ort-python (a python that imports onnxruntime, e.g. a venv made with `pip install onnxruntime`),
ONNX Runtime with 2 intra-op threads, interleaved per round. Prints each run's median and the median
of the rounds; checks every output against torch's (max abs difference). Numbers only, nothing is
asserted.
"""
import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bench_before_after import build_baseline  # noqa: E402
from bench_models import parse_time  # noqa: E402

ORT_WORKER = r'''
import sys, time, statistics, numpy as np, onnxruntime as ort
so = ort.SessionOptions(); so.intra_op_num_threads = 2
s = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
x = np.load(sys.argv[2]); n = int(sys.argv[3])
t = []
for _ in range(n + 1):
    t0 = time.perf_counter(); y = s.run(None, {"input": x})[0]; t.append((time.perf_counter() - t0) * 1e3)
np.save(sys.argv[4], y)
print("time: first %.3f ms, median %.3f ms over %d runs" % (t[0], statistics.median(t[1:]), n))
'''


def export(folder, cell, seq, batch, inp, hidden):
    import numpy as np
    import torch
    onnx_path = os.path.join(folder, "%s2.onnx" % cell)
    if os.path.exists(onnx_path):
        return onnx_path
    os.makedirs(folder, exist_ok=True)
    torch.manual_seed(0)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}[cell](inp, hidden,
                                                                                               num_layers=2)
            self.fc = torch.nn.Linear(hidden, 10)

        def forward(self, x):
            return self.fc(self.lstm(x)[0][-1])

    m = M().eval()
    x = torch.randn(seq, batch, inp)
    torch.onnx.export(m, (x,), onnx_path, input_names=["input"], output_names=["logits"], opset_version=13)
    np.save(os.path.join(folder, "x.npy"), x.numpy())
    with torch.no_grad():
        np.save(os.path.join(folder, "ref.npy"), m(x).numpy())
    return onnx_path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--base", default="9dadd43")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--ort-python")
    ap.add_argument("--cell", choices=("lstm", "gru", "rnn"), default="lstm")
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--input", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=128)
    args = ap.parse_args()
    import numpy as np
    folder = os.path.join(os.path.abspath(args.build), "bench-lstm", "%s-%d-%d-%d-%d" % (
        args.cell, args.seq, args.batch, args.input, args.hidden))
    onnx_path = export(folder, args.cell, args.seq, args.batch, args.input, args.hidden)
    x_path, ref = os.path.join(folder, "x.npy"), np.load(os.path.join(folder, "ref.npy"))
    rev, base = build_baseline(args.build, args.base, False)
    runners = [("weft " + rev, base), ("weft now", os.path.join(args.build, "weft"))]
    if args.ort_python:
        runners.append(("onnxruntime", None))
    print("2-layer %s: seq %d, batch %d, input %d, hidden %d; %d rounds of %d runs, median ms"
          % (args.cell.upper(), args.seq, args.batch, args.input, args.hidden, args.rounds, args.iterations))
    med = {name: [] for name, _ in runners}
    for r in range(args.rounds):
        for name, exe in runners:
            out = os.path.join(folder, "out-%d" % len(med[name]))
            os.makedirs(out, exist_ok=True)
            y_path = os.path.join(out, "logits.npy")
            if exe:
                cmd = [exe, "run", onnx_path, "--input", "input=" + x_path, "--iterations", str(args.iterations),
                       "--output-dir", out]
            else:
                cmd = [args.ort_python, "-c", ORT_WORKER, onnx_path, x_path, str(args.iterations), y_path]
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
            if p.returncode != 0:
                print("%s exited %d:\n%s" % (name, p.returncode, p.stdout[-2000:]))
                return 1
            first, m = parse_time(p.stdout, name)
            med[name].append(m)
            err = float(np.abs(np.load(y_path) - ref).max())
            print("round %d %-14s first %9.2f  median %9.3f  max|y - torch| %.2g" % (r + 1, name, first, m, err),
                  flush=True)
    for name, _ in runners:
        print("%-14s median of rounds %9.3f ms" % (name, statistics.median(med[name])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
