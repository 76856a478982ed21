"""TensorFlow's op functions (tf.matmul, tf.nn.relu, tf.reduce_sum, ...) over weft's ops.

Each function names the weft op (ONNX's names and semantics: src/graph) and its attributes; `apply`
runs it eagerly or adds it to the function being traced. Where TensorFlow and weft differ in a default
the function translates (TensorFlow's tf.reshape takes a list; weft's Reshape a shape tensor).
"""
import builtins as _b
import ctypes as C
import numbers

import numpy as np

from . import _lib, _core, dtypes as _dt, errors
from ._core import EagerTensor, SymbolicTensor, Tensor, const
from ._lib import lib, check


def apply(op_type, inputs, attrs=None, n_out=1):
    """Runs (or, inside tf.function, adds) op_type; returns its outputs (a list when n_out != 1)."""
    attrs = attrs or {}
    tr = _core.local.trace
    if tr is not None:
        outs = tr.add(op_type, inputs, attrs)
    else:
        outs = _core.run_eager(op_type, [None if x is None else const(x) for x in inputs], attrs, n_out)
    return outs[0] if n_out == 1 else outs


def _is_tensor(x):
    return isinstance(x, Tensor)


def convert_to_tensor(value, dtype=None, name=None):
    """tf.convert_to_tensor: numpy arrays of weft dtypes are lent without a copy."""
    if _is_tensor(value):
        if dtype is not None and _dt.as_dtype(dtype) != value.dtype:
            raise errors.InvalidArgumentError(message="convert_to_tensor: a %s tensor requested as %s" %
                                              (value.dtype.name, _dt.as_dtype(dtype).name))
        return value
    return const(value, dtype)


def constant(value, dtype=None, shape=None, name=None):
    """tf.constant. With `shape`, a scalar value is broadcast and other values reshaped."""
    if _is_tensor(value):
        t = value if dtype is None else cast(value, dtype)
    else:
        arr = value
        if dtype is not None and _dt.as_dtype(dtype)._code != _lib.STRING:
            arr = np.asarray(value, dtype=_dt.as_dtype(dtype).as_numpy_dtype)
        t = const(arr, dtype)
    if shape is not None:
        shape = list(shape)
        if t.shape == ():
            return fill(shape, t)
        return reshape(t, shape)
    return t


def _pair(a, b):
    """Two operands, a Python number taking the dtype of the tensor beside it (TensorFlow's rule).
    numpy arrays count as tensors (they keep their dtype; numpy scalars are numbers); when neither is a tensor both are converted."""
    if isinstance(a, np.ndarray):
        a = const(a)
    if isinstance(b, np.ndarray):
        b = const(b)
    if _is_tensor(a) and not _is_tensor(b):
        b = const(np.asarray(b, dtype=a.dtype.as_numpy_dtype)) if a.dtype._code != _lib.BF16 else \
            cast(const(np.float32(b)), a.dtype)
    elif _is_tensor(b) and not _is_tensor(a):
        a = const(np.asarray(a, dtype=b.dtype.as_numpy_dtype)) if b.dtype._code != _lib.BF16 else \
            cast(const(np.float32(a)), b.dtype)
    elif not _is_tensor(a) and not _is_tensor(b):
        a, b = convert_to_tensor(a), convert_to_tensor(b)
    return a, b


def _binary(op):
    run2 = _core.run_eager2

    def f(x, y, name=None):
        if type(x) is EagerTensor and type(y) is EagerTensor and _core.local.trace is None:
            return run2(op, x, y)  # the common eager case, without the general path's conversions
        x, y = _pair(x, y)
        return apply(op, [x, y])
    f.__name__ = op
    return f


def _unary(op):
    def f(x, name=None):
        return apply(op, [x])
    f.__name__ = op
    return f


