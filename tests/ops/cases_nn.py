"""Cases for MatMul, Gemm, BiasAdd, Conv2D, ConvTranspose2D, MaxPool2D, AvgPool2D and GlobalAvgPool.

References are plain numpy re-implementations of numpy matmul and the ONNX operator definitions
(explicit window loops, never weft). bf16 inputs are fed as f32 files converted by the C driver, so the
references round them to bf16 first.
"""
import math

import numpy as np

from opcase import Case

F32_TOL = dict(rtol=1e-4, atol=1e-5)
BF16_TOL = dict(rtol=3e-2, atol=3e-2)
F16_TOL = dict(rtol=4e-3, atol=2e-3)


def bf16_round(x):
    """f32 -> nearest bf16 (ties to even), returned as f32."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def err(code, text):
    return (code, text)


# ---- references ---------------------------------------------------------------------------------

def ref_matmul(a, b, ta=0, tb=0):
    if ta and a.ndim >= 2:
        a = np.swapaxes(a, -1, -2)
    if tb and b.ndim >= 2:
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a.astype(np.float64), b.astype(np.float64))


def window(in_sz, k, s, d, pb, pe, auto_pad="NOTSET", ceil_mode=0):
    """ONNX conv/pool output size and pads along one spatial dim."""
    eff = (k - 1) * d + 1
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = -(-in_sz // s)
        total = max(0, (out - 1) * s + eff - in_sz)
        small, big = total // 2, total - total // 2
        return out, (small, big) if auto_pad == "SAME_UPPER" else (big, small)
    if auto_pad == "VALID":
        pb = pe = 0
    span = in_sz + pb + pe - eff
    out = (math.ceil(span / s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= in_sz + pb:
        out -= 1
    return out, (pb, pe)


def ref_conv(x, w, b=None, strides=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1), group=1, auto_pad="NOTSET"):
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    n, c, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    oh, (pt, pbm) = window(h, kh, strides[0], dil[0], pads[0], pads[2], auto_pad)
    ow, (pl, pr) = window(wd, kw, strides[1], dil[1], pads[1], pads[3], auto_pad)
    xp = np.zeros((n, c, h + pt + pbm + kh * dil[0], wd + pl + pr + kw * dil[1]))
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    y = np.zeros((n, oc, oh, ow))
    ocg = oc // group
    for a in range(kh):
        for bb in range(kw):
            r0, c0 = a * dil[0], bb * dil[1]
            patch = xp[:, :, r0:r0 + strides[0] * (oh - 1) + 1:strides[0], c0:c0 + strides[1] * (ow - 1) + 1:strides[1]]
            for g in range(group):
                y[:, g * ocg:(g + 1) * ocg] += np.einsum(
                    "nchw,oc->nohw", patch[:, g * icg:(g + 1) * icg], w[g * ocg:(g + 1) * ocg, :, a, bb])
    if b is not None:
        y += b.astype(np.float64)[None, :, None, None]
    return y


def ref_convt(x, w, b=None, strides=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1), group=1, opad=(0, 0),
              output_shape=None, auto_pad="NOTSET"):
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    n, c, h, wd = x.shape
    _, ocg, kh, kw = w.shape
    oc = ocg * group
    icg = c // group
    ins = (h, wd)
    ks = (kh, kw)
    pb, pe = [pads[0], pads[1]], [pads[2], pads[3]]
    for i in range(2):
        want = None
        if output_shape is not None:
            want = output_shape[i]
        elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            want = ins[i] * strides[i]
        if auto_pad == "VALID":
            pb[i] = pe[i] = 0
        if want is not None:
            total = strides[i] * (ins[i] - 1) + opad[i] + (ks[i] - 1) * dil[i] + 1 - want
            if auto_pad == "SAME_UPPER":
                pb[i], pe[i] = total // 2, total - total // 2
            else:
                pb[i], pe[i] = total - total // 2, total // 2
    full = [strides[i] * (ins[i] - 1) + (ks[i] - 1) * dil[i] + 1 for i in range(2)]
    out = [strides[i] * (ins[i] - 1) + opad[i] + (ks[i] - 1) * dil[i] + 1 - pb[i] - pe[i] for i in range(2)]
    canvas = np.zeros((n, oc, full[0], full[1]))
    for g in range(group):
        for a in range(kh):
            for bb in range(kw):
                contrib = np.einsum("nchw,co->nohw", x[:, g * icg:(g + 1) * icg], w[g * icg:(g + 1) * icg, :, a, bb])
                r0, c0 = a * dil[0], bb * dil[1]
                canvas[:, g * ocg:(g + 1) * ocg, r0:r0 + strides[0] * (h - 1) + 1:strides[0],
                       c0:c0 + strides[1] * (wd - 1) + 1:strides[1]] += contrib
    y = np.zeros((n, oc, out[0], out[1]))
    for yh in range(out[0]):
        fh = yh + pb[0]
        if not 0 <= fh < full[0]:
            continue
        for yw in range(out[1]):
            fw = yw + pb[1]
            if 0 <= fw < full[1]:
                y[:, :, yh, yw] = canvas[:, :, fh, fw]
    if b is not None:
        y += b.astype(np.float64)[None, :, None, None]
    return y


def ref_pool(x, kind, k, strides=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1), ceil_mode=0, cip=0, auto_pad="NOTSET"):
    x = x.astype(np.float64)
    n, c, h, wd = x.shape
    oh, (pt, pbm) = window(h, k[0], strides[0], dil[0], pads[0], pads[2], auto_pad, ceil_mode)
    ow, (pl, pr) = window(wd, k[1], strides[1], dil[1], pads[1], pads[3], auto_pad, ceil_mode)
    y = np.zeros((n, c, oh, ow))
    for yh in range(oh):
        rows = [yh * strides[0] - pt + a * dil[0] for a in range(k[0])]
        rows = [r for r in rows if -pt <= r < h + pbm]
        for yw in range(ow):
            cols = [yw * strides[1] - pl + bb * dil[1] for bb in range(k[1])]
            cols = [q for q in cols if -pl <= q < wd + pr]
            vr = [r for r in rows if 0 <= r < h]
            vc = [q for q in cols if 0 <= q < wd]
            win = x[:, :, vr][:, :, :, vc].reshape(n, c, -1)
            if kind == "max":
                y[:, :, yh, yw] = win.max(axis=2) if win.shape[2] else -np.inf
            else:
                div = len(rows) * len(cols) if cip else win.shape[2]
                y[:, :, yh, yw] = win.sum(axis=2) / div
    return y


# ---- cases ----------------------------------------------------------------------------------------

def matmul_cases(rng):
    def f(*s):
        return rng.standard_normal(s).astype(np.float32)

    shapes = [
        ("2d", (3, 4), (4, 5), 0, 0),
        ("1d_2d", (4,), (4, 3), 0, 0),
        ("2d_1d", (3, 4), (4,), 0, 0),
        ("1d_batched", (4,), (2, 4, 3), 0, 0),
        ("batched_1d", (2, 3, 4), (4,), 0, 0),
        ("batched", (2, 3, 4), (2, 4, 5), 0, 0),
        ("bcast_b", (2, 3, 3, 4), (4, 5), 0, 0),
        ("bcast_a", (3, 4), (2, 4, 5), 0, 0),
        ("bcast_both", (2, 1, 3, 4), (1, 3, 4, 5), 0, 0),
        ("ta", (4, 3), (4, 5), 1, 0),
        ("tb", (3, 4), (5, 4), 0, 1),
        ("ta_tb", (4, 3), (5, 4), 1, 1),
        ("batched_ta_tb", (2, 4, 3), (2, 5, 4), 1, 1),
        ("bcast_ta", (2, 2, 4, 3), (4, 5), 1, 0),
        ("k1", (6, 1), (1, 5), 0, 0),
        ("empty_m", (0, 3), (3, 4), 0, 0),
        ("empty_k", (2, 0), (0, 3), 0, 0),
        ("empty_batch", (0, 2, 3), (3, 4), 0, 0),
        ("k500", (17, 500), (500, 23), 0, 0),
    ]
    for name, sa, sb, ta, tb in shapes:
        a, b = f(*sa), f(*sb)
        yield Case("matmul_f32_" + name, "MatMul", [a, b], [ref_matmul(a, b, ta, tb).astype(np.float32)],
                   attrs={"transpose_a": ta, "transpose_b": tb}, **F32_TOL)
    a, b = f(300, 400), f(400, 300)
    yield Case("matmul_f32_large", "MatMul", [a, b], [ref_matmul(a, b).astype(np.float32)], rtol=1e-4, atol=1e-4)
    for name, sa, sb, ta, tb in [("2d", (5, 6), (6, 7), 0, 0), ("batched_tb", (2, 3, 6), (2, 7, 6), 0, 1),
                                 ("1d_2d", (6,), (6, 3), 0, 0)]:
        a, b = rng.standard_normal(sa), rng.standard_normal(sb)
        yield Case("matmul_f64_" + name, "MatMul", [a, b], [ref_matmul(a, b, ta, tb)],
                   attrs={"transpose_a": ta, "transpose_b": tb})
        a16, b16 = a.astype(np.float16), b.astype(np.float16)
        yield Case("matmul_f16_" + name, "MatMul", [a16, b16],
                   [ref_matmul(a16, b16, ta, tb).astype(np.float16)], attrs={"transpose_a": ta, "transpose_b": tb},
                   **F16_TOL)
        af, bf = bf16_round(a.astype(np.float32)), bf16_round(b.astype(np.float32))
        yield Case("matmul_bf16_" + name, "MatMul", [af, bf], [ref_matmul(af, bf, ta, tb).astype(np.float32)],
                   attrs={"transpose_a": ta, "transpose_b": tb}, feed_dtype={0: "bf16", 1: "bf16"}, **BF16_TOL)
    for dt in (np.int32, np.int64):
        a = rng.integers(-50, 50, (2, 3, 4)).astype(dt)
        b = rng.integers(-50, 50, (4, 5)).astype(dt)
        yield Case("matmul_%s_bcast" % np.dtype(dt).name, "MatMul", [a, b], [np.matmul(a, b)])
        yield Case("matmul_%s_tb" % np.dtype(dt).name, "MatMul", [a, b.T.copy()], [np.matmul(a, b)],
                   attrs={"transpose_b": 1})
    big = np.array([[2 ** 20, 2 ** 20]], np.int32)
    yield Case("matmul_int32_wraps", "MatMul", [big, big.T.copy()],
               [np.matmul(big.astype(np.int64), big.T.astype(np.int64)).astype(np.int32)])
    # integer products spanning several 16-wide tiles of a GPU kernel, batch dims broadcasting on both
    # sides, transposes; i64 sums wrap modulo 2**64 (reference in Python integers)
    a = rng.integers(-1000, 1000, (2, 1, 19, 37)).astype(np.int64)
    b = rng.integers(-1000, 1000, (3, 21, 37)).astype(np.int64)
    yield Case("matmul_int64_bcast_both_tb", "MatMul", [a, b], [np.matmul(a, np.swapaxes(b, -1, -2))],
               attrs={"transpose_b": 1})
    a = rng.integers(-50, 50, (37, 19)).astype(np.int32)
    b = rng.integers(-50, 50, (2, 37, 18)).astype(np.int32)
    yield Case("matmul_int32_ta_bcast_a", "MatMul", [a, b], [np.matmul(a.T, b)], attrs={"transpose_a": 1})
    a = np.array([[2 ** 62, 2 ** 62, 7], [-(2 ** 62), 5, -3]], np.int64)
    b = np.array([[4, 1], [1, 2 ** 62], [3, 2]], np.int64)
    ref = [[(sum(int(a[i, q]) * int(b[q, j]) for q in range(3)) + 2 ** 63) % 2 ** 64 - 2 ** 63 for j in range(2)]
           for i in range(2)]
    yield Case("matmul_int64_wraps", "MatMul", [a, b], [np.array(ref, np.int64)])
    yield Case("matmul_err_inner", "MatMul", [f(2, 3), f(4, 5)],
               error=err("INVALID_ARGUMENT", "A f32[2,3] and B f32[4,5] have incompatible inner dims 3 and 4"))
    yield Case("matmul_err_inner_tb", "MatMul", [f(2, 3), f(4, 5)], attrs={"transpose_b": 1},
               error=err("INVALID_ARGUMENT", "incompatible inner dims 3 and 5"))
    yield Case("matmul_err_dtype", "MatMul", [f(2, 3), rng.standard_normal((3, 2))],
               error=err("INVALID_ARGUMENT", "different dtypes"))
    yield Case("matmul_err_bool", "MatMul", [np.ones((2, 2), bool), np.ones((2, 2), bool)],
               error=err("INVALID_ARGUMENT", "bool"))
    yield Case("matmul_err_batch", "MatMul", [f(2, 3, 4), f(3, 4, 5)],
               error=err("INVALID_ARGUMENT", "batch dims that do not broadcast"))


def gemm_cases(rng):
    def f(*s):
        return rng.standard_normal(s).astype(np.float32)

    configs = [
        ("plain", (3, 4), (4, 5), (3, 5), {}),
        ("alpha_beta", (3, 4), (4, 5), (3, 5), {"alpha": 0.5, "beta": -2.0}),
        ("transA", (4, 3), (4, 5), (5,), {"transA": 1}),
        ("transB", (3, 4), (5, 4), (3, 1), {"transB": 1, "beta": 0.25}),
        ("trans_both", (4, 3), (5, 4), (1, 1), {"transA": 1, "transB": 1, "alpha": 2.0}),
        ("scalar_c", (3, 4), (4, 5), (), {}),
        ("no_c", (3, 4), (4, 5), None, {"alpha": 1.5}),
    ]
    for name, sa, sb, sc, at in configs:
        a, b = f(*sa), f(*sb)
        c = f(*sc) if sc is not None else None
        ta, tb = at.get("transA", 0), at.get("transB", 0)
        y = at.get("alpha", 1.0) * ref_matmul(a.T if ta else a, b.T if tb else b)
        if c is not None:
            y = y + at.get("beta", 1.0) * c.astype(np.float64)
        yield Case("gemm_f32_" + name, "Gemm", [a, b] + ([c] if c is not None else []), [y.astype(np.float32)],
                   attrs=at, **F32_TOL)
    a, b, c = rng.standard_normal((3, 4)), rng.standard_normal((5, 4)), rng.standard_normal((5,))
    yield Case("gemm_f64", "Gemm", [a, b, c], [0.5 * a @ b.T + 3.0 * c],
               attrs={"alpha": 0.5, "beta": 3.0, "transB": 1})
    a16, b16, c16 = a.astype(np.float16), b.astype(np.float16), c.astype(np.float16)
    y = (0.5 * ref_matmul(a16, b16.T) + 3.0 * c16.astype(np.float64)).astype(np.float16)
    yield Case("gemm_f16", "Gemm", [a16, b16, c16], [y], attrs={"alpha": 0.5, "beta": 3.0, "transB": 1}, **F16_TOL)
    ab, bb, cb = (bf16_round(v.astype(np.float32)) for v in (a, b, c))
    y = 0.5 * ref_matmul(ab, bb.T) + 3.0 * cb
    yield Case("gemm_bf16", "Gemm", [ab, bb, cb], [y.astype(np.float32)],
               attrs={"alpha": 0.5, "beta": 3.0, "transB": 1}, feed_dtype={0: "bf16", 1: "bf16", 2: "bf16"}, **BF16_TOL)
    # integers, as weft's CPU defines them: each term truncated toward zero on its own, then wrapped
    def igemm(a, b, c, alpha, beta, ta=0, tb=0):
        prod = (a.T if ta else a).astype(np.int64) @ (b.T if tb else b).astype(np.int64)
        prod = prod.astype(a.dtype).astype(np.float64)
        v = np.trunc(prod * alpha).astype(np.int64)
        if c is not None:
            v = v + np.trunc(beta * c.astype(np.float64)).astype(np.int64)
        return v.astype(a.dtype)

    ia, ib, ic = (rng.integers(-60, 60, s).astype(np.int32) for s in ((5, 7), (6, 7), (6,)))
    yield Case("gemm_i32_alpha_beta_transB", "Gemm", [ia, ib, ic], [igemm(ia, ib, ic, 0.5, -1.5, tb=1)],
               attrs={"alpha": 0.5, "beta": -1.5, "transB": 1})
    # beyond 32 bits but exact in double (the epilogue goes through double, as on the CPU)
    ia, ib, ic = (rng.integers(-2**20, 2**20, s).astype(np.int64) for s in ((9, 4), (9, 3), (4, 1)))
    yield Case("gemm_i64_transA_large", "Gemm", [ia, ib, ic], [igemm(ia, ib, ic, 1.0, 1.0, ta=1)],
               attrs={"transA": 1})
    ia, ib, ic = np.zeros((3, 0), np.int32), np.zeros((0, 4), np.int32), rng.integers(-9, 9, (3, 4)).astype(np.int32)
    yield Case("gemm_i32_empty_k", "Gemm", [ia, ib, ic], [igemm(ia, ib, ic, 2.0, 3.0)], attrs={"alpha": 2.0, "beta": 3.0})
    ia, ib = (rng.integers(-9, 9, s).astype(np.int64) for s in ((2, 3), (3, 4)))
    yield Case("gemm_i64_no_c", "Gemm", [ia, ib], [igemm(ia, ib, None, -2.5, 0.0)], attrs={"alpha": -2.5})
    yield Case("gemm_f32_empty_m", "Gemm", [f(0, 4), f(4, 5)], [np.zeros((0, 5), np.float32)])
    yield Case("gemm_err_rank", "Gemm", [f(2, 3, 4), f(4, 5)], error=err("INVALID_ARGUMENT", "must both be 2-D"))
    yield Case("gemm_err_inner", "Gemm", [f(2, 3), f(4, 5)], error=err("INVALID_ARGUMENT", "incompatible inner dims"))
    yield Case("gemm_err_c", "Gemm", [f(2, 3), f(3, 5), f(3, 5)],
               error=err("INVALID_ARGUMENT", "does not broadcast to the output"))
    yield Case("gemm_err_dtype", "Gemm", [f(2, 3), rng.standard_normal((3, 5))],
               error=err("INVALID_ARGUMENT", "different dtype"))


def bias_add_cases(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    yield Case("bias_add_f32_nhwc", "BiasAdd", [x, b], [x + b])
    b3 = rng.standard_normal(3).astype(np.float32)
    yield Case("bias_add_f32_nchw", "BiasAdd", [x, b3], [x + b3[None, :, None]], attrs={"data_format": "NCHW"})
    x4 = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
    yield Case("bias_add_f32_nchw_4d", "BiasAdd", [x4, b3], [x4 + b3[None, :, None, None]], attrs={"data_format": "NCHW"})
    yield Case("bias_add_f32_1d", "BiasAdd", [b, b], [b + b])
    xd, bd = x.astype(np.float64), b.astype(np.float64)
    yield Case("bias_add_f64", "BiasAdd", [xd, bd], [xd + bd])
    xh, bh = x.astype(np.float16), b.astype(np.float16)
    yield Case("bias_add_f16", "BiasAdd", [xh, bh], [xh + bh])
    xb, bb = bf16_round(x), bf16_round(b)
    yield Case("bias_add_bf16", "BiasAdd", [xb, bb], [bf16_round(xb + bb)], feed_dtype={0: "bf16", 1: "bf16"},
               rtol=1e-2, atol=1e-2)
    for dt in (np.int8, np.uint8, np.int16, np.int32, np.int64):
        xi = rng.integers(0, 100, (3, 5)).astype(dt)
        bi = rng.integers(0, 100, 5).astype(dt)
        with np.errstate(over="ignore"):
            yield Case("bias_add_%s" % np.dtype(dt).name, "BiasAdd", [xi, bi], [xi + bi])
    yield Case("bias_add_f32_empty", "BiasAdd", [np.zeros((0, 4), np.float32), b], [np.zeros((0, 4), np.float32)])
    xl = rng.standard_normal((600, 512)).astype(np.float32)
    bl = rng.standard_normal(512).astype(np.float32)
    yield Case("bias_add_f32_large", "BiasAdd", [xl, bl], [xl + bl])
    xl2 = rng.standard_normal((4, 64, 32, 40)).astype(np.float32)
    bl2 = rng.standard_normal(64).astype(np.float32)
    yield Case("bias_add_f32_large_nchw", "BiasAdd", [xl2, bl2], [xl2 + bl2[None, :, None, None]],
               attrs={"data_format": "NCHW"})
    yield Case("bias_add_err_len", "BiasAdd", [x, b3], error=err("INVALID_ARGUMENT", "does not match channel dim"))
    yield Case("bias_add_err_format", "BiasAdd", [x, b], attrs={"data_format": "NCWH"},
               error=err("INVALID_ARGUMENT", "data_format"))
    yield Case("bias_add_err_dtype", "BiasAdd", [x, bd], error=err("INVALID_ARGUMENT", "different dtypes"))
    yield Case("bias_add_err_rank", "BiasAdd", [x, b.reshape(2, 2)], error=err("INVALID_ARGUMENT", "must be 1-D"))


def conv_cases(rng):
    def f(*s):
        return rng.standard_normal(s).astype(np.float32)

    configs = [
        ("basic", (2, 3, 7, 7), (4, 3, 3, 3), True, {}),
        ("stride_pad", (2, 3, 9, 8), (5, 3, 3, 3), True, {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
        ("asym_pad", (1, 2, 6, 7), (3, 2, 3, 2), False, {"pads": [0, 1, 2, 0], "strides": [1, 2]}),
        ("dilation", (1, 2, 9, 9), (3, 2, 3, 3), True, {"dilations": [2, 3], "pads": [1, 1, 1, 1]}),
        ("group2", (2, 4, 6, 6), (6, 2, 3, 3), True, {"group": 2, "pads": [1, 1, 1, 1]}),
        ("depthwise", (2, 6, 8, 8), (6, 1, 3, 3), True, {"group": 6, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
        # depthwise 3x3 through the CPU's direct kernel: ShuffleNetV2's channels, a row of 13 (a vector and a
        # tail of 5), odd sizes at stride 2, asymmetric and large pads, a single column, an unpadded 1x1 result
        ("dw_s1_58", (2, 58, 14, 14), (58, 1, 3, 3), True, {"group": 58, "pads": [1, 1, 1, 1]}),
        ("dw_s1_w13", (1, 5, 9, 13), (5, 1, 3, 3), True, {"group": 5, "pads": [1, 1, 1, 1]}),
        ("dw_s2_odd", (1, 7, 15, 17), (7, 1, 3, 3), True, {"group": 7, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
        ("dw_s2_116", (1, 116, 28, 28), (116, 1, 3, 3), True, {"group": 116, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
        ("dw_asym", (1, 4, 6, 11), (4, 1, 3, 3), False, {"group": 4, "pads": [0, 2, 1, 0]}),
        ("dw_bigpad", (1, 2, 20, 20), (2, 1, 3, 3), True, {"group": 2, "pads": [2, 3, 2, 1], "strides": [2, 2]}),
        ("dw_w1", (1, 3, 5, 1), (3, 1, 3, 3), True, {"group": 3, "pads": [1, 1, 1, 1]}),
        ("dw_valid_s2", (1, 3, 3, 3), (3, 1, 3, 3), True, {"group": 3, "strides": [2, 2]}),
        ("same_upper", (1, 3, 7, 8), (2, 3, 4, 3), True, {"auto_pad": "SAME_UPPER", "strides": [2, 3]}),
        ("same_lower", (1, 3, 7, 8), (2, 3, 4, 3), True, {"auto_pad": "SAME_LOWER", "strides": [2, 3]}),
        ("valid", (1, 3, 7, 8), (2, 3, 3, 3), False, {"auto_pad": "VALID", "pads": [1, 1, 1, 1]}),
        ("kernel_shape", (1, 2, 5, 5), (2, 2, 2, 2), False, {"kernel_shape": [2, 2]}),
        ("1x1", (2, 16, 5, 5), (8, 16, 1, 1), True, {}),
        ("k500", (1, 56, 6, 6), (4, 56, 3, 3), True, {"pads": [1, 1, 1, 1]}),
    ]
    for name, sx, sw, bias, at in configs:
        x, w = f(*sx), f(*sw)
        b = f(sw[0]) if bias else None
        kw = dict(strides=at.get("strides", (1, 1)), pads=at.get("pads", (0, 0, 0, 0)),
                  dil=at.get("dilations", (1, 1)), group=at.get("group", 1), auto_pad=at.get("auto_pad", "NOTSET"))
        y = ref_conv(x, w, b, **kw)
        yield Case("conv_f32_" + name, "Conv2D", [x, w] + ([b] if bias else []), [y.astype(np.float32)], attrs=at,
                   **F32_TOL)
        if name in ("stride_pad", "group2"):
            xd, wd = x.astype(np.float64), w.astype(np.float64)
            bd = b.astype(np.float64) if bias else None
            yield Case("conv_f64_" + name, "Conv2D", [xd, wd] + ([bd] if bias else []), [ref_conv(xd, wd, bd, **kw)],
                       attrs=at, rtol=1e-10, atol=1e-12)
            xh, wh = x.astype(np.float16), w.astype(np.float16)
            bh = b.astype(np.float16) if bias else None
            yield Case("conv_f16_" + name, "Conv2D", [xh, wh] + ([bh] if bias else []),
                       [ref_conv(xh, wh, bh, **kw).astype(np.float16)], attrs=at, rtol=1e-2, atol=1e-2)
            xb, wb = bf16_round(x), bf16_round(w)
            bb = bf16_round(b) if bias else None
            yield Case("conv_bf16_" + name, "Conv2D", [xb, wb] + ([bb] if bias else []),
                       [ref_conv(xb, wb, bb, **kw).astype(np.float32)], attrs=at,
                       feed_dtype={0: "bf16", 1: "bf16", 2: "bf16"}, rtol=5e-2, atol=1e-1)
    x, w = f(4, 16, 40, 40), f(16, 16, 3, 3)
    yield Case("conv_f32_large", "Conv2D", [x, w], [ref_conv(x, w, pads=(1, 1, 1, 1)).astype(np.float32)],
               attrs={"pads": [1, 1, 1, 1]}, rtol=1e-4, atol=1e-4)
    yield Case("conv_f32_empty_batch", "Conv2D", [f(0, 3, 5, 5), f(2, 3, 3, 3)], [np.zeros((0, 2, 3, 3), np.float32)])
    yield Case("conv_err_rank", "Conv2D", [f(3, 5, 5), f(2, 3, 3, 3)], error=err("INVALID_ARGUMENT", "must be 4-D"))
    yield Case("conv_err_channels", "Conv2D", [f(1, 3, 5, 5), f(2, 4, 3, 3)],
               error=err("INVALID_ARGUMENT", "input channels"))
    yield Case("conv_err_group", "Conv2D", [f(1, 3, 5, 5), f(2, 1, 3, 3)], attrs={"group": 2},
               error=err("INVALID_ARGUMENT", "not divisible by group 2"))
    yield Case("conv_err_strides", "Conv2D", [f(1, 3, 5, 5), f(2, 3, 3, 3)], attrs={"strides": [1, 1, 1]},
               error=err("INVALID_ARGUMENT", "strides has 3 values"))
    yield Case("conv_err_pads", "Conv2D", [f(1, 3, 5, 5), f(2, 3, 3, 3)], attrs={"pads": [1, 1]},
               error=err("INVALID_ARGUMENT", "pads has 2 values"))
    yield Case("conv_err_auto_pad", "Conv2D", [f(1, 3, 5, 5), f(2, 3, 3, 3)], attrs={"auto_pad": "SAME"},
               error=err("INVALID_ARGUMENT", "auto_pad 'SAME'"))
    yield Case("conv_err_kernel_shape", "Conv2D", [f(1, 3, 5, 5), f(2, 3, 3, 3)], attrs={"kernel_shape": [2, 2]},
               error=err("INVALID_ARGUMENT", "does not match the weights"))
    yield Case("conv_err_too_small", "Conv2D", [f(1, 3, 2, 2), f(2, 3, 3, 3)],
               error=err("INVALID_ARGUMENT", "exceeds the padded input"))
    yield Case("conv_err_dtype", "Conv2D", [f(1, 3, 5, 5), rng.standard_normal((2, 3, 3, 3))],
               error=err("INVALID_ARGUMENT", "different dtype"))
    yield Case("conv_err_int", "Conv2D", [np.ones((1, 3, 5, 5), np.int32), np.ones((2, 3, 3, 3), np.int32)],
               error=err("INVALID_ARGUMENT", "expected one of"))
    yield Case("conv_err_bias", "Conv2D", [f(1, 3, 5, 5), f(2, 3, 3, 3), f(3)],
               error=err("INVALID_ARGUMENT", "output channels"))


def convt_cases(rng):
    def f(*s):
        return rng.standard_normal(s).astype(np.float32)

    configs = [
        ("basic", (2, 3, 4, 4), (3, 2, 3, 3), True, {}),
        ("stride", (1, 2, 4, 5), (2, 3, 3, 3), True, {"strides": [2, 2]}),
        ("stride_pad", (1, 2, 4, 5), (2, 3, 3, 2), False, {"strides": [2, 3], "pads": [1, 0, 1, 1]}),
        ("output_padding", (1, 2, 4, 4), (2, 2, 3, 3), True, {"strides": [2, 2], "output_padding": [1, 1]}),
        ("dilation", (1, 2, 4, 4), (2, 2, 2, 3), False, {"dilations": [2, 2]}),
        ("group", (2, 4, 3, 3), (4, 3, 3, 3), True, {"group": 2, "strides": [2, 1]}),
        ("output_shape", (1, 2, 4, 4), (2, 2, 3, 3), False, {"strides": [2, 2], "output_shape": [9, 10]}),
        ("same_upper", (1, 2, 4, 5), (2, 2, 3, 3), False, {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
        ("same_lower", (1, 2, 4, 5), (2, 2, 3, 3), False, {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ]
    for name, sx, sw, bias, at in configs:
        x, w = f(*sx), f(*sw)
        g = at.get("group", 1)
        b = f(sw[1] * g) if bias else None
        kw = dict(strides=at.get("strides", (1, 1)), pads=at.get("pads", (0, 0, 0, 0)),
                  dil=at.get("dilations", (1, 1)), group=g, opad=at.get("output_padding", (0, 0)),
                  output_shape=at.get("output_shape"), auto_pad=at.get("auto_pad", "NOTSET"))
        y = ref_convt(x, w, b, **kw)
        yield Case("convt_f32_" + name, "ConvTranspose2D", [x, w] + ([b] if bias else []), [y.astype(np.float32)],
                   attrs=at, **F32_TOL)
    x, w, b = f(1, 2, 4, 4), f(2, 3, 3, 3), f(3)
    kw = dict(strides=(2, 2), pads=(1, 1, 0, 0))
    yield Case("convt_f64", "ConvTranspose2D", [x.astype(np.float64), w.astype(np.float64), b.astype(np.float64)],
               [ref_convt(x, w, b, **kw)], attrs={"strides": [2, 2], "pads": [1, 1, 0, 0]})
    yield Case("convt_f16", "ConvTranspose2D", [x.astype(np.float16), w.astype(np.float16), b.astype(np.float16)],
               [ref_convt(x.astype(np.float16), w.astype(np.float16), b.astype(np.float16), **kw).astype(np.float16)],
               attrs={"strides": [2, 2], "pads": [1, 1, 0, 0]}, rtol=1e-2, atol=1e-2)
    x, w = f(2, 16, 40, 40), f(16, 8, 2, 2)
    yield Case("convt_f32_large", "ConvTranspose2D", [x, w], [ref_convt(x, w, strides=(2, 2)).astype(np.float32)],
               attrs={"strides": [2, 2]}, **F32_TOL)
    yield Case("convt_err_channels", "ConvTranspose2D", [f(1, 3, 4, 4), f(2, 2, 3, 3)],
               error=err("INVALID_ARGUMENT", "input channels"))
    yield Case("convt_err_output_padding", "ConvTranspose2D", [f(1, 2, 4, 4), f(2, 2, 3, 3)],
               attrs={"output_padding": [2, 2]}, error=err("INVALID_ARGUMENT", "output_padding"))
    yield Case("convt_err_rank", "ConvTranspose2D", [f(2, 4, 4), f(2, 2, 3, 3)],
               error=err("INVALID_ARGUMENT", "must be 4-D"))


def pool_cases(rng):
    def f(*s):
        return rng.standard_normal(s).astype(np.float32)

    configs = [
        ("basic", (2, 3, 6, 6), {"kernel_shape": [2, 2], "strides": [2, 2]}),
        ("overlap", (1, 2, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2]}),
        ("pads", (1, 2, 5, 6), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
        ("asym_pads", (1, 2, 5, 6), {"kernel_shape": [3, 2], "pads": [2, 0, 1, 1], "strides": [1, 2]}),
        ("ceil", (1, 2, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 3], "ceil_mode": 1}),
        ("ceil_pads", (1, 2, 6, 6), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1}),
        ("same_upper", (1, 2, 7, 6), {"kernel_shape": [3, 2], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
        ("same_lower", (1, 2, 7, 6), {"kernel_shape": [3, 2], "strides": [2, 2], "auto_pad": "SAME_LOWER"}),
        ("valid", (1, 2, 7, 6), {"kernel_shape": [3, 3], "auto_pad": "VALID"}),
        ("dilation", (1, 2, 9, 9), {"kernel_shape": [2, 3], "dilations": [2, 2], "pads": [1, 1, 1, 1]}),
        # combinations that go through oneDNN pooling: the ceil overhang becomes extra end padding (max and
        # exclude-pad avg), include-pad avg only without an overhang
        ("ceil_dilation", (1, 3, 10, 11), {"kernel_shape": [3, 2], "strides": [2, 3], "dilations": [2, 3],
                                           "pads": [1, 2, 0, 1], "ceil_mode": 1}),
        ("ceil_no_overhang", (2, 3, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
        ("ceil_pads_no_overhang", (1, 4, 8, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                                 "ceil_mode": 1}),
        ("ceil_asym", (1, 2, 8, 10), {"kernel_shape": [2, 4], "strides": [3, 3], "pads": [0, 1, 1, 0],
                                      "ceil_mode": 1}),
        ("resnet_stem", (2, 16, 28, 28), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        ("dilation_stride", (2, 5, 13, 12), {"kernel_shape": [3, 3], "strides": [2, 1], "dilations": [3, 2],
                                             "pads": [2, 1, 1, 2]}),
        # the f32 kernel's paths (k_pool.c, pool_sep_f32): stride 1 with as many outputs as inputs treats a
        # block of planes as one array (GoogLeNet's 3x3/1 pools), here over two blocks of 40 and 24 planes
        ("same_s1_blocks", (1, 64, 20, 20), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "ceil_mode": 1}),
        ("same_s1_7x7", (2, 9, 7, 7), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
        ("k5_s1", (1, 3, 12, 11), {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2]}),
        ("k4_s3_ceil", (2, 3, 17, 16), {"kernel_shape": [4, 4], "strides": [3, 3], "pads": [1, 2, 1, 0],
                                        "ceil_mode": 1}),
        ("k1_s2", (1, 4, 9, 8), {"kernel_shape": [1, 1], "strides": [2, 2]}),
        ("wide_row", (1, 2, 3, 2500), {"kernel_shape": [2, 3], "strides": [1, 2], "pads": [0, 1, 1, 1]}),
        ("tall_narrow", (1, 2, 40, 1), {"kernel_shape": [3, 1], "strides": [2, 1], "pads": [1, 0, 1, 0]}),
    ]
    for kind, op in (("max", "MaxPool2D"), ("avg", "AvgPool2D")):
        for name, sx, at in configs:
            x = f(*sx)
            kw = dict(strides=at.get("strides", (1, 1)), pads=at.get("pads", (0, 0, 0, 0)),
                      dil=at.get("dilations", (1, 1)), ceil_mode=at.get("ceil_mode", 0),
                      auto_pad=at.get("auto_pad", "NOTSET"))
            yield Case("%s_f32_%s" % (op.lower(), name), op, [x],
                       [ref_pool(x, kind, at["kernel_shape"], **kw).astype(np.float32)], attrs=at, **F32_TOL)
            if kind == "avg" and ("pads" in at or at.get("ceil_mode") or "auto_pad" in at):
                at2 = dict(at, count_include_pad=1)
                yield Case("%s_f32_%s_cip" % (op.lower(), name), op, [x],
                           [ref_pool(x, kind, at["kernel_shape"], cip=1, **kw).astype(np.float32)], attrs=at2,
                           **F32_TOL)
        at = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
        kw = dict(strides=(2, 2), pads=(1, 1, 1, 1))
        x = f(2, 3, 7, 7)
        yield Case("%s_f64" % op.lower(), op, [x.astype(np.float64)], [ref_pool(x, kind, (3, 3), **kw)], attrs=at)
        xh = x.astype(np.float16)
        yield Case("%s_f16" % op.lower(), op, [xh], [ref_pool(xh, kind, (3, 3), **kw).astype(np.float16)], attrs=at)
        xb = bf16_round(x)
        yield Case("%s_bf16" % op.lower(), op, [xb], [bf16_round(ref_pool(xb, kind, (3, 3), **kw))], attrs=at,
                   feed_dtype={0: "bf16"}, rtol=1e-2, atol=1e-2)
        # NaN propagates through a window as in numpy (and the ONNX reference)
        xn = f(1, 2, 6, 6)
        xn[0, 0, 1, 1] = np.nan
        xn[0, 1, 5, 4] = np.nan
        atn = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1}
        with np.errstate(invalid="ignore"):
            yn = ref_pool(xn, kind, (3, 3), strides=(2, 2), pads=(1, 1, 1, 1), ceil_mode=1)
        yield Case("%s_f32_nan" % op.lower(), op, [xn], [yn.astype(np.float32)], attrs=atn, **F32_TOL)
        # NaN and both infinities on the stride-1 block path: in an edge column, an inner window, a plane's
        # first and last rows (the values computed across two planes must not leak)
        xs = f(2, 3, 7, 7)
        xs[0, 0, 3, 0] = np.nan
        xs[0, 1, 3, 3] = np.nan
        xs[0, 2, 0, 6] = np.inf
        xs[1, 0, 6, 2] = -np.inf
        xs[1, 1, :, :] = -np.inf
        xs[1, 2, 6, :] = np.nan
        ats = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
        with np.errstate(invalid="ignore"):
            ys = ref_pool(xs, kind, (3, 3), pads=(1, 1, 1, 1))
        yield Case("%s_f32_specials_s1" % op.lower(), op, [xs], [ys.astype(np.float32)], attrs=ats, **F32_TOL)
        xl = f(2, 8, 150, 150)
        yield Case("%s_f32_large" % op.lower(), op, [xl], [ref_pool(xl, kind, (2, 2), strides=(2, 2)).astype(np.float32)],
                   attrs={"kernel_shape": [2, 2], "strides": [2, 2]}, **F32_TOL)
        yield Case("%s_f32_empty" % op.lower(), op, [f(0, 2, 4, 4)], [np.zeros((0, 2, 2, 2), np.float32)],
                   attrs={"kernel_shape": [2, 2], "strides": [2, 2]})
        yield Case("%s_err_no_kernel" % op.lower(), op, [f(1, 2, 4, 4)],
                   error=err("INVALID_ARGUMENT", "kernel_shape is required"))
        yield Case("%s_err_kernel_len" % op.lower(), op, [f(1, 2, 4, 4)], attrs={"kernel_shape": [2]},
                   error=err("INVALID_ARGUMENT", "kernel_shape has 1 values"))
        yield Case("%s_err_rank" % op.lower(), op, [f(2, 4, 4)], attrs={"kernel_shape": [2, 2]},
                   error=err("INVALID_ARGUMENT", "must be 4-D"))
        yield Case("%s_err_pads" % op.lower(), op, [f(1, 2, 4, 4)], attrs={"kernel_shape": [2, 2], "pads": [1, 1, 1]},
                   error=err("INVALID_ARGUMENT", "pads has 3 values"))
        yield Case("%s_err_stride" % op.lower(), op, [f(1, 2, 4, 4)], attrs={"kernel_shape": [2, 2], "strides": [0, 1]},
                   error=err("INVALID_ARGUMENT", "strides[0] is 0"))
        yield Case("%s_err_dtype" % op.lower(), op, [np.ones((1, 2, 4, 4), np.int32)], attrs={"kernel_shape": [2, 2]},
                   error=err("INVALID_ARGUMENT", "expected one of"))


def global_avg_pool_cases(rng):
    for name, shape in (("4d", (2, 3, 5, 4)), ("3d", (2, 3, 7)), ("5d", (1, 2, 3, 4, 2)), ("large", (4, 64, 40, 40)),
                        ("resnet", (2, 512, 7, 7)), ("1x1", (3, 5, 1, 1))):
        x = rng.standard_normal(shape).astype(np.float32)
        y = x.astype(np.float64).mean(axis=tuple(range(2, x.ndim)), keepdims=True)
        yield Case("global_avg_pool_f32_" + name, "GlobalAvgPool", [x], [y.astype(np.float32)], **F32_TOL)
    x = rng.standard_normal((2, 3, 4, 4))
    yield Case("global_avg_pool_f64", "GlobalAvgPool", [x], [x.mean(axis=(2, 3), keepdims=True)])
    xh = x.astype(np.float16)
    yield Case("global_avg_pool_f16", "GlobalAvgPool", [xh],
               [xh.astype(np.float64).mean(axis=(2, 3), keepdims=True).astype(np.float16)])
    xb = bf16_round(x.astype(np.float32))
    yield Case("global_avg_pool_bf16", "GlobalAvgPool", [xb], [bf16_round(xb.mean(axis=(2, 3), keepdims=True))],
               feed_dtype={0: "bf16"}, rtol=1e-2, atol=1e-2)
    yield Case("global_avg_pool_f32_empty", "GlobalAvgPool", [np.zeros((0, 3, 2, 2), np.float32)],
               [np.zeros((0, 3, 1, 1), np.float32)])
    yield Case("global_avg_pool_err_rank", "GlobalAvgPool", [np.ones((2, 3), np.float32)],
               error=err("INVALID_ARGUMENT", "rank >= 3"))
    yield Case("global_avg_pool_err_dtype", "GlobalAvgPool", [np.ones((1, 2, 3, 3), np.int64)],
               error=err("INVALID_ARGUMENT", "expected one of"))


def cases(rng):
    for gen in (matmul_cases, gemm_cases, bias_add_cases, conv_cases, convt_cases, pool_cases, global_avg_pool_cases):
        yield from gen(rng)


