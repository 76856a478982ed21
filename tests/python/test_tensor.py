"""Tensors: construction, numpy/dlpack exchange without copies, lifetime, attributes, operators, indexing."""
import gc
import operator
import os

import numpy as np
import pytest

import weft as tf
from conftest import BF16

DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_]
if BF16 is not None:
    DTYPES.append(BF16)


def test_constant_python_defaults():
    # TensorFlow's defaults: Python float -> float32, int -> int32, bool -> bool
    assert tf.constant(1.5).dtype == tf.float32
    assert tf.constant(3).dtype == tf.int32
    assert tf.constant(True).dtype == tf.bool
    assert tf.constant([1, 2, 3]).dtype == tf.int32
    assert tf.constant([[1.0, 2.0]]).dtype == tf.float32
    np.testing.assert_array_equal(tf.constant([[1, 2], [3, 4]]).numpy(), np.array([[1, 2], [3, 4]], np.int32))
    # numpy arrays keep their dtype
    assert tf.constant(np.zeros(3)).dtype == tf.float64
    assert tf.constant(np.zeros(3, np.int64)).dtype == tf.int64


def test_constant_rank0():
    t = tf.constant(2.5)
    assert t.shape == ()
    assert t.ndim == 0
    assert float(t) == 2.5
    assert t.numpy().shape == ()


def test_constant_with_dtype_and_shape():
    t = tf.constant(7, dtype=tf.float64, shape=[2, 3])
    np.testing.assert_array_equal(t.numpy(), np.full((2, 3), 7.0))
    assert t.dtype == tf.float64
    r = tf.constant([1, 2, 3, 4, 5, 6], shape=[3, 2])
    np.testing.assert_array_equal(r.numpy(), np.arange(1, 7).reshape(3, 2))


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_numpy_in_no_copy(dt):
    arr = (np.arange(12) % 5).astype(dt).reshape(3, 4)
    t = tf.convert_to_tensor(arr)
    assert t.data_ptr() == arr.ctypes.data
    assert t.dtype == tf.as_dtype(np.dtype(dt))
    assert t.shape == (3, 4)
    out = t.numpy()
    assert out.ctypes.data == t.data_ptr()
    assert out.dtype == np.dtype(dt)
    np.testing.assert_array_equal(out, arr)


def test_numpy_out_no_copy_op_result():
    t = tf.add(tf.constant([1.0, 2.0]), tf.constant([3.0, 4.0]))
    a = t.numpy()
    assert a.ctypes.data == t.data_ptr()
    np.testing.assert_array_equal(a, [4.0, 6.0])


def test_non_contiguous_is_copied_correctly():
    arr = np.arange(20, dtype=np.float32).reshape(4, 5)[:, ::2]
    t = tf.convert_to_tensor(arr)
    np.testing.assert_array_equal(t.numpy(), arr)


def test_lifetime_source_array_deleted():
    arr = np.arange(1000, dtype=np.float64) * 1.5
    expect = arr.copy()
    t = tf.convert_to_tensor(arr)
    del arr
    gc.collect()
    _ = [np.ones(1000) for _ in range(50)]  # churn the allocator
    np.testing.assert_array_equal(t.numpy(), expect)
    np.testing.assert_array_equal((t + 0.0).numpy(), expect)


def test_lifetime_tensor_deleted_view_alive():
    t = tf.multiply(tf.constant(np.arange(1000, dtype=np.float32)), 2.0)
    view = t.numpy()
    del t
    gc.collect()
    _ = [tf.ones([1000]) for _ in range(20)]
    np.testing.assert_array_equal(view, np.arange(1000, dtype=np.float32) * 2)


def test_lifetime_lent_array_view_chain():
    arr = np.arange(10, dtype=np.int64)
    t = tf.convert_to_tensor(arr)
    view = t.numpy()
    del arr, t
    gc.collect()
    np.testing.assert_array_equal(view, np.arange(10))


def test_dlpack_numpy():
    t = tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    a = np.from_dlpack(t)
    assert a.ctypes.data == t.data_ptr()
    np.testing.assert_array_equal(a, np.arange(6).reshape(2, 3))
    assert t.__dlpack_device__() == (1, 0)
    back = tf.experimental.dlpack.from_dlpack(a)
    assert back.data_ptr() == a.ctypes.data


