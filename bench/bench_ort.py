#!/usr/bin/python3
"""Model latency: `weft run` against ONNX Runtime on PyTorch-exported models, interleaved in one run.

usage: bench_ort.py [BUILD] [--out DIR] [--rounds R] [--iterations N] [--min-ms MS] [--threads T] [--models a,b]
                    [--ort-python PY]

Models (exported once with Debian's torch/torchvision into DIR/NAME/, default BUILD/bench-ort, and
reused): torchvision ResNet-50 (batch 1 and 8), MobileNetV3-small, EfficientNet-B0, SqueezeNet 1.1,
ShuffleNetV2 x1.0, DenseNet-121 and GoogLeNet at batch 1 on 3x224x224 inputs; a BERT-style encoder
built here (4 layers, d_model 256, 4 heads, FFN 1024, GELU, LayerNorm, seq 128, batch 1, opset 17, plain
MatMul/Softmax attention, no fused ops); the 2-layer LSTM classifier of bench_lstm.py (seq 32, batch 8,
input 64, hidden 128, Linear to 10). Weights are random but BatchNorm statistics are calibrated: 8
forward passes in train mode under torch.no_grad with momentum None (a cumulative average) on random
normal inputs, then eval() and export; each export prints the output's std and how much the output
moves when the input changes (a degenerate, all-bias model does not move).

Per model, R rounds of (weft, ORT): `BUILD/weft run MODEL --input NAME=X.npy --iterations N --threads T`
and a worker run with PY (a python that imports onnxruntime; `sh scripts/venv-bench.sh` makes one) with
intra_op_num_threads T, inter_op_num_threads 1, graph_optimization_level ORT_ENABLE_ALL (the default),
CPUExecutionProvider. Both do one untimed first run and N timed runs and report the median, N being
--iterations or, for a model whose run is short, enough runs to take --min-ms (default 300 ms) by a
probe of weft (3 runs) before the rounds: a 1 ms model timed over 10 runs saw a few milliseconds of a
shared machine and swung by 50% between rounds, over 300 runs it does not; a row shows
the median of the R round medians, the ratio ORT / weft (above 1 means weft is faster), weft's GFLOP/s
(2 x the MACs of Conv, Gemm, MatMul and LSTM nodes, counted from the ONNX graph) against oneDNN's 1024^3
f32 GEMM rate measured in the same run by BUILD/bench/bench_matmul (%GEMM: the better of a rate before
the rows and one after; %rounds, for compute-bound rows: the median of a rate measured in each of the
row's rounds after its weft and ORT runs, so that a row timed in a noisy spell of a shared machine is set
against the GEMM in that spell), and weft's output against ORT's (and torch's). The geometric mean of the ratios comes last. Numbers only, nothing is asserted.
"""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bench_models import TORCH_UNSET, parse_time  # noqa: E402

# name -> (folder, kind, batch); rows sharing a folder share one export (its batch axis is dynamic).
ROWS = [
    ("resnet50", "resnet50", "tv", 1),
    ("resnet50_b8", "resnet50", "tv", 8),
    ("mobilenet_v3_small", "mobilenet_v3_small", "tv", 1),
    ("efficientnet_b0", "efficientnet_b0", "tv", 1),
    ("squeezenet1_1", "squeezenet1_1", "tv", 1),
    ("shufflenet_v2_x1_0", "shufflenet_v2_x1_0", "tv", 1),
    ("densenet121", "densenet121", "tv", 1),
    ("googlenet", "googlenet", "tv", 1),
    ("bert", "bert", "bert", 1),
    ("lstm", "lstm", "lstm", 8),
]
# Rows whose time is dominated by large convolutions and matrix products (the GFLOP/s goal applies).
# Exported with a dynamic batch axis (one export serves both batches); the others are exported at their
# batch so that constant folding leaves no Shape/Gather/Concat chains (ShuffleNet's channel shuffle grows
# 77 Shape nodes with a dynamic batch).
DYNAMIC_BATCH = {"resnet50"}
COMPUTE_BOUND = {"resnet50", "resnet50_b8", "densenet121", "googlenet", "bert"}
BERT = dict(layers=4, d=256, heads=4, ffn=1024, seq=128)
LSTM = dict(seq=32, batch=8, inp=64, hidden=128)
CALIB_PASSES, CALIB_BATCH = 8, 4
# weft against ORT: max |weft - ORT| / max |ORT| above this is flagged.
REL_TOL = 1e-3

