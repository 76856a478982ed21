#!/usr/bin/python3
"""Time per run of ResNet-18 and MobileNetV2 through `weft run`, before and after: a baseline weft built
from an earlier revision against the current build, interleaved in one benchmark run.

usage: bench_before_after.py [BUILD] [--base REV] [--rounds N] [--iterations N] [--models a,b]
                             [--batches 1,16] [--devices CPU:0[,GPU:0]]

The baseline is built once per revision into BUILD/bench-baseline/REV (`git archive REV`, Release, no
tests, benchmarks or CUDA unless a GPU device is asked for), so later sessions move the baseline by
passing --base (the default is the revision at which issue 13's runtime work began). Each round runs
baseline then current on every model, so noise shows as spread between rounds; the table prints the
median of the rounds' medians and the ratio current/baseline (< 1: faster now). Default thread counts
(no --threads), as a user runs it. On GPU:0 (only where `nvidia-smi -L` lists a GPU) it also prints the
share of the wall time the GPU was busy, from `weft run --profile`'s per-device summary. Numbers are
printed, never asserted.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench_models  # noqa: E402  (prepare(): the same exported models and inputs)

DEFAULT_BASE = "0fffa97"


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    return " ".join(x for x in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile") if x in have)
    except OSError:
        pass
    return "unknown"


def have_gpu():
    try:
        p = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=30)
        return p.returncode == 0 and "GPU" in p.stdout, p.stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)


def build_baseline(build, rev, cuda):
    """BUILD/bench-baseline/REV/weft, built once from `git archive REV`."""
    full = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", rev], stdout=subprocess.PIPE,
                          universal_newlines=True, check=True).stdout.strip()
    top = os.path.join(os.path.abspath(build), "bench-baseline", full + ("-cuda" if cuda else ""))
    exe = os.path.join(top, "build", "weft")
    if os.path.exists(exe):
        return full, exe
    src = os.path.join(top, "src")
    os.makedirs(src, exist_ok=True)
    print("building the baseline %s into %s (once)" % (full, top), flush=True)
    arch = subprocess.Popen(["git", "-C", ROOT, "archive", full], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", src], stdin=arch.stdout, check=True)
    if arch.wait() != 0:
        raise RuntimeError("git archive %s failed" % full)
    flags = ["-DCMAKE_BUILD_TYPE=Release", "-DWEFT_TESTS=OFF", "-DWEFT_BENCH=OFF",
             "-DWEFT_CUDA=%s" % ("ON" if cuda else "OFF")]
    log = os.path.join(top, "build.log")
    with open(log, "w") as f:
        subprocess.run(["cmake", "-S", src, "-B", os.path.join(top, "build")] + flags, stdout=f,
                       stderr=subprocess.STDOUT, check=True)
        targets = ["weft_cli"] + (["weft-cuda"] if cuda else [])
        subprocess.run(["cmake", "--build", os.path.join(top, "build"), "-j%d" % (os.cpu_count() or 1),
                        "--target"] + targets, stdout=f, stderr=subprocess.STDOUT, check=True)
    return full, exe


def time_run(weft, onnx_path, x_path, device, iterations, outdir, profile=None):
    cmd = [weft, "run", onnx_path, "--input", "input=" + x_path, "--iterations", str(iterations),
           "--device", device, "--output-dir", outdir]
    if profile:
        cmd += ["--profile", profile]
    env = dict(os.environ)
    env["WEFT_PLUGIN_PATH"] = os.path.dirname(weft)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env)
    if p.returncode != 0:
        raise RuntimeError("%s exited %d:\n%s" % (" ".join(cmd), p.returncode, p.stdout[-2000:]))
    return bench_models.parse_time(p.stdout, weft)[1]


def gpu_busy_share(profile_path):
    """Busy/wall of the GPU from --profile's otherData summary, or None."""
    try:
        with open(profile_path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    for d in doc.get("otherData", {}).get("devices", []):
        if str(d.get("device", "")).endswith("GPU:0"):
            return float(d.get("utilisation", 0))
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--base", default=DEFAULT_BASE)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--models", default="resnet18,mobilenet_v2")
    ap.add_argument("--batches", default="1")
    ap.add_argument("--devices", default="CPU:0,GPU:0")
    args = ap.parse_args()

    gpu, gpu_why = have_gpu()
    devices = [d for d in args.devices.split(",") if d]
    if "GPU:0" in devices and not gpu:
        print("GPU:0: skipped, no GPU here (nvidia-smi -L: %s)" % (gpu_why.splitlines()[0] if gpu_why else "nothing"))
        devices.remove("GPU:0")
    print("CPU %s, ISA: %s; %d rounds of %d iterations, default threads" %
          (platform.processor() or platform.machine(), cpu_flags(), args.rounds, args.iterations))
    current = os.path.join(os.path.abspath(args.build), "weft")
    base_rev, baseline = build_baseline(args.build, args.base, "GPU:0" in devices)
    outdir = os.path.join(args.build, "bench-models")
    rows = []
    rc = 0
    for kind in filter(None, args.models.split(",")):
        for batch in (int(b) for b in args.batches.split(",") if b):
            onnx_path, x_path = bench_models.prepare(outdir, kind, batch)
            for dev in devices:
                t = {"before": [], "after": []}
                try:
                    for _ in range(args.rounds):
                        for which, exe in (("before", baseline), ("after", current)):
                            t[which].append(time_run(exe, onnx_path, x_path, dev, args.iterations,
                                                     os.path.join(outdir, kind, "out-" + which)))
                    share = None
                    if dev.startswith("GPU"):
                        with tempfile.TemporaryDirectory() as tmp:
                            prof = os.path.join(tmp, "p.json")
                            time_run(current, onnx_path, x_path, dev, 3, os.path.join(tmp, "o"), prof)
                            share = gpu_busy_share(prof)
                except (RuntimeError, OSError) as e:
                    print("%s batch %d on %s: error: %s" % (kind, batch, dev, e))
                    rc = 1
                    continue
                b, a = statistics.median(t["before"]), statistics.median(t["after"])
                rows.append((kind, batch, dev, b, a, t, share))
                print("%-13s b%-3d %-6s before %s  after %s" % (
                    kind, batch, dev, " ".join("%.2f" % x for x in t["before"]),
                    " ".join("%.2f" % x for x in t["after"])), flush=True)
    print()
    print("median ms per run over the rounds; before = %s, after = this build" % base_rev)
    print("%-13s %5s %-6s %10s %10s %12s %10s" % ("model", "batch", "device", "before", "after",
                                                  "after/before", "GPU busy"))
    for kind, batch, dev, b, a, _, share in rows:
        print("%-13s %5d %-6s %10.2f %10.2f %12.2f %10s" % (kind, batch, dev, b, a, a / b,
                                                            "-" if share is None else "%.0f%%" % (100 * share)))
    print("after/before < 1 means this build is faster.")
    return rc


if __name__ == "__main__":
    sys.exit(main())
