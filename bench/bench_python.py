#!/usr/bin/python3
"""Overheads of the Python API: weft (python/weft, `import weft as tf`) against TensorFlow and PyTorch.

usage: bench_python.py [BUILD] [--rounds R] [--repeats K] [--quick] [--tf-python PY] [--torch-python PY]
                       [--weft-python PY] [--json PATH]

Three measurements, each peer in its own process (a small snippet below, written to a temporary file and run
as `PY FILE`: torch.jit.script needs the function's source):
  (a) eager add of two scalars: tf.add(a, b), a, b = tf.constant(1.0), tf.constant(2.0) (weft and
      TensorFlow); torch.add(a, b) on 0-d float32 tensors. µs per op.
  (b) a call of a traced function of one op, `@tf.function def f(x, y): return x + y`, called with those
      scalars after a warm-up (weft and TensorFlow); PyTorch: torch.jit.script of the same function
      (torch.compile is too heavy for a per-call figure and is not used). µs per call.
  (c) numpy round trip of a float32 array of 2^20 elements (4 MiB): t = tf.convert_to_tensor(arr);
      back = t.numpy() (PyTorch: torch.from_numpy(arr).numpy()). µs per round trip, and whether memory is
      shared, as pointer identities: weft t.data_ptr() == arr.ctypes.data and back.ctypes.data ==
      t.data_ptr(); TensorFlow and PyTorch back.ctypes.data == arr.ctypes.data.
Each figure is timeit over N iterations (20,000 for (a) and (b), 2,000 for (c), fewer where one
iteration is so slow that a repeat would take over 0.5 s: the counts used are printed), repeated K times
(default 9) in a process; a round runs weft, TensorFlow, PyTorch one after another (odd rounds in reverse
order), R rounds (default 3), so the peers interleave and noise shows as a spread. Printed per round:
the median over the K repeats and their p10-p90; then the median over all rounds and the ratio peer/weft
(above 1: the peer is slower). The issue's goals are printed next to the figures as goals: eager op <= 5
µs, function call <= 10 µs, no copy for numpy in and out. Nothing is asserted.

Pythons: weft runs under /usr/bin/python3 (numpy is all it needs; WEFT_LIBRARY defaults to
BUILD/libweft.so, the package to this checkout's python/); TensorFlow under BUILD/venv-bench (tensorflow-cpu,
scripts/venv-bench.sh); PyTorch under /usr/bin/python3 (Debian's python3-torch). Debian's PyTorch and numpy
use OpenBLAS: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for the PyTorch command only (said in the
output), left as they are for the others. Thread counts are each library's default. --quick: 1 round, 3
repeats, a tenth of the iterations (a smoke run). Results also go to BUILD/bench-python.json.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
N_ELEMS = 1 << 20
GOALS = {"eager_add_us": 5.0, "function_call_us": 10.0}

# Shared by every snippet: timing and the report line. {n_op}, {n_rt}, {k} are filled in.
COMMON = r'''
import json, os, sys, timeit
import numpy as np
N_OP, N_RT, K, NEL, CAP_S = {n_op}, {n_rt}, {k}, {nel}, {cap}
ITERS = {{}}
def rep(fn, n, key):
    fn()
    est = timeit.timeit(fn, number=20) / 20
    n = min(n, max(100, int(CAP_S / max(est, 1e-9))))  # a slow peer: about CAP_S seconds per repeat
    ITERS[key] = n
    return [timeit.timeit(fn, number=n) / n * 1e6 for _ in range(K)]
arr = np.arange(NEL, dtype=np.float32)
'''

# The same TensorFlow code for weft and TensorFlow (only the import differs: the point of the API);
# SHARE says, per package, which pointers it compares.
TF_API = r'''
import {module} as tf
a, b = tf.constant(1.0), tf.constant(2.0)
assert float(tf.add(a, b)) == 3.0
add = rep(lambda: tf.add(a, b), N_OP, "add")
@tf.function
def f(x, y):
    return x + y
for _ in range(3): f(a, b)
assert float(f(a, b)) == 3.0
call = rep(lambda: f(a, b), N_OP, "call")
t = tf.convert_to_tensor(arr); back = t.numpy()
ok = bool((back == arr).all())
share = {share}
del t, back
rt = rep(lambda: tf.convert_to_tensor(arr).numpy(), N_RT, "rt")
print("RESULT " + json.dumps({{"version": "{module} " + tf.__version__, "numpy": np.__version__,
      "python": sys.version.split()[0], "add": add, "call": call, "rt": rt, "iters": ITERS, "share": share, "rt_equal": ok,
      "tracing_count": f.experimental_get_tracing_count()}}))
'''
WEFT = TF_API.format(module="weft", share='{"t.data_ptr() == arr.ctypes.data": t.data_ptr() == arr.ctypes.data, '
                     '"back.ctypes.data == t.data_ptr()": back.ctypes.data == t.data_ptr()}')
TF = TF_API.format(module="tensorflow", share='{"back.ctypes.data == arr.ctypes.data": back.ctypes.data == arr.ctypes.data}')

TORCH = r'''
import torch
a, b = torch.tensor(1.0), torch.tensor(2.0)
assert float(torch.add(a, b)) == 3.0
add = rep(lambda: torch.add(a, b), N_OP, "add")
def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y
f = torch.jit.script(f)
for _ in range(3): f(a, b)
assert float(f(a, b)) == 3.0
call = rep(lambda: f(a, b), N_OP, "call")
t = torch.from_numpy(arr); back = t.numpy()
ok = bool((back == arr).all())
share = {"back.ctypes.data == arr.ctypes.data": back.ctypes.data == arr.ctypes.data}
del t, back
rt = rep(lambda: torch.from_numpy(arr).numpy(), N_RT, "rt")
print("RESULT " + json.dumps({"version": "torch " + torch.__version__, "numpy": np.__version__,
      "python": sys.version.split()[0], "add": add, "call": call, "rt": rt, "iters": ITERS, "share": share, "rt_equal": ok,
      "threads": torch.get_num_threads()}))
'''

METRICS = (("add", "eager add (µs/op)"), ("call", "function call (µs/call)"), ("rt", "numpy round trip (µs)"))


def isa():
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags.update(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    want = ["avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"]
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    return model, {w: (w in flags) for w in want}


def q(xs, p):
    xs = sorted(xs)
    if len(xs) == 1:
        return xs[0]
    i = p * (len(xs) - 1)
    lo = int(i)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (i - lo)


def run_peer(name, py, code, env):
    # A file, not -c: torch.jit.script reads the function's source.
    with tempfile.NamedTemporaryFile("w", suffix="_%s.py" % name, delete=False) as f:
        f.write(code)
    t0 = time.perf_counter()
    try:
        p = subprocess.run([py, f.name], env=env, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, "%s: %s" % (name, e)
    finally:
        os.unlink(f.name)
    wall = time.perf_counter() - t0
    line = next((l for l in p.stdout.splitlines() if l.startswith("RESULT ")), None)
    if p.returncode != 0 or line is None:
        tail = (p.stderr or p.stdout).strip().splitlines()[-5:]
        return None, "%s failed (rc %d): %s" % (name, p.returncode, " | ".join(tail))
    r = json.loads(line[7:])
    r["wall_s"] = wall
    return r, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--weft-python", default="/usr/bin/python3")
    ap.add_argument("--tf-python", default=None, help="default BUILD/venv-bench/bin/python; 'none' skips")
    ap.add_argument("--torch-python", default="/usr/bin/python3", help="'none' skips")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    tfpy = a.tf_python or os.path.join(build, "venv-bench", "bin", "python")
    n_op, n_rt, k, rounds = 20000, 2000, a.repeats, a.rounds
    if a.quick:
        n_op, n_rt, k, rounds = 2000, 200, 3, 1
    fill = dict(n_op=n_op, n_rt=n_rt, k=k, nel=N_ELEMS, cap=0.05 if a.quick else 0.5)

    base = dict(os.environ)
    base.setdefault("WEFT_LIBRARY", os.path.join(build, "libweft.so"))
    pp = os.path.join(ROOT, "python")
    weft_env = dict(base, PYTHONPATH=pp + (os.pathsep + base["PYTHONPATH"] if base.get("PYTHONPATH") else ""))
    tf_env = dict(base, TF_CPP_MIN_LOG_LEVEL="2")
    torch_env = dict(base)
    unset = [v for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if v in torch_env]
    for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        torch_env.pop(v, None)

    peers = [("weft", a.weft_python, COMMON.format(**fill) + WEFT, weft_env)]
    skipped = {}
    if tfpy != "none" and os.path.exists(tfpy):
        peers.append(("tensorflow", tfpy, COMMON.format(**fill) + TF, tf_env))
    else:
        skipped["tensorflow"] = "no TensorFlow python (%s; scripts/venv-bench.sh makes it)" % tfpy
    if a.torch_python != "none":
        peers.append(("pytorch", a.torch_python, COMMON.format(**fill) + TORCH, torch_env))
    else:
        skipped["pytorch"] = "--torch-python none"

    model, flags = isa()
    print("CPU: %s; %s" % (model or "?", ", ".join("%s %s" % (f, "yes" if v else "no") for f, v in flags.items())))
    print("weft: WEFT_LIBRARY=%s, package %s, under %s" % (weft_env["WEFT_LIBRARY"], pp, a.weft_python))
    print("OpenBLAS: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset for the PyTorch command only (Debian's "
          "PyTorch and numpy use OpenBLAS)%s; left as they are for weft and TensorFlow"
          % (" (they were set: %s)" % ", ".join(unset) if unset else " (neither was set here)"))
    print("timeit: %d iterations for (a) and (b), %d for (c), %d repeats per process, %d round(s), "
          "interleaved%s" % (n_op, n_rt, k, rounds, " (--quick)" if a.quick else ""))
    for name, why in skipped.items():
        print("%s: skipped, %s" % (name, why))
    sys.stdout.flush()

    results = {name: [] for name, _, _, _ in peers}
    errors = {}
    for r in range(rounds):
        order = peers if r % 2 == 0 else list(reversed(peers))
        for name, py, code, env in order:
            res, err = run_peer(name, py, code, env)
            if err:
                errors[name] = err
                print("  round %d %s: %s" % (r + 1, name, err), flush=True)
                continue
            results[name].append(res)
            print("  round %d %-10s add %7.2f  call %7.2f  round trip %8.2f µs  (process %.1f s)" % (
                r + 1, name, statistics.median(res["add"]), statistics.median(res["call"]),
                statistics.median(res["rt"]), res["wall_s"]), flush=True)

    print()
    versions = {n: rs[0]["version"] + ", numpy " + rs[0]["numpy"] + ", Python " + rs[0]["python"]
                for n, rs in results.items() if rs}
    for n, v in versions.items():
        print("%-10s %s" % (n + ":", v))
    for n, rs in results.items():
        if rs:
            print("%-10s iterations per repeat: %s" % (n + ":", ", ".join("%s %d" % kv for kv in rs[0]["iters"].items())))
    if results.get("pytorch"):
        print("pytorch:   function call is torch.jit.script (not torch.compile: too heavy for this); "
              "%d intra-op threads" % results["pytorch"][0].get("threads", 0))
    print()
    # Per-round table: median [p10-p90] of the K repeats.
    hdr = "%-26s %-6s" % ("", "round") + "".join("%-28s" % n for n in results)
    print(hdr)
    summary = {}
    for key, label in METRICS:
        for r in range(rounds):
            cells = []
            for n, rs in results.items():
                if r < len(rs):
                    xs = rs[r][key]
                    cells.append("%8.2f [%.2f-%.2f]" % (statistics.median(xs), q(xs, 0.1), q(xs, 0.9)))
                else:
                    cells.append("-")
            print("%-26s %-6d" % (label if r == 0 else "", r + 1) + "".join("%-28s" % c for c in cells))
        meds = {n: statistics.median([statistics.median(x[key]) for x in rs]) for n, rs in results.items() if rs}
        summary[key] = meds
        w = meds.get("weft")
        cells = []
        for n in results:
            if n not in meds:
                cells.append("-")
            elif n == "weft" or not w:
                cells.append("%8.2f" % meds[n])
            else:
                cells.append("%8.2f (%.2fx weft)" % (meds[n], meds[n] / w))
        print("%-26s %-6s" % ("", "median") + "".join("%-28s" % c for c in cells))
    print()
    print("numpy round trip, memory shared (pointer identity; equal values checked):")
    for n, rs in results.items():
        if rs:
            s = rs[0]["share"]
            print("  %-10s %s; values equal: %s" % (n, "; ".join("%s: %s" % (k_, v) for k_, v in s.items()),
                                                     rs[0]["rt_equal"]))
    w = summary.get("add", {}).get("weft")
    c = summary.get("call", {}).get("weft")
    ws = results["weft"][0]["share"] if results.get("weft") else None
    print()
    print("goals (the issue's; printed, not asserted):")
    if w is not None:
        print("  eager op <= %.0f µs: weft %.2f µs (%s)" % (GOALS["eager_add_us"], w,
                                                       "met" if w <= GOALS["eager_add_us"] else "not met"))
        print("  function call <= %.0f µs: weft %.2f µs (%s)" % (GOALS["function_call_us"], c,
                                                            "met" if c <= GOALS["function_call_us"] else "not met"))
    if ws is not None:
        print("  no copy for numpy in/out: weft %s" % ("no copy either way" if all(ws.values()) else
                                                       "copies (%s)" % ws))
    for n, e in errors.items():
        print("error: %s" % e)

    out = a.json or os.path.join(build, "bench-python.json")
    doc = {"cpu": model, "isa": flags, "quick": a.quick, "iterations": {"op": n_op, "round_trip": n_rt},
           "repeats": k, "rounds": rounds, "array_elements": N_ELEMS, "versions": versions,
           "openblas_unset_for_pytorch": unset, "goals": GOALS, "median_us": summary,
           "runs": results, "skipped": skipped, "errors": errors}
    try:
        with open(out, "w") as f:
            json.dump(doc, f, indent=1)
        print("results: %s" % out)
    except OSError as e:
        print("could not write %s: %s" % (out, e))


if __name__ == "__main__":
    main()
