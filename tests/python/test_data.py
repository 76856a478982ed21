"""tf.data over weft's C pipelines, against Python/numpy references."""
import os
import struct

import numpy as np
import pytest

import weft as tf


def as_list(ds):
    return [v.tolist() if isinstance(v, np.ndarray) else v for v in ds.as_numpy_iterator()]


def test_from_tensor_slices_tensor_tuple_dict():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    y = np.array([1, 0, 1, 1], np.int64)
    ds = tf.data.Dataset.from_tensor_slices(x)
    rows = list(ds.as_numpy_iterator())
    assert len(rows) == 4 and len(ds) == 4
    np.testing.assert_array_equal(np.stack(rows), x)
    pairs = list(tf.data.Dataset.from_tensor_slices((x, y)).as_numpy_iterator())
    assert [int(p[1]) for p in pairs] == y.tolist()
    np.testing.assert_array_equal(np.stack([p[0] for p in pairs]), x)
    dicts = list(tf.data.Dataset.from_tensor_slices({"a": x, "b": y}))
    assert set(dicts[0]) == {"a", "b"}
    assert dicts[2]["b"].dtype == tf.int64
    np.testing.assert_array_equal(dicts[2]["a"].numpy(), x[2])
    spec = tf.data.Dataset.from_tensor_slices({"a": x, "b": y}).element_spec
    assert spec["a"].shape == (3,) and spec["a"].dtype == tf.float32


def test_map_python_fn_traced():
    calls = []

    def fn(a, b):
        calls.append(1)
        return a * 2.0 + tf.cast(b, tf.float32), tf.reduce_sum(a)

    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    y = np.arange(4, dtype=np.int32)
    out = list(tf.data.Dataset.from_tensor_slices((x, y)).map(fn, num_parallel_calls=tf.data.AUTOTUNE)
               .as_numpy_iterator())
    assert len(calls) == 1  # traced once, run in C per element
    np.testing.assert_array_equal(np.stack([o[0] for o in out]), x * 2 + y[:, None])
    np.testing.assert_array_equal([o[1] for o in out], x.sum(axis=1))


def test_map_dict_structure():
    ds = tf.data.Dataset.from_tensor_slices({"img": np.ones((3, 2), np.float32), "label": np.arange(3)})
    ds = ds.map(lambda d: {"x": d["img"] * 3.0, "y": d["label"] + 1})
    out = list(ds.as_numpy_iterator())
    assert [int(o["y"]) for o in out] == [1, 2, 3]
    np.testing.assert_array_equal(out[0]["x"], [3.0, 3.0])


@pytest.mark.parametrize("drop", [False, True])
def test_batch(drop):
    ds = tf.data.Dataset.range(10).batch(3, drop_remainder=drop)
    got = as_list(ds)
    want = [list(range(i, min(i + 3, 10))) for i in range(0, 10, 3)]
    if drop:
        want = want[:-1]
    assert got == want
    assert ds.element_spec.shape.as_list() == [3 if drop else None]


def test_range_and_dtype():
    assert as_list(tf.data.Dataset.range(2, 11, 3)) == [2, 5, 8]
    d = tf.data.Dataset.range(3, output_type=tf.int32)
    assert next(iter(d)).dtype == tf.int32


def test_shuffle_is_permutation_and_seeded():
    a = as_list(tf.data.Dataset.range(100).shuffle(100, seed=3))
    b = as_list(tf.data.Dataset.range(100).shuffle(100, seed=3))
    assert sorted(a) == list(range(100))
    assert a != list(range(100))
    assert a == b
    c = as_list(tf.data.Dataset.range(100).shuffle(10, seed=4))
    assert sorted(c) == list(range(100))


def test_repeat_take_skip_filter_zip():
    r = tf.data.Dataset.range(5)
    assert as_list(r.repeat(2)) == list(range(5)) * 2
    assert as_list(r.repeat().take(12)) == (list(range(5)) * 3)[:12]
    assert as_list(r.skip(2)) == [2, 3, 4]
    assert as_list(r.take(0)) == []
    assert as_list(r.filter(lambda v: v % 2 == 0)) == [0, 2, 4]
    z = tf.data.Dataset.zip((r, r.map(lambda v: v * 10)))
    assert [(int(a), int(b)) for a, b in z.as_numpy_iterator()] == [(i, 10 * i) for i in range(5)]
    assert len(r.skip(2)) == 3