TORCH_CHECK = r"""
import numpy as np, torch, weft as tf
t = tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
tt = torch.from_dlpack(t)
assert tt.data_ptr() == t.data_ptr()
np.testing.assert_array_equal(tt.numpy(), t.numpy())
src = torch.arange(8, dtype=torch.float64)
w = tf.experimental.dlpack.from_dlpack(src)
assert w.data_ptr() == src.data_ptr()
np.testing.assert_array_equal(w.numpy(), np.arange(8.0))
print("DLPACK OK")
"""


def test_dlpack_torch(tmp_path):
    try:
        import torch  # noqa: F401
    except ImportError:
        # Debian's PyTorch lives in the system Python (python3-torch), not in a venv: check there, with
        # this weft package on its path
        import subprocess
        sysp = "/usr/bin/python3"
        if not os.path.exists(sysp) or subprocess.run([sysp, "-c", "import torch"], capture_output=True).returncode:
            pytest.skip("PyTorch is neither in this Python nor in /usr/bin/python3 (Debian's python3-torch)")
        # only the weft package on the path (a link to it), not this venv's site-packages and its numpy
        os.symlink(os.path.dirname(os.path.abspath(tf.__file__)), tmp_path / "weft")
        env = dict(os.environ, PYTHONPATH=str(tmp_path))
        env.setdefault("WEFT_LIBRARY", tf._lib.LIB_PATH)
        p = subprocess.run([sysp, "-c", TORCH_CHECK], capture_output=True, text=True, env=env, timeout=300)
        assert p.returncode == 0 and "DLPACK OK" in p.stdout, p.stderr[-2000:]
        return
    exec(TORCH_CHECK, {})


def test_shape_dtype_device():
    t = tf.zeros([2, 0, 3], dtype=tf.int64)
    assert t.shape == (2, 0, 3)
    assert t.shape.as_list() == [2, 0, 3]
    assert t.shape.num_elements() == 0
    assert t.dtype == tf.int64
    assert t.device == "/job:localhost/replica:0/task:0/device:CPU:0"
    assert (t + 1).device == "/job:localhost/replica:0/task:0/device:CPU:0"
    assert t.numpy().shape == (2, 0, 3)


BINOPS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.pow]


@pytest.mark.parametrize("op", BINOPS, ids=lambda o: o.__name__)
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16], ids=lambda d: np.dtype(d).name)
def test_binary_operators_float_broadcast(op, dt):
    rng = np.random.default_rng(0)
    a = (rng.random((3, 1, 4)) + 0.5).astype(dt)
    b = (rng.random((5, 1)) + 0.5).astype(dt)
    got = op(tf.constant(a), tf.constant(b)).numpy()
    want = op(a, b)
    assert got.dtype == np.dtype(dt)
    assert got.shape == want.shape
    tol = 2e-3 if dt == np.float16 else 1e-6
    np.testing.assert_allclose(got, want, rtol=tol)


@pytest.mark.parametrize("dt", [np.int32, np.int64, np.uint8], ids=lambda d: np.dtype(d).name)
def test_integer_operators(dt):
    a = np.array([[1, 2, 3], [4, 5, 6]], dt)
    b = np.array([2, 1, 3], dt)
    for op in (operator.add, operator.mul):
        got = op(tf.constant(a), tf.constant(b)).numpy()
        assert got.dtype == np.dtype(dt)
        np.testing.assert_array_equal(got, op(a, b))
    got = (tf.constant(a) - tf.constant(np.array([1, 1, 1], dt))).numpy()
    np.testing.assert_array_equal(got, a - 1)


def test_bf16_operators():
    if BF16 is None:
        pytest.skip("ml_dtypes missing")
    a = np.array([1.5, 2.25, -3.0], BF16)
    t = tf.constant(a)
    assert t.dtype == tf.bfloat16
    got = (t * 2 + 1).numpy()
    assert got.dtype == BF16
    np.testing.assert_array_equal(got.astype(np.float32), a.astype(np.float32) * 2 + 1)


