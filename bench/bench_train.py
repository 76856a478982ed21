#!/usr/bin/python3
"""Training speed of the demo model: weft against TensorFlow/Keras and PyTorch, same model, data and threads.

usage: bench_train.py [BUILD] [--threads T] [--steps N] [--warmup W] [--full] [--epochs E]
                      [--torch-full-budget S] [--tf-python PATH] [--json PATH]

The model is TensorFlow's beginner tutorial on Fashion-MNIST: Flatten 28x28 -> Dense 128 relu -> Dense 10
softmax, Adam (lr 1e-3, beta1 0.9, beta2 0.999, eps 1e-7), sparse categorical cross-entropy, inputs / 255.
Data: /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist), read here with gzip + numpy.

(1) Always: milliseconds per training step (forward, loss, backward, Adam update) at batch 32 and 256, median
    (and p10/p90) over N steps after W warm-up steps, on real batches of the shuffled training set.
      weft:       `BUILD/weft demo --time-steps N --batch B --threads T`
      TensorFlow: `model.train_on_batch` on a compiled Keras model. In Keras 3 that calls the same compiled
                  train function that `fit` builds (a tf.function, XLA-compiled when `jit_compile` resolves
                  to true, which the header reports), so the timed path is fit's; its loss comes back as a
                  number each step, so every step is finished when its time is taken.
      PyTorch:    eager nn.Sequential + torch.optim.Adam, CrossEntropyLoss on logits (same maths as softmax
                  followed by sparse cross-entropy), Glorot-uniform kernels and zero biases as Keras does.
(2) With --full: the whole demo, E epochs (default 5) at batch 32, epoch time and final test accuracy:
      weft `BUILD/weft demo --epochs E --batch 32 --threads T --quiet`, Keras `model.fit` + `model.evaluate`,
      and a PyTorch loop over a reshuffled training set each epoch, run only when its batch-32 step time says
      it takes at most --torch-full-budget seconds (default 90; Debian's PyTorch on the reference BLAS is far
      slower than that, so it is skipped with the estimate printed).
    `make bench` (scripts/run-bench.sh) passes --full: on a busy 2-core machine the whole script took about
    2 minutes (weft ~15 s, TensorFlow ~75 s of which fit ~60 s, PyTorch ~35 s of step timing).

Every peer runs in its own subprocess with the same thread count (TensorFlow intra- and inter-op threads,
torch.set_num_threads, weft --threads). TensorFlow comes from build/venv-bench (scripts/venv-bench.sh);
PyTorch is Debian's, under /usr/bin/python3, with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed from its
environment only (Debian's PyTorch slows down badly with them; they are set for weft's OpenBLAS).
A peer that cannot run is reported as unavailable with the reason and the rest goes on. Numbers are
printed, never asserted; they are also written to BUILD/bench-train.json.
"""
import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = "/usr/share/datasets/fashion-mnist"
TORCH_UNSET = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
BATCHES = (32, 256)
SEED = 42
WORKER_TIMEOUT_S = 1800


# ---------------------------------------------------------------- shared by the workers

def load_idx(name):
    """One idx file of the dataset as a numpy array (uint8), checking its magic number and sizes."""
    import numpy as np
    path = os.path.join(DATA, name)
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8 or raw[0] != 0 or raw[1] != 0 or raw[2] != 8:
        raise RuntimeError("%s: not an unsigned-byte idx file" % path)
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    count = 1
    for d in dims:
        count *= d
    data = np.frombuffer(raw, dtype=np.uint8, count=count, offset=4 + 4 * ndim)
    return data.reshape(dims)


