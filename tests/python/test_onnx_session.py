"""weft.onnx.InferenceSession against ONNX Runtime: same models, same seeded feeds, outputs compared.

Needs numpy, onnx and onnxruntime (a missing one is a skip with the reason) and the weft package
(WEFT_LIBRARY or an installed one). Small models are built here with onnx.helper, so nothing depends on
the build tree; the PyTorch-exported models (tests/models/export_models.py, written to build/models)
and ONNX's backend node tests (tests/onnx/gen_node_tests.py, written to build/onnx-node-tests) are used
when present: WEFT_TEST_MODELS / WEFT_TEST_NODE_TESTS name them, else build/ beside this checkout.

Tolerances. f32: |weft - ort| <= RTOL * |ort| + ATOL * max(1, max |ort|). Both run float32 with
different summation orders (blocked GEMMs, fused epilogues, vectorised reductions); a dot product of K
terms then differs by about sqrt(K) * eps(f32) times the magnitude of its terms, which is the scale of
the output rather than of each element, hence an absolute term scaled by the output's largest value.
1e-5 is ~80 ulps at that scale (ResNet-18 measures 1.05e-5 on outputs up to 13.3, i.e. 8e-7 of the
scale) and 1e-4 relative covers elements near the scale. Integer and bool outputs must be equal.
"""
import os
import threading
import warnings
from pathlib import Path

import sys

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: weft is compared against it")
onnx = pytest.importorskip("onnx", reason="onnx is not installed: the test models are built with onnx.helper")
from onnx import TensorProto as TP, helper, numpy_helper  # noqa: E402

import weft  # noqa: E402,F401
import weft.onnx as wonnx  # noqa: E402
from weft import errors  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5
REPO = Path(__file__).resolve().parents[2]
MODELS = Path(os.environ.get("WEFT_TEST_MODELS", REPO / "build" / "models"))
NODE_TESTS = Path(os.environ.get("WEFT_TEST_NODE_TESTS", REPO / "build" / "onnx-node-tests"))


# ---- helpers ----------------------------------------------------------------------------------------

def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def make_model(nodes, inputs, outputs, inits=(), opset=13, ir=8, **kw):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], **kw)
    m.ir_version = ir
    onnx.checker.check_model(m)
    return m


def save(model, tmp_path, name="model.onnx"):
    p = tmp_path / name
    onnx.save(model, str(p))
    return str(p)


def ort_session(path):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def assert_close(got, want, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, "%s: dtype %s, ORT %s" % (what, got.dtype, want.dtype)
    assert got.shape == want.shape, "%s: shape %s, ORT %s" % (what, got.shape, want.shape)
    if want.dtype.kind == "f":
        scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL * scale, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def compare(path, feeds, session=None, names=None):
    """Runs path on weft and ORT with the same feeds; asserts every output matches. Returns weft's."""
    s = session or wonnx.InferenceSession(path)
    want = ort_session(path).run(names, feeds)
    got = s.run(names, feeds)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, "%s output %d" % (os.path.basename(path), i))
    return got


def rng(seed=0):
    return np.random.default_rng(seed)


# ---- hand-made models -------------------------------------------------------------------------------

@pytest.fixture
def mlp_path(tmp_path):
    """y = Relu(x @ W + b), x: f32[4, 8]."""
    r = rng(1)
    w = numpy_helper.from_array(r.standard_normal((8, 16)).astype(np.float32), "W")
    b = numpy_helper.from_array(r.standard_normal(16).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["pre"]),
             helper.make_node("Relu", ["pre"], ["y"])]
    return save(make_model(nodes, [vi("x", TP.FLOAT, [4, 8])], [vi("y", TP.FLOAT, [4, 16])], [w, b]), tmp_path, "mlp.onnx")


