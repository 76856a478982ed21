"""Op functions against numpy (always) and TensorFlow (when importable)."""
import numpy as np
import pytest

import weft as tf
from conftest import BF16

RNG = np.random.default_rng(1234)


def rnd(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def tol(dt):
    return {np.dtype(np.float16): 2e-2, np.dtype(np.float64): 1e-12}.get(np.dtype(dt), 1e-5)


# ---- matmul ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_2d(dt, ta, tb):
    a = rnd(4, 5, dtype=dt)
    b = rnd(5, 3, dtype=dt)
    aa = a.T.copy() if ta else a
    bb = b.T.copy() if tb else b
    got = tf.matmul(tf.constant(aa), tf.constant(bb), transpose_a=ta, transpose_b=tb).numpy()
    want = (a.astype(np.float64) @ b.astype(np.float64))
    assert got.dtype == np.dtype(dt)
    np.testing.assert_allclose(got, want, rtol=tol(dt), atol=tol(dt))


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_batched(ta, tb):
    a = rnd(3, 4, 5)
    b = rnd(3, 5, 2)
    aa = np.swapaxes(a, -1, -2).copy() if ta else a
    bb = np.swapaxes(b, -1, -2).copy() if tb else b
    got = tf.matmul(aa, bb, transpose_a=ta, transpose_b=tb).numpy()
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)


def test_matmul_broadcast_batch_and_int():
    a = rnd(2, 1, 3, 4)
    b = rnd(5, 4, 2)
    np.testing.assert_allclose(tf.matmul(a, b).numpy(), a @ b, rtol=1e-5, atol=1e-5)
    ai = np.arange(6, dtype=np.int32).reshape(2, 3)
    bi = np.arange(12, dtype=np.int32).reshape(3, 4)
    np.testing.assert_array_equal(tf.matmul(ai, bi).numpy(), ai @ bi)


def test_matmul_vs_tensorflow():
    rtf = pytest.importorskip("tensorflow")
    a, b = rnd(2, 3, 4), rnd(2, 5, 4)
    np.testing.assert_allclose(tf.matmul(a, b, transpose_b=True).numpy(),
                               rtf.matmul(a, b, transpose_b=True).numpy(), rtol=1e-5, atol=1e-5)


# ---- reductions --------------------------------------------------------------------------------------

REDUCTIONS = [(tf.reduce_sum, np.sum), (tf.reduce_mean, np.mean), (tf.reduce_max, np.max),
              (tf.reduce_min, np.min), (tf.reduce_prod, np.prod)]


@pytest.mark.parametrize("fn,ref", REDUCTIONS, ids=lambda f: getattr(f, "__name__", ""))
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), [1, 2]], ids=repr)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(fn, ref, axis, keepdims):
    x = rnd(3, 4, 5) * 0.5 + 1.0
    got = fn(x, axis=axis, keepdims=keepdims).numpy()
    want = ref(x.astype(np.float64), axis=tuple(axis) if isinstance(axis, list) else axis, keepdims=keepdims)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("dt", [np.int32, np.int64, np.float64, np.float16], ids=lambda d: np.dtype(d).name)
def test_reduce_sum_dtypes(dt):
    x = (np.arange(24) % 7).astype(dt).reshape(4, 6)
    got = tf.reduce_sum(x, axis=1).numpy()
    assert got.dtype == np.dtype(dt)
    np.testing.assert_array_equal(got, x.sum(axis=1, dtype=dt))


def test_reduce_rank0_and_logsumexp():
    assert float(tf.reduce_sum(tf.constant(3.0))) == 3.0
    x = rnd(4, 6)
    want = np.log(np.exp(x.astype(np.float64)).sum(axis=1))
    np.testing.assert_allclose(tf.math.reduce_logsumexp(x, axis=1).numpy(), want, rtol=1e-5)


def test_argmax_argmin():
    x = rnd(4, 6)
    a = tf.argmax(x, axis=1)
    assert a.dtype == tf.int64
    np.testing.assert_array_equal(a.numpy(), np.argmax(x, axis=1))
    np.testing.assert_array_equal(tf.argmin(x, axis=0).numpy(), np.argmin(x, axis=0))


# ---- shape ops ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [[-1], [4, -1], [-1, 3, 2], [2, 2, 6], (24,), [1, 24, 1]], ids=repr)
def test_reshape(shape):
    x = np.arange(24, dtype=np.int64)
    got = tf.reshape(x, shape).numpy()
    np.testing.assert_array_equal(got, x.reshape(shape))


def test_reshape_tensor_shape_and_rank0():
    x = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(tf.reshape(x, tf.constant([3, 2])).numpy(), x.reshape(3, 2))
    np.testing.assert_array_equal(tf.reshape(tf.constant([5.0]), []).numpy(), np.float32(5.0))