def test_cache_and_prefetch(tmp_path):
    calls = []
    ds = tf.data.Dataset.range(6).map(lambda v: v * v).cache().prefetch(tf.data.AUTOTUNE)
    for _ in range(2):
        assert as_list(ds) == [i * i for i in range(6)]
    fcache = tf.data.Dataset.range(4).cache(str(tmp_path / "c")).prefetch(2)
    assert as_list(fcache) == [0, 1, 2, 3]
    assert as_list(fcache) == [0, 1, 2, 3]
    del calls


def test_empty_and_large():
    assert as_list(tf.data.Dataset.from_tensor_slices(np.zeros((0, 2), np.float32))) == []
    n = 1 << 20
    x = np.arange(n, dtype=np.int32)
    got = np.concatenate(list(tf.data.Dataset.from_tensor_slices(x).batch(1 << 16).as_numpy_iterator()))
    np.testing.assert_array_equal(got, x)


# ---- files ------------------------------------------------------------------------------------------

def _bilinear_half_pixel(img, oh, ow):
    """Reference bilinear resize with half-pixel centres (TF2's tf.image.resize default), float64."""
    ih, iw = img.shape[:2]
    img = img.astype(np.float64)

    def coords(o, i):
        c = (np.arange(o) + 0.5) * (i / o) - 0.5
        c = np.clip(c, 0, i - 1)
        lo = np.floor(c).astype(int)
        hi = np.minimum(lo + 1, i - 1)
        return lo, hi, c - lo

    y0, y1, fy = coords(oh, ih)
    x0, x1, fx = coords(ow, iw)
    top = img[y0][:, x0] * (1 - fx)[None, :, None] + img[y0][:, x1] * fx[None, :, None]
    bot = img[y1][:, x0] * (1 - fx)[None, :, None] + img[y1][:, x1] * fx[None, :, None]
    return top * (1 - fy)[:, None, None] + bot * fy[:, None, None]


def _write_jpegs(tmp_path, n=4):
    Image = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        yy, xx = np.mgrid[0:24, 0:32]
        img = np.stack([(xx * 8 + i * 10) % 256, (yy * 10) % 256, ((xx + yy) * 4) % 256], -1).astype(np.uint8)
        img = np.clip(img.astype(int) + rng.integers(-3, 4, img.shape), 0, 255).astype(np.uint8)
        p = tmp_path / ("img%d.jpg" % i)
        Image.fromarray(img).save(p, quality=95)
        paths.append(str(p))
    return paths


def _pil_decode(path):
    from PIL import Image
    return np.asarray(Image.open(path).convert("RGB"))


def test_decode_jpeg_matches_pillow(tmp_path):
    paths = _write_jpegs(tmp_path, 1)
    got = tf.io.decode_jpeg(tf.io.read_file(paths[0]), channels=3).numpy()
    ref = _pil_decode(paths[0])
    assert got.dtype == np.uint8 and got.shape == ref.shape == (24, 32, 3)
    # libjpeg implementations differ in IDCT and chroma upsampling: allow a few levels, most pixels exact-ish
    diff = np.abs(got.astype(int) - ref.astype(int))
    assert diff.max() <= 8, diff.max()
    assert diff.mean() < 1.5


def test_resize_bilinear_matches_reference():
    img = np.random.default_rng(1).integers(0, 256, (7, 9, 3)).astype(np.uint8)
    for oh, ow in [(14, 18), (3, 4), (7, 9), (10, 5)]:
        got = tf.image.resize(img, [oh, ow]).numpy()
        assert got.dtype == np.float32 and got.shape == (oh, ow, 3)
        np.testing.assert_allclose(got, _bilinear_half_pixel(img, oh, ow), rtol=1e-5, atol=1e-3)