@pytest.fixture
def batch_path(tmp_path):
    """A symbolic batch dim: x f32[N, 3, 8, 8] -> Conv(3->4, 3x3, pad 1, stride 2) + bias -> Relu ->
    MaxPool 2x2 -> Flatten -> Gemm(16 -> 5) -> Softmax, plus a second output (the pooled map)."""
    r = rng(2)
    inits = [numpy_helper.from_array(r.standard_normal((4, 3, 3, 3)).astype(np.float32), "cw"),
             numpy_helper.from_array(r.standard_normal(4).astype(np.float32), "cb"),
             numpy_helper.from_array(r.standard_normal((5, 16)).astype(np.float32), "gw"),
             numpy_helper.from_array(r.standard_normal(5).astype(np.float32), "gb")]
    nodes = [helper.make_node("Conv", ["x", "cw", "cb"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["pool"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["pool"], ["f"]),
             helper.make_node("Gemm", ["f", "gw", "gb"], ["logits"], transB=1),
             helper.make_node("Softmax", ["logits"], ["probs"], axis=1)]
    m = make_model(nodes, [vi("x", TP.FLOAT, ["N", 3, 8, 8])],
                   [vi("probs", TP.FLOAT, ["N", 5]), vi("pool", TP.FLOAT, ["N", 4, 2, 2])], inits,
                   producer_name="weft-test", doc_string="a conv net")
    m.model_version = 7
    m.graph.doc_string = "conv, pool, dense"
    helper.set_model_props(m, {"author": "weft"})
    return save(m, tmp_path, "batch.onnx")


@pytest.fixture
def int64_path(tmp_path):
    """ids i64[B, 5] -> Gather from an f32[10, 6] embedding -> ReduceSum over positions -> f32[B, 6];
    and ids * 3 + 1 (i64) and ids > 4 (bool) as outputs."""
    r = rng(3)
    inits = [numpy_helper.from_array(r.standard_normal((10, 6)).astype(np.float32), "emb"),
             numpy_helper.from_array(np.array(3, np.int64), "three"),
             numpy_helper.from_array(np.array(1, np.int64), "one"),
             numpy_helper.from_array(np.array(4, np.int64), "four")]
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["g"], axis=0),
             helper.make_node("ReduceSum", ["g"], ["pooled"], axes=[1], keepdims=0),
             helper.make_node("Mul", ["ids", "three"], ["m"]), helper.make_node("Add", ["m", "one"], ["lin"]),
             helper.make_node("Greater", ["ids", "four"], ["big"])]
    m = make_model(nodes, [vi("ids", TP.INT64, ["B", 5])],
                   [vi("pooled", TP.FLOAT, ["B", 6]), vi("lin", TP.INT64, ["B", 5]), vi("big", TP.BOOL, ["B", 5])],
                   inits, opset=11)
    return save(m, tmp_path, "int64.onnx")


@pytest.fixture
def default_path(tmp_path):
    """An input that is also an initializer (overridable): y = x + w, w defaults to [1, 2, 3, 4]."""
    w = numpy_helper.from_array(np.array([1, 2, 3, 4], np.float32), "w")
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", TP.FLOAT, [2, 4]), vi("w", TP.FLOAT, [4])],
                   [vi("y", TP.FLOAT, [2, 4])], [w])
    return save(m, tmp_path, "default.onnx")


def test_mlp_matches_ort(mlp_path):
    x = rng(10).standard_normal((4, 8)).astype(np.float32)
    compare(mlp_path, {"x": x})


def test_conv_symbolic_batch_matches_ort(batch_path):
    s = wonnx.InferenceSession(batch_path)
    for n in (1, 3, 8):  # each batch size is a new plan in weft's session
        x = rng(n).standard_normal((n, 3, 8, 8)).astype(np.float32)
        probs, pool = compare(batch_path, {"x": x}, session=s)
        assert probs.shape == (n, 5) and pool.shape == (n, 4, 2, 2)
    # output selection and order, duplicates allowed
    x = rng(4).standard_normal((2, 3, 8, 8)).astype(np.float32)
    compare(batch_path, {"x": x}, session=s, names=["pool", "probs", "pool"])


def test_int64_bool_outputs_match_ort(int64_path):
    ids = rng(5).integers(0, 10, size=(3, 5)).astype(np.int64)
    pooled, lin, big = compare(int64_path, {"ids": ids})
    assert lin.dtype == np.int64 and big.dtype == np.bool_


