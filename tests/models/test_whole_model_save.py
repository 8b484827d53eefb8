"""``model.save`` / ``flow.models.load_model``: the whole model (architecture, compile settings, weights, optimizer
state) comes back in any view and device count, predicts the same and trains on from where it stopped; custom
layers come through ``custom_objects``; nothing in the file is executed, and every refusal is named."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import flowlayers as flow
from flowlayers import layers as L
from places import use

RNG = np.random.default_rng(3)
X = RNG.normal(size=(48, 8, 8, 2)).astype(np.float32)
Y = RNG.integers(0, 3, 48).astype(np.int32)


def cnn(batch_norm=True):
    """Convolution, BatchNormalization, ops outside layers (``h * 2 + 1``) and a merge in one functional graph.
    (Mirrored BatchNormalization normalises each replica by its own batch, so views compare without it.)"""
    x = flow.Input((8, 8, 2), name="image")
    h = L.Conv2D(4, 3, padding="same", activation="relu")(x)
    if batch_norm:
        h = L.BatchNormalization()(h)
    h = L.MaxPooling2D()(h)
    h = L.GlobalAveragePooling2D()(h)
    h = L.add([h, h * 2.0 + 1.0])
    return flow.Model(x, L.Dense(3, activation="softmax")(h), name="cnn")


def fit(model, epochs=1):
    return model.fit(X, Y, batch_size=16, epochs=epochs, shuffle=False, verbose=0).history


def assert_same_weights(a, b, atol=0.0):
    assert len(a) == len(b)
    for u, v in zip(a, b):
        np.testing.assert_allclose(u, v, atol=atol, rtol=0)


def test_a_saved_model_predicts_and_trains_on_exactly_as_the_original(tmp_path):
    use("mirrored", 1)
    model = cnn()
    model.compile(flow.optimizers.Adam(0.01), "sparse_categorical_crossentropy", metrics=["acc"])
    fit(model)
    model.save(tmp_path / "cnn.keras")
    loaded = flow.models.load_model(tmp_path / "cnn.keras")
    assert type(loaded) is flow.Model and loaded.name == "cnn"
    assert [type(l).__name__ for l in loaded.layers] == [type(l).__name__ for l in model.layers]
    assert loaded.input_names == ["image"] and loaded.metrics_names == ["loss", "acc"]
    assert type(loaded.optimizer) is flow.optimizers.Adam and loaded.optimizer.learning_rate == 0.01
    assert loaded.optimizer.iterations == model.optimizer.iterations == 3
    np.testing.assert_array_equal(loaded.predict(X, verbose=0), model.predict(X, verbose=0))
    # the optimizer's moments came back: a further epoch gives the same History and weights
    assert fit(loaded) == fit(model)
    assert_same_weights(loaded.get_weights(), model.get_weights())


@pytest.mark.parametrize("saved_in, loaded_in", [(("consistent", 2), ("mirrored", 4)),
                                                 (("mirrored", 2), ("consistent", 4))])
def test_a_model_saved_in_one_view_loads_and_trains_in_another(tmp_path, saved_in, loaded_in):
    use(*saved_in)
    model = cnn(batch_norm=False)
    model.compile(flow.optimizers.SGD(0.05, momentum=0.9), "sparse_categorical_crossentropy")
    fit(model)
    model.save(tmp_path / "m")
    expected = fit(model, 2)
    use(*loaded_in)
    loaded = flow.models.load_model(tmp_path / "m")
    np.testing.assert_allclose(fit(loaded, 2)["loss"], expected["loss"], rtol=1e-5)
    assert_same_weights(loaded.get_weights(), model.get_weights(), atol=1e-5)


def test_sequential_nested_and_multi_output_models_come_back_whole(tmp_path):
    use("consistent", 2)
    encoder = flow.Sequential([flow.Input((6,)), L.Dense(8, activation="relu", name="enc_hidden"),
                               L.Dense(4, name="enc_out")], name="encoder")
    a, b = flow.Input((6,), name="a"), flow.Input((6,), name="b")
    ea, eb = encoder(a), encoder(b)                                  # the encoder's weights shared by both calls
    score = L.Dense(1, name="score")(L.subtract([ea, eb]))
    label = L.Dense(2, name="label")(L.concatenate([ea, eb]))
    model = flow.Model({"a": a, "b": b}, {"score": score, "label": label}, name="siamese")
    model.compile("adam", loss={"score": "mse", "label": "sparse_categorical_crossentropy"},
                  loss_weights={"score": 0.5, "label": 1.0}, metrics={"label": ["accuracy"]})
    rng = np.random.default_rng(0)
    x = {"a": rng.normal(size=(16, 6)).astype(np.float32), "b": rng.normal(size=(16, 6)).astype(np.float32)}
    y = {"score": rng.normal(size=(16, 1)).astype(np.float32), "label": rng.integers(0, 2, 16)}
    model.fit(x, y, batch_size=8, verbose=0)
    model.save(tmp_path / "siamese")
    loaded = flow.models.load_model(tmp_path / "siamese")
    inner = loaded.get_layer("encoder")
    assert type(inner) is flow.Sequential and [l.name for l in inner.layers] == ["enc_hidden", "enc_out"]
    names = [l.name for l in loaded.layers]       # Keras' order: by depth from the outputs (the encoder deepest)
    assert inner.output.shape == (None, 4) and names[0] == "encoder"
    assert sorted(names[1:]) == ["concatenate", "label", "score", "subtract"]
    with pytest.raises(flow.GraphError, match="output expected a model with one output, received 2 outputs"):
        loaded.output
    assert len(loaded.weights) == len(model.weights) == 8            # the shared encoder counted once
    assert loaded.metrics_names == model.metrics_names == ["loss", "score_loss", "label_loss", "label_accuracy"]
    got, want = loaded.predict(x, verbose=0), model.predict(x, verbose=0)
    assert sorted(got) == ["label", "score"]
    for k in got:
        np.testing.assert_array_equal(got[k], want[k])
    assert loaded.evaluate(x, y, verbose=0) == model.evaluate(x, y, verbose=0)
    loaded.fit(x, y, batch_size=8, verbose=0, shuffle=False)
    model.fit(x, y, batch_size=8, verbose=0, shuffle=False)
    assert_same_weights(loaded.get_weights(), model.get_weights())
    assert_same_weights(inner.get_weights(), encoder.get_weights())   # the nested model trained in place


class Scale(L.Layer):
    """A custom layer: one learned factor per feature, times a fixed ``factor``."""

    def __init__(self, factor=1.0, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def build(self, input_shape):
        self.w = self.add_weight("w", (input_shape[-1],), initializer="ones")

    def call(self, x):
        return x * self.read(self.w) * self.factor

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}


class Forgetful(Scale):
    """Takes ``factor`` but does not return it from get_config."""

    def get_config(self):
        return L.Layer.get_config(self)


class Needy(L.Layer):
    """Takes ``units`` through ``*args``, which get_config cannot see."""

    def __init__(self, *args, **kwargs):
        self.units = args[0]
        super().__init__(**kwargs)

    def call(self, x):
        return x * float(self.units)


def test_custom_layers_load_through_custom_objects(tmp_path):
    x = flow.Input((4,))
    model = flow.Model(x, L.Dense(2)(Scale(3.0, name="scale")(x)))
    model.layers[0].set_weights([np.array([1.0, 2.0, 3.0, 4.0], np.float32)])
    flow.models.save_model(model, tmp_path / "m")           # Keras' function form of model.save
    with pytest.raises(flow.CheckpointError, match=r"layer 'scale' is of class 'Scale'.*custom_objects"):
        flow.models.load_model(tmp_path / "m")
    loaded = flow.models.load_model(tmp_path / "m", custom_objects={"Scale": Scale})
    assert type(loaded.get_layer("scale")) is Scale and loaded.get_layer("scale").factor == 3.0
    data = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(loaded.predict(data, verbose=0), model.predict(data, verbose=0))


def test_a_layer_whose_config_does_not_make_it_again_is_refused_before_anything_is_written(tmp_path):
    x = flow.Input((4,))
    model = flow.Model(x, Forgetful(3.0, name="forgetful")(x))
    with pytest.raises(flow.LayerError, match=r"layer 'forgetful' \(Forgetful\): its constructor takes \['factor'\]"):
        model.save(tmp_path / "m")
    assert not os.path.exists(tmp_path / "m")
    model = flow.Model(x, Needy(4, name="needy")(x))
    with pytest.raises(flow.LayerError, match=r"layer 'needy' \(Needy\): from_config\(get_config\(\)\) failed.*IndexError"):
        model.save(tmp_path / "m")
    assert not os.path.exists(tmp_path / "m")
    assert L.Dense(1).name == "dense"         # the trial remake took no automatic name


class Block(L.Layer):
    """A custom layer that makes its own Dense in its constructor (taking an automatic name)."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units, self.inner = units, L.Dense(units)

    def call(self, x):
        return self.inner(x)

    def get_config(self):
        return {**super().get_config(), "units": self.units}


