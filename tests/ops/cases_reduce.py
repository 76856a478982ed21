"""Cases for the reduce group: Reduce*, ArgMax/ArgMin, Softmax/LogSoftmax, BatchNormalization,
FusedBatchNorm and FusedBatchNormGrad (training BatchNorm), LayerNormalization, Dropout. References are numpy re-implementations of the ONNX reference ops.

Documented choices where numpy has no answer: ReduceMax/ReduceMin over an empty set give -inf/+inf
for floats and the dtype's lowest/highest value for ints (ONNX); ReduceMean over an empty set is NaN
for floats; ArgMax/ArgMin over an empty axis is an error."""
import warnings

import numpy as np

from opcase import Case

RED_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2"]


def bf16_round(x):
    """Rounds f32 values to the nearest bf16 (ties to even), returned as f32."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def ref_reduce(op, x, axes=None, keepdims=1, noop=0):
    if axes is None or len(axes) == 0:
        if noop:
            return x.copy()
        ax = None
    else:
        ax = tuple(int(a) for a in axes)
    kd = bool(keepdims)
    isf = x.dtype.kind == "f"
    xd = x.astype(np.float64) if isf else x.astype(np.int64)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        if op == "ReduceSum":
            r = np.sum(xd, axis=ax, keepdims=kd)
        elif op == "ReduceMean":
            r = np.mean(xd.astype(np.float64), axis=ax, keepdims=kd)
            if not isf:
                r = np.trunc(r)
        elif op == "ReduceMax":
            init = -np.inf if isf else np.iinfo(x.dtype).min
            r = np.max(xd, axis=ax, keepdims=kd, initial=init)
        elif op == "ReduceMin":
            init = np.inf if isf else np.iinfo(x.dtype).max
            r = np.min(xd, axis=ax, keepdims=kd, initial=init)
        elif op == "ReduceProd":
            r = np.prod(xd, axis=ax, keepdims=kd)
        elif op == "ReduceL2":
            r = np.sqrt(np.sum(xd.astype(np.float64) ** 2, axis=ax, keepdims=kd))
            if not isf:
                r = np.trunc(r)
        else:
            raise ValueError(op)
    return np.asarray(r).astype(x.dtype)


def ref_arg(is_max, x, axis=0, keepdims=1, last=0):
    f = np.argmax if is_max else np.argmin
    if last:
        xf = np.flip(x, axis)
        r = x.shape[axis] - 1 - f(xf, axis=axis)
    else:
        r = f(x, axis=axis)
    if keepdims:
        r = np.expand_dims(r, axis)
    return r.astype(np.int64)


def ref_softmax(x, axis=-1, log=False):
    xd = x.astype(np.float64)
    m = np.max(xd, axis=axis, keepdims=True)
    with np.errstate(all="ignore"):
        e = np.exp(xd - m)
        s = np.sum(e, axis=axis, keepdims=True)
        r = (xd - m - np.log(s)) if log else e / s
    return r


def ref_batchnorm(x, scale, b, mean, var, eps=1e-5):
    sh = [1, -1] + [1] * (x.ndim - 2)
    xd = x.astype(np.float64)
    p = [np.asarray(t, np.float64).reshape(sh) for t in (scale, b, mean, var)]
    return (xd - p[2]) / np.sqrt(p[3] + eps) * p[0] + p[1]


def ref_layernorm(x, scale, b, axis=-1, eps=1e-5):
    a = axis % x.ndim
    axes = tuple(range(a, x.ndim))
    xd = x.astype(np.float64)
    mean = xd.mean(axis=axes, keepdims=True)
    var = ((xd - mean) ** 2).mean(axis=axes, keepdims=True)
    inv = 1.0 / np.sqrt(var + eps)
    y = (xd - mean) * inv * np.asarray(scale, np.float64)
    if b is not None:
        y = y + np.asarray(b, np.float64)
    return y, mean.astype(np.float32), inv.astype(np.float32)


def rand(rng, shape, dtype=np.float32, lo=-2.0, hi=2.0):
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(int(lo), info.min), min(int(hi), info.max) + 1, size=shape).astype(dtype)
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def axes_in(axes):
    return None if axes is None else np.array(axes, dtype=np.int64)


def reduce_cases(rng):
    out = []
    x3 = rand(rng, (3, 4, 5))
    axes_list = [None, [1], [-1], [0], [0, 2], [-3, -2], [0, 1, 2], [2, 0]]
    for op in RED_OPS:
        lo, hi = (0.5, 1.5) if op == "ReduceProd" else (-2.0, 2.0)
        x = rand(rng, (3, 4, 5), lo=lo, hi=hi)
        for i, axes in enumerate(axes_list):
            for kd in (0, 1):
                nm = "%s_f32_ax%s_kd%d" % (op, "all" if axes is None else "_".join(str(a) for a in axes), kd)
                nm = nm.replace("-", "m")
                inputs = [x] if axes is None else [x, axes_in(axes)]
                out.append(Case(nm, op, inputs, [ref_reduce(op, x, axes, kd)], attrs={"keepdims": kd},
                                const=[1]))
        # axes as an INTS attribute
        out.append(Case(op + "_f32_attr_axes", op, [x], [ref_reduce(op, x, [0, -1], 1)],
                        attrs={"axes": [0, -1]}))
        # axes fed at run time: shape unknown while building
        out.append(Case(op + "_f32_fed_axes", op, [x, axes_in([1, 2])], [ref_reduce(op, x, [1, 2], 0)],
                        attrs={"keepdims": 0}))
        # 4-D with a non-contiguous axis set, vertical and horizontal mixes
        x4 = rand(rng, (2, 3, 4, 5), lo=lo, hi=hi)
        for axes in ([1, 3], [0, 2], [0, 1, 3], [1, 2]):
            out.append(Case("%s_f32_4d_ax%s" % (op, "".join(str(a) for a in axes)), op, [x4, axes_in(axes)],
                            [ref_reduce(op, x4, axes, 1)], const=[1]))
        if op in ("ReduceSum", "ReduceMean"):
            # short horizontal runs (the kernel's plain per-run loop): a BatchNorm gradient's sum over N, H, W
            # of 2x2 maps, with NaN and inf in some channels; and few outputs over many runs of 16, which
            # the kernel splits into parts that start mid-run
            xb = rand(rng, (32, 16, 2, 2))
            xb[3, 2, 1, 0], xb[7, 5, 0, 1], xb[9, 5, 1, 1], xb[0, 9, 0, 0] = np.nan, np.inf, -np.inf, np.inf
            out.append(Case("%s_f32_short_runs_nan_inf" % op, op, [xb, axes_in([0, 2, 3])],
                            [ref_reduce(op, xb, [0, 2, 3], 1)], const=[1], rtol=1e-5, atol=1e-5))
            xp = rand(rng, (4099, 2, 16))
            out.append(Case("%s_f32_short_runs_parts" % op, op, [xp, axes_in([0, 2])], [ref_reduce(op, xp, [0, 2], 0)],
                            attrs={"keepdims": 0}, const=[1], rtol=1e-5, atol=1e-4))
        if op in ("ReduceSum", "ReduceMean", "ReduceL2"):
            # f32 runs of medium length (33 to 256: k_reduce.c's 8-lane loop): a global average pool over 7x7
            # maps, runs of 33 and of 256, NaN and inf in some of them
            for name, shape in (("gap7", (2, 64, 7, 7)), ("run33", (5, 3, 33)), ("run256", (3, 2, 256))):
                xm = rand(rng, shape)
                xm.reshape(-1)[[5, 400, 777 % xm.size]] = [np.nan, np.inf, -np.inf]
                ax = [2, 3] if len(shape) == 4 else [2]
                out.append(Case("%s_f32_mid_%s" % (op, name), op, [xm, axes_in(ax)], [ref_reduce(op, xm, ax, 0)],
                                attrs={"keepdims": 0}, const=[1], rtol=1e-5, atol=1e-5))
        # dtypes
        xd = rand(rng, (4, 6), np.float64, lo, hi)
        out.append(Case(op + "_f64", op, [xd, axes_in([1])], [ref_reduce(op, xd, [1], 0)],
                        attrs={"keepdims": 0}, const=[1]))
        xh = rand(rng, (4, 6), np.float16, 0.5 if op == "ReduceProd" else 0.0, hi)
        out.append(Case(op + "_f16", op, [xh, axes_in([0])], [ref_reduce(op, xh, [0], 1)], const=[1],
                        rtol=4e-3, atol=1e-3))
        xb = bf16_round(rand(rng, (4, 6), np.float32, 0.5 if op == "ReduceProd" else 0.0, hi))
        out.append(Case(op + "_bf16", op, [xb, axes_in([1])], [ref_reduce(op, xb, [1], 1)], const=[1],
                        feed_dtype={0: "bf16"}, rtol=2e-2, atol=1e-2))
        if op in ("ReduceSum", "ReduceMean", "ReduceL2"):
            # bf16 summed in place over long runs (k_reduce.c's hsum_bf16): a convolution's bias gradient
            # over N, H, W, runs of 99 and of 4900 (longer than one f32 block of 4096), NaN and inf in two
            # channels
            for name, shape in (("runs", (3, 5, 9, 11)), ("long_runs", (2, 3, 70, 70))):
                xl = bf16_round(rand(rng, shape, np.float32, lo, hi))
                xl[1, 1, 2, 3], xl[0, 2, 4, 5], xl[1, 2, 0, 0] = np.nan, np.inf, np.inf
                out.append(Case("%s_bf16_%s_nan_inf" % (op, name), op, [xl, axes_in([0, 2, 3])],
                                [ref_reduce(op, xl, [0, 2, 3], 0)], attrs={"keepdims": 0}, const=[1],
                                feed_dtype={0: "bf16"}, rtol=2e-2, atol=2e-2))
        ilo, ihi = (-3, 3) if op == "ReduceProd" else (-100, 100)
        for dt in (np.int32, np.int64):
            xi = rand(rng, (3, 5, 4), dt, ilo, ihi)
            out.append(Case("%s_%s" % (op, np.dtype(dt).name), op, [xi, axes_in([1])],
                            [ref_reduce(op, xi, [1], 0)], attrs={"keepdims": 0}, const=[1]))
            out.append(Case("%s_%s_all" % (op, np.dtype(dt).name), op, [xi], [ref_reduce(op, xi, None, 1)]))
        xu = rand(rng, (5, 7), np.uint8, 0, 3 if op == "ReduceProd" else 30)
        out.append(Case(op + "_u8", op, [xu, axes_in([0])], [ref_reduce(op, xu, [0], 1)], const=[1]))
        # rank 0
        xs = np.array(1.5 if op != "ReduceMin" else -0.25, dtype=np.float32)
        out.append(Case(op + "_rank0", op, [xs], [ref_reduce(op, xs, None, 1)]))
        # empty reduced dim, empty kept dim
        xe = np.zeros((0, 3), np.float32)
        out.append(Case(op + "_empty_reduced", op, [xe, axes_in([0])], [ref_reduce(op, xe, [0], 1)],
                        const=[1]))
        out.append(Case(op + "_empty_kept", op, [xe, axes_in([1])], [ref_reduce(op, xe, [1], 0)],
                        attrs={"keepdims": 0}, const=[1]))
        if op in ("ReduceMax", "ReduceMin"):
            xei = np.zeros((2, 0), np.int32)
            out.append(Case(op + "_empty_i32", op, [xei, axes_in([1])], [ref_reduce(op, xei, [1], 1)],
                            const=[1]))
        # noop_with_empty_axes
        out.append(Case(op + "_noop_empty_axes", op, [x, np.zeros((0,), np.int64)], [x.copy()],
                        attrs={"noop_with_empty_axes": 1}, const=[1]))
        out.append(Case(op + "_empty_axes_reduces_all", op, [x, np.zeros((0,), np.int64)],
                        [ref_reduce(op, x, None, 0)], attrs={"keepdims": 0}, const=[1]))
        # size-1 reduced dims only
        x1 = rand(rng, (3, 1, 4), lo=lo, hi=hi)
        out.append(Case(op + "_size1_axis", op, [x1, axes_in([1])], [ref_reduce(op, x1, [1], 0)],
                        attrs={"keepdims": 0}, const=[1]))
        # errors
        out.append(Case(op + "_err_axis_range", op, [x, axes_in([3])], error=("INVALID_ARGUMENT", "out of range"),
                        const=[1]))
        out.append(Case(op + "_err_dup_axes", op, [x, axes_in([1, -2])], error=("INVALID_ARGUMENT", "repeated"),
                        const=[1]))
        out.append(Case(op + "_err_both_axes", op, [x, axes_in([1])], attrs={"axes": [1]},
                        error=("INVALID_ARGUMENT", "both"), const=[1]))
        if op in ("ReduceMax", "ReduceMin"):
            # bool max / min are any / all (ONNX opset 20), including over an empty set
            b = rng.random((3, 4)) < 0.5
            f = np.any if op == "ReduceMax" else np.all
            out.append(Case(op + "_bool_axis1", op, [b], [f(b, axis=1, keepdims=True)], attrs={"axes": [1]}))
            out.append(Case(op + "_bool_all", op, [b], [f(b, keepdims=True)]))
            e = np.zeros((2, 0), np.bool_)
            out.append(Case(op + "_bool_empty", op, [e], [f(e, axis=1, keepdims=False)], attrs={"axes": [1], "keepdims": 0}))
        else:
            out.append(Case(op + "_err_bool", op, [np.ones((2, 2), np.bool_)], error=("INVALID_ARGUMENT", "bool")))
        out.append(Case(op + "_err_axes_dtype", op, [x, np.array([1.0], np.float32)],
                        error=("INVALID_ARGUMENT", "axes"), const=[1]))
        out.append(Case(op + "_err_fed_axis_range", op, [x, axes_in([5])],
                        error=("INVALID_ARGUMENT", "out of range")))

    # large: 1024x1024 sum over each axis and over all; crosses the parallel threshold
    big = rng.uniform(0, 1, size=(1024, 1024)).astype(np.float32)
    for axes, nm in (([0], "ax0"), ([1], "ax1"), (None, "all")):
        inputs = [big] if axes is None else [big, axes_in(axes)]
        out.append(Case("ReduceSum_large_" + nm, "ReduceSum", inputs, [ref_reduce("ReduceSum", big, axes, 0)],
                        attrs={"keepdims": 0}, const=[1], rtol=1e-5, atol=1e-4))
    out.append(Case("ReduceMax_large_ax0", "ReduceMax", [big, axes_in([0])], [ref_reduce("ReduceMax", big, [0], 1)],
                    const=[1]))
    out.append(Case("ReduceMin_large_all", "ReduceMin", [big], [ref_reduce("ReduceMin", big, None, 1)]))
    # mean over HW of NCHW (the global-average-pool pattern)
    hw = rng.normal(size=(4, 64, 32, 32)).astype(np.float32)
    out.append(Case("ReduceMean_large_hw", "ReduceMean", [hw, axes_in([2, 3])],
                    [ref_reduce("ReduceMean", hw, [2, 3], 1)], const=[1], rtol=1e-5, atol=1e-6))
    out.append(Case("ReduceL2_large_c", "ReduceL2", [hw, axes_in([1])], [ref_reduce("ReduceL2", hw, [1], 1)],
                    const=[1]))
    # one long column per output (vertical, few outputs: split reductions)
    tall = rng.uniform(0, 1, size=(100000, 4)).astype(np.float32)
    out.append(Case("ReduceSum_large_tall", "ReduceSum", [tall, axes_in([0])],
                    [ref_reduce("ReduceSum", tall, [0], 0)], attrs={"keepdims": 0}, const=[1], rtol=1e-5))
    ti = rng.integers(-1000, 1000, size=(300000,)).astype(np.int32)
    out.append(Case("ReduceSum_large_i32", "ReduceSum", [ti], [ref_reduce("ReduceSum", ti, None, 0)],
                    attrs={"keepdims": 0}))
    # NaN propagates through max/min
    xn = rand(rng, (3, 4))
    xn[1, 2] = np.nan
    for op in ("ReduceMax", "ReduceMin", "ReduceSum"):
        out.append(Case(op + "_nan", op, [xn, axes_in([1])], [ref_reduce(op, xn, [1], 1)], const=[1]))
    xw = rand(rng, (2, 3, 70), lo=-5, hi=5)
    xw[0, 1, 40] = np.nan
    out.append(Case("ReduceMax_nan_long", "ReduceMax", [xw, axes_in([0, 2])],
                    [ref_reduce("ReduceMax", xw, [0, 2], 0)], attrs={"keepdims": 0}, const=[1]))
    return out


def arg_cases(rng):
    out = []
    for op, is_max in (("ArgMax", True), ("ArgMin", False)):
        x = rand(rng, (3, 4, 5))
        for axis in (0, 1, 2, -1, -3):
            for kd in (0, 1):
                out.append(Case("%s_f32_ax%s_kd%d" % (op, str(axis).replace("-", "m"), kd), op, [x],
                                [ref_arg(is_max, x, axis, kd)], attrs={"axis": axis, "keepdims": kd}))
        # ties: small ints, first vs last index, rows (inner 1) and columns
        xt = rand(rng, (4, 6, 3), np.int32, 0, 2)
        for axis in (1, 2):
            for last in (0, 1):
                out.append(Case("%s_ties_ax%d_last%d" % (op, axis, last), op, [xt],
                                [ref_arg(is_max, xt, axis, 1, last)],
                                attrs={"axis": axis, "select_last_index": last}))
        for dt in (np.float64, np.float16, np.int64, np.uint8, np.int8, np.int16):
            xd = rand(rng, (5, 7), dt, -50 if np.dtype(dt).kind != "u" else 0, 50)
            out.append(Case("%s_%s" % (op, np.dtype(dt).name), op, [xd], [ref_arg(is_max, xd, 1, 0)],
                            attrs={"axis": 1, "keepdims": 0}))
        xb = bf16_round(rand(rng, (5, 7)))
        out.append(Case(op + "_bf16", op, [xb], [ref_arg(is_max, xb, 0, 1)], attrs={"axis": 0},
                        feed_dtype={0: "bf16"}))
        xn = rand(rng, (3, 6))
        xn[1, 2] = np.nan
        xn[1, 4] = np.nan
        xn[2, 0] = np.nan
        out.append(Case(op + "_nan_rows", op, [xn], [ref_arg(is_max, xn, 1, 1)], attrs={"axis": 1}))
        out.append(Case(op + "_nan_cols", op, [xn.T.copy()], [ref_arg(is_max, xn.T, 0, 1)], attrs={"axis": 0}))
        x1 = np.array([3.0], np.float32)
        out.append(Case(op + "_rank1", op, [x1], [ref_arg(is_max, x1, 0, 0)], attrs={"keepdims": 0}))
        xe = np.zeros((0, 4), np.float32)
        out.append(Case(op + "_empty_kept", op, [xe], [ref_arg(is_max, xe, 1, 1)], attrs={"axis": 1}))
        big = rng.normal(size=(300, 1100)).astype(np.float32)
        out.append(Case(op + "_large_rows", op, [big], [ref_arg(is_max, big, 1, 0)],
                        attrs={"axis": -1, "keepdims": 0}))
        out.append(Case(op + "_large_cols", op, [big], [ref_arg(is_max, big, 0, 1)], attrs={"axis": 0}))
        out.append(Case(op + "_err_empty_axis", op, [xe], attrs={"axis": 0},
                        error=("INVALID_ARGUMENT", "empty axis")))
        out.append(Case(op + "_err_axis_range", op, [x], attrs={"axis": 3},
                        error=("INVALID_ARGUMENT", "out of range")))
        out.append(Case(op + "_err_rank0", op, [np.array(1.0, np.float32)],
                        error=("INVALID_ARGUMENT", "out of range")))
        out.append(Case(op + "_err_bool", op, [np.ones((2, 2), np.bool_)], error=("INVALID_ARGUMENT", "bool")))
    return out


def softmax_cases(rng):
    out = []
    for op, log in (("Softmax", False), ("LogSoftmax", True)):
        x = rand(rng, (3, 4, 5), lo=-5, hi=5)
        for axis in (0, 1, 2, -1, -2):
            out.append(Case("%s_f32_ax%s" % (op, str(axis).replace("-", "m")), op, [x],
                            [ref_softmax(x, axis, log).astype(np.float32)], attrs={"axis": axis}))
        out.append(Case(op + "_default_axis", op, [x], [ref_softmax(x, -1, log).astype(np.float32)]))
        xl = rand(rng, (2, 3, 40, 37), lo=-30, hi=30)
        out.append(Case(op + "_4d_ax1", op, [xl], [ref_softmax(xl, 1, log).astype(np.float32)],
                        attrs={"axis": 1}, atol=1e-6))
        out.append(Case(op + "_4d_long_rows", op, [xl.reshape(6, 1480)],
                        [ref_softmax(xl.reshape(6, 1480), -1, log).astype(np.float32)], atol=1e-6))
        xd = rand(rng, (4, 6), np.float64, -5, 5)
        for axis in (0, 1):
            out.append(Case("%s_f64_ax%d" % (op, axis), op, [xd], [ref_softmax(xd, axis, log)], attrs={"axis": axis}))
        xh = rand(rng, (4, 6), np.float16, -3, 3)
        out.append(Case(op + "_f16", op, [xh], [ref_softmax(xh, -1, log).astype(np.float16)], rtol=4e-3, atol=2e-3))
        xb = bf16_round(rand(rng, (4, 6), np.float32, -3, 3))
        out.append(Case(op + "_bf16", op, [xb], [ref_softmax(xb, 0, log).astype(np.float32)], attrs={"axis": 0},
                        feed_dtype={0: "bf16"}, rtol=2e-2, atol=1e-2))
        # masked logits: -inf gets exactly zero weight (LogSoftmax: -inf)
        xm = rand(rng, (3, 40))
        xm[:, 5:9] = -np.inf
        xm[1, 30:] = -np.inf
        out.append(Case(op + "_masked", op, [xm], [ref_softmax(xm, -1, log).astype(np.float32)]))
        out.append(Case(op + "_masked_cols", op, [xm.T.copy()], [ref_softmax(xm.T, 0, log).astype(np.float32)],
                        attrs={"axis": 0}))
        # a large range: stability needs the max subtracted
        xs = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1002.0, -1001.0]], np.float32)
        out.append(Case(op + "_stable", op, [xs], [ref_softmax(xs, -1, log).astype(np.float32)]))
        out.append(Case(op + "_rank0", op, [np.array(2.5, np.float32)],
                        [ref_softmax(np.array([2.5]), -1, log).reshape(()).astype(np.float32)]))
        out.append(Case(op + "_empty", op, [np.zeros((0, 5), np.float32)], [np.zeros((0, 5), np.float32)]))
        big = rng.normal(scale=3, size=(400, 1000)).astype(np.float32)
        # LogSoftmax is x - logsumexp with both near 12 here, where one f32 ulp is 1e-6: its error is a
        # few ulps of them, not of the (small) result
        at = 4e-6 if log else 1e-6
        out.append(Case(op + "_large_rows", op, [big], [ref_softmax(big, -1, log).astype(np.float32)], atol=at))
        out.append(Case(op + "_large_cols", op, [big], [ref_softmax(big, 0, log).astype(np.float32)],
                        attrs={"axis": 0}, atol=at))
        out.append(Case(op + "_err_axis", op, [x], attrs={"axis": 3}, error=("INVALID_ARGUMENT", "out of range")))
        out.append(Case(op + "_err_int", op, [np.ones((2, 2), np.int32)], error=("INVALID_ARGUMENT", "i32")))
    return out


def bn_cases(rng):
    out = []

    def params(c, dt=np.float32):
        return [rand(rng, (c,), dt, 0.5, 1.5), rand(rng, (c,), dt, -1, 1), rand(rng, (c,), dt, -1, 1),
                rand(rng, (c,), dt, 0.1, 2.0)]

    op = "BatchNormalization"
    x2 = rand(rng, (8, 5))
    p = params(5)
    out.append(Case("BatchNormalization_2d", op, [x2] + p, [ref_batchnorm(x2, *p).astype(np.float32)]))
    x4 = rand(rng, (2, 3, 4, 5))
    p = params(3)
    out.append(Case("BatchNormalization_4d", op, [x4] + p, [ref_batchnorm(x4, *p).astype(np.float32)]))
    out.append(Case("BatchNormalization_eps", op, [x4] + p, [ref_batchnorm(x4, *p, eps=0.1).astype(np.float32)],
                    attrs={"epsilon": 0.1}))
    x3 = rand(rng, (2, 4, 7))
    p = params(4)
    out.append(Case("BatchNormalization_3d_const_params", op, [x3] + p, [ref_batchnorm(x3, *p).astype(np.float32)],
                    const=[1, 2, 3, 4]))
    xd = rand(rng, (2, 3, 4), np.float64)
    p = params(3, np.float64)
    out.append(Case("BatchNormalization_f64", op, [xd] + p, [ref_batchnorm(xd, *p)]))
    xh = rand(rng, (2, 3, 4), np.float16)
    p = params(3, np.float16)
    out.append(Case("BatchNormalization_f16", op, [xh] + p, [ref_batchnorm(xh, *p).astype(np.float16)],
                    rtol=4e-3, atol=4e-3))
    xb = bf16_round(rand(rng, (2, 3, 4)))
    p = [bf16_round(t) for t in params(3)]
    out.append(Case("BatchNormalization_bf16", op, [xb] + p, [ref_batchnorm(xb, *p).astype(np.float32)],
                    feed_dtype={i: "bf16" for i in range(5)}, rtol=2e-2, atol=2e-2))
    xe = np.zeros((0, 3, 2), np.float32)
    p = params(3)
    out.append(Case("BatchNormalization_empty", op, [xe] + p, [xe.copy()]))
    big = rand(rng, (8, 16, 48, 48))
    p = params(16)
    out.append(Case("BatchNormalization_large", op, [big] + p, [ref_batchnorm(big, *p).astype(np.float32)]))
    p = params(3)
    out.append(Case("BatchNormalization_err_scale_dtype", op, [x4, p[0].astype(np.float64)] + p[1:],
                    error=("INVALID_ARGUMENT", "scale")))
    out.append(Case("BatchNormalization_err_param_len", op, [x4] + p[:3] + [rand(rng, (4,), lo=0.1)],
                    error=("INVALID_ARGUMENT", "input_var")))
    out.append(Case("BatchNormalization_err_rank1", op, [rand(rng, (3,))] + p, error=("INVALID_ARGUMENT", "rank")))
    out.append(Case("BatchNormalization_err_training", op, [x4] + p, attrs={"training_mode": 1},
                    error=("UNIMPLEMENTED", "training mode not supported yet")))
    return out


def ln_cases(rng):
    out = []
    op = "LayerNormalization"
    x = rand(rng, (4, 6, 8))
    s8, b8 = rand(rng, (8,), lo=0.5, hi=1.5), rand(rng, (8,))
    y, m, v = ref_layernorm(x, s8, b8, -1)
    out.append(Case("LayerNormalization_axm1", op, [x, s8, b8], [y.astype(np.float32), m, v], atol=1e-5))
    out.append(Case("LayerNormalization_y_only", op, [x, s8, b8], [y.astype(np.float32)], atol=1e-5))
    y, m, v = ref_layernorm(x, s8, None, -1)
    out.append(Case("LayerNormalization_no_bias", op, [x, s8], [y.astype(np.float32), m, v], atol=1e-5))
    out.append(Case("LayerNormalization_none_bias", op, [x, s8, None], [y.astype(np.float32)], atol=1e-5))
    s68, b68 = rand(rng, (6, 8), lo=0.5, hi=1.5), rand(rng, (6, 8))
    y, m, v = ref_layernorm(x, s68, b68, -2)
    out.append(Case("LayerNormalization_axm2", op, [x, s68, b68], [y.astype(np.float32), m, v],
                    attrs={"axis": -2}, atol=1e-5))
    y, m, v = ref_layernorm(x, s8, b8, 1)
    out.append(Case("LayerNormalization_ax1_bcast_scale", op, [x, s8, b8], [y.astype(np.float32), m, v],
                    attrs={"axis": 1}, atol=1e-5))
    s_all = rand(rng, (4, 6, 8), lo=0.5, hi=1.5)
    y, m, v = ref_layernorm(x, s_all, None, 0)
    out.append(Case("LayerNormalization_ax0", op, [x, s_all], [y.astype(np.float32), m, v],
                    attrs={"axis": 0}, atol=1e-5))
    y, m, v = ref_layernorm(x, s8, b8, -1, eps=0.5)
    out.append(Case("LayerNormalization_eps", op, [x, s8, b8], [y.astype(np.float32)], attrs={"epsilon": 0.5},
                    atol=1e-5))
    xd = rand(rng, (3, 10), np.float64)
    sd, bd = rand(rng, (10,), np.float64), rand(rng, (10,), np.float64)
    y, m, v = ref_layernorm(xd, sd, bd, -1)
    out.append(Case("LayerNormalization_f64", op, [xd, sd, bd], [y, m, v], rtol=1e-10, atol=1e-12))
    xh = rand(rng, (3, 10), np.float16)
    sh, bh = rand(rng, (10,), np.float16), rand(rng, (10,), np.float16)
    y, m, v = ref_layernorm(xh, sh, bh, -1)
    out.append(Case("LayerNormalization_f16", op, [xh, sh, bh], [y.astype(np.float16)], rtol=4e-3, atol=8e-3))
    xb = bf16_round(rand(rng, (3, 10)))
    sb, bb = bf16_round(rand(rng, (10,))), bf16_round(rand(rng, (10,)))
    y, m, v = ref_layernorm(xb, sb, bb, -1)
    out.append(Case("LayerNormalization_bf16", op, [xb, sb, bb], [y.astype(np.float32)],
                    feed_dtype={0: "bf16", 1: "bf16", 2: "bf16"}, rtol=2e-2, atol=3e-2))
    big = rng.normal(size=(512, 768)).astype(np.float32)
    sbig, bbig = rand(rng, (768,)), rand(rng, (768,))
    y, m, v = ref_layernorm(big, sbig, bbig, -1)
    out.append(Case("LayerNormalization_large", op, [big, sbig, bbig], [y.astype(np.float32), m, v], atol=1e-5))
    # rows past one 4096-value block of the kernel's partial sums, with a tail that is not a whole vector
    lx = (rng.normal(size=(3, 5003)) * 3 + 7).astype(np.float32)
    ls, lb = rand(rng, (5003,)), rand(rng, (5003,))
    y, m, v = ref_layernorm(lx, ls, lb, -1)
    out.append(Case("LayerNormalization_long_rows", op, [lx, ls, lb], [y.astype(np.float32), m, v], atol=1e-5))
    # a large common offset: the centred second pass keeps the variance
    ox = (1000.0 + rng.normal(size=(4, 300))).astype(np.float32)
    os_, ob = rand(rng, (300,)), rand(rng, (300,))
    y, m, v = ref_layernorm(ox, os_, ob, -1)
    out.append(Case("LayerNormalization_offset", op, [ox, os_, ob], [y.astype(np.float32), m, v], atol=2e-4))
    # a NaN or an Inf makes its own row NaN (the mean is NaN or Inf, x - mean NaN somewhere) and no other
    nx = rand(rng, (3, 40))
    nx[0, 33], nx[1, 5] = np.nan, np.inf
    ns, nb = rand(rng, (40,)), rand(rng, (40,))
    with np.errstate(invalid="ignore"):
        y, m, v = ref_layernorm(nx, ns, nb, -1)
    out.append(Case("LayerNormalization_nan_inf", op, [nx, ns, nb], [y.astype(np.float32), m, v], atol=1e-5))
    xe = np.zeros((0, 8), np.float32)
    out.append(Case("LayerNormalization_empty_rows", op, [xe, s8], [xe.copy()]))
    out.append(Case("LayerNormalization_err_scale_dtype", op, [x, s8.astype(np.float64)],
                    error=("INVALID_ARGUMENT", "Scale")))
    out.append(Case("LayerNormalization_err_scale_shape", op, [x, rand(rng, (7,))],
                    error=("INVALID_ARGUMENT", "broadcast")))
    out.append(Case("LayerNormalization_err_axis", op, [x, s8], attrs={"axis": 3},
                    error=("INVALID_ARGUMENT", "out of range")))
    out.append(Case("LayerNormalization_err_int", op, [np.ones((2, 2), np.int32), np.ones((2,), np.int32)],
                    error=("INVALID_ARGUMENT", "i32")))
    return out


def ref_fused_bn(x, scale, offset, eps=1e-5):
    """Training BatchNorm by the batch's statistics over every axis but 1 (biased variance), in f64."""
    ax = (0,) + tuple(range(2, x.ndim))
    sh = [1, -1] + [1] * (x.ndim - 2)
    xd = x.astype(np.float64)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = xd.mean(axis=ax)
        v = ((xd - m.reshape(sh)) ** 2).mean(axis=ax)
        y = (xd - m.reshape(sh)) / np.sqrt(v.reshape(sh) + eps) * np.asarray(scale, np.float64).reshape(sh) \
            + np.asarray(offset, np.float64).reshape(sh)
    return y, m, v


