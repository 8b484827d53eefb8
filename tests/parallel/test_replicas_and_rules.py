"""What must differ between replicas, what must agree, and which variables a layout rule reaches.

- Mirrored view: each replica draws its own dropout mask (one seed for all would repeat a mask on every device
  and train on correlated noise), and every mask keeps about 1 - rate of the values, scaled by 1 / (1 - rate).
- Mirrored view: BatchNormalization normalises with each replica's batch statistics (the documented exception)
  and its moving statistics are the mean over replicas of what each replica computed: checked against numpy in
  float64, and the moving mean equal to one device's.
- Layout rules match a variable's path with ``re.search``, as documented: a rule that matches only past the
  path's start (``/kernel$``) really splits the variable, and training still ends at one device's weights.
"""
import numpy as np
import pytest

import flowlayers as flow

RATE, WIDTH = 0.5, 256


def dropout_outputs(devices, rows):
    flow.clear_session()                # the same layer name, so the same op seed, on every call
    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(devices)
    x = flow.Input((WIDTH,))
    model = flow.Model(x, flow.layers.Dropout(RATE)(x, training=True))
    return model.predict(np.ones((rows, WIDTH), np.float32), batch_size=rows, verbose=0)


@pytest.mark.parametrize("devices", [2, 4])
def test_each_mirrored_replica_draws_its_own_dropout_mask(devices):
    out = dropout_outputs(devices, rows=devices)        # one row per replica
    assert set(np.unique(out)) == {0.0, 1.0 / (1.0 - RATE)}
    kept = (out != 0).mean(axis=1)
    assert np.all((kept > 0.35) & (kept < 0.65)), kept
    masks = {tuple(row) for row in (out != 0)}
    assert len(masks) == devices, f"{devices} replicas drew {len(masks)} distinct masks"


def test_dropout_masks_repeat_on_a_rerun_and_change_with_the_seed():
    first = dropout_outputs(2, rows=2)
    assert np.array_equal(first, dropout_outputs(2, rows=2))
    flow.config.set_seed(1)
    assert not np.array_equal(first, dropout_outputs(2, rows=2))


MOMENTUM, FEATURES, BN_BATCH = 0.5, 3, 8


def train_batch_norm(devices, x):
    """One step at learning rate 0: only the moving statistics change."""
    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(devices)
    inp = flow.Input((FEATURES,))
    h = flow.layers.BatchNormalization(momentum=MOMENTUM, name="bn")(inp)
    model = flow.Model(inp, flow.layers.Dense(1, name="out")(h))
    model.compile(optimizer=flow.optimizers.SGD(0.0), loss=flow.losses.MeanSquaredError())
    model.fit(x, np.zeros((len(x), 1), np.float32), batch_size=len(x), epochs=1, shuffle=False, verbose=0)
    return {w.path.split("/")[-1]: w.numpy() for w in model.weights if w.path.startswith("bn/")}


@pytest.mark.parametrize("devices", [1, 2, 4])
def test_mirrored_batch_norm_moving_statistics_average_the_replicas(devices):
    rng = np.random.default_rng(0)
    # each replica's rows drawn around another centre and spread: per-replica statistics differ a lot
    x = np.concatenate([rng.normal(3.0 * i, 1.0 + i, (BN_BATCH // devices, FEATURES)) for i in range(devices)])
    got = train_batch_norm(devices, x.astype(np.float32))
    shards = np.split(x.astype(np.float64), devices)
    mean = np.mean([s.mean(axis=0) for s in shards], axis=0)
    var = np.mean([s.var(axis=0) for s in shards], axis=0)
    np.testing.assert_allclose(got["moving_mean"], MOMENTUM * 0.0 + (1 - MOMENTUM) * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["moving_variance"], MOMENTUM * 1.0 + (1 - MOMENTUM) * var, rtol=1e-5, atol=1e-6)
    # the moving mean of equal shards is one device's; the variance is not (it leaves out the spread of the means)
    whole = x.astype(np.float64)
    np.testing.assert_allclose(got["moving_mean"], (1 - MOMENTUM) * whole.mean(axis=0), rtol=1e-5, atol=1e-6)
    if devices > 1:
        assert np.all(got["moving_variance"] < MOMENTUM + (1 - MOMENTUM) * whole.var(axis=0) - 0.1)


def mlp():
    flow.clear_session()
    flow.config.set_seed(2)
    x = flow.Input((8,))
    h = flow.layers.Dense(16, activation="relu", name="hidden")(x)
    model = flow.Model(x, flow.layers.Dense(4, name="out")(h))
    model.compile(optimizer=flow.optimizers.SGD(0.1, momentum=0.9), loss=flow.losses.MeanSquaredError())
    return model


def fit(model):
    rng = np.random.default_rng(1)
    model.fit(rng.standard_normal((32, 8)).astype(np.float32), rng.standard_normal((32, 4)).astype(np.float32),
              batch_size=16, epochs=1, shuffle=False, verbose=0)
    return model.get_weights()


@pytest.mark.parametrize("pattern", [r"/kernel$", r"kernel", r"n/k"])
def test_layout_rules_match_anywhere_in_the_path(pattern):
    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(1)
    reference = fit(mlp())
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(4)
    flow.config.set_mesh(data=2, model=2)
    flow.config.set_layout_rules({pattern: (None, "model")})
    model = mlp()
    weights = fit(model)
    plan = model.parallel_plan()
    assert plan.variables["hidden/kernel"].shard_shape == (8, 8)       # split over model=2
    assert plan.variables["hidden/bias"].shard_shape == (16,)
    assert plan.variables["out/kernel"].shard_shape == ((16, 4) if pattern == "n/k" else (16, 2))
    assert max(float(np.abs(a - b).max()) for a, b in zip(reference, weights)) < 1e-5
