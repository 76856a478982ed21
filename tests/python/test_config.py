"""tf.config and tf.device: soft placement, the placement log, strict placement, thread pools."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import weft as tf

HAS_GPU = bool(tf.config.list_physical_devices("GPU"))
needs_no_gpu = pytest.mark.skipif(HAS_GPU, reason="the fallback needs a machine without a GPU")


@pytest.fixture
def soft_placement_restored():
    saved = tf.config.get_soft_device_placement()
    yield
    tf.config.set_soft_device_placement(saved)
    tf.debugging.set_log_device_placement(False)


def test_list_devices():
    cpus = tf.config.list_physical_devices("CPU")
    assert len(cpus) >= 1
    assert cpus[0].name == "/physical_device:CPU:0"
    assert cpus[0].device_type == "CPU"
    logical = tf.config.list_logical_devices("CPU")
    assert logical[0].name == "/job:localhost/replica:0/task:0/device:CPU:0"


@needs_no_gpu
def test_soft_placement_gpu_falls_back_and_logs(capfd, soft_placement_restored):
    tf.debugging.set_log_device_placement(True)
    with tf.device("/GPU:0"):
        r = tf.constant([1.0, 2.0]) * 3.0 + 1.0
    np.testing.assert_array_equal(r.numpy(), [4.0, 7.0])
    assert r.device == "/job:localhost/replica:0/task:0/device:CPU:0"
    err = capfd.readouterr().err
    assert "soft placement" in err
    assert "GPU" in err


@needs_no_gpu
def test_soft_placement_in_function_logs(capfd, soft_placement_restored):
    tf.debugging.set_log_device_placement(True)

    @tf.function
    def f(x):
        with tf.device("/GPU:0"):
            return tf.nn.relu(x - 1.0)

    np.testing.assert_array_equal(f(tf.constant([0.0, 3.0])).numpy(), [0.0, 2.0])
    err = capfd.readouterr().err
    assert "GPU" in err


@needs_no_gpu
def test_strict_placement_raises_naming_device(soft_placement_restored):
    tf.config.set_soft_device_placement(False)
    assert tf.config.get_soft_device_placement() is False
    with pytest.raises(tf.errors.InvalidArgumentError, match="GPU:0"):
        with tf.device("/GPU:0"):
            tf.constant([1.0, 2.0]) * 3.0
    tf.config.set_soft_device_placement(True)
    with tf.device("/GPU:0"):  # back on: runs on the CPU again
        np.testing.assert_array_equal((tf.constant([1.0]) * 3.0).numpy(), [3.0])
    np.testing.assert_array_equal((tf.constant([1, 2]) + 1).numpy(), [2, 3])


@needs_no_gpu
def test_strict_placement_in_function(soft_placement_restored):
    tf.config.set_soft_device_placement(False)

    @tf.function
    def f(x):
        with tf.device("/GPU:0"):
            return x * 2.0

    with pytest.raises(tf.errors.InvalidArgumentError, match="GPU"):
        f(tf.constant([1.0]))
    tf.config.set_soft_device_placement(True)
    np.testing.assert_array_equal(f(tf.constant([1.0])).numpy(), [2.0])


def test_cpu_scope_and_nested_scopes():
    with tf.device("/CPU:0"):
        with tf.device(None):
            r = tf.constant([2]) * 2
        with tf.device("/job:localhost/replica:0/task:0/device:CPU:0"):
            s = tf.constant([2]) + 2
    assert r.device.endswith("CPU:0") and s.device.endswith("CPU:0")
    np.testing.assert_array_equal(r.numpy(), [4])
    np.testing.assert_array_equal(s.numpy(), [4])


@pytest.mark.parametrize("spec", ["/device:GPU:x", "/job:", "GPU:-1", "/device:CPU:0:0"])
def test_malformed_device_spec(spec):
    with pytest.raises(tf.errors.InvalidArgumentError, match="device spec"):
        with tf.device(spec):
            pass
    np.testing.assert_array_equal((tf.constant([1.0]) + 1.0).numpy(), [2.0])


def test_device_non_string_raises():
    with pytest.raises((TypeError, tf.errors.InvalidArgumentError)):
        tf.device(3)


def _run(code):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..",
                                                                                   "python")),
                                                     env.get("PYTHONPATH", "")] if p)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=120)


def test_thread_pools_before_context_subprocess():
    r = _run("""
        import weft as tf
        tf.config.threading.set_inter_op_parallelism_threads(2)
        tf.config.threading.set_intra_op_parallelism_threads(3)
        assert tf.config.threading.get_inter_op_parallelism_threads() == 2
        assert tf.config.threading.get_intra_op_parallelism_threads() == 3
        x = tf.constant([1.0, 2.0]) * 2.0
        assert x.numpy().tolist() == [2.0, 4.0]
        for setter in (tf.config.threading.set_inter_op_parallelism_threads,
                       tf.config.threading.set_intra_op_parallelism_threads):
            try:
                setter(4)
            except RuntimeError as e:
                assert "initialization" in str(e), e
            else:
                raise SystemExit("no RuntimeError after the context exists")
        assert tf.config.threading.get_intra_op_parallelism_threads() == 3
        print("OK")
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "OK"


def test_jit_toggle():
    x = np.linspace(-2, 2, 40, dtype=np.float32)
    f = tf.function(lambda v: tf.tanh(v) * 2.0 + 1.0)
    tf.config.optimizer.set_jit(False)
    assert tf.config.optimizer.get_jit() is False
    a = f(x).numpy()
    tf.config.optimizer.set_jit(True)
    b = f(x).numpy()
    np.testing.assert_allclose(a, np.tanh(x.astype(np.float64)) * 2 + 1, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6)


def test_memory_info_cpu():
    info = tf.config.experimental.get_memory_info("CPU:0")
    assert set(info) == {"current", "peak"}
    assert info["peak"] >= info["current"] >= 0