add = _binary("Add")
subtract = _binary("Sub")
multiply = _binary("Mul")
pow = _binary("Pow")  # noqa: A001
maximum = _binary("Max")
minimum = _binary("Min")
equal = _binary("Equal")
not_equal = _binary("NotEqual")
less = _binary("Less")
less_equal = _binary("LessEqual")
greater = _binary("Greater")
greater_equal = _binary("GreaterEqual")
logical_and = _binary("And")
logical_or = _binary("Or")
negative = _unary("Neg")
abs = _unary("Abs")  # noqa: A001
exp = _unary("Exp")
log = _unary("Log")
sqrt = _unary("Sqrt")
rsqrt = _unary("Rsqrt")
square = _unary("Square")
tanh = _unary("Tanh")
sigmoid = _unary("Sigmoid")
relu = _unary("Relu")
floor = _unary("Floor")
ceil = _unary("Ceil")
round = _unary("Round")  # noqa: A001
sign = _unary("Sign")
sin = _unary("Sin")
cos = _unary("Cos")
erf = _unary("Erf")
logical_not = _unary("Not")
is_nan = _unary("IsNaN")
reciprocal = _unary("Reciprocal")
softplus = _unary("Softplus")


def divide(x, y, name=None):
    """tf.divide / the / operator: integers divide to float64 as in TensorFlow (truediv)."""
    x, y = _pair(x, y)
    if not x.dtype.is_floating:
        x, y = cast(x, _dt.float64), cast(y, _dt.float64)
    return apply("Div", [x, y])


truediv = divide


def floormod(x, y, name=None):
    """tf.math.floormod / the % operator: the result takes the divisor's sign (Python's and numpy's %),
    weft's Mod with fmod=0."""
    x, y = _pair(x, y)
    return apply("Mod", [x, y], {"fmod": 0})


mod = floormod


def floordiv(x, y, name=None):
    """tf.math.floordiv / the // operator: floor(x / y). Integers: (x - x mod y) / y, exact, so the
    quotient rounds toward -inf as Python's // does (Div alone truncates toward 0)."""
    x, y = _pair(x, y)
    x, y = convert_to_tensor(x), convert_to_tensor(y)
    if x.dtype.is_floating:
        return apply("Floor", [apply("Div", [x, y])])
    return apply("Div", [apply("Sub", [x, floormod(x, y)]), y])


def add_n(inputs, name=None):
    return apply("Sum", list(inputs))


def gelu(x, approximate=False, name=None):
    return apply("Gelu", [x], {"approximate": "tanh" if approximate else "none"})


def elu(x, name=None):
    return apply("Elu", [x])


def selu(x, name=None):
    return apply("Selu", [x])


def leaky_relu(x, alpha=0.2, name=None):
    return apply("LeakyRelu", [x], {"alpha": float(alpha)})


def swish(x, name=None):
    return apply("Swish", [x])


def softsign(x, name=None):
    return apply("Softsign", [x])


def relu6(x, name=None):
    return clip_by_value(x, 0.0, 6.0)


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    t = convert_to_tensor(t)
    lo = const(np.asarray(clip_value_min, dtype=t.dtype.as_numpy_dtype))
    hi = const(np.asarray(clip_value_max, dtype=t.dtype.as_numpy_dtype))
    return apply("Clip", [t, lo, hi])


def matmul(a, b, transpose_a=False, transpose_b=False, name=None):
    a, b = convert_to_tensor(a), convert_to_tensor(b)
    if transpose_a or transpose_b:
        return apply("Gemm", [a, b], {"transA": int(bool(transpose_a)), "transB": int(bool(transpose_b))}) \
            if len(a.shape) == 2 and len(b.shape) == 2 else \
            apply("MatMul", [_swap_last(a) if transpose_a else a, _swap_last(b) if transpose_b else b])
    return apply("MatMul", [a, b])


def _swap_last(x):
    r = len(x.shape)
    perm = list(_b.range(r))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return transpose(x, perm)


def cast(x, dtype, name=None):
    x = convert_to_tensor(x)
    d = _dt.as_dtype(dtype)
    if x.dtype == d:
        return x
    return apply("Cast", [x], {"to": d})


