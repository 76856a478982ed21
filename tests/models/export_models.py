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
import math
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


class Encoder(nn.Module):
    """A small transformer encoder written the way model code writes attention (BERT's, a ViT's): the
    heads split by view and transpose, QK^T / sqrt(d), an additive mask, softmax, PV, the heads merged;
    GELU and LayerNorm exported as their formulas at opset 14; a position table added before the first
    LayerNorm; an RMSNorm (LLaMA's) at the end. Layer 0 takes a constant mask (a band of -1e4), which
    weft's `attention` pass turns into one Attention node; layer 1 a mask computed from the input,
    which goes into the Softmax (`Softmax+Div+Add`) instead."""

    def __init__(self, seq=16, dim=64, heads=4, layers=2):
        super().__init__()
        self.h, self.d = heads, dim // heads
        self.pos = nn.Parameter(torch.randn(seq, dim) * 0.1)
        self.ln0 = nn.LayerNorm(dim)
        self.qkv = nn.ModuleList([nn.ModuleList([nn.Linear(dim, dim) for _ in range(3)]) for _ in range(layers)])
        self.o = nn.ModuleList([nn.Linear(dim, dim) for _ in range(layers)])
        self.ln1 = nn.ModuleList([nn.LayerNorm(dim) for _ in range(layers)])
        self.up = nn.ModuleList([nn.Linear(dim, 2 * dim) for _ in range(layers)])
        self.down = nn.ModuleList([nn.Linear(2 * dim, dim) for _ in range(layers)])
        self.ln2 = nn.ModuleList([nn.LayerNorm(dim) for _ in range(layers)])
        self.rms_w = nn.Parameter(torch.rand(dim) + 0.5)
        i = torch.arange(seq)
        self.register_buffer("band", torch.where((i[:, None] - i[None, :]).abs() <= 4, 0.0, -1e4))

    def heads(self, t):
        b, s, _ = t.shape
        return t.view(b, s, self.h, self.d).transpose(1, 2)

    def forward(self, x):
        x = self.ln0(x + self.pos)
        for k in range(len(self.o)):
            q, kk, v = (self.heads(lin(x)) for lin in self.qkv[k])
            scores = q @ kk.transpose(-1, -2) / math.sqrt(self.d)
            if k == 0:
                mask = self.band
            else:  # keys whose features sum below -2 are masked, per batch
                mask = (1.0 - (x.sum(-1) > -2.0).float())[:, None, None, :] * -1e4
            p = torch.softmax(scores + mask, dim=-1)
            a = (p @ v).transpose(1, 2).reshape(x.shape)
            x = self.ln1[k](x + self.o[k](a))
            x = self.ln2[k](x + self.down[k](nn.functional.gelu(self.up[k](x))))
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.rms_w


class Decoder(nn.Module):
    """A small GPT-style decoder: pre-LayerNorm blocks whose q, k and v come from one packed projection
    (Linear(dim, 3 dim) split in three, as GPT-2 and nanoGPT write it), a causal mask written as
    masked_fill(-inf) (nanoGPT) in layer 0 and as torch.where(causal, scores, finfo.min) (HuggingFace's
    GPT-2) in layer 1, GELU's tanh form, a final LayerNorm and a tied output projection."""

    def __init__(self, seq=16, dim=64, heads=4, layers=2):
        super().__init__()
        self.h, self.d = heads, dim // heads
        self.pos = nn.Parameter(torch.randn(seq, dim) * 0.1)
        self.ln1 = nn.ModuleList([nn.LayerNorm(dim) for _ in range(layers)])
        self.attn = nn.ModuleList([nn.Linear(dim, 3 * dim) for _ in range(layers)])
        self.proj = nn.ModuleList([nn.Linear(dim, dim) for _ in range(layers)])
        self.ln2 = nn.ModuleList([nn.LayerNorm(dim) for _ in range(layers)])
        self.up = nn.ModuleList([nn.Linear(dim, 4 * dim) for _ in range(layers)])
        self.down = nn.ModuleList([nn.Linear(4 * dim, dim) for _ in range(layers)])
        self.lnf = nn.LayerNorm(dim)
        self.register_buffer("causal", torch.tril(torch.ones(seq, seq, dtype=torch.bool)).view(1, 1, seq, seq))

    def forward(self, x):
        b, t, c = x.shape
        x = x + self.pos[:t]
        for k in range(len(self.attn)):
            q, kk, v = self.attn[k](self.ln1[k](x)).split(c, dim=2)
            q, kk, v = (z.view(b, t, self.h, self.d).transpose(1, 2) for z in (q, kk, v))
            s = (q @ kk.transpose(-2, -1)) * (1.0 / math.sqrt(self.d))
            allowed = self.causal[:, :, :t, :t]
            if k == 0:
                s = s.masked_fill(~allowed, float("-inf"))
            else:
                s = torch.where(allowed, s, torch.tensor(torch.finfo(s.dtype).min))
            a = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).contiguous().view(b, t, c)
            x = x + self.proj[k](a)
            x = x + self.down[k](nn.functional.gelu(self.up[k](self.ln2[k](x)), approximate="tanh"))
        return self.lnf(x)


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
    if kind == "encoder":
        return Encoder()
    if kind == "decoder":
        return Decoder()
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
    ("encoder", "encoder", 14, (16, 64), False),
    ("encoder_dynamic", "encoder", 14, (16, 64), False),
    ("decoder", "decoder", 14, (16, 64), False),
    ("decoder_dynamic", "decoder", 14, (16, 64), False),
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
        # "encoder" and "decoder" are exported with static shapes, the others with a dynamic batch, where
        # PyTorch writes the heads' view as Reshape(t, Concat(Shape(t)[0], Shape(t)[1], H, D)): weft's
        # attention pass reads both forms.
        dyn = {} if name in ("encoder", "decoder") else {"input": {0: "batch"}, "output": {0: "batch"}}
        torch.onnx.export(model, x, onnx_path, opset_version=opset, do_constant_folding=True, training=training,
                          input_names=["input"], output_names=["output"], dynamic_axes=dyn)
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
