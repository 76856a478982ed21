"""Cases for the misc group (ops the ONNX suite asks for: GatherElements, ScatterElements, Trilu, CumSum,
CumProd, TopK, EyeLike, DepthToSpace, SpaceToDepth, InstanceNormalization, GroupNormalization, LRN,
MeanVarianceNormalization, RMSNormalization, Reduce{L1,SumSquare,LogSum,LogSumExp}, GlobalMaxPool,
NonZero, Compress, ReverseSequence, Einsum, Resize). References are numpy (and torch for a cross-check
of Resize), written from the ONNX spec; float references are computed in float64.

bf16 inputs are f32 arrays of bf16-exact values fed as bf16; their reference stays f32."""
import warnings

import numpy as np

from opcase import Case, DType, Ints, Skipped

I64 = np.int64
ERR = "INVALID_ARGUMENT"
DTYPES = ["f32", "f64", "f16", "bf16", "i8", "u8", "i16", "i32", "i64", "bool"]
FLOATS = ["f32", "f64", "f16", "bf16"]
NUMERIC = ["f32", "f64", "f16", "bf16", "i8", "u8", "i16", "i32", "i64"]
NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.float32, "i8": np.int8,
      "u8": np.uint8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "bool": np.bool_}
# Tolerances for computed (not moved) float results, by dtype.
TOL = {"f32": (1e-5, 1e-5), "f64": (1e-11, 1e-12), "f16": (4e-3, 2e-3), "bf16": (2e-2, 1e-2)}


