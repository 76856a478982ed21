#!/usr/bin/python3
"""NaN and Inf through whole PyTorch-exported models on each device (issue 12): weft must give PyTorch's
NaN count, and PyTorch's values everywhere else.

usage: nan_models.py [--build DIR] [--devices CPU:0,OPENCL:0,GPU:0] [--rtol R] [--atol A]

Exports (at test time, into BUILD/nan-models, skipped when newer than this script) three models with
torch.onnx at opset 17, from fixed seeds:
  conv_relu   Conv2d(3, 8, 3, padding=1) -> ReLU (the model of the issue: one NaN pixel gives 72 NaN)
  small_cnn   Conv -> ReLU -> MaxPool -> Conv -> ReLU -> MaxPool -> Flatten -> Linear -> ReLU -> Linear
  mixed_cnn   Conv -> LeakyReLU -> AvgPool -> Conv -> ReLU6 (Clip) -> AdaptiveMaxPool(1) -> Flatten ->
              Linear -> Sigmoid -> Linear -> Softmax
each with four inputs: clean, one NaN pixel, all NaN, and one +Inf and one -Inf pixel. Every (model,
input, device) runs `weft run MODEL --input input=X.npy --device DEV --strict-placement` and compares
with PyTorch's output: the NaN positions exactly, +-Inf exactly, the rest with numpy.allclose.
Prints one PASS/FAIL line each with the NaN counts (weft vs PyTorch), SKIP for a device weft does not
list, and ends with "N passed, N failed"; exits 1 if anything failed. Run with Debian's /usr/bin/python3.
For the emulated GPU:0 set WEFT_PLUGIN_PATH=BUILD/cudaemu:BUILD (BUILD alone gives OPENCL:0).
"""
import argparse
import os
import subprocess
import sys
import warnings

import numpy as np

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def build_models():
    import torch
    import torch.nn as nn

    class ConvRelu(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)

        def forward(self, x):
            return torch.relu(self.conv(x))

    class SmallCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.f = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                   nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                   nn.Flatten(), nn.Linear(16 * 4 * 4, 32), nn.ReLU(), nn.Linear(32, 10))

        def forward(self, x):
            return self.f(x)

    class MixedCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.f = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.LeakyReLU(0.1), nn.AvgPool2d(2),
                                   nn.Conv2d(8, 16, 3, padding=1), nn.ReLU6(), nn.AdaptiveMaxPool2d(1),
                                   nn.Flatten(), nn.Linear(16, 12), nn.Sigmoid(), nn.Linear(12, 5),
                                   nn.Softmax(dim=1))

        def forward(self, x):
            return self.f(x)

    return [("conv_relu", ConvRelu, (1, 3, 6, 6)), ("small_cnn", SmallCNN, (2, 3, 16, 16)),
            ("mixed_cnn", MixedCNN, (2, 3, 16, 16))]


def inputs_for(shape, gen):
    import torch
    x = torch.randn(shape, generator=gen)
    one = x.clone()
    one[0, 0, shape[2] // 2 - 1, shape[3] // 2] = float("nan")
    alln = torch.full(shape, float("nan"))
    inf = x.clone()
    inf[0, 1, 1, 1] = float("inf")
    inf[-1, 2, shape[2] - 2, 0] = float("-inf")
    return [("clean", x), ("one_nan", one), ("all_nan", alln), ("inf", inf)]


def export(outdir):
    """Writes OUTDIR/MODEL/model.onnx and OUTDIR/MODEL/INPUT.npy + INPUT.expected.npy; returns the list of
    (model, [input names])."""
    stamp = os.path.join(outdir, "done.txt")
    if os.path.exists(stamp) and os.path.getmtime(stamp) > os.path.getmtime(HERE):
        with open(stamp) as f:
            return [(l.split()[0], l.split()[1:]) for l in f if l.strip()]
    import torch
    torch.manual_seed(0)
    done = []
    for idx, (name, cls, shape) in enumerate(build_models()):
        folder = os.path.join(outdir, name)
        os.makedirs(folder, exist_ok=True)
        torch.manual_seed(7 + idx)
        model = cls().eval()
        gen = torch.Generator().manual_seed(1234)
        ins = inputs_for(shape, gen)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, ins[0][1], os.path.join(folder, "model.onnx"), opset_version=17,
                              input_names=["input"], output_names=["output"])
        for iname, x in ins:
            with torch.no_grad():
                y = model(x)
            np.save(os.path.join(folder, iname + ".npy"), x.numpy())
            np.save(os.path.join(folder, iname + ".expected.npy"), y.numpy())
        done.append((name, [i for i, _ in ins]))
    with open(stamp, "w") as f:
        for name, ins in done:
            f.write("%s %s\n" % (name, " ".join(ins)))
    return done


