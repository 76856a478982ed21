"""tf.function: traced graphs against eager results and numpy, tracing counts, structures, devices."""
import numpy as np
import pytest

import weft as tf


def rnd(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_results_equal_eager_and_numpy():
    def f(x, w, b):
        return tf.nn.relu(tf.matmul(x, w) + b), tf.reduce_sum(x * x, axis=1)

    x, w, b = rnd(4, 3), rnd(3, 5, seed=1), rnd(5, seed=2)
    g = tf.function(f)
    (e1, e2), (g1, g2) = f(tf.constant(x), tf.constant(w), tf.constant(b)), g(tf.constant(x), tf.constant(w),
                                                                                tf.constant(b))
    np.testing.assert_allclose(g1.numpy(), e1.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(g2.numpy(), e2.numpy(), rtol=1e-6)
    np.testing.assert_allclose(g1.numpy(), np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g2.numpy(), (x * x).sum(axis=1), rtol=1e-5)


def test_traces_once_per_signature():
    calls = []

    @tf.function
    def f(x):
        calls.append(1)
        return x * 2

    for _ in range(3):
        np.testing.assert_array_equal(f(tf.constant([1.0, 2.0])).numpy(), [2.0, 4.0])
    assert f.experimental_get_tracing_count() == 1
    assert len(calls) == 1
    f(tf.constant([1.0, 2.0, 3.0]))  # new shape
    assert f.experimental_get_tracing_count() == 2
    r = f(tf.constant([1, 2]))  # new dtype
    assert r.dtype == tf.int32
    np.testing.assert_array_equal(r.numpy(), [2, 4])
    assert f.experimental_get_tracing_count() == 3
    f(tf.constant([5.0, 6.0]))  # the first signature again
    assert f.experimental_get_tracing_count() == 3
    assert len(calls) == 3


def test_python_args_in_signature():
    @tf.function
    def f(x, n, mode="add"):
        return x + n if mode == "add" else x * n

    x = tf.constant([1.0, 2.0])
    np.testing.assert_array_equal(f(x, 2).numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(f(x, 3).numpy(), [4.0, 5.0])
    np.testing.assert_array_equal(f(x, 3, mode="mul").numpy(), [3.0, 6.0])
    assert f.experimental_get_tracing_count() == 3
    np.testing.assert_array_equal(f(x, 2).numpy(), [3.0, 4.0])
    assert f.experimental_get_tracing_count() == 3


def test_nested_structures_in_and_out():
    @tf.function
    def f(inputs):
        a, (b, c) = inputs["pair"][0], inputs["pair"][1]
        return {"sum": a + b, "prod": (a * c, [b - c])}

    a, b, c = rnd(3), rnd(3, seed=1), rnd(3, seed=2)
    out = f({"pair": (tf.constant(a), (tf.constant(b), tf.constant(c)))})
    assert set(out) == {"sum", "prod"}
    assert isinstance(out["prod"], tuple) and isinstance(out["prod"][1], list)
    np.testing.assert_allclose(out["sum"].numpy(), a + b, rtol=1e-6)
    np.testing.assert_allclose(out["prod"][0].numpy(), a * c, rtol=1e-6)
    np.testing.assert_allclose(out["prod"][1][0].numpy(), b - c, rtol=1e-6)


def test_numpy_args():
    @tf.function
    def f(x):
        return tf.reduce_mean(x, axis=0)

    x = rnd(5, 2, dtype=np.float64)
    np.testing.assert_allclose(f(x).numpy(), x.mean(axis=0), rtol=1e-12)


def test_captured_eager_tensor():
    w = tf.constant(rnd(3, 2))
    b = tf.constant(np.array([10.0, 20.0], np.float32))

    @tf.function
    def f(x):
        return tf.matmul(x, w) + b

    x = rnd(4, 3, seed=5)
    np.testing.assert_allclose(f(x).numpy(), x @ w.numpy() + b.numpy(), rtol=1e-5, atol=1e-5)


def test_device_inside_function():
    @tf.function
    def f(x):
        with tf.device("/CPU:0"):
            y = x * 3.0
        return y + 1.0

    r = f(tf.constant([1.0, 2.0]))
    np.testing.assert_array_equal(r.numpy(), [4.0, 7.0])
    assert r.device.endswith("CPU:0")


def test_jit_compile_same_results():
    def f(x, y):
        return tf.tanh(x * y + 1.0) - tf.sigmoid(y) * 2.0

    x, y = rnd(64, 33), rnd(64, 33, seed=3)
    ref = np.tanh(x.astype(np.float64) * y + 1) - 2 / (1 + np.exp(-y.astype(np.float64)))
    for jit in (True, False, None):
        g = tf.function(f, jit_compile=jit)
        np.testing.assert_allclose(g(x, y).numpy(), ref, rtol=1e-5, atol=1e-6, err_msg="jit=%r" % jit)


def test_input_signature():
    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    def f(x):
        return x * 2.0

    for n in (1, 3, 5):
        x = rnd(n, 2)
        np.testing.assert_allclose(f(x).numpy(), x * 2)
    assert f.experimental_get_tracing_count() == 1


def test_nested_function_inlined():
    @tf.function
    def inner(x):
        return x + 1

    @tf.function
    def outer(x):
        return inner(x) * 2

    np.testing.assert_array_equal(outer(tf.constant([1, 2])).numpy(), [4, 6])


def test_method_decorated():
    class M:
        def __init__(self):
            self.k = tf.constant(3.0)

        @tf.function
        def __call__(self, x):
            return x * self.k

    np.testing.assert_array_equal(M()(tf.constant([1.0, 2.0])).numpy(), [3.0, 6.0])


def test_data_dependent_control_flow_raises():
    @tf.function
    def f(x):
        if tf.reduce_sum(x) > 0:
            return x
        return -x

    with pytest.raises(TypeError, match="tf.function"):
        f(tf.constant([1.0]))
    # after the error the interpreter and ops still work
    np.testing.assert_array_equal((tf.constant([1.0]) + 1).numpy(), [2.0])


def test_numpy_inside_function_raises():
    @tf.function
    def f(x):
        return x.numpy()

    with pytest.raises(tf.errors.FailedPreconditionError):
        f(tf.constant([1.0]))


def test_getitem_and_random_inside_function():
    @tf.function
    def f(x):
        return x[1:, ::-1], tf.shape(x)

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a, s = f(x)
    np.testing.assert_array_equal(a.numpy(), x[1:, ::-1])
    np.testing.assert_array_equal(s.numpy(), [3, 4])


def test_function_vs_tensorflow():
    rtf = pytest.importorskip("tensorflow")

    def f(m, x):
        return m.nn.softmax(m.matmul(x, x, transpose_b=True) / 4.0)

    x = rnd(5, 4)
    np.testing.assert_allclose(tf.function(lambda v: f(tf, v))(x).numpy(),
                               rtf.function(lambda v: f(rtf, v))(x).numpy(), rtol=1e-5, atol=1e-6)


def test_method_traces_once_per_instance():
    import gc
    import weakref
    traces = []

    class M:
        def __init__(self, k):
            self.k = tf.constant(k)

        @tf.function
        def f(self, x):
            traces.append(1)
            return x * self.k

    a, b = M(2.0), M(3.0)
    for _ in range(3):
        np.testing.assert_array_equal(a.f(tf.constant([1.0])).numpy(), [2.0])
        np.testing.assert_array_equal(b.f(tf.constant([1.0])).numpy(), [3.0])
    assert len(traces) == 2  # once per instance
    r = weakref.ref(a)
    del a
    gc.collect()
    assert r() is None  # the per-instance cache does not keep the instance alive


def test_random_inside_function_draws_per_call():
    # TensorFlow draws anew at every call of a function; so does weft (StatelessRandomUniform keyed by a
    # per-call counter the function feeds itself; normals by Box-Muller over two uniforms)
    f = tf.function(lambda x: x + tf.random.normal([64]))
    a = f(tf.zeros([64])).numpy()
    b = f(tf.zeros([64])).numpy()
    assert not np.array_equal(a, b)
    assert f.experimental_get_tracing_count() == 1


def test_random_inside_function_has_the_right_distribution():
    n = 200000
    g = tf.function(lambda: (tf.random.normal([n], mean=1.0, stddev=2.0), tf.random.uniform([n], -1.0, 3.0)))
    z, u = [t.numpy().astype(np.float64) for t in g()]
    # 6-sigma bounds for the sample mean and standard deviation of n draws
    assert abs(z.mean() - 1.0) < 6 * 2.0 / np.sqrt(n)
    assert abs(z.std() - 2.0) < 6 * 2.0 / np.sqrt(2 * n)
    assert abs(np.mean(np.abs(z - 1.0) < 2.0) - 0.6827) < 0.01  # the normal's one-sigma mass
    assert u.min() >= -1.0 and u.max() < 3.0
    assert abs(u.mean() - 1.0) < 6 * (4 / np.sqrt(12)) / np.sqrt(n)
    z2 = g()[0].numpy()
    assert not np.array_equal(z2, z.astype(np.float32))
    with pytest.raises(tf.errors.UnimplementedError, match="truncated_normal"):
        tf.function(lambda: tf.random.truncated_normal([3]))()


def test_threads_share_eager_plans_and_functions():
    """Eager ops and one traced function from 4 Python threads at once (ctypes releases the GIL, so the
    runs overlap in weft): every result is right."""
    import threading
    f = tf.function(lambda a, b: tf.matmul(a, b) + 1.0)
    errors_seen = []

    def work(k):
        try:
            rng = np.random.RandomState(k)
            for _ in range(50):
                a = rng.rand(8, 8).astype(np.float32)
                b = rng.rand(8, 8).astype(np.float32)
                np.testing.assert_allclose(tf.matmul(a, b).numpy(), a @ b, rtol=1e-5, atol=1e-5)
                np.testing.assert_allclose(f(tf.constant(a), tf.constant(b)).numpy(), a @ b + 1, rtol=1e-5, atol=1e-5)
                x = tf.constant(a)
                np.testing.assert_allclose((x + x).numpy(), a + a)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors_seen.append(e)
    ths = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    assert not errors_seen, errors_seen[0]
    assert f.experimental_get_tracing_count() == 1
