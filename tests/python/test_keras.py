"""tf.keras over weft's C models, checked against numpy forward passes of the model's own weights."""
import numpy as np
import pytest

import weft as tf


def _data(n=512, d=20, k=3, seed=0):
    rng = np.random.RandomState(seed)
    centers = rng.randn(k, d) * 3
    y = rng.randint(0, k, n)
    x = (centers[y] + rng.randn(n, d)).astype(np.float32)
    return x, y


def _relu(x):
    return np.maximum(x, 0)


def _softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _mlp(units=16, k=3, d=20):
    return tf.keras.Sequential([tf.keras.layers.Dense(units, activation="relu", input_shape=(d,)),
                                tf.keras.layers.Dense(k, activation="softmax")])


def test_call_before_compile_matches_numpy():
    m = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu"), tf.keras.layers.Dense(3, activation="softmax")])
    x = np.random.RandomState(1).randn(5, 6).astype(np.float32)
    y = m(x).numpy()  # builds on first data, as Keras does
    k1, b1, k2, b2 = m.get_weights()
    assert k1.shape == (6, 8) and b1.shape == (8,) and k2.shape == (8, 3)
    ref = _softmax(_relu(x @ k1 + b1) @ k2 + b2)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_fit_learns_and_predict_evaluate_agree():
    x, y = _data()
    m = _mlp()
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    h = m.fit(x, y, epochs=4, batch_size=32, verbose=0, validation_data=(x[:128], y[:128]))
    assert set(h.history) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert len(h.history["loss"]) == 4 and h.history["loss"][-1] < h.history["loss"][0]
    loss, acc = m.evaluate(x, y, verbose=0)
    p = m.predict(x, batch_size=64)
    k1, b1, k2, b2 = m.get_weights()
    ref = _softmax(_relu(x @ k1 + b1) @ k2 + b2)
    np.testing.assert_allclose(p, ref, rtol=1e-4, atol=1e-5)
    assert acc == pytest.approx(np.mean(np.argmax(ref, 1) == y), abs=1e-6)
    ref_loss = -np.mean(np.log(ref[np.arange(len(y)), y]))
    assert loss == pytest.approx(ref_loss, rel=1e-4)
    assert acc > 0.9


def test_weights_set_before_compile_are_kept():
    x, y = _data(64)
    m = _mlp()
    m(x[:2])
    w = [np.full_like(a, 0.01 * (i + 1)) for i, a in enumerate(m.get_weights())]
    m.set_weights(w)
    m.compile(optimizer=tf.keras.optimizers.SGD(learning_rate=1e-9), loss="sparse_categorical_crossentropy")
    for a, b in zip(m.get_weights(), w):
        np.testing.assert_array_equal(a, b)