def rand(rng, shape, dt="f32", lo=-3, hi=3):
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt in ("f32", "f64", "f16"):
        return rng.uniform(lo, hi, size=shape).astype(NP[dt])
    if dt == "bf16":
        x = rng.uniform(lo, hi, size=shape).astype(np.float32)
        return (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    info = np.iinfo(NP[dt])
    return rng.integers(max(info.min, -100), min(info.max, 100), size=shape, endpoint=True).astype(NP[dt])


def fd(dt, idx=0):
    return {idx: "bf16"} if dt == "bf16" else None


def i64(*v):
    return np.array(v, dtype=I64)


def cast_like(r, dt):
    """A float64/int64 reference as the case's output dtype (ints wrap like C casts)."""
    if dt in ("f32", "bf16"):
        return np.asarray(r, np.float64).astype(np.float32)
    if dt in ("f64", "f16"):
        return np.asarray(r, np.float64).astype(NP[dt])
    if dt == "bool":
        return np.asarray(r).astype(np.bool_)
    return np.asarray(r).astype(np.int64).astype(NP[dt])


def tol(dt):
    return TOL.get(dt, (0.0, 0.0))


def case(name, op, inputs, expected, dt="f32", attrs=None, const=(), computed=False):
    """computed: the output is arithmetic on the inputs (dtype tolerance); else elements only move."""
    rt, at = tol(dt) if computed else (None, None)
    return Case(name, op, inputs, expected, attrs=attrs, const=const, feed_dtype=fd(dt), rtol=rt, atol=at)


def err(name, op, inputs, text, attrs=None, const=(), code=ERR):
    return Case(name, op, inputs, attrs=attrs, const=const, error=(code, text))


# ---- GatherElements / ScatterElements ---------------------------------------------------------------

def ref_gather_elements(x, idx, axis):
    axis %= x.ndim
    sl = tuple(slice(0, idx.shape[d]) if d != axis else slice(None) for d in range(x.ndim))
    return np.take_along_axis(x[sl], np.where(idx < 0, idx + x.shape[axis], idx).astype(I64), axis)


def ref_scatter_elements(x, idx, upd, axis, red):
    axis %= x.ndim
    y = x.copy()
    isf = x.dtype.kind == "f"
    for pos in np.ndindex(*idx.shape):
        t = list(pos)
        v = int(idx[pos])
        t[axis] = v + x.shape[axis] if v < 0 else v
        t = tuple(t)
        a, b = y[t], upd[pos]
        if red == "none":
            y[t] = b
        elif red in ("add", "mul"):
            if isf:
                y[t] = (float(a) + float(b)) if red == "add" else (float(a) * float(b))
            else:
                r = int(a) + int(b) if red == "add" else int(a) * int(b)
                y[t] = np.array(r & 0xFFFFFFFFFFFFFFFF, np.uint64).astype(np.int64).astype(x.dtype)
        elif red == "max":
            y[t] = max(a, b)
        else:
            y[t] = min(a, b)
    return y


def elements_cases(rng):
    out = []
    for dt in DTYPES:
        x = rand(rng, (3, 4, 5), dt)
        idx = rng.integers(-4, 4, size=(3, 2, 5)).astype(I64)
        out.append(case("GatherElements_%s" % dt, "GatherElements", [x, idx], [ref_gather_elements(x, idx, 1)], dt,
                        attrs={"axis": 1}))
    x = rand(rng, (3, 4, 5))
    for axis in (0, -1, 2, -3):
        D = x.shape[axis]
        idx = rng.integers(-D, D, size=(2, 3, 4)).astype(np.int32)
        out.append(case("GatherElements_axis%d_i32idx_smaller" % axis, "GatherElements", [x, idx],
                        [ref_gather_elements(x, idx, axis)], attrs={"axis": axis}))
    x1 = rand(rng, (7,), "i64")
    idx1 = i64(6, 0, -1, 3, 3, 3, 2, 1, 0)
    out.append(case("GatherElements_rank1_longer", "GatherElements", [x1, idx1], [ref_gather_elements(x1, idx1, 0)]))
    out.append(case("GatherElements_empty", "GatherElements", [x, np.zeros((3, 0, 5), I64)],
                    [np.zeros((3, 0, 5), np.float32)], attrs={"axis": 1}))
    big = rand(rng, (128, 512))
    bidx = rng.integers(0, 128, size=(128, 512)).astype(I64)
    out.append(case("GatherElements_large", "GatherElements", [big, bidx], [ref_gather_elements(big, bidx, 0)]))
    out.append(err("GatherElements_err_range", "GatherElements", [x, np.full((3, 1, 5), 4, I64)], "out of range",
                   attrs={"axis": 1}))
    out.append(err("GatherElements_err_rank", "GatherElements", [x, np.zeros((3, 4), I64)], "rank"))
    out.append(err("GatherElements_err_axis", "GatherElements", [x, np.zeros((3, 4, 5), I64)], "axis 3",
                   attrs={"axis": 3}))
    out.append(err("GatherElements_err_float_idx", "GatherElements", [x, np.zeros((3, 4, 5), np.float32)], "i32 or i64"))
    out.append(err("GatherElements_err_larger", "GatherElements", [x, np.zeros((4, 4, 5), I64)], "larger",
                   attrs={"axis": 1}))

    # ScatterElements
    for red in ("none", "add", "mul", "max", "min"):
        for dt in ("f32", "f64", "f16", "i32", "i64", "u8", "bf16"):
            x = rand(rng, (4, 5), dt)
            idx = rng.integers(-4, 4, size=(6, 5)).astype(I64)   # duplicates along axis 0
            upd = rand(rng, (6, 5), dt)
            exp = ref_scatter_elements(x, idx, upd, 0, red)
            c = case("ScatterElements_%s_%s" % (red, dt), "ScatterElements", [x, idx, upd], [exp], dt,
                     attrs={"reduction": red}, computed=red in ("add", "mul") and dt in FLOATS)
            if dt == "bf16":
                c.feed_dtype = {0: "bf16", 2: "bf16"}
            out.append(c)
    x = rand(rng, (3, 4, 5), "bool")
    idx = rng.integers(-5, 5, size=(3, 4, 2)).astype(np.int32)
    upd = rand(rng, (3, 4, 2), "bool")
    out.append(case("ScatterElements_bool_axism1", "ScatterElements", [x, idx, upd],
                    [ref_scatter_elements(x, idx, upd, -1, "none")], "bool", attrs={"axis": -1}))
    x = rand(rng, (3, 4, 5))
    idx = np.zeros((0, 4, 5), I64)
    out.append(case("ScatterElements_empty_updates", "ScatterElements", [x, idx, np.zeros((0, 4, 5), np.float32)], [x]))
    big = rand(rng, (64, 256))
    bidx = np.stack([rng.permutation(64) for _ in range(256)], axis=1).astype(I64)
    bupd = rand(rng, (64, 256))
    out.append(case("ScatterElements_large", "ScatterElements", [big, bidx, bupd],
                    [ref_scatter_elements(big, bidx, bupd, 0, "none")]))
    out.append(err("ScatterElements_err_range", "ScatterElements", [x, np.full((1, 4, 5), -4, I64),
                                                                     np.zeros((1, 4, 5), np.float32)], "out of range"))
    out.append(err("ScatterElements_err_shape", "ScatterElements", [x, np.zeros((1, 4, 5), I64),
                                                                     np.zeros((1, 4, 4), np.float32)], "shape of indices"))
    out.append(err("ScatterElements_err_dtype", "ScatterElements", [x, np.zeros((1, 4, 5), I64),
                                                                     np.zeros((1, 4, 5), np.float64)], "dtype"))
    out.append(err("ScatterElements_err_reduction", "ScatterElements", [x, np.zeros((1, 4, 5), I64),
                                                                         np.zeros((1, 4, 5), np.float32)], "reduction",
                   attrs={"reduction": "sum"}))
    xb = rand(rng, (2, 2), "bool")
    out.append(err("ScatterElements_err_bool_add", "ScatterElements", [xb, np.zeros((1, 2), I64), xb[:1]], "bool",
                   attrs={"reduction": "add"}))
    return out


# ---- Trilu, CumSum, CumProd, ReverseSequence ----------------------------------------------------------

def trilu_cases(rng):
    out = []
    for dt in DTYPES:
        x = rand(rng, (2, 4, 5), dt)
        out.append(case("Trilu_upper_%s" % dt, "Trilu", [x], [np.triu(x)], dt))
        out.append(case("Trilu_lower_k1_%s" % dt, "Trilu", [x, i64(1)], [np.tril(x, 1)], dt, attrs={"upper": 0},
                        const=[1]))
    x = rand(rng, (5, 4))
    for kk in (-7, -4, -1, 0, 2, 3, 9):
        for up in (0, 1):
            exp = np.triu(x, kk) if up else np.tril(x, kk)
            out.append(case("Trilu_k%s_up%d" % (str(kk).replace("-", "m"), up), "Trilu", [x, np.array(kk, I64)],
                            [exp], attrs={"upper": up}))
    big = rand(rng, (2, 200, 200))
    out.append(case("Trilu_large", "Trilu", [big, i64(-5)], [np.triu(big, -5)]))
    out.append(case("Trilu_empty", "Trilu", [np.zeros((0, 3), np.float32)], [np.zeros((0, 3), np.float32)]))
    out.append(case("Trilu_i32_k", "Trilu", [x, np.array([2], np.int32)], [np.tril(x, 2)], attrs={"upper": 0}))
    out.append(err("Trilu_err_rank1", "Trilu", [rand(rng, (4,))], "rank >= 2"))
    out.append(err("Trilu_err_k_shape", "Trilu", [x, i64(1, 2)], "k"))
    return out


def ref_cum(x, axis, excl, rev, prod):
    isf = x.dtype.kind == "f"
    xd = x.astype(np.float64) if isf else x.astype(np.int64)
    if rev:
        xd = np.flip(xd, axis)
    with np.errstate(over="ignore"):
        c = np.cumprod(xd, axis=axis) if prod else np.cumsum(xd, axis=axis)
    if excl:
        ident = np.ones_like(np.take(c, [0], axis=axis)) if prod else np.zeros_like(np.take(c, [0], axis=axis))
        c = np.concatenate([ident, np.take(c, range(c.shape[axis] - 1), axis=axis)], axis=axis)
    if rev:
        c = np.flip(c, axis)
    return c


def cum_cases(rng):
    out = []
    for op, prod in (("CumSum", False), ("CumProd", True)):
        lo, hi = (0.5, 1.5) if prod else (-3, 3)
        x = rand(rng, (3, 4, 5), lo=lo, hi=hi)
        for axis in (0, 1, -1, -3):
            for excl in (0, 1):
                for rev in (0, 1):
                    nm = "%s_ax%s_e%d_r%d" % (op, str(axis).replace("-", "m"), excl, rev)
                    out.append(case(nm, op, [x, np.array(axis, I64)], [cast_like(ref_cum(x, axis, excl, rev, prod), "f32")],
                                    attrs={"exclusive": excl, "reverse": rev}, const=[1], computed=True))
        for dt in NUMERIC:
            xd = rand(rng, (4, 6), dt, lo, hi) if dt in FLOATS else rand(rng, (4, 6), dt)
            out.append(case("%s_%s" % (op, dt), op, [xd, np.array([1], np.int32)],
                            [cast_like(ref_cum(xd, 1, 0, 0, prod), dt)], dt, computed=True))
        out.append(case(op + "_fed_axis", op, [x, np.array(-2, I64)], [cast_like(ref_cum(x, -2, 0, 1, prod), "f32")],
                        attrs={"reverse": 1}, computed=True))
        out.append(case(op + "_empty", op, [np.zeros((3, 0), np.float32), np.array(0, I64)],
                        [np.zeros((3, 0), np.float32)]))
        out.append(case(op + "_rank1", op, [x[0, 0], np.array(0, I64)], [cast_like(ref_cum(x[0, 0], 0, 1, 0, prod), "f32")],
                        attrs={"exclusive": 1}, computed=True))
        big = rand(rng, (200, 250), lo=0.99 if prod else -1, hi=1.01 if prod else 1)
        for axis in (0, 1):
            out.append(case("%s_large_ax%d" % (op, axis), op, [big, np.array(axis, I64)],
                            [cast_like(ref_cum(big, axis, 0, 0, prod), "f32")], const=[1], computed=True))
        # f32 along axis 0 past one 512-position block (k_misc_norm.c's cumf_range: the vector loops and a partial
        # block), exclusive and reversed, a NaN and an Inf running down their columns
        wide = rand(rng, (20, 1100), lo=0.9 if prod else -1, hi=1.1 if prod else 1)
        wide[3, 700], wide[5, 1099] = np.nan, np.inf
        with np.errstate(invalid="ignore"):
            want = cast_like(ref_cum(wide, 0, 1, 1, prod), "f32")
        out.append(case("%s_wide_ax0_e1_r1" % op, op, [wide, np.array(0, I64)], [want],
                        attrs={"exclusive": 1, "reverse": 1}, const=[1], computed=True))
        out.append(err(op + "_err_axis", op, [x, np.array(3, I64)], "out of range", const=[1]))
        out.append(err(op + "_err_fed_axis", op, [x, np.array(-4, I64)], "out of range"))
        out.append(err(op + "_err_rank0", op, [np.array(1.0, np.float32), np.array(0, I64)], "out of range"))
        out.append(err(op + "_err_axis_shape", op, [x, i64(0, 1)], "axis", const=[1]))
        out.append(err(op + "_err_bool", op, [np.ones((2,), np.bool_), np.array(0, I64)], "bool"))
    return out


def ref_revseq(x, lens, batch_axis, time_axis):
    y = x.copy()
    for b, L in enumerate(lens):
        sl_src = [slice(None)] * x.ndim
        sl_src[batch_axis] = b
        sl_src[time_axis] = slice(0, L)
        src = x[tuple(sl_src)]
        y[tuple(sl_src)] = np.flip(src, axis=0)
    return y


def revseq_cases(rng):
    out = []
    for dt in DTYPES:
        x = rand(rng, (4, 3, 2), dt)
        lens = i64(4, 1, 0)
        out.append(case("ReverseSequence_t0_%s" % dt, "ReverseSequence", [x, lens], [ref_revseq(x, lens, 1, 0)], dt))
    x = rand(rng, (3, 5))
    lens = np.array([5, 2, 3], np.int32)
    out.append(case("ReverseSequence_t1", "ReverseSequence", [x, lens], [ref_revseq(x, lens, 0, 1)],
                    attrs={"batch_axis": 0, "time_axis": 1}))
    x4 = rand(rng, (6, 2, 3, 4))
    out.append(case("ReverseSequence_4d", "ReverseSequence", [x4, i64(6, 3)], [ref_revseq(x4, [6, 3], 1, 0)]))
    out.append(err("ReverseSequence_err_len", "ReverseSequence", [x, i64(6, 1, 1)], "sequence length",
                   attrs={"batch_axis": 0, "time_axis": 1}))
    out.append(err("ReverseSequence_err_lens_shape", "ReverseSequence", [x, i64(1, 1)], "sequence_lens",
                   attrs={"batch_axis": 0, "time_axis": 1}))
    out.append(err("ReverseSequence_err_axes", "ReverseSequence", [x, i64(1, 1, 1)], "batch_axis",
                   attrs={"batch_axis": 0, "time_axis": 0}))
    return out


# ---- TopK -----------------------------------------------------------------------------------------------

def ref_topk(x, k, axis, largest):
    """Stable order: the larger (or smaller) value first, equal values by lower index; NaN is largest."""
    axis %= x.ndim
    pos = np.indices(x.shape)[axis]
    xs = x.astype(np.float64) if x.dtype.kind == "f" else x.astype(np.int64)
    if largest:
        order = np.flip(np.lexsort((-pos, xs), axis=axis), axis=axis)
    else:
        order = np.lexsort((pos, xs), axis=axis)
    order = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, order, axis=axis), order.astype(I64)


