"""Cases for the dtypes the kernels register beyond those the op groups' own cases test (test_ops
--coverage lists what is left; tests/ops/untested_dtypes.txt says why). Each reuses its group's numpy
reference, computed in float64 from the values the kernel actually sees: f16 inputs are f16 arrays,
bf16 inputs are f32 arrays holding bf16-representable values fed as bf16 (the reference stays f32)."""
import numpy as np

from opcase import Case, DType
from cases_onnx2 import ref_rnn, ref_grid_sample, ref_roi_align, ref_nms, ref_unique
from cases_reduce import bf16_round, ref_reduce
from cases_onnx2 import ref_col2im
from cases_onnx import ref_center_crop_pad
from cases_shape import onehot

F32, F64, F16, I64 = np.float32, np.float64, np.float16, np.int64
NP = {"f32": F32, "f64": F64, "f16": F16, "bf16": F32, "i8": np.int8, "u8": np.uint8, "i16": np.int16,
      "i32": np.int32, "i64": I64, "bool": np.bool_}
FLOATS_LOW = ("f64", "f16", "bf16")
# kernels that compute in f32/f64 and round once: the output's rounding plus a little
TOL = {"f64": (1e-10, 1e-12), "f16": (5e-3, 5e-3), "bf16": (3e-2, 3e-2), "f32": (1e-5, 1e-6)}


def as_dt(x, dt):
    """x (float values) in the array dtype a case of dtype dt feeds."""
    x = np.asarray(x)
    if dt == "bf16":
        return bf16_round(x.astype(F32))
    return x.astype(NP[dt])


def fdt(dt, idx):
    return {i: "bf16" for i in idx} if dt == "bf16" else None


def rnd(rng, shape, dt, lo=-1.0, hi=1.0):
    return as_dt(rng.uniform(lo, hi, size=shape), dt)


def out_dt(dt):
    return F32 if dt == "bf16" else NP[dt]


def rnn_cases(rng):
    out = []
    I, S, Bn, H = 3, 4, 2, 4
    for op, G in (("RNN", 1), ("GRU", 3), ("LSTM", 4)):
        for dt in FLOATS_LOW:
            nd = 2
            X, W, R = rnd(rng, (S, Bn, I), dt), rnd(rng, (nd, G * H, I), dt), rnd(rng, (nd, G * H, H), dt)
            B, h0 = rnd(rng, (nd, 2 * G * H), dt), rnd(rng, (nd, Bn, H), dt)
            lens = np.array([S, S - 1], np.int32)
            ins, kw = [X, W, R, B, lens, h0], dict(B=B, lens=lens, h0=h0, direction="bidirectional")
            if op == "LSTM":
                c0, P = rnd(rng, (nd, Bn, H), dt), rnd(rng, (nd, 3 * H), dt)
                ins += [c0, P]
                kw.update(c0=c0, P=P)
            fd = fdt(dt, [i for i in range(len(ins)) if i != 4])
            rt, at = TOL[dt]
            out.append(Case("%s_%s" % (op, dt), op, ins, ref_rnn(op, X, W, R, odt=out_dt(dt), **kw),
                            attrs={"direction": "bidirectional", "hidden_size": H}, feed_dtype=fd, rtol=rt, atol=at))
    return out


def sample_cases(rng):
    out = []
    for dt in FLOATS_LOW:
        rt, at = TOL[dt]
        X, grid = rnd(rng, (1, 2, 4, 5), dt), rnd(rng, (1, 3, 4, 2), dt, -1.2, 1.2)
        for mode, pad in (("linear", "zeros"), ("cubic", "reflection"), ("nearest", "border")):
            if mode == "nearest" and dt != "f64":
                continue  # rounding the unnormalised coordinate decides the pixel: only f64 is exact to compare
            out.append(Case("GridSample_%s_%s" % (mode, dt), "GridSample", [X, grid],
                            [ref_grid_sample(X, grid, mode, pad, 0, odt=out_dt(dt))],
                            attrs={"mode": mode, "padding_mode": pad}, feed_dtype=fdt(dt, [0, 1]), rtol=rt, atol=at))
        X = rnd(rng, (2, 2, 6, 7), dt)
        rois = as_dt([[0.5, 1.0, 5.25, 4.5], [1.0, 0.0, 3.0, 5.5]], dt)
        bi = np.array([1, 0], I64)
        for mode in ("avg", "max"):
            out.append(Case("RoiAlign_%s_%s" % (mode, dt), "RoiAlign", [X, rois, bi],
                            [ref_roi_align(X, rois, bi, 2, 3, 2, 1.0, 1, mode, odt=out_dt(dt))],
                            attrs={"mode": mode, "output_height": 2, "output_width": 3, "sampling_ratio": 2},
                            feed_dtype=fdt(dt, [0, 1]), rtol=rt, atol=at))
    return out