def test_python_scalar_takes_tensor_dtype():
    t = tf.constant(np.array([1, 2, 3], np.int64))
    assert (t + 1).dtype == tf.int64
    assert (2 * t).dtype == tf.int64
    h = tf.constant(np.array([1.0, 2.0], np.float16))
    assert (h * 0.5).dtype == tf.float16
    assert (1.0 - h).dtype == tf.float16
    np.testing.assert_array_equal((1.0 - h).numpy(), np.array([0.0, -1.0], np.float16))
    d = tf.constant(np.array([1.0, 4.0]))
    np.testing.assert_array_equal((2.0 / d).numpy(), [2.0, 0.5])
    assert (d ** 2).dtype == tf.float64


def test_unary_and_matmul_operators():
    a = np.array([[1.0, -2.0], [3.0, 4.0]], np.float32)
    t = tf.constant(a)
    np.testing.assert_array_equal((-t).numpy(), -a)
    np.testing.assert_array_equal(abs(t).numpy(), np.abs(a))
    np.testing.assert_allclose((t @ t).numpy(), a @ a)
    np.testing.assert_allclose((a @ t).numpy(), a @ a)


@pytest.mark.parametrize("op", [operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne],
                         ids=lambda o: o.__name__)
def test_comparisons(op):
    a = np.array([1.0, 2.0, np.nan, 4.0], np.float32)
    b = np.array([2.0, 2.0, 1.0, np.nan], np.float32)
    got = op(tf.constant(a), tf.constant(b)).numpy()
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, op(a, b))
    # python scalar on the right
    np.testing.assert_array_equal(op(tf.constant(a), 2.0).numpy(), op(a, np.float32(2.0)))


def test_nan_inf_propagation():
    a = np.array([np.nan, np.inf, -np.inf, 1.0, 0.0], np.float32)
    t = tf.constant(a)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal((t + 1).numpy(), a + 1)
        np.testing.assert_array_equal((t * 0).numpy(), a * 0)
        np.testing.assert_array_equal((1.0 / t).numpy(), np.float32(1) / a)
        # exp/sqrt are within an ulp or two of numpy's; assert_allclose treats NaN==NaN and inf==inf
        np.testing.assert_allclose(tf.exp(t).numpy(), np.exp(a), rtol=1e-6)
        np.testing.assert_allclose(tf.sqrt(t).numpy(), np.sqrt(a), rtol=1e-6)
        assert np.isnan(tf.reduce_sum(t).numpy())
        np.testing.assert_array_equal(tf.reduce_max(tf.constant(a[1:])).numpy(), np.inf)


def test_empty_tensor_ops():
    a = np.zeros((0, 3), np.float32)
    t = tf.constant(a)
    r = (t + 1.0).numpy()
    assert r.shape == (0, 3)
    s = tf.reduce_sum(t, axis=0).numpy()
    np.testing.assert_array_equal(s, np.zeros(3, np.float32))
    assert tf.reduce_sum(t).numpy() == 0.0
    m = tf.matmul(tf.zeros([2, 0]), tf.zeros([0, 3])).numpy()
    np.testing.assert_array_equal(m, np.zeros((2, 3)))


