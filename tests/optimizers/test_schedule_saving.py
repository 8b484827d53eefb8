"""A model compiled with a schedule (and one of the rules Keras 3 keeps in its files) saved and loaded: a
``.keras`` file written here opens in Keras 3 with the same optimizer, schedule and variables, one Keras wrote
opens here likewise; flowlayers' checkpoint directory keeps the schedule and the step it has reached."""
import keras
import numpy as np
import pytest

import flowlayers as flow

S, KS = flow.optimizers.schedules, keras.optimizers.schedules
X = np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32)
Y = np.random.default_rng(1).standard_normal((16, 2)).astype(np.float32)


def flow_model(optimizer):
    flow.clear_session()
    flow.config.set_seed(3)
    x = flow.Input((4,))
    model = flow.Model(x, flow.layers.Dense(2)(flow.layers.Dense(3, activation="tanh")(x)))
    model.compile(optimizer, "mse")
    return model


def keras_model(optimizer):
    keras.utils.set_random_seed(3)
    x = keras.Input((4,))
    model = keras.Model(x, keras.layers.Dense(2)(keras.layers.Dense(3, activation="tanh")(x)))
    model.compile(optimizer, "mse")
    return model


def flow_optimizer_arrays(model):
    """iterations, then the slots in Keras' order (one call of Keras' add_optimizer_variables per slot tuple)."""
    opt = model.optimizer
    per_var = [dict(zip(opt.slot_names, opt.slots(w))) for w in model.trainable_weights]
    state = [v.numpy() for v in opt.state_variables().values()]
    return [np.asarray(opt.iterations)] + [held[name].numpy() for held in per_var for name in opt.slot_names] + state


@pytest.mark.parametrize("cls", ["Adamax", "Adagrad", "Nadam", "Ftrl"])
def test_a_keras_file_with_a_schedule_opens_in_keras(tmp_path, cls):
    model = flow_model(getattr(flow.optimizers, cls)(S.CosineDecay(0.01, 5, warmup_target=0.05, warmup_steps=2)))
    model.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    model.save(tmp_path / "m.keras")
    theirs = keras.models.load_model(tmp_path / "m.keras")
    assert type(theirs.optimizer) is getattr(keras.optimizers, cls)
    schedule = theirs.optimizer._learning_rate
    assert type(schedule) is KS.CosineDecay and schedule.get_config() == model.optimizer.learning_rate.get_config()
    got = [keras.ops.convert_to_numpy(v) for v in theirs.optimizer.variables]
    want = flow_optimizer_arrays(model)
    assert len(got) == len(want) and int(got[0]) == 4
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(theirs.predict(X, verbose=0), model.predict(X, verbose=0), atol=1e-6)


def test_a_keras_file_keras_wrote_with_a_schedule_opens_here(tmp_path):
    theirs = keras_model(keras.optimizers.Nadam(KS.ExponentialDecay(0.01, 3, 0.5, staircase=True)))
    theirs.fit(X, Y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    theirs.save(tmp_path / "k.keras")
    model = flow.models.load_model(tmp_path / "k.keras")
    assert type(model.optimizer) is flow.optimizers.Nadam and model.optimizer.iterations == 2
    assert model.optimizer.learning_rate.get_config() == theirs.optimizer._learning_rate.get_config()
    want = [keras.ops.convert_to_numpy(v) for v in theirs.optimizer.variables]
    assert len(want) == len(flow_optimizer_arrays(model)) == 1 + 2 * 4 + 1    # iterations, 2 slots x 4, u_product
    for a, b in zip(flow_optimizer_arrays(model), want):
        np.testing.assert_array_equal(a, b)
    # one more epoch on each side from there: the same weights (the schedule goes on from step 2)
    model.fit(X, Y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    theirs.fit(X, Y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(model.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_a_checkpoint_directory_keeps_the_schedule_and_its_step(tmp_path):
    schedule = S.PiecewiseConstantDecay([1, 3], [0.1, 0.05, 0.01])
    model = flow_model(flow.optimizers.Nadam(schedule))
    model.fit(X, Y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    model.save(tmp_path / "ckpt")
    again = flow.models.load_model(tmp_path / "ckpt")
    assert type(again.optimizer) is flow.optimizers.Nadam and again.optimizer.iterations == 2
    assert type(again.optimizer.learning_rate) is S.PiecewiseConstantDecay
    assert again.optimizer.learning_rate.get_config() == schedule.get_config()
    model.fit(X, Y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    again.fit(X, Y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(again.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_a_plain_callable_learning_rate_is_still_refused_by_name(tmp_path):
    model = flow_model(flow.optimizers.SGD(lambda step: 0.1))
    with pytest.raises(flow.ConfigError, match=r"has a callable learning_rate .* expected a number or a "
                                               r"flow.optimizers.schedules schedule"):
        model.save(tmp_path / "ckpt")


class StopAfterFirstEpoch(flow.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        raise KeyboardInterrupt


@pytest.mark.parametrize("view", ["mirrored", "consistent"])
def test_backup_and_restore_resumes_nadam_and_its_schedule(tmp_path, view):
    """Nadam keeps state beyond its slots (its momentum schedule's product): an interrupted fit resumed from the
    backup ends where an uninterrupted one ends, the schedule going on from the saved step."""
    flow.config.set_view(view)
    flow.config.gpu_device_num(2)
    make = lambda: flow_model(flow.optimizers.Nadam(S.InverseTimeDecay(0.05, 2, 0.5)))  # noqa: E731
    reference = make()
    reference.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    with pytest.raises(KeyboardInterrupt):
        make().fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0,
                   callbacks=[flow.callbacks.BackupAndRestore(tmp_path), StopAfterFirstEpoch()])
    model = make()
    model.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0,
              callbacks=[flow.callbacks.BackupAndRestore(tmp_path)])
    assert model.optimizer.iterations == 4
    u_product = model.optimizer.state_variables()["u_product"].numpy()
    assert u_product == reference.optimizer.state_variables()["u_product"].numpy() != 1.0
    for a, b in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_array_equal(a, b)