def topk_cases(rng):
    out = []
    x = rand(rng, (3, 10))
    for largest in (0, 1):
        for axis, k in ((-1, 3), (0, 2), (1, 10), (-1, 0)):
            v, i = ref_topk(x, k, axis, largest)
            out.append(case("TopK_l%d_ax%s_k%d" % (largest, str(axis).replace("-", "m"), k), "TopK", [x, i64(k)], [v, i],
                            attrs={"axis": axis, "largest": largest}, const=[1]))
    for dt in NUMERIC:
        xd = rand(rng, (4, 9), dt)  # small ints: many ties
        if dt in ("i8", "u8", "i16", "i32", "i64"):
            xd = (xd % 4).astype(NP[dt])
        for largest in (0, 1):
            v, i = ref_topk(xd, 4, 1, largest)
            out.append(case("TopK_%s_l%d" % (dt, largest), "TopK", [xd, i64(4)], [v, i], dt,
                            attrs={"largest": largest}, const=[1]))
    xt = np.array([[1, 3, 3, 2, 3, 1]], np.float32)
    for largest in (0, 1):
        v, i = ref_topk(xt, 5, 1, largest)
        out.append(case("TopK_ties_l%d" % largest, "TopK", [xt, i64(5)], [v, i], attrs={"largest": largest}))
    xn = np.array([[1, np.nan, 3, -np.inf, np.inf, 0]], np.float32)
    for largest in (0, 1):
        v, i = ref_topk(xn, 6, 1, largest)
        out.append(case("TopK_nan_l%d" % largest, "TopK", [xn, i64(6)], [v, i], attrs={"largest": largest}))
    x3 = rand(rng, (2, 5, 3))
    v, i = ref_topk(x3, 2, 1, 1)
    out.append(case("TopK_middle_axis_fed_k", "TopK", [x3, i64(2)], [v, i], attrs={"axis": 1}))
    v, i = ref_topk(x3, 1, -1, 0)
    out.append(case("TopK_scalar_k_unsorted", "TopK", [x3, np.array(1, I64)], [v, i], attrs={"sorted": 0, "largest": 0}))
    xe = np.zeros((0, 4), np.float32)
    out.append(case("TopK_empty_outer", "TopK", [xe, i64(2)], [np.zeros((0, 2), np.float32), np.zeros((0, 2), I64)]))
    big = rand(rng, (32, 3000))
    v, i = ref_topk(big, 10, 1, 1)
    out.append(case("TopK_large", "TopK", [big, i64(10)], [v, i], const=[1]))
    # the heap with blocks of 8 skipped (k_misc_norm.c: K * 8 <= D, a contiguous float line): a length no multiple
    # of 8, ties (one decimal), NaN (row 2: more NaNs than K, so the heap's worst becomes NaN), +-Inf, a row that
    # rises all along (every value enters), both orders, f32 and f64
    for dt in ("f32", "f64"):
        bt = np.round(rand(rng, (6, 1003), dt), 1)
        bt[1, [5, 500, 1002]] = np.nan
        bt[2, 100:130] = np.nan
        bt[3, [7, 900]], bt[3, [8, 901]] = np.inf, -np.inf
        bt[4] = np.arange(1003)
        bt[5, 996:] = 9.0
        for largest in (0, 1):
            v, i = ref_topk(bt, 12, 1, largest)
            out.append(case("TopK_heap_%s_l%d" % (dt, largest), "TopK", [bt, i64(12)], [v, i], dt,
                            attrs={"largest": largest}, const=[1]))
    out.append(err("TopK_err_k_big", "TopK", [x, i64(11)], "out of range", const=[1]))
    out.append(err("TopK_err_k_big_fed", "TopK", [x, i64(11)], "out of range"))
    out.append(err("TopK_err_k_neg", "TopK", [x, i64(-1)], "out of range", const=[1]))
    out.append(err("TopK_err_axis", "TopK", [x, i64(1)], "axis", attrs={"axis": 2}))
    out.append(err("TopK_err_rank0", "TopK", [np.array(1.0, np.float32), i64(1)], "axis"))
    out.append(err("TopK_err_k_float", "TopK", [x, np.array([1.0], np.float32)], "K"))
    return out


# ---- EyeLike, DepthToSpace, SpaceToDepth -----------------------------------------------------------------

def eye_cases(rng):
    out = []
    for shape in ((3, 4), (4, 3), (5, 5), (0, 3), (1, 1)):
        for kk in (-5, -1, 0, 1, 3, 10):
            x = np.zeros(shape, np.float32)
            nm = "EyeLike_%dx%d_k%s" % (shape[0], shape[1], str(kk).replace("-", "m"))
            out.append(case(nm, "EyeLike", [x], [np.eye(shape[0], shape[1], kk, dtype=np.float32)], attrs={"k": kk}))
    for dt in DTYPES:
        if dt == "bf16":
            continue
        x = np.zeros((3, 5), np.int32)
        out.append(case("EyeLike_dtype_%s" % dt, "EyeLike", [x], [np.eye(3, 5, 1, dtype=NP[dt])],
                        attrs={"dtype": DType(dt), "k": 1}))
        xi = rand(rng, (4, 2), dt)
        out.append(case("EyeLike_same_%s" % dt, "EyeLike", [xi], [np.eye(4, 2, dtype=NP[dt])], dt))
    out.append(err("EyeLike_err_rank3", "EyeLike", [np.zeros((2, 2, 2), np.float32)], "2-D"))
    return out


def ref_d2s(x, b, mode):
    n, c, h, w = x.shape
    if mode == "DCR":
        t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // (b * b), h * b, w * b)


