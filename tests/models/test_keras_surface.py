"""The everyday Keras surface, checked against Keras 3 itself: per-batch calls, metric names and History keys,
labels given as integral floats or with a trailing axis of 1, and unknown or unsupported keywords refused by
name (never a raw TypeError, never ignored)."""
import keras
import numpy as np
import pytest

import flowlayers as flow

PLACES = [("mirrored", 1), ("mirrored", 2), ("consistent", 2)]


def data(n=12):
    rng = np.random.default_rng(7)
    return rng.standard_normal((n, 5)).astype(np.float32), rng.integers(0, 3, n)


def models(metrics):
    """The same two-layer classifier in flowlayers and in Keras 3, from the same weights."""
    flow.clear_session()
    x = flow.Input((5,))
    ours = flow.Model(x, flow.layers.Dense(3)(flow.layers.Dense(8, activation="relu")(x)))
    ours.compile(optimizer=flow.optimizers.SGD(0.1, momentum=0.9),
                 loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=metrics)
    theirs = keras.Sequential([keras.Input((5,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)])
    theirs.set_weights(ours.get_weights())
    theirs.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9),
                   loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=metrics)
    return ours, theirs


@pytest.mark.parametrize("view, n", PLACES, ids=[f"{v}{n}" for v, n in PLACES])
def test_on_batch_calls_match_keras(view, n):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    ours, theirs = models(["accuracy"])
    x, y = data()
    for i in range(3):          # three steps on three different batches, each call's own metrics
        batch = slice(4 * i, 4 * i + 4)
        got, want = ours.train_on_batch(x[batch], y[batch]), theirs.train_on_batch(x[batch], y[batch])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_allclose(ours.test_on_batch(x, y), theirs.test_on_batch(x, y), rtol=1e-5, atol=1e-6)
    assert ours.test_on_batch(x, y, return_dict=True).keys() == {"loss", "accuracy"}
    np.testing.assert_allclose(ours.predict_on_batch(x[:3]), theirs.predict_on_batch(x[:3]), atol=1e-5)


