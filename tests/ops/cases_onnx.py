"""Cases for the onnx group (ops_onnx.c): NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, Attention,
RotaryEmbedding, QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul,
ConvInteger, QLinearConv, LpPool, CenterCropPad and Hann/Hamming/BlackmanWindow. References are numpy, written from the ONNX spec
and computed in float64 (f16 cases compare with a looser tolerance)."""
import numpy as np

from opcase import Case, DType

F32, F64, I64 = np.float32, np.float64, np.int64
ERR = "INVALID_ARGUMENT"


def rnd(rng, shape, dt=F32, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(dt)


def err(name, op, inputs, text, attrs=None, const=(), code=ERR):
    return Case(name, op, inputs, attrs=attrs, const=const, error=(code, text))


# ---- losses ---------------------------------------------------------------------------------------------

def ref_nll(logp, t, w=None, ii=None, red="mean", dt=None):
    dt = dt or logp.dtype
    n, c = logp.shape[:2]
    lp = logp.astype(F64).reshape(n, c, -1)
    tr = t.reshape(n, -1).astype(I64)
    valid = (tr != ii) if ii is not None else np.ones(tr.shape, bool)
    tc = np.where(valid, tr, 0)
    picked = -np.take_along_axis(lp, tc[:, None, :], 1)[:, 0, :]
    wt = (w.astype(F64)[tc] if w is not None else np.ones(tr.shape)) * valid
    loss = picked * wt
    if red == "none":
        return loss.reshape(t.shape).astype(dt)
    if red == "sum":
        return np.array(loss.sum(), dt)
    return np.array(loss.sum() / wt.sum(), dt)


def log_softmax(x):
    x = x.astype(F64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def loss_cases(rng):
    out = []
    shapes = [(3, 5), (2, 4, 3), (2, 3, 2, 2, 2)]
    for si, shp in enumerate(shapes):
        x = rnd(rng, shp)
        t = rng.integers(0, shp[1], size=(shp[0],) + shp[2:]).astype(I64)
        w = rng.uniform(0.2, 1.5, size=shp[1]).astype(F32)
        for red in ("none", "sum", "mean"):
            for wi, ww in enumerate((None, w)):
                ins = [x, t] + ([ww] if ww is not None else [])
                out.append(Case("NLL_%d_%s_w%d" % (si, red, wi), "NegativeLogLikelihoodLoss", ins,
                                [ref_nll(x, t, ww, None, red)], attrs={"reduction": red}))
                lp = log_softmax(x)
                out.append(Case("SCE_%d_%s_w%d" % (si, red, wi), "SoftmaxCrossEntropyLoss", ins,
                                [ref_nll(lp, t, ww, None, red, F32), lp.astype(F32)], attrs={"reduction": red},
                                rtol=1e-5, atol=1e-5))
    # ignore_index, including a negative one and one beyond C, with and without weights; i32 targets
    x = rnd(rng, (4, 3, 5), F64)
    for ii in (1, -1, 7):
        t = rng.integers(0, 3, size=(4, 5)).astype(np.int32)
        t[0, :2] = ii
        t[3, 4] = ii
        w = rng.uniform(0.2, 1.5, size=3)
        for red in ("none", "sum", "mean"):
            out.append(Case("NLL_ii%d_%s" % (ii, red), "NegativeLogLikelihoodLoss", [x, t, w],
                            [ref_nll(x, t, w, ii, red)], attrs={"reduction": red, "ignore_index": ii}))
            out.append(Case("SCE_ii%d_%s_now" % (ii, red), "SoftmaxCrossEntropyLoss", [x, t],
                            [ref_nll(log_softmax(x), t, None, ii, red), log_softmax(x)],
                            attrs={"reduction": red, "ignore_index": ii}))
    out.append(Case("NLL_default_mean", "NegativeLogLikelihoodLoss", [x, np.zeros((4, 5), I64)],
                    [ref_nll(x, np.zeros((4, 5), I64))]))
    out.append(err("NLL_err_target", "NegativeLogLikelihoodLoss", [x, np.full((4, 5), 3, I64)], "is not a class"))
    out.append(err("NLL_err_shape", "NegativeLogLikelihoodLoss", [x, np.zeros((4, 3), I64)], "without dim 1"))
    out.append(err("NLL_err_reduction", "NegativeLogLikelihoodLoss", [x, np.zeros((4, 5), I64)],
                   "reduction 'avg'", attrs={"reduction": "avg"}))
    out.append(err("SCE_err_weight", "SoftmaxCrossEntropyLoss", [x, np.zeros((4, 5), I64), np.ones(4)],
                   "one value per class"))
    return out


# ---- Attention --------------------------------------------------------------------------------------------

def to4(x, heads):
    b, s, hd = x.shape
    return x.reshape(b, s, heads, hd // heads).transpose(0, 2, 1, 3)


def ref_attention(q, k, v, mask=None, pk=None, pv=None, nonpad=None, scale=None, causal=0, qh=0, kvh=0,
                  softcap=0.0, mode=0, left=-1, right=-1):
    is3 = q.ndim == 3
    q4, k4, v4 = (to4(q, qh), to4(k, kvh), to4(v, kvh)) if is3 else (q, k, v)
    if pk is not None:
        k4 = np.concatenate([pk, k4], 2)
        v4 = np.concatenate([pv, v4], 2)
    b, hq, sq, d = q4.shape
    hkv, t = k4.shape[1], k4.shape[2]
    rep = hq // hkv
    kr = np.repeat(k4.astype(F64), rep, 1)
    vr = np.repeat(v4.astype(F64), rep, 1)
    sc = scale if scale is not None else 1.0 / np.sqrt(d)
    s = q4.astype(F64) @ kr.transpose(0, 1, 3, 2) * sc
    if softcap > 0:
        s = softcap * np.tanh(s / softcap)
    bias = np.zeros((b, hq, sq, t))
    if mask is not None:
        m = mask
        padw = t - m.shape[-1]
        if padw:
            m = np.concatenate([m, np.full(m.shape[:-1] + (padw,), False if m.dtype == bool else -np.inf,
                                           m.dtype)], -1)
        m = np.where(m, 0.0, -np.inf) if m.dtype == bool else m.astype(F64)
        bias = bias + m
    past = pk.shape[2] if pk is not None else 0
    if pk is not None:
        offs = np.full(b, past)
    elif nonpad is not None:
        offs = nonpad - sq
    else:
        offs = np.zeros(b, I64)
    diff = np.arange(sq)[None, None, :, None] + offs[:, None, None, None] - np.arange(t)[None, None, None, :]
    forbid = np.zeros(diff.shape, bool)
    if causal:
        forbid |= diff < 0
    if left >= 0:
        forbid |= diff > left
    if right >= 0:
        forbid |= -diff > right
    if nonpad is not None:
        forbid |= np.arange(t)[None, None, None, :] >= nonpad[:, None, None, None]
    bias = np.where(forbid, -np.inf, bias)
    x = s + bias
    dead = np.all(bias == -np.inf, axis=-1, keepdims=True)
    mx = np.where(dead, 0.0, x.max(-1, keepdims=True))
    e = np.where(dead, 0.0, np.exp(x - mx))
    p = e / np.where(dead, 1.0, e.sum(-1, keepdims=True))
    y = p @ vr
    if is3:
        y = y.transpose(0, 2, 1, 3).reshape(b, sq, -1)
    qk = {0: s, 1: s, 2: x, 3: p}[mode]
    dt = q.dtype
    return [y.astype(dt), k4.astype(dt), v4.astype(dt), qk.astype(dt)]


def attention_cases(rng):
    out = []

    def add(name, ins, attrs=None, rtol=1e-5, atol=1e-5, y_only=False, **kw):
        names = ["mask", "pk", "pv", "nonpad"]
        full = [ins[0], ins[1], ins[2]] + [kw.get(n) for n in names]
        while full[-1] is None:
            full.pop()
        a = attrs or {}
        ref = ref_attention(ins[0], ins[1], ins[2], mask=kw.get("mask"), pk=kw.get("pk"), pv=kw.get("pv"),
                            nonpad=kw.get("nonpad"), scale=a.get("scale"), causal=a.get("is_causal", 0),
                            qh=a.get("q_num_heads", 0), kvh=a.get("kv_num_heads", 0), softcap=a.get("softcap", 0.0),
                            mode=a.get("qk_matmul_output_mode", 0), left=a.get("left_window_size", -1),
                            right=a.get("right_window_size", -1))
        # y_only: only Y is fetched, so the present key/value and scores have no reader and f32 takes
        # the CPU kernel's fast path (sgemm per head and query block, k_onnx_attn.c)
        out.append(Case("Attention_" + name, "Attention", full, ref[:1] if y_only else ref, attrs=a, rtol=rtol,
                        atol=atol))

    q, k, v = rnd(rng, (2, 3, 4, 8)), rnd(rng, (2, 3, 6, 8)), rnd(rng, (2, 3, 6, 5))
    add("4d", [q, k, v])
    add("4d_scale_softcap", [q, k, v], {"scale": 0.3, "softcap": 1.5})
    add("4d_causal", [q, k, v], {"is_causal": 1})
    add("4d_fmask_mode2", [q, k, v], {"qk_matmul_output_mode": 2}, mask=rnd(rng, (4, 6)))
    bm = rng.random((2, 1, 4, 6)) < 0.7
    bm[0, 0, 1, :] = False  # a fully masked row is zero
    add("4d_bmask_mode3", [q, k, v], {"qk_matmul_output_mode": 3}, mask=bm)
    add("4d_short_mask_causal", [q, k, v], {"is_causal": 1}, mask=rnd(rng, (3, 4, 4)))
    qg = rnd(rng, (2, 6, 4, 8))
    add("gqa_past_mode1", [qg, k, v], {"qk_matmul_output_mode": 1, "softcap": 2.0, "is_causal": 1},
        pk=rnd(rng, (2, 3, 3, 8)), pv=rnd(rng, (2, 3, 3, 5)), mask=rng.random((9,)) < 0.8)
    add("nonpad_causal", [q, k, v], {"is_causal": 1}, nonpad=np.array([5, 6], I64))
    add("window", [q, k, v], {"left_window_size": 1, "right_window_size": 2})
    add("window_causal_past", [q, k, v], {"left_window_size": 2, "is_causal": 1},
        pk=rnd(rng, (2, 3, 2, 8)), pv=rnd(rng, (2, 3, 2, 5)))
    q3, k3, v3 = rnd(rng, (2, 4, 24)), rnd(rng, (2, 5, 8)), rnd(rng, (2, 5, 10))
    add("3d_gqa", [q3, k3, v3], {"q_num_heads": 6, "kv_num_heads": 2})
    add("3d_past_causal", [q3, k3, v3], {"q_num_heads": 6, "kv_num_heads": 2, "is_causal": 1},
        pk=rnd(rng, (2, 2, 3, 4)), pv=rnd(rng, (2, 2, 3, 5)), mask=rnd(rng, (2, 1, 4, 8)))
    add("4d_f64", [q.astype(F64), k.astype(F64), v.astype(F64)], {"is_causal": 1}, rtol=1e-11, atol=1e-12)
    add("4d_f16", [q.astype(np.float16), k.astype(np.float16), v.astype(np.float16)], {"is_causal": 1},
        rtol=5e-3, atol=3e-3)
    # the fast path: Y alone, f32, no cache/causality/window/softcap
    add("fast_4d", [q, k, v], y_only=True)
    add("fast_4d_fmask_scale", [q, k, v], {"scale": 0.7}, y_only=True, mask=rnd(rng, (4, 6)))
    add("fast_4d_bmask_dead_row", [q, k, v], y_only=True, mask=bm)
    fm = rnd(rng, (2, 3, 4, 6))
    fm[1, 2, 3, :] = -np.inf  # a float mask forbidding every key: a zero row too
    fm[0, 1, 0, 2] = -np.inf
    add("fast_4d_fmask_inf", [q, k, v], y_only=True, mask=fm)
    add("fast_short_mask", [q, k, v], y_only=True, mask=rnd(rng, (1, 4, 4)))
    add("fast_3d_gqa", [q3, k3, v3], {"q_num_heads": 6, "kv_num_heads": 2}, y_only=True, mask=rnd(rng, (4, 5)))
    # scores all -inf from the inputs themselves (not the mask): NaN, as Softmax gives; a NaN in Q: NaN row
    qn = q.copy()
    qn[0, 0, 1, :] = -np.inf
    qn[1, 2, 3, 0] = np.nan
    kp = rnd(rng, (2, 3, 6, 8), lo=0.1, hi=1.0)
    add("fast_nan_inf", [qn, kp, v], y_only=True)
    lq, lk, lv = rnd(rng, (2, 100, 4 * 16)), rnd(rng, (2, 70, 4 * 16)), rnd(rng, (2, 70, 4 * 24))
    add("fast_3d_long", [lq, lk, lv], {"q_num_heads": 4, "kv_num_heads": 4}, y_only=True, rtol=2e-5, atol=2e-5,
        mask=rng.random((100, 70)) < 0.9)
    add("fast_empty_q", [rnd(rng, (2, 3, 0, 8)), k, v], y_only=True)
    big_q, big_k, big_v = rnd(rng, (1, 4, 64, 32)), rnd(rng, (1, 2, 64, 32)), rnd(rng, (1, 2, 64, 32))
    add("large_gqa_causal", [big_q, big_k, big_v], {"is_causal": 1})
    out.append(err("Attention_err_heads", "Attention", [rnd(rng, (2, 4, 24)), k3, v3],
                   "needs q_num_heads and kv_num_heads"))
    out.append(err("Attention_err_gqa", "Attention", [rnd(rng, (2, 4, 4, 8)), k, v], "multiple of kv heads"))
    out.append(err("Attention_err_mask", "Attention", [q, k, v, rnd(rng, (5, 6))], "does not broadcast"))
    out.append(err("Attention_err_past", "Attention", [q, k, v, None, rnd(rng, (2, 3, 3, 8))],
                   "must be given together"))
    return out


# ---- RotaryEmbedding ---------------------------------------------------------------------------------------

def ref_rotary(x, cos, sin, pos=None, interleaved=0, rd=0, heads=0):
    is3 = x.ndim == 3
    x4 = x.reshape(x.shape[0], x.shape[1], heads, -1) if is3 else x.transpose(0, 2, 1, 3)  # (B, S, H, D)
    d = x4.shape[-1]
    rd = rd or d
    if pos is not None:
        cos, sin = cos[pos], sin[pos]
    c, s = cos.astype(F64)[:, :, None, :], sin.astype(F64)[:, :, None, :]
    xr = x4.astype(F64).copy()
    if interleaved:
        x1, x2 = xr[..., 0:rd:2].copy(), xr[..., 1:rd:2].copy()
        xr[..., 0:rd:2], xr[..., 1:rd:2] = c * x1 - s * x2, s * x1 + c * x2
    else:
        h = rd // 2
        x1, x2 = xr[..., :h].copy(), xr[..., h:rd].copy()
        xr[..., :h], xr[..., h:rd] = c * x1 - s * x2, s * x1 + c * x2
    y = xr.reshape(x.shape) if is3 else xr.transpose(0, 2, 1, 3)
    return y.astype(x.dtype)


def rotary_cases(rng):
    out = []
    x4 = rnd(rng, (2, 3, 5, 8))
    theta = rng.uniform(0, 6.3, size=(10, 4))
    cos, sin = np.cos(theta).astype(F32), np.sin(theta).astype(F32)
    pos = rng.integers(0, 10, size=(2, 5)).astype(I64)
    for inter in (0, 1):
        out.append(Case("Rotary_4d_pos_i%d" % inter, "RotaryEmbedding", [x4, cos, sin, pos],
                        [ref_rotary(x4, cos, sin, pos, inter)], attrs={"interleaved": inter}))
    x3 = rnd(rng, (2, 5, 24))
    th = rng.uniform(0, 6.3, size=(2, 5, 2))
    c3, s3 = np.cos(th).astype(F32), np.sin(th).astype(F32)
    for inter in (0, 1):
        out.append(Case("Rotary_3d_rd4_i%d" % inter, "RotaryEmbedding", [x3, c3, s3],
                        [ref_rotary(x3, c3, s3, None, inter, 4, 3)],
                        attrs={"interleaved": inter, "num_heads": 3, "rotary_embedding_dim": 4}))
    out.append(err("Rotary_err_cache", "RotaryEmbedding", [x4, cos[:, :3], sin[:, :3], pos], "do not fit"))
    out.append(err("Rotary_err_pos", "RotaryEmbedding", [x4, cos, sin, pos + 10], "outside the caches"))
    return out


# ---- quantisation -----------------------------------------------------------------------------------------

QR = {np.uint8: (0, 255), np.int8: (-128, 127), np.int16: (-32768, 32767)}


def expand_param(p, shape, axis, block):
    if p.ndim == 0 or (p.size == 1 and not block):
        return p.reshape(())
    axis %= len(shape)
    if not block:
        dims = [1] * len(shape)
        dims[axis] = p.size
        return p.reshape(dims)
    return np.repeat(p, block, axis=axis).take(range(shape[axis]), axis=axis)


def ref_quant(x, s, zp=None, axis=1, block=0, dt=np.uint8):
    q = np.rint(x.astype(F64) / expand_param(s, x.shape, axis, block).astype(F64))
    if zp is not None:
        q = q + expand_param(zp, x.shape, axis, block)
    lo, hi = QR[dt]
    return np.clip(q, lo, hi).astype(dt)


def ref_dequant(x, s, zp=None, axis=1, block=0):
    v = x.astype(F64)
    if zp is not None:
        v = v - expand_param(zp, x.shape, axis, block)
    return (v * expand_param(s, x.shape, axis, block)).astype(s.dtype)


def quant_cases(rng):
    out = []
    # per tensor, default u8; halves round to even
    x = (np.arange(-8, 16, dtype=F32) * 0.25 + 0.125).reshape(4, 6)
    s = np.array(0.25, F32)
    out.append(Case("Quantize_default_u8", "QuantizeLinear", [x, s], [ref_quant(x, s)]))
    zp = np.array(3, np.int8)
    out.append(Case("Quantize_i8_zp", "QuantizeLinear", [x * 40, s, zp], [ref_quant(x * 40, s, zp, dt=np.int8)]))
    # per axis, and the output_dtype attribute
    x3 = rnd(rng, (2, 3, 4), lo=-50, hi=50)
    s3 = np.array([0.5, 0.25, 2.0], F32)
    z3 = np.array([1, -2, 100], np.int16)
    out.append(Case("Quantize_axis1_i16", "QuantizeLinear", [x3, s3, z3], [ref_quant(x3, s3, z3, 1, 0, np.int16)]))
    out.append(Case("Quantize_axis_last_out_i8", "QuantizeLinear", [x3, np.array([0.5, 1, 2, 4], F32)],
                    [ref_quant(x3, np.array([0.5, 1, 2, 4], F32), None, -1, 0, np.int8)],
                    attrs={"axis": -1, "output_dtype": DType("i8")}))
    # blocked along axis 1 with a remainder block
    xb = rnd(rng, (2, 5, 3), lo=-20, hi=20)
    sb = rng.uniform(0.1, 1.0, size=(2, 3, 3)).astype(F32)
    zb = rng.integers(0, 30, size=(2, 3, 3)).astype(np.uint8)
    out.append(Case("Quantize_blocked", "QuantizeLinear", [xb, sb, zb], [ref_quant(xb, sb, zb, 1, 2)],
                    attrs={"block_size": 2}))
    xq = rng.integers(-128, 128, size=(2, 5, 3)).astype(np.int8)
    zq = rng.integers(-5, 5, size=(2, 3, 3)).astype(np.int8)
    out.append(Case("Dequantize_blocked", "DequantizeLinear", [xq, sb, zq], [ref_dequant(xq, sb, zq, 1, 2)],
                    attrs={"block_size": 2}))
    xu = rng.integers(0, 256, size=(3, 4)).astype(np.uint8)
    out.append(Case("Dequantize_u8", "DequantizeLinear", [xu, np.array(0.5, F32), np.array(128, np.uint8)],
                    [ref_dequant(xu, np.array(0.5, F32), np.array(128, np.uint8))]))
    out.append(Case("Dequantize_axis0_i16", "DequantizeLinear",
                    [x3.astype(np.int16), np.array([0.5, 2.0], F32), np.array([3, -4], np.int16)],
                    [ref_dequant(x3.astype(np.int16), np.array([0.5, 2.0], F32), np.array([3, -4], np.int16), 0)],
                    attrs={"axis": 0}))
    xi = rng.integers(-100000, 100000, size=(6,)).astype(np.int32)
    out.append(Case("Dequantize_i32_f16out", "DequantizeLinear", [xi, np.array(0.001, F32)],
                    [(xi * 0.001).astype(np.float16)], attrs={"output_dtype": DType("f16")}, rtol=1e-3, atol=0))
    out.append(err("Quantize_err_axis", "QuantizeLinear", [x3, np.ones(5, F32)], "does not fit"))
    out.append(err("Dequantize_err_zp", "DequantizeLinear", [xu, np.array(0.5, F32), np.array(1, np.int8)],
                   "must have the dtype of x"))
    # DynamicQuantizeLinear: range includes 0, zero point rounded
    for nm, xd in (("mixed", rnd(rng, (3, 4), lo=-1.3, hi=2.7)), ("pos", rnd(rng, (5,), lo=0.5, hi=3.0)),
                   ("neg", rnd(rng, (2, 2), lo=-4, hi=-1))):
        mx, mn = max(0.0, float(xd.max())), min(0.0, float(xd.min()))
        sc = np.float32((mx - mn) / 255.0)
        zpv = np.rint(np.clip(np.float32(0) - np.float32(mn) / sc, 0, 255))
        y = np.clip(np.rint(xd / sc) + zpv, 0, 255).astype(np.uint8)
        out.append(Case("DynamicQuantize_" + nm, "DynamicQuantizeLinear", [xd],
                        [y, np.array(sc, F32), np.array(zpv, np.uint8)], rtol=1e-6, atol=0))
    return out


def matmul_int_cases(rng):
    out = []
    a = rng.integers(0, 256, size=(2, 1, 3, 4)).astype(np.uint8)
    b = rng.integers(-128, 128, size=(3, 4, 5)).astype(np.int8)
    azp, bzp = np.array(12, np.uint8), np.array(-3, np.int8)
    ref = (a.astype(I64) - 12) @ (b.astype(I64) + 3)
    out.append(Case("MatMulInteger_bcast_zp", "MatMulInteger", [a, b, azp, bzp], [ref.astype(np.int32)]))
    a2 = rng.integers(-128, 128, size=(3, 4)).astype(np.int8)
    out.append(Case("MatMulInteger_nozp", "MatMulInteger", [a2, b[0]], [(a2.astype(I64) @ b[0]).astype(np.int32)]))
    v = rng.integers(0, 256, size=(4,)).astype(np.uint8)
    azr = rng.integers(0, 9, size=(3,)).astype(np.uint8)
    out.append(Case("MatMulInteger_rowzp_vec", "MatMulInteger", [a[0, 0], v, azr],
                    [((a[0, 0].astype(I64) - azr[:, None]) @ v).astype(np.int32)]))
    for dt in (np.uint8, np.int8):
        lo, hi = QR[dt]
        qa = rng.integers(lo, hi + 1, size=(2, 3, 4)).astype(dt)
        qb = rng.integers(lo, hi + 1, size=(4, 2)).astype(dt)
        sa, sb_, sy = np.array(0.02, F32), np.array(0.05, F32), np.array(0.3, F32)
        za, zb, zy = np.array(lo + 100, dt), np.array(lo + 120, dt), np.array(lo + 128, dt)
        acc = (qa.astype(I64) - int(za)) @ (qb.astype(I64) - int(zb))
        mult = np.float32(np.float32(sa * sb_) / sy)
        ref = np.clip(np.rint(acc * np.float64(mult) + int(zy)), lo, hi).astype(dt)
        out.append(Case("QLinearMatMul_%s" % dt.__name__, "QLinearMatMul", [qa, sa, za, qb, sb_, zb, sy, zy], [ref]))
    out.append(err("MatMulInteger_err_shape", "MatMulInteger", [a2, a2], "inner dims"))
    return out


def ref_conv_int(x, w, xzp=0, wzp=None, bias=None, pads=None, strides=None, dil=None, group=1):
    """Direct N-d convolution of (x - xzp) and (w - wzp[m]) in int64."""
    ns = x.ndim - 2
    pads = pads or [0] * (2 * ns)
    strides = strides or [1] * ns
    dil = dil or [1] * ns
    xi = np.pad(x.astype(I64) - int(xzp), [(0, 0), (0, 0)] + [(pads[i], pads[i + ns]) for i in range(ns)])
    wi = w.astype(I64) - (np.asarray(wzp, I64).reshape((-1,) + (1,) * (w.ndim - 1)) if wzp is not None else 0)
    m_, cg = w.shape[:2]
    k = w.shape[2:]
    outs = [(xi.shape[2 + i] - (k[i] - 1) * dil[i] - 1) // strides[i] + 1 for i in range(ns)]
    y = np.zeros((x.shape[0], m_) + tuple(outs), I64)
    mg = m_ // group
    for m in range(m_):
        g = m // mg
        for o in np.ndindex(*outs):
            sl = tuple(slice(o[i] * strides[i], o[i] * strides[i] + (k[i] - 1) * dil[i] + 1, dil[i]) for i in range(ns))
            patch = xi[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]
            y[(slice(None), m) + o] = (patch * wi[m]).reshape(x.shape[0], -1).sum(1)
        if bias is not None:
            y[:, m] += int(bias[m])
    return y


def conv_int_cases(rng):
    out = []
    x = rng.integers(0, 256, size=(2, 4, 5, 6)).astype(np.uint8)
    w = rng.integers(0, 256, size=(6, 2, 3, 2)).astype(np.uint8)
    xzp, wzp = np.array(120, np.uint8), rng.integers(100, 150, size=(6,)).astype(np.uint8)
    attrs = {"group": 2, "pads": [1, 0, 1, 1], "strides": [2, 1], "dilations": [1, 2]}
    ref = ref_conv_int(x, w, xzp, wzp, None, [1, 0, 1, 1], [2, 1], [1, 2], 2)
    out.append(Case("ConvInteger_group_pads", "ConvInteger", [x, w, xzp, wzp], [ref.astype(np.int32)], attrs=attrs))
    x1 = rng.integers(-128, 128, size=(1, 3, 7)).astype(np.int8)
    w1 = rng.integers(-128, 128, size=(2, 3, 3)).astype(np.int8)
    out.append(Case("ConvInteger_1d_nozp", "ConvInteger", [x1, w1], [ref_conv_int(x1, w1).astype(np.int32)]))
    # QLinearConv with per-channel weight scales and a bias; SAME_UPPER on 5x6 with 3x2 kernels pads (1,1)/(0,1)
    xs, ys, yzp = np.array(0.05, F32), np.array(0.9, F32), np.array(128, np.uint8)
    ws = rng.uniform(0.01, 0.05, size=(6,)).astype(F32)
    bias = rng.integers(-5000, 5000, size=(6,)).astype(np.int32)
    acc = ref_conv_int(x, w, xzp, wzp, bias, [1, 0, 1, 1], None, None, 2)
    mult = (np.float32(xs) * ws).astype(F32) / np.float32(ys)
    ref = np.rint(np.clip(acc * mult.astype(F64)[None, :, None, None] + 128, 0, 255)).astype(np.uint8)
    out.append(Case("QLinearConv_same_bias", "QLinearConv", [x, xs, xzp, w, ws, wzp, ys, yzp, bias], [ref],
                    attrs={"group": 2, "auto_pad": "SAME_UPPER"}))
    out.append(err("ConvInteger_err_group", "ConvInteger", [x, w], "channels", attrs={"group": 3}))
    return out


# ---- LpPool, CenterCropPad, windows -------------------------------------------------------------------------

def ref_lppool(x, k, p=2, strides=None, pads=None, dil=None, ceil=False):
    ns = len(k)
    strides = strides or [1] * ns
    dil = dil or [1] * ns
    pads = pads or [0] * (2 * ns)
    xp = np.pad(np.abs(x.astype(F64)) ** p, [(0, 0), (0, 0)] + [(pads[i], pads[i + ns]) for i in range(ns)])
    outs = []
    for i in range(ns):
        span = x.shape[2 + i] + pads[i] + pads[i + ns] - (k[i] - 1) * dil[i] - 1
        o = (-(-span // strides[i]) if ceil else span // strides[i]) + 1
        if ceil and (o - 1) * strides[i] >= x.shape[2 + i] + pads[i]:
            o -= 1
        outs.append(o)
    y = np.zeros(x.shape[:2] + tuple(outs))
    for idx in np.ndindex(*outs):
        acc = 0.0
        for w in np.ndindex(*k):
            c = [idx[i] * strides[i] + w[i] * dil[i] for i in range(ns)]
            if all(c[i] < xp.shape[2 + i] for i in range(ns)):
                acc = acc + xp[(slice(None), slice(None)) + tuple(c)]
        y[(slice(None), slice(None)) + idx] = acc ** (1.0 / p)
    return y.astype(x.dtype)


def ref_center_crop_pad(x, shape, axes=None):
    axes = [a % x.ndim for a in axes] if axes else list(range(x.ndim))
    y = x
    for a, s in zip(axes, shape):
        d = y.shape[a]
        if s < d:
            st = (d - s) // 2
            y = np.take(y, range(st, st + s), axis=a)
        elif s > d:
            before = (s - d) // 2
            pw = [(0, 0)] * y.ndim
            pw[a] = (before, s - d - before)
            y = np.pad(y, pw)
    return y


def misc_cases(rng):
    out = []
    x2 = rnd(rng, (1, 2, 7, 6))
    out.append(Case("LpPool_2d_p3_pads", "LpPool", [x2], [ref_lppool(x2, [3, 2], 3, pads=[1, 0, 2, 1])],
                    attrs={"kernel_shape": [3, 2], "p": 3, "pads": [1, 0, 2, 1]}))
    out.append(Case("LpPool_2d_strides_dil_ceil", "LpPool", [x2],
                    [ref_lppool(x2, [2, 2], 2, strides=[2, 3], dil=[2, 1], ceil=True)],
                    attrs={"kernel_shape": [2, 2], "strides": [2, 3], "dilations": [2, 1], "ceil_mode": 1}))
    x1 = rnd(rng, (2, 3, 9), F64)
    # SAME_UPPER on 9 with kernel 4, stride 2: output 5, total pad 3 -> 1 before, 2 after
    out.append(Case("LpPool_1d_same_upper_p1", "LpPool", [x1], [ref_lppool(x1, [4], 1, [2], pads=[1, 2])],
                    attrs={"kernel_shape": [4], "strides": [2], "p": 1, "auto_pad": "SAME_UPPER"},
                    rtol=1e-12, atol=1e-12))
    x3 = rnd(rng, (1, 1, 4, 3, 5))
    out.append(Case("LpPool_3d", "LpPool", [x3], [ref_lppool(x3, [2, 2, 3])], attrs={"kernel_shape": [2, 2, 3]}))
    out.append(err("LpPool_err_kernel", "LpPool", [x2], "kernel_shape has", attrs={"kernel_shape": [2]}))
    xc = rng.integers(-50, 50, size=(5, 4, 3)).astype(np.int32)
    for nm, shp, axes, const in (("crop_pad", [3, 7, 3], None, (1,)), ("axes_hwc", [2, 6], [0, 1], ()),
                                 ("neg_axes", [8, 1], [-3, -1], (1,))):
        attrs = {"axes": axes} if axes else {}
        out.append(Case("CenterCropPad_" + nm, "CenterCropPad", [xc, np.array(shp, I64)],
                        [ref_center_crop_pad(xc, shp, axes)], attrs=attrs, const=const))
    out.append(err("CenterCropPad_err_len", "CenterCropPad", [xc, np.array([2, 2], I64)], "one value per axis"))
    for op, fn in (("HannWindow", lambda n, N: 0.5 - 0.5 * np.cos(2 * np.pi * n / N)),
                   ("HammingWindow", lambda n, N: 25 / 46 - 21 / 46 * np.cos(2 * np.pi * n / N)),
                   ("BlackmanWindow",
                    lambda n, N: 0.42 - 0.5 * np.cos(2 * np.pi * n / N) + 0.08 * np.cos(4 * np.pi * n / N))):
        for periodic in (1, 0):
            n = np.arange(10)
            out.append(Case("%s_p%d" % (op, periodic), op, [np.array(10, I64)],
                            [fn(n, 10 if periodic else 9).astype(F32)], attrs={"periodic": periodic}, const=(0,),
                            rtol=1e-5, atol=1e-6))
        out.append(Case("%s_f64_fed" % op, op, [np.array(7, np.int32)], [fn(np.arange(7), 7)],
                        attrs={"output_datatype": DType("f64")}, rtol=1e-12, atol=1e-14))
    out.append(err("HannWindow_err_size", "HannWindow", [np.array(-2, I64)], "must be >= 0"))
    return out


def cases(rng):
    out = []
    for fn in (loss_cases, attention_cases, rotary_cases, quant_cases, matmul_int_cases, conv_int_cases,
               misc_cases):
        out.extend(fn(rng))
    return out