def load_data():
    """(x_train, y_train, x_test, y_test): images as float32 N x 28 x 28 scaled to [0, 1], labels int64."""
    import numpy as np
    xs = load_idx("train-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    ys = load_idx("train-labels-idx1-ubyte.gz").astype(np.int64)
    xt = load_idx("t10k-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    yt = load_idx("t10k-labels-idx1-ubyte.gz").astype(np.int64)
    if xs.shape != (60000, 28, 28) or ys.shape != (60000,) or xt.shape != (10000, 28, 28):
        raise RuntimeError("unexpected Fashion-MNIST shapes %s %s %s" % (xs.shape, ys.shape, xt.shape))
    return xs, ys, xt, yt


def shuffled_batches(x, y, batch, count, seed):
    """COUNT real batches of the training set in one shuffled order, wrapping to a new order at the end."""
    import numpy as np
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(x))
    pos = 0
    out = []
    for _ in range(count):
        if pos + batch > len(perm):
            perm = rng.permutation(len(x))
            pos = 0
        idx = perm[pos:pos + batch]
        pos += batch
        out.append((np.ascontiguousarray(x[idx]), np.ascontiguousarray(y[idx])))
    return out


def summarize(times_ms):
    """median, p10, p90 of a list of step times (nearest-rank percentiles)."""
    s = sorted(times_ms)
    pick = lambda q: s[min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))]
    return {"median_ms": statistics.median(s), "p10_ms": pick(0.10), "p90_ms": pick(0.90), "steps": len(s)}