def test_overridable_initializer(default_path):
    s = wonnx.InferenceSession(default_path)
    assert [a.name for a in s.get_inputs()] == ["x"]
    o = s.get_overridable_initializers()
    assert [(a.name, a.shape, a.type) for a in o] == [("w", [4], "tensor(float)")]
    x = rng(6).standard_normal((2, 4)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare(default_path, {"x": x}, session=s)
        compare(default_path, {"x": x, "w": np.full(4, -2.0, np.float32)}, session=s)
        compare(default_path, {"x": x}, session=s)  # the default again after an override


@pytest.mark.parametrize("level", [0, 1, 2, 3, 99])
def test_optimization_levels(batch_path, level):
    so = wonnx.SessionOptions()
    so.graph_optimization_level = level
    so.intra_op_num_threads = 2
    assert so.opt_level() == min(level, 3)
    s = wonnx.InferenceSession(batch_path, sess_options=so)
    x = rng(7).standard_normal((2, 3, 8, 8)).astype(np.float32)
    compare(batch_path, {"x": x}, session=s)


def test_bytes_and_pathlike(mlp_path):
    x = rng(8).standard_normal((4, 8)).astype(np.float32)
    with open(mlp_path, "rb") as f:
        data = f.read()
    compare(mlp_path, {"x": x}, session=wonnx.InferenceSession(data))
    compare(mlp_path, {"x": x}, session=wonnx.InferenceSession(Path(mlp_path)))


def test_feed_layouts_and_lists(mlp_path):
    s = wonnx.InferenceSession(mlp_path)
    x = rng(9).standard_normal((8, 4)).astype(np.float32)
    want = ort_session(mlp_path).run(None, {"x": np.ascontiguousarray(x.T)})[0]
    assert_close(s.run(None, {"x": x.T})[0], want, "transposed feed")           # not C-contiguous
    assert_close(s.run(None, {"x": x.T.tolist()})[0], want, "list feed")        # converted to f32


# ---- description ------------------------------------------------------------------------------------

def test_inputs_outputs_like_ort(batch_path, int64_path, default_path):
    for p in (batch_path, int64_path, default_path):
        s, o = wonnx.InferenceSession(p), ort_session(p)
        for mine, theirs in ((s.get_inputs(), o.get_inputs()), (s.get_outputs(), o.get_outputs()),
                             (s.get_overridable_initializers(), o.get_overridable_initializers())):
            assert [(a.name, a.shape, a.type) for a in mine] == [(a.name, a.shape, a.type) for a in theirs]
    s = wonnx.InferenceSession(batch_path)
    assert s.get_inputs()[0].shape == ["N", 3, 8, 8] and s.get_inputs()[0].type == "tensor(float)"
    assert wonnx.InferenceSession(int64_path).get_inputs()[0].type == "tensor(int64)"


def test_modelmeta(batch_path):
    mine, theirs = wonnx.InferenceSession(batch_path).get_modelmeta(), ort_session(batch_path).get_modelmeta()
    for k in ("producer_name", "graph_name", "graph_description", "domain", "description", "version",
              "custom_metadata_map"):
        assert getattr(mine, k) == getattr(theirs, k), k
    assert mine.custom_metadata_map == {"author": "weft"} and mine.version == 7
    assert mine.graph_description == "conv, pool, dense" and mine.description == "a conv net"


# ---- providers --------------------------------------------------------------------------------------

def test_providers(mlp_path):
    avail = wonnx.get_available_providers()
    assert avail[-1] == "CPUExecutionProvider"
    assert wonnx.InferenceSession(mlp_path).get_providers() == ["CPUExecutionProvider"]
    assert wonnx.InferenceSession(mlp_path, providers=["CPUExecutionProvider"]).get_providers() == \
        ["CPUExecutionProvider"]
    with pytest.warns(UserWarning, match="NoSuchExecutionProvider"):
        s = wonnx.InferenceSession(mlp_path, providers=["NoSuchExecutionProvider", "CPUExecutionProvider"])
    assert s.get_providers() == ["CPUExecutionProvider"]
    if "CUDAExecutionProvider" not in avail:  # an unavailable one falls back softly, as ORT does
        with pytest.warns(UserWarning, match="CUDAExecutionProvider"):
            s = wonnx.InferenceSession(mlp_path, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
        assert s.get_providers() == ["CPUExecutionProvider"]
        with pytest.raises(errors.InvalidArgumentError, match="GPU"):
            wonnx.InferenceSession(mlp_path, device="GPU:0")
    s = wonnx.InferenceSession(mlp_path, device="/device:CPU:0")
    assert s.get_providers() == ["CPUExecutionProvider"]


ACCEL = [p for p in ("CUDAExecutionProvider", "OpenCLExecutionProvider") if p in wonnx.get_available_providers()]


@pytest.mark.skipif(not ACCEL, reason="no GPU or OpenCL device in weft's context")
@pytest.mark.parametrize("provider", ACCEL)
def test_accelerator_matches_ort(batch_path, int64_path, provider):
    if provider.startswith("OpenCL") and "tensorflow" in sys.modules:
        # TensorFlow's own LLVM, loaded into this process by a test that compares against it, shadows
        # PoCL's kernel compiler ("unknown target CPU 'skylake-avx512'"); the CI venv has no TensorFlow
        pytest.skip("TensorFlow is loaded in this process and breaks PoCL's compiler; run this file alone")
    for p, feeds in ((batch_path, {"x": rng(11).standard_normal((3, 3, 8, 8)).astype(np.float32)}),
                     (int64_path, {"ids": rng(12).integers(0, 10, size=(2, 5)).astype(np.int64)})):
        s = wonnx.InferenceSession(p, providers=[provider, "CPUExecutionProvider"])
        assert s.get_providers() == [provider, "CPUExecutionProvider"]
        compare(p, feeds, session=s)
        dev = "GPU" if provider.startswith("CUDA") else "OPENCL"
        assert "device:%s:0" % dev in s.placement(feeds)


# ---- errors -----------------------------------------------------------------------------------------

def test_bad_inputs_raise_and_session_survives(batch_path):
    s = wonnx.InferenceSession(batch_path)
    good = {"x": rng(13).standard_normal((2, 3, 8, 8)).astype(np.float32)}
    want = s.run(None, good)[0].copy()
    cases = [
        ({"x": good["x"], "nope": good["x"]}, errors.InvalidArgumentError, ["'nope'", "not an input", "x"]),
        ({}, errors.InvalidArgumentError, ["'x'", "missing"]),
        ({"x": good["x"].astype(np.float64)}, errors.InvalidArgumentError, ["'x'", "float32", "float64"]),
        ({"x": good["x"].astype(np.int64)}, errors.InvalidArgumentError, ["'x'", "float32", "int64"]),
        ({"x": good["x"][0]}, errors.InvalidArgumentError, ["'x'", "rank 4", "rank 3"]),
        ({"x": good["x"][:, :2]}, errors.InvalidArgumentError, ["'x'", "[N, 3, 8, 8]", "[2, 2, 8, 8]"]),
    ]
    for feed, cls, words in cases:
        with pytest.raises(cls) as ei:
            s.run(None, feed)
        assert isinstance(ei.value, ValueError)  # InvalidArgumentError is also a ValueError
        for w in words:
            assert w in str(ei.value), (w, str(ei.value))
        np.testing.assert_array_equal(s.run(None, good)[0], want)  # usable after the error
    with pytest.raises(errors.NotFoundError) as ei:
        s.run(["probs", "nope"], good)
    assert "'nope'" in str(ei.value) and "probs" in str(ei.value)
    assert isinstance(ei.value, LookupError)
    np.testing.assert_array_equal(s.run(["probs"], good)[0], want)


def test_int64_dtype_error(int64_path):
    s = wonnx.InferenceSession(int64_path)
    with pytest.raises(errors.InvalidArgumentError, match=r"'ids'.*int64.*int32"):
        s.run(None, {"ids": np.zeros((1, 5), np.int32)})
    assert s.run(["lin"], {"ids": np.ones((1, 5), np.int64)})[0].tolist() == [[4] * 5]


def test_load_errors(tmp_path):
    with pytest.raises(errors.OpError) as ei:
        wonnx.InferenceSession(str(tmp_path / "missing.onnx"))
    assert "missing.onnx" in str(ei.value)
    with pytest.raises(errors.OpError):
        wonnx.InferenceSession(b"not a model")


def test_close_and_context_manager(mlp_path):
    with wonnx.InferenceSession(mlp_path) as s:
        y = s.run(None, {"x": np.ones((4, 8), np.float32)})[0]
    s.close()  # idempotent
    with pytest.raises(errors.FailedPreconditionError):
        s.run(None, {"x": np.ones((4, 8), np.float32)})
    assert np.isfinite(y).all()  # outputs outlive the session


# ---- threads ----------------------------------------------------------------------------------------

def test_concurrent_runs(batch_path):
    s = wonnx.InferenceSession(batch_path)
    xs = [rng(100 + i).standard_normal((1 + i % 4, 3, 8, 8)).astype(np.float32) for i in range(16)]
    want = [s.run(None, {"x": x}) for x in xs]
    failures = []

    def worker(k):
        try:
            for rep in range(10):
                i = (k * 7 + rep) % len(xs)
                got = s.run(None, {"x": xs[i]})
                for g, w in zip(got, want[i]):
                    if not np.array_equal(g, w):
                        failures.append((k, rep, i))
        except Exception as e:  # noqa: BLE001
            failures.append(repr(e))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:5]


# ---- the build tree's models (opportunistic) ----------------------------------------------------------

def _exported():
    if not MODELS.is_dir():
        return []
    return sorted(p.name for p in MODELS.iterdir() if (p / "model.onnx").is_file())


@pytest.mark.skipif(not _exported(), reason="no exported models in %s (tests/models/export_models.py writes "
                    "them; WEFT_TEST_MODELS names another folder)" % MODELS)
@pytest.mark.parametrize("name", _exported() or ["none"])
def test_exported_model_matches_ort(name):
    d = MODELS / name
    path = str(d / "model.onnx")
    s = wonnx.InferenceSession(path)
    names = [a.name for a in s.get_inputs()]
    feeds = {names[0]: np.load(str(d / "input.npy"))} if (d / "input.npy").is_file() and len(names) == 1 else {}
    for a in s.get_inputs():
        if a.name not in feeds:
            shape = [d if isinstance(d, int) else 2 for d in a.shape]
            feeds[a.name] = rng(21).standard_normal(shape).astype(np.float32)
    compare(path, feeds, session=s)
    # a second, random feed of another batch size where the exported batch dim is symbolic (the
    # encoder's shapes are static: export_models.py says why)
    x = feeds[names[0]]
    feeds2 = {names[0]: rng(22).standard_normal((1,) + x.shape[1:]).astype(x.dtype)}
    if len(names) == 1 and not isinstance(s.get_inputs()[0].shape[0], int):
        compare(path, feeds2, session=s)


def _node_cases():
    """ONNX's backend node tests that weft passes (tests/onnx/node_tests_pass.txt) present on disk."""
    lst = REPO / "tests" / "onnx" / "node_tests_pass.txt"
    root = NODE_TESTS / "node"
    if not lst.is_file() or not root.is_dir():
        return []
    names = [ln.strip() for ln in lst.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    return [n for n in names if (root / n / "model.onnx").is_file()]


def _read_pb(path):
    t = TP()
    t.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(t)


@pytest.mark.skipif(not _node_cases(), reason="no ONNX node tests in %s (tests/onnx/gen_node_tests.py writes "
                    "them; WEFT_TEST_NODE_TESTS names another folder)" % NODE_TESTS)
@pytest.mark.parametrize("name", _node_cases() or ["none"])
def test_onnx_node_case(name):
    """Each node test weft's C runner passes, through the Python session: the same values (against
    ONNX's reference outputs, with the case's own tolerance), dtypes and shapes."""
    d = NODE_TESTS / "node" / name
    rtol, atol = 1e-3, 1e-7
    if (d / "tolerance.txt").is_file():
        rtol, atol = (float(v) for v in (d / "tolerance.txt").read_text().split()[:2])
    model = onnx.load(str(d / "model.onnx"), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    in_names = [i.name for i in model.graph.input if i.name not in inits]
    out_names = [o.name for o in model.graph.output]
    s = wonnx.InferenceSession(str(d / "model.onnx"))
    for ds in sorted(d.glob("test_data_set_*")):
        ins = sorted(ds.glob("input_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
        outs = sorted(ds.glob("output_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
        feeds = {n: _read_pb(p) for n, p in zip(in_names, ins)}
        got = s.run(out_names, feeds)
        for n, g, p in zip(out_names, got, outs):
            w = _read_pb(p)
            assert g.shape == w.shape, (n, g.shape, w.shape)
            if w.dtype.kind in "OSU":
                assert [bytes(v) if not isinstance(v, str) else v.encode() for v in g.ravel()] == \
                    [v if isinstance(v, bytes) else str(v).encode() for v in w.ravel()], n
            elif w.dtype.kind in "fc":
                assert g.dtype == w.dtype, (n, g.dtype, w.dtype)
                np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                           equal_nan=True, err_msg=n)
            else:
                assert g.dtype == w.dtype, (n, g.dtype, w.dtype)
                np.testing.assert_array_equal(g, w, err_msg=n)


# ---- C-side issues ------------------------------------------------------------------------------------

# An initializer-backed input (a PlaceholderWithDefault) stays feedable at every opt level: the passes
# treat it as stateful (src/graph/registry.c), so fold never turns it into a constant.
def test_c_fold_keeps_placeholder_with_default(default_path):
    s = wonnx.InferenceSession(default_path)  # ORT_ENABLE_ALL: weft opt_level 3
    feeds = {"x": np.zeros((2, 4), np.float32), "w": np.zeros(4, np.float32)}
    assert s.run(None, feeds)[0].tolist() == [[0.0] * 4] * 2


def test_session_alive_at_exit(mlp_path):
    """A session (and an output array) still referenced when the interpreter exits must not crash it."""
    import subprocess
    import sys
    code = ("import numpy as np, weft.onnx as w\n"
            "s = w.InferenceSession(%r)\n"
            "y = s.run(None, {'x': np.ones((4, 8), np.float32)})[0]\n"
            "print('ok', y.shape)\n" % mlp_path)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ok (4, 16)" in r.stdout