def nms_unique_cases(rng):
    out = []
    for dt in FLOATS_LOW:
        # corners on a 1/4 grid and scores in 1/16 steps: exact in every float dtype, so the reference's
        # order and overlaps are the kernel's
        boxes = as_dt(np.round(rng.uniform(0, 8, size=(1, 8, 4)) * 4) / 4, dt)
        scores = as_dt(rng.permutation(16)[:8].reshape(1, 1, 8) / 16.0, dt)
        iou, sthr = as_dt([0.3], dt), as_dt([0.1], dt)
        ins = [boxes, scores, np.array([4], I64), iou, sthr]
        ref = ref_nms(boxes.astype(F64), scores.astype(F64), 4, float(iou[0]), float(sthr[0]), 0)
        out.append(Case("NMS_%s" % dt, "NonMaxSuppression", ins, [ref], feed_dtype=fdt(dt, [0, 1, 3, 4])))
    for dt in ("f64", "f16", "bf16", "i8", "u8", "i16", "i32"):
        x = rng.integers(0, 5, size=(3, 4)).astype(F64)
        x[2] = x[0]
        xa = as_dt(x, dt)
        for axis in (None, 0):
            y, idx, inv, cnt = ref_unique(xa, axis, 1)
            attrs = {"sorted": 1} if axis is None else {"sorted": 1, "axis": axis}
            out.append(Case("Unique_%s_%s" % ("flat" if axis is None else "axis0", dt), "Unique", [xa],
                            [y, idx, inv, cnt], attrs=attrs, feed_dtype=fdt(dt, [0])))
    return out