def loaded_blas():
    """The BLAS library this process really loaded (Debian's libblas.so.3 is whichever the alternatives
    system points at: the slow reference BLAS unless OpenBLAS or BLIS is installed)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {l.split()[-1] for l in f if "blas" in l.lower() and "/" in l}
        return ", ".join(sorted(os.path.realpath(l) for l in libs)) or "none mapped"
    except OSError:
        return "unknown"


def write_json(path, doc):
    """Writes the results document, saying where (or why not)."""
    try:
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
        print("results in %s" % path)
    except OSError as e:
        print("could not write %s: %s" % (path, e))


def emit(result):
    print("RESULT " + json.dumps(result), flush=True)


# ---------------------------------------------------------------- TensorFlow worker

def tf_worker(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import tensorflow as tf
    except Exception as e:  # a broken install raises more than ImportError
        emit({"unavailable": "import tensorflow failed: %s" % (str(e).splitlines() or [repr(e)])[0]})
        return 0
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    keras = tf.keras
    xs, ys, xt, yt = load_data()

    def make_model():
        keras.utils.set_random_seed(SEED)
        m = keras.Sequential([keras.Input(shape=(28, 28)), keras.layers.Flatten(),
                              keras.layers.Dense(128, activation="relu"),
                              keras.layers.Dense(10, activation="softmax")])
        m.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-7),
                  loss=keras.losses.SparseCategoricalCrossentropy(), metrics=["accuracy"])
        return m

    res = {"version": tf.__version__, "keras_version": getattr(keras, "__version__", "?"),
           "onednn_opts": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default"), "steps": {}}
    for batch in args.batches:
        m = make_model()
        batches = shuffled_batches(xs, ys, batch, args.warmup + args.steps, SEED + batch)
        times = []
        for i, (bx, by) in enumerate(batches):
            t0 = time.perf_counter()
            m.train_on_batch(bx, by)
            if i >= args.warmup:
                times.append((time.perf_counter() - t0) * 1e3)
        res["steps"][str(batch)] = summarize(times)
        # train_on_batch compiles the model's train function; what jit_compile resolved to says whether XLA ran
        res["jit_compile"] = bool(getattr(m, "jit_compile", False))
    if args.full:
        m = make_model()
        epoch_s = []

        class EpochTimer(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                self.t0 = time.perf_counter()

            def on_epoch_end(self, epoch, logs=None):
                epoch_s.append(time.perf_counter() - self.t0)

        t0 = time.perf_counter()
        m.fit(xs, ys, batch_size=32, epochs=args.epochs, verbose=0, callbacks=[EpochTimer()])
        total = time.perf_counter() - t0
        _, acc = m.evaluate(xt, yt, verbose=0)
        res["full"] = {"epochs": args.epochs, "epoch_s": epoch_s, "epoch_median_s": statistics.median(epoch_s),
                       "train_s": total, "samples_per_s": len(xs) * args.epochs / total,
                       "test_accuracy": float(acc)}
    emit(res)
    return 0


# ---------------------------------------------------------------- PyTorch worker

def torch_worker(args):
    try:
        import numpy as np
        import torch
    except Exception as e:
        emit({"unavailable": "import torch failed: %s" % (str(e).splitlines() or [repr(e)])[0]})
        return 0
    torch.set_num_threads(args.threads)
    xs, ys, xt, yt = load_data()

    def make_model():
        torch.manual_seed(SEED)
        m = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
        for layer in (m[1], m[3]):
            torch.nn.init.xavier_uniform_(layer.weight)  # Keras's glorot_uniform
            torch.nn.init.zeros_(layer.bias)
        opt = torch.optim.Adam(m.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
        return m, opt

    loss_fn = torch.nn.CrossEntropyLoss()

    def step(m, opt, bx, by):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(m(bx), by)
        loss.backward()
        opt.step()
        return loss

    res = {"version": torch.__version__, "steps": {}}
    for batch in args.batches:
        m, opt = make_model()
        batches = [(torch.from_numpy(bx), torch.from_numpy(by))
                   for bx, by in shuffled_batches(xs, ys, batch, args.warmup + args.steps, SEED + batch)]
        times = []
        for i, (bx, by) in enumerate(batches):
            t0 = time.perf_counter()
            step(m, opt, bx, by)
            if i >= args.warmup:
                times.append((time.perf_counter() - t0) * 1e3)
        res["steps"][str(batch)] = summarize(times)
    res["blas"] = loaded_blas()
    est = res["steps"].get("32", {}).get("median_ms", 0) * 1e-3 * (len(xs) // 32) * args.epochs
    if args.full and est > args.torch_full_budget:
        res["full"] = {"unavailable": "skipped: about %.0f s by its batch-32 step time, over the %.0f s of "
                       "--torch-full-budget" % (est, args.torch_full_budget)}
    elif args.full:
        m, opt = make_model()
        gen = np.random.default_rng(SEED)
        tx, ty = torch.from_numpy(xs), torch.from_numpy(ys)
        epoch_s = []
        t_all = time.perf_counter()
        for _ in range(args.epochs):
            t0 = time.perf_counter()
            perm = torch.from_numpy(gen.permutation(len(xs)))
            for j in range(0, len(xs), 32):
                idx = perm[j:j + 32]
                step(m, opt, tx[idx], ty[idx])
            epoch_s.append(time.perf_counter() - t0)
        total = time.perf_counter() - t_all
        with torch.no_grad():
            pred = m(torch.from_numpy(xt)).argmax(1)
        acc = float((pred == torch.from_numpy(yt)).float().mean())
        res["full"] = {"epochs": args.epochs, "epoch_s": epoch_s, "epoch_median_s": statistics.median(epoch_s),
                       "train_s": total, "samples_per_s": len(xs) * args.epochs / total, "test_accuracy": acc}
    emit(res)
    return 0


# ---------------------------------------------------------------- weft (its own CLI)

STEP_RE = re.compile(r"train step: batch (\d+), (\d+) steps, median ([0-9.eE+-]+) ms, "
                     r"p10 ([0-9.eE+-]+) ms, p90 ([0-9.eE+-]+) ms")
ACC_RE = re.compile(r"test accuracy: ([0-9.eE+-]+)")
TRAIN_RE = re.compile(r"training time: ([0-9.eE+-]+) s \(([0-9.eE+-]+) samples/s\)")
EPOCH_RE = re.compile(r"epoch time: median ([0-9.eE+-]+) s")


def run_weft(args):
    exe = os.path.join(args.build, "weft")
    if not os.access(exe, os.X_OK):
        return {"unavailable": "%s not built" % exe}
    res = {"version": "", "steps": {}}
    try:
        p = subprocess.run([exe, "version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=60)
        res["version"] = (p.stdout.strip().splitlines() or [""])[0]
    except (OSError, subprocess.SubprocessError):
        pass

    def call(extra, what):
        cmd = [exe, "demo"] + extra + ["--threads", str(args.threads)]
        # in BUILD, because weft demo leaves its trace file in the working folder
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                           timeout=WORKER_TIMEOUT_S, cwd=args.build)
        if p.returncode != 0:
            raise RuntimeError("`%s` exited %d: %s" % (" ".join(cmd[1:]), p.returncode,
                                                       " | ".join(p.stdout.strip().splitlines()[-3:])))
        return p.stdout

    try:
        for batch in args.batches:
            out = call(["--time-steps", str(args.steps), "--batch", str(batch)], "steps")
            m = STEP_RE.search(out)
            if not m:
                raise RuntimeError("weft demo printed no 'train step:' line: %s" % out.strip()[-300:])
            if int(m.group(1)) != batch:
                raise RuntimeError("weft demo timed batch %s, asked for %d" % (m.group(1), batch))
            res["steps"][str(batch)] = {"median_ms": float(m.group(3)), "p10_ms": float(m.group(4)),
                                        "p90_ms": float(m.group(5)), "steps": int(m.group(2))}
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        return {"unavailable": str(e), "version": res["version"]}
    if args.full:
        try:
            out = call(["--epochs", str(args.epochs), "--batch", "32", "--quiet"], "full")
            a, t, e = ACC_RE.search(out), TRAIN_RE.search(out), EPOCH_RE.search(out)
            if not (a and t and e):
                raise RuntimeError("weft demo --epochs printed no %s line: %s" % (
                    "test accuracy" if not a else "training time" if not t else "epoch time",
                    out.strip()[-300:]))
            res["full"] = {"epochs": args.epochs, "epoch_median_s": float(e.group(1)),
                           "train_s": float(t.group(1)), "samples_per_s": float(t.group(2)),
                           "test_accuracy": float(a.group(1))}
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            res["full"] = {"unavailable": str(e)}
    return res


# ---------------------------------------------------------------- driver

def run_worker(kind, python, args, env):
    if not python or not os.access(python, os.X_OK):
        return {"unavailable": "no python at %s%s" % (python, " (make it with `sh scripts/venv-bench.sh`)"
                                                       if kind == "tf" else "")}
    cmd = [python, os.path.abspath(__file__), args.build, "--worker", kind, "--threads", str(args.threads),
           "--steps", str(args.steps), "--warmup", str(args.warmup), "--epochs", str(args.epochs),
           "--batches", ",".join(str(b) for b in args.batches),
           "--torch-full-budget", str(args.torch_full_budget)] + (["--full"] if args.full else [])
    return call_worker(cmd, env)


def call_worker(cmd, env):
    """Runs a worker command; its last RESULT line as a dict, or {"unavailable": why}."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                           env=env, timeout=WORKER_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as e:
        return {"unavailable": "worker failed to run: %s" % e}
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr.strip().splitlines() or p.stdout.strip().splitlines() or ["no output"])[-1]
        return {"unavailable": "worker exited %d: %s" % (p.returncode, tail)}
    return json.loads(lines[-1][len("RESULT "):])