def test_resize_vs_tensorflow():
    rtf = pytest.importorskip("tensorflow")
    img = np.random.default_rng(2).random((2, 8, 6, 3)).astype(np.float32)
    for m in ("bilinear", "nearest"):
        np.testing.assert_allclose(tf.image.resize(img, [5, 11], method=m).numpy(),
                                   rtf.image.resize(img, [5, 11], method=m).numpy(), rtol=1e-5, atol=1e-5)


def test_image_pipeline_list_files(tmp_path):
    paths = _write_jpegs(tmp_path, 4)
    max_delta = 0.1

    def load(path):
        img = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        img = tf.image.resize(img, [12, 16]) / 255.0
        return tf.image.random_brightness(img, max_delta), path

    ds = tf.data.Dataset.list_files(str(tmp_path / "*.jpg"), shuffle=False).map(load).batch(2)
    seen = []
    for imgs, names in ds.as_numpy_iterator():
        assert imgs.shape[1:] == (12, 16, 3) and imgs.dtype == np.float32
        for img, name in zip(imgs, names):
            name = name.decode()
            seen.append(name)
            ref = _bilinear_half_pixel(_pil_decode(name), 12, 16) / 255.0
            # random_brightness adds one delta in [-max_delta, max_delta) to every pixel (no clipping, as TF)
            delta = img.astype(np.float64) - ref
            d = np.median(delta)
            assert -max_delta - 1e-6 <= d <= max_delta + 1e-6
            # decoder differences (<= 8 levels) survive bilinear averaging at most as 8/255
            assert np.abs(delta - d).max() <= 8 / 255 + 1e-5
    assert sorted(seen) == sorted(paths)


def test_list_files_shuffle_and_missing(tmp_path):
    for i in range(5):
        (tmp_path / ("f%d.txt" % i)).write_bytes(b"x")
    names = [n.decode() for n in tf.data.Dataset.list_files(str(tmp_path / "*.txt"), shuffle=True, seed=1)
             .as_numpy_iterator()]
    assert sorted(names) == sorted(str(tmp_path / ("f%d.txt" % i)) for i in range(5))
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.data.Dataset.list_files(str(tmp_path / "*.nothing"))


# ---- TFRecord --------------------------------------------------------------------------------------

def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_T = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(c):
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def write_tfrecord(path, records):
    with open(path, "wb") as f:
        for r in records:
            ln = struct.pack("<Q", len(r))
            f.write(ln + struct.pack("<I", masked(crc32c(ln))) + r + struct.pack("<I", masked(crc32c(r))))


def test_crc32c_known_vector():
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value of CRC-32C


def test_tfrecord_handwritten(tmp_path):
    recs = [b"", b"hello", bytes(range(256)) * 10, b"\x00" * 3]
    p1, p2 = str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")
    write_tfrecord(p1, recs)
    write_tfrecord(p2, recs[::-1])
    got = list(tf.data.TFRecordDataset([p1, p2]).as_numpy_iterator())
    assert got == recs + recs[::-1]


def test_tfrecord_corrupt_is_dataloss(tmp_path):
    p = str(tmp_path / "bad.tfrecord")
    write_tfrecord(p, [b"abcdef", b"ghij"])
    raw = bytearray(open(p, "rb").read())
    raw[12 + 2] ^= 0xFF  # a byte of the first record's data
    open(p, "wb").write(bytes(raw))
    with pytest.raises(tf.errors.DataLossError):
        list(tf.data.TFRecordDataset(p))
    np.testing.assert_array_equal((tf.constant([1]) + 1).numpy(), [2])


def test_tfrecord_written_by_tensorflow(tmp_path):
    rtf = pytest.importorskip("tensorflow")
    p = str(tmp_path / "tf.tfrecord")
    recs = [b"alpha", b"", b"\xff" * 1000]
    with rtf.io.TFRecordWriter(p) as w:
        for r in recs:
            w.write(r)
    assert list(tf.data.TFRecordDataset(p).as_numpy_iterator()) == recs


def test_text_lines(tmp_path):
    p = tmp_path / "t.txt"
    p.write_bytes(b"one\ntwo\r\nthree")
    assert list(tf.data.TextLineDataset(str(p)).as_numpy_iterator()) == [b"one", b"two", b"three"]