def dft_cases(rng):
    out = []
    for dt in FLOATS_LOW:
        rt, at = {"f64": (1e-10, 1e-12), "f16": (1e-2, 1e-2), "bf16": (3e-2, 6e-2)}[dt]
        for name, shape, inv, one in (("complex", (2, 6, 2), 0, 0), ("rfft", (2, 7, 1), 0, 1), ("ifft", (1, 5, 2), 1, 0)):
            x = rnd(rng, shape, dt)
            xc = x[..., 0].astype(F64) + (1j * x[..., 1].astype(F64) if shape[-1] == 2 else 0)
            y = np.fft.ifft(xc, axis=1) if inv else np.fft.fft(xc, axis=1)
            if one:
                y = y[:, :shape[1] // 2 + 1]
            y = np.stack([y.real, y.imag], -1).astype(out_dt(dt))
            out.append(Case("DFT_%s_%s" % (name, dt), "DFT", [x, None, np.array(1, I64)], [y],
                            attrs={"inverse": inv, "onesided": one}, feed_dtype=fdt(dt, [0]), rtol=rt, atol=at))
    return out


def window_cases(rng):
    out = []
    fns = (("HannWindow", lambda n, N: 0.5 - 0.5 * np.cos(2 * np.pi * n / N)),
           ("HammingWindow", lambda n, N: 25 / 46 - 21 / 46 * np.cos(2 * np.pi * n / N)),
           ("BlackmanWindow", lambda n, N: 0.42 - 0.5 * np.cos(2 * np.pi * n / N) + 0.08 * np.cos(4 * np.pi * n / N)))
    for op, fn in fns:
        for dt in ("f16", "bf16", "i8", "u8", "i16", "i32", "i64"):
            w = fn(np.arange(8), 8)
            if dt in ("f16", "bf16"):
                ref, (rt, at) = w.astype(out_dt(dt)), TOL[dt]
            else:
                # an integer window is the float window converted (truncated): 1 only where it is exactly 1
                # (the periodic window's centre for Hann; Hamming and Blackman never reach 1 in float64)
                ref, rt, at = np.trunc(w).astype(NP[dt]), None, None
            out.append(Case("%s_%s" % (op, dt), op, [np.array(8, I64)], [ref],
                            attrs={"output_datatype": DType(dt)}, const=(0,), rtol=rt, atol=at))
    return out


def identity_cases(rng):
    out = []
    for dt in NP:
        x = as_dt(rng.integers(-3, 4, size=(2, 3)), dt) if dt != "bool" else rng.random((2, 3)) < 0.5
        if dt == "u8":
            x = rng.integers(0, 200, size=(2, 3)).astype(np.uint8)
        for op in ("Identity", "PlaceholderWithDefault"):
            out.append(Case("%s_%s" % (op, dt), op, [x], [x], feed_dtype=fdt(dt, [0])))
    return out


def reduce_cases(rng):
    out = []
    other = {"ReduceL1": lambda v, ax: np.sum(np.abs(v), axis=ax, keepdims=True),
             "ReduceSumSquare": lambda v, ax: np.sum(v * v, axis=ax, keepdims=True),
             # an integer log is the float result truncated (the inputs keep it away from integers)
             "ReduceLogSum": lambda v, ax: np.trunc(np.log(np.sum(v.astype(F64), axis=ax, keepdims=True))),
             "ReduceLogSumExp": lambda v, ax: np.trunc(np.log(np.sum(np.exp(v.astype(F64)), axis=ax, keepdims=True)))}
    for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceL1",
               "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"):
        for dt in ("i8", "i16", "u8", "i64"):
            lo, hi = {"ReduceProd": (-2, 2), "ReduceSumSquare": (-5, 5), "ReduceLogSum": (1, 9),
                      "ReduceLogSumExp": (0, 3)}.get(op, (-20, 20))
            if dt == "u8":
                lo = max(lo, 0)
            x = rng.integers(lo, hi + 1, size=(3, 4)).astype(NP[dt])
            if op in other:
                ref = other[op](x.astype(I64), (1,)).astype(NP[dt])
                if op in ("ReduceLogSum", "ReduceLogSumExp"):
                    r = other[op](x.astype(I64), (1,))
                    exact = (np.log(np.sum(x.astype(F64), axis=1)) if op == "ReduceLogSum" else
                             np.log(np.sum(np.exp(x.astype(F64)), axis=1)))
                    assert np.all(np.abs(exact - np.round(exact)) > 1e-6), "%s reference too close to an integer" % op
            else:
                ref = ref_reduce(op, x, [1], 1)
            out.append(Case("%s_%s_axis1" % (op, dt), op, [x, np.array([1], I64)], [ref], const=(1,)))
    return out