def _i64(values):
    return const(np.asarray(values, dtype=np.int64).reshape(-1))


def reshape(tensor, shape, name=None):
    if _is_tensor(shape):
        return apply("Reshape", [tensor, cast(shape, _dt.int64)])
    return apply("Reshape", [tensor, _i64(list(shape))])


def transpose(a, perm=None, conjugate=False, name=None):
    a = convert_to_tensor(a)
    if perm is None:
        perm = list(_b.range(len(a.shape)))[::-1]
    return apply("Transpose", [a], {"perm": [int(p) for p in perm]})


def concat(values, axis, name=None):
    return apply("Concat", [convert_to_tensor(v) for v in values], {"axis": int(axis)})


def expand_dims(input, axis, name=None):  # noqa: A002
    return apply("Unsqueeze", [input, _i64([axis])])


def squeeze(input, axis=None, name=None):  # noqa: A002
    if axis is None:
        return apply("Squeeze", [input])
    return apply("Squeeze", [input, _i64([axis] if isinstance(axis, numbers.Integral) else list(axis))])


def stack(values, axis=0, name=None):
    return concat([expand_dims(v, axis) for v in values], axis)


def _reduce(op):
    def f(input_tensor, axis=None, keepdims=False, name=None):
        x = convert_to_tensor(input_tensor)
        if axis is None:
            axes = list(_b.range(len(x.shape)))
        else:
            axes = [axis] if isinstance(axis, numbers.Integral) else list(axis)
        if not axes:
            return x
        return apply(op, [x, _i64(axes)], {"keepdims": int(bool(keepdims))})
    f.__name__ = op
    return f


reduce_sum = _reduce("ReduceSum")
reduce_mean = _reduce("ReduceMean")
reduce_max = _reduce("ReduceMax")
reduce_min = _reduce("ReduceMin")
reduce_prod = _reduce("ReduceProd")
reduce_logsumexp = _reduce("ReduceLogSumExp")


def argmax(input, axis=None, output_type=_dt.int64, name=None):  # noqa: A002
    r = apply("ArgMax", [input], {"axis": int(axis or 0), "keepdims": 0})
    return cast(r, output_type)


def argmin(input, axis=None, output_type=_dt.int64, name=None):  # noqa: A002
    r = apply("ArgMin", [input], {"axis": int(axis or 0), "keepdims": 0})
    return cast(r, output_type)


def softmax(logits, axis=-1, name=None):
    return apply("Softmax", [logits], {"axis": int(axis)})


def log_softmax(logits, axis=-1, name=None):
    return apply("LogSoftmax", [logits], {"axis": int(axis)})


def where(condition, x=None, y=None, name=None):
    if x is None and y is None:
        raise errors.UnimplementedError(message="tf.where(condition) (the indices form) is not in weft; "
                                        "pass x and y")
    x, y = _pair(x, y)
    return apply("Where", [condition, x, y])


def fill(dims, value, name=None):
    value = convert_to_tensor(value)
    return apply("Expand", [value, _i64(list(dims))])


def _init(kind, shape, dtype, **kw):
    spec = _lib.Init()
    spec.kind = kind
    for k, v in kw.items():
        setattr(spec, k, v)
    shape = [int(d) for d in shape]
    dims = (C.c_int64 * max(len(shape), 1))(*shape)
    h = C.c_void_p()
    check(lib.wf_init_tensor(C.byref(spec), _dt.as_dtype(dtype)._code, len(shape), dims, C.byref(h)))
    return EagerTensor(h.value)


def zeros(shape, dtype=_dt.float32, name=None):
    return _init(1, shape, dtype)


def ones(shape, dtype=_dt.float32, name=None):
    return _init(2, shape, dtype)


def zeros_like(x, dtype=None, name=None):
    x = convert_to_tensor(x)
    return zeros(x.shape, dtype or x.dtype)


