"""NaN, +Inf and -Inf through every kernel that compares, clamps or accumulates: Relu, LeakyRelu, Clip,
Max/Min (variadic and the binary Maximum/Minimum, with broadcasting), MaxPool2D, AvgPool2D, GlobalMaxPool,
GlobalAvgPool, LpPool, ReduceMax/Min/Sum/Mean/Prod/LogSumExp, ArgMax/ArgMin, Softmax/LogSoftmax, MatMul,
Gemm, Conv2D, BiasAdd and the Relu of an RNN. (The fused forms, Conv2D/MatMul + BiasAdd + activation, are
graph-level and are checked by test_session's test_fusion_nan.)

The rule is numpy's and PyTorch's: NaN in, NaN out. max(NaN, x) and min(NaN, x) are NaN (numpy.maximum,
not fmax), relu(NaN) and clip(NaN) are NaN, a pool window or reduced set holding a NaN gives NaN,
inf - inf and 0 * inf give NaN. References are numpy, computed in f64 by explicit loops or
elementwise products (never BLAS for the products, so 0 * inf is NaN as IEEE says). Choices where the
libraries differ, made to match PyTorch and the ONNX reference implementation:
  - ArgMax/ArgMin treat NaN as the extreme: the index of the first NaN (numpy.argmax/argmin, the ONNX
    reference, torch.argmax on CPU); with select_last_index=1 the last NaN.
  - Softmax/LogSoftmax compute exp(x - max): a row holding +inf, or all -inf, is NaN in every element
    (numpy, torch.softmax and the ONNX reference all give this); a row with some -inf and a finite max
    gives exact zeros (LogSoftmax: -inf) there.
  - ReduceLogSumExp is torch.logsumexp: +inf in the set gives +inf, an all -inf set gives -inf, NaN
    gives NaN (the ONNX reference, log(sum(exp(x))), agrees).
  - Conv2D zero padding contributes nothing, so Inf/NaN weights are tested only on unpadded convs
    (PyTorch's im2col would compute 0 * inf = NaN there, oneDNN skips the padding).
  - Gemm with beta = 0 ignores C (the BLAS convention) and is not tested with NaN in C.
"""
import numpy as np

from opcase import Case
from cases_nn import ref_pool, window, bf16_round
from cases_reduce import ref_reduce, ref_arg, ref_softmax
from cases_misc import ref_reduce as ref_reduce_misc
from cases_onnx import ref_lppool

NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.float32}
TOL = {"f32": (1e-5, 1e-5), "f64": (1e-12, 1e-12), "f16": (4e-3, 2e-3), "bf16": (2e-2, 2e-2)}
SPECIALS = (np.nan, np.inf, -np.inf)


def special(rng, shape, dt="f32", frac=0.1, lo=-3.0, hi=3.0, kinds=SPECIALS):
    """Uniform values with a fraction `frac` of the elements replaced by NaN, +Inf or -Inf (each kind at
    least once when there is room), as dtype dt (bf16: bf16 values held as f32)."""
    x = rng.uniform(lo, hi, size=shape)
    n = x.size
    if n:
        k = max(len(kinds), int(n * frac)) if n >= len(kinds) else n
        pos = rng.choice(n, size=min(k, n), replace=False)
        flat = x.reshape(-1)
        for j, p in enumerate(pos):
            flat[p] = kinds[j % len(kinds)]
    x = x.astype(NP[dt])
    return bf16_round(x) if dt == "bf16" else x


def mk(name, op, inputs, expected, dt="f32", attrs=None, const=(), bf16_in=None, tol=None):
    rt, at = tol or TOL[dt]
    fd = {i: "bf16" for i in (bf16_in if bf16_in is not None else (range(len(inputs)) if dt == "bf16" else ()))}
    exp = [np.asarray(e).astype(NP[dt]) if np.asarray(e).dtype.kind == "f" else np.asarray(e) for e in expected]
    return Case(name, op, inputs, exp, attrs=attrs, const=const, feed_dtype=fd, rtol=rt, atol=at)


def f64(x):
    return np.asarray(x, np.float64)


# ---- elementwise: Relu, LeakyRelu, Clip, Max/Min, Maximum/Minimum, BiasAdd ---------------------------

