"""Errors: weft's status codes as TensorFlow's exception classes, with weft's messages; recovery after."""
import numpy as np
import pytest

import weft as tf


def still_works():
    np.testing.assert_array_equal((tf.constant([1.0, 2.0]) * 2.0).numpy(), [2.0, 4.0])


def test_matmul_wrong_dtypes():
    with pytest.raises(tf.errors.InvalidArgumentError, match="MatMul") as ei:
        tf.matmul(tf.constant([[1.0]]), tf.constant([[1]]))
    assert "dtype" in str(ei.value)
    assert isinstance(ei.value, ValueError)
    assert ei.value.error_code == tf.errors.InvalidArgumentError.code
    still_works()


def test_matmul_wrong_shapes():
    with pytest.raises(tf.errors.InvalidArgumentError, match="MatMul") as ei:
        tf.matmul(tf.zeros([2, 3]), tf.zeros([4, 5]))
    assert "3" in str(ei.value) and "4" in str(ei.value)
    still_works()


def test_add_incompatible_broadcast():
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.add(tf.zeros([2, 3]), tf.zeros([4]))
    still_works()


def test_unknown_raw_op():
    with pytest.raises(tf.errors.NotFoundError, match="NoSuchOp"):
        tf.raw_ops.NoSuchOp(tf.constant(1.0))
    still_works()


def test_raw_op_known():
    np.testing.assert_array_equal(tf.raw_ops.Add(tf.constant([1, 2]), tf.constant([3, 4])).numpy(), [4, 6])


def test_missing_tf_function():
    with pytest.raises(tf.errors.UnimplementedError, match="tf.linalg.svd") as ei:
        tf.linalg.svd(tf.constant([[1.0, 2.0], [3.0, 4.0]]))
    assert isinstance(ei.value, NotImplementedError)
    with pytest.raises(NotImplementedError, match="tf.signal.fft"):
        tf.signal.fft(tf.constant([1.0]))
    still_works()


def test_missing_op_inside_function():
    @tf.function
    def f(x):
        return tf.linalg.svd(x * 2.0)

    with pytest.raises(tf.errors.UnimplementedError, match="tf.linalg.svd"):
        f(tf.constant([[1.0]]))

    @tf.function
    def g(x):
        return tf.raw_ops.NoSuchOp(x)

    with pytest.raises(tf.errors.NotFoundError, match="NoSuchOp"):
        g(tf.constant([1.0]))
    still_works()


def test_error_inside_function_shape():
    @tf.function
    def f(a, b):
        return tf.matmul(a, b)

    with pytest.raises(tf.errors.InvalidArgumentError, match="MatMul"):
        f(tf.zeros([2, 3]), tf.zeros([4, 5]))
    np.testing.assert_array_equal(f(tf.ones([2, 3]), tf.ones([3, 1])).numpy(), np.full((2, 1), 3.0))


def test_malformed_device():
    with pytest.raises(tf.errors.InvalidArgumentError, match="GPU:x"):
        with tf.device("/device:GPU:x"):
            tf.constant(1.0) + 1.0
    still_works()


def test_reshape_bad_size():
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.reshape(tf.zeros([6]), [4, -1])
    still_works()


def test_unsupported_dtype_message():
    with pytest.raises(TypeError, match="complex"):
        tf.constant(np.zeros(2, np.complex64))
    still_works()


def test_convert_to_tensor_dtype_mismatch():
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.convert_to_tensor(tf.constant([1.0]), dtype=tf.int32)


def test_error_classes_hierarchy():
    assert issubclass(tf.errors.NotFoundError, tf.errors.OpError)
    assert issubclass(tf.errors.ResourceExhaustedError, MemoryError)
    e = tf.errors.InvalidArgumentError(None, None, "bad thing")
    assert str(e) == "bad thing" and e.message == "bad thing"


def test_read_missing_file(tmp_path):
    with pytest.raises((tf.errors.NotFoundError, OSError)):
        tf.io.read_file(str(tmp_path / "nope.bin"))
    still_works()


def test_many_errors_no_leak_of_state():
    for _ in range(50):
        with pytest.raises(tf.errors.InvalidArgumentError):
            tf.matmul(tf.zeros([2, 3]), tf.zeros([4, 5]))
    still_works()


def test_out_of_memory_is_resource_exhausted_and_recoverable():
    """A device memory cap (tf.config.set_logical_device_configuration with memory_limit in MB, weft's
    wf_context_set_memory_limit) turns an op too big for it into ResourceExhaustedError naming the
    device and size; small ops still run, and lifting the cap lets the big one through. In a
    subprocess: the cap belongs to the process's context."""
    import subprocess
    import sys
    code = r'''
import numpy as np, weft as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration(memory_limit=1)])
x = tf.constant(np.ones((1024, 1024), np.float32))
try:
    tf.matmul(x, x)
    print("NO ERROR")
except tf.errors.ResourceExhaustedError as e:
    assert isinstance(e, MemoryError)
    print("OOM", e)
print("SMALL", float(tf.reduce_sum(tf.constant([1.0, 2.0]))))
tf.config.experimental.set_memory_limit(cpu, 0)
print("BIG", float(tf.matmul(x, x)[0, 0]))
'''
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = p.stdout.splitlines()
    oom = next(l for l in lines if l.startswith(("OOM", "NO ERROR")))
    assert oom.startswith("OOM") and "CPU:0" in oom, oom
    assert "SMALL 3.0" in lines and "BIG 1024.0" in lines, lines


def test_interpreter_exits_cleanly_with_everything_alive(tmp_path):
    """Objects of every kind still alive at exit (a dataset mid-iteration with its map threads running, a
    compiled model, traced functions, lent numpy arrays, a loaded SavedModel, a variable) must not crash or
    hang the interpreter's shutdown."""
    import subprocess
    import sys
    code = r'''
import numpy as np, weft as tf
arr = np.arange(4096, dtype=np.float32).reshape(64, 64)
t = tf.convert_to_tensor(arr)
ds = tf.data.Dataset.from_tensor_slices(arr).map(lambda r: r * 2.0, num_parallel_calls=2).batch(4).prefetch(2)
it = iter(ds)
first = next(it)
m = tf.keras.Sequential([tf.keras.layers.Dense(3, activation="softmax", input_shape=(64,))])
m.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
m.fit(arr, np.zeros(64, np.int64), epochs=1, verbose=0)
f = tf.function(lambda x: tf.reduce_sum(x * 2.0))
f(t)
v = tf.Variable([1.0, 2.0])
tf.saved_model.save(m, %r)
loaded = tf.saved_model.load(%r)
loaded(arr[:2])
print("READY", float(first[0, 1]))
''' % (str(tmp_path / "sm"), str(tmp_path / "sm"))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "READY 2.0" in p.stdout
