#!/usr/bin/python3
"""Input pipelines (issue 16): the seeds' JPEG pipeline in weft and in tf.data, speed, bounded memory and
a check of weft's batches against Pillow and TensorFlow.

usage: bench_input.py [BUILD] [--dir DIR] [--n N] [--threads 1,2] [--rounds R] [--epochs E]
                      [--grid-parallel 1,2] [--grid-prefetch 1,2,4] [--no-pin] [--tf-python PATH]
                      [--json PATH] [--skip-speed] [--skip-memory] [--skip-check]

The pipeline (the issue's seed text):
  list_files(DIR/*.jpg, sorted) -> map(read_file -> decode_jpeg(channels=3) -> resize to 224x224
  (bilinear, half-pixel centres) -> random_brightness(0.2) -> / 255, num_parallel_calls=AUTOTUNE,
  deterministic) -> batch(32) -> prefetch(AUTOTUNE)
  weft:     BUILD/bench/bench_input (bench/bench_input.c: the public tf.data-style API, a map graph)
  tf.data:  the same stages in TensorFlow (tensorflow-cpu from build/venv-bench): Dataset.list_files(
            shuffle=False), tf.io.decode_jpeg (its default DCT, as the seed text runs it),
            tf.image.resize (bilinear, antialias off: its defaults), tf.image.random_brightness(0.2),
            / 255; private thread pool of T threads, max_intra_op_parallelism 1, autotune cpu_budget T.
Brightness is applied as written: the delta in [-0.2, 0.2) is added to the resized image in 0..255 units,
before the division, as tf.image.random_brightness does in that place (so it is tiny).

Data: DIR (default BUILD/bench-input/jpegs) holds N (default 2048) JPEGs that bench/make_jpegs.py makes
from Fashion-MNIST (256x256 RGB, quality 90, Pillow/libjpeg-turbo; that file says why), once.

(1) Speed. Each run is its own process: a warm-up of 4 batches, then E (default 1) full epochs, each
    timed from making its iterator to its last batch; images/s = images / that time. At each thread
    count T (default 1 and 2): weft with AUTOTUNE (map and prefetch), tf.data with AUTOTUNE, then weft
    over a grid of fixed settings (map parallel 1/2 x prefetch 1/2/4), in that order, R rounds (default
    2, odd rounds in reverse order), so the runs interleave (weft, tf, weft, tf, ...) and noise shows as
    a spread; the table gives the median over rounds, and the CPU time per image of each run (all its
    threads), which moves much less than images/s when other work shares the machine. With T <= the
    usable cores, each run is pinned to the first T of them (sched_setaffinity; --no-pin turns it off),
    so "T threads" means T cores for both, helper threads (prefetch, autotune) included. Printed: the
    table, then per T the line
        input pipeline: weft N images/s, tf.data M images/s, ratio R (T threads)
    (weft and tf.data both AUTOTUNE), and the issue's goals as measured facts (2 threads >= 1.8x one
    thread; AUTOTUNE within 10% of the best fixed setting; ratio >= 1.5). Nothing is asserted.
(2) Bounded memory: weft at the largest T, AUTOTUNE, ram budget 256 MB, one whole epoch during which
    the consumer sleeps 1.5 s after every 16th batch (so the prefetch buffer that AUTOTUNE grew while
    the consumer waited does fill, up to the budget); peak RSS (VmHWM of the whole process) against
    budget + 100 MB = 356 MB, and the buffers' own peak against 256 MB.
    On a busy host the ratio of the CPU times per image is the steadier comparison of the two
    pipelines' efficiency (it says nothing about scaling, which needs quiet cores).
(3) Batches against references: weft's first 2 batches (64 images, iteration 0, seed 42) from
    bench_input --dump, against
      - Pillow (its decode, libjpeg-turbo's accurate integer IDCT, which weft's DecodeJpeg uses too and
        matches bit for bit) + a numpy bilinear half-pixel resize in float64, rounded to f32, the same
        brightness deltas (replicated from the draw weft.h documents) and / 255;
      - TensorFlow: tf.io.decode_jpeg(dct_method="INTEGER_ACCURATE") + tf.image.resize (bilinear) +
        tf.image.adjust_brightness with those deltas + / 255; and, for information, with TF's default
        DCT (INTEGER_FAST, which differs from the accurate one by a few levels).
    The decodes agree exactly (TF's INTEGER_ACCURATE is the same libjpeg-turbo islow IDCT and fancy
    upsampling: 0 levels apart on these files), so what is left is resize arithmetic. Tolerances, after
    / 255: Pillow 2e-6 (weft's two-tap Resize computes in f32 with weights from the same float64
    tables, rows then columns: a few f32 ulp of 255 at most; measured 1.8e-7); TensorFlow 5e-5 (its resize computes source coordinates
    in f32: (x + 0.5) * 256/224 - 0.5 is off by up to ~256 * 2^-24 pixels, which a full-scale edge of
    255 levels turns into ~4e-3 levels = 1.6e-5 after / 255, doubled for the two axes and rounded
    up; measured 2.5e-6). The TF default-DCT figure is not held to either.

TensorFlow does not use OpenBLAS; OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are left as they are. Results
also go to BUILD/bench-input.json.
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SEED = 42
BATCH = 32
SIZE = 224
MAX_DELTA = 0.2
CHECK_BATCHES = 2
TOL_PILLOW = 2e-6
TOL_TF = 5e-5
RAM_BUDGET_MB = 256
WORKER_TIMEOUT_S = 1800

# ---------------------------------------------------------------- the brightness draw (weft.h's, replicated)

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
COUNTER = 0xD1B54A32D192ED03


def _mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def brightness_delta(seed, index, iteration=0):
    """The delta weft's StatelessRandomBrightness adds to element `index` of a map's iteration: the map
    feeds {seed, index + (iteration << 40)}; u = top 24 bits of draw 0 of key(seed, counter) times 2^-24;
    delta = (2u - 1) max_delta in double, rounded to f32 (returned as a Python float holding that f32)."""
    import struct
    counter = (index + (iteration << 40)) & M64
    key = _mix((_mix((seed + GOLDEN) & M64) + counter * COUNTER) & M64)
    u = (_mix((key + GOLDEN) & M64) >> 40) * 2.0 ** -24
    d = (2.0 * u - 1.0) * MAX_DELTA
    return struct.unpack("<f", struct.pack("<f", d))[0]


def emit(result):
    print("RESULT " + json.dumps(result), flush=True)


def jpeg_files(d):
    return sorted(glob.glob(os.path.join(d, "*.jpg")), key=lambda p: p.encode())


# ---------------------------------------------------------------- TensorFlow workers (under --tf-python)

def tf_setup(threads):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    return tf


def tf_worker(args):
    try:
        tf = tf_setup(args.threads)
    except Exception as e:
        emit({"unavailable": "import tensorflow failed: %s" % (str(e).splitlines() or [repr(e)])[0]})
        return 0
    AUTOTUNE = tf.data.AUTOTUNE

    def load(path):
        img = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        img = tf.image.resize(img, [SIZE, SIZE])
        img = tf.image.random_brightness(img, MAX_DELTA)
        return img / 255.0

    ds = tf.data.Dataset.list_files(os.path.join(args.dir, "*.jpg"), shuffle=False)
    ds = ds.map(load, num_parallel_calls=AUTOTUNE, deterministic=True).batch(BATCH).prefetch(AUTOTUNE)
    o = tf.data.Options()
    o.deterministic = True
    o.threading.private_threadpool_size = args.threads
    o.threading.max_intra_op_parallelism = 1
    o.autotune.enabled = True
    o.autotune.cpu_budget = args.threads
    ds = ds.with_options(o)
    for b in ds.take(4):
        assert tuple(b.shape[1:]) == (SIZE, SIZE, 3) and b.dtype == tf.float32
    rates, cpu = [], []
    for _ in range(args.epochs):
        t0, c0 = time.perf_counter(), time.process_time()
        n = 0
        for b in ds:
            n += int(b.shape[0])
        rates.append(n / (time.perf_counter() - t0))
        cpu.append((time.process_time() - c0) * 1e3 / n)
    emit({"version": tf.__version__, "images": n, "images_per_s": rates, "cpu_ms_per_image": cpu})
    return 0


def tf_check_worker(args):
    """TensorFlow's batches of the files weft dumped, compared here (numpy is in TF's venv too)."""
    try:
        tf = tf_setup(args.threads)
        import numpy as np
    except Exception as e:
        emit({"unavailable": "import tensorflow failed: %s" % (str(e).splitlines() or [repr(e)])[0]})
        return 0
    dumps = sorted(glob.glob(os.path.join(args.dump, "batch_*.npy")))
    got = np.concatenate([np.load(p) for p in dumps])
    files = jpeg_files(args.dir)[:len(got)]
    out = {"version": tf.__version__, "images": len(got)}
    for dct in ("INTEGER_ACCURATE", ""):
        diff = 0.0
        for i, path in enumerate(files):
            img = tf.io.decode_jpeg(tf.io.read_file(path), channels=3, dct_method=dct)
            img = tf.image.resize(img, [SIZE, SIZE])
            img = tf.image.adjust_brightness(img, brightness_delta(SEED, i))
            ref = (img / 255.0).numpy()
            diff = max(diff, float(np.abs(ref - got[i]).max()))
        out["max_abs_" + (dct or "default").lower()] = diff
    emit(out)
    return 0


# ---------------------------------------------------------------- the Pillow reference (here)

def pillow_check(dump, files):
    import numpy as np
    from PIL import Image

    def taps(n, m):
        src = np.clip((np.arange(m) + 0.5) * (n / m) - 0.5, 0, n - 1)
        lo = np.floor(src).astype(np.int64)
        return lo, np.minimum(lo + 1, n - 1), src - lo

    def resize(x):
        x = x.astype(np.float64)
        lo, hi, w = taps(x.shape[0], SIZE)
        x = x[lo] * (1 - w)[:, None, None] + x[hi] * w[:, None, None]
        lo, hi, w = taps(x.shape[1], SIZE)
        return x[:, lo] * (1 - w)[None, :, None] + x[:, hi] * w[None, :, None]

    got = np.concatenate([np.load(p) for p in sorted(glob.glob(os.path.join(dump, "batch_*.npy")))])
    diff = 0.0
    for i, path in enumerate(files[:len(got)]):
        with Image.open(path) as im:
            a = np.asarray(im.convert("RGB"))
        ref = (resize(a).astype(np.float32) + np.float32(brightness_delta(SEED, i))) / np.float32(255)
        diff = max(diff, float(np.abs(ref - got[i]).max()))
    import PIL
    return {"images": len(got), "max_abs": diff, "pillow": PIL.__version__}


# ---------------------------------------------------------------- the driver

RESULT_RE = re.compile(r"^RESULT (.*)$", re.M)


def pin_fn(cpus):
    if not cpus:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def run(cmd, cpus, env=None):
    """Runs a worker; its last RESULT line as a dict, or {"unavailable": why}."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                           timeout=WORKER_TIMEOUT_S, preexec_fn=pin_fn(cpus), env=env)
    except (OSError, subprocess.SubprocessError) as e:
        return {"unavailable": "failed to run: %s" % e}
    m = RESULT_RE.findall(p.stdout)
    if p.returncode != 0 or not m:
        tail = (p.stderr.strip().splitlines() or p.stdout.strip().splitlines() or ["no output"])[-1]
        return {"unavailable": "exited %d: %s" % (p.returncode, tail)}
    r = json.loads(m[-1])
    r["stdout"] = p.stdout
    return r