def ref_s2d(x, b, mode="DCR"):
    n, c, h, w = x.shape
    t = x.reshape(n, c, h // b, b, w // b, b).transpose((0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4))
    return t.reshape(n, c * b * b, h // b, w // b)


def d2s_cases(rng):
    out = []
    for dt in DTYPES:
        x = rand(rng, (2, 8, 3, 2), dt)
        for mode in ("DCR", "CRD"):
            out.append(case("DepthToSpace_%s_%s" % (mode, dt), "DepthToSpace", [x], [ref_d2s(x, 2, mode)], dt,
                            attrs={"blocksize": 2, "mode": mode}))
        for mode in ("DCR", "CRD"):
            xs = x[:, :, :2, :]
            out.append(case("SpaceToDepth_%s_%s" % (mode, dt), "SpaceToDepth", [xs], [ref_s2d(xs, 2, mode)], dt,
                            attrs={"blocksize": 2, "mode": mode}))
            # the round trip through DepthToSpace with the same mode is the identity
            assert np.array_equal(ref_d2s(ref_s2d(xs, 2, mode), 2, mode), xs)
    x = rand(rng, (1, 18, 2, 3))
    out.append(case("DepthToSpace_b3_default_mode", "DepthToSpace", [x], [ref_d2s(x, 3, "DCR")], attrs={"blocksize": 3}))
    x = rand(rng, (2, 3, 6, 9))
    out.append(case("SpaceToDepth_b3", "SpaceToDepth", [x], [ref_s2d(x, 3)], attrs={"blocksize": 3}))
    big = rand(rng, (2, 64, 16, 32))
    out.append(case("DepthToSpace_large", "DepthToSpace", [big], [ref_d2s(big, 4, "CRD")],
                    attrs={"blocksize": 4, "mode": "CRD"}))
    out.append(case("SpaceToDepth_large", "SpaceToDepth", [big], [ref_s2d(big, 4, "CRD")],
                    attrs={"blocksize": 4, "mode": "CRD"}))
    out.append(case("DepthToSpace_empty", "DepthToSpace", [np.zeros((0, 4, 2, 2), np.float32)],
                    [np.zeros((0, 1, 4, 4), np.float32)], attrs={"blocksize": 2}))
    out.append(err("DepthToSpace_err_channels", "DepthToSpace", [rand(rng, (1, 6, 2, 2))], "multiple",
                   attrs={"blocksize": 2}))
    out.append(err("DepthToSpace_err_mode", "DepthToSpace", [rand(rng, (1, 4, 2, 2))], "mode", attrs={"blocksize": 2,
                                                                                                     "mode": "XYZ"}))
    out.append(err("DepthToSpace_err_rank", "DepthToSpace", [rand(rng, (4, 2, 2))], "4-D", attrs={"blocksize": 2}))
    out.append(err("DepthToSpace_err_no_blocksize", "DepthToSpace", [rand(rng, (1, 4, 2, 2))], "blocksize"))
    out.append(err("SpaceToDepth_err_hw", "SpaceToDepth", [rand(rng, (1, 1, 3, 4))], "multiple", attrs={"blocksize": 2}))
    return out


# ---- normalisations ---------------------------------------------------------------------------------------

def ref_groupnorm(x, scale, bias, groups, eps):
    n, c = x.shape[:2]
    xd = x.astype(np.float64).reshape(n, groups, -1)
    m = xd.mean(axis=2, keepdims=True)
    v = ((xd - m) ** 2).mean(axis=2, keepdims=True)
    y = ((xd - m) / np.sqrt(v + eps)).reshape(x.shape)
    sh = [1, c] + [1] * (x.ndim - 2)
    if len(scale) != c:  # opset 18: per group
        scale = np.repeat(scale, c // groups)
        bias = np.repeat(bias, c // groups)
    return y * np.asarray(scale, np.float64).reshape(sh) + np.asarray(bias, np.float64).reshape(sh)


def ref_lrn(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    xd = x.astype(np.float64)
    c = x.shape[1]
    sq = np.zeros_like(xd)
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    for ch in range(c):
        a, b = max(0, ch - lo), min(c, ch + hi + 1)
        sq[:, ch] = (xd[:, a:b] ** 2).sum(axis=1)
    return xd / (bias + alpha / size * sq) ** beta


def ref_mvn(x, axes=(0, 2, 3)):
    xd = x.astype(np.float64)
    m = xd.mean(axis=tuple(axes), keepdims=True)
    v = (xd ** 2).mean(axis=tuple(axes), keepdims=True) - m ** 2
    return (xd - m) / (np.sqrt(np.maximum(v, 0)) + 1e-9)


def ref_rms(x, scale, axis=-1, eps=1e-5):
    xd = x.astype(np.float64)
    axes = tuple(range(axis % x.ndim, x.ndim))
    r = np.sqrt((xd ** 2).mean(axis=axes, keepdims=True) + eps)
    return xd / r * np.asarray(scale, np.float64)


def norm_cases(rng):
    out = []
    for dt in FLOATS:
        for shape in ((2, 3, 4, 5), (2, 3, 7)):
            x = rand(rng, shape, dt)
            c = shape[1]
            s, b = rand(rng, (c,), dt), rand(rng, (c,), dt)
            nm = "InstanceNormalization_%s_r%d" % (dt, len(shape))
            out.append(Case(nm, "InstanceNormalization", [x, s, b],
                            [cast_like(ref_groupnorm(x, s, b, c, 1e-5), dt)], feed_dtype=fd(dt) and {0: "bf16", 1: "bf16", 2: "bf16"},
                            rtol=tol(dt)[0] * 4, atol=tol(dt)[1] * 4))
    x = rand(rng, (2, 3, 4, 5))
    s, b = rand(rng, (3,)), rand(rng, (3,))
    out.append(case("InstanceNormalization_eps", "InstanceNormalization", [x, s, b],
                    [cast_like(ref_groupnorm(x, s, b, 3, 0.5), "f32")], attrs={"epsilon": 0.5}, computed=True))
    big = rand(rng, (2, 16, 32, 64))
    out.append(case("InstanceNormalization_large", "InstanceNormalization", [big, rand(rng, (16,)), rand(rng, (16,))],
                    [], computed=True))
    out[-1].expected = [cast_like(ref_groupnorm(big, out[-1].inputs[1], out[-1].inputs[2], 16, 1e-5), "f32")]
    out[-1].rtol, out[-1].atol = 1e-4, 1e-4
    out.append(err("InstanceNormalization_err_scale", "InstanceNormalization", [x, rand(rng, (4,)), b], "scale"))
    out.append(err("InstanceNormalization_err_rank", "InstanceNormalization", [x[0, 0], s, b], "rank"))
    out.append(err("InstanceNormalization_err_int", "InstanceNormalization",
                   [np.ones((1, 3, 2), np.int32), np.ones(3, np.int32), np.ones(3, np.int32)], "i32"))

    for dt in FLOATS:
        x = rand(rng, (2, 6, 4, 5), dt)
        for g in (1, 2, 3, 6):
            s, b = rand(rng, (6,), dt), rand(rng, (6,), dt)
            out.append(Case("GroupNormalization_%s_g%d" % (dt, g), "GroupNormalization", [x, s, b],
                            [cast_like(ref_groupnorm(x, s, b, g, 1e-5), dt)], attrs={"num_groups": g},
                            feed_dtype={0: "bf16", 1: "bf16", 2: "bf16"} if dt == "bf16" else None,
                            rtol=tol(dt)[0] * 4, atol=tol(dt)[1] * 4))
    x = rand(rng, (3, 4, 7))
    s, b = rand(rng, (2,)), rand(rng, (2,))
    out.append(case("GroupNormalization_opset18_scale", "GroupNormalization", [x, s, b],
                    [cast_like(ref_groupnorm(x, s, b, 2, 1e-3), "f32")], attrs={"num_groups": 2, "epsilon": 1e-3},
                    computed=True))
    # f32 groups (k_misc_norm.c's nf_range): groups of 2 x 2600 values, past one 4096-value block, a mean far
    # from 0 (the centred second pass), a NaN in one group and an inf in another (only those groups turn NaN)
    xg = rand(rng, (2, 8, 50, 52)) + 1000
    xg[0, 1, 3, 3], xg[1, 6, 0, 7] = np.nan, np.inf
    sg, bg = rand(rng, (8,)), rand(rng, (8,))
    out.append(case("GroupNormalization_f32_blocks", "GroupNormalization", [xg, sg, bg],
                    [cast_like(ref_groupnorm(xg, sg, bg, 4, 1e-5), "f32")], attrs={"num_groups": 4}, computed=True))
    out[-1].rtol, out[-1].atol = 1e-4, 1e-4
    x2 = rand(rng, (3, 4))
    s4, b4 = rand(rng, (4,)), rand(rng, (4,))
    out.append(case("GroupNormalization_rank2", "GroupNormalization", [x2, s4, b4],
                    [cast_like(ref_groupnorm(x2, s4, b4, 2, 1e-5), "f32")], attrs={"num_groups": 2}, computed=True))
    out.append(err("GroupNormalization_err_groups", "GroupNormalization", [x, rand(rng, (4,)), rand(rng, (4,))],
                   "num_groups", attrs={"num_groups": 3}))
    out.append(err("GroupNormalization_err_scale", "GroupNormalization", [x, rand(rng, (3,)), rand(rng, (3,))], "scale",
                   attrs={"num_groups": 2}))
    out.append(err("GroupNormalization_err_missing", "GroupNormalization", [x, s4, b4], "num_groups"))

    for dt in FLOATS:
        x = rand(rng, (2, 8, 3, 3), dt)
        for size in (1, 3, 4, 5):
            out.append(case("LRN_%s_s%d" % (dt, size), "LRN", [x], [cast_like(ref_lrn(x, size), dt)], dt,
                            attrs={"size": size}, computed=True))
    x = rand(rng, (2, 5, 7))
    out.append(case("LRN_attrs_r3", "LRN", [x], [cast_like(ref_lrn(x, 3, 0.5, 0.6, 2.0), "f32")],
                    attrs={"size": 3, "alpha": 0.5, "beta": 0.6, "bias": 2.0}, computed=True))
    # the f32 plane loop (k_misc_norm.c: f32 window sums, x * exp(-beta log t)) past a vector's width, with NaN,
    # Inf and, with bias 0, a zero window (0 / 0: NaN in both forms), at 4e-6 (exp and log of t within ~3 ulp)
    xb = rand(rng, (2, 16, 13, 11), lo=-4.0, hi=4.0)
    xb[0, 3, 2, 5], xb[1, 9, 0, 0], xb[1, 15, 12, 10] = np.nan, np.inf, -np.inf
    xb[0, 10:16, 7, 7] = 0
    for size, a, b, bias in ((5, 1e-4, 0.75, 1.0), (3, 0.5, 0.6, 2.0), (4, 2.0, 1.3, 0.0)):
        with np.errstate(all="ignore"):
            want = cast_like(ref_lrn(xb, size, a, b, bias), "f32")
        out.append(Case("LRN_f32_planes_s%d" % size, "LRN", [xb], [want], attrs={"size": size, "alpha": a, "beta": b,
                        "bias": bias}, rtol=4e-6, atol=1e-30))
    out.append(err("LRN_err_size", "LRN", [x], "size", attrs={"size": 0}))
    out.append(err("LRN_err_rank", "LRN", [x[0]], "rank", attrs={"size": 3}))

    for dt in FLOATS:
        x = rand(rng, (2, 3, 4, 5), dt)
        out.append(case("MeanVarianceNormalization_%s" % dt, "MeanVarianceNormalization", [x],
                        [cast_like(ref_mvn(x), dt)], dt, computed=True))
    x = rand(rng, (2, 3, 4, 5))
    for axes in ([1, 2, 3], [-1], [0, 1, 2, 3]):
        out.append(case("MeanVarianceNormalization_axes%s" % "".join(str(a % 4) for a in axes),
                        "MeanVarianceNormalization", [x], [cast_like(ref_mvn(x, [a % 4 for a in axes]), "f32")],
                        attrs={"axes": axes}, computed=True))
    x3 = rand(rng, (4, 3, 5))
    out.append(case("MeanVarianceNormalization_r3", "MeanVarianceNormalization", [x3],
                    [cast_like(ref_mvn(x3, [0, 2]), "f32")], attrs={"axes": [0, 2]}, computed=True))
    out.append(err("MeanVarianceNormalization_err_default_axes_r3", "MeanVarianceNormalization", [x3], "out of range"))

    for dt in FLOATS:
        x = rand(rng, (2, 3, 8), dt)
        s = rand(rng, (8,), dt)
        out.append(Case("RMSNormalization_%s" % dt, "RMSNormalization", [x, s], [cast_like(ref_rms(x, s), dt)],
                        feed_dtype={0: "bf16", 1: "bf16"} if dt == "bf16" else None, rtol=tol(dt)[0] * 2,
                        atol=tol(dt)[1] * 2))
    x = rand(rng, (2, 3, 8))
    s = rand(rng, (3, 8))
    out.append(case("RMSNormalization_axis1", "RMSNormalization", [x, s], [cast_like(ref_rms(x, s, 1), "f32")],
                    attrs={"axis": 1}, computed=True))
    s1 = rand(rng, (1, 8))
    out.append(case("RMSNormalization_bcast_scale_eps", "RMSNormalization", [x, s1],
                    [cast_like(ref_rms(x, s1, -2, 0.1), "f32")], attrs={"axis": -2, "epsilon": 0.1}, computed=True))
    big = rand(rng, (128, 512))
    sb = rand(rng, (512,))
    out.append(case("RMSNormalization_large", "RMSNormalization", [big, sb], [cast_like(ref_rms(big, sb), "f32")],
                    computed=True))
    out.append(err("RMSNormalization_err_scale", "RMSNormalization", [x, rand(rng, (7,))], "scale"))
    out.append(err("RMSNormalization_err_axis", "RMSNormalization", [x, s], "axis", attrs={"axis": 3}))
    out.append(err("RMSNormalization_err_dtype", "RMSNormalization", [x, s.astype(np.float64)], "dtype"))
    return out


# ---- Reduce{L1,SumSquare,LogSum,LogSumExp}, GlobalMaxPool -------------------------------------------------

RED_OPS = ["ReduceL1", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]


def ref_reduce(op, x, axes=None, keepdims=1, noop=0):
    if axes is None or len(axes) == 0:
        ax = () if noop else None  # noop: each element reduced alone, as the ONNX reference
    else:
        ax = tuple(int(a) for a in axes)
    kd = bool(keepdims)
    isf = x.dtype.kind == "f"
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        if op in ("ReduceL1", "ReduceSumSquare") and not isf:
            xi = x.astype(np.int64)
            r = np.sum(np.abs(xi) if op == "ReduceL1" else xi * xi, axis=ax, keepdims=kd)
            return np.asarray(r).astype(x.dtype)
        xd = x.astype(np.float64)
        if op == "ReduceL1":
            r = np.sum(np.abs(xd), axis=ax, keepdims=kd)
        elif op == "ReduceSumSquare":
            r = np.sum(xd * xd, axis=ax, keepdims=kd)
        elif op == "ReduceLogSum":
            r = np.log(np.sum(xd, axis=ax, keepdims=kd))
        else:
            m = np.max(xd, axis=ax, keepdims=True, initial=-np.inf)
            mf = np.where(np.isfinite(m), m, 0)
            r = np.log(np.sum(np.exp(xd - mf), axis=ax, keepdims=True)) + mf
            if not kd:
                r = np.squeeze(r, axis=ax) if ax is not None else r.reshape(())
    r = np.asarray(r)
    return np.trunc(r).astype(x.dtype) if not isf else r.astype(x.dtype)


def reduce_cases(rng):
    out = []
    for op in RED_OPS:
        lo, hi = (0.1, 2.0) if op == "ReduceLogSum" else (-3.0, 3.0)
        x = rand(rng, (3, 4, 5), lo=lo, hi=hi)
        for axes in (None, [1], [-1], [0, 2], [-3, -2], [0, 1, 2]):
            for kd in (0, 1):
                nm = ("%s_ax%s_kd%d" % (op, "all" if axes is None else "_".join(str(a) for a in axes), kd)).replace("-", "m")
                inputs = [x] if axes is None else [x, np.array(axes, I64)]
                out.append(case(nm, op, inputs, [ref_reduce(op, x, axes, kd)], attrs={"keepdims": kd}, const=[1],
                                computed=True))
        out.append(case(op + "_attr_axes", op, [x], [ref_reduce(op, x, [0, -1], 1)], attrs={"axes": [0, -1]},
                        computed=True))
        out.append(case(op + "_fed_axes", op, [x, i64(1, 2)], [ref_reduce(op, x, [1, 2], 0)], attrs={"keepdims": 0},
                        computed=True))
        for dt in FLOATS:
            xd = rand(rng, (4, 6), dt, lo, hi)
            out.append(case("%s_%s" % (op, dt), op, [xd, i64(1)], [ref_reduce(op, xd, [1], 0)], dt,
                            attrs={"keepdims": 0}, const=[1], computed=True))
        if op in ("ReduceL1", "ReduceSumSquare"):
            for dt in ("i8", "u8", "i32", "i64"):
                xi = rand(rng, (4, 6), dt)
                out.append(case("%s_%s" % (op, dt), op, [xi, i64(0)], [ref_reduce(op, xi, [0], 1)], dt, const=[1]))
        else:
            xi = rng.integers(1, 50, size=(4, 6)).astype(np.int32)
            out.append(case(op + "_i32", op, [xi, i64(1)], [ref_reduce(op, xi, [1], 1)], "i32", const=[1]))
        xs = np.array(1.5, np.float32)
        out.append(case(op + "_rank0", op, [xs], [ref_reduce(op, xs, None, 1)], computed=True))
        xe = np.zeros((0, 3), np.float32)
        out.append(case(op + "_empty_reduced", op, [xe, i64(0)], [ref_reduce(op, xe, [0], 1)], const=[1]))
        out.append(case(op + "_empty_kept", op, [xe, i64(1)], [ref_reduce(op, xe, [1], 0)], attrs={"keepdims": 0},
                        const=[1]))
        out.append(case(op + "_noop", op, [x, np.zeros((0,), I64)], [ref_reduce(op, x, [], 1, 1)],
                        attrs={"noop_with_empty_axes": 1}, const=[1], computed=True))
        out.append(err(op + "_err_axis", op, [x, i64(3)], "out of range", const=[1]))
        out.append(err(op + "_err_dup", op, [x, i64(1, -2)], "repeated", const=[1]))
        out.append(err(op + "_err_both", op, [x, i64(1)], "both", attrs={"axes": [1]}, const=[1]))
        out.append(err(op + "_err_bool", op, [np.ones((2, 2), np.bool_)], "bool"))
        out.append(err(op + "_err_fed_axis", op, [x, i64(5)], "out of range"))
    xl = np.array([[1000.0, 1000.0, -5.0], [-np.inf, -np.inf, -np.inf]], np.float32)
    out.append(case("ReduceLogSumExp_stable", "ReduceLogSumExp", [xl, i64(1)], [ref_reduce("ReduceLogSumExp", xl, [1], 0)],
                    attrs={"keepdims": 0}, const=[1], computed=True))
    big = rand(rng, (128, 512))
    out.append(case("ReduceSumSquare_large", "ReduceSumSquare", [big, i64(1)],
                    [ref_reduce("ReduceSumSquare", big, [1], 0)], attrs={"keepdims": 0}, const=[1], computed=True))
    out.append(case("ReduceLogSumExp_large", "ReduceLogSumExp", [big, i64(0)],
                    [ref_reduce("ReduceLogSumExp", big, [0], 1)], const=[1], computed=True))
    # float ReduceSumSquare and ReduceLogSum run k_reduce.c's loops: runs along the last axis of 7 (the
    # plain tail), 200 (the 8-lane loop), 1000 and 5000 (32 lanes, past one 4096 block), a vertical
    # reduction (axis 0) and a split one (few outputs); NaN, inf, a zero row (log 0 = -inf) and a negative
    # sum (log: NaN) among them; every float dtype
    for op in ("ReduceSumSquare", "ReduceLogSum"):
        lo, hi = (0.1, 2.0) if op == "ReduceLogSum" else (-3.0, 3.0)
        for dt in FLOATS:
            for n in (7, 200, 1000, 5000):
                xr = rand(rng, (6, n), dt, lo, hi)
                xr[1, n // 2], xr[2, n // 3], xr[3, :] = np.nan, np.inf, 0
                if op == "ReduceLogSum":
                    xr[4, :] = -xr[4, :]
                else:
                    xr[4, n - 1] = -np.inf
                out.append(case("%s_%s_run%d" % (op, dt, n), op, [xr, i64(-1)], [ref_reduce(op, xr, [-1], 0)], dt,
                                attrs={"keepdims": 0}, const=[1], computed=True))
            xv = rand(rng, (300, 5, 7), dt, lo, hi)
            xv[7, 2, 3] = np.nan
            for name, ax in (("vertical", [0]), ("split", [0, 1, 2])):
                out.append(case("%s_%s_%s" % (op, dt, name), op, [xv, i64(*ax)], [ref_reduce(op, xv, ax, 1)], dt,
                                const=[1], computed=True))

    # f32 ReduceL1 and ReduceLogSumExp over trailing axes run k_misc_norm.c's row loops: rows of 7, 200, 1000
    # and 5000 (past a 1024-term block), two trailing axes, a middle axis (the f64 loop); NaN, +Inf, an all
    # -Inf row, a -Inf among finite values and a NaN among -Inf
    for op in ("ReduceL1", "ReduceLogSumExp"):
        for n in (7, 200, 1000, 5000):
            xr = rand(rng, (6, n), lo=-3.0, hi=3.0)
            xr[1, n // 2], xr[2, n // 3], xr[3, :], xr[4, n - 1] = np.nan, np.inf, -np.inf, -np.inf
            xr[5, :], xr[5, n - 1] = -np.inf, np.nan  # a NaN among -Inf: the max alone would say -Inf
            out.append(case("%s_f32_run%d" % (op, n), op, [xr, i64(-1)], [ref_reduce(op, xr, [-1], 0)],
                            attrs={"keepdims": 0}, const=[1], computed=True))
        x3 = rand(rng, (5, 6, 70), lo=-3.0, hi=3.0)
        x3[2, 1, 3] = np.nan
        for ax in ([1, 2], [1]):
            out.append(case("%s_f32_axes%s" % (op, "".join(map(str, ax))), op, [x3, i64(*ax)],
                            [ref_reduce(op, x3, ax, 1)], const=[1], computed=True))
        # leading axes (the column tiles: 600 columns are three tiles of 256, the last partial; 150 rows pass a
        # 64-row block), with a NaN column, a +Inf column, an all -Inf column, a -Inf among finite values and a
        # NaN among -Inf; two leading axes; an empty kept axis
        xc = rand(rng, (150, 600), lo=-3.0, hi=3.0)
        xc[70, 3], xc[:, 300], xc[9, 301], xc[:, 599], xc[140, 5] = np.nan, -np.inf, np.inf, -np.inf, -np.inf
        xc[0, 300] = np.nan
        for name, xv, ax in (("ax0", xc, [0]), ("ax01", xc.reshape(10, 15, 600), [0, 1])):
            out.append(case("%s_f32_cols_%s" % (op, name), op, [xv, i64(*ax)], [ref_reduce(op, xv, ax, 0)],
                            attrs={"keepdims": 0}, const=[1], computed=True))
        xz = np.zeros((3, 0), np.float32)
        out.append(case("%s_f32_cols_empty" % op, op, [xz, i64(0)], [ref_reduce(op, xz, [0], 1)], const=[1]))

    for dt in FLOATS:
        for shape in ((2, 3, 4, 5), (1, 2, 7), (2, 3, 2, 2, 2)):
            x = rand(rng, shape, dt)
            exp = x.max(axis=tuple(range(2, len(shape))), keepdims=True)
            out.append(case("GlobalMaxPool_%s_r%d" % (dt, len(shape)), "GlobalMaxPool", [x], [exp], dt))
    xn = rand(rng, (1, 2, 3, 3))
    xn[0, 1, 1, 1] = np.nan
    out.append(case("GlobalMaxPool_nan", "GlobalMaxPool", [xn], [np.max(xn, axis=(2, 3), keepdims=True)]))
    out.append(err("GlobalMaxPool_err_rank", "GlobalMaxPool", [rand(rng, (2, 3))], "rank"))
    out.append(err("GlobalMaxPool_err_int", "GlobalMaxPool", [np.ones((1, 1, 2), np.int32)], "i32"))
    return out


# ---- NonZero, Compress ----------------------------------------------------------------------------------------

def ref_nonzero(x):
    if x.ndim == 0:
        return np.zeros((0, int(x != 0)), I64)
    return np.array(np.nonzero(x), dtype=I64).reshape(x.ndim, -1)


def select_cases(rng):
    out = []
    for dt in DTYPES:
        x = rand(rng, (3, 4, 5), dt)
        if dt != "bool":
            x = np.where(rng.random((3, 4, 5)) < 0.5, 0, x).astype(x.dtype)
        out.append(case("NonZero_%s" % dt, "NonZero", [x], [ref_nonzero(x)], dt))
    xf = np.array([0.0, -0.0, np.nan, 1e-30, -2.0, 0.0], np.float32)
    out.append(case("NonZero_signed_zero_nan", "NonZero", [xf], [ref_nonzero(xf)]))
    for v in (0, 3):
        xs = np.array(v, np.int32)
        out.append(case("NonZero_rank0_%d" % v, "NonZero", [xs], [ref_nonzero(xs)]))
    xe = np.zeros((2, 0, 3), np.float32)
    out.append(case("NonZero_empty", "NonZero", [xe], [ref_nonzero(xe)]))
    xz = np.zeros((4, 4), np.float32)
    out.append(case("NonZero_all_zero", "NonZero", [xz], [ref_nonzero(xz)]))
    big = (rng.random((200, 300)) < 0.1).astype(np.float32)
    out.append(case("NonZero_large", "NonZero", [big], [ref_nonzero(big)]))

    for dt in DTYPES:
        x = rand(rng, (3, 4), dt)
        cond = np.array([True, False, True, True])
        out.append(case("Compress_ax1_%s" % dt, "Compress", [x, cond], [np.compress(cond, x, axis=1)], dt,
                        attrs={"axis": 1}))
    x = rand(rng, (3, 4, 2))
    for axis, cond in ((0, [False, True]), (-1, [True, True]), (-2, [False, False, False, False]), (2, [])):
        c = np.array(cond, np.bool_)
        for cst in (0, 1):
            out.append(case("Compress_ax%s_n%d_c%d" % (str(axis).replace("-", "m"), len(cond), cst), "Compress", [x, c],
                            [np.compress(c, x, axis=axis)], attrs={"axis": axis}, const=[1] if cst else []))
    c = (rng.random(20) < 0.5)
    out.append(case("Compress_flat", "Compress", [x, c], [np.compress(c, x)]))
    out.append(case("Compress_flat_const", "Compress", [x, c], [np.compress(c, x)], const=[1]))
    big = rand(rng, (2000, 64))
    cb = rng.random(2000) < 0.3
    out.append(case("Compress_large", "Compress", [big, cb], [np.compress(cb, big, axis=0)], attrs={"axis": 0}))
    out.append(err("Compress_err_long", "Compress", [x, np.ones(5, np.bool_)], "longer", attrs={"axis": 1}))
    out.append(err("Compress_err_long_fed_flat", "Compress", [x, np.ones(25, np.bool_)], "longer"))
    out.append(err("Compress_err_cond_dtype", "Compress", [x, np.ones(2, np.int32)], "bool", attrs={"axis": 0}))
    out.append(err("Compress_err_axis", "Compress", [x, np.ones(2, np.bool_)], "out of range", attrs={"axis": 3}))
    return out


# ---- Einsum ----------------------------------------------------------------------------------------------------

def ref_einsum(eq, *xs):
    isf = xs[0].dtype.kind == "f"
    ys = [x.astype(np.float64 if isf else np.int64) for x in xs]
    r = np.einsum(eq, *ys)
    return np.asarray(r).astype(xs[0].dtype)


def einsum_cases(rng):
    out = []
    specs = [
        ("matmul", "ij,jk->ik", [(3, 4), (4, 5)]),
        ("implicit_matmul", "ij,jk", [(3, 4), (4, 5)]),
        ("batch", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
        ("diag", "ii->i", [(4, 4)]),
        ("trace", "ii", [(4, 4)]),
        ("transpose", "ij->ji", [(3, 4)]),
        ("sum_all", "ij->", [(3, 4)]),
        ("dot", "i,i->", [(5,), (5,)]),
        ("outer", "i,j->ij", [(3,), (4,)]),
        ("ellipsis_bcast", "...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
        ("attention", "bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
        ("contract2", "ijk,jil->kl", [(2, 3, 4), (3, 2, 5)]),
        ("three", "ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
        ("upper", "Ab,bC->AC", [(2, 3), (3, 4)]),
        ("ellipsis_implicit", "...i,...i", [(2, 3, 4), (3, 4)]),
        ("ellipsis_keep", "...ij->...", [(2, 3, 4, 5)]),
        ("rank0", ",i->i", [(), (4,)]),
        ("repeat_out_order", "ijk->kji", [(2, 3, 4)]),
        ("bilinear", "bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ]
    for nm, eq, shapes in specs:
        xs = [rand(rng, s) for s in shapes]
        out.append(case("Einsum_" + nm, "Einsum", xs, [ref_einsum(eq, *xs)], attrs={"equation": eq}, computed=True))
    for dt in NUMERIC:
        xs = [rand(rng, (3, 4), dt, -2, 2), rand(rng, (4, 2), dt, -2, 2)]
        out.append(case("Einsum_%s" % dt, "Einsum", xs, [ref_einsum("ij,jk->ik", *xs)], dt, attrs={"equation": "ij,jk->ik"},
                        computed=True))
        if dt == "bf16":
            out[-1].feed_dtype = {0: "bf16", 1: "bf16"}
    xs = [np.zeros((3, 0), np.float32), np.zeros((0, 4), np.float32)]
    out.append(case("Einsum_empty_contract", "Einsum", xs, [np.zeros((3, 4), np.float32)], attrs={"equation": "ij,jk->ik"}))
    xs = [np.zeros((0, 2), np.float32), np.ones((2, 4), np.float32)]
    out.append(case("Einsum_empty_out", "Einsum", xs, [np.zeros((0, 4), np.float32)], attrs={"equation": "ij,jk->ik"}))
    xs = [rand(rng, (96, 128)), rand(rng, (128, 64))]
    out.append(case("Einsum_large", "Einsum", xs, [ref_einsum("ij,jk->ik", *xs)], attrs={"equation": "ij,jk->ik"},
                    computed=True))
    out[-1].rtol, out[-1].atol = 1e-5, 1e-4
    # two f32 operands run as batched GEMMs (k_misc_einsum.c's ein_gemm): operands read in place with and
    # without sgemm's transposes, copied (a diagonal, a permuted batch, a broadcast), the output written in
    # place or permuted, one operand shared by every batch, K labels only one operand has, products under
    # and over the plain loop's size and batches split into row blocks; NaN and inf in A
    big = [
        ("gemm_tA", "ji,jk->ik", [(40, 30), (40, 50)]),
        ("gemm_tB", "ij,kj->ik", [(30, 40), (50, 40)]),
        ("gemm_out_perm", "ij,jk->ki", [(30, 40), (40, 50)]),
        ("attn_scores", "bhqd,bhkd->bhqk", [(2, 3, 33, 16), (2, 3, 20, 16)]),
        ("attn_values", "bhqk,bhkd->bhqd", [(2, 3, 33, 20), (2, 3, 20, 16)]),
        ("batch_perm", "ibj,bjk->bik", [(20, 3, 30), (3, 30, 25)]),
        ("shared_b", "bij,jk->bik", [(4, 20, 30), (30, 25)]),
        ("bcast_batch", "...ij,...jk->...ik", [(3, 1, 20, 30), (4, 30, 25)]),
        ("k_one_side", "ij,k->i", [(30, 40), (50,)]),
        ("diag_a", "iij,jk->ik", [(20, 20, 30), (30, 25)]),
        ("small_batches", "bij,bjk->bik", [(50, 3, 4), (50, 4, 5)]),
        ("one_batch_rows", "bij,bjk->bik", [(1, 200, 64), (1, 64, 48)]),
        ("outer_big", "i,j->ij", [(300,), (200,)]),
        # both labels summed, each in one operand: packing would hold the whole outer product, so the f64
        # loop takes it
        ("outer_sum", "i,j->", [(300,), (400,)]),
    ]
    for nm, eq, shapes in big:
        xs = [rand(rng, sh) for sh in shapes]
        if nm in ("gemm_tA", "attn_scores"):
            xs[0].reshape(-1)[[3, 17]] = [np.nan, np.inf]
        out.append(case("Einsum_" + nm, "Einsum", xs, [ref_einsum(eq, *xs)], attrs={"equation": eq}, computed=True))
        # f32 sums of up to 2000 terms (k_one_side: 40 x 50 products whose sum is (sum a)(sum b)): the error is
        # a few f32 ulps of the terms' magnitudes, which a near-cancelling sum makes large against the result
        # (1.6e-4 on 4.8 with inputs that cancel), so atol scales with the largest sum of |terms|
        with np.errstate(invalid="ignore"):
            mag = np.asarray(ref_einsum(eq, *[np.abs(x) for x in xs]), np.float64)
        big_mag = float(np.max(mag[np.isfinite(mag)], initial=0.0))
        out[-1].rtol, out[-1].atol = 1e-5, max(1e-4, 1e-6 * big_mag)
    a, b = rand(rng, (3, 4)), rand(rng, (5, 2))
    out.append(err("Einsum_err_size", "Einsum", [a, b], "size", attrs={"equation": "ij,jk->ik"}))
    out.append(err("Einsum_err_terms", "Einsum", [a], "terms", attrs={"equation": "ij,jk->ik"}))
    out.append(err("Einsum_err_char", "Einsum", [a], "label", attrs={"equation": "i1->i"}))
    out.append(err("Einsum_err_out_label", "Einsum", [a], "appears in no input", attrs={"equation": "ij->z"}))
    out.append(err("Einsum_err_ellipsis_out", "Einsum", [rand(rng, (2, 3, 4))], "no '...'",
                   attrs={"equation": "...ij->ij"}))
    out.append(err("Einsum_err_rank", "Einsum", [a], "rank", attrs={"equation": "ijk->i"}))
    out.append(err("Einsum_err_dtype", "Einsum", [a, b.astype(np.float64)], "dtype", attrs={"equation": "ij,kl"}))
    return out


# ---- Resize --------------------------------------------------------------------------------------------------

def _x_orig(ctm, o, scale, in_len, out_len, roi):
    out_w = scale * in_len
    if ctm == "align_corners":
        return 0.0 if out_w == 1 else o * (in_len - 1) / (out_w - 1)
    if ctm == "asymmetric":
        return o / scale
    if ctm == "pytorch_half_pixel":
        return -0.5 if out_w == 1 else (o + 0.5) / scale - 0.5
    if ctm == "half_pixel_symmetric":
        adj = out_len / out_w
        return in_len / 2 * (1 - adj) + (o + 0.5) / scale - 0.5
    if ctm == "tf_crop_and_resize":
        r0, r1 = roi
        v = (r1 - r0) * (in_len - 1) / 2 if out_w == 1 else o * (r1 - r0) * (in_len - 1) / (out_w - 1)
        return v + r0 * (in_len - 1)
    return (o + 0.5) / scale - 0.5


def _weights_1d(mode, nearest_mode, x, scale, A, antialias):
    """(positions, weights) for a source coordinate x, from the spec's formulas: the taps are the n
    integer positions nearest x (ties to the lower one)."""
    fl = np.floor(x)
    ratio = 1.0 if x == fl else x - fl
    left = int(fl) - 1 if x == fl else int(fl)  # the pixel left of x (x itself counts as right)
    if mode == "nearest":
        if ratio == 1.0:
            w = [0.0, 1.0]
        elif nearest_mode == "round_prefer_floor":
            w = [1.0, 0.0] if ratio <= 0.5 else [0.0, 1.0]
        elif nearest_mode == "round_prefer_ceil":
            w = [1.0, 0.0] if ratio < 0.5 else [0.0, 1.0]
        elif nearest_mode == "floor":
            w = [1.0, 0.0]
        else:
            w = [0.0, 1.0]
        return [left, left + 1], w
    s = min(scale, 1.0) if antialias else 1.0
    if mode == "linear":
        half = int(np.ceil(1 / s))
        pos = list(range(left - half + 1, left + half + 1))
        w = [max(0.0, 1 - abs((p - x) * s)) for p in pos]
    else:
        half = int(np.ceil(2 / s))
        pos = list(range(left - half + 1, left + half + 1))

        def k(t):
            t = abs(t)
            if t <= 1:
                return (A + 2) * t ** 3 - (A + 3) * t ** 2 + 1
            if t < 2:
                return A * t ** 3 - 5 * A * t ** 2 + 8 * A * t - 4 * A
            return 0.0
        w = [k((p - x) * s) for p in pos]
    return pos, w


def ref_resize(x, out_shape, scales, mode="nearest", ctm="half_pixel", nearest_mode="round_prefer_floor",
               A=-0.75, exclude=0, extrap=0.0, roi=None, antialias=0):
    """Applies one interpolation matrix per axis (out_len x in_len) built from _weights_1d."""
    y = x.astype(np.float64)
    r = x.ndim
    for d in range(r):
        in_len, out_len, sc = x.shape[d], out_shape[d], scales[d]
        rr = (0.0, 1.0) if roi is None else (roi[d], roi[r + d])
        if out_len == in_len and abs(sc - 1) < 1e-12 and rr == (0.0, 1.0):
            continue
        M = np.zeros((out_len, in_len))
        ext = np.zeros(out_len, bool)
        for o in range(out_len):
            xo = _x_orig(ctm, o, sc, in_len, out_len, rr)
            if ctm == "tf_crop_and_resize" and (xo < 0 or xo > in_len - 1):
                ext[o] = True
                continue
            pos, w = _weights_1d(mode, nearest_mode, xo, sc, A, antialias and mode != "nearest")
            w = np.array(w, np.float64)
            if exclude:
                w = np.where([(0 <= p < in_len) for p in pos], w, 0.0)
            if exclude or (antialias and mode != "nearest"):
                w = w / w.sum()
            for p, wt in zip(pos, w):
                M[o, min(max(p, 0), in_len - 1)] += wt
        y = np.moveaxis(np.tensordot(M, np.moveaxis(y, d, 0), axes=(1, 0)), 0, d)
        if ext.any():
            sl = [slice(None)] * r
            sl[d] = ext
            y[tuple(sl)] = extrap
    return y


def resize_cases(rng):
    out = []
    x = rand(rng, (1, 2, 4, 5))
    sc_up = np.array([1, 1, 1.5, 2.2], np.float32)
    sc_dn = np.array([1, 1, 0.6, 0.5], np.float32)

    def shape_of(x, sc):
        return [int(np.floor(float(s) * n)) for s, n in zip(sc, x.shape)]

    n = 0
    for mode in ("nearest", "linear", "cubic"):
        for ctm in ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "half_pixel_symmetric"):
            for nm_, sc in (("up", sc_up), ("down", sc_dn)):
                osh = shape_of(x, sc)
                exp = ref_resize(x, osh, [float(s) for s in sc], mode, ctm)
                out.append(case("Resize_%s_%s_%s" % (mode, ctm, nm_), "Resize", [x, None, sc], [cast_like(exp, "f32")],
                                attrs={"mode": mode, "coordinate_transformation_mode": ctm}, const=[2], computed=True))
                n += 1
    for nmode in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
        sc = np.array([1, 1, 2.0, 1.5], np.float32)
        osh = shape_of(x, sc)
        exp = ref_resize(x, osh, [float(s) for s in sc], "nearest", "asymmetric", nmode)
        out.append(case("Resize_nearest_mode_" + nmode, "Resize", [x, None, sc], [cast_like(exp, "f32")],
                        attrs={"nearest_mode": nmode, "coordinate_transformation_mode": "asymmetric"}, const=[2]))
        exp = ref_resize(x, osh, [float(s) for s in sc], "nearest", "half_pixel", nmode)
        out.append(case("Resize_nearest_hp_mode_" + nmode, "Resize", [x, None, sc], [cast_like(exp, "f32")],
                        attrs={"nearest_mode": nmode}, const=[2]))
    # sizes, with and without keeping the aspect ratio
    for pol in ("stretch", "not_larger", "not_smaller"):
        sizes = i64(1, 2, 7, 8)
        s = [7 / 4, 8 / 5]
        if pol == "stretch":
            scl = [1.0, 1.0] + s
            osh = [1, 2, 7, 8]
        else:
            m = min(s) if pol == "not_larger" else max(s)
            scl = [m, m, m, m]
            osh = [int(m * n + 0.5) for n in x.shape]
            scl = [m] * 4
        if pol != "stretch":
            # keep_aspect_ratio_policy applies to the given axes: use axes [2, 3] with two sizes
            sizes = i64(7, 8)
            osh = [1, 2] + [int(m * n + 0.5) for n in x.shape[2:]]
            scl = [1.0, 1.0, m, m]
            exp = ref_resize(x, osh, scl, "linear", "half_pixel")
            out.append(case("Resize_sizes_" + pol, "Resize", [x, None, None, sizes], [cast_like(exp, "f32")],
                            attrs={"mode": "linear", "keep_aspect_ratio_policy": pol, "axes": [2, -1]}, const=[3],
                            computed=True))
        else:
            exp = ref_resize(x, osh, scl, "linear", "half_pixel")
            out.append(case("Resize_sizes_stretch", "Resize", [x, None, None, sizes], [cast_like(exp, "f32")],
                            attrs={"mode": "linear"}, const=[3], computed=True))
            out.append(case("Resize_sizes_fed", "Resize", [x, None, None, sizes], [cast_like(exp, "f32")],
                            attrs={"mode": "linear"}, computed=True))
    # cubic options, tf_crop_and_resize, antialias
    sc = np.array([1, 1, 0.8, 1.7], np.float32)
    osh = shape_of(x, sc)
    exp = ref_resize(x, osh, [float(s) for s in sc], "cubic", "half_pixel", A=-0.5, exclude=1)
    out.append(case("Resize_cubic_A05_exclude", "Resize", [x, None, sc], [cast_like(exp, "f32")],
                    attrs={"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}, const=[2], computed=True))
    roi = np.array([0, 0, 0.2, 0.1, 1, 1, 0.9, 1.3], np.float32)
    for mode in ("nearest", "linear", "cubic"):
        exp = ref_resize(x, osh, [float(s) for s in sc], mode, "tf_crop_and_resize", extrap=-7.0,
                         roi=[float(v) for v in roi])
        out.append(case("Resize_crop_%s" % mode, "Resize", [x, roi, sc], [cast_like(exp, "f32")],
                        attrs={"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize",
                               "extrapolation_value": -7.0}, const=[2], computed=True))
    roi2 = np.array([0.2, 0.1, 0.9, 1.3], np.float32)
    exp = ref_resize(x, osh, [float(s) for s in sc], "linear", "tf_crop_and_resize", roi=[0, 0, 0.2, 0.1, 1, 1, 0.9, 1.3])
    out.append(case("Resize_crop_axes", "Resize", [x, roi2, sc[2:]], [cast_like(exp, "f32")],
                    attrs={"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize", "axes": [2, 3]},
                    const=[2], computed=True))
    xa = rand(rng, (1, 1, 9, 11))
    for mode in ("linear", "cubic"):
        sca = np.array([1, 1, 0.45, 0.6], np.float32)
        osh = shape_of(xa, sca)
        exp = ref_resize(xa, osh, [float(s) for s in sca], mode, "half_pixel", antialias=1)
        out.append(case("Resize_antialias_%s" % mode, "Resize", [xa, None, sca], [cast_like(exp, "f32")],
                        attrs={"mode": mode, "antialias": 1}, const=[2], computed=True))
    # ranks 1, 3 and 5, dtypes
    for shape, sc in (((6,), [1.5]), ((2, 3, 4), [1, 2, 0.5]), ((1, 2, 2, 3, 2), [1, 1, 2, 1.5, 3])):
        xr = rand(rng, shape)
        sc = np.array(sc, np.float32)
        osh = shape_of(xr, sc)
        for mode in ("nearest", "linear"):
            exp = ref_resize(xr, osh, [float(s) for s in sc], mode, "half_pixel")
            out.append(case("Resize_r%d_%s" % (len(shape), mode), "Resize", [xr, None, sc], [cast_like(exp, "f32")],
                            attrs={"mode": mode}, const=[2], computed=True))
    for dt in NUMERIC:
        xd = rand(rng, (1, 1, 3, 4), dt)
        sc = np.array([1, 1, 2, 1.5], np.float32)
        osh = shape_of(xd, sc)
        exp = ref_resize(xd.astype(np.float64), osh, [float(s) for s in sc], "nearest", "asymmetric", "floor")
        out.append(case("Resize_nearest_%s" % dt, "Resize", [xd, None, sc], [cast_like(exp, dt)], dt,
                        attrs={"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, const=[2]))
        if dt in FLOATS:
            exp = ref_resize(xd.astype(np.float64), osh, [float(s) for s in sc], "linear", "half_pixel")
            out.append(case("Resize_linear_%s" % dt, "Resize", [xd, None, sc], [cast_like(exp, dt)], dt,
                            attrs={"mode": "linear"}, const=[2], computed=True))
    # nearest as a gather (k_misc_resize.c's resize_nearest): a detector's x2 upsample and a 0.6 downsample
    # of maps with NaN and inf, with round_prefer_ceil on half_pixel
    xn = rand(rng, (2, 16, 13, 11))
    xn[0, 3, 4, 5], xn[1, 7, 0, 0], xn[1, 15, 12, 10] = np.nan, np.inf, -np.inf
    for nm_, scn in (("up2", [1, 1, 2, 2]), ("down", [1, 1, 0.6, 0.6])):
        sc = np.array(scn, np.float32)
        # the reference's taps weigh 1 and 0, and 0 x NaN would spread a NaN to the neighbours: it resizes the
        # element numbers instead, and the expected values are the elements so chosen
        pos = np.arange(xn.size, dtype=np.float64).reshape(xn.shape)
        pick = ref_resize(pos, shape_of(xn, sc), [float(v) for v in sc], "nearest", "half_pixel", "round_prefer_ceil")
        exp = xn.reshape(-1)[np.rint(pick).astype(np.int64)]
        out.append(case("Resize_nearest_gather_" + nm_, "Resize", [xn, None, sc], [cast_like(exp, "f32")],
                        attrs={"nearest_mode": "round_prefer_ceil"}, const=[2]))
    # torch cross-check of the reference itself (same maths, another implementation)
    try:
        import torch
        import torch.nn.functional as F
        xt = rand(rng, (1, 2, 5, 6))
        for mode, ctm, tmode, ac in (("linear", "pytorch_half_pixel", "bilinear", False),
                                      ("linear", "align_corners", "bilinear", True),
                                      ("cubic", "half_pixel", "bicubic", False),
                                      ("nearest", "asymmetric", "nearest", None)):
            osz = (7, 9)
            kw = {} if ac is None else {"align_corners": ac}
            tr = F.interpolate(torch.from_numpy(xt.astype(np.float64)), size=osz, mode=tmode, **kw).numpy()
            sizes = i64(1, 2, 7, 9)
            attrs = {"mode": mode, "coordinate_transformation_mode": ctm}
            if mode == "nearest":
                attrs["nearest_mode"] = "floor"
            mine = ref_resize(xt, [1, 2, 7, 9], [1, 1, 7 / 5, 9 / 6], mode, ctm, "floor")
            assert np.allclose(mine, tr, atol=1e-9), "numpy Resize reference disagrees with torch for " + ctm
            out.append(case("Resize_torch_%s_%s" % (mode, ctm), "Resize", [xt, None, None, sizes],
                            [tr.astype(np.float32)], attrs=attrs, const=[3], computed=True))
    except ImportError as e:
        out.append(Skipped("Resize_torch_*", "PyTorch is not importable (%s): the torch cross-check of Resize" % e))
    # empty and large
    xe = np.zeros((0, 2, 3, 3), np.float32)
    out.append(case("Resize_empty_batch", "Resize", [xe, None, np.array([1, 1, 2, 2], np.float32)],
                    [np.zeros((0, 2, 6, 6), np.float32)], attrs={"mode": "linear"}, const=[2]))
    big = rand(rng, (1, 3, 128, 128))
    sc = np.array([1, 1, 2, 2], np.float32)
    exp = ref_resize(big, [1, 3, 256, 256], [1, 1, 2.0, 2.0], "linear", "half_pixel")
    out.append(case("Resize_large_linear", "Resize", [big, None, sc], [cast_like(exp, "f32")], attrs={"mode": "linear"},
                    const=[2], computed=True))
    # errors
    sc = np.array([1, 1, 2, 2], np.float32)
    out.append(err("Resize_err_both", "Resize", [x, None, sc, i64(1, 2, 8, 10)], "exactly one", const=[2, 3]))
    out.append(err("Resize_err_neither", "Resize", [x], "exactly one"))
    out.append(err("Resize_err_scales_len", "Resize", [x, None, np.array([2, 2], np.float32)], "scales", const=[2]))
    out.append(err("Resize_err_scales_len_fed", "Resize", [x, None, np.array([2, 2, 2], np.float32)], "scales"))
    out.append(err("Resize_err_mode", "Resize", [x, None, sc], "mode", attrs={"mode": "area"}, const=[2]))
    out.append(err("Resize_err_ctm", "Resize", [x, None, sc], "coordinate_transformation_mode",
                   attrs={"coordinate_transformation_mode": "xyz"}, const=[2]))
    out.append(err("Resize_err_scale_neg", "Resize", [x, None, np.array([1, 1, -2, 2], np.float32)], "> 0", const=[2]))
    out.append(err("Resize_err_sizes_dtype", "Resize", [x, None, None, np.array([1, 2, 3, 4], np.int32)], "sizes",
                   const=[3]))
    out.append(err("Resize_err_policy", "Resize", [x, None, None, i64(1, 2, 8, 8)], "keep_aspect_ratio_policy",
                   attrs={"keep_aspect_ratio_policy": "fit"}, const=[3]))
    out.append(err("Resize_err_crop_no_roi", "Resize", [x, None, sc], "roi",
                   attrs={"coordinate_transformation_mode": "tf_crop_and_resize"}, const=[2]))
    return out


def cases(rng):
    out = []
    for fn in (elements_cases, trilu_cases, cum_cases, revseq_cases, topk_cases, eye_cases, d2s_cases, norm_cases,
               reduce_cases, select_cases, einsum_cases, resize_cases):
        out.extend(fn(rng))
    return out
