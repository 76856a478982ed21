"""Cases for the convolution and pooling backward ops: Conv2DBackpropInput, Conv2DBackpropFilter,
MaxPool2DGrad, AvgPool2DGrad and GlobalAvgPoolGrad.

References are numpy loops over the ONNX windows (cases_nn.window gives sizes and pads). The conv
references are checked against cases_nn.ref_conv at generation time through the adjoint identity
sum(conv(x, w) * dy) == sum(x * dx) == sum(w * dw), so a wrong reference cannot pass silently.
"""
import numpy as np

from opcase import Case
from cases_nn import bf16_round, ref_conv, window


def err(code, text):
    return (code, text)


def _geo(sx, k, at, ceil_mode=0):
    """Output sizes and (begin, end) pads of both spatial dims."""
    s = at.get("strides", (1, 1))
    d = at.get("dilations", (1, 1))
    p = at.get("pads", (0, 0, 0, 0))
    ap = at.get("auto_pad", "NOTSET")
    oh, ph = window(sx[2], k[0], s[0], d[0], p[0], p[2], ap, ceil_mode)
    ow, pw = window(sx[3], k[1], s[1], d[1], p[1], p[3], ap, ceil_mode)
    return (oh, ow), (ph, pw), s, d


def _taps(o, k, s, d, pb, pe, size):
    """Taps of output position o along one dim: (all inside the padded extent, the ones inside the input)."""
    pos = [o * s - pb + a * d for a in range(k)]
    padded = [q for q in pos if -pb <= q < size + pe]
    return padded, [q for q in padded if 0 <= q < size]


def ref_conv_bp_input(w, dy, sx, at):
    w, dy = w.astype(np.float64), dy.astype(np.float64)
    m, icg, kh, kw = w.shape
    g = at.get("group", 1)
    ocg = m // g
    (oh, ow), (ph, pw), s, d = _geo(sx, (kh, kw), at)
    dx = np.zeros(sx)
    for a in range(kh):
        for b in range(kw):
            for yh in range(oh):
                ih = yh * s[0] - ph[0] + a * d[0]
                if not 0 <= ih < sx[2]:
                    continue
                for yw in range(ow):
                    iw = yw * s[1] - pw[0] + b * d[1]
                    if not 0 <= iw < sx[3]:
                        continue
                    for gi in range(g):
                        dx[:, gi * icg:(gi + 1) * icg, ih, iw] += dy[:, gi * ocg:(gi + 1) * ocg, yh, yw] @ \
                            w[gi * ocg:(gi + 1) * ocg, :, a, b]
    return dx


def ref_conv_bp_filter(x, dy, sw, at):
    x, dy = x.astype(np.float64), dy.astype(np.float64)
    m, icg, kh, kw = sw
    g = at.get("group", 1)
    ocg = m // g
    (oh, ow), (ph, pw), s, d = _geo(x.shape, (kh, kw), at)
    dw = np.zeros(sw)
    for a in range(kh):
        for b in range(kw):
            for yh in range(oh):
                ih = yh * s[0] - ph[0] + a * d[0]
                if not 0 <= ih < x.shape[2]:
                    continue
                for yw in range(ow):
                    iw = yw * s[1] - pw[0] + b * d[1]
                    if not 0 <= iw < x.shape[3]:
                        continue
                    for gi in range(g):
                        dw[gi * ocg:(gi + 1) * ocg, :, a, b] += dy[:, gi * ocg:(gi + 1) * ocg, yh, yw].T @ \
                            x[:, gi * icg:(gi + 1) * icg, ih, iw]
    return dw