def weft_cmd(args, threads, parallel, prefetch, extra=()):
    return [args.exe, "--dir", args.dir, "--threads", str(threads), "--parallel", str(parallel),
            "--prefetch", str(prefetch), "--epochs", str(args.epochs), "--seed", str(SEED)] + list(extra)


def tf_cmd(args, worker, threads, extra=()):
    return [args.tf_python, os.path.abspath(__file__), args.build, "--worker", worker, "--dir", args.dir,
            "--threads", str(threads), "--epochs", str(args.epochs)] + list(extra)


def rate(r):
    """A run's images/s: the median over its timed epochs; None when it did not run."""
    v = r.get("images_per_s") if r else None
    return statistics.median(v) if v else None


def med(rs, f=rate):
    v = [x for x in (f(r) for r in rs) if x]
    return statistics.median(v) if v else None


def cpu_ms(r):
    """A run's CPU time (all its threads) per image in ms, the median over its timed epochs."""
    v = r.get("cpu_ms_per_image") if r else None
    return statistics.median(v) if v else None


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
    want = ["sse4_2", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni"]
    return "CPU: %s, %d logical cores, %d usable; ISA: %s" % (
        model, os.cpu_count() or 0, len(os.sched_getaffinity(0)), " ".join(f for f in want if f in flags) or "-")


def fmt(v):
    return "%.1f" % v if v else "-"


def speed(args, cpus_all):
    runs = {}  # (who, T, parallel, prefetch) -> [result per round]
    grid = [(p, f) for p in args.grid_parallel for f in args.grid_prefetch]
    tf_ok = True
    for rnd in range(args.rounds):
        jobs = []
        for T in args.threads:
            jobs.append(("weft", T, "autotune", "autotune"))
            jobs.append(("tf.data", T, "autotune", "autotune"))
            jobs += [("weft", T, p, f) for p, f in grid]
        if rnd % 2:
            jobs.reverse()  # odd rounds run backwards, so a drift in the machine's load does not favour one end
        for key in jobs:
            who, T, p, f = key
            cpus = cpus_all[:T] if args.pin and T <= len(cpus_all) else None
            if who == "weft":
                runs.setdefault(key, []).append(run(weft_cmd(args, T, p, f), cpus))
            elif tf_ok:
                r = run(tf_cmd(args, "tf", T), cpus)
                runs.setdefault(key, []).append(r)
                if "unavailable" in r and not os.access(args.tf_python or "", os.X_OK):
                    tf_ok = False
        print("  round %d of %d done (%.0f s so far)" % (rnd + 1, args.rounds, time.perf_counter() - args.t0),
              flush=True)
    print()
    print("images/s, median over %d rounds (per round in brackets); one epoch of %d images a run after a warm-up "
          "of 4 batches%s; CPU ms/im: CPU time of all the process's threads over the timed epochs per image "
          "(median; steadier than images/s on a shared machine, and what a saturated machine would divide "
          "its cores by)" % (args.rounds, args.n, ", pinned to T cores" if args.pin else ""))
    print("%-8s %3s %-9s %-9s %9s %9s   %s" % ("who", "T", "parallel", "prefetch", "images/s", "CPU ms/im",
                                            "images/s per round"))
    for (who, T, p, f), rs in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0] != "weft",
                                                                      str(kv[0][2]) != "autotune", str(kv[0][2]),
                                                                      str(kv[0][3]))):
        cells = [fmt(rate(r)) if "unavailable" not in r else "unavailable (%s)" % r["unavailable"] for r in rs]
        c = med(rs, cpu_ms)
        print("%-8s %3d %-9s %-9s %9s %9s   [%s]" % (who, T, p, f, fmt(med(rs)), "%.3f" % c if c else "-",
                                                    ", ".join(cells)))
    print()
    summary = {}
    for T in args.threads:
        w = med(runs[("weft", T, "autotune", "autotune")])
        t = med(runs.get(("tf.data", T, "autotune", "autotune"), []))
        fixed = {(p, f): med(runs[("weft", T, p, f)]) for p, f in grid}
        best = max(((v, k) for k, v in fixed.items() if v), default=(None, None))
        summary[T] = {"weft_autotune": w, "tf_data": t, "best_fixed": best[0], "best_fixed_setting": best[1]}
        wc = med(runs[("weft", T, "autotune", "autotune")], cpu_ms)
        tc = med(runs.get(("tf.data", T, "autotune", "autotune"), []), cpu_ms)
        if wc and tc:
            summary[T]["cpu_ms_per_image"] = {"weft": wc, "tf_data": tc}
        if w and t:
            summary[T]["ratio"] = w / t
            print("input pipeline: weft %.1f images/s, tf.data %.1f images/s, ratio %.2f (%d threads)" % (
                w, t, w / t, T))
        else:
            print("input pipeline: weft %s images/s, tf.data %s images/s, ratio - (%d threads)" % (fmt(w), fmt(t), T))
        if wc and tc:
            print("  CPU time per image: weft %.3f ms, tf.data %.3f ms (tf.data / weft %.2f)" % (wc, tc, tc / wc))
    # the tuned knobs of the last AUTOTUNE run at each T
    for T in args.threads:
        r = runs[("weft", T, "autotune", "autotune")][-1]
        st = [s for s in r.get("stages", []) if s.get("knob_kind")]
        if st:
            print("weft AUTOTUNE at %d threads settled on: %s" % (T, ", ".join(
                "%s %s%d" % (s["name"], "parallel " if s["knob_kind"] == 1 else "buffer ", s["knob"]) for s in st)))
    print()
    print("goals (measured, not asserted):")
    lo, hi = min(args.threads), max(args.threads)
    if lo != hi and summary[lo]["weft_autotune"] and summary[hi]["weft_autotune"]:
        sc = summary[hi]["weft_autotune"] / summary[lo]["weft_autotune"]
        print("  %d threads vs %d: %.2fx (goal >= 1.8x%s): %s" % (hi, lo, sc, " for 2 vs 1" if (lo, hi) == (1, 2)
                                                                  else "", "met" if sc >= 1.8 else "NOT met"))
        summary["scaling"] = sc
    for T in args.threads:
        s = summary[T]
        if s["weft_autotune"] and s["best_fixed"]:
            q = s["weft_autotune"] / s["best_fixed"]
            print("  AUTOTUNE vs best fixed (parallel %s, prefetch %s) at %d threads: %.2f (goal >= 0.90): %s" % (
                s["best_fixed_setting"][0], s["best_fixed_setting"][1], T, q, "met" if q >= 0.9 else "NOT met"))
            s["autotune_vs_best"] = q
    for T in args.threads:
        if summary[T].get("ratio"):
            print("  weft / tf.data at %d threads: %.2f (goal >= 1.5): %s" % (
                T, summary[T]["ratio"], "met" if summary[T]["ratio"] >= 1.5 else "NOT met"))
    tfv = next((r["version"] for rs in runs.values() for r in rs if "version" in r), None)
    if tfv:
        print("  (TensorFlow %s)" % tfv)
    for rs in runs.values():
        for r in rs:
            r.pop("stdout", None)
    return {"runs": [{"who": k[0], "threads": k[1], "parallel": k[2], "prefetch": k[3], "rounds": v}
                     for k, v in runs.items()], "summary": {str(k): v for k, v in summary.items()}}


