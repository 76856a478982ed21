#!/usr/bin/python3
"""Single operators: `weft run` against ONNX Runtime on one-node models, interleaved in one run.

usage: bench_ops.py [BUILD] [--ort-python PY] [--threads T] [--rounds R] [--iterations N] [--ops substr,...]
                    [--out DIR]

Each case is a one-node ONNX model (opset 18-23) written by this script with Debian's python3-onnx into
DIR (default BUILD/bench-ops): the elementwise unary and binary ops (row and full broadcasts), comparisons
and Where, every Reduce op along the last and the first axis, ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax,
the norms (Layer, RMS, Lp, Instance, Group, Batch, LRN), the shape ops (Transpose, Concat, Split, Slice,
Gather, Cast, Clip, CumSum, TopK, Expand, Tile, Pad), pooling, Resize, DepthToSpace, Einsum and MatMul.
Inputs are f32 256 x 1024 (an [8, 64, 32, 32] map for the image ops), random normal, |x| + 0.1 where the op
needs positive values. Per case, R rounds of (weft, ORT): `BUILD/weft run MODEL --input ... --iterations N
--threads T` (its median) and a worker run with PY (a python that imports onnxruntime; scripts/venv-bench.sh
makes one): intra_op_num_threads T, inter_op 1, default graph optimisation, N timed runs after 5 untimed,
median. A row shows the median of each side's round medians and ORT / weft (above 1: weft is faster);
rows under 0.5 are marked. One-node models time the kernel plus a run's fixed costs (a fetched output is
copied to the caller), so a kernel of a few microseconds reads slower here than inside a model. Numbers
only, nothing is asserted.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

ORT_WORKER = r'''
import sys, time, json, numpy as np, onnxruntime as ort
m, feeds, n, threads = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
so = ort.SessionOptions(); so.intra_op_num_threads = threads; so.inter_op_num_threads = 1
s = ort.InferenceSession(m, so, providers=["CPUExecutionProvider"])
f = {k: np.load(v) for k, v in feeds.items()}
for _ in range(5): s.run(None, f)
t = []
for _ in range(n):
    t0 = time.perf_counter(); s.run(None, f); t.append(time.perf_counter() - t0)
t.sort(); print("%.5f" % (t[len(t) // 2] * 1e3))
'''


def build_cases(out):
    """Writes the models and inputs; returns [(name, {input: npy path})]."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper as nh, TensorProto as TP
    R, C, F = 256, 1024, TP.FLOAT
    rng = np.random.default_rng(0)
    os.makedirs(out, exist_ok=True)
    arrays = {}

    def arr(name, a):
        path = os.path.join(out, name + ".npy")
        if name not in arrays:
            np.save(path, a)
            arrays[name] = path
        return arrays[name]

    x = rng.standard_normal((R, C)).astype(np.float32)
    arr("x", x)
    arr("xp", np.abs(x) + 0.1)
    arr("xu", np.tanh(x))
    arr("x1", (1 + 0.001 * x).astype(np.float32))
    arr("row", x[:1].copy())
    arr("x4", rng.standard_normal((8, 64, 32, 32)).astype(np.float32))
    cases = []

    def vi(n, t, s):
        return helper.make_tensor_value_info(n, t, s)

    def add(name, nodes, inputs, outputs, feeds, inits=(), opset=18):
        g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]),
                  os.path.join(out, name + ".onnx"))
        cases.append((name, {k: arrays[v] for k, v in feeds.items()}))

    X, X2, Y = [vi("x", F, [R, C])], [vi("x", F, [R, C]), vi("x2", F, [R, C])], [vi("y", F, None)]
    for op in ["Abs", "Neg", "Exp", "Log", "Sqrt", "Tanh", "Sigmoid", "Relu", "Erf", "Softplus", "Elu", "Selu",
               "HardSigmoid", "LeakyRelu", "Ceil", "Floor", "Round", "Sign", "Reciprocal", "Sin", "Cos",
               "Softsign", "HardSwish", "Mish", "Gelu", "Celu", "Acos", "Atan"]:
        feed = "xp" if op in ("Log", "Sqrt") else "xu" if op == "Acos" else "x"
        add("unary_" + op, [helper.make_node(op, ["x"], ["y"])], X, Y, {"x": feed}, opset=20 if op == "Gelu" else 18)
    b = nh.from_array((np.abs(rng.standard_normal((C,))) + 0.5).astype(np.float32), "b")
    for op in ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu"]:
        xf = "xp" if op == "Pow" else "x"
        add("binary_%s_row" % op, [helper.make_node(op, ["x", "b"], ["y"])], X, Y, {"x": xf}, [b])
        add("binary_%s_full" % op, [helper.make_node(op, ["x", "x2"], ["y"])], X2, Y, {"x": xf, "x2": "xp"})
    for op in ["Equal", "Less"]:
        add("compare_" + op, [helper.make_node(op, ["x", "x2"], ["y"])], X2, [vi("y", TP.BOOL, None)],
            {"x": "x", "x2": "xp"})
    add("compare_Where", [helper.make_node("Less", ["x", "x2"], ["m"]), helper.make_node("Where", ["m", "x", "x2"], ["y"])],
        X2, Y, {"x": "x", "x2": "xp"})
    for op in ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
               "ReduceLogSumExp", "ReduceSumSquare", "ReduceLogSum"]:
        for ax in (-1, 0):
            a = nh.from_array(np.array([ax], np.int64), "a")
            feed = "xp" if op == "ReduceLogSum" else "x1" if op == "ReduceProd" else "x"
            add("reduce_%s_ax%d" % (op, ax), [helper.make_node(op, ["x", "a"], ["y"], keepdims=1)], X, Y, {"x": feed}, [a])
    for op in ["ArgMax", "ArgMin"]:
        for ax in (-1, 0):
            add("reduce_%s_ax%d" % (op, ax), [helper.make_node(op, ["x"], ["y"], axis=ax)], X, [vi("y", TP.INT64, None)],
                {"x": "x"})
    for op in ["Softmax", "LogSoftmax", "Hardmax"]:
        for ax in (-1, 0):
            add("axis_%s_ax%d" % (op, ax), [helper.make_node(op, ["x"], ["y"], axis=ax)], X, Y, {"x": "x"})
    sc, bi = nh.from_array(np.ones(C, np.float32), "s"), nh.from_array(np.zeros(C, np.float32), "bb")
    add("norm_LayerNormalization", [helper.make_node("LayerNormalization", ["x", "s", "bb"], ["y"], axis=-1)], X, Y,
        {"x": "x"}, [sc, bi])
    add("norm_RMSNormalization", [helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=-1)], X, Y, {"x": "x"},
        [sc], opset=23)
    add("norm_LpNormalization", [helper.make_node("LpNormalization", ["x"], ["y"], axis=-1, p=2)], X, Y, {"x": "x"})
    X4 = [vi("x", F, [8, 64, 32, 32])]
    c64 = [nh.from_array(np.ones(64, np.float32), "s4"), nh.from_array(np.zeros(64, np.float32), "b4")]
    add("norm_InstanceNormalization", [helper.make_node("InstanceNormalization", ["x", "s4", "b4"], ["y"])], X4, Y,
        {"x": "x4"}, c64)
    add("norm_GroupNormalization", [helper.make_node("GroupNormalization", ["x", "s4", "b4"], ["y"], num_groups=8)],
        X4, Y, {"x": "x4"}, c64, opset=21)
    add("norm_BatchNormalization", [helper.make_node("BatchNormalization", ["x", "s4", "b4", "m4", "v4"], ["y"])], X4,
        Y, {"x": "x4"}, c64 + [nh.from_array(np.zeros(64, np.float32), "m4"), nh.from_array(np.ones(64, np.float32), "v4")])
    add("norm_LRN", [helper.make_node("LRN", ["x"], ["y"], size=5)], X4, Y, {"x": "x4"})
    add("shape_Transpose", [helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0])], X, Y, {"x": "x"})
    for ax in (0, 1):
        add("shape_Concat_ax%d" % ax, [helper.make_node("Concat", ["x", "x2"], ["y"], axis=ax)], X2, Y,
            {"x": "x", "x2": "xp"})
    add("shape_Split_ax1", [helper.make_node("Split", ["x", "sp"], ["y", "z"], axis=1)], X, [vi("y", F, None), vi("z", F, None)],
        {"x": "x"}, [nh.from_array(np.array([512, 512], np.int64), "sp")])
    add("shape_Slice_step2", [helper.make_node("Slice", ["x", "st", "en", "ax", "stp"], ["y"])], X, Y, {"x": "x"},
        [nh.from_array(np.array([v], np.int64), n) for v, n in ((1, "st"), (1023, "en"), (1, "ax"), (2, "stp"))])
    for ax, hi in ((0, R), (1, C)):
        idx = nh.from_array(rng.integers(0, hi, size=(512,)).astype(np.int64), "i")
        add("shape_Gather_ax%d" % ax, [helper.make_node("Gather", ["x", "i"], ["y"], axis=ax)], X, Y, {"x": "x"}, [idx])
    for nm_, to in (("f16", TP.FLOAT16), ("i32", TP.INT32)):
        add("shape_Cast_%s" % nm_, [helper.make_node("Cast", ["x"], ["y"], to=to)], X, [vi("y", to, None)], {"x": "x"})
    add("shape_Clip", [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], X, Y, {"x": "x"},
        [nh.from_array(np.array(-0.5, np.float32), "lo"), nh.from_array(np.array(0.5, np.float32), "hi")])
    for ax in (0, 1):
        add("shape_CumSum_ax%d" % ax, [helper.make_node("CumSum", ["x", "a"], ["y"])], X, Y, {"x": "x"},
            [nh.from_array(np.array(ax, np.int64), "a")])
    add("shape_TopK10", [helper.make_node("TopK", ["x", "k"], ["y", "i"], axis=-1)], X,
        [vi("y", F, None), vi("i", TP.INT64, None)], {"x": "x"}, [nh.from_array(np.array([10], np.int64), "k")])
    add("shape_Expand", [helper.make_node("Expand", ["r", "sh"], ["y"])], [vi("r", F, [1, C])], Y, {"r": "row"},
        [nh.from_array(np.array([R, C], np.int64), "sh")])
    add("shape_Tile", [helper.make_node("Tile", ["x", "rp"], ["y"])], X, Y, {"x": "x"},
        [nh.from_array(np.array([2, 2], np.int64), "rp")])
    for mode in ("constant", "reflect"):
        add("shape_Pad_%s" % mode, [helper.make_node("Pad", ["x", "pd"], ["y"], mode=mode)], X, Y, {"x": "x"},
            [nh.from_array(np.array([1, 3, 1, 3], np.int64), "pd")])
    add("image_MaxPool3x3s2", [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                                                pads=[1, 1, 1, 1])], X4, Y, {"x": "x4"})
    add("image_AveragePool3x3", [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
        X4, Y, {"x": "x4"})
    add("image_GlobalAveragePool", [helper.make_node("GlobalAveragePool", ["x"], ["y"])], X4, Y, {"x": "x4"})
    add("image_GlobalMaxPool", [helper.make_node("GlobalMaxPool", ["x"], ["y"])], X4, Y, {"x": "x4"})
    scales = nh.from_array(np.array([1, 1, 2, 2], np.float32), "sc")
    for mode in ("nearest", "linear"):
        add("image_Resize_%s_x2" % mode, [helper.make_node("Resize", ["x", "", "sc"], ["y"], mode=mode)], X4, Y,
            {"x": "x4"}, [scales])
    add("image_DepthToSpace", [helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2)], X4, Y, {"x": "x4"})
    w = nh.from_array(rng.standard_normal((C, 256)).astype(np.float32), "w")
    add("gemm_Einsum_ij_jk", [helper.make_node("Einsum", ["x", "w"], ["y"], equation="ij,jk->ik")], X, Y, {"x": "x"}, [w])
    add("gemm_MatMul", [helper.make_node("MatMul", ["x", "w"], ["y"])], X, Y, {"x": "x"}, [w])
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--ort-python", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--ops", default="")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    weft = os.path.join(build, "weft")
    out = args.out or os.path.join(build, "bench-ops")
    py = args.ort_python or os.path.join(build, "venv-bench", "bin", "python")
    ort_ok = os.path.exists(py) and subprocess.run([py, "-c", "import onnxruntime"], capture_output=True).returncode == 0
    with open("/proc/cpuinfo") as f:
        flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    print("CPU ISA: %s" % " ".join(v for v in ("avx2", "fma", "avx512f", "avx512_bf16") if v in flags))
    print("weft: %s run --threads %d --iterations %d; ORT: %s (%s), intra_op %d; %d rounds (weft, ORT) a case"
          % (weft, args.threads, args.iterations, py, "onnxruntime" if ort_ok else "missing: no ORT column",
             args.threads, args.rounds))
    cases = build_cases(out)
    want = [s for s in args.ops.split(",") if s]
    rows, slow = [], 0
    print("%-30s %10s %10s %9s" % ("case", "weft ms", "ORT ms", "ORT/weft"))
    for name, feeds in cases:
        if want and not any(s in name for s in want):
            continue
        model = os.path.join(out, name + ".onnx")
        ins = []
        for k, v in feeds.items():
            ins += ["--input", "%s=%s" % (k, v)]
        wt, ot, err = [], [], None
        for _ in range(args.rounds):
            p = subprocess.run([weft, "run", model] + ins + ["--iterations", str(args.iterations), "--threads",
                                                              str(args.threads)], capture_output=True, text=True)
            m = re.search(r"median ([0-9.]+) ms", p.stdout + p.stderr)
            if not m:
                err = (p.stdout + p.stderr).strip().splitlines()[-1:] or ["no output"]
                break
            wt.append(float(m.group(1)))
            if ort_ok:
                q = subprocess.run([py, "-c", ORT_WORKER, model, json.dumps(feeds), str(args.iterations),
                                    str(args.threads)], capture_output=True, text=True)
                try:
                    ot.append(float(q.stdout.strip()))
                except ValueError:
                    pass
        if err:
            print("%-30s weft failed: %s" % (name, err[0][:90]))
            continue
        w = statistics.median(wt)
        o = statistics.median(ot) if ot else None
        r = o / w if o else None
        slow += r is not None and r < 0.5
        print("%-30s %10.3f %10s %9s%s" % (name, w, "%.3f" % o if o else "-", "%.2f" % r if r else "-",
                                           "  <- under 0.5" if r is not None and r < 0.5 else ""), flush=True)
        if r:
            rows.append(r)
    if rows:
        import math
        print("geometric mean of ORT/weft over %d case(s): %.2f; %d under 0.5"
              % (len(rows), math.exp(sum(math.log(v) for v in rows) / len(rows)), slow))


if __name__ == "__main__":
    sys.exit(main())
