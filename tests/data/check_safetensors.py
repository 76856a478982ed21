"""Cross-checks weft's safetensors files against the reference `safetensors` package (build/venv).

check_safetensors.py verify FILE   loads a file weft wrote with the reference loader and compares every
                                   tensor and the metadata with the values below (computed by numpy)
check_safetensors.py write DIR     writes ref.safetensors (safetensors.numpy.save_file) and
                                   ref_bf16.safetensors (serialize_file, numpy has no bfloat16)
tests/test_data.c fills its tensors with the same formula: element i of every tensor is
((7 i) mod 11) - 5, times 0.5 for floats; (37 i + 3) mod 256 for U8; i mod 3 == 0 for BOOL.
"""
import sys

import numpy as np
import safetensors
import safetensors.numpy

TENSORS = [("w.f64", "F64", [2, 3]), ("w.f32", "F32", [3, 4]), ("h.f16", "F16", [5]), ("b.bf16", "BF16", [2, 2]),
           ("i64", "I64", [4]), ("i32", "I32", [2, 2, 2]), ("i16", "I16", [3]), ("i8", "I8", [6]),
           ("u8", "U8", [7]), ("mask", "BOOL", [5]), ("scalar", "F32", []), ("empty", "F32", [0, 3]),
           ('quote"\\name \u00e9', "F32", [1])]
NP = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
      "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
METADATA = {"format": "pt", "note": 'a "quoted" value \u00e9'}


def values(dtype, shape):
    i = np.arange(int(np.prod(shape)), dtype=np.int64)
    if dtype == "U8":
        v = (37 * i + 3) % 256
    elif dtype == "BOOL":
        v = i % 3 == 0
    else:
        v = (7 * i) % 11 - 5
        if dtype in ("F64", "F32", "F16", "BF16"):
            v = v * 0.5
    if dtype == "BF16":  # the values are exact in bfloat16: its bits are the top half of the f32's
        return (np.asarray(v, np.float32).view(np.uint32) >> 16).astype(np.uint16).reshape(shape)
    return np.asarray(v).astype(NP[dtype]).reshape(shape)


def verify(path):
    bad = 0
    with safetensors.safe_open(path, framework="np") as f:
        if f.metadata() != METADATA:
            print("metadata differs:", f.metadata())
            bad += 1
        keys = set(f.keys())
        for name, dtype, shape in TENSORS:
            if name not in keys:
                print("missing", repr(name))
                bad += 1
            elif dtype != "BF16":
                a = f.get_tensor(name)
                want = values(dtype, shape)
                if a.dtype != want.dtype or list(a.shape) != shape or not np.array_equal(a, want):
                    print("tensor", repr(name), "differs:", a.dtype, a.shape, a.ravel()[:8], "want", want.ravel()[:8])
                    bad += 1
    seen_bf16 = False
    with open(path, "rb") as fh:
        for name, info in safetensors.deserialize(fh.read()):
            if name == "b.bf16":
                seen_bf16 = True
                got = np.frombuffer(bytes(info["data"]), "<u2").reshape(info["shape"])
                if info["dtype"].upper() not in ("BF16", "BFLOAT16") or not np.array_equal(got, values("BF16", [2, 2])):
                    print("bf16 differs:", info["dtype"], got)
                    bad += 1
    if not seen_bf16:
        print("b.bf16 missing")
        bad += 1
    print("verify:", len(TENSORS), "tensors,", bad, "mismatches")
    return 1 if bad else 0


def write(out):
    arrays = {name: values(dt, shape) for name, dt, shape in TENSORS if dt != "BF16"}
    safetensors.numpy.save_file(arrays, out + "/ref.safetensors", metadata=METADATA)
    if hasattr(safetensors, "TensorSpec"):  # 0.8 and later: specs over raw buffers, kept alive here
        names = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
                 "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}
        keep = {name: np.ascontiguousarray(values(dt, shape)) for name, dt, shape in TENSORS}
        raw = {name: safetensors.TensorSpec(dtype=names[dt], shape=shape, data_ptr=keep[name].ctypes.data,
                                             data_len=keep[name].nbytes)
               for name, dt, shape in TENSORS}
    else:
        raw = {name: {"dtype": dt, "shape": shape, "data": values(dt, shape).tobytes()} for name, dt, shape in TENSORS}
    safetensors.serialize_file(raw, out + "/ref_bf16.safetensors", METADATA)
    return 0


sys.exit(verify(sys.argv[2]) if sys.argv[1] == "verify" else write(sys.argv[2]))
