"""flowlayers' own callbacks behave as Keras 3's: each one and its ``keras.callbacks`` twin drive the same model
from the same start, and the histories, the weights, the learning rates and the files they write must be the same.
Keras' implementation is the reference."""
import inspect
import operator
import os

import keras
import numpy as np
import pytest

import flowlayers as flow

PLACES = {"mirrored2": ("mirrored", 2), "consistent2": ("consistent", 2)}


@pytest.fixture(scope="module")
def digits():
    (x, y), (xt, yt) = flow.data.load_digits()
    return x[:256], y[:256], (xt[:64], yt[:64])


def model(place="mirrored2", lr=0.05, optimizer=None, steps_per_execution=1):
    view, n = PLACES[place]
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    flow.clear_session()
    flow.config.set_seed(0)
    x = flow.Input((1, 8, 8))
    h = flow.layers.Dense(16, activation="relu")(flow.layers.Flatten()(x))
    m = flow.Model(x, flow.layers.Dense(10)(h))
    m.compile(optimizer or flow.optimizers.SGD(lr), flow.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"], steps_per_execution=steps_per_execution)
    return m


def fit(m, digits, epochs, callbacks):
    x, y, val = digits
    return m.fit(x, y, batch_size=32, epochs=epochs, validation_data=val, callbacks=callbacks, shuffle=False,
                 verbose=0).history


def both(make, digits, epochs=6, place="mirrored2", lr=0.05, steps_per_execution=1):
    """``make(callbacks_module)`` -> callbacks; the run with flowlayers' and the run with Keras' callbacks."""
    runs = {}
    for space in (flow.callbacks, keras.callbacks):
        m = model(place, lr, steps_per_execution=steps_per_execution)
        runs[space] = m, fit(m, digits, epochs, make(space))
    return runs[flow.callbacks], runs[keras.callbacks]


def assert_same_runs(ours, theirs):
    (m, history), (km, keras_history) = ours, theirs
    assert history.keys() == keras_history.keys()
    for key in history:
        np.testing.assert_array_equal(history[key], keras_history[key], err_msg=key)
    for a, b in zip(m.get_weights(), km.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("place", ["mirrored2", "consistent2"])
def test_early_stopping_restores_the_best_weights_as_keras_does(place, digits):
    # no later epoch beats the first one watched (epoch 1) by min_delta: two more, stop, go back to epoch 1's weights
    ours, theirs = both(lambda cb: [cb.EarlyStopping(monitor="val_loss", min_delta=10.0, patience=2,
                                                     restore_best_weights=True, start_from_epoch=1)],
                        digits, epochs=8, place=place)
    assert_same_runs(ours, theirs)
    assert len(ours[1]["loss"]) == 4


def test_early_stopping_with_a_baseline_never_reached(digits):
    ours, theirs = both(lambda cb: [cb.EarlyStopping(monitor="val_loss", min_delta=10.0, baseline=0.0, patience=2,
                                                     verbose=1)], digits, epochs=6)
    assert_same_runs(ours, theirs)
    assert len(ours[1]["loss"]) == 2       # the first epoch, below the baseline, does not reset the wait


def test_auto_mode_reads_the_direction_of_the_metric(digits):
    """Keras' EarlyStopping cannot tell which way a flowlayers metric goes (it looks for its own compile
    containers); flowlayers' reads the metric's ``_direction``, as Keras' does for its own metrics."""
    runs, watching = {}, {}
    for monitor, mode in (("val_accuracy", "auto"), ("val_accuracy", "max"), ("loss", "auto")):
        watching[monitor, mode] = flow.callbacks.EarlyStopping(monitor=monitor, mode=mode, min_delta=0.05,
                                                               patience=1)
        runs[monitor, mode] = fit(model(lr=0.2), digits, 3, [watching[monitor, mode]])
    assert runs["val_accuracy", "auto"] == runs["val_accuracy", "max"]
    assert watching["val_accuracy", "auto"].monitor_op is operator.gt
    assert watching["loss", "auto"].monitor_op is operator.lt


def test_a_monitor_of_unknown_direction_is_refused_by_name(digits):
    m = model()
    m.compile(flow.optimizers.SGD(0.05), flow.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=[flow.metrics.MeanMetricWrapper(lambda y, p: flow.ops.mean(p, axis=-1), name="misses")])
    with pytest.raises(flow.ConfigError, match=r"EarlyStopping: cannot tell whether monitor='val_misses' should be "
                                               r"maximised or minimised .* pass mode='max' or mode='min'"):
        fit(m, digits, 2, [flow.callbacks.EarlyStopping(monitor="val_misses")])
    assert len(fit(m, digits, 1, [])["loss"]) == 1       # the model still trains


def test_every_metric_goes_the_way_keras_says():
    checked = 0
    for name in dir(flow.metrics):
        ours, theirs = getattr(flow.metrics, name), getattr(keras.metrics, name, None)
        if not isinstance(ours, type) or not isinstance(theirs, type) or not issubclass(ours, flow.metrics.Metric):
            continue
        kwargs = {k: v for k, v in dict(num_classes=2, recall=0.5, precision=0.5, specificity=0.5, sensitivity=0.5,
                                         fn=abs).items() if k in theirs.__init__.__code__.co_varnames}
        assert ours._direction == getattr(theirs(**kwargs), "_direction", None), name
        checked += 1
    assert checked >= 30


def test_reduce_lr_on_plateau_and_its_cooldown_as_keras(digits):
    ours, theirs = both(lambda cb: [cb.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=1, min_delta=0.05,
                                                         cooldown=1, min_lr=0.02)], digits, epochs=7, lr=1.0)
    assert_same_runs(ours, theirs)
    assert ours[1]["learning_rate"][-1] < 1.0 and ours[0].optimizer.learning_rate == ours[1]["learning_rate"][-1]


@pytest.mark.parametrize("schedule", [lambda epoch, lr: lr * 0.5 if epoch % 2 else lr,
                                      lambda epoch: 0.1 / (1 + epoch),
                                      lambda *args: args[1] * 0.5], ids=["epoch_and_rate", "epoch", "varargs"])
def test_learning_rate_scheduler_as_keras(schedule, digits):
    ours, theirs = both(lambda cb: [cb.LearningRateScheduler(schedule)], digits, epochs=4)
    assert_same_runs(ours, theirs)
    assert len(set(ours[1]["learning_rate"])) > 1


def test_model_checkpoint_writes_the_files_keras_writes(digits, tmp_path):
    def make(cb):
        folder = tmp_path / cb.__name__
        return [cb.ModelCheckpoint(str(folder / "best-{epoch:02d}-{val_loss:.3f}.keras"), monitor="val_accuracy",
                                   mode="max", save_best_only=True),
                cb.ModelCheckpoint(str(folder / "e{epoch}-b{batch}.weights.h5"), save_weights_only=True, save_freq=3),
                cb.ModelCheckpoint(str(folder / "f{epoch}-b{batch}.weights.h5"), save_weights_only=True, save_freq=4)]
    ours, theirs = both(make, digits, epochs=3, steps_per_execution=2)     # batch hooks end 2 batches each
    assert_same_runs(ours, theirs)
    names = sorted(os.listdir(tmp_path / "flowlayers.callbacks"))
    assert names == sorted(os.listdir(tmp_path / "keras.callbacks")) and len(names) > 4
    last = sorted(n for n in names if n.startswith("best-"))[-1]
    loaded = flow.models.load_model(str(tmp_path / "flowlayers.callbacks" / last))
    best = int(np.argmax(ours[1]["val_accuracy"]))
    assert last.startswith(f"best-{best + 1:02d}-")
    np.testing.assert_array_equal(loaded.predict(digits[2][0], verbose=0).shape, (64, 10))


def test_csv_logger_writes_what_keras_writes(digits, tmp_path):
    def make(cb):
        return [cb.CSVLogger(str(tmp_path / f"{cb.__name__}.csv"), separator=";", append=True)]
    for _ in range(2):      # the second run appends, without a second header
        both(make, digits, epochs=2)
    ours = (tmp_path / "flowlayers.callbacks.csv").read_text()
    assert ours == (tmp_path / "keras.callbacks.csv").read_text()
    assert ours.count("epoch;") == 1 and len(ours.splitlines()) == 5


def diverging(cb):
    return [cb.TerminateOnNaN(), cb.LambdaCallback(on_train_batch_end=lambda batch, logs: seen[cb].append(
        (batch, float(logs["loss"]))))]


seen = {flow.callbacks: [], keras.callbacks: []}


def test_terminate_on_nan_stops_at_the_batch_keras_stops_at(digits):
    for space in seen:
        seen[space].clear()
    ours, theirs = both(diverging, digits, epochs=3, lr=1e12)
    assert seen[flow.callbacks] == seen[keras.callbacks] or np.isnan(seen[flow.callbacks][-1][1])
    assert [b for b, _ in seen[flow.callbacks]] == [b for b, _ in seen[keras.callbacks]]
    assert not np.isfinite(seen[flow.callbacks][-1][1]) and len(seen[flow.callbacks]) < 24
    with pytest.raises(RuntimeError, match="NaN or Inf loss encountered at batch"):
        fit(model(lr=1e12), digits, 1, [flow.callbacks.TerminateOnNaN(raise_error=True)])


def test_keras_batch_hooks_under_older_names_get_the_logs(digits):
    """Keras' callbacks that override ``on_batch_end`` (TerminateOnNaN does) or set hooks on the object
    (LambdaCallback does) read the batch logs: the loop must hand them the losses, not an empty dict."""
    got = []

    class OnBatchEnd(keras.callbacks.Callback):
        def on_batch_end(self, batch, logs=None):
            got.append(dict(logs))

    fit(model(), digits, 1, [OnBatchEnd()])
    assert len(got) == 8 and all("loss" in logs for logs in got)


@pytest.mark.parametrize("make, message", [
    (lambda: flow.callbacks.EarlyStopping(mode="bigger"), r"EarlyStopping: mode expected one of \['auto', 'min', "
                                                          r"'max'\], received 'bigger'"),
    (lambda: flow.callbacks.EarlyStopping(patience=-1), r"EarlyStopping: patience expected an int >= 0"),
    (lambda: flow.callbacks.ModelCheckpoint("model.txt"), r"ModelCheckpoint: expected a filepath ending in "
                                                          r"\.keras .*received 'model\.txt'"),
    (lambda: flow.callbacks.ModelCheckpoint("m.keras", save_weights_only=True), r"ending in \.weights\.h5"),
    (lambda: flow.callbacks.ModelCheckpoint("m.keras", save_freq="batch"), r"save_freq expected 'epoch' or a "
                                                                           r"positive int"),
    (lambda: flow.callbacks.ReduceLROnPlateau(factor=1.0), r"ReduceLROnPlateau: factor expected a number in "
                                                           r"\[0, 1\), received 1\.0"),
    (lambda: flow.callbacks.LambdaCallback(on_epoch_ending=print), r"LambdaCallback: unexpected keyword "
                                                                   r"argument\(s\) \['on_epoch_ending'\]"),
    (lambda: flow.callbacks.LearningRateScheduler(0.1), r"LearningRateScheduler: schedule expected a function"),
])
def test_a_wrong_argument_is_refused_by_name(make, message):
    with pytest.raises(flow.ConfigError, match=message):
        make()


@pytest.mark.parametrize("callback, message", [
    (lambda: flow.callbacks.LearningRateScheduler(lambda epoch: 1), r"LearningRateScheduler: expected the schedule "
                                                                    r"to return a float, received 1 for epoch 0"),
    (lambda: flow.callbacks.ModelCheckpoint("m-{val_los}.keras"), r"ModelCheckpoint: the filepath 'm-\{val_los\}"
                                                                  r"\.keras' names 'val_los'"),
])
def test_a_mistake_found_in_fit_leaves_the_model_usable(callback, message, digits, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    m = model()
    with pytest.raises(flow.ConfigError, match=message):
        fit(m, digits, 2, [callback()])
    assert len(fit(m, digits, 1, [])["loss"]) == 1


def test_a_schedule_is_not_set_from_an_epoch(digits):
    m = model(optimizer=flow.optimizers.SGD(lambda step: 0.1 * 0.5 ** (step / 10)))
    with pytest.raises(flow.ConfigError, match=r"ReduceLROnPlateau: expected the optimizer 'sgd' to have a float "
                                               r"learning_rate, received the schedule"):
        fit(m, digits, 1, [flow.callbacks.ReduceLROnPlateau()])


@pytest.mark.parametrize("name", ["EarlyStopping", "ReduceLROnPlateau", "LearningRateScheduler", "ModelCheckpoint",
                                  "CSVLogger", "TerminateOnNaN", "LambdaCallback"])
def test_the_arguments_and_defaults_are_keras(name):
    ours, theirs = (inspect.signature(getattr(space, name).__init__).parameters
                    for space in (flow.callbacks, keras.callbacks))
    assert [(p.name, p.default) for p in ours.values()] == [(p.name, p.default) for p in theirs.values()]
