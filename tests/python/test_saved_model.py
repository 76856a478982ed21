"""tf.saved_model: save, load, keras.models.load_model, the CLI on the directory, and damaged directories."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import weft as tf

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def trained(tmp_path):
    rng = np.random.RandomState(0)
    x = rng.randn(64, 5).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    m = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu", input_shape=(5,)),
                             tf.keras.layers.Dense(2, activation="softmax")])
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    m.fit(x, y, epochs=2, verbose=0)
    d = tmp_path / "model" / "1"
    tf.saved_model.save(m, str(d))
    return m, x, y, d


def test_round_trip(trained):
    m, x, y, d = trained
    r = tf.saved_model.load(str(d))
    want = m.predict(x)
    np.testing.assert_allclose(r(x).numpy(), want, rtol=1e-6, atol=1e-6)
    sig = r.signatures["serving_default"]
    name = sig.structured_input_signature[0]["name"]
    out = sig(**{name: x[:3]})
    np.testing.assert_allclose(out["output"].numpy(), want[:3], rtol=1e-6, atol=1e-6)


def test_keras_load_model_trains_again(trained):
    m, x, y, d = trained
    m2 = tf.keras.models.load_model(str(d))
    np.testing.assert_allclose(m2.predict(x), m.predict(x), rtol=1e-6, atol=1e-6)
    for a, b in zip(m2.get_weights(), m.get_weights()):
        np.testing.assert_array_equal(a, b)
    m2.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    h = m2.fit(x, y, epochs=1, verbose=0)
    assert np.isfinite(h.history["loss"][0])


def test_function_with_signature(tmp_path):
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def f(x):
        return tf.nn.relu(tf.matmul(x, w) - 0.5)
    d = tmp_path / "fn"
    tf.saved_model.save(f, str(d))
    r = tf.saved_model.load(str(d))
    x = np.random.RandomState(2).rand(5, 3).astype(np.float32)
    np.testing.assert_allclose(r(x).numpy(), np.maximum(x @ w - 0.5, 0), rtol=1e-6, atol=1e-6)


def test_cli_runs_the_directory(trained):
    _, _, _, d = trained
    cli = shutil.which("weft") or next((str(p) for p in (ROOT / "build" / "weft",) if p.exists()), None)
    if cli is None:
        pytest.skip("the weft CLI is not built here (make builds build/weft)")
    p = subprocess.run([cli, "run", str(d), "--random-inputs", "--iterations", "1"], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert "f32 [1,2]" in p.stdout


@pytest.mark.parametrize("damage,exc,words", [
    ("no_json", tf.errors.NotFoundError, "saved_model.json"),
    ("bad_json", tf.errors.DataLossError, "saved_model.json"),
    ("wrong_format", tf.errors.DataLossError, "not a weft SavedModel"),
    ("cut_onnx", tf.errors.OpError, "saved_model.onnx"),
    ("cut_variables", tf.errors.OpError, "variables.safetensors"),
    ("no_dir", tf.errors.NotFoundError, "no such directory"),
])
def test_damaged_directory_is_a_clear_error(trained, damage, exc, words):
    m, x, _, d = trained
    bad = d.parent / ("bad-" + damage)
    shutil.copytree(d, bad)
    if damage == "no_json":
        (bad / "saved_model.json").unlink()
    elif damage == "bad_json":
        (bad / "saved_model.json").write_text('{"format": "weft-saved-mo')
    elif damage == "wrong_format":
        (bad / "saved_model.json").write_text(json.dumps({"format": "something else"}))
    elif damage == "cut_onnx":
        p = bad / "saved_model.onnx"
        p.write_bytes(p.read_bytes()[: os.path.getsize(p) // 2])
    elif damage == "cut_variables":
        p = bad / "variables" / "variables.safetensors"
        p.write_bytes(p.read_bytes()[:100])
    elif damage == "no_dir":
        shutil.rmtree(bad)
    with pytest.raises(exc) as e:
        tf.saved_model.load(str(bad))
    assert words in str(e.value), str(e.value)
    # nothing is left broken: the good directory still loads and runs, and ops still work
    np.testing.assert_allclose(tf.saved_model.load(str(d))(x).numpy(), m.predict(x), rtol=1e-6, atol=1e-6)
    assert float(tf.reduce_sum(tf.constant([1.0, 2.0]))) == 3.0


def test_save_is_atomic_over_an_existing_directory(trained, tmp_path):
    m, x, _, d = trained
    tf.saved_model.save(m, str(d))  # overwrite
    assert sorted(p.name for p in d.parent.iterdir()) == ["1"]  # no temporary folders left
    np.testing.assert_allclose(tf.saved_model.load(str(d))(x).numpy(), m.predict(x), rtol=1e-6, atol=1e-6)


def test_unbuilt_model_cannot_be_saved(tmp_path):
    m = tf.keras.Sequential([tf.keras.layers.Dense(2)])
    with pytest.raises(tf.errors.FailedPreconditionError, match="not built"):
        tf.saved_model.save(m, str(tmp_path / "x"))
    assert not (tmp_path / "x").exists() and list(tmp_path.iterdir()) == []


def test_mutated_directories_fail_cleanly(trained):
    """A small fuzz of the format: random truncations, byte flips and splices of each of the three files.
    Every load either works or raises one of weft's errors (tf.errors.OpError) naming a file; nothing
    else escapes (no KeyError, TypeError, crash), and the good directory still loads after."""
    m, x, _, d = trained
    rng = np.random.RandomState(1234)
    files = ["saved_model.json", "saved_model.onnx", "variables/variables.safetensors"]
    originals = {f: (d / f).read_bytes() for f in files}
    work = d.parent / "fuzz"
    outcomes = {"ok": 0, "error": 0}
    for it in range(120):
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(d, work)
        f = files[it % 3]
        data = bytearray(originals[f])
        kind = rng.randint(3)
        if kind == 0:
            data = data[:rng.randint(len(data))]
        elif kind == 1:
            for _ in range(rng.randint(1, 9)):
                data[rng.randint(len(data))] = rng.randint(256)
        else:
            a, b = sorted(rng.randint(len(data), size=2))
            data = data[:a] + bytes(rng.randint(256, size=rng.randint(1, 64)).astype(np.uint8)) + data[b:]
        (work / f).write_bytes(bytes(data))
        try:
            r = tf.saved_model.load(str(work))
            r(x[:2])
            outcomes["ok"] += 1
        except tf.errors.OpError as e:
            outcomes["error"] += 1
            assert str(e), "an error without a message"
    assert outcomes["error"] > 0
    np.testing.assert_allclose(tf.saved_model.load(str(d))(x).numpy(), m.predict(x), rtol=1e-6, atol=1e-6)