@pytest.mark.parametrize("perm", [None, [0, 2, 1], [2, 0, 1], [1, 0, 2]], ids=repr)
def test_transpose(perm):
    x = rnd(2, 3, 4)
    np.testing.assert_array_equal(tf.transpose(x, perm).numpy(), np.transpose(x, perm))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat_stack(axis):
    a, b, c = rnd(2, 3), rnd(2, 3), rnd(2, 3)
    np.testing.assert_array_equal(tf.concat([a, b, c], axis).numpy(), np.concatenate([a, b, c], axis))
    np.testing.assert_array_equal(tf.stack([a, b, c], axis=axis).numpy(), np.stack([a, b, c], axis=axis))


def test_concat_with_empty():
    a = rnd(0, 3)
    b = rnd(2, 3)
    np.testing.assert_array_equal(tf.concat([a, b], 0).numpy(), np.concatenate([a, b], 0))


def test_stack_scalars():
    np.testing.assert_array_equal(tf.stack([tf.constant(1), tf.constant(2)]).numpy(), np.array([1, 2], np.int32))


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_expand_dims(axis):
    x = rnd(2, 3)
    np.testing.assert_array_equal(tf.expand_dims(x, axis).numpy(), np.expand_dims(x, axis))


@pytest.mark.parametrize("axis", [None, 0, 2, [0, 2], -1])
def test_squeeze(axis):
    x = rnd(1, 3, 1)
    want = np.squeeze(x, axis=tuple(axis) if isinstance(axis, list) else axis)
    np.testing.assert_array_equal(tf.squeeze(x, axis).numpy(), want)


@pytest.mark.parametrize("src,dst", [(np.float32, np.int32), (np.float32, np.float64), (np.int32, np.float32),
                                     (np.float64, np.float16), (np.int64, np.uint8), (np.float32, np.bool_),
                                     (np.bool_, np.float32), (np.int32, np.int64)], ids=repr)
def test_cast(src, dst):
    x = np.array([0, 1, 2, 7, 100, 3], dtype=src)
    got = tf.cast(x, tf.as_dtype(np.dtype(dst))).numpy()
    assert got.dtype == np.dtype(dst)
    np.testing.assert_array_equal(got, x.astype(dst))


def test_cast_float_to_int_truncates():
    x = np.array([1.7, -1.7, 2.5, -0.5], np.float32)
    np.testing.assert_array_equal(tf.cast(x, tf.int32).numpy(), x.astype(np.int32))


def test_cast_bf16():
    if BF16 is None:
        pytest.skip("ml_dtypes missing")
    x = np.array([1.0, 1.00390625, 3.14159, -2.5e10], np.float32)
    got = tf.cast(x, tf.bfloat16).numpy()
    assert got.dtype == BF16
    np.testing.assert_array_equal(got, x.astype(BF16))  # round to nearest even, as ml_dtypes


# ---- activations -------------------------------------------------------------------------------------

def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_activations(dt):
    x = np.concatenate([np.linspace(-30, 30, 61), [0.0]]).astype(dt)
    t = tf.constant(x)
    xd = x.astype(np.float64)
    np.testing.assert_array_equal(tf.nn.relu(t).numpy(), np.maximum(x, 0))
    np.testing.assert_allclose(tf.sigmoid(t).numpy(), _sigmoid(xd), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(tf.tanh(t).numpy(), np.tanh(xd), rtol=1e-6, atol=1e-7)


def test_activations_nan():
    x = np.array([np.nan, np.inf, -np.inf], np.float32)
    np.testing.assert_array_equal(tf.sigmoid(x).numpy()[0], np.nan)
    np.testing.assert_allclose(tf.tanh(x).numpy(), np.tanh(x))
    np.testing.assert_allclose(tf.sigmoid(x).numpy()[1:], [1.0, 0.0])


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax(axis):
    x = rnd(3, 5) * 10
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    want = e / e.sum(axis=axis, keepdims=True)
    got = tf.nn.softmax(x, axis=axis).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got.sum(axis=axis), 1.0, rtol=1e-5)


def test_softmax_large_logits_no_overflow():
    x = np.array([[1000.0, 1000.0, -1000.0]], np.float32)
    np.testing.assert_allclose(tf.nn.softmax(x).numpy(), [[0.5, 0.5, 0.0]], atol=1e-7)