def test_a_save_takes_no_automatic_name(tmp_path):
    """The save's trial remake of each layer leaves automatic names as they were: a layer made after a save is
    named as it would be without it."""
    x = flow.Input((4,))
    flow.Model(x, Block(3, name="block")(x)).save(tmp_path / "m")
    assert L.Dense(1).name == "dense_1"       # the Block's own Dense took "dense"


def test_nothing_in_the_file_names_code_that_would_run(tmp_path):
    """A tampered file naming any importable callable (``os.system``) is refused: classes come only from
    flowlayers' own layers and ``custom_objects``."""
    x = flow.Input((4,))
    flow.Model(x, L.Dense(2, name="d")(x)).save(tmp_path / "m")
    manifest = tmp_path / "m" / "manifest.json"
    saved = json.loads(manifest.read_text())
    saved["state"]["model"]["owners"]["d"].update(module="os", class_name="system", config={"command": "touch pwned"})
    manifest.write_text(json.dumps(saved))
    with pytest.raises(flow.CheckpointError, match=r"layer 'd' is of class 'system' \(module 'os'\)"):
        flow.models.load_model(tmp_path / "m")
    assert not os.path.exists("pwned")
    assert "pickle" not in (tmp_path / "m" / "manifest.json").read_text()


def test_load_model_without_compile_then_compiled_takes_the_saved_optimizer_state(tmp_path):
    model = cnn()
    model.compile(flow.optimizers.Adam(0.01), "sparse_categorical_crossentropy")
    fit(model)
    model.save(tmp_path / "m")
    loaded = flow.models.load_model(tmp_path / "m", compile=False)
    assert loaded.optimizer is None and loaded.loss is None
    np.testing.assert_array_equal(loaded.predict(X, verbose=0), model.predict(X, verbose=0))
    loaded.compile(flow.optimizers.Adam(0.01), "sparse_categorical_crossentropy")
    assert fit(loaded) == fit(model)
    assert_same_weights(loaded.get_weights(), model.get_weights())


