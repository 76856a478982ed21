#!/usr/bin/python3
"""Mixed precision: f32 against the 16-bit dtype each device computes natively, interleaved in one run.

usage: bench_amp.py [BUILD] [--rounds R] [--iterations N] [--steps S] [--threads T] [--out DIR]

Prints the CPU's ISA features (bf16 speed depends on AVX512_BF16 and AMX) and what `weft devices
--verbose` says of each device's 16-bit compute, then per device (CPU:0, and GPU:0 where there is one):
  - ResNet-50 inference at batch 8 (torchvision, calibrated BatchNorm, bench_ort.py's export):
    `weft run --precision f32` against `--precision bf16` (f16 on a GPU), --opt-level 3, T threads;
    the median of N runs per round, R rounds interleaved (f32, 16-bit, f32, 16-bit, ...); the
    activations' memory (`weft run`'s memory line: the plan's arenas, which hold every intermediate
    value; the peak in use there also counts a training step's new variable and slot values) and the
    16-bit run's largest deviation from the f32 output;
  - a training step of the small CNN (`weft demo --model cnn`, batch 64) and of the tutorial MLP (batch
    256) under the Keras policies float32 and mixed_bfloat16 (mixed_float16 on a GPU): `weft demo
    --time-steps S --policy P`, the median step, interleaved the same way, with the peak memory.
The ratio is f32 time / 16-bit time (above 1: the 16-bit run is faster); memory is 16-bit / f32.
Numbers only, nothing is asserted. The goal (issue 15), where the CPU has AVX512_BF16: bf16 >= 1.6x on
ResNet-50, >= 1.4x on the CNN step, and peak activation memory <= 0.6x f32.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_ort import cpu_line, prepare  # noqa: E402

TIME_RE = re.compile(r"^time: first [0-9.]+ ms, median ([0-9.]+) ms", re.M)
STEP_RE = re.compile(r"^train step: batch \d+, \d+ steps, median ([0-9.]+) ms", re.M)
MEM_RE = re.compile(r"^memory: (\S+) activations ([0-9.]+) MiB \(the plans' arenas\), peak in use ([0-9.]+) MiB", re.M)
DEV_RE = re.compile(r"^precision: output \S+: largest deviation from f32 (\S+) .*relative ([0-9.e+-]+)", re.M)


def run(cmd, what):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if p.returncode != 0:
        raise RuntimeError("%s exited %d:\n%s" % (what, p.returncode, p.stdout[-2500:].rstrip()))
    return p.stdout


def peak(text, dev):
    """The activations' memory (the plan's arenas: every intermediate value, gradients included)."""
    for d, act, _ in MEM_RE.findall(text):
        if d == dev:
            return float(act)
    return None


def devices(weft):
    out = run([weft, "devices", "--verbose"], "weft devices --verbose")
    devs, notes, cur = [], {}, None
    for line in out.splitlines():
        m = re.match(r"^/job:\S+/device:(\w+:\d+)\s", line)
        if m:
            cur = m.group(1)
            continue
        m = re.match(r"^\s+precision: (.*)$", line)
        if m and cur:
            notes[cur] = m.group(1)
            if cur == "CPU:0" or cur.startswith("GPU:"):
                devs.append(cur)
    return devs, notes


def fmt(v, unit=""):
    return "-" if v is None else ("%.2f%s" % (v, unit))


def interleave(rounds, variants, one):
    """rounds x [one(v) for v in variants]; returns {v: [results]} (None where a run failed: printed)."""
    res = {v: [] for v in variants}
    for _ in range(rounds):
        for v in variants:
            try:
                res[v].append(one(v))
            except RuntimeError as e:
                print("  %s: %s" % (v, str(e).splitlines()[0] if str(e) else e))
                res[v].append(None)
    return res


def med(xs, k):
    vals = [x[k] for x in xs if x and x[k] is not None]
    return statistics.median(vals) if vals else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    weft = os.path.join(a.build, "weft")
    out = a.out or os.path.join(a.build, "bench-ort")
    print(cpu_line())
    devs, notes = devices(weft)
    for d in devs:
        print("%s: %s" % (d, notes.get(d, "?")))
    onnx, files, _ = prepare(out, "resnet50", "tv", [1, 8], lambda s: print(s))
    x8 = files[8][0]
    rows = []
    for dev in devs:
        lo = "bf16" if dev == "CPU:0" else "f16"
        policy = "mixed_bfloat16" if lo == "bf16" else "mixed_float16"

        def infer(p):
            t = run([weft, "run", onnx, "--input", "input=" + x8, "--iterations", str(a.iterations), "--threads",
                     str(a.threads), "--opt-level", "3", "--device", dev, "--precision", p],
                    "weft run ResNet-50 --precision %s on %s" % (p, dev))
            m = TIME_RE.search(t)
            dv = DEV_RE.search(t)
            return (float(m.group(1)) if m else None, peak(t, dev), float(dv.group(2)) if dv else None)

        print("\n%s: ResNet-50 batch 8 inference, f32 against %s, %d rounds of %d runs" % (dev, lo, a.rounds,
                                                                                          a.iterations))
        r = interleave(a.rounds, ["f32", lo], infer)
        for v in ["f32", lo]:
            print("  %-5s ms per round: %s; activations %s MiB%s" % (
                v, ", ".join(fmt(x[0]) if x else "-" for x in r[v]), fmt(med(r[v], 1)),
                "" if v == "f32" else "; largest deviation from f32 (relative to its largest value) %s"
                % fmt(med(r[v], 2))))
        rows.append((dev, "ResNet-50 b8 inference", lo, med(r["f32"], 0), med(r[lo], 0), med(r["f32"], 1),
                     med(r[lo], 1)))
        for model, batch in (("cnn", 64), ("mlp", 256)):
            def step(p):
                t = run([weft, "demo", "--model", model, "--batch", str(batch), "--time-steps", str(a.steps),
                         "--threads", str(a.threads), "--device", dev, "--policy", p, "--trace", ""],
                        "weft demo --model %s --policy %s on %s" % (model, p, dev))
                m = STEP_RE.search(t)
                return (float(m.group(1)) if m else None, peak(t, dev))

            print("%s: %s training step, batch %d, float32 against %s, %d rounds of %d steps" % (
                dev, model.upper(), batch, policy, a.rounds, a.steps))
            r = interleave(a.rounds, ["float32", policy], step)
            for v in ["float32", policy]:
                print("  %-14s ms per round: %s; activations %s MiB" % (v, ", ".join(fmt(x[0]) if x else "-" for x in r[v]),
                                                                fmt(med(r[v], 1))))
            rows.append((dev, "%s training step b%d" % (model.upper(), batch), lo, med(r["float32"], 0),
                         med(r[policy], 0), med(r["float32"], 1), med(r[policy], 1)))
    print("\n| device | workload | 16-bit | f32 ms | 16-bit ms | f32 / 16-bit time | activations MiB f32 -> 16-bit (ratio) |")
    print("|---|---|---|---|---|---|---|")
    for dev, what, lo, t32, t16, m32, m16 in rows:
        ratio = "%.2f" % (t32 / t16) if t32 and t16 else "-"
        mem = "%s -> %s (%s)" % (fmt(m32), fmt(m16), "%.2f" % (m16 / m32) if m32 and m16 else "-")
        print("| %s | %s | %s | %s | %s | %s | %s |" % (dev, what, lo, fmt(t32), fmt(t16), ratio, mem))


if __name__ == "__main__":
    main()
