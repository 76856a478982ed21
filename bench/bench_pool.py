#!/usr/bin/env python3
"""Pooling layers alone: `weft run` against ONNX Runtime on one-node models, interleaved in one run.

The shapes are the pools of the models in bench_ort.py (SqueezeNet 1.1, GoogLeNet, ResNet-50 at batch 1
and 8, DenseNet-121), written here with onnx's helper. Each row runs weft, ORT, weft, ORT ... with the
same intra-op thread count, prints both medians and checks weft's output against ORT's.

    /usr/bin/python3 bench/bench_pool.py build --ort-python build/venv-bench/bin/python
"""
import argparse
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_ort  # noqa: E402  (ORT_WORKER, run_one, cpu_line, rel_diff)

# name, input shape, ONNX op, kernel, stride, ceil_mode, pads (begin H, W, end H, W), which model has it
ROWS = [
    ("squeezenet_pool1", (1, 64, 111, 111), "MaxPool", 3, 2, 1, (0, 0, 0, 0), "SqueezeNet 1.1 features.2"),
    ("squeezenet_pool3", (1, 256, 27, 27), "MaxPool", 3, 2, 1, (0, 0, 0, 0), "SqueezeNet 1.1 features.8"),
    ("googlenet_s1_14", (1, 480, 14, 14), "MaxPool", 3, 1, 1, (1, 1, 1, 1), "GoogLeNet inception branch"),
    ("googlenet_s1_7", (1, 832, 7, 7), "MaxPool", 3, 1, 1, (1, 1, 1, 1), "GoogLeNet inception 5 branch"),
    ("resnet_stem", (1, 64, 112, 112), "MaxPool", 3, 2, 0, (1, 1, 1, 1), "ResNet-50 / DenseNet-121 stem"),
    ("resnet_stem_b8", (8, 64, 112, 112), "MaxPool", 3, 2, 0, (1, 1, 1, 1), "ResNet-50 stem, batch 8"),
    ("densenet_transition", (1, 256, 56, 56), "AveragePool", 2, 2, 0, (0, 0, 0, 0), "DenseNet-121 transition"),
]


def make_model(path, shape, op, k, s, ceil, pads):
    import onnx
    from onnx import helper, TensorProto
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, None)
    node = helper.make_node(op, ["input"], ["output"], kernel_shape=[k, k], strides=[s, s], ceil_mode=ceil,
                            pads=list(pads))
    model = helper.make_model(helper.make_graph([node], "pool", [x], [y]), opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--out", help="model and output folder (default BUILD/bench-pool)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ort-python", help="a python that imports onnxruntime (sh scripts/venv-bench.sh)")
    args = ap.parse_args()
    out = args.out or os.path.join(args.build, "bench-pool")
    os.makedirs(out, exist_ok=True)
    weft = os.path.join(args.build, "weft")
    print(bench_ort.cpu_line())
    if not args.ort_python:
        print("ORT: no --ort-python given, so only weft's column is measured")
    rng = np.random.default_rng(7)
    table = []
    for name, shape, op, k, s, ceil, pads, where in ROWS:
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        model, x_path = os.path.join(folder, "model.onnx"), os.path.join(folder, "input.npy")
        make_model(model, shape, op, k, s, ceil, pads)
        np.save(x_path, rng.standard_normal(shape).astype(np.float32))
        ort_y = os.path.join(folder, "ort.npy")
        wmed, omed = [], []
        for r in range(args.rounds):
            wmed.append(bench_ort.run_one([weft, "run", model, "--input", "input=" + x_path, "--iterations",
                                           str(args.iterations), "--threads", str(args.threads), "--output-dir",
                                           folder], "weft run"))
            if args.ort_python:
                omed.append(bench_ort.run_one([args.ort_python, "-c", bench_ort.ORT_WORKER, model, x_path,
                                               str(args.iterations), str(args.threads), ort_y], "ORT worker"))
            print("  %s round %d: weft %.3f ms, ORT %s ms" % (name, r + 1, wmed[-1],
                                                              "%.3f" % omed[-1] if omed else "-"))
        wm = statistics.median(wmed)
        if omed:
            om = statistics.median(omed)
            diff = bench_ort.rel_diff(np.load(os.path.join(folder, "output.npy")), np.load(ort_y))
            table.append("%-20s %-11s %-18s %8.3f %8.3f %8.3f  %.1e %s  (%s)" % (
                name, op, "x".join(map(str, shape)), wm, om, om / wm, diff,
                "ok" if diff <= bench_ort.REL_TOL else "DIFFERS", where))
        else:
            table.append("%-20s %-11s %-18s %8.3f %8s %8s  %s" % (name, op, "x".join(map(str, shape)), wm, "-", "-", where))
    print()
    print("%-20s %-11s %-18s %8s %8s %8s  %s" % ("row", "op", "input", "weft ms", "ORT ms", "ORT/weft",
                                                 "weft vs ORT"))
    for line in table:
        print(line)
    print("medians of %d interleaved rounds of %d runs each, %d intra-op threads for both; times include feeding "
          "the input (weft run's median, ORT's session.run)" % (args.rounds, args.iterations, args.threads))


if __name__ == "__main__":
    main()