def memory(args, cpus_all):
    T = max(args.threads)
    cpus = cpus_all[:T] if args.pin and T <= len(cpus_all) else None
    extra = ["--ram-budget", str(RAM_BUDGET_MB), "--stall-every", "16", "--stall-ms", "1500"]
    cmd = weft_cmd(args, T, "autotune", "autotune", extra)
    cmd[cmd.index("--epochs") + 1] = "1"
    r = run(cmd, cpus)
    if "unavailable" in r:
        print("bounded memory: unavailable (%s)" % r["unavailable"])
        return r
    limit = RAM_BUDGET_MB + 100
    print("bounded memory: weft, %d threads, AUTOTUNE, ram budget %d MB, one epoch with the consumer sleeping 1.5 s "
          "every 16 batches: peak RSS %.1f MB (limit %d MB: %s), buffers' peak %.1f MB (budget %d MB)" % (
              T, RAM_BUDGET_MB, r["peak_rss_mb"], limit, "under" if r["peak_rss_mb"] < limit else "OVER",
              r["peak_buffered_mb"], RAM_BUDGET_MB))
    st = [s for s in r.get("stages", []) if s.get("knob_kind")]
    if st:
        print("  knobs at the end: %s" % ", ".join(
            "%s %d (peak %.1f MB)" % (s["name"], s["knob"], s["peak_buffered_mb"]) for s in st))
    r.pop("stdout", None)
    r["limit_mb"] = limit
    return r


