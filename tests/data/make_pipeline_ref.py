"""Reference for tests/test_pipeline.c's image pipeline: the seeds' map (read_file -> decode_jpeg(3) ->
resize -> random brightness -> flip -> /255) computed independently with Pillow and numpy.

make_pipeline_ref.py OUTDIR N H W SEED MAX_DELTA writes
    OUTDIR/img_%03d.jpg   N RGB JPEGs (quality 90, 4:2:0, sizes vary around 40x30) written by Pillow
    OUTDIR/ref.npy        f32 [N, H, W, 3]: each file in sorted order, decoded by Pillow (libjpeg-turbo,
                          the same ISLOW IDCT weft uses), resized to H x W with bilinear interpolation and
                          half-pixel centres (TensorFlow's tf.image.resize, ONNX Resize linear/half_pixel)
                          in float64, then brightness delta (2u - 1) * MAX_DELTA added, flipped left-right
                          when the second image draw says so, divided by 255; u from weft's documented
                          counter-based generator (src/ops/kutil_random.h) replicated below, with the
                          map's seed input {SEED, i} for element i of iteration 0.
"""
import os
import sys

import numpy as np
from PIL import Image

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
COUNTER = 0xD1B54A32D192ED03


def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def rng_key(seed, counter):
    return mix((mix((seed + GOLDEN) & M64) + counter * COUNTER) & M64)


def rng_f32(key, i):
    bits = mix((key + (i + 1) * GOLDEN) & M64)
    return float(bits >> 40) * 2.0 ** -24


def resize_bilinear(a, h, w):
    """a [H, W, C] float64 -> [h, w, C], half-pixel centres, edges clamped (no antialiasing)."""
    H, W = a.shape[:2]

    def axis(n_in, n_out):
        x = (np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5
        x = np.clip(x, 0, n_in - 1)
        lo = np.floor(x).astype(np.int64)
        hi = np.minimum(lo + 1, n_in - 1)
        return lo, hi, x - lo

    y0, y1, fy = axis(H, h)
    x0, x1, fx = axis(W, w)
    top = a[y0][:, x0] * (1 - fx)[None, :, None] + a[y0][:, x1] * fx[None, :, None]
    bot = a[y1][:, x0] * (1 - fx)[None, :, None] + a[y1][:, x1] * fx[None, :, None]
    return top * (1 - fy)[:, None, None] + bot * fy[:, None, None]


def main(out, n, h, w, seed, max_delta):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(5)
    refs = []
    for i in range(n):
        H, W = 30 + i % 5, 40 + (i * 3) % 7
        y, x = np.mgrid[0:H, 0:W]
        a = np.stack([x * 255 // (W - 1), y * 255 // (H - 1), (x * y + 17 * i) % 256], -1)
        a = np.clip(a + rng.integers(-15, 16, size=a.shape), 0, 255).astype(np.uint8)
        path = os.path.join(out, "img_%03d.jpg" % i)
        Image.fromarray(a, "RGB").save(path, quality=90)
    for i, name in enumerate(sorted(f for f in os.listdir(out) if f.endswith(".jpg"))):
        dec = np.asarray(Image.open(os.path.join(out, name)).convert("RGB")).astype(np.float64)
        r = resize_bilinear(dec, h, w)
        # brightness then flip, each op drawing from the same key (draw 0): the graph feeds both the
        # same seed tensor, so they see the same u; the flip compares it with 0.5
        key = rng_key(seed, i)
        u = rng_f32(key, 0)
        delta = np.float32((2 * u - 1) * max_delta)
        r = r.astype(np.float32) + delta
        if u < 0.5:
            r = r[:, ::-1]
        refs.append(r / np.float32(255))
    np.save(os.path.join(out, "ref.npy"), np.ascontiguousarray(np.stack(refs).astype(np.float32)))


if __name__ == "__main__":
    o, n, h, w, s, d = sys.argv[1:7]
    main(o, int(n), int(h), int(w), int(s), float(d))
