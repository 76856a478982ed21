#!/usr/bin/python3
"""Default thread counts against --threads 1, idle and with one core busy (issue 13's contention check).

usage: bench_contention.py [BUILD] [--models DIR] [--rounds N] [--seconds S] [--only NAME[,NAME...]]

For each model of the test set (tests/models/export_models.py, exported into DIR if missing), a small
two-input attention model (exported here) and `weft demo --time-steps`, runs weft alternately with the
default thread counts and with --threads 1 (default, 1, default, 1, ...), ROUNDS times each, first on
an idle machine and then with a shell busy loop pinned to one core (taskset). Each sample is weft's
own median over its timed runs; the table shows the median of the samples, their spread (min..max)
and the ratio default / --threads 1. Numbers are printed, never asserted.
Run with Debian's /usr/bin/python3 (torch, for the exports).
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TEST_MODELS = ["mlp", "lenet5", "resnet18", "resnet18_opset17", "mobilenet_v2"]
ISA = re.compile(r"^(sse\d.*|ssse3|avx.*|fma|f16c|amx.*|vnni|bmi\d|asimd.*|sve.*|neon)$")


def isa_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return " ".join(x for x in line.split(":", 1)[1].split() if ISA.match(x))
    except OSError:
        pass
    return "unknown"


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def export_attention(folder):
    """softmax(Q K^T / sqrt(d)) V with Q from x and K, V from memory: two inputs, small ops."""
    import numpy as np
    import torch
    import torch.nn as nn

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(64, 64)
            self.kv = nn.Linear(64, 128)
            self.o = nn.Linear(64, 64)

        def forward(self, x, mem):
            q = self.q(x)
            k, v = self.kv(mem).split(64, dim=-1)
            p = torch.softmax(q @ k.transpose(1, 2) / 8.0, dim=-1)
            return self.o(p @ v)

    os.makedirs(folder, exist_ok=True)
    torch.manual_seed(0)
    m = Attention().eval()
    x, mem = torch.randn(1, 16, 64), torch.randn(1, 32, 64)
    path = os.path.join(folder, "model.onnx")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (x, mem), path, opset_version=13, input_names=["x", "mem"], output_names=["y"])
    np.save(os.path.join(folder, "x.npy"), x.numpy())
    np.save(os.path.join(folder, "mem.npy"), mem.numpy())


MEDIAN = re.compile(r"median ([0-9.]+) ms over (\d+) runs")
STEP = re.compile(r"train step: .* median ([0-9.]+) ms")


def run_weft(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    m = MEDIAN.search(p.stdout) or STEP.search(p.stdout)
    if p.returncode != 0 or not m:
        raise RuntimeError("%s failed (exit %d): %s" % (" ".join(cmd), p.returncode, p.stdout[-400:]))
    return float(m.group(1))


class Case:
    def __init__(self, name, argv, per_run_ms):
        self.name, self.argv, self.per_run_ms = name, argv, per_run_ms
        self.last = {}  # threads argument -> the last sample's ms per run, to size the next sample

    def command(self, threads, seconds):
        ms = self.last.get(tuple(threads), self.per_run_ms)
        n = int(seconds * 1e3 / max(ms, 1e-3))
        if self.name == "weft demo":
            return self.argv + ["--time-steps", str(max(20, min(20000, n)))] + threads
        return self.argv + ["--iterations", str(max(5, min(20000, n)))] + threads

    def sample(self, threads, seconds):
        ms = run_weft(self.command(threads, seconds))
        self.last[tuple(threads)] = ms
        return ms


def cases(weft, models, only):
    out = []
    for name in TEST_MODELS + ["attention"]:
        if only and name not in only:
            continue
        d = os.path.join(models, name)
        if name == "attention":
            argv = [weft, "run", os.path.join(d, "model.onnx"), "--input", "x=" + os.path.join(d, "x.npy"),
                    "--input", "mem=" + os.path.join(d, "mem.npy")]
        else:
            argv = [weft, "run", os.path.join(d, "model.onnx"), "--input", "input=" + os.path.join(d, "input.npy")]
        out.append(Case(name, argv, 1.0))
    data = "/usr/share/datasets/fashion-mnist"
    if not only or "demo" in only:
        if os.path.exists(os.path.join(data, "train-images-idx3-ubyte.gz")):
            out.append(Case("weft demo", [weft, "demo", "--quiet", "--trace", ""], 0.3))
        else:
            print("SKIP weft demo: no Fashion-MNIST in %s (scripts/setup.sh installs it)" % data)
    return out


class BusyCore:
    """A shell busy loop pinned to the last CPU this process may use."""

    def __init__(self):
        cpus = sorted(os.sched_getaffinity(0))
        self.cpu = cpus[-1]
        self.p = None

    def __enter__(self):
        if shutil.which("taskset"):
            argv = ["taskset", "-c", str(self.cpu), "sh", "-c", "while :; do :; done"]
        else:
            argv = ["sh", "-c", "while :; do :; done"]
        self.p = subprocess.Popen(argv)
        time.sleep(0.2)
        return self

    def __exit__(self, *exc):
        self.p.kill()
        self.p.wait()


def measure(cs, rounds, seconds, label):
    rows = []
    for c in cs:
        # calibrate the number of timed runs to about `seconds` a sample
        c.last = {}
        c.per_run_ms = run_weft(c.command(["--threads", "1"], 0.05))
        d, one = [], []
        for _ in range(rounds):
            d.append(c.sample([], seconds))
            one.append(c.sample(["--threads", "1"], seconds))
        md, mo = statistics.median(d), statistics.median(one)
        rows.append((c.name, md, min(d), max(d), mo, min(one), max(one), md / mo if mo > 0 else float("nan")))
        print("  %-18s %-9s default %9.3f ms (%.3f..%.3f)  --threads 1 %9.3f ms (%.3f..%.3f)  ratio %.2f" %
              ((c.name, label) + rows[-1][1:]), flush=True)
    return rows


def main():
    # a SIGTERM (timeout) unwinds like an exception, so the busy loop is always killed
    import signal
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default=None, help="exported test models (default BUILD/models)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=0.4, help="timed seconds per sample")
    ap.add_argument("--conditions", default="idle,busy", help="idle, busy or both")
    ap.add_argument("--only", default="", help="comma-separated names (mlp, ..., attention, demo)")
    args = ap.parse_args()
    weft = os.path.join(os.path.abspath(args.build), "weft")
    models = os.path.abspath(args.models or os.path.join(args.build, "models"))
    only = set(filter(None, args.only.split(",")))
    need = [m for m in TEST_MODELS if (not only or m in only) and
            not os.path.exists(os.path.join(models, m, "info.txt"))]
    if need:
        print("exporting %s into %s" % (",".join(need), models), flush=True)
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "models", "export_models.py"), models,
                        "--only", ",".join(need)], check=True)
    if (not only or "attention" in only) and not os.path.exists(os.path.join(models, "attention", "mem.npy")):
        export_attention(os.path.join(models, "attention"))
    cpus = len(os.sched_getaffinity(0))
    print("CPU: %s, %d usable cores" % (cpu_name(), cpus))
    print("ISA flags: %s" % isa_flags())
    cs = cases(weft, models, only)
    print("idle (other processes on the machine are not controlled; load average %.2f):" % os.getloadavg()[0])
    conds = args.conditions.split(",")
    res = {}
    if "idle" in conds:
        res["idle"] = measure(cs, args.rounds, args.seconds, "idle")
    if "busy" in conds:
        with BusyCore() as b:
            print("one core busy (a shell loop pinned to CPU %d):" % b.cpu)
            res["busy"] = measure(cs, args.rounds, args.seconds, "busy")
    print("\nmedian ms per run (per weft demo training step); ratio = default / --threads 1")
    print("%-18s" % "model" + "".join("  %10s %10s %6s" % (c + " def", c + " t1", "ratio") for c in res))
    for i, c in enumerate(cs):
        print("%-18s" % c.name + "".join("  %10.3f %10.3f %6.2f" % (r[i][1], r[i][4], r[i][7]) for r in res.values()))
    worst = max(r[7] for rows in res.values() for r in rows)
    print("worst ratio %.2f (the goal: at most 1.10)" % worst)


if __name__ == "__main__":
    main()