def test_fit_on_a_dataset_and_callbacks(tmp_path):
    x, y = _data(256)
    ds = tf.data.Dataset.from_tensor_slices((x, y.astype(np.int64))).shuffle(256, seed=1).batch(32)
    m = _mlp()
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    seen = []

    def stop_after_two(epoch, logs):
        seen.append(epoch)
        if epoch == 1:
            m.stop_training = True
    ck = str(tmp_path / "w-{epoch:02d}.safetensors")
    h = m.fit(ds, epochs=10, verbose=0, callbacks=[tf.keras.callbacks.LambdaCallback(on_epoch_end=stop_after_two),
                                                  tf.keras.callbacks.ModelCheckpoint(ck, save_weights_only=True,
                                                                                     monitor="loss")])
    assert seen == [0, 1] and len(h.history["loss"]) == 2
    assert (tmp_path / "w-01.safetensors").exists() and (tmp_path / "w-02.safetensors").exists()
    before = m.get_weights()
    m.load_weights(str(tmp_path / "w-01.safetensors"))
    after = m.get_weights()
    assert any(not np.array_equal(a, b) for a, b in zip(before, after))
    m.load_weights(str(tmp_path / "w-02.safetensors"))
    for a, b in zip(before, m.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_early_stopping_restores_best():
    x, y = _data(128)
    m = _mlp()
    # a learning rate this large makes the loss climb after the first epochs: patience runs out
    m.compile(optimizer=tf.keras.optimizers.SGD(learning_rate=50.0), loss="sparse_categorical_crossentropy")
    es = tf.keras.callbacks.EarlyStopping(monitor="loss", patience=1, restore_best_weights=True)
    h = m.fit(x, y, epochs=30, verbose=0, callbacks=[es])
    assert len(h.history["loss"]) < 30
    assert es.stopped_epoch > 0


def test_conv2d_channels_last_matches_numpy():
    rng = np.random.RandomState(3)
    x = rng.rand(2, 6, 7, 2).astype(np.float32)  # NHWC, Keras's default
    m = tf.keras.Sequential([tf.keras.layers.Conv2D(3, 3, activation="relu", input_shape=(6, 7, 2)),
                             tf.keras.layers.MaxPooling2D(2), tf.keras.layers.Flatten()])
    out = m(x).numpy()
    k, b = m.get_weights()  # weft's layout: OIHW
    assert k.shape == (3, 2, 3, 3)
    xn = x.transpose(0, 3, 1, 2)
    conv = np.zeros((2, 3, 4, 5), np.float32)
    for i in range(4):
        for j in range(5):
            conv[:, :, i, j] = np.einsum("nchw,ochw->no", xn[:, :, i:i + 3, j:j + 3], k) + b
    conv = _relu(conv)
    pooled = conv[:, :, :4, :4].reshape(2, 3, 2, 2, 2, 2).max(axis=(3, 5))
    np.testing.assert_allclose(out, pooled.reshape(2, -1), rtol=1e-5, atol=1e-5)


def test_mixed_precision_policy():
    p = tf.keras.mixed_precision.Policy("mixed_bfloat16")
    assert p.compute_dtype == "bfloat16" and p.variable_dtype == "float32"
    with pytest.raises(tf.errors.InvalidArgumentError, match="float64"):
        tf.keras.mixed_precision.Policy("float64")
    old = tf.keras.mixed_precision.global_policy()
    try:
        tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")
        assert tf.keras.mixed_precision.global_policy().name == "mixed_bfloat16"
        x, y = _data(128)
        m = _mlp()
        m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        h = m.fit(x, y, epochs=3, verbose=0)
        assert h.history["loss"][-1] < h.history["loss"][0]
        assert m.get_weights()[0].dtype == np.float32  # variables stay f32
    finally:
        tf.keras.mixed_precision.set_global_policy(old)


def test_bad_input_raises_and_the_model_stays_usable():
    x, y = _data(64)
    m = _mlp()
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        m.predict(np.zeros((4, 7), np.float32))  # the model takes 20 features
    assert "20" in str(e.value) and "7" in str(e.value)
    with pytest.raises(tf.errors.UnimplementedError, match="optimizer"):
        _mlp().compile(optimizer="adagrad_nope", loss="mse")
    with pytest.raises(tf.errors.UnimplementedError, match="activation"):
        tf.keras.layers.Dense(3, activation="swishy")
    with pytest.raises(tf.errors.FailedPreconditionError, match="compile"):
        _mlp().fit(x, y, verbose=0)
    h = m.fit(x, y, epochs=1, verbose=0)
    assert np.isfinite(h.history["loss"][0])
    assert m.predict(x[:3]).shape == (3, 3)


def test_summary_and_counts(capsys):
    m = _mlp()
    m.build()
    m.summary()
    out = capsys.readouterr().out
    assert "dense" in out and str(20 * 16 + 16) in out
    assert m.count_params() == 20 * 16 + 16 + 16 * 3 + 3


def test_functional_model_is_a_clear_not_implemented():
    with pytest.raises(NotImplementedError, match="Sequential"):
        tf.keras.Model(inputs=None, outputs=None)

    class Mine(tf.keras.Model):
        pass
    with pytest.raises(tf.errors.UnimplementedError, match="Sequential"):
        Mine()
    assert isinstance(tf.keras.Sequential(), tf.keras.Model)


def test_builds_on_a_dataset_for_evaluate_and_fit():
    # no input shape given: the model builds on the first batch of whatever it is handed first
    x, y = _data(96)
    ds = tf.data.Dataset.from_tensor_slices((x, y.astype(np.int64))).batch(32)
    for first in ("evaluate", "fit"):
        m = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu"), tf.keras.layers.Dense(3, activation="softmax")])
        m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        if first == "evaluate":
            loss, acc = m.evaluate(ds, verbose=0)
            k1, b1, k2, b2 = m.get_weights()
            ref = _softmax(_relu(x @ k1 + b1) @ k2 + b2)
            assert loss == pytest.approx(-np.mean(np.log(ref[np.arange(len(y)), y])), rel=1e-4)
        else:
            h = m.fit(ds, epochs=2, verbose=0)
            assert h.history["loss"][1] < h.history["loss"][0]
        assert m.get_weights()[0].shape == (20, 8)