ORT_WORKER = r'''
import statistics, sys, time
import numpy as np, onnxruntime as ort
model, x_path, n, threads, y_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
so = ort.SessionOptions()
so.intra_op_num_threads = threads
so.inter_op_num_threads = 1
so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
feed = {s.get_inputs()[0].name: np.load(x_path)}
t = []
for _ in range(n + 1):
    t0 = time.perf_counter()
    y = s.run(None, feed)[0]
    t.append((time.perf_counter() - t0) * 1e3)
np.save(y_path, y)
print("time: first %.3f ms, median %.3f ms over %d runs" % (t[0], statistics.median(t[1:]), n))
'''


# ---------------------------------------------------------------------------------------------- export

def calibrate(model, shape):
    """BatchNorm running statistics from CALIB_PASSES train-mode passes on random normal inputs."""
    import torch
    for mod in model.modules():
        if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
            mod.reset_running_stats()
            mod.momentum = None  # cumulative average over the passes
    model.train()
    g = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for _ in range(CALIB_PASSES):
            model(torch.randn((CALIB_BATCH,) + shape, generator=g))
    return model.eval()


def make_bert():
    import torch
    from torch import nn
    d, h, ffn, seq = BERT["d"], BERT["heads"], BERT["ffn"], BERT["seq"]

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.up, self.down = nn.Linear(d, ffn), nn.Linear(ffn, d)

        def forward(self, x):
            b, s = x.shape[0], x.shape[1]

            def heads(t):
                return t.reshape(b, s, h, d // h).transpose(1, 2)
            q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
            a = torch.softmax(torch.matmul(q, k.transpose(2, 3)) / math.sqrt(d // h), dim=-1)
            a = torch.matmul(a, v).transpose(1, 2).reshape(b, s, d)
            x = self.ln1(x + self.o(a))
            return self.ln2(x + self.down(nn.functional.gelu(self.up(x))))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.pos = nn.Parameter(torch.randn(1, seq, d) * 0.02)
            self.ln = nn.LayerNorm(d)
            self.layers = nn.ModuleList(Layer() for _ in range(BERT["layers"]))

        def forward(self, x):  # x: token embeddings [batch, seq, d]
            x = self.ln(x + self.pos)
            for layer in self.layers:
                x = layer(x)
            return x

    return Encoder().eval()


def export_worker(folder, kind, batches):
    """Runs in a subprocess (Debian's torch, TORCH_UNSET unset): exports KIND into FOLDER."""
    import numpy as np
    import torch
    torch.set_num_threads(2)
    torch.manual_seed(0)
    os.makedirs(folder, exist_ok=True)
    name = os.path.basename(folder)
    info = {}
    if kind == "tv":
        import torchvision
        kw = {"aux_logits": False, "init_weights": True} if name == "googlenet" else {}
        model = calibrate(getattr(torchvision.models, name)(weights=None, **kw), (3, 224, 224))
        shape, dyn = (3, 224, 224), name in DYNAMIC_BATCH
    else:
        model, shape, dyn = make_bert(), (BERT["seq"], BERT["d"]), False
    onnx_path = os.path.join(folder, "model.onnx")
    x = torch.randn((batches[0],) + shape, generator=torch.Generator().manual_seed(7))
    kwargs = dict(input_names=["input"], output_names=["output"], opset_version=17 if kind == "bert" else 13,
                  do_constant_folding=True)
    if dyn:
        kwargs["dynamic_axes"] = {"input": {0: "batch"}, "output": {0: "batch"}}
    torch.onnx.export(model, (x,), onnx_path, **kwargs)
    g = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for b in batches:
            x = torch.randn((b,) + shape, generator=torch.Generator().manual_seed(b))
            np.save(os.path.join(folder, "input_b%d.npy" % b), x.numpy())
            y = model(x)
            np.save(os.path.join(folder, "ref_b%d.npy" % b), y.numpy())
        # MACs per sample of the Conv2d and Linear modules (fvcore-like, from forward hooks), for graphs
        # whose shapes onnx's inference cannot follow (ShuffleNet's chunk becomes Shape->Slice chains).
        macs = [0]

        def hook(mod, inputs, y):
            if isinstance(mod, torch.nn.Conv2d):
                macs[0] += y.numel() * mod.weight[0].numel()
            elif isinstance(mod, torch.nn.Linear):
                macs[0] += y.numel() * mod.in_features
        hooks = [mod.register_forward_hook(hook) for mod in model.modules()]
        model(torch.zeros((1,) + shape))
        for h in hooks:
            h.remove()
        info["macs_per_sample_modules"] = macs[0]
        x2 = torch.randn((batches[0],) + shape, generator=g)
        y, y2 = model(torch.from_numpy(np.load(os.path.join(folder, "input_b%d.npy" % batches[0])))), model(x2)
        info["std"] = float(y.std())
        info["sensitivity"] = float((y - y2).std() / max(float(y.std()), 1e-30))
        info["note"] = ("BatchNorm calibrated: %d train-mode passes at batch %d, momentum None"
                        % (CALIB_PASSES, CALIB_BATCH) if kind == "tv" else "random init, no BatchNorm")
    with open(os.path.join(folder, "info.json"), "w") as f:
        json.dump(info, f)


def export_lstm_worker(folder):
    import numpy as np
    import torch
    import bench_lstm
    torch.set_num_threads(2)
    os.makedirs(folder, exist_ok=True)
    sub = os.path.join(folder, "src")
    path = bench_lstm.export(sub, "lstm", LSTM["seq"], LSTM["batch"], LSTM["inp"], LSTM["hidden"])
    b = LSTM["batch"]
    os.replace(path, os.path.join(folder, "model.onnx"))
    os.replace(os.path.join(sub, "x.npy"), os.path.join(folder, "input_b%d.npy" % b))
    os.replace(os.path.join(sub, "ref.npy"), os.path.join(folder, "ref_b%d.npy" % b))
    os.rmdir(sub)
    ref = np.load(os.path.join(folder, "ref_b%d.npy" % b))
    with open(os.path.join(folder, "info.json"), "w") as f:
        # bench_lstm's module is not kept, so the input sensitivity is the spread over the batch rows
        # (every row has its own input).
        json.dump({"std": float(ref.std()), "sensitivity": float(ref.std(axis=0).mean() / max(ref.std(), 1e-30)),
                   "note": "bench_lstm.export (seed 0, no BatchNorm); sensitivity: spread over the batch"}, f)


def prepare(out, folder, kind, batches, log):
    """Exports FOLDER once (a subprocess of Debian's python); returns (onnx, {batch: (x, ref)}, info)."""
    d = os.path.join(out, folder)
    onnx_path = os.path.join(d, "model.onnx")
    files = {b: (os.path.join(d, "input_b%d.npy" % b), os.path.join(d, "ref_b%d.npy" % b)) for b in batches}
    have = all(os.path.exists(p) for p in [onnx_path, os.path.join(d, "info.json")] +
               [p for pair in files.values() for p in pair])
    if not have:
        env = {k: v for k, v in os.environ.items() if k not in TORCH_UNSET}
        cmd = [sys.executable, os.path.abspath(__file__), "--export-worker", d, kind, ",".join(map(str, batches))]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env)
        if p.returncode != 0:
            raise RuntimeError("export of %s failed (exit %d):\n%s" % (folder, p.returncode, p.stdout[-3000:]))
        log("exported %s into %s" % (folder, d))
    with open(os.path.join(d, "info.json")) as f:
        return onnx_path, files, json.load(f)


# ---------------------------------------------------------------------------------------------- FLOPs

def count_flops(onnx_path, batch):
    """2 x MACs of the Conv, ConvTranspose, Gemm, MatMul and LSTM/GRU nodes, shapes from onnx's inference."""
    import onnx
    from onnx import numpy_helper, shape_inference
    m = onnx.load(onnx_path)
    del m.graph.value_info[:]
    for v in list(m.graph.input) + list(m.graph.output):
        for dim in v.type.tensor_type.shape.dim:
            if dim.dim_param:
                dim.dim_value = batch
    # data_prop carries Shape -> Gather/Slice values into the sizes of Slice and Reshape (ShuffleNet's chunk)
    m = shape_inference.infer_shapes(m, data_prop=True)
    shapes = {}
    for v in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        if not v.type.tensor_type.HasField("shape"):
            continue  # rank unknown
        dims = [dm.dim_value if dm.HasField("dim_value") else None for dm in v.type.tensor_type.shape.dim]
        shapes[v.name] = dims
    for t in m.graph.initializer:
        shapes[t.name] = list(t.dims)
    for n in m.graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    shapes[n.output[0]] = list(numpy_helper.to_array(a.t).shape)

    def prod(v):
        r = 1
        for x in v:
            if x is None:
                raise ValueError("unknown dimension")
            r *= x
        return r

    macs, unknown = 0, []
    for n in m.graph.node:
        try:
            if n.op_type in ("Conv", "ConvTranspose"):
                w, y = shapes[n.input[1]], shapes[n.output[0]]
                if len(y) < 3 or len(w) < 3:
                    raise ValueError("no shape")
                macs += prod(y) * prod(w[1:]) if n.op_type == "Conv" else prod(shapes[n.input[0]]) * prod(w[1:])
            elif n.op_type == "Gemm":
                a = shapes[n.input[0]]
                if len(a) != 2:
                    raise ValueError("no shape")
                trans_a = any(at.name == "transA" and at.i for at in n.attribute)
                macs += prod(shapes[n.output[0]]) * a[0 if trans_a else 1]
            elif n.op_type == "MatMul":
                a, y = shapes[n.input[0]], shapes[n.output[0]]
                if not a or not y:
                    raise ValueError("no shape")
                macs += prod(y) * a[-1]
            elif n.op_type in ("LSTM", "GRU", "RNN"):
                x, w, r = shapes[n.input[0]], shapes[n.input[1]], shapes[n.input[2]]
                macs += x[0] * x[1] * w[0] * w[1] * (w[2] + r[2])
        except (KeyError, IndexError, ValueError, TypeError):
            unknown.append(n.name or n.op_type)
    return 2.0 * macs, unknown


# ---------------------------------------------------------------------------------------------- runs

def cpu_line():
    flags, model = set(), "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
                elif line.startswith("model name") and model == "?":
                    model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    want = ["avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"]
    have = [f for f in want if f in flags]
    missing = [f for f in want if f not in flags]
    return "CPU: %s, %d logical cores (os.cpu_count), %d usable (sched_getaffinity); ISA: %s%s" % (
        model, os.cpu_count() or 0, len(os.sched_getaffinity(0)), " ".join(have) or "none of these",
        ("; absent: " + " ".join(missing)) if missing else "")


GEMM_RE = re.compile(r"^direct\s+([0-9.]+) ms\s+([0-9.]+) GFLOP/s", re.M)


def gemm_rate(build, threads, log):
    """oneDNN's 1024^3 f32 GEMM rate in GFLOP/s, or None; log None: quiet (a round's rate, shown in its line)"""
    log = log or (lambda s: None)
    exe = os.path.join(build, "bench", "bench_matmul")
    if not os.path.exists(exe):
        log("oneDNN GEMM rate: %s is missing (build target bench_matmul, WEFT_BENCH=ON)" % exe)
        return None
    p = subprocess.run([exe, "--threads", str(threads)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    m = GEMM_RE.search(p.stdout)
    if p.returncode != 0 or not m:
        log("oneDNN GEMM rate: bench_matmul exited %d without a 'direct' line:\n%s" % (p.returncode, p.stdout[-1500:]))
        return None
    log("oneDNN f32 GEMM 1024^3, %d threads (bench_matmul, oneDNN called directly): %.3f ms, %.1f GFLOP/s"
        % (threads, float(m.group(1)), float(m.group(2))))
    return float(m.group(2))


def run_one(cmd, what):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if p.returncode != 0:
        raise RuntimeError("%s exited %d:\n%s" % (what, p.returncode, p.stdout[-3000:].rstrip()))
    return parse_time(p.stdout, what)[1]


def rel_diff(a, b):
    import numpy as np
    if a.shape != b.shape:
        return float("inf")
    return float(np.abs(a.astype(np.float64) - b).max() / max(float(np.abs(b).max()), 1e-30))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", help="export and output folder (default BUILD/bench-ort)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--min-ms", type=float, default=300.0,
                    help="at least this many ms of timed runs per run of a model (more iterations for short models)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--opt-level", type=int, default=None,
                    help="weft run --opt-level (default: weft's, 2; 3 adds the blocked layouts)")
    ap.add_argument("--models", help="comma-separated subset of: " + ",".join(r[0] for r in ROWS))
    ap.add_argument("--ort-python", help="a python that imports onnxruntime (sh scripts/venv-bench.sh)")
    ap.add_argument("--export-worker", nargs=3, metavar=("DIR", "KIND", "BATCHES"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.export_worker:
        d, kind, batches = args.export_worker
        if kind == "lstm":
            export_lstm_worker(d)
        else:
            export_worker(d, kind, [int(b) for b in batches.split(",")])
        return 0
    import numpy as np

    def log(s):
        print(s, flush=True)

    build = os.path.abspath(args.build)
    out = os.path.abspath(args.out or os.path.join(build, "bench-ort"))
    weft = os.path.join(build, "weft")
    rows = ROWS
    if args.models:
        want = [w for w in args.models.split(",") if w]
        bad = [w for w in want if w not in [r[0] for r in ROWS]]
        if bad:
            ap.error("unknown model(s) %s; known: %s" % (",".join(bad), ",".join(r[0] for r in ROWS)))
        rows = [r for r in ROWS if r[0] in want]

    log(cpu_line())
    ort_why = None
    if not args.ort_python:
        ort_why = "no --ort-python given (sh scripts/venv-bench.sh makes build/venv-bench with onnxruntime)"
    else:
        p = subprocess.run([args.ort_python, "-c", "import onnxruntime as o; print(o.__version__)"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        if p.returncode != 0:
            ort_why = "%s cannot import onnxruntime: %s" % (args.ort_python, p.stdout.strip().splitlines()[-1:])
        else:
            log("ONNX Runtime %s (%s): CPUExecutionProvider, intra_op %d, inter_op 1, sequential, "
                "graph_optimization_level ORT_ENABLE_ALL (its default); environment unchanged"
                % (p.stdout.strip(), args.ort_python, args.threads))
    if ort_why:
        log("ORT column missing: " + ort_why)
    unset = [k for k in TORCH_UNSET if k in os.environ]
    log("weft: %s run --threads %d%s, environment unchanged%s" % (
        weft, args.threads, " --opt-level %d" % args.opt_level if args.opt_level is not None else "", (" (%s kept)" % ", ".join("%s=%s" % (k, os.environ[k]) for k in unset)) if unset else ""))
    log("%d rounds of (weft, ORT) per model; each run: 1 untimed first run + %d timed, median; "
        "a row's ms are the median of its round medians; at least %g ms of timed runs a run"
        % (args.rounds, args.iterations, args.min_ms))
    log("exports: %s, once, by Debian's torch/torchvision in subprocesses run with %s unset"
        % (out, " and ".join(TORCH_UNSET)))
    log("weights: random (torch seed 0); torchvision BatchNorm statistics calibrated by %d train-mode passes "
        "at batch %d under no_grad, momentum None, then eval(); opset 13 (the BERT-style encoder: 17)"
        % (CALIB_PASSES, CALIB_BATCH))
    gemm = [g for g in [gemm_rate(build, args.threads, log)] if g]

    batches = {}
    for _, folder, kind, b in ROWS:  # every batch of a folder, whatever --models selects
        batches.setdefault((folder, kind), []).append(b)
    table, ratios, notes = [], [], []
    hdr = "%-19s %5s %8s %10s %10s %8s %9s %7s %7s %9s %9s  %s" % (
        "model", "batch", "GFLOP", "weft ms", "ORT ms", "ORT/weft", "GFLOP/s", "%GEMM", "%rounds", "out std", "x-sens",
        "weft vs ORT (torch)")
    for name, folder, kind, b in rows:
        try:
            onnx_path, files, info = prepare(out, folder, kind, sorted(batches[(folder, kind)]), log)
        except RuntimeError as e:
            log("%s: %s" % (name, e))
            table.append((("%-19s %5d  export failed (above)" % (name, b)).replace("%", "%%") + "%s",
                          lambda rates: ""))
            continue
        x_path, ref_path = files[b]
        try:
            flops, unknown = count_flops(onnx_path, b)
            if unknown and info.get("macs_per_sample_modules"):
                flops = 2.0 * b * info["macs_per_sample_modules"]
                notes.append("%s: onnx's shape inference lost the shapes of %d node(s) (%s, ...): FLOPs counted "
                             "on the torch modules instead (Conv2d and Linear forward hooks)"
                             % (name, len(unknown), unknown[0]))
            elif unknown:
                notes.append("%s: FLOPs of %d node(s) not counted (unknown shapes): %s"
                             % (name, len(unknown), ", ".join(unknown[:5])))
        except Exception as e:  # onnx's shape inference can refuse a graph: the row goes on without FLOPs
            flops = None
            notes.append("%s: FLOPs not counted: %s" % (name, e))
        rundir = os.path.join(out, folder, "run-b%d" % b)
        wdir, odir = os.path.join(rundir, "weft"), os.path.join(rundir, "ort")
        os.makedirs(wdir, exist_ok=True)
        os.makedirs(odir, exist_ok=True)
        ort_y = os.path.join(odir, "output.npy")
        wmed, omed, werr, oerr = [], [], None, ort_why and "missing"
        grates = []  # a compute-bound row's own GEMM rates, one a round next to its runs
        lvl = [] if args.opt_level is None else ["--opt-level", str(args.opt_level)]
        iters = args.iterations
        try:  # the probe: how long one run takes, for --min-ms
            t = run_one([weft, "run", onnx_path, "--input", "input=" + x_path, "--iterations", "3", "--threads",
                         str(args.threads), "--output-dir", wdir] + lvl, "weft run")
            if t > 0 and args.min_ms > 0:
                iters = max(iters, int(math.ceil(args.min_ms / t)))
        except (RuntimeError, OSError):
            pass  # the rounds report it
        if iters != args.iterations:
            log("  %s b%d: %d timed runs per run (--min-ms %g)" % (name, b, iters, args.min_ms))
        for r in range(args.rounds):
            if not werr:
                try:
                    wmed.append(run_one([weft, "run", onnx_path, "--input", "input=" + x_path, "--iterations",
                                         str(iters), "--threads", str(args.threads), "--output-dir", wdir]
                                        + lvl, "weft run"))
                except (RuntimeError, OSError) as e:
                    werr = str(e)
                    log("%s batch %d: %s" % (name, b, werr))
            if not oerr:
                try:
                    omed.append(run_one([args.ort_python, "-c", ORT_WORKER, onnx_path, x_path, str(iters),
                                         str(args.threads), ort_y], "ORT worker"))
                except (RuntimeError, OSError) as e:
                    oerr = str(e)
                    log("%s batch %d: %s" % (name, b, oerr))
            if name in COMPUTE_BOUND and gemm:
                g = gemm_rate(build, args.threads, None)
                if g:
                    grates.append(g)
            log("  %s b%d round %d: weft %s ms, ORT %s ms%s" % (
                name, b, r + 1, "%.2f" % wmed[-1] if wmed and not werr else "-",
                "%.2f" % omed[-1] if omed and not oerr else "-",
                ", GEMM %.1f GFLOP/s" % grates[-1] if len(grates) == r + 1 else ""))
        wm = statistics.median(wmed) if wmed and not werr else None
        om = statistics.median(omed) if omed and not oerr else None
        ref = np.load(ref_path)
        check = []
        wy = None
        if wm is not None:
            outs = [f for f in os.listdir(wdir) if f.endswith(".npy")]
            wy = np.load(os.path.join(wdir, "output.npy" if "output.npy" in outs else sorted(outs)[0]))
        if wy is not None and om is not None:
            d = rel_diff(wy, np.load(ort_y))
            check.append("%.1e %s" % (d, "ok" if d <= REL_TOL else "MISMATCH"))
        elif wy is not None:
            check.append("no ORT")
        if wy is not None:
            check.append("(torch %.1e)" % rel_diff(wy, ref))
        degenerate = info.get("sensitivity", 1) < 1e-3 or info.get("std", 1) < 1e-6
        if degenerate:
            notes.append("%s: output looks degenerate (std %.3g, input sensitivity %.3g)"
                         % (name, info.get("std", 0), info.get("sensitivity", 0)))
        ratio = om / wm if wm and om else None
        if ratio:
            ratios.append(ratio)
        gfs = flops / (wm * 1e6) if flops and wm else None
        def pct(rates, gfs=gfs, name=name):
            p = "%6.1f%%" % (100 * gfs / max(rates)) if gfs and rates else "      -"
            return p.strip() + "*" if name not in COMPUTE_BOUND and gfs else p
        own = "%6.1f%%" % (100 * gfs / statistics.median(grates)) if gfs and grates else "      -"
        row = "%-19s %5d %8s %10s %10s %8s %9s %%7s %7s %9.3g %9.3g  %s" % (
            name, b, "%.2f" % (flops / 1e9) if flops else "-", "%.2f" % wm if wm else "error" if werr else "-",
            "%.2f" % om if om else ("error" if oerr and not ort_why else "-"), "%.3f" % ratio if ratio else "-",
            "%.1f" % gfs if gfs else "-", own.replace("%", "%%"), info.get("std", float("nan")), info.get("sensitivity", float("nan")),
            " ".join(check) or "-")
        table.append((row, pct))
        log("  " + row % pct(gemm))

    # the second GEMM rate before the table, so that %GEMM is against the better of the two
    g2 = gemm_rate(build, args.threads, log) if gemm else None
    if g2:
        gemm.append(g2)
    log("")
    log(hdr)
    for row, pct in table:
        log(row % pct(gemm))
    if ratios:
        log("geometric mean of ORT/weft over %d row(s): %.3f (above 1 means weft is faster)"
            % (len(ratios), math.exp(sum(math.log(r) for r in ratios) / len(ratios))))
    else:
        log("geometric mean of ORT/weft: - (no row has both times%s)" % ("; ORT column missing" if ort_why else ""))
    log("GFLOP/s: 2 x MACs of Conv/Gemm/MatMul/LSTM nodes over weft's median; %%GEMM against the better of %d "
        "oneDNN 1024^3 GEMM rate(s) measured in this run (%s GFLOP/s); * marks rows that are not compute-bound; "
        "%%rounds (compute-bound rows): against the median of the GEMM rates measured in the row's own rounds, "
        "right after its weft and ORT runs (the same spell of a shared machine)"
        % (len(gemm), ", ".join("%.1f" % g for g in gemm) or "none"))
    log("out std: the torch output's std; x-sens: std(y(x) - y(x')) / std(y(x)) for another random input x' "
        "(near 0 means a degenerate model); weft vs ORT: max|weft - ORT| / max|ORT|, 'ok' at or below %g; "
        "torch: the same against the exporting torch model" % REL_TOL)
    for n in notes:
        log("note: " + n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
