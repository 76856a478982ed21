#!/usr/bin/python3
"""Exports real PyTorch models to ONNX for weft's model tests, with an input and PyTorch's output for each.

usage: export_models.py OUTDIR [--only NAME[,NAME...]] [--batch N] [--force]

Each model is built from fixed seeds with random weights, put in eval mode and written as
OUTDIR/NAME/model.onnx, OUTDIR/NAME/input.npy and OUTDIR/NAME/expected.npy (PyTorch's output, computed
here, never by weft), plus OUTDIR/NAME/info.txt (input and output names). OUTDIR/models.txt lists the
model folders. Work is skipped for a model whose files exist and are newer than this script.
Run with Debian's /usr/bin/python3 (torch 1.13, torchvision 0.14).
"""
import argparse
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.abspath(__file__)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(784, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(self.flatten(x))))


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.ReLU(),
            nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))

    def forward(self, x):
        return self.classifier(self.features(x))


def randomize_batchnorm(model, gen):
    # Fresh BatchNorm layers hold mean 0, var 1, weight 1, bias 0, which makes them almost an
    # identity; non-trivial statistics make the exported (folded or not) normalization matter.
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(c, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(c, generator=gen) + 0.5)
            m.bias.data.copy_(torch.randn(c, generator=gen) * 0.1)


def build(kind):
    import torchvision
    if kind == "mlp":
        return MLP()
    if kind == "lenet5":
        return LeNet5()
    if kind == "resnet18":
        return torchvision.models.resnet18(weights=None)
    if kind == "mobilenet_v2":
        return torchvision.models.mobilenet_v2(weights=None)
    raise ValueError(kind)


# name, model kind, opset, input shape (without batch), keep BatchNormalization nodes.
# The exporter folds BatchNormalization into Conv in eval mode; the opset-17 resnet18 is exported with
# TrainingMode.PRESERVE (the model is still in eval mode) so that BatchNormalization reaches the importer.
MODELS = [
    ("mlp", "mlp", 13, (1, 28, 28), False),
    ("lenet5", "lenet5", 13, (1, 28, 28), False),
    ("resnet18", "resnet18", 13, (3, 224, 224), False),
    ("resnet18_opset17", "resnet18", 17, (3, 224, 224), True),
    ("mobilenet_v2", "mobilenet_v2", 13, (3, 224, 224), False),
]


def up_to_date(folder):
    files = [os.path.join(folder, f) for f in ("model.onnx", "input.npy", "expected.npy", "info.txt")]
    if not all(os.path.exists(f) for f in files):
        return False
    t = os.path.getmtime(HERE)
    return all(os.path.getmtime(f) > t for f in files)


def make_model(kind, seed=0):
    torch.manual_seed(seed)
    model = build(kind)
    with torch.no_grad():
        randomize_batchnorm(model, torch.Generator().manual_seed(seed + 1))
    return model.eval()


def export_one(outdir, name, kind, opset, shape, keep_bn, batch):
    folder = os.path.join(outdir, name)
    os.makedirs(folder, exist_ok=True)
    model = make_model(kind)
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn((batch,) + tuple(shape), generator=gen)
    with torch.no_grad():
        y = model(x)
    onnx_path = os.path.join(folder, "model.onnx")
    training = torch.onnx.TrainingMode.PRESERVE if keep_bn else torch.onnx.TrainingMode.EVAL
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, x, onnx_path, opset_version=opset, do_constant_folding=True, training=training,
                          input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    np.save(os.path.join(folder, "input.npy"), x.numpy())
    np.save(os.path.join(folder, "expected.npy"), y.numpy())
    # Written last: its presence with a fresh mtime marks a complete export.
    with open(os.path.join(folder, "info.txt"), "w") as f:
        f.write("input input %s\noutput output %s\nopset %d\n" % (
            "x".join(map(str, x.shape)), "x".join(map(str, y.shape)), opset))
    return folder


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    only = set(filter(None, args.only.split(",")))
    os.makedirs(args.outdir, exist_ok=True)
    names = []
    for name, kind, opset, shape, keep_bn in MODELS:
        if only and name not in only:
            continue
        names.append(name)
        folder = os.path.join(args.outdir, name)
        if not args.force and up_to_date(folder):
            continue
        export_one(args.outdir, name, kind, opset, shape, keep_bn, args.batch)
        print("exported %s (opset %d)" % (name, opset), file=sys.stderr)
    with open(os.path.join(args.outdir, "models.txt"), "w") as f:
        f.write("".join(n + "\n" for n in names))


if __name__ == "__main__":
    main()
