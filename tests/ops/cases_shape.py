"""Shape and data-movement ops against numpy (and clear numpy re-implementations of ONNX's reference
where numpy has no direct equivalent: GatherND, ScatterND, OneHot, Slice's clamping, Pad with crops)."""
import numpy as np

from opcase import Case, Ints

I64 = np.int64
ERR = "INVALID_ARGUMENT"

# Every dtype these ops move; bf16 is fed from an f32 file whose values are bf16-exact.
DTYPES = ["f32", "f64", "f16", "bf16", "i8", "u8", "i16", "i32", "i64", "bool"]
NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.float32, "i8": np.int8,
      "u8": np.uint8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "bool": np.bool_}


def rand(rng, shape, dt="f32"):
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt in ("f32", "f64", "f16"):
        return rng.standard_normal(shape).astype(NP[dt])
    if dt == "bf16":
        x = rng.standard_normal(shape).astype(np.float32)
        return (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    info = np.iinfo(NP[dt])
    return rng.integers(max(info.min, -100), min(info.max, 100), size=shape, endpoint=True).astype(NP[dt])


def fd(dt, idx=0):
    return {idx: "bf16"} if dt == "bf16" else None


def i64(*v):
    return np.array(v, dtype=I64)


def per_dtype(rng, name, op, shape, fn, extra=(), attrs=None, const=(1,)):
    """One case per dtype: data is input 0, `extra` further inputs, expected = [fn(data)]."""
    out = []
    for dt in DTYPES:
        x = rand(rng, shape, dt)
        out.append(Case("%s_%s" % (name, dt), op, [x] + list(extra), [fn(x)], attrs=attrs, const=const,
                        feed_dtype=fd(dt)))
    return out


def onnx_slice(x, starts, ends, axes=None, steps=None):
    axes = list(range(len(starts))) if axes is None else [a % x.ndim for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    sl = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        dim = x.shape[a]
        s = s + dim if s < 0 else s
        e = e + dim if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
        else:
            s, e = min(max(s, 0), dim - 1), min(max(e, -1), dim - 1)
        # a clamped end of -1 means "past the front": Python spells that None
        sl[a] = slice(s, None if e < 0 else e, st)
    return x[tuple(sl)]


def gather_nd(data, idx, b=0):
    bshape = data.shape[:b]
    nb = int(np.prod(bshape)) if b else 1
    d = data.reshape((nb,) + data.shape[b:])
    q = idx.reshape((nb, -1, idx.shape[-1]))
    last = idx.shape[-1]
    out = []
    for i in range(nb):
        for t in q[i]:
            out.append(d[i][tuple(int(v) for v in t)])
    return np.array(out, dtype=data.dtype).reshape(idx.shape[:-1] + data.shape[b + last:])


def scatter_nd(data, idx, upd, red="none"):
    out = data.copy()
    last = idx.shape[-1]
    flat_i = idx.reshape(-1, last)
    flat_u = upd.reshape((flat_i.shape[0],) + data.shape[last:])
    f = {"none": lambda a, b: b, "add": lambda a, b: a + b, "mul": lambda a, b: a * b,
         "max": np.maximum, "min": np.minimum}[red]
    for t, u in zip(flat_i, flat_u):
        k = tuple(int(v) for v in t)
        out[k] = f(out[k], u)
    return out


def onehot(ind, depth, vals, axis=-1):
    ind = np.asarray(ind).astype(np.int64)
    ind = np.where(ind < 0, ind + depth, ind)
    r = ind.ndim + 1
    axis = axis % r
    eye = (np.arange(depth).reshape((1,) * axis + (depth,) + (1,) * (r - axis - 1)) ==
           np.expand_dims(ind, axis))
    return np.where(eye, vals[1], vals[0]).astype(vals.dtype)


def onnx_pad(x, pads, mode="constant", value=0, axes=None):
    """Pads relative to the original data: pad the positive parts, then crop the negative ones."""
    axes = list(range(x.ndim)) if axes is None else [a % x.ndim for a in axes]
    n = len(axes)
    width = [(0, 0)] * x.ndim
    crop = [slice(None)] * x.ndim
    for i, a in enumerate(axes):
        b, e = int(pads[i]), int(pads[i + n])
        width[a] = (max(b, 0), max(e, 0))
        dim = x.shape[a] + max(b, 0) + max(e, 0)
        crop[a] = slice(-min(b, 0), dim + min(e, 0))
    kw = {"constant_values": value} if mode == "constant" else {}
    y = np.pad(x, width, mode=mode, **kw) if any(w != (0, 0) for w in width) else x.copy()
    return y[tuple(crop)]


def cases(rng):
    c = []
    c += reshape_cases(rng)
    c += transpose_cases(rng)
    c += squeeze_cases(rng)
    c += concat_split_cases(rng)
    c += slice_cases(rng)
    c += gather_cases(rng)
    c += scatter_cases(rng)
    c += pad_cases(rng)
    c += tile_expand_cases(rng)
    c += onehot_range_cases(rng)
    c += shape_fill_cases(rng)
    return c


def reshape_cases(rng):
    c = per_dtype(rng, "reshape", "Reshape", (2, 3, 4), lambda x: x.reshape(4, 6), extra=[i64(4, -1)])
    x = rand(rng, (2, 3, 4))
    c.append(Case("reshape_copy_zero", "Reshape", [x, i64(0, -1)], [x.reshape(2, 12)], const=[1]))
    c.append(Case("reshape_i32_shape", "Reshape", [x, np.array([3, 8], np.int32)], [x.reshape(3, 8)], const=[1]))
    c.append(Case("reshape_feed_shape", "Reshape", [x, i64(-1, 2, 2)], [x.reshape(-1, 2, 2)]))
    c.append(Case("reshape_feed_shape_zero", "Reshape", [x, i64(2, 0, -1)], [x.reshape(2, 3, 4)]))
    z = rand(rng, (2, 0, 3))
    c.append(Case("reshape_allowzero", "Reshape", [z, i64(0, 6)], [z.reshape(0, 6)], attrs={"allowzero": 1},
                  const=[1]))
    c.append(Case("reshape_empty_infer", "Reshape", [z, i64(-1, 2)], [z.reshape(0, 2)], const=[1]))
    one = rand(rng, (1, 1))
    c.append(Case("reshape_to_scalar", "Reshape", [one, np.zeros(0, I64)], [one.reshape(())], const=[1]))
    s = np.array(2.5, np.float32)
    c.append(Case("reshape_from_scalar", "Reshape", [s, i64(1, 1, 1)], [s.reshape(1, 1, 1)], const=[1]))
    big = rand(rng, (300, 1000))
    c.append(Case("reshape_large", "Reshape", [big, i64(-1, 600)], [big.reshape(-1, 600)], const=[1]))
    c.append(Case("reshape_err_count", "Reshape", [x, i64(5, 5)], error=(ERR, "cannot reshape"), const=[1]))
    c.append(Case("reshape_err_two_neg", "Reshape", [x, i64(-1, -1)], error=(ERR, "more than one -1"), const=[1]))
    c.append(Case("reshape_err_indivisible", "Reshape", [x, i64(5, -1)], error=(ERR, "cannot reshape"), const=[1]))
    c.append(Case("reshape_err_shape_dtype", "Reshape", [x, np.array([4, 6], np.float32)],
                  error=(ERR, "must be i32 or i64"), const=[1]))
    c.append(Case("reshape_err_runtime_count", "Reshape", [x, i64(7, 3)], error=(ERR, "cannot reshape")))
    c.append(Case("reshape_err_allowzero_neg", "Reshape", [z, i64(0, -1)], attrs={"allowzero": 1},
                  error=(ERR, "both 0 and -1"), const=[1]))
    return c


def transpose_cases(rng):
    c = per_dtype(rng, "transpose", "Transpose", (2, 3, 4), lambda x: x.transpose(2, 0, 1),
                  attrs={"perm": [2, 0, 1]})
    x = rand(rng, (2, 3, 4, 5))
    c.append(Case("transpose_default_reverse", "Transpose", [x], [x.transpose()]))
    c.append(Case("transpose_0213", "Transpose", [x], [x.transpose(0, 2, 1, 3)], attrs={"perm": [0, 2, 1, 3]}))
    c.append(Case("transpose_neg_perm", "Transpose", [x], [x.transpose(0, 3, 1, 2)], attrs={"perm": [0, -1, 1, 2]}))
    w = rand(rng, (2, 3, 4, 20))
    c.append(Case("transpose_wide_blocks", "Transpose", [w], [w.transpose(0, 2, 1, 3)], attrs={"perm": [0, 2, 1, 3]}))
    c.append(Case("transpose_identity", "Transpose", [x], [x.copy()], attrs={"perm": [0, 1, 2, 3]}))
    c.append(Case("transpose_size1_dims", "Transpose", [rand(rng, (1, 5, 1, 3))], None, attrs={"perm": [3, 2, 0, 1]}))
    c[-1].expected = [c[-1].inputs[0].transpose(3, 2, 0, 1)]
    for dt, shape in (("u8", (67, 45)), ("f16", (33, 70)), ("f64", (129, 31)), ("bool", (5, 97))):
        m = rand(rng, shape, dt)
        c.append(Case("transpose_2d_%s" % dt, "Transpose", [m], [m.T], attrs={"perm": [1, 0]}))
    s = np.array(3.0, np.float32)
    c.append(Case("transpose_rank0", "Transpose", [s], [s]))
    e = rand(rng, (0, 3))
    c.append(Case("transpose_empty", "Transpose", [e], [e.T], attrs={"perm": [1, 0]}))
    big = rand(rng, (600, 500))
    c.append(Case("transpose_large_2d", "Transpose", [big], [big.T], attrs={"perm": [1, 0]}))
    # 4-byte elements move in 8 x 8 float registers (k_shape.c's tt_range4): odd edges; int32 (compared
    # exactly) holding the bit patterns of float NaNs with payloads (a signalling one too), -0 and a
    # denormal, which arithmetic on floats would change; f32 NaN and -0
    ii = rng.integers(-2**31, 2**31 - 1, size=(45, 67), dtype=np.int64).astype(np.int32)
    ii.reshape(-1)[:5] = np.array([0x7fc00001, 0x7fa00000, 0xffc12345, 0x80000000, 0x00000001],
                                  np.uint32).view(np.int32)
    c.append(Case("transpose_2d_i32_blocks", "Transpose", [ii], [ii.T.copy()], attrs={"perm": [1, 0]}))
    fb = rand(rng, (19, 77))
    fb[0, :3] = [np.nan, -0.0, np.inf]
    c.append(Case("transpose_2d_f32_nan", "Transpose", [fb], [fb.T.copy()], attrs={"perm": [1, 0]}))
    bb = rand(rng, (3, 257, 390))
    c.append(Case("transpose_large_batched", "Transpose", [bb], [bb.transpose(0, 2, 1)], attrs={"perm": [0, 2, 1]}))
    g = rand(rng, (8, 30, 40, 32), "i16")
    c.append(Case("transpose_large_generic", "Transpose", [g], [g.transpose(3, 1, 0, 2)],
                  attrs={"perm": [3, 1, 0, 2]}))
    c.append(Case("transpose_err_perm_dup", "Transpose", [x], attrs={"perm": [0, 0, 1, 2]},
                  error=(ERR, "not a permutation")))
    c.append(Case("transpose_err_perm_len", "Transpose", [x], attrs={"perm": [1, 0]}, error=(ERR, "perm")))
    c.append(Case("transpose_err_perm_range", "Transpose", [x], attrs={"perm": [0, 1, 2, 4]},
                  error=(ERR, "not a permutation")))
    return c


def squeeze_cases(rng):
    c = per_dtype(rng, "squeeze", "Squeeze", (2, 1, 3), lambda x: x.squeeze(1), extra=[i64(1)])
    x = rand(rng, (1, 3, 1, 2, 1))
    c.append(Case("squeeze_all", "Squeeze", [x], [x.squeeze()]))
    c.append(Case("squeeze_neg_axes", "Squeeze", [x, i64(-1, 0)], [x.squeeze((4, 0))], const=[1]))
    c.append(Case("squeeze_feed_axes", "Squeeze", [x, i64(2)], [x.squeeze(2)]))
    o = rand(rng, (1, 1))
    c.append(Case("squeeze_to_rank0", "Squeeze", [o], [o.reshape(())]))
    e = rand(rng, (0, 1, 2))
    c.append(Case("squeeze_empty", "Squeeze", [e, i64(1)], [e.squeeze(1)], const=[1]))
    c.append(Case("squeeze_err_not_one", "Squeeze", [x, i64(1)], error=(ERR, "not 1"), const=[1]))
    c.append(Case("squeeze_err_axis", "Squeeze", [x, i64(5)], error=(ERR, "out of range"), const=[1]))
    c.append(Case("squeeze_err_runtime_not_one", "Squeeze", [x, i64(3)], error=(ERR, "not 1")))

    c += per_dtype(rng, "unsqueeze", "Unsqueeze", (2, 3), lambda x: x.reshape(1, 2, 3, 1), extra=[i64(0, 3)])
    y = rand(rng, (2, 3))
    c.append(Case("unsqueeze_neg", "Unsqueeze", [y, i64(-1)], [y[:, :, None]], const=[1]))
    c.append(Case("unsqueeze_middle_unsorted", "Unsqueeze", [y, i64(3, 1)], [y.reshape(2, 1, 3, 1)], const=[1]))
    c.append(Case("unsqueeze_feed_axes", "Unsqueeze", [y, i64(1)], [y[:, None, :]]))
    s = np.array(7, np.int32)
    c.append(Case("unsqueeze_rank0", "Unsqueeze", [s, i64(0)], [s.reshape(1)], const=[1]))
    e = rand(rng, (0, 4))
    c.append(Case("unsqueeze_empty", "Unsqueeze", [e, i64(0)], [e[None]], const=[1]))
    c.append(Case("unsqueeze_err_dup", "Unsqueeze", [y, i64(1, 1)], error=(ERR, "repeat"), const=[1]))
    c.append(Case("unsqueeze_err_axis", "Unsqueeze", [y, i64(4)], error=(ERR, "out of range"), const=[1]))
    c.append(Case("unsqueeze_err_dtype", "Unsqueeze", [y, np.array([0.0])], error=(ERR, "must be i32 or i64"),
                  const=[1]))

    c += per_dtype(rng, "flatten", "Flatten", (2, 3, 4), lambda x: x.reshape(2, 12))
    z = rand(rng, (2, 3, 4, 5))
    for ax in (0, 2, 4, -1, -4):
        a = ax + 4 if ax < 0 else ax
        c.append(Case("flatten_axis%s" % str(ax).replace("-", "m"), "Flatten", [z],
                      [z.reshape(int(np.prod(z.shape[:a])), -1)], attrs={"axis": ax}))
    s = np.array(1.5, np.float32)
    c.append(Case("flatten_rank0", "Flatten", [s], [s.reshape(1, 1)], attrs={"axis": 0}))
    c.append(Case("flatten_empty", "Flatten", [rand(rng, (3, 0, 2))], [np.zeros((3, 0), np.float32)]))
    c.append(Case("flatten_err_axis", "Flatten", [z], attrs={"axis": 5}, error=(ERR, "out of range")))
    c.append(Case("flatten_err_axis_neg", "Flatten", [z], attrs={"axis": -5}, error=(ERR, "out of range")))
    return c


def concat_split_cases(rng):
    c = []
    for dt in DTYPES:
        a, b, d = rand(rng, (2, 3, 2), dt), rand(rng, (2, 1, 2), dt), rand(rng, (2, 4, 2), dt)
        c.append(Case("concat_%s" % dt, "Concat", [a, b, d], [np.concatenate([a, b, d], 1)], attrs={"axis": 1},
                      feed_dtype={0: "bf16", 1: "bf16", 2: "bf16"} if dt == "bf16" else None))
    a, b = rand(rng, (3, 2)), rand(rng, (3, 5))
    c.append(Case("concat_neg_axis", "Concat", [a, b], [np.concatenate([a, b], -1)], attrs={"axis": -1}))
    c.append(Case("concat_axis0", "Concat", [a, a, a], [np.concatenate([a, a, a], 0)], attrs={"axis": 0}))
    c.append(Case("concat_rank1_i64", "Concat", [i64(1, 2), i64(3)], [i64(1, 2, 3)], attrs={"axis": 0}))
    c.append(Case("concat_single", "Concat", [a], [a.copy()], attrs={"axis": 1}))
    e = np.zeros((3, 0), np.float32)
    c.append(Case("concat_empty_part", "Concat", [a, e, b], [np.concatenate([a, e, b], 1)], attrs={"axis": 1}))
    c.append(Case("concat_all_empty", "Concat", [e, e], [np.zeros((3, 0), np.float32)], attrs={"axis": 1}))
    c.append(Case("concat_const_inputs", "Concat", [a, b], [np.concatenate([a, b], 1)], attrs={"axis": 1},
                  const=[0, 1]))
    big1, big2 = rand(rng, (150, 1000)), rand(rng, (100, 1000))
    c.append(Case("concat_large_axis0", "Concat", [big1, big2], [np.concatenate([big1, big2], 0)],
                  attrs={"axis": 0}))
    l1, l2 = rand(rng, (3000, 60)), rand(rng, (3000, 40))
    c.append(Case("concat_large_axis1", "Concat", [l1, l2], [np.concatenate([l1, l2], 1)], attrs={"axis": 1}))
    c.append(Case("concat_err_dims", "Concat", [a, rand(rng, (4, 5))], attrs={"axis": 1}, error=(ERR, "differ in dim")))
    c.append(Case("concat_err_dtype", "Concat", [a, b.astype(np.float64)], attrs={"axis": 1},
                  error=(ERR, "input 1")))
    c.append(Case("concat_err_rank", "Concat", [a, rand(rng, (3, 2, 1))], attrs={"axis": 1}, error=(ERR, "rank")))
    c.append(Case("concat_err_axis", "Concat", [a, b], attrs={"axis": 2}, error=(ERR, "out of range")))
    c.append(Case("concat_err_no_axis", "Concat", [a, b], error=(ERR, "axis")))

    for dt in DTYPES:
        x = rand(rng, (4, 6), dt)
        c.append(Case("split_%s" % dt, "Split", [x], list(np.split(x, 3, 1)), attrs={"axis": 1, "num_outputs": 3},
                      feed_dtype=fd(dt)))
    x = rand(rng, (7, 3))
    c.append(Case("split_uneven", "Split", [x], [x[0:3], x[3:6], x[6:7]], attrs={"num_outputs": 3}))
    c.append(Case("split_uneven_zero_last", "Split", [rand(rng, (4, 2))], None, attrs={"num_outputs": 3}))
    c[-1].expected = [c[-1].inputs[0][0:2], c[-1].inputs[0][2:4], c[-1].inputs[0][4:4]]
    c.append(Case("split_sizes_const", "Split", [x, i64(2, 0, 5)], [x[0:2], x[2:2], x[2:7]],
                  attrs={"num_outputs": 3}, const=[1]))
    c.append(Case("split_sizes_feed", "Split", [x, i64(1, 2)], [x[:, 0:1], x[:, 1:3]],
                  attrs={"axis": -1, "num_outputs": 2}))
    c.append(Case("split_one", "Split", [x], [x.copy()], attrs={"num_outputs": 1, "axis": 1}))
    big = rand(rng, (600, 500))
    c.append(Case("split_large", "Split", [big], list(np.split(big, 2, 0)), attrs={"num_outputs": 2}))
    bl = rand(rng, (3000, 100), "i8")
    c.append(Case("split_large_axis1", "Split", [bl], list(np.split(bl, [30, 100], 1)),
                  attrs={"num_outputs": 3, "axis": 1}))
    c[-1].inputs.append(i64(30, 70, 0))
    c[-1].const = {1}
    c.append(Case("split_err_sum", "Split", [x, i64(2, 2)], attrs={"num_outputs": 2}, error=(ERR, "sum"),
                  const=[1]))
    c.append(Case("split_err_count", "Split", [x, i64(2, 2, 3)], attrs={"num_outputs": 2}, error=(ERR, "split"),
                  const=[1]))
    c.append(Case("split_err_runtime_sum", "Split", [x, i64(3, 3)], attrs={"num_outputs": 2}, error=(ERR, "split")))
    c.append(Case("split_err_axis", "Split", [x], attrs={"num_outputs": 2, "axis": 2}, error=(ERR, "out of range")))
    c.append(Case("split_err_no_num_outputs", "Split", [x], error=(ERR, "num_outputs")))
    c.append(Case("split_err_too_many", "Split", [rand(rng, (1, 2))], attrs={"num_outputs": 3},
                  error=(ERR, "cannot split")))
    return c


def slice_cases(rng):
    c = []
    for dt in DTYPES:
        x = rand(rng, (5, 6), dt)
        c.append(Case("slice_%s" % dt, "Slice", [x, i64(1, 0), i64(4, 6), i64(0, 1), i64(1, 2)],
                      [x[1:4, 0:6:2]], const=[1, 2, 3, 4], feed_dtype=fd(dt)))
    # filters cropped as conv_crop does: rows of 1-3 blocks of 1-2 elements (the copier's inline paths for
    # 2-, 4-, 8- and 16-byte blocks), many rows (split across threads)
    for dt in ("f32", "f64", "f16", "i8"):
        w = rand(rng, (96, 64, 3, 3), dt)
        for name, st, en in (("2x2", (0, 0), (2, 2)), ("3x2", (0, 1), (3, 3)), ("1x3", (1, 0), (2, 3))):
            c.append(Case("slice_filter_crop_%s_%s" % (name, dt), "Slice", [w, i64(*st), i64(*en), i64(2, 3)],
                          [w[:, :, st[0]:en[0], st[1]:en[1]]], const=[1, 2, 3], feed_dtype=fd(dt)))
    x = rand(rng, (4, 5, 6))

    def add(name, starts, ends, axes=None, steps=None, const=(1, 2, 3, 4)):
        ins = [x, i64(*starts), i64(*ends), None if axes is None else i64(*axes), None if steps is None else i64(*steps)]
        while ins[-1] is None:
            ins.pop()
        c.append(Case("slice_" + name, "Slice", ins, [onnx_slice(x, starts, ends, axes, steps)], const=const))

    add("no_axes", [1, 2], [3, 5])
    add("neg_start_end", [-3], [-1], [2])
    add("neg_axis", [0], [2], [-1])
    add("neg_step", [5], [0], [2], [-1])
    add("neg_step_to_front", [-1], [-(2 ** 63)], [1], [-2])
    add("clamp_big", [2, -100], [2 ** 63 - 1, 100], [0, 2])
    add("empty_result", [3], [1], [1])
    add("steps_3", [0, 1], [6, 5], [2, 1], [3, 2])
    add("unsorted_axes", [1, 0], [3, 2], [2, 0])
    add("feed_all", [1, -4], [3, 100], [1, 2], [1, -1], const=())
    add("feed_starts_only", [0], [3], [0], None, const=(2, 3))
    c.append(Case("slice_none_axes_with_steps", "Slice", [x, i64(1), i64(4), None, i64(2)], [x[1:4:2]],
                  const=[1, 2, 4]))
    e = rand(rng, (0, 3))
    c.append(Case("slice_empty_input", "Slice", [e, i64(1), i64(3), i64(1)], [e[:, 1:3]], const=[1, 2, 3]))
    big = rand(rng, (700, 900))
    c.append(Case("slice_large", "Slice", [big, i64(50, 1), i64(650, 899), i64(0, 1), i64(1, 2)],
                  [big[50:650, 1:899:2]], const=[1, 2, 3, 4]))
    v = rand(rng, (400000,), "u8")
    c.append(Case("slice_large_1d_step", "Slice", [v, i64(-1), i64(-(2 ** 63)), i64(0), i64(-1)], [v[::-1]],
                  const=[1, 2, 3, 4]))
    c.append(Case("slice_err_step0", "Slice", [x, i64(0), i64(2), i64(0), i64(0)], error=(ERR, "step"),
                  const=[1, 2, 3, 4]))
    c.append(Case("slice_err_axis", "Slice", [x, i64(0), i64(2), i64(3)], error=(ERR, "out of range"),
                  const=[1, 2, 3]))
    c.append(Case("slice_err_len", "Slice", [x, i64(0, 1), i64(2)], error=(ERR, "values"), const=[1, 2]))
    c.append(Case("slice_err_dtype", "Slice", [x, np.array([0.0]), i64(2)], error=(ERR, "must be i32 or i64"),
                  const=[1, 2]))
    c.append(Case("slice_err_runtime_step0", "Slice", [x, i64(0), i64(2), i64(0), i64(0)], error=(ERR, "step")))
    return c


def gather_cases(rng):
    c = []
    for dt in DTYPES:
        x = rand(rng, (5, 4), dt)
        idx = i64(0, 4, -1, 2)
        c.append(Case("gather_%s" % dt, "Gather", [x, idx], [np.take(x, idx, 0)], feed_dtype=fd(dt)))
    x = rand(rng, (3, 4, 5))
    idx2 = np.array([[1, -1], [0, 2], [3, 3]], np.int32)
    c.append(Case("gather_axis1_2d_i32", "Gather", [x, idx2], [np.take(x, idx2, 1)], attrs={"axis": 1}))
    c.append(Case("gather_axis_neg", "Gather", [x, i64(4, 0)], [np.take(x, [4, 0], 2)], attrs={"axis": -1}))
    c.append(Case("gather_scalar_index", "Gather", [x, np.array(2, I64)], [x[:, :, 2]], attrs={"axis": 2}))
    c.append(Case("gather_const_indices", "Gather", [x, i64(2, 1)], [x[[2, 1]]], const=[1]))
    c.append(Case("gather_empty_indices", "Gather", [x, np.zeros((0,), I64)], [x[[]]]))
    v = rand(rng, (10,), "i64")
    c.append(Case("gather_rank1_to_rank0", "Gather", [v, np.array(-3, np.int32)], [np.array(v[-3])]))
    tab = rand(rng, (1000, 64))
    ids = rng.integers(-1000, 1000, size=(50, 100)).astype(I64)
    c.append(Case("gather_large_embedding", "Gather", [tab, ids], [np.take(tab, ids, 0)]))
    cols = rand(rng, (3000, 200), "i16")
    ci = rng.integers(0, 200, size=(100,)).astype(np.int32)
    c.append(Case("gather_large_inner_axis", "Gather", [cols, ci], [np.take(cols, ci, 1)], attrs={"axis": 1}))
    c.append(Case("gather_err_index", "Gather", [x, i64(0, 3)], error=(ERR, "index 3")))
    c.append(Case("gather_err_index_neg", "Gather", [x, i64(-4)], error=(ERR, "index -4")))
    c.append(Case("gather_err_dtype", "Gather", [x, np.array([0.0])], error=(ERR, "must be i32 or i64")))
    c.append(Case("gather_err_axis", "Gather", [x, i64(0)], attrs={"axis": 3}, error=(ERR, "out of range")))

    d = rand(rng, (3, 4, 5))
    for name, ind, b in (("elements", [[0, 1, 2], [2, 3, -1]], 0), ("slices", [[1], [0], [-1]], 0),
                         ("rows", [[[0, 1]], [[2, 2]]], 0), ("batch1", [[1], [3], [0]], 1),
                         ("batch1_elems", [[[1, 4], [0, 0]], [[3, 3], [2, 1]], [[0, 2], [1, -5]]], 1)):
        ind = np.array(ind, I64)
        c.append(Case("gathernd_" + name, "GatherND", [d, ind], [gather_nd(d, np.where(ind < 0, ind + np.array(
            d.shape[b:b + ind.shape[-1]]), ind), b)], attrs={"batch_dims": b}))
    for dt in ("f16", "i32", "bool", "u8"):
        dd = rand(rng, (4, 3), dt)
        ind = np.array([[3], [1]], np.int32)
        c.append(Case("gathernd_%s" % dt, "GatherND", [dd, ind], [gather_nd(dd, ind)]))
    big = rand(rng, (400, 800))
    bi = rng.integers(0, 400, size=(300, 1)).astype(I64)
    c.append(Case("gathernd_large", "GatherND", [big, bi], [gather_nd(big, bi)]))
    c.append(Case("gathernd_err_index", "GatherND", [d, i64(0, 4)[None]], error=(ERR, "out of range")))
    c.append(Case("gathernd_err_last_dim", "GatherND", [d, np.zeros((2, 4), I64)], error=(ERR, "last dim")))
    c.append(Case("gathernd_err_rank0_indices", "GatherND", [d, np.array(1, I64)], error=(ERR, "rank >= 1")))
    c.append(Case("gathernd_err_dtype", "GatherND", [d, np.zeros((2, 1), np.float32)],
                  error=(ERR, "must be i32 or i64")))
    c.append(Case("gathernd_err_batch", "GatherND", [d, np.zeros((2, 1), I64)], attrs={"batch_dims": 1},
                  error=(ERR, "batch dim")))
    return c


def scatter_cases(rng):
    c = []
    for dt in DTYPES:
        x = rand(rng, (5, 3), dt)
        ind = i64(4, 0)[:, None]
        u = rand(rng, (2, 3), dt)
        c.append(Case("scatternd_%s" % dt, "ScatterND", [x, ind, u], [scatter_nd(x, ind, u)],
                      feed_dtype={0: "bf16", 2: "bf16"} if dt == "bf16" else None))
    x = rand(rng, (4, 3))
    ind = np.array([[1, 2], [0, 0], [1, 2], [-1, 1]], I64)
    u = rand(rng, (4,))
    wrapped = np.where(ind < 0, ind + 4, ind)
    for red in ("add", "mul", "max", "min"):
        c.append(Case("scatternd_" + red, "ScatterND", [x, ind, u], [scatter_nd(x, wrapped, u, red)],
                      attrs={"reduction": red}))
    xi = rand(rng, (6,), "i32")
    ii = np.array([[0], [5], [0]], np.int32)
    ui = rand(rng, (3,), "i32")
    for red in ("add", "max"):
        c.append(Case("scatternd_i32_" + red, "ScatterND", [xi, ii, ui], [scatter_nd(xi, ii, ui, red)],
                      attrs={"reduction": red}))
    xb = rand(rng, (4,), "bool")
    ub = np.array([True, False])
    c.append(Case("scatternd_bool_mul", "ScatterND", [xb, i64(1, 2)[:, None], ub],
                  [scatter_nd(xb, i64(1, 2)[:, None], ub, "mul")], attrs={"reduction": "mul"}))
    xh = rand(rng, (3, 2), "f16")
    uh = rand(rng, (2, 2), "f16")
    c.append(Case("scatternd_f16_add", "ScatterND", [xh, i64(2, 2)[:, None], uh],
                  [scatter_nd(xh, i64(2, 2)[:, None], uh, "add")], attrs={"reduction": "add"}))
    x3 = rand(rng, (2, 3, 4))
    ind3 = np.array([[[1, 0], [0, 2]]], I64)
    u3 = rand(rng, (1, 2, 4))
    c.append(Case("scatternd_rows", "ScatterND", [x3, ind3, u3], [scatter_nd(x3, ind3, u3)]))
    c.append(Case("scatternd_const_data", "ScatterND", [x3, ind3, u3], [scatter_nd(x3, ind3, u3)], const=[0]))
    big = rand(rng, (600, 500))
    bi = rng.permutation(600)[:200].astype(I64)[:, None]
    bu = rand(rng, (200, 500))
    c.append(Case("scatternd_large", "ScatterND", [big, bi, bu], [scatter_nd(big, bi, bu)]))
    c.append(Case("scatternd_err_reduction", "ScatterND", [x, ind, u], attrs={"reduction": "sub"},
                  error=(ERR, "reduction")))
    c.append(Case("scatternd_err_updates_shape", "ScatterND", [x, ind, rand(rng, (3,))], error=(ERR, "updates")))
    c.append(Case("scatternd_err_updates_dtype", "ScatterND", [x, ind, u.astype(np.float64)],
                  error=(ERR, "dtype")))
    c.append(Case("scatternd_err_index", "ScatterND", [x, i64(4, 0)[None], u[:1]], error=(ERR, "out of range")))
    c.append(Case("scatternd_err_index_neg", "ScatterND", [x, i64(-5, 0)[None], u[:1]], error=(ERR, "index -5")))
    c.append(Case("scatternd_err_last_dim", "ScatterND", [x, np.zeros((1, 3), I64), u[:1]], error=(ERR, "last dim")))
    return c


def pad_cases(rng):
    c = []
    for dt in DTYPES:
        x = rand(rng, (2, 3), dt)
        cv = rand(rng, (), dt)
        pads = i64(1, 0, 0, 2)
        c.append(Case("pad_%s" % dt, "Pad", [x, pads, cv], [onnx_pad(x, pads, "constant", cv)], const=[1],
                      feed_dtype={0: "bf16", 2: "bf16"} if dt == "bf16" else None))
    x = rand(rng, (3, 4, 5))
    for mode in ("reflect", "edge", "wrap"):
        p = i64(1, 2, 3, 2, 1, 4)
        c.append(Case("pad_" + mode, "Pad", [x, p], [onnx_pad(x, p, mode)], attrs={"mode": mode}, const=[1]))
    p = i64(0, 5, 0, 0, 7, 0)
    c.append(Case("pad_reflect_multi", "Pad", [x, p], [onnx_pad(x, p, "reflect")], attrs={"mode": "reflect"},
                  const=[1]))
    c.append(Case("pad_edge_size1", "Pad", [rand(rng, (1, 3)), i64(2, 1, 2, 0)], None, attrs={"mode": "reflect"},
                  const=[1]))
    c[-1].expected = [onnx_pad(c[-1].inputs[0], c[-1].inputs[1], "reflect")]
    c.append(Case("pad_default_zero", "Pad", [x, i64(1, 0, 1, 0, 2, 0)], [onnx_pad(x, [1, 0, 1, 0, 2, 0])],
                  const=[1]))
    p = i64(-1, 2, 0, 1, -2, -3)
    c.append(Case("pad_negative_crop", "Pad", [x, p, np.array(9.0, np.float32)], [onnx_pad(x, p, "constant", 9.0)],
                  const=[1]))
    c.append(Case("pad_negative_edge", "Pad", [x, p], [onnx_pad(x, p, "edge")], attrs={"mode": "edge"}, const=[1]))
    c.append(Case("pad_axes", "Pad", [x, i64(2, 1, 0, 3), np.array(-1.0, np.float32), i64(-1, 0)],
                  [onnx_pad(x, [2, 1, 0, 3], "constant", -1.0, [-1, 0])], const=[1, 3]))
    c.append(Case("pad_no_value_with_axes", "Pad", [x, i64(1, 1), None, i64(1)],
                  [onnx_pad(x, [1, 1], "constant", 0, [1])], const=[1, 3]))
    c.append(Case("pad_feed_pads", "Pad", [x, i64(0, 1, 2, 3, 0, 1)], [onnx_pad(x, [0, 1, 2, 3, 0, 1], "edge")],
                  attrs={"mode": "edge"}))
    s = np.array(4, np.int32)
    c.append(Case("pad_rank0", "Pad", [s, np.zeros(0, I64)], [s], const=[1]))
    e = np.zeros((0, 2), np.float32)
    c.append(Case("pad_empty_constant", "Pad", [e, i64(1, 0, 1, 1)], [onnx_pad(e, [1, 0, 1, 1])], const=[1]))
    # constant padding that crops nothing (the kernel's fill-then-place-rows path): a 1x1 weight gradient
    # padded to 3x3 (many one-element rows, split over threads), every axis padded with a value, NaN and
    # inf carried, rank 1, and a 2-byte dtype
    wg = rand(rng, (64, 96, 1, 1))
    wg[3, 5, 0, 0], wg[60, 1, 0, 0] = np.nan, -np.inf
    p = i64(0, 0, 1, 1, 0, 0, 1, 1)
    c.append(Case("pad_grow_rows_of_one", "Pad", [wg, p], [onnx_pad(wg, p)], const=[1]))
    x4 = rand(rng, (2, 3, 2, 5))
    x4[1, 2, 0, 4] = np.nan
    p = i64(1, 0, 2, 1, 2, 1, 0, 3)
    c.append(Case("pad_grow_all_axes_value", "Pad", [x4, p, np.array(-2.5, np.float32)],
                  [onnx_pad(x4, p, "constant", -2.5)], const=[1]))
    r1 = rand(rng, (7,))
    c.append(Case("pad_grow_rank1", "Pad", [r1, i64(3, 2)], [onnx_pad(r1, [3, 2])], const=[1]))
    xh = rand(rng, (3, 1, 4), "f16")
    c.append(Case("pad_grow_f16", "Pad", [xh, i64(0, 2, 1, 1, 0, 2)], [onnx_pad(xh, [0, 2, 1, 1, 0, 2])], const=[1]))
    big = rand(rng, (500, 600))
    c.append(Case("pad_large", "Pad", [big, i64(3, 5, 2, 7)], [onnx_pad(big, [3, 5, 2, 7], "reflect")],
                  attrs={"mode": "reflect"}, const=[1]))
    c.append(Case("pad_err_mode", "Pad", [x, i64(0, 0, 0, 0, 0, 0)], attrs={"mode": "mirror"}, error=(ERR, "mode"),
                  const=[1]))
    c.append(Case("pad_err_len", "Pad", [x, i64(1, 1)], error=(ERR, "pads"), const=[1]))
    c.append(Case("pad_err_crop", "Pad", [x, i64(-2, 0, 0, -2, 0, 0)], error=(ERR, "below zero"), const=[1]))
    c.append(Case("pad_err_value_dtype", "Pad", [x, i64(0, 0, 0, 0, 0, 0), np.array(1, np.int32)],
                  error=(ERR, "constant_value"), const=[1]))
    c.append(Case("pad_err_reflect_empty", "Pad", [e, i64(1, 0, 0, 0)], attrs={"mode": "reflect"},
                  error=(ERR, "empty"), const=[1]))
    c.append(Case("pad_err_runtime_crop", "Pad", [x, i64(-2, 0, 0, -2, 0, 0)], error=(ERR, "below zero")))
    return c


def tile_expand_cases(rng):
    c = per_dtype(rng, "tile", "Tile", (2, 3), lambda x: np.tile(x, (2, 3)), extra=[i64(2, 3)])
    x = rand(rng, (2, 1, 3))
    c.append(Case("tile_ones", "Tile", [x, i64(1, 1, 1)], [x.copy()], const=[1]))
    c.append(Case("tile_zero", "Tile", [x, i64(1, 0, 2)], [np.tile(x, (1, 0, 2))], const=[1]))
    c.append(Case("tile_feed", "Tile", [x, i64(3, 2, 1)], [np.tile(x, (3, 2, 1))]))
    s = np.array(2.0, np.float32)
    c.append(Case("tile_rank0", "Tile", [s, np.zeros(0, I64)], [s], const=[1]))
    big = rand(rng, (100, 300))
    c.append(Case("tile_large", "Tile", [big, i64(5, 2)], [np.tile(big, (5, 2))], const=[1]))
    c.append(Case("tile_err_len", "Tile", [x, i64(2, 2)], error=(ERR, "repeats"), const=[1]))
    c.append(Case("tile_err_negative", "Tile", [x, i64(1, -1, 1)], error=(ERR, "negative"), const=[1]))

    c += per_dtype(rng, "expand", "Expand", (3, 1), lambda x: np.broadcast_to(x, (2, 3, 4)).copy(),
                   extra=[i64(2, 1, 4)])
    y = rand(rng, (2, 3))
    c.append(Case("expand_same_shape", "Expand", [y, i64(2, 3)], [y.copy()], const=[1]))
    c.append(Case("expand_smaller_shape", "Expand", [y, i64(1)], [y.copy()], const=[1]))
    c.append(Case("expand_bidirectional", "Expand", [rand(rng, (3, 1)), i64(2, 1, 5)], None, const=[1]))
    c[-1].expected = [c[-1].inputs[0] * np.ones((2, 1, 5), np.float32)]
    c.append(Case("expand_prepend_only", "Expand", [y, i64(4, 1, 1)], [np.broadcast_to(y, (4, 2, 3)).copy()],
                  const=[1]))
    s = np.array(5, np.int64)
    c.append(Case("expand_rank0", "Expand", [s, i64(2, 2)], [np.full((2, 2), 5, I64)], const=[1]))
    c.append(Case("expand_to_empty", "Expand", [rand(rng, (1, 3)), i64(0, 3)], [np.zeros((0, 3), np.float32)],
                  const=[1]))
    c.append(Case("expand_feed_shape", "Expand", [rand(rng, (4, 1)), i64(4, 6)], None))
    c[-1].expected = [np.broadcast_to(c[-1].inputs[0], (4, 6)).copy()]
    row = rand(rng, (1, 600))
    c.append(Case("expand_large", "Expand", [row, i64(500, 600)], [np.broadcast_to(row, (500, 600)).copy()],
                  const=[1]))
    col = rand(rng, (500, 1), "i8")
    c.append(Case("expand_large_col", "Expand", [col, i64(500, 700)], [np.broadcast_to(col, (500, 700)).copy()]))
    c.append(Case("expand_err_incompatible", "Expand", [y, i64(4, 3, 2)], error=(ERR, "cannot broadcast"),
                  const=[1]))
    c.append(Case("expand_err_runtime", "Expand", [y, i64(5, 3)], error=(ERR, "cannot broadcast")))
    c.append(Case("expand_err_dtype", "Expand", [y, np.array([2.0, 3.0])], error=(ERR, "must be i32 or i64"),
                  const=[1]))
    return c


def onehot_range_cases(rng):
    c = []
    ind = np.array([[0, 2, -1], [4, 5, -6]], I64)
    vals = np.array([0.0, 1.0], np.float32)
    depth = np.array(5, I64)
    for ax in (-1, 0, 1, 2, -3):
        c.append(Case("onehot_axis%s" % str(ax).replace("-", "m"), "OneHot", [ind, depth, vals],
                      [onehot(ind, 5, vals, ax)], attrs={"axis": ax}, const=[1]))
    for dt in ("f64", "f16", "i32", "i8", "u8", "bool", "i64"):
        v = np.array([3, 7], NP[dt]) if dt != "bool" else np.array([False, True])
        c.append(Case("onehot_values_%s" % dt, "OneHot", [ind, depth, v], [onehot(ind, 5, v)], const=[1]))
    fi = np.array([1.0, 3.7, -1.0], np.float32)
    c.append(Case("onehot_float_indices", "OneHot", [fi, np.array(4.0, np.float32), vals],
                  [onehot(np.trunc(fi), 4, vals)], const=[1]))
    c.append(Case("onehot_i32_depth_feed", "OneHot", [ind.astype(np.int32), np.array([6], np.int32), vals],
                  [onehot(ind, 6, vals)]))
    s = np.array(2, I64)
    c.append(Case("onehot_rank0", "OneHot", [s, depth, vals], [onehot(s, 5, vals)], const=[1]))
    big = rng.integers(0, 1000, size=(400,)).astype(I64)
    c.append(Case("onehot_large", "OneHot", [big, np.array(1000, I64), vals], [onehot(big, 1000, vals)], const=[1]))
    c.append(Case("onehot_err_values", "OneHot", [ind, depth, np.zeros(3, np.float32)], error=(ERR, "values"),
                  const=[1]))
    c.append(Case("onehot_err_axis", "OneHot", [ind, depth, vals], attrs={"axis": 3}, error=(ERR, "out of range"),
                  const=[1]))
    c.append(Case("onehot_err_depth", "OneHot", [ind, np.array(0, I64), vals], error=(ERR, "depth"), const=[1]))

    for dt, (s, l, d) in (("i32", (1, 10, 3)), ("i64", (10, -5, -4)), ("f32", (0.5, 3.0, 0.25)),
                          ("f64", (-1.0, 1.0, 0.3)), ("i16", (0, 7, 1)), ("i8", (5, 5, 1)), ("u8", (2, 200, 50)),
                          ("f16", (0.0, 2.0, 0.5))):
        t = NP[dt]
        ins = [np.array(s, t), np.array(l, t), np.array(d, t)]
        c.append(Case("range_%s" % dt, "Range", ins, [np.arange(s, l, d).astype(t)], const=[0, 1, 2]))
    ins = [np.array(3, I64), np.array(20, I64), np.array(4, I64)]
    c.append(Case("range_feed", "Range", ins, [np.arange(3, 20, 4, dtype=I64)]))
    # bf16: values formed in double from the bf16 inputs, rounded through f32 (nearest even) to bf16
    d = np.float32(0.10009765625)  # 0.1 in bf16
    v = (1.0 + np.arange(10) * np.float64(d)).astype(np.float32).view(np.uint32)
    v = ((v + np.uint32(0x7fff) + ((v >> 16) & np.uint32(1))) & np.uint32(0xffff0000)).view(np.float32)
    ins = [np.array(1.0, np.float32), np.array(2.0, np.float32), np.array(d, np.float32)]
    c.append(Case("range_bf16", "Range", ins, [v], feed_dtype={0: "bf16", 1: "bf16", 2: "bf16"}, rtol=0, atol=0))
    ins = [np.array(0.0, np.float32), np.array(-3.0, np.float32), np.array(1.0, np.float32)]
    c.append(Case("range_empty", "Range", ins, [np.zeros(0, np.float32)], const=[0, 1, 2]))
    ins = [np.array(0, np.int32), np.array(300000, np.int32), np.array(1, np.int32)]
    c.append(Case("range_large", "Range", ins, [np.arange(300000, dtype=np.int32)], const=[0, 1, 2]))
    ins = [np.array(0, I64), np.array(5, I64), np.array(0, I64)]
    c.append(Case("range_err_delta0", "Range", ins, error=(ERR, "delta"), const=[0, 1, 2]))
    c.append(Case("range_err_delta0_feed", "Range", ins, error=(ERR, "delta")))
    ins = [np.array(0, I64), np.array(5, np.int32), np.array(1, I64)]
    c.append(Case("range_err_dtype", "Range", ins, error=(ERR, "limit"), const=[0, 1, 2]))
    ins = [np.array(True), np.array(True), np.array(True)]
    c.append(Case("range_err_bool", "Range", ins, error=(ERR, "numeric"), const=[0, 1, 2]))
    ins = [np.array([0, 1], I64), np.array(5, I64), np.array(1, I64)]
    c.append(Case("range_err_not_scalar", "Range", ins, error=(ERR, "scalar"), const=[0, 1, 2]))
    return c


def shape_fill_cases(rng):
    c = []
    for dt in DTYPES:
        x = rand(rng, (2, 3, 4), dt)
        c.append(Case("shape_%s" % dt, "Shape", [x], [i64(2, 3, 4)], feed_dtype=fd(dt)))
    x = rand(rng, (2, 3, 4, 5))
    for st, en in ((1, None), (None, -1), (-3, 3), (2, 1), (-10, 10)):
        attrs = {}
        if st is not None:
            attrs["start"] = st
        if en is not None:
            attrs["end"] = en
        name = "shape_s%s_e%s" % (str(st).replace("-", "m"), str(en).replace("-", "m"))
        c.append(Case(name, "Shape", [x], [np.array(x.shape[slice(st, en)], I64)], attrs=attrs))
    c.append(Case("shape_rank0", "Shape", [np.array(1.0, np.float32)], [np.zeros(0, I64)]))
    c.append(Case("shape_empty_dim", "Shape", [np.zeros((3, 0), np.int8)], [i64(3, 0)]))
    c.append(Case("shape_const_input", "Shape", [x], [i64(2, 3, 4, 5)], const=[0]))

    for dt in ("f32", "i64", "bool", "f16"):
        xs = rand(rng, (3, 0, 2) if dt == "f16" else (4, 5), dt)
        c.append(Case("size_%s" % dt, "Size", [xs], [np.array(xs.size, I64)]))
    c.append(Case("size_rank0", "Size", [np.array(3, np.int32)], [np.array(1, I64)]))

    for dt in DTYPES:
        v = rand(rng, (), dt)
        c.append(Case("fill_%s" % dt, "Fill", [i64(2, 3), v], [np.full((2, 3), v, NP[dt])], const=[0],
                      feed_dtype=fd(dt, 1)))
    c.append(Case("fill_feed_dims", "Fill", [i64(4, 1, 2), np.array(7, np.int32)], [np.full((4, 1, 2), 7, np.int32)]))
    c.append(Case("fill_rank0", "Fill", [np.zeros(0, I64), np.array(1.5, np.float32)], [np.array(1.5, np.float32)],
                  const=[0]))
    c.append(Case("fill_empty", "Fill", [i64(0, 5), np.array(1.5, np.float32)], [np.zeros((0, 5), np.float32)],
                  const=[0]))
    c.append(Case("fill_large", "Fill", [i64(600, 500), np.array(-2.25, np.float64)],
                  [np.full((600, 500), -2.25)], const=[0]))
    c.append(Case("fill_err_value_rank", "Fill", [i64(2), np.zeros(2, np.float32)], error=(ERR, "scalar"), const=[0]))
    c.append(Case("fill_err_negative", "Fill", [i64(2, -1), np.array(1.0, np.float32)], error=(ERR, "negative"),
                  const=[0]))
    c.append(Case("fill_err_dims_dtype", "Fill", [np.array([2.0]), np.array(1.0, np.float32)],
                  error=(ERR, "must be i32 or i64"), const=[0]))

    c.append(Case("constantofshape_default", "ConstantOfShape", [i64(2, 3)], [np.zeros((2, 3), np.float32)],
                  const=[0]))
    for dt, val in (("i64", 7), ("f64", -0.5), ("bool", True), ("i8", -3), ("f16", 1.5)):
        t = np.array([val], NP[dt])
        c.append(Case("constantofshape_%s" % dt, "ConstantOfShape", [i64(3, 1, 2)], [np.full((3, 1, 2), val, NP[dt])],
                      attrs={"value": t}, const=[0]))
    c.append(Case("constantofshape_scalar", "ConstantOfShape", [np.zeros(0, I64)], [np.array(2.0, np.float32)],
                  attrs={"value": np.array([2.0], np.float32)}, const=[0]))
    c.append(Case("constantofshape_feed", "ConstantOfShape", [i64(3, 4)], [np.full((3, 4), 9, np.int32)],
                  attrs={"value": np.array([9], np.int32)}))
    c.append(Case("constantofshape_large", "ConstantOfShape", [i64(300, 1000)], [np.ones((300, 1000), np.float32)],
                  attrs={"value": np.array([1.0], np.float32)}, const=[0]))
    c.append(Case("constantofshape_err_value", "ConstantOfShape", [i64(2)], attrs={"value": np.zeros(2, np.float32)},
                  error=(ERR, "one element"), const=[0]))
    c.append(Case("constantofshape_err_negative", "ConstantOfShape", [i64(-2)], error=(ERR, "negative"), const=[0]))
    return c