def ref_pool_grad(kind, x_or_shape, dy, at):
    """MaxPool2D / AvgPool2D backward. max: dy goes to the window's np.argmax over its valid taps (the first
    NaN, else the first maximum); avg: dy / divisor to every valid tap."""
    sx = x_or_shape.shape if kind == "max" else x_or_shape
    k = at["kernel_shape"]
    (oh, ow), (ph, pw), s, d = _geo(sx, k, at, at.get("ceil_mode", 0))
    dy = dy.astype(np.float64)
    dx = np.zeros(sx)
    n, c = sx[0], sx[1]
    ni, ci = np.meshgrid(np.arange(n), np.arange(c), indexing="ij")
    for yh in range(oh):
        rp, rv = _taps(yh, k[0], s[0], d[0], ph[0], ph[1], sx[2])
        for yw in range(ow):
            cp, cv = _taps(yw, k[1], s[1], d[1], pw[0], pw[1], sx[3])
            taps = [(r, q) for r in rv for q in cv]
            if kind == "max":
                if not taps:
                    continue
                vals = np.stack([x_or_shape[:, :, r, q].astype(np.float64) for r, q in taps], axis=-1)
                best = np.argmax(vals, axis=-1)
                rows = np.array([t[0] for t in taps])[best]
                cols = np.array([t[1] for t in taps])[best]
                np.add.at(dx, (ni, ci, rows, cols), dy[:, :, yh, yw])
            else:
                div = len(rp) * len(cp) if at.get("count_include_pad", 0) else len(taps)
                if not div:
                    continue
                for r, q in taps:
                    dx[:, :, r, q] += dy[:, :, yh, yw] / div
    return dx


# ---- cases ----------------------------------------------------------------------------------------------