@pytest.mark.parametrize("view, n", PLACES, ids=[f"{v}{n}" for v, n in PLACES])
def test_a_frozen_layer_stays_as_it_was_while_the_others_train_as_in_keras(view, n):
    """A layer frozen after compile keeps its values through several steps while layers and batch-norm statistics
    of the very same shapes train and update beside it: the frozen values are read by every step, never written
    (nor handed to the engine to reuse for another output), and the rest ends where Keras' does."""
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    flow.clear_session()

    def build(api):
        x = api.Input((8,))
        h = api.layers.Dense(8, activation="relu", name="frozen")(x)
        h = api.layers.Dense(8, activation="relu", name="trained")(h)
        h = api.layers.BatchNormalization(name="bn")(h)     # its moving statistics: state the step writes
        return api.Model(x, api.layers.Dense(3, name="out")(h))

    ours, theirs = build(flow), build(keras)
    theirs.set_weights(ours.get_weights())
    for m in (ours, theirs):
        m.get_layer("frozen").trainable = False
    ours.compile(flow.optimizers.SGD(0.1, momentum=0.9), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    theirs.compile(keras.optimizers.SGD(0.1, momentum=0.9), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((24, 8)).astype(np.float32), rng.integers(0, 3, 24)
    frozen, trained = ours.get_layer("frozen").get_weights(), ours.get_layer("trained").get_weights()
    for _ in range(2):
        ours.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
        theirs.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(ours.get_layer("frozen").get_weights(), frozen):
        np.testing.assert_array_equal(a, b)
    assert not np.allclose(ours.get_layer("trained").get_weights()[0], trained[0])
    if view == "mirrored" and n > 1:
        return      # each replica normalises its own rows there, as under Keras' MirroredStrategy: not one Keras model
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("metrics, keys", [
    (["accuracy"], ["loss", "accuracy"]),
    (["acc"], ["loss", "acc"]),
    ([flow.metrics.SparseCategoricalAccuracy()], ["loss", "sparse_categorical_accuracy"]),
    (None, ["loss"]),
])
def test_metric_names_and_history_keys_are_keras(metrics, keys):
    keras_metrics = [keras.metrics.SparseCategoricalAccuracy()] if metrics and not isinstance(metrics[0], str) \
        else metrics
    ours, theirs = models(metrics)
    theirs.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                   metrics=keras_metrics)
    x, y = data()
    history = ours.fit(x, y, batch_size=4, validation_data=(x[:4], y[:4]), verbose=0).history
    expected = theirs.fit(x, y, batch_size=4, validation_data=(x[:4], y[:4]), verbose=0).history
    assert sorted(history) == sorted(expected) == sorted(keys + [f"val_{k}" for k in keys])
    assert ours.metrics_names == keys
    assert len(ours.evaluate(x, y, verbose=0) if metrics else [ours.evaluate(x, y, verbose=0)]) == len(keys)


def test_sparse_labels_as_integral_floats_or_with_a_trailing_axis_train_as_integers():
    x, y = data()
    weights = []
    for labels in (y, y.astype(np.float32), y.astype(np.float64)[:, None], y[:, None]):
        ours, _ = models(["accuracy"])
        ours.fit(x, labels, batch_size=4, shuffle=False, verbose=0)
        weights.append(ours.get_weights())
    for other in weights[1:]:
        for a, b in zip(weights[0], other):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("bad, where", [(1.5, "1.5"), (np.nan, "nan"), (np.inf, "inf")])
def test_non_integral_float_labels_are_named(bad, where):
    ours, _ = models(None)
    x, y = data()
    labels = y.astype(np.float32)
    labels[5] = bad
    with pytest.raises(flow.InputError, match=rf"y expected integer values \(int32\), received float32 with the "
                                              rf"non-integral value {where} at index \(5,\)"):
        ours.fit(x, labels, verbose=0)
    assert ours.optimizer.iterations == 0
    ours.fit(x, y, verbose=0)           # the model trains on
    assert ours.optimizer.iterations == 1


@pytest.mark.parametrize("call, message", [
    (lambda m, x, y: m.fit(x, y, epoch=2, verbose=0), r"fit: unexpected keyword argument\(s\) \['epoch'\]"),
    (lambda m, x, y: m.evaluate(x, y, batchsize=4), r"evaluate: unexpected keyword argument\(s\) \['batchsize'\]"),
    (lambda m, x, y: m.predict(x, workers=2), r"predict: unexpected keyword argument\(s\) \['workers'\]"),
    (lambda m, x, y: m.fit(x, y, validation_freq=2, verbose=0), r"fit: validation_freq=2 is not supported yet"),
    (lambda m, x, y: m.evaluate(x, y, steps=0, verbose=0), r"evaluate: steps expected None or a positive int, "
                                                           r"received 0"),
    (lambda m, x, y: m.fit(x, y, class_weight={0: 2.0}, sample_weight=np.ones(len(y)), verbose=0),
     "expected sample_weight or class_weight, received both"),
    (lambda m, x, y: m.fit(x, y, class_weight=[2.0, 1.0], verbose=0), "class_weight expected a dict"),
    (lambda m, x, y: m.train_on_batch(x, y, sample_weight=np.ones(len(y) + 1)),
     r"sample_weight expected 12 finite numbers, one per sample \(shape \(12,\)\), received float64 of shape \(13,\)"),
    (lambda m, x, y: m.fit(x, y, sample_weight=np.full(len(y), np.nan), verbose=0), "finite numbers"),
])
def test_unknown_or_unsupported_keywords_are_named(call, message):
    ours, _ = models(None)
    x, y = data()
    with pytest.raises(flow.InputError, match=message):
        call(ours, x, y)
    assert ours.optimizer.iterations == 0
    ours.fit(x, y, validation_freq=None, verbose=0)       # a default value is no mistake
    assert ours.optimizer.iterations == 1


def test_save_weights_keeps_its_word(tmp_path):
    ours, _ = models(None)
    x, y = data()
    ours.save_weights(str(tmp_path / "w"))
    with pytest.raises(flow.CheckpointError, match="exists and overwrite=False"):
        ours.save_weights(str(tmp_path / "w"), overwrite=False)
    with pytest.raises(flow.InputError, match=r"save_weights: unexpected keyword argument\(s\) \['max_shard'\]"):
        ours.save_weights(str(tmp_path / "v"), max_shard=2)
    ours.fit(x, y, verbose=0)
    ours.save_weights(str(tmp_path / "w"))                       # overwrite=True, the default
    fresh, _ = models(None)
    fresh.load_weights(str(tmp_path / "w"))
    for a, b in zip(fresh.get_weights(), ours.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("view, n", [("mirrored", 1), ("consistent", 2)])
def test_summary_after_fit_reads_the_compiled_step(view, n):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    ours, _ = models(["accuracy"])
    x, y = data()
    ours.fit(x, y, verbose=0)
    lines = []
    ours.summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert "Total params: 75" in text and "Trainable params: 75" in text


@pytest.mark.parametrize("view, n", PLACES, ids=[f"{v}{n}" for v, n in PLACES])
def test_sample_and_class_weights_train_as_in_keras(view, n):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    x, y = data(16)
    weights = np.random.default_rng(2).uniform(0.0, 3.0, len(y)).astype(np.float32)
    for kwargs in ({"sample_weight": weights}, {"class_weight": {0: 0.5, 2: 4.0}}):   # class 1 weighs 1
        ours, theirs = models(["accuracy"])
        got = ours.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0, validation_data=(x, y, weights),
                       **kwargs).history
        want = theirs.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0, validation_data=(x, y, weights),
                          **kwargs).history
        for key in ("loss", "accuracy", "val_loss", "val_accuracy"):
            np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-6, err_msg=f"{kwargs} {key}")
        for a, b in zip(ours.get_weights(), theirs.get_weights()):
            np.testing.assert_allclose(a, b, atol=1e-6)
        np.testing.assert_allclose(ours.evaluate(x, y, sample_weight=weights, verbose=0),
                                   theirs.evaluate(x, y, sample_weight=weights, verbose=0), rtol=1e-5)
        np.testing.assert_allclose(ours.train_on_batch(x, y, **kwargs), theirs.train_on_batch(x, y, **kwargs),
                                   rtol=1e-5)