def test_refusals_are_named_and_leave_files_alone(tmp_path):
    x = flow.Input((4,))
    model = flow.Model(x, L.Dense(2)(x))
    model.save_weights(tmp_path / "weights_only")
    with pytest.raises(flow.CheckpointError, match="a checkpoint of weights only .*load_weights"):
        flow.models.load_model(tmp_path / "weights_only")
    with pytest.raises(flow.CheckpointError, match="a path that does not exist"):
        flow.models.load_model(tmp_path / "nothing")
    with pytest.raises(flow.CheckpointError, match=r"expected a path ending in \.weights\.h5"):
        model.save_weights(tmp_path / "m.h5")
    with pytest.raises(flow.ConfigError, match="zipped=True does not fit the path"):
        model.save(tmp_path / "m", zipped=True)
    with pytest.raises(flow.ConfigError, match=r"unexpected keyword argument\(s\) \['save_format'\]"):
        model.save(tmp_path / "m", save_format="tf")
    with pytest.raises(flow.ConfigError, match="safe_mode=False is not supported"):
        flow.models.load_model(tmp_path / "weights_only", safe_mode=False)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(flow.CheckpointError, match="holding other files"):
        model.save(tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"
    model.save(tmp_path / "m")
    with pytest.raises(flow.CheckpointError, match="exists and overwrite=False"):
        model.save(tmp_path / "m", overwrite=False)
    model.compile(flow.optimizers.SGD(lambda step: 0.1), "mse")
    with pytest.raises(flow.ConfigError, match="callable learning_rate"):
        model.save(tmp_path / "m")
    assert flow.models.load_model(tmp_path / "m").optimizer is None     # the earlier save is whole


@pytest.mark.slow
def test_a_model_loads_in_a_fresh_process_in_another_view(tmp_path):
    """Saved here (consistent, 2 devices); loaded by a new Python process (mirrored, 4) that knows only the path."""
    use("consistent", 2)
    model = cnn()
    model.compile(flow.optimizers.Adam(0.01), "sparse_categorical_crossentropy", metrics=["accuracy"])
    fit(model)
    model.save(tmp_path / "m")
    np.save(tmp_path / "x.npy", X)
    program = textwrap.dedent(f"""
        import numpy as np, flowlayers as flow
        flow.config.set_view("mirrored"); flow.config.gpu_device_num(4)
        model = flow.models.load_model({str(tmp_path / "m")!r})
        np.save({str(tmp_path / "p.npy")!r}, model.predict(np.load({str(tmp_path / "x.npy")!r}), verbose=0))
    """)
    env = dict(os.environ, FLOWLAYERS_CPU_DEVICES="4", TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    np.testing.assert_allclose(np.load(tmp_path / "p.npy"), model.predict(X, verbose=0), atol=1e-6)


def test_keras_model_checkpoint_saves_the_whole_model(tmp_path):
    import keras

    model = cnn()
    model.compile("adam", "sparse_categorical_crossentropy")
    model.fit(X, Y, batch_size=16, epochs=2, verbose=0,
              callbacks=[keras.callbacks.ModelCheckpoint(str(tmp_path / "latest.keras"))])
    loaded = flow.models.load_model(tmp_path / "latest.keras")
    assert loaded.optimizer.iterations == 6
    np.testing.assert_array_equal(loaded.predict(X, verbose=0), model.predict(X, verbose=0))
