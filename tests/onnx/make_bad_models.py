"""Writes the inputs of tests/cli/test_cli.sh into OUT_DIR: one good model with its inputs and the
numpy reference output, and a set of broken models and inputs, each wrong in exactly one way.
Run: /usr/bin/python3 make_bad_models.py OUT_DIR (Debian's onnx 1.12 and numpy)."""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F32 = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), opset=13, ir=7):
    g = helper.make_graph(nodes, "cli", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    return m


def vi(name, shape, dtype=F32):
    return helper.make_tensor_value_info(name, dtype, shape)


W = np.array([[0.5, -1.0, 2.0], [-0.25, 3.0, -4.0]], np.float32)


def good(inits=None, extra_nodes=(), **kw):
    """y = Relu(x + w), x: f32[2,3]."""
    nodes = [helper.make_node("Add", ["x", "w"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["y"], name="relu")] + list(extra_nodes)
    outs = [vi(nodes[-1].output[0], None)]
    return model(nodes, [vi("x", [2, 3])], outs, inits if inits is not None else [numpy_helper.from_array(W, "w")], **kw)


def external(location):
    t = helper.make_tensor("w", F32, [2, 3], [0.0] * 6)
    t.ClearField("float_data")
    t.data_location = TensorProto.EXTERNAL
    for key, val in (("location", location), ("offset", "0")):
        e = t.external_data.add()
        e.key, e.value = key, val
    return t


def raw(n_bytes):
    t = numpy_helper.from_array(W, "w")
    t.raw_data = (W.tobytes() + b"\0" * 8)[:n_bytes]
    return t


def shape_op(op, name, values):
    """y = op(x, values), x: f32[2,3], values an i64 initializer (Tile's repeats, Expand's shape)."""
    v = numpy_helper.from_array(np.array(values, np.int64), "v")
    return model([helper.make_node(op, ["x", "v"], ["y"], name=name)], [vi("x", [2, 3])], [vi("y", None)], [v])


def huge_init(raw):
    """w claims 2^25 x 2^25 f32 (2^52 bytes) but holds 24 bytes, inline or in sub/w.bin."""
    t = external("w.bin") if not raw else numpy_helper.from_array(W, "w")
    del t.dims[:]
    t.dims.extend([1 << 25, 1 << 25])
    return t


def main(out):
    os.makedirs(os.path.join(out, "sub"), exist_ok=True)
    files = {}
    g = good().SerializeToString()
    files["good.onnx"] = g
    files["empty.onnx"] = b""
    files["truncated.onnx"] = g[: len(g) // 2]
    files["random.onnx"] = np.random.default_rng(7).integers(0, 256, 300, dtype=np.uint8).tobytes()
    files["raw_short.onnx"] = good([raw(20)]).SerializeToString()
    files["raw_long.onnx"] = good([raw(28)]).SerializeToString()
    files["sub/ext_up.onnx"] = good([external("../secret.bin")]).SerializeToString()
    files["sub/ext_abs.onnx"] = good([external(os.path.abspath(os.path.join(out, "secret.bin")))]).SerializeToString()
    files["sub/ext_missing.onnx"] = good([external("missing.bin")]).SerializeToString()
    files["sub/ext_good.onnx"] = good([external("w.bin")]).SerializeToString()
    files["secret.bin"] = W.tobytes()
    files["sub/w.bin"] = W.tobytes()
    files["unsupported.onnx"] = good(extra_nodes=[
        helper.make_node("NoSuchOpA", ["y"], ["u"], name="bad1"),
        helper.make_node("Custom", ["u"], ["v"], name="bad2", domain="com.example")]).SerializeToString()
    # custom-domain ops used several times, one named like an ONNX op, under an imported opset 3:
    # listed once each by weft inspect, and the import error quotes com.example's opset, not ai.onnx's
    cm = good(extra_nodes=[
        helper.make_node("Custom", ["y"], ["c1"], name="c1", domain="com.example"),
        helper.make_node("Custom", ["c1"], ["c2"], name="c2", domain="com.example"),
        helper.make_node("Relu", ["c2"], ["c3"], name="c3", domain="com.example"),
        helper.make_node("Custom", ["c3"], ["c4"], name="c4", domain="com.example")])
    cm.opset_import.append(helper.make_opsetid("com.example", 3))
    files["custom.onnx"] = cm.SerializeToString()
    files["dangling.onnx"] = good(extra_nodes=[helper.make_node("Relu", ["nobody"], ["u"], name="late")]).SerializeToString()
    files["ir2.onnx"] = good(ir=2).SerializeToString()
    files["opset6.onnx"] = good(opset=6).SerializeToString()
    # overflowing and huge sizes (issue 12): build-time overflows, a representable size larger than any
    # memory, and initializers whose dims claim far more data than the file holds
    files["tile_overflow.onnx"] = shape_op("Tile", "t", [1, 1 << 62]).SerializeToString()
    files["expand_overflow.onnx"] = shape_op("Expand", "e", [1 << 62, 4, 1, 1]).SerializeToString()
    files["expand_huge.onnx"] = shape_op("Expand", "e", [1 << 20, 1 << 20, 1, 1]).SerializeToString()
    files["init_huge.onnx"] = good([huge_init(raw=True)]).SerializeToString()
    files["sub/ext_huge.onnx"] = good([huge_init(raw=False)]).SerializeToString()
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    np.save(os.path.join(out, "x.npy"), x)
    np.save(os.path.join(out, "x_i32.npy"), x.astype(np.int32))
    np.save(os.path.join(out, "x_shape.npy"), x.reshape(3, 2))
    np.save(os.path.join(out, "y_ref.npy"), np.maximum(x + W, 0))
    with open(os.path.join(out, "not_npy.npy"), "wb") as f:
        f.write(b"this is not a numpy file")


if __name__ == "__main__":
    main(sys.argv[1])