def fmt_ms(s):
    return "%.3f" % s["median_ms"] if s else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)) or 1)
    ap.add_argument("--steps", type=int, default=200, help="timed steps per batch size (default 200)")
    ap.add_argument("--warmup", type=int, default=20, help="untimed steps first (default 20; peers only, "
                    "weft demo warms up on its own)")
    ap.add_argument("--full", action="store_true", help="also train the whole demo and test it")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--torch-full-budget", type=float, default=90, help="with --full, PyTorch trains the whole "
                    "demo only if its batch-32 step time says that takes at most this many seconds (default 90)")
    ap.add_argument("--tf-python", default=os.path.join(ROOT, "build", "venv-bench", "bin", "python"))
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    ap.add_argument("--json", help="where the results go (default BUILD/bench-train.json)")
    ap.add_argument("--only", default="weft,tf,torch", help=argparse.SUPPRESS)
    ap.add_argument("--batches", default=",".join(str(b) for b in BATCHES), help=argparse.SUPPRESS)
    ap.add_argument("--worker", choices=("tf", "torch"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    args.batches = [int(b) for b in args.batches.split(",") if b]
    if args.threads < 1 or args.steps < 1 or args.epochs < 1 or args.warmup < 0:
        ap.error("--threads, --steps and --epochs must be >= 1, --warmup >= 0")
    if args.worker == "tf":
        return tf_worker(args)
    if args.worker == "torch":
        return torch_worker(args)

    only = set(args.only.split(","))
    torch_env = {k: v for k, v in os.environ.items() if k not in TORCH_UNSET}
    unset = [k for k in TORCH_UNSET if k in os.environ]
    t_start = time.perf_counter()
    print("Fashion-MNIST MLP 784-128(relu)-10(softmax), Adam 1e-3, sparse CE; threads %d for everyone; "
          "%d timed steps after %d warm-up (peers)" % (args.threads, args.steps, args.warmup), flush=True)
    try:
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
        print("load average before: %s on %d CPUs (other work on the machine skews every number)"
              % (load, os.cpu_count() or 0), flush=True)
    except OSError:
        load = None
    results = {}
    for name, kind in (("weft", "weft"), ("TensorFlow", "tf"), ("PyTorch", "torch")):
        if kind not in only:
            continue
        t0 = time.perf_counter()
        if kind == "weft":
            r = run_weft(args)
        elif kind == "tf":
            r = run_worker("tf", args.tf_python, args, None)
        else:
            r = run_worker("torch", args.torch_python, args, torch_env)
        r["wall_s"] = time.perf_counter() - t0
        results[name] = r

    # header notes on what each peer is
    tf = results.get("TensorFlow", {})
    pt = results.get("PyTorch", {})
    if "version" in tf and "unavailable" not in tf:
        print("TensorFlow %s, Keras %s: model.train_on_batch = fit's compiled train function (jit_compile=%s)"
              % (tf["version"], tf["keras_version"], tf.get("jit_compile")))
    if "version" in pt and "unavailable" not in pt:
        print("PyTorch %s eager, /usr/bin/python3%s; BLAS %s" % (
            pt["version"], ", with %s unset for it only" % " and ".join(unset) if unset else "", pt.get("blas")))
        if "/blas/libblas" in pt.get("blas", ""):
            print("  (that is the reference BLAS: PyTorch's Linear layers run unoptimised here; installing Debian's "
                  "libopenblas0 would switch it)")
    wf = results.get("weft", {})
    if wf.get("version"):
        print("weft: %s" % wf["version"])

    print()
    print("ms per training step (median over %d steps; p10-p90 in brackets); ratio = peer / weft, > 1 means "
          "weft is faster" % args.steps)
    head = "%-11s" % "framework"
    for b in args.batches:
        head += " | %-32s" % ("batch %d" % b)
    print(head)
    wsteps = wf.get("steps", {}) if "unavailable" not in wf else {}
    for name, r in results.items():
        if "unavailable" in r:
            print("%-11s   unavailable (%s)" % (name, r["unavailable"]))
            continue
        line = "%-11s" % name
        for b in args.batches:
            s = r["steps"].get(str(b))
            cell = "-" if not s else "%.3f (%.3f-%.3f)" % (s["median_ms"], s["p10_ms"], s["p90_ms"])
            w = wsteps.get(str(b))
            if s and w and name != "weft" and w["median_ms"] > 0:
                ratio = s["median_ms"] / w["median_ms"]
                s["ratio_vs_weft"] = ratio
                cell += " x%.2f" % ratio
            line += " | %-32s" % cell
        print(line)

    if args.full:
        print()
        print("full demo: %d epochs at batch 32 (60000 samples each), then the 10000 test images" % args.epochs)
        print("%-11s | %14s | %12s | %11s | %11s | %13s" % ("framework", "epoch median s", "train total s",
                                                          "samples/s", "ms per step", "test accuracy"))
        for name, r in results.items():
            f = r.get("full") if "unavailable" not in r else {"unavailable": r["unavailable"]}
            if not f:
                continue
            if "unavailable" in f:
                print("%-11s   unavailable (%s)" % (name, f["unavailable"]))
                continue
            print("%-11s | %14.2f | %12.2f | %11.0f | %11.3f | %13.4f" % (
                name, f["epoch_median_s"], f["train_s"], f["samples_per_s"],
                f["epoch_median_s"] * 1e3 / (60000 // 32), f["test_accuracy"]))
        wfull = wf.get("full", {})
        for name in ("TensorFlow", "PyTorch"):
            f = results.get(name, {}).get("full", {})
            if "epoch_median_s" in f and "epoch_median_s" in wfull and wfull["epoch_median_s"] > 0:
                f["epoch_ratio_vs_weft"] = f["epoch_median_s"] / wfull["epoch_median_s"]
                print("%s / weft epoch time: x%.2f" % (name, f["epoch_ratio_vs_weft"]))

    total = time.perf_counter() - t_start
    print("(benchmark took %.0f s: %s)" % (total, ", ".join("%s %.0f s" % (n, r["wall_s"])
                                                          for n, r in results.items())))
    out = args.json or os.path.join(args.build, "bench-train.json")
    doc = {"threads": args.threads, "steps": args.steps, "warmup": args.warmup, "full": args.full,
           "epochs": args.epochs, "torch_env_unset": unset, "loadavg_before": load, "results": results, "total_s": total}
    write_json(out, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
