"""Writes the fuzzers' seed corpora into OUT_DIR/onnx, OUT_DIR/npy, OUT_DIR/safetensors and OUT_DIR/image (the
attribute fuzzer writes its own, one per registered op). ONNX: a few small, valid models that between
them reach initializers (raw, typed and external data), graph inputs with defaults, attributes of every
kind, the ops with opset-specific handlers, and an unsupported op. .npy: every dtype in format versions
1.0, 2.0 and 3.0, scalars, empty and 8-dim arrays. safetensors: every dtype, metadata, escapes, empty
tensors. TFRecord (OUT_DIR/tfrecord): small files of records, an empty record, a gzip one. CSV
(OUT_DIR/csv): files with quotes, escapes, CRLF and empty fields, after the two option bytes that
fuzz_csv.c reads first. Run: python3 make_seeds.py OUT_DIR."""
import io
import json
import os
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(nodes, inputs, outputs, inits=(), opset=13, ir=7):
    g = helper.make_graph(nodes, "seed", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    return m


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def npy_seeds(out):
    os.makedirs(out, exist_ok=True)
    from numpy.lib import format as npformat
    arrays = {
        "f32": np.arange(6, dtype="<f4").reshape(2, 3), "f64": np.array([1.5, -2.0]), "f16": np.ones(3, "<f2"),
        "i8": np.array([-1, 2], "i1"), "u8": np.arange(5, dtype="u1"), "i16": np.array([[1], [2]], "<i2"),
        "i32": np.array(7, "<i4"), "i64": np.zeros((0, 4), "<i8"), "bool": np.array([True, False]),
        "rank8": np.zeros((1, 2, 1, 2, 1, 1, 2, 1), "<f4"),
    }
    n = 0
    for name, a in arrays.items():
        for v in (1, 2, 3):
            buf = io.BytesIO()
            npformat.write_array(buf, a, version=(v, 0))
            with open(os.path.join(out, f"{name}_v{v}.npy"), "wb") as f:
                f.write(buf.getvalue())
            n += 1
    # weft's own bfloat16 convention
    hdr = "{'descr': '<bf16', 'fortran_order': False, 'shape': (2,), }"
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    with open(os.path.join(out, "bf16.npy"), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + b"\x80\x3f\x00\x40")
    return n + 1


def st_file(path, tensors, meta=None, pad=True):
    """tensors: (name, dtype, shape, bytes) in data order."""
    hdr, off, data = {}, 0, b""
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, dt, shape, raw in tensors:
        hdr[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        data += raw
    text = json.dumps(hdr).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def safetensors_seeds(out):
    os.makedirs(out, exist_ok=True)
    sizes = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
    st_file(os.path.join(out, "all.safetensors"),
            [(f"t_{dt.lower()}", dt, (2,), bytes(range(2 * sz))) for dt, sz in sizes.items()],
            meta={"format": "pt", "step": "3"})
    st_file(os.path.join(out, "empty.safetensors"), [])
    st_file(os.path.join(out, "shapes.safetensors"),
            [("scalar", "F32", (), b"\0\0\x80\x3f"), ("none", "I64", (0, 3), b""), ("m", "U8", (2, 1, 2), b"abcd")])
    st_file(os.path.join(out, "names.safetensors"),
            [("\u00e9\U0001F600 \\ \"q\"\n", "I16", (1,), b"\1\0"), ("layer.0.weight", "BOOL", (3,), b"\0\1\1")],
            meta={}, pad=False)
    return 4


def records_seeds(out):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data"))
    import gzip
    from make_records import CSV, tfrecord
    os.makedirs(os.path.join(out, "tfrecord"), exist_ok=True)
    os.makedirs(os.path.join(out, "csv"), exist_ok=True)
    tf = {"one": [b"a"], "empty": [b""], "three": [b"x" * 40, b"", b"\x00\xff" * 9],
          "gzip": [b"hello", b"world"]}
    for name, recs in tf.items():
        data = tfrecord(recs)
        if name == "gzip":
            data = gzip.compress(data, mtime=0)
        with open(os.path.join(out, "tfrecord", name + ".tfrecord"), "wb") as f:
            f.write(data)
    # option bytes: a = header | delimiter << 1 | small row limit (8) | defaults << 4; b = columns - 1 |
    # types << 2 | selection (0x80) | selection counted from the header (0x40)
    csvs = {"quotes": (b"\xf1\x17", CSV), "plain": (b"\x00\x02", b"1,2.5,x\n3,4,y\n"),
            "tabs": (b"\x05\x0b", b"a\tb\n\"1\t2\"\t3\r\n\n4\t\"\"\n"),
            "select": (b"\x01\xc1", b"a,b,c,d\n1,2,3,4\n5,,7,8"),
            "bad": (b"\x00\x01", b"1,\"open\n2,x\"y\n")}
    for name, (opt, text) in csvs.items():
        with open(os.path.join(out, "csv", name + ".csv"), "wb") as f:
            f.write(opt + text)
    return len(tf), len(csvs)


def image_seeds(out):
    """Small JPEGs (gray, RGB 4:2:0 and 4:4:4, progressive) and PNGs (every colour type, 1 to 16 bits,
    a palette with transparency), written by Pillow."""
    from PIL import Image
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(7)
    rgb = rng.integers(0, 256, size=(9, 13, 3)).astype(np.uint8)
    im = Image.fromarray(rgb, "RGB")
    n = 0

    def save(img, name, **kw):
        nonlocal n
        img.save(os.path.join(out, name), **kw)
        n += 1
    save(im, "rgb420.jpg", quality=75)
    save(im, "rgb444.jpg", quality=90, subsampling=0)
    save(im, "progressive.jpg", quality=80, progressive=True)
    save(im.convert("L"), "gray.jpg", quality=60)
    save(im, "rgb.png")
    save(im.convert("RGBA"), "rgba.png")
    save(im.convert("L"), "gray.png")
    save(im.convert("LA"), "gray_alpha.png")
    save(im.convert("1"), "bits1.png")
    save(im.convert("P"), "palette.png", transparency=0)
    save(Image.fromarray(rng.integers(0, 65536, size=(5, 7)).astype(np.uint16)), "gray16.png")
    return n


def cache_seeds(out):
    """Input-pipeline cache files (src/data/cache.c) for fuzz_cache.c: a first byte 0 asks the target to
    put the real header in front, so these are element records: u32 components, then per component u32
    dtype, u32 rank, i64 dims, u64 bytes, the bytes."""
    import struct
    os.makedirs(out, exist_ok=True)

    def rec(v):
        return struct.pack("<IIIQ", 1, 9, 0, 8) + struct.pack("<q", v)

    def vec(vals):
        return struct.pack("<III", 1, 1, 1) + struct.pack("<q", len(vals)) + struct.pack("<Q", 4 * len(vals)) + \
            struct.pack("<%df" % len(vals), *vals)
    seeds = {"range": b"\x00" + b"".join(rec(i) for i in range(16)), "truncated": b"\x00" + rec(0)[:-3],
             "vector": b"\x00" + vec([1.0, 2.0, 3.0]), "raw": b"\x01WFCACHE1" + b"\x00" * 8 + rec(5)}
    for name, data in seeds.items():
        with open(os.path.join(out, name + ".bin"), "wb") as f:
            f.write(data)
    return len(seeds)


def main(out):
    n_tf, n_csv = records_seeds(out)
    n_cache = cache_seeds(os.path.join(out, "cache"))
    n_img = image_seeds(os.path.join(out, "image"))
    n_npy = npy_seeds(os.path.join(out, "npy"))
    n_st = safetensors_seeds(os.path.join(out, "safetensors"))
    out = os.path.join(out, "onnx")
    os.makedirs(out, exist_ok=True)
    f32 = TensorProto.FLOAT
    seeds = {}
    # Add + Relu with a raw-data initializer that is also an input (a PlaceholderWithDefault)
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    seeds["add_relu"] = model(
        [helper.make_node("Add", ["x", "w"], ["s"], name="add"), helper.make_node("Relu", ["s"], ["y"], name="relu")],
        [vi("x", f32, ["N", 3]), vi("w", f32, [2, 3])], [vi("y", f32, None)], [w])
    # typed-field initializers of several dtypes, Cast, Gemm with float/int attributes
    b = helper.make_tensor("b", f32, [2], [0.5, -1.0])
    wi = helper.make_tensor("wi", TensorProto.INT64, [2, 2], [1, 2, 3, 4])
    seeds["gemm_cast"] = model(
        [helper.make_node("Cast", ["wi"], ["wf"], to=f32),
         helper.make_node("Gemm", ["x", "wf", "b"], ["y"], alpha=0.5, beta=2.0, transB=1)],
        [vi("x", f32, [1, 2])], [vi("y", f32, [1, 2])], [b, wi])
    # opset 9: attributes that later became inputs (Reshape via opset>=5 form, Slice, Unsqueeze, Pad, Clip)
    seeds["opset9"] = model(
        [helper.make_node("Slice", ["x"], ["a"], starts=[0], ends=[2], axes=[1]),
         helper.make_node("Unsqueeze", ["a"], ["b"], axes=[0]),
         helper.make_node("Pad", ["b"], ["c"], pads=[0, 0, 0, 0, 0, 1], value=1.5),
         helper.make_node("Clip", ["c"], ["d"], min=-1.0, max=1.0),
         helper.make_node("Softmax", ["d"], ["y"], axis=1)],
        [vi("x", f32, [2, 4])], [vi("y", f32, None)], opset=9, ir=4)
    # Conv + MaxPool + Flatten, Constant node with a tensor value, string attribute
    k = numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "k")
    seeds["conv"] = model(
        [helper.make_node("Conv", ["x", "k"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
         helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2], auto_pad="NOTSET"),
         helper.make_node("Constant", [], ["shp"], value=helper.make_tensor("v", TensorProto.INT64, [2], [1, -1])),
         helper.make_node("Reshape", ["p", "shp"], ["y"])],
        [vi("x", f32, [1, 1, 4, 4])], [vi("y", f32, None)], [k])
    # external data beside the model (the fuzzer writes 'data.bin' of 4096 bytes in its folder)
    e = helper.make_tensor("e", f32, [4], [0, 0, 0, 0])
    e.ClearField("float_data")
    e.data_location = TensorProto.EXTERNAL
    for key, val in (("location", "data.bin"), ("offset", "16"), ("length", "16")):
        entry = e.external_data.add()
        entry.key, entry.value = key, val
    seeds["external"] = model([helper.make_node("Mul", ["x", "e"], ["y"])], [vi("x", f32, [4])], [vi("y", f32, [4])], [e])
    # Split with two outputs, Squeeze, Concat
    seeds["split"] = model(
        [helper.make_node("Split", ["x"], ["a", "b"], axis=1),
         helper.make_node("Concat", ["b", "a"], ["y"], axis=1)],
        [vi("x", f32, [2, 4])], [vi("y", f32, [2, 4])], opset=11, ir=6)
    # an unsupported op and a custom domain: the error path that lists them
    seeds["unsupported"] = model(
        [helper.make_node("NonMaxSuppression", ["x"], ["a"]), helper.make_node("Foo", ["a"], ["y"], domain="com.x")],
        [vi("x", f32, [1])], [vi("y", f32, [1])])
    for name, m in seeds.items():
        with open(os.path.join(out, name + ".onnx"), "wb") as f:
            f.write(m.SerializeToString())
    print(f"{len(seeds)} onnx, {n_npy} npy, {n_st} safetensors, {n_tf} tfrecord, {n_csv} csv, {n_img} image, {n_cache} cache seeds")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "seeds")