def test_activations_vs_tensorflow():
    rtf = pytest.importorskip("tensorflow")
    x = rnd(4, 7) * 3
    for ours, theirs in [(tf.nn.relu, rtf.nn.relu), (tf.nn.softmax, rtf.nn.softmax), (tf.sigmoid, rtf.sigmoid),
                         (tf.nn.gelu, rtf.nn.gelu), (tf.nn.elu, rtf.nn.elu), (tf.nn.softplus, rtf.nn.softplus),
                         (tf.nn.log_softmax, rtf.nn.log_softmax)]:
        np.testing.assert_allclose(ours(x).numpy(), theirs(x).numpy(), rtol=1e-5, atol=1e-6)


# ---- where / fill / range ----------------------------------------------------------------------------

def test_where_broadcast():
    c = np.array([[True], [False]])
    x = rnd(2, 3)
    y = rnd(1, 3)
    np.testing.assert_array_equal(tf.where(c, x, y).numpy(), np.where(c, x, y))
    np.testing.assert_array_equal(tf.where(x > 0, x, 0.0).numpy(), np.where(x > 0, x, np.float32(0)))


def test_fill_zeros_ones():
    f = tf.fill([2, 3], 9)
    assert f.dtype == tf.int32
    np.testing.assert_array_equal(f.numpy(), np.full((2, 3), 9, np.int32))
    np.testing.assert_array_equal(tf.fill([2], 1.5).numpy(), np.full(2, 1.5, np.float32))
    for dt in (tf.float32, tf.float64, tf.int32, tf.int64, tf.uint8, tf.bool, tf.float16):
        z, o = tf.zeros([2, 3], dt), tf.ones([3], dt)
        assert z.dtype == dt and o.dtype == dt
        np.testing.assert_array_equal(z.numpy(), np.zeros((2, 3), dt.as_numpy_dtype))
        np.testing.assert_array_equal(o.numpy(), np.ones(3, dt.as_numpy_dtype))
    np.testing.assert_array_equal(tf.zeros([]).numpy(), np.float32(0))
    assert tf.zeros([0, 4]).shape == (0, 4)
    x = rnd(2, 2)
    np.testing.assert_array_equal(tf.ones_like(x).numpy(), np.ones_like(x))
    np.testing.assert_array_equal(tf.zeros_like(tf.constant([1, 2])).numpy(), np.zeros(2, np.int32))


@pytest.mark.parametrize("args,kw", [((5,), {}), ((2, 10, 3), {}), ((10, 2, -2), {}), ((0.0, 1.0, 0.25), {}),
                                     ((5,), {"dtype": tf.float64}), ((3, 3), {}), ((1, 4), {"dtype": tf.int64})],
                         ids=repr)
def test_range(args, kw):
    got = tf.range(*args, **kw).numpy()
    want_dt = kw["dtype"].as_numpy_dtype if "dtype" in kw else (
        np.float32 if any(isinstance(a, float) for a in args) else np.int32)
    want = np.arange(*args, dtype=want_dt)
    assert got.dtype == np.dtype(want_dt)
    np.testing.assert_array_equal(got, want)


# ---- divide ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [np.int32, np.int64, np.uint8], ids=lambda d: np.dtype(d).name)
def test_int_divide_is_float64(dt):
    a = np.array([7, 8, 9, 1], dt)
    b = np.array([2, 3, 4, 3], dt)
    got = tf.divide(a, b)
    assert got.dtype == tf.float64
    np.testing.assert_array_equal(got.numpy(), a / b)
    got2 = tf.constant(a) / tf.constant(b)
    assert got2.dtype == tf.float64
    np.testing.assert_array_equal(got2.numpy(), a.astype(np.float64) / b)


def test_int_divide_by_zero():
    got = (tf.constant([1, 0, -1]) / tf.constant([0, 0, 0])).numpy()
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got, np.array([1.0, 0.0, -1.0]) / 0.0)


def test_divide_vs_tensorflow():
    rtf = pytest.importorskip("tensorflow")
    a, b = np.array([7, -8], np.int32), np.array([2, 3], np.int32)
    r = rtf.divide(a, b)
    assert tf.divide(a, b).dtype.name == r.dtype.name
    np.testing.assert_array_equal(tf.divide(a, b).numpy(), r.numpy())


# ---- random ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [tf.random.normal, tf.random.uniform], ids=["normal", "uniform"])
def test_random_seeded_reproducible(fn):
    a = fn([1000], seed=7).numpy()
    b = fn([1000], seed=7).numpy()
    c = fn([1000], seed=8).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    tf.random.set_seed(42)
    x1, x2 = fn([100]).numpy(), fn([100]).numpy()
    tf.random.set_seed(42)
    y1, y2 = fn([100]).numpy(), fn([100]).numpy()
    np.testing.assert_array_equal(x1, y1)
    np.testing.assert_array_equal(x2, y2)
    assert not np.array_equal(x1, x2)


