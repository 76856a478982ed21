#!/usr/bin/python3
"""Writes the input-pipeline benchmark's JPEG folder: N (default 2048) Fashion-MNIST training images,
enlarged, tinted per class and encoded by Pillow (libjpeg-turbo) at quality 90.

usage: make_jpegs.py DIR [--n N] [--size S] [--quality Q]

Image i is training image i of /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist), named
DIR/img_%05d.jpg so the bytewise sorted order (list_files's) is the dataset order; DIR/labels.txt has
the labels in that order.

Size: 28x28 is enlarged to S x S (default 256) with Pillow's bicubic filter. 256 is the short side that
ImageNet-style pipelines commonly store before taking 224x224, so the pipeline's resize to 224 is a mild
downscale, as in practice, and decoding (65,536 pixels a file, ~10 KB) costs what a small real photo
costs; larger files would only make the benchmark longer (2,048 files at 256 take ~20 MB).
Colour: the gray image g in [0, 1] blends a background and a foreground colour picked per class, so the
three channels differ and the JPEG's chroma (4:2:0, Pillow's default at quality 90) carries something.

Idempotent: DIR/manifest.txt records N, S, Q and the source; when it matches and every file is there,
nothing is written; otherwise the images are written again and other *.jpg files in DIR are removed
(the pipeline lists DIR/*.jpg). Files are written to a temporary name and renamed, the manifest last, so an
interrupted run is redone next time.
"""
import argparse
import gzip
import os
import sys

DATA = "/usr/share/datasets/fashion-mnist"

# (background, foreground) RGB per class: T-shirt, Trouser, Pullover, Dress, Coat, Sandal, Shirt, Sneaker,
# Bag, Ankle boot
PALETTE = [((20, 24, 60), (250, 210, 120)), ((60, 20, 20), (120, 220, 250)), ((10, 50, 20), (240, 160, 200)),
           ((40, 40, 40), (255, 120, 90)), ((70, 60, 20), (150, 200, 255)), ((15, 15, 45), (200, 255, 150)),
           ((50, 10, 50), (255, 240, 180)), ((20, 55, 55), (255, 180, 60)), ((45, 30, 10), (170, 170, 255)),
           ((5, 35, 65), (255, 255, 255))]


def load_idx(name):
    """An unsigned-byte idx file (src/data/idx.c's format) as a numpy array."""
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
    return np.frombuffer(raw, dtype=np.uint8, count=count, offset=4 + 4 * ndim).reshape(dims)


def manifest_text(n, size, quality):
    return "n %d\nsize %d\nquality %d\nsource %s/train-images-idx3-ubyte.gz\n" % (n, size, quality, DATA)


def complete(d, n, size, quality):
    try:
        with open(os.path.join(d, "manifest.txt")) as f:
            if f.read() != manifest_text(n, size, quality):
                return False
    except OSError:
        return False
    return all(os.path.isfile(os.path.join(d, "img_%05d.jpg" % i)) for i in range(n))


def write_atomic(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--quality", type=int, default=90)
    args = ap.parse_args()
    if args.n < 1 or args.n > 60000 or args.size < 28 or not 1 <= args.quality <= 100:
        ap.error("--n 1..60000, --size >= 28, --quality 1..100")
    if complete(args.dir, args.n, args.size, args.quality):
        print("%s: %d JPEGs already there" % (args.dir, args.n))
        return 0
    import io
    import numpy as np
    from PIL import Image, features
    os.makedirs(args.dir, exist_ok=True)
    try:
        os.remove(os.path.join(args.dir, "manifest.txt"))
    except OSError:
        pass
    xs = load_idx("train-images-idx3-ubyte.gz")[:args.n]
    ys = load_idx("train-labels-idx1-ubyte.gz")[:args.n]
    pal = np.array(PALETTE, dtype=np.float32)  # [10, 2, 3]
    total = 0
    for i in range(args.n):
        big = Image.fromarray(xs[i]).resize((args.size, args.size), Image.BICUBIC)
        g = np.asarray(big, dtype=np.float32)[:, :, None] / 255.0
        bg, fg = pal[ys[i], 0], pal[ys[i], 1]
        rgb = np.clip(np.rint(bg * (1.0 - g) + fg * g), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(rgb, "RGB").save(buf, format="JPEG", quality=args.quality)
        total += buf.tell()
        write_atomic(os.path.join(args.dir, "img_%05d.jpg" % i), buf.getvalue())
    # files of an earlier, larger folder would join list_files's pattern
    keep = {"img_%05d.jpg" % i for i in range(args.n)}
    for name in os.listdir(args.dir):
        if name.endswith(".jpg") and name not in keep:
            os.remove(os.path.join(args.dir, name))
    write_atomic(os.path.join(args.dir, "labels.txt"), "".join("%d\n" % y for y in ys).encode())
    write_atomic(os.path.join(args.dir, "manifest.txt"), manifest_text(args.n, args.size, args.quality).encode())
    print("%s: wrote %d JPEGs of %dx%d, quality %d, %.1f MB (Pillow %s, libjpeg-turbo %s)" % (
        args.dir, args.n, args.size, args.size, args.quality, total / 1e6, Image.__version__,
        features.check_feature("libjpeg_turbo")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
