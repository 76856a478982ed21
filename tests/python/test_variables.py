"""tf.Variable: eager reads and assigns, and tf.functions that read the current value at every call."""
import numpy as np
import pytest

import weft as tf


def test_eager_variable():
    init = np.array([1.0, 2.0], np.float32)
    v = tf.Variable(init)
    init[0] = 100  # the variable holds its own copy
    assert v.numpy().tolist() == [1.0, 2.0] and v.dtype == tf.float32 and v.shape == (2,)
    np.testing.assert_array_equal((v * 2).numpy(), [2.0, 4.0])
    v.assign([3.0, 4.0])
    v.assign_add([1.0, 1.0])
    v.assign_sub([0.5, 0.5])
    np.testing.assert_array_equal(np.asarray(v), [3.5, 4.5])
    assert tf.Variable(3).dtype == tf.int32 and tf.Variable(1.5).dtype == tf.float32


def test_function_reads_the_current_value():
    v = tf.Variable(np.ones((2, 2), np.float32))

    @tf.function
    def f(x):
        return tf.matmul(x, v) + v
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    np.testing.assert_allclose(f(x).numpy(), x @ np.ones((2, 2)) + 1)
    w = np.array([[1, 2], [3, 4]], np.float32)
    v.assign(w)
    np.testing.assert_allclose(f(x).numpy(), x @ w + w)  # no retrace needed: the value is an input
    assert f.experimental_get_tracing_count() == 1


def test_bad_assign_and_assign_in_function():
    v = tf.Variable([1.0, 2.0])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"float32\[2\].*float32\[3\]"):
        v.assign([1.0, 2.0, 3.0])

    @tf.function
    def g():
        v.assign([0.0, 0.0])
        return v.read_value()
    with pytest.raises(tf.errors.UnimplementedError, match="inside tf.function"):
        g()
    assert v.numpy().tolist() == [1.0, 2.0]  # unchanged, and still usable
    assert float(tf.reduce_sum(v)) == 3.0