def ref_fused_bn_grad(dy, x, scale, mean, var, dmean=None, dvar=None, eps=1e-5):
    """The gradient of ref_fused_bn's (y, mean, variance) with respect to (x, scale, offset), given dy and
    the gradients dmean and dvar that reach the statistics, derived by hand:
        xhat = (x - m) r, r = 1 / sqrt(v + eps), y = xhat scale + offset
        d_offset = sum dy, d_scale = sum dy xhat
        dx = scale r (dy - mean(dy) - xhat mean(dy xhat)) + dmean / M + dvar 2 (x - m) / M"""
    ax = (0,) + tuple(range(2, x.ndim))
    sh = [1, -1] + [1] * (x.ndim - 2)
    M = x.size // x.shape[1] if x.shape[1] else 0
    f = lambda t: np.asarray(t, np.float64).reshape(sh)
    xd, dyd = x.astype(np.float64), dy.astype(np.float64)
    r = 1 / np.sqrt(f(var) + eps)
    xc = xd - f(mean)
    xhat = xc * r
    dof = dyd.sum(axis=ax)
    dsc = (dyd * xhat).sum(axis=ax)
    dx = f(scale) * r * (dyd - f(dof) / M - xhat * f(dsc) / M)
    if dmean is not None:
        dx = dx + f(dmean) / M
    if dvar is not None:
        dx = dx + f(dvar) * 2 * xc / M
    return dx, dsc, dof