def elementwise_cases(rng):
    out = []
    for dt in ("f32", "f64", "f16", "bf16"):
        # (3, 1000) crosses the vector loops' widths and the parallel split; (7,) is all tail
        for tag, shape in (("small", (7,)), ("large", (3, 1000))):
            x = special(rng, shape, dt)
            xd = f64(x)
            out.append(mk("nan_relu_%s_%s" % (dt, tag), "Relu", [x], [np.where(xd < 0, 0.0, xd)], dt))
            out.append(mk("nan_leakyrelu_%s_%s" % (dt, tag), "LeakyRelu", [x], [np.where(xd < 0, 0.1 * xd, xd)], dt,
                          attrs={"alpha": 0.1}))
            lo, hi = np.array(-1.5, NP[dt]), np.array(2.0, NP[dt])
            out.append(mk("nan_clip_%s_%s" % (dt, tag), "Clip", [x, lo, hi], [np.clip(xd, -1.5, 2.0)], dt))
            out.append(mk("nan_clip_min_%s_%s" % (dt, tag), "Clip", [x, lo], [np.maximum(xd, -1.5)], dt))
            out.append(mk("nan_clip_max_%s_%s" % (dt, tag), "Clip", [x, None, hi], [np.minimum(xd, 2.0)], dt,
                          bf16_in=(0, 2) if dt == "bf16" else ()))
            y = special(rng, shape, dt)
            for op, fn in (("Max", np.maximum), ("Min", np.minimum), ("Maximum", np.maximum), ("Minimum", np.minimum)):
                out.append(mk("nan_%s_%s_%s" % (op.lower(), dt, tag), op, [x, y], [fn(xd, f64(y))], dt))
        # broadcasting: NaN in the row, the column or the scalar operand spreads along the broadcast dims
        a = special(rng, (4, 1, 5), dt, 0.3)
        b = special(rng, (3, 5), dt, 0.3)
        c = np.array(np.nan, NP[dt])
        for op, fn in (("Max", np.maximum), ("Min", np.minimum), ("Maximum", np.maximum), ("Minimum", np.minimum)):
            out.append(mk("nan_%s_bcast_%s" % (op.lower(), dt), op, [a, b], [fn(f64(a), f64(b))], dt))
            out.append(mk("nan_%s_bcast_scalar_%s" % (op.lower(), dt), op, [b, c], [fn(f64(b), f64(c))], dt))
            inf0 = np.array(-np.inf if op in ("Max", "Maximum") else np.inf, NP[dt])
            out.append(mk("nan_%s_bcast_inf_%s" % (op.lower(), dt), op, [inf0, b], [fn(f64(inf0), f64(b))], dt))
        for op, fn in (("Max", np.maximum), ("Min", np.minimum)):
            xs = [a, b, special(rng, (5,), dt, 0.4)]
            out.append(mk("nan_%s_3in_bcast_%s" % (op.lower(), dt), op, xs, [fn(fn(f64(xs[0]), f64(xs[1])), f64(xs[2]))],
                          dt))
        # NaN / Inf in the bias
        x = special(rng, (2, 3, 4, 5), dt, 0.1)
        bias = np.array([np.nan, np.inf, 0.5], NP[dt])
        out.append(mk("nan_biasadd_nchw_%s" % dt, "BiasAdd", [x, bias], [f64(x) + f64(bias)[None, :, None, None]], dt,
                      attrs={"data_format": "NCHW"}))
        bias5 = np.array([1.0, -np.inf, np.nan, 0.0, np.inf], NP[dt])
        out.append(mk("nan_biasadd_nhwc_%s" % dt, "BiasAdd", [x, bias5], [f64(x) + f64(bias5)], dt))
    return out


# ---- pools --------------------------------------------------------------------------------------------