def test_random_normal_moments():
    n = 1 << 20
    x = tf.random.normal([n], mean=2.0, stddev=3.0, seed=1).numpy().astype(np.float64)
    assert x.dtype == np.float64 and x.shape == (n,)
    # standard error of the mean: 3/sqrt(n) ~ 0.003; of the std: 3/sqrt(2n) ~ 0.002. 6 sigma bounds:
    assert abs(x.mean() - 2.0) < 6 * 3.0 / np.sqrt(n)
    assert abs(x.std() - 3.0) < 6 * 3.0 / np.sqrt(2 * n)
    assert np.isfinite(x).all()


def test_random_uniform_moments_and_bounds():
    n = 1 << 20
    x = tf.random.uniform([n], minval=-1.0, maxval=3.0, seed=3).numpy().astype(np.float64)
    assert x.min() >= -1.0 and x.max() < 3.0
    # uniform on [-1,3): mean 1, std 4/sqrt(12); 6 sigma bounds on the sample mean and std
    sd = 4 / np.sqrt(12)
    assert abs(x.mean() - 1.0) < 6 * sd / np.sqrt(n)
    assert abs(x.std() - sd) < 6 * sd * 0.9 / np.sqrt(n)  # std of a uniform's sample std ~ 0.894*sd/sqrt(n)
    hist, _ = np.histogram(x, bins=8, range=(-1, 3))
    assert np.all(np.abs(hist - n / 8) < 6 * np.sqrt(n / 8))


def test_random_dtypes():
    assert tf.random.normal([3], dtype=tf.float64).dtype == tf.float64
    assert tf.random.uniform([3], dtype=tf.float16).dtype == tf.float16
    t = tf.random.truncated_normal([10000], seed=5).numpy()
    assert np.all(np.abs(t) <= 2.0)


# ---- misc elementwise vs numpy -----------------------------------------------------------------------

def test_elementwise_math():
    x = np.abs(rnd(50)) + 0.1
    pairs = [(tf.exp, np.exp), (tf.math.log, np.log), (tf.sqrt, np.sqrt), (tf.square, np.square),
             (tf.math.rsqrt, lambda v: 1 / np.sqrt(v)), (tf.math.sin, np.sin), (tf.math.cos, np.cos),
             (tf.floor, np.floor), (tf.ceil, np.ceil), (tf.sign, np.sign), (tf.math.reciprocal, np.reciprocal)]
    for ours, ref in pairs:
        np.testing.assert_allclose(ours(x).numpy(), ref(x.astype(np.float64)), rtol=2e-6, err_msg=ours.__name__)
    y = np.array([0.5, 1.5, 2.5, -0.5, -1.5], np.float32)
    np.testing.assert_array_equal(tf.round(y).numpy(), np.round(y))  # banker's rounding, as TF and numpy


def test_maximum_minimum_nan():
    a = np.array([1.0, np.nan, 3.0], np.float32)
    b = np.array([2.0, 1.0, np.nan], np.float32)
    np.testing.assert_array_equal(tf.maximum(a, b).numpy(), np.maximum(a, b))
    np.testing.assert_array_equal(tf.minimum(a, b).numpy(), np.minimum(a, b))


def test_clip_tile_gather_onehot_addn():
    x = rnd(3, 4)
    np.testing.assert_array_equal(tf.clip_by_value(x, -0.5, 0.5).numpy(), np.clip(x, -0.5, 0.5))
    np.testing.assert_array_equal(tf.tile(x, [2, 1]).numpy(), np.tile(x, [2, 1]))
    np.testing.assert_array_equal(tf.gather(x, [2, 0]).numpy(), x[[2, 0]])
    np.testing.assert_array_equal(tf.gather(x, [3, 1], axis=1).numpy(), x[:, [3, 1]])
    np.testing.assert_array_equal(tf.one_hot([0, 2, 1], 3).numpy(), np.eye(3, dtype=np.float32)[[0, 2, 1]])
    np.testing.assert_allclose(tf.add_n([x, x, x]).numpy(), 3 * x, rtol=1e-6)


def test_logical():
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    np.testing.assert_array_equal(tf.logical_and(a, b).numpy(), a & b)
    np.testing.assert_array_equal(tf.logical_or(a, b).numpy(), a | b)
    np.testing.assert_array_equal(tf.logical_not(a).numpy(), ~a)


def test_shape_size_rank():
    x = rnd(2, 3, 4)
    np.testing.assert_array_equal(tf.shape(x).numpy(), [2, 3, 4])
    assert tf.shape(x).dtype == tf.int32
    assert int(tf.size(x)) == 24
    assert int(tf.rank(x)) == 3