def fused_bn_cases(rng):
    out = []
    op, gop = "FusedBatchNorm", "FusedBatchNormGrad"

    def params(c, dt=np.float32):
        return [rand(rng, (c,), dt, 0.5, 1.5), rand(rng, (c,), dt)]

    def both(name, x, p, dt_out, tol, feed=None, eps=None, stats_grads=False):
        kw = {} if eps is None else {"eps": eps}
        at = {} if eps is None else {"epsilon": eps}
        y, m, v = ref_fused_bn(x, *p, **kw)
        fd = {i: feed for i in range(3)} if feed else None
        out.append(Case(op + "_" + name, op, [x] + p, [t.astype(dt_out) for t in (y, m, v)], attrs=at,
                        rtol=tol, atol=tol, feed_dtype=fd))
        dy = rand(rng, x.shape, x.dtype)
        if feed:
            dy = bf16_round(dy)
        # the statistics fed back at x's dtype, as the forward hands them on
        mv = [t.astype(x.dtype) for t in (m, v)]
        if feed:
            mv = [bf16_round(t) for t in mv]
        gin = [dy, x, p[0]] + mv
        extra = []
        if stats_grads:
            extra = [rand(rng, m.shape, x.dtype), rand(rng, m.shape, x.dtype)]
            if feed:
                extra = [bf16_round(t) for t in extra]
        dx, dsc, dof = ref_fused_bn_grad(dy, x, p[0], *mv, *(extra or [None, None]), **kw)
        gfd = {i: feed for i in range(len(gin + extra))} if feed else None
        out.append(Case(gop + "_" + name, gop, gin + extra, [t.astype(dt_out) for t in (dx, dsc, dof)],
                        attrs=at, rtol=tol, atol=tol * max(1, np.sqrt(x.size / max(1, x.shape[1]))),
                        feed_dtype=gfd))

    both("rank4", rand(rng, (4, 3, 5, 6)), params(3), np.float32, 1e-5)
    both("rank2", rand(rng, (16, 7)), params(7), np.float32, 1e-5)
    both("rank3", rand(rng, (3, 4, 9)), params(4), np.float32, 1e-5, stats_grads=True)
    both("rank5", rand(rng, (2, 3, 2, 3, 4)), params(3), np.float32, 1e-5, eps=0.25)
    both("f64", rand(rng, (5, 4, 3, 3), np.float64), params(4, np.float64), np.float64, 1e-10, stats_grads=True)
    both("f16", rand(rng, (4, 3, 4, 4), np.float16), params(3, np.float16), np.float16, 8e-3)
    both("bf16", bf16_round(rand(rng, (4, 3, 4, 4))), [bf16_round(t) for t in params(3)], np.float32, 3e-2,
         feed="bf16")
    # one value per channel: the variance is 0 and y is the offset (xhat = 0), dx comes from dmean only
    both("one_per_channel", rand(rng, (1, 5, 1, 1)), params(5), np.float32, 1e-5, stats_grads=True)
    both("large", rng.normal(size=(32, 64, 16, 16)).astype(np.float32) * 3 + 1, params(64), np.float32, 1e-4)
    # NaN and Inf stay in the channel they are in
    xn = rand(rng, (4, 3, 2, 2))
    xn[1, 0, 1, 1] = np.nan
    xn[2, 2, 0, 0] = np.inf
    p = params(3)
    y, m, v = ref_fused_bn(xn, *p)
    out.append(Case(op + "_nan_inf", op, [xn] + p, [t.astype(np.float32) for t in (y, m, v)], rtol=1e-5,
                    atol=1e-5))
    # an empty batch: no values per channel, NaN statistics (ReduceMean of nothing), zero parameter gradients
    xe = np.zeros((0, 3, 2), np.float32)
    p = params(3)
    nan3 = np.full((3,), np.nan, np.float32)
    out.append(Case(op + "_empty_batch", op, [xe] + p, [xe.copy(), nan3, nan3]))
    out.append(Case(gop + "_empty_batch", gop, [xe, xe, p[0], nan3, nan3],
                    [xe.copy(), np.zeros(3, np.float32), np.zeros(3, np.float32)]))
    xz = np.zeros((2, 0, 3), np.float32)
    z0 = np.zeros((0,), np.float32)
    out.append(Case(op + "_no_channels", op, [xz, z0, z0], [xz.copy(), z0, z0]))
    # errors name the input at fault
    x4, p = rand(rng, (2, 3, 2, 2)), params(3)
    out.append(Case(op + "_err_rank1", op, [rand(rng, (3,))] + p, error=("INVALID_ARGUMENT", "input x")))
    out.append(Case(op + "_err_scale_len", op, [x4, rand(rng, (4,)), p[1]], error=("INVALID_ARGUMENT", "scale")))
    out.append(Case(op + "_err_offset_dtype", op, [x4, p[0], p[1].astype(np.float64)],
                    error=("INVALID_ARGUMENT", "offset")))
    out.append(Case(op + "_err_epsilon", op, [x4] + p, attrs={"epsilon": -1.0},
                    error=("INVALID_ARGUMENT", "epsilon must be >= 0")))
    out.append(Case(op + "_err_int", op, [np.ones((2, 3), np.int32), np.ones(3, np.int32), np.ones(3, np.int32)],
                    error=("INVALID_ARGUMENT", "i32")))
    st = [rand(rng, (3,)), rand(rng, (3,), lo=0.1)]
    out.append(Case(gop + "_err_dy_shape", gop, [rand(rng, (2, 3, 2, 1)), x4, p[0]] + st,
                    error=("INVALID_ARGUMENT", "dy")))
    out.append(Case(gop + "_err_mean_len", gop, [x4, x4, p[0], rand(rng, (2,)), st[1]],
                    error=("INVALID_ARGUMENT", "batch_mean")))
    out.append(Case(gop + "_err_dvar_dtype", gop, [x4, x4, p[0]] + st + [st[0], st[1].astype(np.float64)],
                    error=("INVALID_ARGUMENT", "d_variance")))
    return out