def movement_cases(rng):
    """Ops whose output elements are input elements (or counts): exact in every dtype."""
    out = []
    ints = ("i8", "u8", "i16", "i32", "i64")
    for dt in ("f64", "f16", "bf16") + ints:
        x = as_dt(rng.integers(0, 9, size=(2, 3, 4)), dt)
        fd = fdt(dt, [0])
        out.append(Case("Dropout_%s" % dt, "Dropout", [x], [x.copy()], feed_dtype=fd))
        out.append(Case("Size_%s" % dt, "Size", [x], [np.array(x.size, I64)], feed_dtype=fd))
        ind = np.array([[0, 2], [1, 0], [1, 1]], I64)
        out.append(Case("GatherND_%s" % dt, "GatherND", [x, ind], [x[ind[:, 0], ind[:, 1]]], feed_dtype=fd))
        idx = np.array([[[2, 0, 1, 2], [0, 1, 2, 0]]], I64)
        upd = as_dt(rng.integers(0, 9, size=(1, 2, 4)), dt)
        ref = x.copy()
        for j in range(2):
            for k in range(4):
                ref[0, idx[0, j, k], k] = upd[0, j, k]
        out.append(Case("ScatterElements_%s" % dt, "ScatterElements", [x, idx, upd], [ref], attrs={"axis": 1},
                        feed_dtype=fdt(dt, [0, 2])))
        shp = [1, 5, 3]
        out.append(Case("CenterCropPad_%s" % dt, "CenterCropPad", [x, np.array(shp, I64)],
                        [ref_center_crop_pad(x, shp)], const=(1,), feed_dtype=fd))
        # MaxUnpool: values scattered to their indices in a zero image
        vals = as_dt(rng.integers(1, 9, size=(1, 1, 2, 2)), dt)
        ui = np.array([[[[1, 6], [8, 15]]]], I64)
        ref = np.zeros((1, 1, 4, 4), vals.dtype)
        ref.reshape(-1)[ui.reshape(-1)] = vals.reshape(-1)
        out.append(Case("MaxUnpool_%s" % dt, "MaxUnpool", [vals, ui], [ref],
                        attrs={"kernel_shape": [2, 2], "strides": [2, 2]}, feed_dtype=fd))
        # Col2Im: sums of a few small integers, exact in every dtype here
        col = as_dt(rng.integers(0, 4, size=(1, 4, 9)), dt)
        out.append(Case("Col2Im_%s" % dt, "Col2Im", [col, np.array([4, 4], I64), np.array([2, 2], I64)],
                        [ref_col2im(col, [4, 4], [2, 2], [1, 1], [0, 0, 0, 0], [1, 1])], const=(1, 2), feed_dtype=fd))
    for dt in ("f32", "bool"):
        x = as_dt(rng.integers(0, 9, size=(2, 3, 4)), dt) if dt != "bool" else rng.random((2, 3, 4)) < 0.5
        out.append(Case("CenterCropPad_%s" % dt, "CenterCropPad", [x, np.array([3, 2, 5], I64)],
                        [ref_center_crop_pad(x, [3, 2, 5])], const=(1,)))
    for dt in ("u8", "i16"):
        val = np.array([7], NP[dt])
        out.append(Case("ConstantOfShape_%s" % dt, "ConstantOfShape", [np.array([2, 3], I64)],
                        [np.full((2, 3), 7, NP[dt])], attrs={"value": val}, const=(0,)))
    for dt in FLOATS_LOW:
        # AffineGrid: theta times the normalised pixel centres (the f32 case's reference in cases_onnx2.py)
        theta = rnd(rng, (2, 2, 3), dt)
        shape = (2, 1, 3, 4)
        for ac in (0, 1):
            axes = [np.linspace(-1, 1, L) if ac else (2 * np.arange(L) + 1) / L - 1 for L in shape[2:]]
            mesh = np.meshgrid(*axes, indexing="ij")
            base = np.stack([m for m in mesh[::-1]] + [np.ones_like(mesh[0])], axis=-1)
            ref = np.einsum("nij,...j->n...i", theta.astype(F64), base).astype(out_dt(dt))
            rt, at = TOL[dt]
            out.append(Case("AffineGrid_ac%d_%s" % (ac, dt), "AffineGrid", [theta, np.array(shape, I64)], [ref],
                            attrs={"align_corners": ac}, const=(1,), feed_dtype=fdt(dt, [0]), rtol=rt, atol=at))
    for dt in ("i16", "bf16"):
        ind = np.array([[0, 2, -1], [4, 1, -6]], I64)
        v = as_dt([3, 7], dt)
        out.append(Case("OneHot_values_%s" % dt, "OneHot", [ind, np.array(5, I64), v], [onehot(ind, 5, v)],
                        const=(1,), feed_dtype=fdt(dt, [2])))
    out.append(Case("EyeLike_dtype_bf16", "EyeLike", [np.zeros((3, 4), np.int32)], [np.eye(3, 4, 1, dtype=F32)],
                    attrs={"dtype": DType("bf16"), "k": 1}))
    # BitCast from the dtypes no other case starts from
    h = np.array([1.5, -2.0, 65504.0], F16)
    out.append(Case("BitCast_f16_i16", "BitCast", [h], [h.view(np.int16)], attrs={"to": DType("i16")}))
    b = bf16_round(np.array([1.5, -3.25], F32))
    out.append(Case("BitCast_bf16_i16", "BitCast", [b], [(b.view(np.uint32) >> 16).astype(np.uint16).view(np.int16)],
                    attrs={"to": DType("i16")}, feed_dtype={0: "bf16"}))
    u = np.array([0, 128, 255, 1], np.uint8)
    out.append(Case("BitCast_u8_i8", "BitCast", [u], [u.view(np.int8)], attrs={"to": DType("i8")}))
    i = np.array([0x3F800000, -1, 7], np.int32)
    out.append(Case("BitCast_i32_f32", "BitCast", [i], [i.view(F32)], attrs={"to": DType("f32")}))
    return out


def cases(rng):
    out = (rnn_cases(rng) + sample_cases(rng) + nms_unique_cases(rng) + dft_cases(rng) + window_cases(rng) +
           identity_cases(rng) + reduce_cases(rng) + movement_cases(rng))
    for c in out:
        c.name = "dt_" + c.name  # apart from the groups' own names
    return out