def check(args, cpus_all):
    T = max(args.threads)
    cpus = cpus_all[:T] if args.pin and T <= len(cpus_all) else None
    out = {}
    with tempfile.TemporaryDirectory() as d:
        cmd = weft_cmd(args, T, "autotune", "autotune", ["--dump", d, "--dump-batches", str(CHECK_BATCHES)])
        cmd[cmd.index("--epochs") + 1] = "0"
        r = run(cmd, cpus)
        if "unavailable" in r:
            print("reference check: weft's dump unavailable (%s)" % r["unavailable"])
            return {"unavailable": r["unavailable"]}
        files = jpeg_files(args.dir)
        try:
            out["pillow"] = pillow_check(d, files)
        except Exception as e:  # Pillow or numpy missing
            out["pillow"] = {"unavailable": repr(e)}
        out["tf"] = run(tf_cmd(args, "tfcheck", T, ["--dump", d]), cpus)
        out["tf"].pop("stdout", None)
    p, t = out["pillow"], out["tf"]
    n = p.get("images") or t.get("images") or 0
    print("batches against references: weft's first %d images (seed %d, brightness deltas replicated), max |diff| "
          "after / 255:" % (n, SEED))
    if "unavailable" in p:
        print("  Pillow + numpy bilinear: unavailable (%s)" % p["unavailable"])
    else:
        print("  Pillow %s decode + numpy bilinear half-pixel (float64): %.3g: %s tolerance %.0e" % (
            p["pillow"], p["max_abs"], "within" if p["max_abs"] <= TOL_PILLOW else "OUTSIDE", TOL_PILLOW))
    if "unavailable" in t:
        print("  TensorFlow: unavailable (%s)" % t["unavailable"])
    else:
        print("  TensorFlow %s decode_jpeg(dct_method=INTEGER_ACCURATE) + tf.image.resize bilinear: %.3g: %s "
              "tolerance %.0e" % (t["version"], t["max_abs_integer_accurate"],
                                  "within" if t["max_abs_integer_accurate"] <= TOL_TF else "OUTSIDE", TOL_TF))
        print("  (TensorFlow with its default DCT, INTEGER_FAST, for information: %.3g = %.2f/255)" % (
            t["max_abs_default"], t["max_abs_default"] * 255))
    out["tolerance"] = {"pillow": TOL_PILLOW, "tf": TOL_TF}
    return out