def ones_like(x, dtype=None, name=None):
    x = convert_to_tensor(x)
    return ones(x.shape, dtype or x.dtype)


def range(start, limit=None, delta=1, dtype=None, name=None):  # noqa: A001
    if limit is None:
        start, limit = 0, start
    d = _dt.as_dtype(dtype) if dtype is not None else \
        (_dt.float32 if any(isinstance(v, float) for v in (start, limit, delta)) else _dt.int32)
    npd = d.as_numpy_dtype
    return apply("Range", [const(np.asarray(start, npd)), const(np.asarray(limit, npd)), const(np.asarray(delta, npd))])


def identity(x, name=None):
    return apply("Identity", [x])


def shape(x, out_type=_dt.int32, name=None):
    x = convert_to_tensor(x)
    if isinstance(x, EagerTensor):
        return const(np.asarray(x.shape, dtype=_dt.as_dtype(out_type).as_numpy_dtype))
    return cast(apply("Shape", [x]), out_type)


def size(x, out_type=_dt.int32, name=None):
    return cast(apply("Size", [x]), out_type)


def rank(x, name=None):
    return const(np.int32(len(convert_to_tensor(x).shape)))


def tile(input, multiples, name=None):  # noqa: A002
    return apply("Tile", [input, _i64(list(multiples))])


def gather(params, indices, axis=0, batch_dims=0, name=None):
    return apply("Gather", [params, convert_to_tensor(indices)], {"axis": int(axis)})


def one_hot(indices, depth, on_value=1.0, off_value=0.0, axis=-1, dtype=_dt.float32, name=None):
    d = _dt.as_dtype(dtype).as_numpy_dtype
    values = const(np.asarray([off_value, on_value], dtype=d))
    return apply("OneHot", [indices, const(np.asarray(depth, np.int64)), values], {"axis": int(axis)})


def getitem(x, key):
    """x[key] for ints, slices (any step) and Ellipsis/None, by Slice, Squeeze and Unsqueeze."""
    x = convert_to_tensor(x)
    if not isinstance(key, tuple):
        key = (key,)
    if isinstance(x, EagerTensor) and x.dtype._code == _lib.STRING:
        # weft's Slice/Squeeze do not take strings: index the eager value on the host (a copy)
        try:
            return const(np.asarray(x.numpy(), dtype=object)[key], _dt.string)
        except IndexError as e:
            raise errors.InvalidArgumentError(message="index %r: %s" % (key, e)) from None
    rank_ = len(x.shape)
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if n_real > rank_:
        raise errors.InvalidArgumentError(message="index %r has %d indices for a rank-%d tensor" % (key, n_real, rank_))
    expanded = []
    for k in key:
        if k is Ellipsis:
            expanded.extend([slice(None)] * (rank_ - n_real))
        else:
            expanded.append(k)
    starts, ends, axes, steps, squeeze_axes, new_axes = [], [], [], [], [], []
    dim = 0
    out_pos = 0
    for k in expanded:
        if k is None:
            new_axes.append(out_pos)
            out_pos += 1
            continue
        n = x.shape[dim]
        if isinstance(k, (numbers.Integral, np.integer)) or (isinstance(k, EagerTensor) and k.shape == ()):
            i = int(k)
            if n is not None and not -n <= i < n:
                raise errors.InvalidArgumentError(message="index %d is out of bounds for dim %d of size %d" % (i, dim, n))
            if i < 0:
                i += n
            starts.append(i), ends.append(i + 1), axes.append(dim), steps.append(1)
            squeeze_axes.append(dim)
        elif isinstance(k, slice):
            st = 1 if k.step is None else int(k.step)
            if st == 0:
                raise errors.InvalidArgumentError(message="slice step cannot be zero")
            big = np.iinfo(np.int64).max
            b = k.start if k.start is not None else (0 if st > 0 else -1)
            e = k.stop if k.stop is not None else (big if st > 0 else -big)
            if not (k.start is None and k.stop is None and st == 1):
                starts.append(int(b)), ends.append(int(e)), axes.append(dim), steps.append(st)
            out_pos += 1
        else:
            raise TypeError("weft tensors index with ints, slices, None and ...; got %r" % (k,))
        dim += 1
    y = x
    if axes:
        y = apply("Slice", [y, _i64(starts), _i64(ends), _i64(axes), _i64(steps)])
    if squeeze_axes:
        y = apply("Squeeze", [y, _i64(squeeze_axes)])
    for a in new_axes:
        y = expand_dims(y, a)
    return y


