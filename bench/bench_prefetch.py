"""prefetch_to_device (issue 16): the demo MLP trained for one epoch on a device with its input pipeline
ending in prefetch_to_device, and without (the batches then cross to the device inside each step),
interleaved. From each run's input trace (weft demo --input-trace: per step its wait for the next batch
and its run, and the prefetch copies, on one clock) it prints the share of the step the device waits for
input and how many batch copies overlapped a running step. Steps before the 10th are left out (the
first builds the plan and the device kernels).

usage: bench_prefetch.py BUILD [--device OPENCL:0] [--rounds 2] [--epochs 1]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(build, device, prefetch, epochs, trace):
    cmd = [os.path.join(build, "weft"), "demo", "--device", device, "--epochs", str(epochs), "--trace", "",
           "--input-trace", trace]
    if not prefetch:
        cmd.append("--no-prefetch")
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    ev = json.load(open(trace))["traceEvents"]
    steps = sorted((e for e in ev if e.get("tid") == 1 and e["ph"] == "X"), key=lambda e: e["ts"])[10:]
    waits = sorted((e for e in ev if e.get("tid") == 2 and e["ph"] == "X"), key=lambda e: e["ts"])[10:]
    copies = [e for e in ev if e.get("tid") == 3 and e["ph"] == "X"]
    run_us = sum(e["dur"] for e in steps)
    wait_us = sum(e["dur"] for e in waits)
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in steps]
    overlap = 0
    j = 0
    for c in sorted(copies, key=lambda e: e["ts"]):
        a, b = c["ts"], c["ts"] + c["dur"]
        while j < len(spans) and spans[j][1] <= a:
            j += 1
        if j < len(spans) and spans[j][0] < b:
            overlap += 1
    epoch_line = next((l for l in out.stdout.splitlines() if l.startswith("epoch time")), "")
    return {"wait_share": wait_us / (wait_us + run_us) if run_us else float("nan"),
            "step_ms": statistics.median(e["dur"] for e in steps) / 1e3 if steps else float("nan"),
            "wait_ms": statistics.median(e["dur"] for e in waits) / 1e3 if waits else float("nan"),
            "copies": len(copies), "overlapping": overlap, "epoch": epoch_line}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--device", default="OPENCL:0")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=1)
    a = ap.parse_args()
    have = subprocess.run([os.path.join(a.build, "weft"), "devices", "--match", a.device], capture_output=True,
                          text=True)
    if a.device not in have.stdout:
        print(f"SKIP prefetch_to_device: no {a.device} device here")
        return 0
    tmp = tempfile.mkdtemp(prefix="weft-bench-prefetch-")
    res = {True: [], False: []}
    for r in range(a.rounds):
        for pf in ((True, False) if r % 2 == 0 else (False, True)):
            res[pf].append(run(a.build, a.device, pf, a.epochs, os.path.join(tmp, f"r{r}-{int(pf)}.json")))
    print(f"demo MLP, batch 32, one epoch on {a.device}, {a.rounds} rounds interleaved (steps from the 10th on):")
    print(f"{'input':<34}{'waits (share of step)':>24}{'median step':>13}{'median wait':>13}{'copies overlapping a step':>28}")
    for pf in (True, False):
        name = f"prefetch_to_device({a.device}, 2)" if pf else "no prefetch (copied inside the step)"
        shares = ", ".join(f"{100 * x['wait_share']:.1f}%" for x in res[pf])
        st = statistics.median(x["step_ms"] for x in res[pf])
        wt = statistics.median(x["wait_ms"] for x in res[pf])
        ov = ", ".join(f"{x['overlapping']}/{x['copies']}" for x in res[pf]) if pf else "-"
        print(f"{name:<34}{shares:>24}{st:>11.3f}ms{wt:>11.3f}ms{ov:>28}")
    print(f"input wait share of the step on {a.device}: with prefetch_to_device "
          f"{100 * statistics.median(x['wait_share'] for x in res[True]):.1f}%, without "
          f"{100 * statistics.median(x['wait_share'] for x in res[False]):.1f}%")
    print(f"(traces in {tmp}: open one in https://ui.perfetto.dev to see each copy beside the step it overlaps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