def pool_cases(rng):
    out = []
    configs = [
        ("pads", (2, 3, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        ("k2s2", (1, 4, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
        ("ceil", (1, 2, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 3], "ceil_mode": 1}),
        # the oneDNN / vectorised path: many channels and a large plane
        ("large", (2, 16, 32, 32), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        # k_pool.c's 2x2 max pools at stride 2: rows of 19 windows (groups of eight, the last redone), 5 on
        # an odd plane (two overlapping groups of four), 3 (zero-padded copies) and 16 (groups of eight)
        ("k2s2_wide", (1, 3, 6, 38), {"kernel_shape": [2, 2], "strides": [2, 2]}),
        ("k2s2_five", (2, 3, 11, 11), {"kernel_shape": [2, 2], "strides": [2, 2]}),
        ("k2s2_narrow", (1, 2, 4, 6), {"kernel_shape": [2, 2], "strides": [2, 2]}),
        ("k2s2_sixteen", (1, 2, 4, 32), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ]
    for dt in ("f32", "f64", "f16", "bf16"):
        for name, shape, at in configs:
            if dt != "f32" and name == "large":
                continue
            x = special(rng, shape, dt, 0.05)
            # one whole channel of -inf (max: -inf everywhere, avg: -inf) and +inf beside -inf in one window
            x[0, 1] = -np.inf
            x[0, 0, 0, 0], x[0, 0, 0, 1] = np.inf, -np.inf
            kw = dict(strides=at.get("strides", (1, 1)), pads=at.get("pads", (0, 0, 0, 0)),
                      ceil_mode=at.get("ceil_mode", 0))
            with np.errstate(invalid="ignore"):
                ymax = ref_pool(x, "max", at["kernel_shape"], **kw)
                yavg = ref_pool(x, "avg", at["kernel_shape"], **kw)
            out.append(mk("nan_maxpool_%s_%s" % (dt, name), "MaxPool2D", [x], [ymax], dt, attrs=at))
            out.append(mk("nan_avgpool_%s_%s" % (dt, name), "AvgPool2D", [x], [yavg], dt, attrs=at))
            if "pads" in at:
                with np.errstate(invalid="ignore"):
                    yc = ref_pool(x, "avg", at["kernel_shape"], cip=1, **kw)
                out.append(mk("nan_avgpool_cip_%s_%s" % (dt, name), "AvgPool2D", [x], [yc], dt,
                              attrs=dict(at, count_include_pad=1)))
        for name, shape in (("small", (2, 4, 3, 5)), ("large", (2, 64, 9, 9))):
            x = special(rng, shape, dt, 0.004 if name == "large" else 0.05)
            x[0, 1] = -np.inf           # all -inf: max -inf, mean -inf
            x[1, 2, 0, 0] = np.inf      # +inf and -inf together: max +inf, mean NaN
            x[1, 2, 1, 1] = -np.inf
            x[1, 3] = 1.0
            x[1, 3, 2, 2] = np.nan      # a single NaN
            with np.errstate(invalid="ignore"):
                out.append(mk("nan_globalmaxpool_%s_%s" % (dt, name), "GlobalMaxPool", [x],
                              [np.max(f64(x), axis=(2, 3), keepdims=True)], dt))
                out.append(mk("nan_globalavgpool_%s_%s" % (dt, name), "GlobalAvgPool", [x],
                              [np.mean(f64(x), axis=(2, 3), keepdims=True)], dt))
        x = special(rng, (1, 3, 6, 6), dt, 0.05)
        with np.errstate(invalid="ignore", over="ignore"):
            out.append(mk("nan_lppool_p2_%s" % dt, "LpPool", [x], [ref_lppool(f64(x), [2, 2], 2, strides=[2, 2])], dt,
                          attrs={"kernel_shape": [2, 2], "strides": [2, 2], "p": 2}))
    return out


# ---- reductions, ArgMax/ArgMin, Softmax --------------------------------------------------------------

def reduce_cases(rng):
    out = []
    ops = ("ReduceMax", "ReduceMin", "ReduceSum", "ReduceMean", "ReduceProd", "ReduceLogSumExp")

    def ref(op, x, axes, kd):
        with np.errstate(all="ignore"):
            if op == "ReduceLogSumExp":
                return ref_reduce_misc(op, f64(x), axes, kd)
            return ref_reduce(op, f64(x), axes, kd)

    for dt in ("f32", "f64", "f16"):
        for op in ops:
            lo_hi = (0.5, 1.5) if op == "ReduceProd" else (-3.0, 3.0)
            x = special(rng, (4, 6, 5), dt, 0.06, *lo_hi)
            # a row that is entirely -inf, one entirely finite, one with +inf and -inf
            x[0, 0, :] = -np.inf
            x[1, 1, :] = 1.0
            x[2, 2, 0], x[2, 2, 1] = np.inf, -np.inf
            if op == "ReduceProd":
                x[3, 3, 0], x[3, 3, 1] = 0.0, np.inf    # 0 * inf
            for axes in ([2], [0], [1, 2], None):
                tag = "all" if axes is None else "".join(str(a) for a in axes)
                inputs = [x] if axes is None else [x, np.array(axes, np.int64)]
                out.append(mk("nan_%s_%s_ax%s" % (op.lower(), dt, tag), op, inputs, [ref(op, x, axes, 1)], dt,
                              const=(1,)))
            if op != "ReduceProd" and dt != "f16":
                # long rows: the vectorised / split reductions, specials sparse
                xl = special(rng, (6, 2000), dt, 0.0015)
                xl[5, :] = rng.uniform(-3, 3, 2000)   # one clean row
                xl[4, :] = -np.inf
                for axes in ([1], [0]):
                    out.append(mk("nan_%s_%s_long_ax%d" % (op.lower(), dt, axes[0]), op,
                                  [xl, np.array(axes, np.int64)], [ref(op, xl, axes, 0)], dt, const=(1,),
                                  attrs={"keepdims": 0}, tol=(1e-4, 1e-4) if dt == "f32" else None))
    for dt in ("f32", "f64", "f16"):
        x = special(rng, (5, 9), dt, 0.0)
        x[0, 3], x[0, 6] = np.nan, np.nan       # two NaN: the first (or last) one's index
        x[1, 2], x[1, 7] = np.inf, -np.inf      # no NaN: the first +inf / -inf
        x[2, 4] = np.nan
        x[2, 1] = np.inf
        x[3, :] = -np.inf                       # all equal: index 0 (last: 8)
        x[4, 8] = np.nan
        for op, is_max in (("ArgMax", True), ("ArgMin", False)):
            for last in (0, 1):
                out.append(mk("nan_%s_%s_rows_last%d" % (op.lower(), dt, last), op, [x],
                              [ref_arg(is_max, x, 1, 1, last)], dt, attrs={"axis": 1, "select_last_index": last}))
                xt = x.T.copy()
                out.append(mk("nan_%s_%s_cols_last%d" % (op.lower(), dt, last), op, [xt],
                              [ref_arg(is_max, xt, 0, 0, last)], dt,
                              attrs={"axis": 0, "keepdims": 0, "select_last_index": last}))
            if dt != "f16":
                xl = special(rng, (40, 1100), dt, 0.0005)
                out.append(mk("nan_%s_%s_long" % (op.lower(), dt), op, [xl], [ref_arg(is_max, xl, 1, 0)], dt,
                              attrs={"axis": 1, "keepdims": 0}))
    return out


def softmax_cases(rng):
    out = []
    for dt in ("f32", "f64", "f16"):
        x = special(rng, (7, 12), dt, 0.0)
        x[0, 5] = np.nan                         # NaN row
        x[1, 3] = np.inf                         # +inf: exp(inf - inf) is NaN, the whole row NaN
        x[2, :] = -np.inf                        # all -inf: NaN
        x[3, 2:6] = -np.inf                      # some -inf, finite max: zeros (LogSoftmax -inf) there
        x[4, 1], x[4, 9] = np.inf, np.inf        # two +inf
        x[5, 0], x[5, 1] = np.inf, -np.inf
        # row 6 clean
        for op, log in (("Softmax", False), ("LogSoftmax", True)):
            with np.errstate(all="ignore"):
                out.append(mk("nan_%s_%s_rows" % (op.lower(), dt), op, [x], [ref_softmax(x, -1, log)], dt))
                xt = x.T.copy()
                out.append(mk("nan_%s_%s_cols" % (op.lower(), dt), op, [xt], [ref_softmax(xt, 0, log)], dt,
                              attrs={"axis": 0}))
                if dt != "f16":
                    xl = special(rng, (16, 1500), dt, 0.0)
                    xl[1, 700] = np.nan
                    xl[3, 1499] = np.inf
                    xl[5, :] = -np.inf
                    xl[7, 100:900] = -np.inf
                    out.append(mk("nan_%s_%s_long" % (op.lower(), dt), op, [xl], [ref_softmax(xl, -1, log)], dt,
                                  tol=(1e-5, 1e-6) if dt == "f32" else None))
    return out


# ---- MatMul, Gemm, Conv2D -----------------------------------------------------------------------------

def ref_mm(a, b):
    """matmul by broadcast products summed in f64: 0 * inf is NaN, never skipped."""
    a, b = f64(a), f64(b)
    return (a[..., :, :, None] * b[..., None, :, :]).sum(axis=-2)


def ref_conv_exact(x, w, b=None, strides=(1, 1), pads=(0, 0, 0, 0)):
    """Conv2D (group 1) by explicit taps over the valid input only: padding contributes nothing."""
    x, w = f64(x), f64(w)
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    oh, _ = window(h, kh, strides[0], 1, pads[0], pads[2])
    ow, _ = window(wd, kw, strides[1], 1, pads[1], pads[3])
    y = np.zeros((n, oc, oh, ow))
    for yh in range(oh):
        for yw in range(ow):
            for a in range(kh):
                ih = yh * strides[0] - pads[0] + a
                if ih < 0 or ih >= h:
                    continue
                for bb in range(kw):
                    iw = yw * strides[1] - pads[1] + bb
                    if iw < 0 or iw >= wd:
                        continue
                    y[:, :, yh, yw] += (x[:, None, :, ih, iw] * w[None, :, :, a, bb]).sum(axis=2)
    if b is not None:
        y += f64(b)[None, :, None, None]
    return y


def gemm_cases(rng):
    out = []
    with np.errstate(all="ignore"):
        for dt in ("f32", "f64", "f16"):
            # small (C loops / small-matrix paths) and large (oneDNN's JIT GEMM with its blocking)
            for tag, (m, k, n) in (("small", (5, 17, 9)), ("large", (64, 96, 80))):
                if dt == "f16" and tag == "large":
                    continue
                frac = 0.004 if tag == "large" else 0.05
                a = special(rng, (m, k), dt, frac)
                b = rng.uniform(-1, 1, (k, n)).astype(NP[dt])
                b[0, :] = 0.0                               # 0 * inf = NaN where a[:, 0] is infinite
                a[:, 0] = 0.0
                a[1, 0] = np.inf
                tol = (1e-4, 1e-4) if dt == "f32" else (1e-2, 1e-2) if dt == "f16" else None
                out.append(mk("nan_matmul_a_%s_%s" % (dt, tag), "MatMul", [a, b], [ref_mm(a, b)], dt, tol=tol))
                bs = special(rng, (k, n), dt, frac)
                aa = rng.uniform(-1, 1, (m, k)).astype(NP[dt])
                out.append(mk("nan_matmul_b_%s_%s" % (dt, tag), "MatMul", [aa, bs], [ref_mm(aa, bs)], dt, tol=tol))
                out.append(mk("nan_matmul_tb_%s_%s" % (dt, tag), "MatMul", [a, b.T.copy()], [ref_mm(a, b)], dt, tol=tol,
                              attrs={"transpose_b": 1}))
                c = special(rng, (n,), dt, 0.2)
                out.append(mk("nan_gemm_%s_%s" % (dt, tag), "Gemm", [a, bs, c],
                              [0.5 * ref_mm(a, bs) + 2.0 * f64(c)], dt, tol=tol, attrs={"alpha": 0.5, "beta": 2.0}))
                out.append(mk("nan_gemm_transb_%s_%s" % (dt, tag), "Gemm", [a, bs.T.copy()], [ref_mm(a, bs)], dt,
                              tol=tol, attrs={"transB": 1}))
            ab = special(rng, (2, 3, 6, 7), dt, 0.05)
            bb = special(rng, (7, 4), dt, 0.05)
            out.append(mk("nan_matmul_batched_%s" % dt, "MatMul", [ab, bb], [ref_mm(ab, bb)], dt,
                          tol=(1e-2, 1e-2) if dt == "f16" else None))
    return out


def conv_cases(rng):
    out = []
    with np.errstate(all="ignore"):
        for dt in ("f32", "f64", "f16"):
            tol = (1e-4, 1e-4) if dt == "f32" else (1e-2, 1e-2) if dt == "f16" else None
            for tag, xs, ws in (("small", (1, 3, 6, 7), (4, 3, 3, 3)), ("large", (2, 16, 20, 20), (32, 16, 3, 3))):
                if dt == "f16" and tag == "large":
                    continue
                frac = 0.002 if tag == "large" else 0.03
                x = special(rng, xs, dt, frac)
                w = rng.uniform(-1, 1, ws).astype(NP[dt])
                bias = rng.uniform(-1, 1, (ws[0],)).astype(NP[dt])
                pads = (1, 1, 1, 1)
                at = {"pads": list(pads)}
                out.append(mk("nan_conv_x_%s_%s" % (dt, tag), "Conv2D", [x, w], [ref_conv_exact(x, w, pads=pads)], dt,
                              attrs=at, tol=tol))
                out.append(mk("nan_conv_x_bias_%s_%s" % (dt, tag), "Conv2D", [x, w, bias],
                              [ref_conv_exact(x, w, bias, pads=pads)], dt, attrs=at, tol=tol))
                # NaN / Inf weights and bias: unpadded (see the module docstring)
                xc = rng.uniform(-1, 1, xs).astype(NP[dt])
                wn = special(rng, ws, dt, 0.02)
                bn = bias.copy()
                bn[1] = np.nan
                bn[2] = np.inf
                out.append(mk("nan_conv_w_%s_%s" % (dt, tag), "Conv2D", [xc, wn, bn], [ref_conv_exact(xc, wn, bn)], dt,
                              tol=tol))
                out.append(mk("nan_conv_w_s2_%s_%s" % (dt, tag), "Conv2D", [xc, wn], [ref_conv_exact(xc, wn, strides=(2, 2))],
                              dt, attrs={"strides": [2, 2]}, tol=tol))
            # a 1x1 convolution (oneDNN's GEMM-like path) with the NaN pixel of the model test
            x = rng.uniform(-1, 1, (1, 8, 9, 9)).astype(NP[dt])
            x[0, 3, 4, 4] = np.nan
            x[0, 5, 0, 0] = np.inf
            w = rng.uniform(-1, 1, (6, 8, 1, 1)).astype(NP[dt])
            out.append(mk("nan_conv_1x1_%s" % dt, "Conv2D", [x, w], [ref_conv_exact(x, w)], dt, tol=tol))
        # depthwise 3x3 (the CPU's direct kernel on plain NCHW f32): NaN/Inf inputs through padded windows,
        # and NaN/Inf weights with padding, where a padded tap must add nothing (not 0 x Inf)
        for s in (1, 2):
            x = special(rng, (2, 10, 9, 17), "f32", 0.02)
            w = rng.uniform(-1, 1, (10, 1, 3, 3)).astype(np.float32)
            b = rng.uniform(-1, 1, (10,)).astype(np.float32)
            at = {"group": 10, "pads": [1, 1, 1, 1], "strides": [s, s]}
            out.append(mk("nan_conv_dw_x_s%d" % s, "Conv2D", [x, w, b], [ref_dw_exact(x, w, b, (s, s), (1, 1, 1, 1))],
                          "f32", attrs=at, tol=(1e-4, 1e-4)))
            xc = rng.uniform(-1, 1, (2, 10, 9, 17)).astype(np.float32)
            wn = w.copy()
            wn[3, 0, 0, 0] = np.inf     # a corner tap: padded for the first row and column
            wn[6, 0, 2, 1] = np.nan     # a bottom tap: padded for the last row
            wn[8, 0, 1, 2] = -np.inf
            out.append(mk("nan_conv_dw_w_s%d" % s, "Conv2D", [xc, wn, b], [ref_dw_exact(xc, wn, b, (s, s), (1, 1, 1, 1))],
                          "f32", attrs=at, tol=(1e-4, 1e-4)))
    return out


def ref_dw_exact(x, w, b, strides, pads):
    """Depthwise Conv2D (group = channels) channel by channel through ref_conv_exact."""
    ys = [ref_conv_exact(x[:, c:c + 1], w[c:c + 1], None if b is None else b[c:c + 1], strides, pads)
          for c in range(x.shape[1])]
    return np.concatenate(ys, axis=1)


def rnn_cases(rng):
    """RNN with the Relu activation: a NaN in one batch row's input makes that row's hidden state NaN from
    then on (numpy.maximum(NaN, 0) is NaN), the other row stays finite."""
    from cases_onnx2 import ref_rnn
    out = []
    X = rng.uniform(-1, 1, (4, 2, 3)).astype(np.float32)
    X[1, 0, 2] = np.nan
    X[2, 1, 0] = np.inf
    W, R = rng.uniform(-1, 1, (1, 5, 3)).astype(np.float32), rng.uniform(-0.5, 0.5, (1, 5, 5)).astype(np.float32)
    B = rng.uniform(-1, 1, (1, 10)).astype(np.float32)
    ref = ref_rnn("RNN", X, W, R, B=B, acts=["Relu"])
    out.append(Case("nan_rnn_relu", "RNN", [X, W, R, B], ref, attrs={"activations": "Relu"}, rtol=1e-5, atol=1e-5))
    return out


def cases(rng):
    out = []
    with np.errstate(all="ignore"):
        for gen in (elementwise_cases, pool_cases, reduce_cases, softmax_cases, gemm_cases, conv_cases, rnn_cases):
            out.extend(gen(rng))
    return out