# ---- random ----------------------------------------------------------------------------------------

class _Seeds:
    global_seed = None
    counter = 0


def _next_seed(seed):
    """TensorFlow's rule, simplified: (global seed, op seed) picks the stream; without an op seed each
    call draws the next one. Without any seed, a new draw each call from a process counter."""
    _Seeds.counter += 1
    base = _Seeds.global_seed if _Seeds.global_seed is not None else _core.RANDOM_BASE
    op = seed if seed is not None else _Seeds.counter
    return (int(base) * 1000003 + int(op)) & ((1 << 63) - 1)


def set_seed(seed):
    _Seeds.global_seed = seed
    _Seeds.counter = 0


def _traced_uniform(shape, dtype, op_seed):
    """Inside tf.function: U[0, 1) of `shape` drawn at every call (StatelessRandomUniform keyed by the
    op's seed and the function's per-call counter, the second half of its random input)."""
    tr = _core.local.trace
    counter = apply("Gather", [tr.seed, const(np.asarray(1, dtype=np.int64))], {"axis": 0})
    like = fill([int(d) for d in shape], const(np.asarray(0, dtype=_dt.as_dtype(dtype).as_numpy_dtype)))
    return apply("StatelessRandomUniform", [like, counter], {"seed": int(op_seed) & ((1 << 62) - 1)})


def _traced_rng():
    return _core.local.trace is not None and getattr(_core.local.trace, "seed", None) is not None


def random_normal(shape, mean=0.0, stddev=1.0, dtype=_dt.float32, seed=None, name=None):
    if _traced_rng():  # Box-Muller over two uniform draws, as graph ops: new values at every call
        s = _next_seed(seed)
        u1 = _traced_uniform(shape, dtype, s)
        u2 = _traced_uniform(shape, dtype, s ^ 0x9e3779b97f4a7c15)
        r = sqrt(multiply(log(subtract(1.0, u1)), -2.0))
        return add(multiply(multiply(r, cos(multiply(u2, 2 * np.pi))), float(stddev)), float(mean))
    return _init(5, shape, dtype, mean=float(mean), stddev=float(stddev), seed=_next_seed(seed))


def random_uniform(shape, minval=0, maxval=None, dtype=_dt.float32, seed=None, name=None):
    if maxval is None:
        maxval = 1.0
    if _traced_rng() and _dt.as_dtype(dtype).is_floating:
        u = _traced_uniform(shape, dtype, _next_seed(seed))
        return add(multiply(u, float(maxval) - float(minval)), float(minval))
    return _init(4, shape, dtype, minval=float(minval), maxval=float(maxval), seed=_next_seed(seed))


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=_dt.float32, seed=None, name=None):
    if _traced_rng():
        raise errors.UnimplementedError(message="tf.random.truncated_normal inside tf.function is not in weft "
                                        "(outside a function it is)")
    return _init(6, shape, dtype, mean=float(mean), stddev=float(stddev), seed=_next_seed(seed))


def from_dlpack(obj):
    """tf.experimental.dlpack.from_dlpack: host memory only, shared (no copy)."""
    # an ndarray is lent as it is (older numpy cannot re-export a read-only array, such as one that
    # np.from_dlpack made, through DLPack)
    return const(obj if isinstance(obj, np.ndarray) else np.from_dlpack(obj))


def to_dlpack(t):
    return convert_to_tensor(t).__dlpack__()