def test_large_tensor():
    n = 1 << 20
    a = np.arange(n, dtype=np.float32) / n
    t = tf.constant(a)
    got = (t * 2.0 + 1.0).numpy()
    np.testing.assert_allclose(got, a * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(tf.reduce_sum(t).numpy(), a.astype(np.float64).sum(), rtol=1e-4)


# ---- indexing ----------------------------------------------------------------------------------------

X = np.arange(2 * 3 * 4, dtype=np.int32).reshape(2, 3, 4)


@pytest.mark.parametrize("key", [
    0, -1, 1, (1, 2), (-1, -1, -1), slice(None), slice(1, None), slice(None, None, -1),
    (slice(None), slice(None, None, 2)), (slice(None), slice(None, None, -2), slice(1, 3)),
    (Ellipsis, 1), (0, Ellipsis), (Ellipsis,), None, (None, 0), (slice(None), None, 1), (Ellipsis, None),
    (0, slice(2, 0, -1), slice(-3, None)), (slice(5, 10),), (slice(-10, 1),), (slice(None, None, 3),),
], ids=repr)
def test_getitem_matches_numpy(key):
    got = tf.constant(X)[key].numpy()
    want = X[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_getitem_rank0_and_scalar_result():
    t = tf.constant([10, 20, 30])
    assert int(t[1]) == 20
    assert t[-1].shape == ()
    assert int(t[-1]) == 30


@pytest.mark.parametrize("key", [2, -3, (0, 3), (0, 0, 4), (0, 0, -5), (0, 0, 0, 0)], ids=repr)
def test_getitem_out_of_range(key):
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.constant(X)[key]
    assert int(tf.constant(X)[1, 2, 3]) == X[1, 2, 3]


def test_iter_len_bool():
    t = tf.constant([[1, 2], [3, 4]])
    assert len(t) == 2
    rows = [r.numpy().tolist() for r in t]
    assert rows == [[1, 2], [3, 4]]
    assert bool(tf.constant(True)) is True
    assert int(tf.constant(7)) == 7


@pytest.mark.parametrize("dt", [np.int32, np.int64, np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_mod_floordiv_python_semantics(dt):
    a = np.array([7, -7, 7, -7, 0, 9], dt)
    b = np.array([2, 2, -2, -2, 3, 3], dt)
    if np.dtype(dt).kind == "f":
        a = a + np.array([0.5, -0.5, 0.25, 0, 0, 0], dt)
    ta, tb = tf.constant(a), tf.constant(b)
    np.testing.assert_array_equal((ta % tb).numpy(), a % b)
    np.testing.assert_array_equal((ta // tb).numpy(), a // b)
    np.testing.assert_array_equal((ta % 3).numpy(), a % dt(3))
    np.testing.assert_array_equal((10 // tb).numpy(), dt(10) // b)
    assert (ta % tb).dtype == tf.as_dtype(np.dtype(dt))


def test_mod_floordiv_vs_tensorflow():
    rtf = pytest.importorskip("tensorflow")
    f = np.array([7.5, -7.5, np.inf, -3.0], np.float32)
    g = np.array([2.0, 2.0, -2.0, 0.0], np.float32)
    np.testing.assert_array_equal(tf.math.floordiv(f, g).numpy(), rtf.math.floordiv(f, g).numpy())
    np.testing.assert_array_equal(tf.math.floormod(f[:3], g[:3]).numpy(), rtf.math.floormod(f[:3], g[:3]).numpy())


def test_bool_operators():
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    ta, tb = tf.constant(a), tf.constant(b)
    np.testing.assert_array_equal((ta & tb).numpy(), a & b)
    np.testing.assert_array_equal((ta | tb).numpy(), a | b)
    np.testing.assert_array_equal((ta ^ tb).numpy(), a ^ b)
    np.testing.assert_array_equal((~ta).numpy(), ~a)


def test_rpow():
    np.testing.assert_array_equal((2.0 ** tf.constant([1.0, 3.0])).numpy(), [2.0, 8.0])


def test_string_tensors():
    s = tf.constant(b"hello")
    assert s.dtype == tf.string and s.shape == ()
    assert s.numpy() == b"hello"
    v = tf.constant(["a", "bc", ""])
    assert v.shape == (3,)
    assert v.numpy().tolist() == [b"a", b"bc", b""]
    assert v[1].numpy() == b"bc"


def test_without_ml_dtypes_subprocess():
    """Without ml_dtypes weft has no numpy bfloat16: float64 results must still read back as float64
    (on numpy < 2, np.dtype('<f8') == None is True, which once sent them down the bfloat16 path), and a
    bfloat16 tensor reads back as float32 values."""
    import os
    import subprocess
    import sys
    code = "\n".join([
        "import sys; sys.modules['ml_dtypes'] = None",
        "import numpy as np, weft as tf",
        "a = tf.constant(np.arange(8.0))",
        "assert a.numpy().dtype == np.float64 and a.numpy().tolist() == list(map(float, range(8))), a.numpy()",
        "b = tf.cast(tf.constant([1.5, -2.0, 3.0]), tf.bfloat16)",
        "assert b.numpy().dtype == np.float32 and b.numpy().tolist() == [1.5, -2.0, 3.0], b.numpy()",
        "print('OK')"])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..",
                                                                      "python")), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "OK"
