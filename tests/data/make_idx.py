"""Reference data for tests/test_data.c, made with numpy and Python's gzip at test time.

make_idx.py OUTDIR           IDX files of every IDX type (plain and .gz) with the same arrays as .npy, a small
                             image/label set, and the expected shuffle orders of weft's documented generator
make_idx.py fashion OUTDIR   Fashion-MNIST's test images and labels as .npy, read with gzip + numpy
"""
import gzip
import os
import sys

import numpy as np

M64 = (1 << 64) - 1
IDX_CODES = {"u8": (0x08, ">u1"), "i8": (0x09, ">i1"), "i16": (0x0B, ">i2"), "i32": (0x0C, ">i4"),
             "f32": (0x0D, ">f4"), "f64": (0x0E, ">f8")}


def idx_bytes(a, code):
    head = bytes([0, 0, code, a.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in a.shape)
    return head + a.tobytes()


def write_idx(out, name, a, code, be):
    data = idx_bytes(a.astype(be), code)
    with open(os.path.join(out, name + ".idx"), "wb") as f:
        f.write(data)
    with gzip.open(os.path.join(out, name + ".idx.gz"), "wb") as f:
        f.write(data)
    np.save(os.path.join(out, name + ".npy"), a.astype(be.replace(">", "<")))


# splitmix64 and Fisher-Yates with rejection sampling, as weft's header documents them; written here
# from the published algorithm so the test compares weft against an independent implementation.
def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def order(seed, epoch, n):
    _, h = splitmix64(seed)
    state = (h + epoch) & M64
    perm = list(range(n))
    for i in range(n - 1, 0, -1):
        bound = i + 1
        limit = M64 - M64 % bound
        while True:
            state, r = splitmix64(state)
            if r < limit:
                break
        j = r % bound
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def main():
    if sys.argv[1] == "fashion":
        out = sys.argv[2]
        d = "/usr/share/datasets/fashion-mnist"
        with gzip.open(os.path.join(d, "t10k-images-idx3-ubyte.gz")) as f:
            raw = f.read()
        np.save(os.path.join(out, "fashion_t10k_images.npy"), np.frombuffer(raw, np.uint8, offset=16).reshape(-1, 28, 28))
        with gzip.open(os.path.join(d, "t10k-labels-idx1-ubyte.gz")) as f:
            raw = f.read()
        np.save(os.path.join(out, "fashion_t10k_labels.npy"), np.frombuffer(raw, np.uint8, offset=8))
        return
    out = sys.argv[1]
    rng = np.random.default_rng(0)
    arrays = {
        "u8": rng.integers(0, 256, (3, 4, 5)),
        "i8": rng.integers(-128, 128, (7,)),
        "i16": rng.integers(-32768, 32768, (2, 9)),
        "i32": rng.integers(-2**31, 2**31, (4, 3)),
        "f32": rng.standard_normal((5, 2)) * 1e3,
        "f64": rng.standard_normal((2, 2, 2)) * 1e-3,
    }
    for name, a in arrays.items():
        code, be = IDX_CODES[name]
        write_idx(out, "a_" + name, a, code, be)
    images = rng.integers(0, 256, (10, 4, 3)).astype(np.uint8)
    labels = np.arange(10, dtype=np.uint8)
    write_idx(out, "images", images, 0x08, ">u1")
    write_idx(out, "labels", labels, 0x08, ">u1")
    write_idx(out, "labels9", labels[:9], 0x08, ">u1")
    np.save(os.path.join(out, "images_scaled.npy"), images.astype(np.float32) / np.float32(255))
    with open(os.path.join(out, "shuffle_ref.txt"), "w") as f:
        for seed, epoch, n in [(7, 0, 10), (7, 1, 10), (8, 0, 10), (42, 0, 1000), (M64, 1, 5), (3, 0, 1)]:
            f.write("%d %d %d %s\n" % (seed, epoch, n, " ".join(map(str, order(seed, epoch, n)))))


main()
