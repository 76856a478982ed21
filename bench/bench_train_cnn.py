#!/usr/bin/python3
"""Training speed of a small CNN and of ResNet-18: weft against TensorFlow/Keras and PyTorch, same model,
data and threads, and weft's losses against PyTorch's from the same initial weights (the CNN).

usage: bench_train_cnn.py [BUILD] [--model cnn|resnet18] [--threads T] [--steps N] [--warmup W] [--rounds R]
                          [--batch B] [--loss-steps S] [--tf-python PATH] [--torch-python PATH] [--json PATH]

--model resnet18 (issue 14's second training row): torchvision's resnet18 with 10 classes on 3x32x32
inputs at batch 32 (--batch defaults to 32 there), BatchNorm in training mode, Adam, sparse cross-entropy,
one fixed batch of pseudo-random images and labels (a step's time does not depend on the values).
  weft:       BUILD/bench/bench_train_resnet (the graph API; see that file)
  TensorFlow: the same network in Keras's functional API (NHWC; "same" padding, which pads the stride-2
              layers asymmetrically where PyTorch pads symmetrically: the same work), train_on_batch
  PyTorch:    torchvision.models.resnet18(num_classes=10), eager
There is no loss check for it: the three initialise differently and the data are random.

The model (issue 14's training row): Conv2D(32, 3x3, relu) -> MaxPool(2) -> Conv2D(64, 3x3, relu) ->
MaxPool(2) -> Flatten -> Dense(128, relu) -> Dense(10, softmax), valid padding, Adam (lr 1e-3, beta1 0.9,
beta2 0.999, eps 1e-7), sparse categorical cross-entropy, Fashion-MNIST at batch 64 (inputs / 255).
  weft:       `BUILD/weft demo --model cnn --time-steps N --batch B --threads T` (NCHW; 20 warm-up steps)
  TensorFlow: `model.train_on_batch` on the compiled Keras model (NHWC, the layout Keras's CPU convolutions
              take), W warm-up steps, then N timed ones
  PyTorch:    eager nn.Sequential (NCHW) + torch.optim.Adam, CrossEntropyLoss on logits
Each framework runs in its own process and the runs interleave: weft, TF, PyTorch, then again, R rounds
(default 2), so that noise on a shared machine shows as a spread between rounds.

Loss check: `weft demo --model cnn --save-initial F --print-losses S` writes weft's initial weights and
trains S steps (default 20) on batches 0..S-1 of the training file in order; PyTorch loads F (kernels OIHW
as weft's; Dense kernels [in, out] transposed into Linear's [out, in]), trains the same S steps and the
per-step losses are compared, with PyTorch's autograd but Adam in Keras's form (which weft implements; see
torch_worker). The tolerance is 1e-3 relative to the loss: the first steps agree to 1e-9, and float32
rounding differences (summation order in the convolutions and GEMMs) then grow through the Adam steps,
to about 1e-4 by step 20 on the reference machine.

TensorFlow comes from build/venv-bench (scripts/venv-bench.sh); PyTorch is Debian's, under /usr/bin/python3,
with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed from its environment only. Numbers are printed, never
asserted; they also go to BUILD/bench-train-MODEL.json.
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench_train as bt  # noqa: E402  (data loading, batches, percentiles, the worker protocol)

SEED = 42
LOSS_RTOL = 1e-3
STEP_RE = re.compile(r"train step: batch (\d+), (\d+) steps, median ([0-9.eE+-]+) ms, "
                     r"p10 ([0-9.eE+-]+) ms, p90 ([0-9.eE+-]+) ms")
LOSS_RE = re.compile(r"^step (\d+) loss ([0-9.eE+-]+|nan|inf)$", re.M)


def read_safetensors(path):
    """{name: numpy array} of a safetensors file (F32 and I64 only, which is what weft writes here)."""
    import numpy as np
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        dt = {"F32": np.float32, "I64": np.int64}[v["dtype"]]
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=dt).reshape(v["shape"])
    return out


# ---------------------------------------------------------------- workers (each in its own process)

def tf_worker(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import tensorflow as tf
    except Exception as e:
        bt.emit({"unavailable": "import tensorflow failed: %s" % (str(e).splitlines() or [repr(e)])[0]})
        return 0
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    keras = tf.keras
    xs, ys, _, _ = bt.load_data()
    keras.utils.set_random_seed(SEED)
    L = keras.layers
    if args.model == "resnet18":
        return tf_resnet_worker(args, tf, keras)
    m = keras.Sequential([keras.Input(shape=(28, 28, 1)), L.Conv2D(32, 3, activation="relu"), L.MaxPooling2D(2),
                          L.Conv2D(64, 3, activation="relu"), L.MaxPooling2D(2), L.Flatten(),
                          L.Dense(128, activation="relu"), L.Dense(10, activation="softmax")])
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-7),
              loss=keras.losses.SparseCategoricalCrossentropy(), metrics=["accuracy"])
    batches = [(bx.reshape(-1, 28, 28, 1), by)
               for bx, by in bt.shuffled_batches(xs, ys, args.batch, args.warmup + args.steps, SEED)]
    return tf_time(tf, m, batches, args.warmup)


def tf_time(tf, m, batches, warmup):
    """Times train_on_batch over the batches after `warmup` of them and emits the result."""
    times = []
    for i, (bx, by) in enumerate(batches):
        t0 = time.perf_counter()
        m.train_on_batch(bx, by)
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    bt.emit({"version": tf.__version__, "jit_compile": bool(getattr(m, "jit_compile", False)),
             "step": bt.summarize(times)})
    return 0


def tf_resnet_worker(args, tf, keras):
    import numpy as np
    L = keras.layers

    def conv_bn(x, c, k, s, relu):
        x = L.Conv2D(c, k, strides=s, padding="same", use_bias=False)(x)
        x = L.BatchNormalization(momentum=0.9, epsilon=1e-5)(x)
        return L.ReLU()(x) if relu else x

    def block(x, c, s):
        y = conv_bn(x, c, 3, s, True)
        y = conv_bn(y, c, 3, 1, False)
        sc = conv_bn(x, c, 1, s, False) if s != 1 or x.shape[-1] != c else x
        return L.ReLU()(L.Add()([y, sc]))

    inp = keras.Input(shape=(32, 32, 3))
    x = conv_bn(inp, 64, 7, 2, True)
    x = L.MaxPooling2D(3, strides=2, padding="same")(x)
    for stage in range(4):
        c = 64 << stage
        x = block(x, c, 2 if stage else 1)
        x = block(x, c, 1)
    x = L.GlobalAveragePooling2D()(x)
    m = keras.Model(inp, L.Dense(10)(x))
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-7),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(SEED)
    bx = rng.random((args.batch, 32, 32, 3), dtype=np.float32)
    by = rng.integers(0, 10, args.batch).astype(np.int64)
    return tf_time(tf, m, [(bx, by)] * (args.warmup + args.steps), args.warmup)


def torch_model(torch):
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(1600, 128), nn.ReLU(), nn.Linear(128, 10))


def torch_worker(args):
    try:
        import torch
    except Exception as e:
        bt.emit({"unavailable": "import torch failed: %s" % (str(e).splitlines() or [repr(e)])[0]})
        return 0
    torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    if args.model == "resnet18":
        try:
            import torchvision
        except Exception as e:
            bt.emit({"unavailable": "import torchvision failed: %s" % (str(e).splitlines() or [repr(e)])[0]})
            return 0
        m = torchvision.models.resnet18(num_classes=10)
        xs = torch.rand(args.batch, 3, 32, 32)
        ys = torch.randint(0, 10, (args.batch,))
    else:
        xs, ys, _, _ = bt.load_data()
        m = torch_model(torch)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(bx, by):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(m(bx), by)
        loss.backward()
        opt.step()
        return float(loss)

    res = {"version": torch.__version__, "mkldnn": bool(torch.backends.mkldnn.is_available())}
    if args.loss_init:
        # the loss check: weft's initial weights, batches 0..S-1 in file order
        w = read_safetensors(args.loss_init)
        with torch.no_grad():
            for i, name in ((0, "conv2d"), (3, "conv2d_1")):
                m[i].weight.copy_(torch.from_numpy(w[name + "/kernel"].copy()))
                m[i].bias.copy_(torch.from_numpy(w[name + "/bias"].copy()))
            for i, name in ((7, "dense"), (9, "dense_1")):
                m[i].weight.copy_(torch.from_numpy(w[name + "/kernel"].T.copy()))
                m[i].bias.copy_(torch.from_numpy(w[name + "/bias"].copy()))
        # Adam in Keras's (and weft's) form: the bias corrections fold into the step size and epsilon is added
        # to sqrt(v) uncorrected; torch.optim.Adam adds it to sqrt(v_hat), which differs by a few percent on
        # the first steps for gradients near epsilon / sqrt(1 - beta2^t), enough to move the losses by 1e-3
        params = list(m.parameters())
        mom = [torch.zeros_like(p) for p in params]
        vel = [torch.zeros_like(p) for p in params]
        losses = []
        for i in range(args.loss_steps):
            bx = torch.from_numpy(xs[i * args.batch:(i + 1) * args.batch].reshape(-1, 1, 28, 28).copy())
            by = torch.from_numpy(ys[i * args.batch:(i + 1) * args.batch].copy())
            for p in params:
                p.grad = None
            loss = loss_fn(m(bx), by)
            loss.backward()
            t = i + 1
            alpha = 1e-3 * (1 - 0.999 ** t) ** 0.5 / (1 - 0.9 ** t)
            with torch.no_grad():
                for p, mo, ve in zip(params, mom, vel):
                    mo.mul_(0.9).add_(p.grad, alpha=0.1)
                    ve.mul_(0.999).addcmul_(p.grad, p.grad, value=0.001)
                    p.sub_(alpha * mo / (ve.sqrt() + 1e-7))
            losses.append(float(loss))
        res["losses"] = losses
        bt.emit(res)
        return 0
    if args.model == "resnet18":
        batches = [(xs, ys)] * (args.warmup + args.steps)
    else:
        batches = [(torch.from_numpy(bx.reshape(-1, 1, 28, 28)), torch.from_numpy(by))
                   for bx, by in bt.shuffled_batches(xs, ys, args.batch, args.warmup + args.steps, SEED)]
    times = []
    for i, (tx, ty) in enumerate(batches):
        t0 = time.perf_counter()
        step(tx, ty)
        if i >= args.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    res["step"] = bt.summarize(times)
    res["blas"] = bt.loaded_blas()
    bt.emit(res)
    return 0


# ---------------------------------------------------------------- weft (its CLI) and the driver

def weft_call(args, extra):
    exe = os.path.join(args.build, "weft")
    if not os.access(exe, os.X_OK):
        raise RuntimeError("%s not built" % exe)
    cmd = [exe, "demo", "--model", "cnn", "--batch", str(args.batch), "--threads", str(args.threads)] + extra
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                       timeout=bt.WORKER_TIMEOUT_S, cwd=args.build)
    if p.returncode != 0:
        raise RuntimeError("`%s` exited %d: %s" % (" ".join(cmd[1:]), p.returncode,
                                                   " | ".join(p.stdout.strip().splitlines()[-3:])))
    return p.stdout


def run_weft(args):
    try:
        if args.model == "resnet18":
            exe = os.path.join(args.build, "bench", "bench_train_resnet")
            if not os.access(exe, os.X_OK):
                raise RuntimeError("%s not built" % exe)
            cmd = [exe, "--batch", str(args.batch), "--steps", str(args.steps), "--warmup", str(args.warmup),
                   "--threads", str(args.threads)]
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                               timeout=bt.WORKER_TIMEOUT_S)
            if p.returncode != 0:
                raise RuntimeError("bench_train_resnet exited %d: %s" % (p.returncode, p.stdout.strip()[-300:]))
            out = p.stdout
        else:
            out = weft_call(args, ["--time-steps", str(args.steps)])
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        return {"unavailable": str(e)}
    m = STEP_RE.search(out)
    if not m:
        return {"unavailable": "weft demo printed no 'train step:' line: %s" % out.strip()[-300:]}
    return {"step": {"median_ms": float(m.group(3)), "p10_ms": float(m.group(4)), "p90_ms": float(m.group(5)),
                     "steps": int(m.group(2))}}


def run_worker(kind, python, args, env, extra=()):
    if not python or not os.access(python, os.X_OK):
        return {"unavailable": "no python at %s%s" % (python, " (make it with `sh scripts/venv-bench.sh`)"
                                                       if kind == "tf" else "")}
    cmd = [python, os.path.abspath(__file__), args.build, "--worker", kind, "--threads", str(args.threads),
           "--steps", str(args.steps), "--warmup", str(args.warmup), "--batch", str(args.batch),
           "--loss-steps", str(args.loss_steps), "--model", args.model] + list(extra)
    return bt.call_worker(cmd, env)


def loss_check(args, torch_env):
    """weft's and PyTorch's losses over the same steps from weft's initial weights."""
    with tempfile.TemporaryDirectory() as d:
        init = os.path.join(d, "init.safetensors")
        try:
            out = weft_call(args, ["--save-initial", init, "--print-losses", str(args.loss_steps)])
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            return {"unavailable": "weft: %s" % e}
        wl = [float(v) for _, v in LOSS_RE.findall(out)]
        if len(wl) != args.loss_steps:
            return {"unavailable": "weft printed %d losses, wanted %d" % (len(wl), args.loss_steps)}
        r = run_worker("torch", args.torch_python, args, torch_env, ["--loss-init", init])
    if "unavailable" in r:
        return {"unavailable": "PyTorch: %s" % r["unavailable"], "weft": wl}
    tl = r["losses"]
    rel = [abs(a - b) / max(abs(b), 1e-12) for a, b in zip(wl, tl)]
    return {"weft": wl, "torch": tl, "max_rel": max(rel), "last_rel": rel[-1], "agree": max(rel) <= LOSS_RTOL}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)) or 1)
    ap.add_argument("--steps", type=int, default=50, help="timed steps per run (default 50)")
    ap.add_argument("--warmup", type=int, default=20, help="untimed steps first for the peers (default 20)")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds (default 2)")
    ap.add_argument("--model", choices=("cnn", "resnet18"), default="cnn")
    ap.add_argument("--batch", type=int, default=0, help="default 64 (cnn), 32 (resnet18)")
    ap.add_argument("--loss-steps", type=int, default=20)
    ap.add_argument("--tf-python", default=os.path.join(ROOT, "build", "venv-bench", "bin", "python"))
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    ap.add_argument("--json", help="where the results go (default BUILD/bench-train-cnn.json)")
    ap.add_argument("--worker", choices=("tf", "torch"), help=argparse.SUPPRESS)
    ap.add_argument("--loss-init", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    if not args.batch:
        args.batch = 64 if args.model == "cnn" else 32
    if min(args.threads, args.steps, args.rounds, args.batch, args.loss_steps) < 1 or args.warmup < 0:
        ap.error("--threads, --steps, --rounds, --batch and --loss-steps must be >= 1, --warmup >= 0")
    if args.worker == "tf":
        return tf_worker(args)
    if args.worker == "torch":
        return torch_worker(args)

    torch_env = {k: v for k, v in os.environ.items() if k not in bt.TORCH_UNSET}
    unset = [k for k in bt.TORCH_UNSET if k in os.environ]
    t_start = time.perf_counter()
    what = ("CNN Conv32-pool-Conv64-pool-Dense128-Dense10 on Fashion-MNIST" if args.model == "cnn" else
            "ResNet-18 (torchvision's, 10 classes) on 3x32x32, BatchNorm training")
    print("%s, Adam 1e-3, batch %d, %d threads for everyone; %d timed steps a run, %d rounds interleaved" % (
        what, args.batch, args.threads, args.steps, args.rounds), flush=True)
    try:
        with open("/proc/loadavg") as f:
            print("load average before: %s on %d CPUs" % (" ".join(f.read().split()[:3]), os.cpu_count() or 0))
    except OSError:
        pass
    names = ("weft", "TensorFlow", "PyTorch")
    runs = {n: [] for n in names}
    for _ in range(args.rounds):
        runs["weft"].append(run_weft(args))
        runs["TensorFlow"].append(run_worker("tf", args.tf_python, args, None))
        runs["PyTorch"].append(run_worker("torch", args.torch_python, args, torch_env))
    pt = next((r for r in runs["PyTorch"] if "version" in r), {})
    tf = next((r for r in runs["TensorFlow"] if "version" in r), {})
    if tf:
        print("TensorFlow %s: train_on_batch (jit_compile=%s)" % (tf["version"], tf.get("jit_compile")))
    if pt:
        print("PyTorch %s eager, mkldnn %s, /usr/bin/python3%s; BLAS %s" % (
            pt["version"], pt.get("mkldnn"), ", with %s unset for it only" % " and ".join(unset) if unset else "",
            pt.get("blas")))
    print()
    print("ms per training step, median (p10-p90) per round; ratio = peer / weft of the same round, > 1 means "
          "weft is faster")
    for n in names:
        cells = []
        for i, r in enumerate(runs[n]):
            if "unavailable" in r:
                cells.append("unavailable (%s)" % r["unavailable"])
                continue
            s = r["step"]
            c = "%.2f (%.2f-%.2f)" % (s["median_ms"], s["p10_ms"], s["p90_ms"])
            w = runs["weft"][i].get("step")
            if n != "weft" and w and w["median_ms"] > 0:
                s["ratio_vs_weft"] = s["median_ms"] / w["median_ms"]
                c += " x%.2f" % s["ratio_vs_weft"]
            cells.append(c)
        print("%-11s | %s" % (n, " | ".join(cells)))
    print()
    lc = loss_check(args, torch_env) if args.model == "cnn" else {"unavailable": "only for --model cnn"}
    if "unavailable" in lc:
        print("loss check: unavailable (%s)" % lc["unavailable"])
    else:
        print("loss check, %d steps from weft's initial weights on the same batches: weft %.6f -> %.6f, PyTorch "
              "%.6f -> %.6f; largest relative gap %.2e (last step %.2e): %s (tolerance %.0e)" % (
                  args.loss_steps, lc["weft"][0], lc["weft"][-1], lc["torch"][0], lc["torch"][-1], lc["max_rel"],
                  lc["last_rel"], "agree" if lc["agree"] else "DISAGREE", LOSS_RTOL))
    total = time.perf_counter() - t_start
    print("(benchmark took %.0f s)" % total)
    out = args.json or os.path.join(args.build, "bench-train-%s.json" % args.model)
    bt.write_json(out, {"model": args.model, "threads": args.threads, "batch": args.batch, "steps": args.steps,
                        "rounds": args.rounds, "torch_env_unset": unset, "runs": runs, "loss_check": lc,
                        "total_s": total})
    return 0


if __name__ == "__main__":
    sys.exit(main())