def compare(got, want, rtol, atol):
    if got.shape != want.shape or got.dtype != want.dtype:
        return False, "shape/dtype %s %s, PyTorch %s %s" % (got.shape, got.dtype, want.shape, want.dtype)
    gn, wn = np.isnan(got), np.isnan(want)
    msg = "NaN %d (PyTorch %d)" % (int(gn.sum()), int(wn.sum()))
    if not np.array_equal(gn, wn):
        return False, msg + ", at different positions"
    g, w = got[~wn].astype(np.float64), want[~wn].astype(np.float64)
    if not np.array_equal(np.isinf(g), np.isinf(w)) or not np.array_equal(g[np.isinf(w)], w[np.isinf(w)]):
        return False, msg + ", Inf differs: weft %d, PyTorch %d" % (int(np.isinf(g).sum()), int(np.isinf(w).sum()))
    fin = np.isfinite(w)
    err = float(np.abs(g[fin] - w[fin]).max()) if fin.any() else 0.0
    msg += ", Inf %d, max abs err %.3g" % (int(np.isinf(w).sum()), err)
    return bool(np.allclose(g[fin], w[fin], rtol=rtol, atol=atol)), msg


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--devices", default="CPU:0,OPENCL:0,GPU:0")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    args = ap.parse_args()
    weft = os.path.abspath(os.path.join(args.build, "weft"))
    outdir = os.path.join(args.build, "nan-models")
    passed = failed = 0
    try:
        models = export(outdir)
    except Exception as e:  # no torch / onnx export failure: a failure, not a silent pass
        print("FAIL export: %s" % e)
        print("0 passed, 1 failed")
        return 1
    for dev in [d for d in args.devices.split(",") if d]:
        r = subprocess.run([weft, "devices", "--match", dev], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        if r.returncode != 0 or dev.split(":")[0] not in r.stdout:
            print("SKIP %s: weft devices does not list it (%s)" % (dev, r.stdout.strip().splitlines()[-1:]))
            continue
        for name, ins in models:
            folder = os.path.join(outdir, name)
            for iname in ins:
                od = os.path.join(folder, "out-%s-%s" % (iname, dev.replace(":", "_")))
                os.makedirs(od, exist_ok=True)
                for f in os.listdir(od):
                    os.remove(os.path.join(od, f))
                cmd = [weft, "run", os.path.join(folder, "model.onnx"), "--input",
                       "input=" + os.path.join(folder, iname + ".npy"), "--output-dir", od, "--iterations", "1",
                       "--device", dev, "--strict-placement"]
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                                   timeout=600)
                label = "%s/%s on %s" % (name, iname, dev)
                if p.returncode != 0:
                    tail = "\n".join("    " + l for l in p.stdout.strip().splitlines()[-6:])
                    print("FAIL %s: weft run exited %d:\n%s" % (label, p.returncode, tail), flush=True)
                    failed += 1
                    continue
                with warnings.catch_warnings():
                    ok, msg = compare(np.load(os.path.join(od, "output.npy")),
                                      np.load(os.path.join(folder, iname + ".expected.npy")), args.rtol, args.atol)
                print("%s %s: %s" % ("PASS" if ok else "FAIL", label, msg), flush=True)
                passed += ok
                failed += not ok
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