CONV_CONFIGS = [
    ("basic", (2, 3, 5, 5), (4, 3, 3, 3), {}),
    ("stride_pad", (2, 3, 8, 7), (5, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    # H + pads - extent not divisible by the stride: the last rows/cols of x get no gradient from any tap
    ("stride_rem", (1, 2, 8, 9), (3, 2, 3, 2), {"strides": [3, 2], "pads": [0, 1, 2, 0]}),
    ("dilation", (1, 2, 9, 8), (3, 2, 3, 3), {"dilations": [2, 3], "pads": [2, 1, 1, 2]}),
    ("group2", (2, 4, 6, 6), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    ("depthwise", (1, 4, 7, 7), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ("same_upper", (1, 3, 7, 8), (2, 3, 4, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 3]}),
    ("same_lower", (1, 3, 7, 8), (2, 3, 4, 3), {"auto_pad": "SAME_LOWER", "strides": [2, 3]}),
    ("valid", (1, 3, 7, 8), (2, 3, 3, 3), {"auto_pad": "VALID", "pads": [1, 1, 1, 1]}),
    ("1x1_stride", (2, 5, 5, 6), (3, 5, 1, 1), {"strides": [2, 2]}),
    ("group_dil_stride", (2, 6, 9, 10), (9, 2, 2, 3), {"group": 3, "strides": [2, 3], "dilations": [2, 1],
                                                      "pads": [1, 0, 0, 2]}),
    # channel counts where oneDNN's backward primitives take blocked layouts (the CNN benchmark's second conv,
    # and a strided padded one), so the reorders in and out of them are exercised
    ("blocked", (3, 32, 13, 13), (64, 32, 3, 3), {}),
    ("blocked_stride_pad", (2, 16, 14, 15), (32, 16, 3, 3), {"strides": [2, 2], "pads": [1, 1, 0, 1]}),
]


def conv_kwargs(at):
    return dict(strides=at.get("strides", (1, 1)), pads=at.get("pads", (0, 0, 0, 0)),
                dil=at.get("dilations", (1, 1)), group=at.get("group", 1), auto_pad=at.get("auto_pad", "NOTSET"))


def conv_grad_cases(rng):
    for name, sx, sw, at in CONV_CONFIGS:
        x = rng.standard_normal(sx)
        w = rng.standard_normal(sw)
        y = ref_conv(x, w, **conv_kwargs(at))
        dy = rng.standard_normal(y.shape)
        dx = ref_conv_bp_input(w, dy, sx, at)
        dw = ref_conv_bp_filter(x, dy, sw, at)
        # adjoint identity: <conv(x, w), dy> == <x, dx> == <w, dw>
        lhs = float((y * dy).sum())
        assert abs(lhs - float((x * dx).sum())) <= 1e-9 * (1 + abs(lhs)), name
        assert abs(lhs - float((w * dw).sum())) <= 1e-9 * (1 + abs(lhs)), name
        xs, ws = np.array(sx, np.int64), np.array(sw, np.int64)
        for dt, tag, tol in ((np.float32, "f32", dict(rtol=1e-4, atol=1e-4)),
                             (np.float64, "f64", dict(rtol=1e-10, atol=1e-11))):
            yield Case("conv_bp_input_%s_%s" % (tag, name), "Conv2DBackpropInput", [xs, w.astype(dt), dy.astype(dt)],
                       [dx.astype(dt)], attrs=at, const=(0,), **tol)
            yield Case("conv_bp_filter_%s_%s" % (tag, name), "Conv2DBackpropFilter", [x.astype(dt), ws, dy.astype(dt)],
                       [dw.astype(dt)], attrs=at, const=(1,), **tol)
        if name in ("stride_pad", "group2"):
            wh, dyh, xh = w.astype(np.float16), dy.astype(np.float16), x.astype(np.float16)
            yield Case("conv_bp_input_f16_" + name, "Conv2DBackpropInput", [xs, wh, dyh],
                       [ref_conv_bp_input(wh, dyh, sx, at).astype(np.float16)], attrs=at, const=(0,),
                       rtol=1e-2, atol=2e-2)
            yield Case("conv_bp_filter_f16_" + name, "Conv2DBackpropFilter", [xh, ws, dyh],
                       [ref_conv_bp_filter(xh, dyh, sw, at).astype(np.float16)], attrs=at, const=(1,),
                       rtol=1e-2, atol=5e-2)
            wb, dyb, xb = bf16_round(w), bf16_round(dy), bf16_round(x)
            yield Case("conv_bp_input_bf16_" + name, "Conv2DBackpropInput", [xs, wb, dyb],
                       [ref_conv_bp_input(wb, dyb, sx, at).astype(np.float32)], attrs=at, const=(0,),
                       feed_dtype={1: "bf16", 2: "bf16"}, rtol=3e-2, atol=1e-1)
            yield Case("conv_bp_filter_bf16_" + name, "Conv2DBackpropFilter", [xb, ws, dyb],
                       [ref_conv_bp_filter(xb, dyb, sw, at).astype(np.float32)], attrs=at, const=(1,),
                       feed_dtype={0: "bf16", 2: "bf16"}, rtol=3e-2, atol=2e-1)
    # sizes fed at run time (i32): inference cannot know the output shape, the kernel reads it
    name, sx, sw, at = CONV_CONFIGS[1]
    x, w = rng.standard_normal(sx), rng.standard_normal(sw)
    dy = rng.standard_normal(ref_conv(x, w, **conv_kwargs(at)).shape)
    yield Case("conv_bp_input_f64_fed_sizes", "Conv2DBackpropInput", [np.array(sx, np.int32), w, dy],
               [ref_conv_bp_input(w, dy, sx, at)], attrs=at, rtol=1e-10, atol=1e-11)
    yield Case("conv_bp_filter_f64_fed_sizes", "Conv2DBackpropFilter", [x, np.array(sw, np.int32), dy],
               [ref_conv_bp_filter(x, dy, sw, at)], attrs=at, rtol=1e-10, atol=1e-11)
    # empty batch: dx empty, dw zero
    x0, dy0 = np.zeros((0, 3, 5, 5), np.float32), np.zeros((0, 4, 3, 3), np.float32)
    w0 = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    yield Case("conv_bp_input_f32_empty", "Conv2DBackpropInput", [np.array([0, 3, 5, 5], np.int64), w0, dy0],
               [np.zeros((0, 3, 5, 5), np.float32)], const=(0,))
    yield Case("conv_bp_filter_f32_empty", "Conv2DBackpropFilter", [x0, np.array([4, 3, 3, 3], np.int64), dy0],
               [np.zeros((4, 3, 3, 3), np.float32)], const=(1,))
    f = np.float32
    yield Case("conv_bp_input_err_dy_shape", "Conv2DBackpropInput",
               [np.array([1, 3, 5, 5], np.int64), np.ones((4, 3, 3, 3), f), np.ones((1, 4, 4, 3), f)],
               const=(0,), error=err("INVALID_ARGUMENT", "does not match the forward output"))
    yield Case("conv_bp_input_err_channels", "Conv2DBackpropInput",
               [np.array([1, 3, 5, 5], np.int64), np.ones((4, 3, 3, 3), f), np.ones((1, 5, 3, 3), f)],
               const=(0,), error=err("INVALID_ARGUMENT", "output channels but dy"))
    yield Case("conv_bp_input_err_sizes", "Conv2DBackpropInput",
               [np.array([1, 3, 5], np.int64), np.ones((4, 3, 3, 3), f), np.ones((1, 4, 3, 3), f)],
               const=(0,), error=err("INVALID_ARGUMENT", "input_sizes has 3 values"))
    yield Case("conv_bp_filter_err_group", "Conv2DBackpropFilter",
               [np.ones((1, 4, 5, 5), f), np.array([4, 2, 3, 3], np.int64), np.ones((1, 4, 3, 3), f)],
               const=(1,), attrs={"group": 3}, error=err("INVALID_ARGUMENT", "group 3"))
    yield Case("conv_bp_filter_err_dtype", "Conv2DBackpropFilter",
               [np.ones((1, 3, 5, 5), f), np.array([4, 3, 3, 3], np.int64), np.ones((1, 4, 3, 3), np.float64)],
               const=(1,), error=err("INVALID_ARGUMENT", "different dtypes"))
    # the fed-sizes kernel path checks what inference could not
    yield Case("conv_bp_input_err_fed_sizes", "Conv2DBackpropInput",
               [np.array([1, 3, 6, 6], np.int64), np.ones((4, 3, 3, 3), f), np.ones((1, 4, 3, 3), f)],
               error=err("INVALID_ARGUMENT", "does not match the forward output"))


POOL_CONFIGS = [
    ("basic", (2, 3, 6, 6), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ("overlap", (1, 2, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2]}),
    ("stride1", (1, 2, 5, 6), {"kernel_shape": [3, 2]}),
    ("pads", (1, 2, 5, 6), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ("asym_pads", (1, 2, 5, 6), {"kernel_shape": [3, 2], "pads": [2, 0, 1, 1], "strides": [1, 2]}),
    ("ceil", (1, 2, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 3], "ceil_mode": 1}),
    ("ceil_pads", (1, 2, 6, 6), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    ("same_upper", (1, 2, 7, 6), {"kernel_shape": [3, 2], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ("same_lower", (1, 2, 7, 6), {"kernel_shape": [3, 2], "strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ("valid", (1, 2, 7, 6), {"kernel_shape": [3, 3], "auto_pad": "VALID"}),
    ("dilation", (1, 2, 9, 9), {"kernel_shape": [2, 3], "dilations": [2, 2], "pads": [1, 1, 1, 1]}),
    ("ceil_dilation", (1, 3, 10, 11), {"kernel_shape": [3, 2], "strides": [2, 3], "dilations": [2, 3],
                                       "pads": [1, 2, 0, 1], "ceil_mode": 1}),
    # windows that tile the plane (MaxPool2DGrad's tiled path): an odd plane that leaves a row and a column
    # uncovered, ceil mode clipping the last windows, 3x3 and 3x2 tiles
    ("tile2_odd", (2, 3, 7, 9), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ("tile2_ceil", (1, 2, 7, 9), {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ("tile3", (1, 2, 10, 11), {"kernel_shape": [3, 3], "strides": [3, 3]}),
    ("tile32_ceil_pad_end", (1, 2, 8, 7), {"kernel_shape": [3, 2], "strides": [3, 2], "pads": [0, 0, 1, 1],
                                           "ceil_mode": 1}),
    # 2x2 rows of 19 windows (groups of eight, the last eight redone), 5 (two overlapping groups of four,
    # odd plane), 3 (zero-padded copies) and 16 (groups of eight only)
    ("tile2_wide", (1, 3, 6, 38), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ("tile2_five", (2, 3, 11, 11), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ("tile2_narrow", (1, 2, 4, 6), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ("tile2_sixteen", (1, 2, 4, 32), {"kernel_shape": [2, 2], "strides": [2, 2]}),
]


def pool_grad_cases(rng):
    for name, sx, at in POOL_CONFIGS:
        k = at["kernel_shape"]
        (oh, ow), _, _, _ = _geo(sx, k, at, at.get("ceil_mode", 0))
        # small integers: many ties inside a window, so the first-maximum rule is exercised
        x = rng.integers(-2, 3, sx).astype(np.float64)
        xr = rng.standard_normal(sx)
        dy = rng.standard_normal((sx[0], sx[1], oh, ow))
        for tag, dt, tol in (("f32", np.float32, dict(rtol=1e-5, atol=1e-5)),
                             ("f64", np.float64, dict(rtol=1e-12, atol=1e-12))):
            yield Case("maxpool2d_grad_%s_%s" % (tag, name), "MaxPool2DGrad", [x.astype(dt), dy.astype(dt)],
                       [ref_pool_grad("max", x, dy, at).astype(dt)], attrs=at, **tol)
            yield Case("maxpool2d_grad_%s_%s_distinct" % (tag, name), "MaxPool2DGrad", [xr.astype(dt), dy.astype(dt)],
                       [ref_pool_grad("max", xr.astype(dt), dy, at).astype(dt)], attrs=at, **tol)
            for cip in (0, 1):
                if cip and not ("pads" in at or at.get("ceil_mode") or "auto_pad" in at):
                    continue
                at2 = dict(at, count_include_pad=1) if cip else at
                yield Case("avgpool2d_grad_%s_%s%s" % (tag, name, "_cip" if cip else ""), "AvgPool2DGrad",
                           [np.array(sx, np.int64), dy.astype(dt)], [ref_pool_grad("avg", sx, dy, at2).astype(dt)],
                           attrs=at2, const=(0,), **tol)
        # bf16 over every geometry (the plane-at-a-time f32 route, k_nn_grad.c's lowp_pool_planes): the
        # maximum's pick is exact, so only dy's rounding is in the reference; no new draws from rng
        xb, xrb, dyb = bf16_round(x), bf16_round(xr), bf16_round(dy)
        yield Case("maxpool2d_grad_bf16_%s" % name, "MaxPool2DGrad", [xb, dyb], [bf16_round(ref_pool_grad("max", xb, dyb, at))],
                   attrs=at, feed_dtype={0: "bf16", 1: "bf16"}, rtol=1e-2, atol=1e-2)
        yield Case("maxpool2d_grad_bf16_%s_distinct" % name, "MaxPool2DGrad", [xrb, dyb],
                   [bf16_round(ref_pool_grad("max", xrb, dyb, at))], attrs=at, feed_dtype={0: "bf16", 1: "bf16"},
                   rtol=1e-2, atol=1e-2)
        yield Case("avgpool2d_grad_bf16_%s" % name, "AvgPool2DGrad", [np.array(sx, np.int64), dyb],
                   [bf16_round(ref_pool_grad("avg", sx, dyb, at))], attrs=at, const=(0,), feed_dtype={1: "bf16"},
                   rtol=1e-2, atol=1e-2)
    at = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    sx = (2, 3, 7, 7)
    x = rng.standard_normal(sx)
    dy = rng.standard_normal((2, 3, 4, 4))
    xh, dyh = x.astype(np.float16), dy.astype(np.float16)
    yield Case("maxpool2d_grad_f16", "MaxPool2DGrad", [xh, dyh], [ref_pool_grad("max", xh, dyh, at).astype(np.float16)],
               attrs=at, rtol=2e-3, atol=2e-3)
    yield Case("avgpool2d_grad_f16", "AvgPool2DGrad", [np.array(sx, np.int64), dyh],
               [ref_pool_grad("avg", sx, dyh, at).astype(np.float16)], attrs=at, const=(0,), rtol=2e-3, atol=2e-3)
    xb, dyb = bf16_round(x), bf16_round(dy)
    yield Case("maxpool2d_grad_bf16", "MaxPool2DGrad", [xb, dyb], [bf16_round(ref_pool_grad("max", xb, dyb, at))],
               attrs=at, feed_dtype={0: "bf16", 1: "bf16"}, rtol=1e-2, atol=1e-2)
    yield Case("avgpool2d_grad_bf16", "AvgPool2DGrad", [np.array(sx, np.int64), dyb],
               [bf16_round(ref_pool_grad("avg", sx, dyb, at))], attrs=at, const=(0,), feed_dtype={1: "bf16"},
               rtol=1e-2, atol=1e-2)
    # NaN: the window's first NaN takes the gradient; -inf only windows: the first valid tap
    xn = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    xn[0, 0, 1, 1] = np.nan
    xn[0, 0, 2, 2] = np.nan
    xn[0, 1, :3, :3] = -np.inf
    atn = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1}
    (oh, ow), _, _, _ = _geo(xn.shape, (3, 3), atn, 1)
    dyn = rng.standard_normal((1, 2, oh, ow)).astype(np.float32)
    yield Case("maxpool2d_grad_f32_nan_inf", "MaxPool2DGrad", [xn, dyn], [ref_pool_grad("max", xn, dyn, atn).astype(np.float32)],
               attrs=atn, rtol=1e-5, atol=1e-6)
    # windows inside the plane (the kernel's branch-free path): a NaN after the window's maximum, a NaN first,
    # two NaNs, +inf, an all -inf window, and ties
    xn = rng.standard_normal((2, 3, 8, 10)).astype(np.float32)
    xn[0, 0, 0, 1], xn[0, 0, 2, 3] = np.nan, 5.0
    xn[0, 1, 4, 4], xn[0, 1, 5, 5] = np.nan, np.nan
    xn[1, 2, 1, 0], xn[1, 2, 6, 7] = np.inf, -np.inf
    xn[1, 0, 2:4, 2:4] = -np.inf
    xn[1, 1, 4:6, 0:2] = 1.5
    atn = {"kernel_shape": [2, 2], "strides": [2, 2]}
    dyn = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    yield Case("maxpool2d_grad_f32_nan_inf_inside", "MaxPool2DGrad", [xn, dyn],
               [ref_pool_grad("max", xn, dyn, atn).astype(np.float32)], attrs=atn, rtol=1e-5, atol=1e-6)
    # the tiled 2x2 path: a NaN in each of a window's four taps (alone and after a larger value), two NaNs,
    # +inf and -inf, an all -inf window, ties, and NaN in the clipped last row and column of ceil mode
    xn = rng.standard_normal((1, 4, 7, 9)).astype(np.float32)
    for c, (a, b) in enumerate(((0, 0), (0, 1), (1, 0), (1, 1))):
        xn[0, c, a, b] = np.nan
        xn[0, c, 2 + a, 2 + b] = np.nan
        xn[0, c, 2, 2], xn[0, c, 3, 3] = 9.0, 9.0
    xn[0, 0, 4:6, 4:6] = -np.inf
    xn[0, 1, 4:6, 0:2] = 0.5
    xn[0, 2, 4, 6], xn[0, 3, 5, 7] = np.inf, -np.inf
    xn[0, 1, 6, 3], xn[0, 2, 2, 8] = np.nan, np.nan
    for ceil in (0, 1):
        att = {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": ceil}
        (oh, ow), _, _, _ = _geo(xn.shape, (2, 2), att, ceil)
        dyt = rng.standard_normal((1, 4, oh, ow)).astype(np.float32)
        for tag, dt in (("f32", np.float32), ("f64", np.float64)):
            yield Case("maxpool2d_grad_%s_tiled_nan_inf%s" % (tag, "_ceil" if ceil else ""), "MaxPool2DGrad",
                       [xn.astype(dt), dyt.astype(dt)], [ref_pool_grad("max", xn, dyt, att).astype(dt)], attrs=att,
                       rtol=1e-5, atol=1e-6)
        xb, dyb = bf16_round(xn), bf16_round(dyt)
        yield Case("maxpool2d_grad_bf16_tiled_nan_inf%s" % ("_ceil" if ceil else ""), "MaxPool2DGrad", [xb, dyb],
                   [bf16_round(ref_pool_grad("max", xb, dyb, att))], attrs=att, feed_dtype={0: "bf16", 1: "bf16"},
                   rtol=1e-2, atol=1e-2)
    # the same specials in rows of 19 windows (k_nn_grad.c's groups of eight, the last one redone over
    # windows already done) and of 5 (two overlapping groups of four), NaN and inf in each group
    for name, shp in (("wide", (1, 4, 6, 38)), ("five", (1, 4, 10, 11))):
        xw = rng.standard_normal(shp).astype(np.float32)
        for c, (a, b) in enumerate(((0, 0), (0, 1), (1, 0), (1, 1))):
            for w0 in range(0, shp[3] - 1, 6):
                xw[0, c, a, w0 + b] = np.nan
            xw[0, c, 2 + a, shp[3] - 2 + b] = np.nan
        xw[0, 0, 4:6, 0:4] = -np.inf
        xw[0, 1, 4, 3], xw[0, 2, 5, shp[3] - 3] = np.inf, -np.inf
        att = {"kernel_shape": [2, 2], "strides": [2, 2]}
        dyw = rng.standard_normal((1, 4, shp[2] // 2, shp[3] // 2)).astype(np.float32)
        yield Case("maxpool2d_grad_f32_tiled_nan_inf_%s" % name, "MaxPool2DGrad", [xw, dyw],
                   [ref_pool_grad("max", xw, dyw, att).astype(np.float32)], attrs=att, rtol=1e-5, atol=1e-6)
        xb, dyb = bf16_round(xw), bf16_round(dyw)
        yield Case("maxpool2d_grad_bf16_tiled_nan_inf_%s" % name, "MaxPool2DGrad", [xb, dyb],
                   [bf16_round(ref_pool_grad("max", xb, dyb, att))], attrs=att, feed_dtype={0: "bf16", 1: "bf16"},
                   rtol=1e-2, atol=1e-2)
    # the convolution gradients through oneDNN with NaN and inf: each reaches exactly the taps it feeds
    cx = rng.standard_normal((2, 16, 9, 9)).astype(np.float32)
    cw = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    cx[0, 3, 4, 4], cx[1, 7, 0, 8] = np.nan, np.inf
    cw[5, 2, 1, 1] = np.nan
    cat = {"pads": [1, 1, 1, 1]}
    cdy = rng.standard_normal((2, 32, 9, 9)).astype(np.float32)
    cdy[1, 4, 2, 2] = np.nan
    cxs, cws = np.array(cx.shape, np.int64), np.array(cw.shape, np.int64)
    with np.errstate(invalid="ignore"):
        dx = ref_conv_bp_input(cw.astype(np.float64), cdy.astype(np.float64), cx.shape, cat)
        dw = ref_conv_bp_filter(cx.astype(np.float64), cdy.astype(np.float64), cw.shape, cat)
    yield Case("conv_bp_input_f32_nan_inf", "Conv2DBackpropInput", [cxs, cw, cdy], [dx.astype(np.float32)], attrs=cat,
               const=(0,), rtol=1e-4, atol=1e-4)
    yield Case("conv_bp_filter_f32_nan_inf", "Conv2DBackpropFilter", [cx, cws, cdy], [dw.astype(np.float32)], attrs=cat,
               const=(1,), rtol=1e-4, atol=1e-4)
    # fed sizes
    yield Case("avgpool2d_grad_f64_fed_sizes", "AvgPool2DGrad", [np.array(sx, np.int32), dy],
               [ref_pool_grad("avg", sx, dy, dict(at, count_include_pad=1))], attrs=dict(at, count_include_pad=1))
    f = np.float32
    yield Case("maxpool2d_grad_err_dy", "MaxPool2DGrad", [np.ones((1, 2, 6, 6), f), np.ones((1, 2, 4, 3), f)],
               attrs={"kernel_shape": [2, 2], "strides": [2, 2]},
               error=err("INVALID_ARGUMENT", "does not match the forward output"))
    yield Case("maxpool2d_grad_err_nc", "MaxPool2DGrad", [np.ones((1, 2, 6, 6), f), np.ones((1, 3, 3, 3), f)],
               attrs={"kernel_shape": [2, 2], "strides": [2, 2]}, error=err("INVALID_ARGUMENT", "differ in N or C"))
    yield Case("avgpool2d_grad_err_no_kernel", "AvgPool2DGrad", [np.array([1, 2, 6, 6], np.int64), np.ones((1, 2, 3, 3), f)],
               const=(0,), error=err("INVALID_ARGUMENT", "kernel_shape is required"))
    yield Case("maxpool2d_grad_f32_empty", "MaxPool2DGrad", [np.zeros((0, 2, 4, 4), f), np.zeros((0, 2, 2, 2), f)],
               [np.zeros((0, 2, 4, 4), f)], attrs={"kernel_shape": [2, 2], "strides": [2, 2]})


def gap_grad_cases(rng):
    for name, sx in (("4d", (2, 3, 4, 5)), ("3d", (2, 4, 7)), ("5d", (1, 2, 3, 2, 4))):
        dy = rng.standard_normal(sx[:2] + (1,) * (len(sx) - 2))
        ref = np.broadcast_to(dy / np.prod(sx[2:]), sx)
        for tag, dt, tol in (("f32", np.float32, dict(rtol=1e-6, atol=1e-7)), ("f64", np.float64, {})):
            yield Case("global_avg_pool_grad_%s_%s" % (tag, name), "GlobalAvgPoolGrad",
                       [np.array(sx, np.int64), dy.astype(dt)], [ref.astype(dt)], const=(0,), **tol)
    dy = rng.standard_normal((2, 3, 1, 1)).astype(np.float16)
    yield Case("global_avg_pool_grad_f16", "GlobalAvgPoolGrad", [np.array([2, 3, 3, 3], np.int64), dy],
               [np.broadcast_to(dy.astype(np.float64) / 9, (2, 3, 3, 3)).astype(np.float16)], const=(0,))
    yield Case("global_avg_pool_grad_f64_fed_sizes", "GlobalAvgPoolGrad", [np.array([2, 3, 2, 2], np.int32),
               np.ones((2, 3, 1, 1))], [np.full((2, 3, 2, 2), 0.25)])
    yield Case("global_avg_pool_grad_err_shape", "GlobalAvgPoolGrad",
               [np.array([2, 3, 4, 4], np.int64), np.ones((2, 4, 1, 1), np.float32)], const=(0,),
               error=err("INVALID_ARGUMENT", "not the GlobalAvgPool output"))


def cases(rng):
    yield from conv_grad_cases(rng)
    yield from pool_grad_cases(rng)
    yield from gap_grad_cases(rng)