def ints(s):
    v = [int(x) for x in s.split(",") if x]
    if not v or min(v) < 1:
        raise argparse.ArgumentTypeError("a comma-separated list of integers >= 1")
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--dir", help="the JPEG folder (default BUILD/bench-input/jpegs; made when incomplete)")
    ap.add_argument("--n", type=int, default=2048, help="JPEGs in the folder (default 2048)")
    ap.add_argument("--threads", type=ints, default=[1, 2])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=1, help="timed epochs per run (default 1)")
    ap.add_argument("--grid-parallel", type=ints, default=[1, 2])
    ap.add_argument("--grid-prefetch", type=ints, default=[1, 2, 4])
    ap.add_argument("--no-pin", dest="pin", action="store_false")
    ap.add_argument("--tf-python", default=os.path.join(ROOT, "build", "venv-bench", "bin", "python"))
    ap.add_argument("--json")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--worker", choices=("tf", "tfcheck"), help=argparse.SUPPRESS)
    ap.add_argument("--dump", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    if args.worker:
        args.threads = args.threads[0]
        return tf_worker(args) if args.worker == "tf" else tf_check_worker(args)
    if args.rounds < 1 or args.epochs < 1 or args.n < BATCH * CHECK_BATCHES:
        ap.error("--rounds and --epochs >= 1, --n >= %d" % (BATCH * CHECK_BATCHES))
    args.t0 = time.perf_counter()
    args.dir = os.path.abspath(args.dir or os.path.join(args.build, "bench-input", "jpegs"))
    args.exe = os.path.join(args.build, "bench", "bench_input")
    if not os.access(args.exe, os.X_OK):
        print("%s is not built (cmake --build %s --target bench_input)" % (args.exe, args.build))
        return 1
    p = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "make_jpegs.py"), args.dir, "--n", str(args.n)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    print(p.stdout.strip())
    if p.returncode != 0:
        return 1
    got = len(jpeg_files(args.dir))
    if got != args.n:
        print("%s holds %d JPEGs, not %d: use an empty folder" % (args.dir, got, args.n))
        return 1
    cpus_all = sorted(os.sched_getaffinity(0))
    print(cpu_line())
    try:
        with open("/proc/loadavg") as f:
            print("load average before: %s" % " ".join(f.read().split()[:3]))
    except OSError:
        pass
    doc = {"n": args.n, "threads": args.threads, "rounds": args.rounds, "epochs": args.epochs, "pin": args.pin}
    if not args.skip_check:
        doc["check"] = check(args, cpus_all)
        print()
    if not args.skip_speed:
        doc["speed"] = speed(args, cpus_all)
        print()
    if not args.skip_memory:
        doc["memory"] = memory(args, cpus_all)
    total = time.perf_counter() - args.t0
    print("(benchmark took %.0f s)" % total)
    doc["total_s"] = total
    out = args.json or os.path.join(args.build, "bench-input.json")
    try:
        with open(out, "w") as f:
            json.dump(doc, f, indent=1)
        print("results in %s" % out)
    except OSError as e:
        print("could not write %s: %s" % (out, e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