def dropout_cases(rng):
    out = []
    op = "Dropout"
    x = rand(rng, (3, 4, 5))
    out.append(Case("Dropout_identity", op, [x], [x.copy()]))
    out.append(Case("Dropout_mask", op, [x, np.array(0.3, np.float32)], [x.copy(), np.ones(x.shape, np.bool_)],
                    const=[1]))
    out.append(Case("Dropout_training_false", op, [x, None, np.array(False)],
                    [x.copy(), np.ones(x.shape, np.bool_)], const=[2]))
    xi = rand(rng, (6,), np.int32, -5, 5)
    out.append(Case("Dropout_i32", op, [xi], [xi.copy()]))
    out.append(Case("Dropout_rank0", op, [np.array(1.5, np.float32)], [np.array(1.5, np.float32)]))
    out.append(Case("Dropout_empty", op, [np.zeros((2, 0), np.float32)],
                    [np.zeros((2, 0), np.float32), np.ones((2, 0), np.bool_)]))
    big = rand(rng, (300, 1000))
    out.append(Case("Dropout_large", op, [big], [big.copy()]))
    out.append(Case("Dropout_err_training", op, [x, None, np.array(True)], const=[2],
                    error=("UNIMPLEMENTED", "training mode not supported yet")))
    out.append(Case("Dropout_err_training_fed", op, [x, None, np.array(True)],
                    error=("UNIMPLEMENTED", "training mode not supported yet")))
    out.append(Case("Dropout_err_ratio", op, [x, np.array(1.5, np.float32)], const=[1],
                    error=("INVALID_ARGUMENT", "ratio")))
    out.append(Case("Dropout_err_training_dtype", op, [x, None, np.array(1.0, np.float32)],
                    error=("INVALID_ARGUMENT", "training_mode")))
    return out


def cases(rng):
    out = []
    out += reduce_cases(rng)
    out += arg_cases(rng)
    out += softmax_cases(rng)
    out += bn_cases(rng)
    out += fused_bn_cases(rng)
    out += ln_cases(rng)
    out += dropout_cases(rng)
    return out
