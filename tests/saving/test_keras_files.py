"""Keras 3's files written and read by flowlayers in this process: ``model.save("m.keras")`` is Keras' zip in Keras'
own terms (the layer configs and the weights layout Keras writes for the same model), ``save_weights`` to
``.weights.h5`` Keras' weights file, ``.h5`` the legacy HDF5 model (Keras 2's too); they load in another view, Keras'
ModelCheckpoint writes them, nothing from a file runs, every refusal is named and changes nothing, a write is whole
or not at all.  (Keras in its own process, on both its backends: ``test_keras_interop.py``.)"""
import json
import os
import warnings
import zipfile

import h5py
import keras
import numpy as np
import pytest

import flowlayers as flow
from flowlayers.models.keras_files import hdf5 as flow_hdf5
from keras_file_models import MODELS, compile_and_fit, data

L = flow.layers


def mlp(name="mlp", numbers=True):
    """Two Dense layers with ops between them: on numbers (``h * 2.0 + 1.0``), or on Blobs only (``h + h``)."""
    x = flow.Input((4,), name="features")
    h = L.Dense(8, activation="relu", name="hidden")(x)
    return flow.Model(x, L.Dense(3, name="out")(h * 2.0 + 1.0 if numbers else h + h), name=name)


X4 = np.random.default_rng(1).normal(size=(8, 4)).astype(np.float32)


def datasets(path_or_file):
    """{dataset path: shape} of an HDF5 file."""
    found = {}
    with h5py.File(path_or_file, "r") as f:
        f.visititems(lambda name, obj: found.__setitem__(name, obj.shape) if isinstance(obj, h5py.Dataset) else None)
    return found


def keras_members(path):
    with zipfile.ZipFile(path) as zf:
        return zf.namelist(), json.loads(zf.read("config.json")), zf.read("model.weights.h5")


def rewrite_config(path, change):
    """The .keras file at ``path`` with ``change(config)`` applied to its config.json."""
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    config = json.loads(members["config.json"])
    change(config)
    members["config.json"] = json.dumps(config).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for n, b in members.items():
            zf.writestr(n, b)


def axes(axis, rank):
    """An axis config (an int or a list) as the sorted axes it names of a rank-``rank`` input: flowlayers' built
    normalization layers write 3 (or [2]) where Keras writes the -1 it was given, the same axes."""
    return sorted(a % rank for a in (axis if isinstance(axis, list) else [axis]))


def entry(config, name):
    return next(e for e in config["config"]["layers"] if e["name"] == name)


# The files are Keras' --------------------------------------------------------
@pytest.mark.parametrize("name", ["conv", "transformer"])
def test_a_keras_file_holds_what_keras_writes_for_the_same_model(name, tmp_path):
    keras.utils.clear_session()
    theirs = MODELS[name](keras)
    theirs.save(tmp_path / "theirs.keras")
    ours = MODELS[name](flow)
    ours.save(tmp_path / "ours.keras")
    names, config, packed = keras_members(tmp_path / "ours.keras")
    assert sorted(names) == ["config.json", "metadata.json", "model.weights.h5"]
    _, keras_config, keras_packed = keras_members(tmp_path / "theirs.keras")
    (tmp_path / "ours.h5").write_bytes(packed)
    (tmp_path / "theirs.h5").write_bytes(keras_packed)
    assert datasets(tmp_path / "ours.h5") == datasets(tmp_path / "theirs.h5")    # Keras' paths and shapes
    assert config["class_name"] == keras_config["class_name"] == "Functional"

    def layers(cfg):
        return sorted((e["class_name"], e.get("module")) for e in cfg["config"]["layers"])

    assert layers(config) == layers(keras_config)
    theirs = {}         # each layer against Keras' layer of its class in the same place (the n-th Dense, ...)
    for k in keras_config["config"]["layers"]:
        theirs.setdefault(k["class_name"], []).append(k)
    for e in config["config"]["layers"]:
        their_entry = theirs[e["class_name"]].pop(0)
        want = their_entry["config"]
        assert set(e["config"]) <= set(want), (e["class_name"], set(e["config"]) - set(want))
        for key, value in e["config"].items():
            if key in ("name", "attention_axes"):
                continue
            if key == "dtype" and isinstance(value, dict):
                assert value["class_name"] == want[key]["class_name"] and value["config"] == want[key]["config"]
            elif key.endswith("_initializer") and isinstance(value, dict):
                assert (value["module"], value["class_name"]) == (want[key]["module"], want[key]["class_name"])
            elif key == "axis" and e["class_name"] in ("BatchNormalization", "LayerNormalization"):
                rank = len(their_entry["inbound_nodes"][0]["args"][0]["config"]["shape"])
                assert axes(value, rank) == axes(want[key], rank), (e["class_name"], value, want[key])
            else:
                assert value == want[key], (e["class_name"], key, value, want[key])


def test_a_weights_file_is_keras_layout_with_the_optimizer(tmp_path):
    flow.config.set_view("mirrored")
    model = compile_and_fit(flow, MODELS["transformer"](flow), "transformer")
    model.save_weights(tmp_path / "w.weights.h5")
    assert (tmp_path / "w.weights.h5").is_file() and h5py.is_hdf5(tmp_path / "w.weights.h5")
    held = datasets(tmp_path / "w.weights.h5")
    assert held["layers/multi_head_attention/query_dense/vars/0"] == (8, 2, 4)
    assert held["layers/multi_head_attention/output_dense/vars/1"] == (8,)
    assert held["layers/dense/vars/0"] == (8, 16) and held["layers/dense_1/vars/0"] == (16, 3)   # model.layers order
    trainable = len(model.trainable_weights)
    assert sorted(int(k.split("/")[-1]) for k in held if k.startswith("optimizer/")) == list(range(2 + 2 * trainable))
    with h5py.File(tmp_path / "w.weights.h5") as f:
        assert int(f["optimizer/vars/0"][()]) == 2 and f["layers/embedding/vars"].attrs["name"] == "embedding"
        m, v = model.optimizer.slots(model.get_layer("embedding").weights[0])
        np.testing.assert_array_equal(f["optimizer/vars/2"][()], m.numpy())     # Keras interleaves m, v per weight
        np.testing.assert_array_equal(f["optimizer/vars/3"][()], v.numpy())


def test_a_file_keras_writes_in_this_process_loads(tmp_path):
    keras.utils.clear_session()
    theirs = MODELS["transformer"](keras)
    theirs.save(tmp_path / "k.keras")
    theirs.save_weights(tmp_path / "k.weights.h5")
    x, _ = data("transformer")
    want = theirs.predict(x, verbose=0)
    ours = flow.models.load_model(tmp_path / "k.keras")
    np.testing.assert_allclose(ours.predict(x, verbose=0), want, atol=1e-6, rtol=0)
    again = MODELS["transformer"](flow)
    again.load_weights(tmp_path / "k.weights.h5")
    np.testing.assert_allclose(again.predict(x, verbose=0), want, atol=1e-6, rtol=0)


# Views and training -------------------------------------------------------------
@pytest.mark.parametrize("ext", ["keras", "h5"])
def test_a_model_saved_on_a_mesh_loads_and_trains_on_in_another_view(ext, tmp_path):
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(4)
    flow.config.set_mesh(data=2, model=2)
    flow.config.set_layout_rules(flow.parallel.attention_rules())
    model = compile_and_fit(flow, MODELS["transformer"](flow), "transformer")
    model.save(tmp_path / f"m.{ext}")
    x, y = data("transformer")
    want = model.predict(x, verbose=0)
    expected = model.fit(x, y, batch_size=8, shuffle=False, verbose=0).history["loss"]
    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(2)
    flow.config.set_mesh()
    flow.config.set_layout_rules({})
    loaded = flow.models.load_model(tmp_path / f"m.{ext}")
    assert loaded.optimizer.iterations == 2 and type(loaded.optimizer) is flow.optimizers.Adam
    np.testing.assert_allclose(loaded.predict(x, verbose=0), want, atol=1e-6, rtol=0)
    got = loaded.fit(x, y, batch_size=8, shuffle=False, verbose=0).history["loss"]
    np.testing.assert_allclose(got, expected, rtol=1e-5)        # Adam's moments came back
    for a, b in zip(loaded.get_weights(), model.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_keras_model_checkpoint_writes_keras_files(tmp_path):
    flow.config.set_view("mirrored")
    model = MODELS["conv"](flow)
    x, y = data("conv")
    model.compile("adam", "sparse_categorical_crossentropy")
    per_epoch = []
    model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[
        keras.callbacks.ModelCheckpoint(str(tmp_path / "best_model.h5"), monitor="loss", save_best_only=True),
        keras.callbacks.ModelCheckpoint(str(tmp_path / "ep{epoch}.weights.h5"), save_weights_only=True),
        keras.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: per_epoch.append(model.get_weights()))])
    for path in ("best_model.h5", "ep1.weights.h5", "ep2.weights.h5"):
        assert (tmp_path / path).is_file() and h5py.is_hdf5(tmp_path / path)
    best = flow.models.load_model(tmp_path / "best_model.h5")
    assert best.optimizer.iterations in (2, 4)
    fresh = MODELS["conv"](flow)
    fresh.load_weights(tmp_path / "ep1.weights.h5")
    for a, b in zip(fresh.get_weights(), per_epoch[0]):
        np.testing.assert_array_equal(a, b)


# Nothing runs, every refusal is named and changes nothing ----------------------
class Scale(L.Layer):
    def __init__(self, factor=1.0, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def build(self, input_shape):
        self.w = self.add_weight("w", (input_shape[-1],), initializer="ones")

    def call(self, x):
        return x * self.read(self.w) * self.factor

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}


def test_custom_layers_come_from_custom_objects_only(tmp_path):
    x = flow.Input((4,))
    model = flow.Model(x, L.Dense(2)(Scale(3.0, name="scale")(x)))
    model.save(tmp_path / "m.keras")
    with pytest.raises(flow.CheckpointError, match=r"layer 'scale' is of class 'Scale' .*custom_objects"):
        flow.models.load_model(tmp_path / "m.keras")
    loaded = flow.models.load_model(tmp_path / "m.keras", custom_objects={"Scale": Scale})
    assert loaded.get_layer("scale").factor == 3.0
    np.testing.assert_array_equal(loaded.predict(X4, verbose=0), model.predict(X4, verbose=0))


@pytest.mark.parametrize("tamper, words", [
    (lambda c: entry(c, "hidden").update(class_name="Lambda",
                                         config={"name": "hidden", "function": {"class_name": "__lambda__"}}),
     r"layer 'hidden' is a Lambda: its function is code"),
    (lambda c: entry(c, "hidden").update(module="os", class_name="system", config={"command": "touch pwned"}),
     r"class 'system' \(module 'os'\), which flowlayers does not have"),
    (lambda c: entry(c, "hidden")["config"].update(kernel_constraint={"class_name": "NonNeg", "config": {}}),
     r"layer 'hidden' \(Dense\): Keras argument kernel_constraint=.* is not supported by flowlayers' Dense; "
     r"expected kernel_constraint=None"),
    (lambda c: c["compile_config"]["optimizer"]["config"].update(amsgrad=True),
     r"optimizer: Keras argument amsgrad=True is not supported by flowlayers' Adam; expected amsgrad=False"),
    (lambda c: c.update(class_name="MyModel", module="mine"), r"a model of class 'MyModel'"),
])
def test_a_file_naming_what_flowlayers_does_not_have_is_refused_by_name(tamper, words, tmp_path):
    model = mlp()
    model.compile("adam", "mse")
    model.save(tmp_path / "m.keras")
    rewrite_config(tmp_path / "m.keras", tamper)
    with pytest.raises(flow.CheckpointError, match=words):
        flow.models.load_model(tmp_path / "m.keras")
    assert not os.path.exists("pwned")


def test_a_weights_file_of_another_architecture_changes_nothing(tmp_path):
    small, other = mlp(), mlp("other")
    other.get_layer("out").set_weights([np.ones((8, 3), np.float32), np.ones(3, np.float32)])
    other.save_weights(tmp_path / "w.weights.h5")
    with h5py.File(tmp_path / "w.weights.h5", "a") as f:      # the second layer's kernel of another shape
        del f["layers/dense_1/vars/0"]
        f["layers/dense_1/vars/0"] = np.ones((8, 5), np.float32)
    before = small.get_weights()
    with pytest.raises(flow.CheckpointError, match=r"layers/dense_1/vars/0 \(variable 'out/kernel'\) expected shape "
                                                   r"\(8, 3\), received \(8, 5\)"):
        small.load_weights(tmp_path / "w.weights.h5")
    for a, b in zip(small.get_weights(), before):       # the first layer's, which matched, was not assigned either
        np.testing.assert_array_equal(a, b)
    with h5py.File(tmp_path / "w.weights.h5", "a") as f:
        del f["layers/dense_1/vars/0"]
        f["layers/dense_1/vars/0"] = np.ones((8, 3), np.float32)
        f.create_group("layers/dense_2/vars")["0"] = np.ones(3, np.float32)
    with pytest.raises(flow.CheckpointError, match=r"holds weights in \['layers/dense_2/vars'\], which the model does "
                                                   r"not have"):
        small.load_weights(tmp_path / "w.weights.h5")
    for a, b in zip(small.get_weights(), before):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("member, tamper, words", [
    ("layers/dense/vars", lambda f: f["layers/dense"].__setitem__("vars", h5py.SoftLink("/layers/dense_1/vars")),
     r"layers/dense/vars is an HDF5 SoftLink; expected members stored in the file itself"),
    ("layers/dense/vars", lambda f: f["layers/dense"].__setitem__("vars", h5py.SoftLink("/nowhere")),
     r"layers/dense/vars is an HDF5 SoftLink; expected members stored in the file itself"),
    ("layers/dense/vars/1", lambda f: f["layers/dense/vars"].__setitem__("1", h5py.ExternalLink("other.h5", "/b")),
     r"layers/dense/vars/1 is an HDF5 ExternalLink; expected members stored in the file itself"),
    ("layers/dense/vars/0", lambda f: f["layers/dense/vars"].__setitem__("0", np.array([b"a", b"b"])),
     r"dataset '/layers/dense/vars/0' holds dtype \|S1; expected numbers"),
])
def test_a_weights_file_with_links_or_strings_is_refused(member, tamper, words, tmp_path):
    model = mlp()
    model.save_weights(tmp_path / "w.weights.h5")
    with h5py.File(tmp_path / "w.weights.h5", "a") as f:
        del f[member]
        tamper(f)
    before = model.get_weights()
    with pytest.raises(flow.CheckpointError, match=words):
        model.load_weights(tmp_path / "w.weights.h5")
    for a, b in zip(model.get_weights(), before):
        np.testing.assert_array_equal(a, b)


def test_a_file_declaring_more_than_it_holds_is_refused_before_reading(tmp_path):
    model = mlp()
    model.save_weights(tmp_path / "w.weights.h5")
    with h5py.File(tmp_path / "w.weights.h5", "a") as f:     # 4 GiB declared, none of it stored
        del f["layers/dense/vars/0"]
        f["layers/dense/vars"].create_dataset("0", shape=(1 << 16, 1 << 14), dtype="float32", chunks=(64, 64))
    before = model.get_weights()
    with pytest.raises(flow.CheckpointError, match=r"dataset '/layers/dense/vars/0' declares shape \(65536, 16384\) "
                                                   r"\(4,294,967,296 bytes\) but the file stores 0 bytes of it"):
        model.load_weights(tmp_path / "w.weights.h5")
    for a, b in zip(model.get_weights(), before):
        np.testing.assert_array_equal(a, b)
    model.save(tmp_path / "m.keras")       # a config.json of 64 MiB and a byte, deflated to a small member
    with zipfile.ZipFile(tmp_path / "m.keras") as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    with zipfile.ZipFile(tmp_path / "m.keras", "w", zipfile.ZIP_DEFLATED) as zf:
        for n, data in members.items():
            zf.writestr(n, data + b" " * ((64 << 20) + 1 - len(data)) if n == "config.json" else data)
    with pytest.raises(flow.CheckpointError, match=r"config\.json holds 67,108,865 bytes; expected at most 67,108,864"):
        flow.models.load_model(tmp_path / "m.keras")


@pytest.mark.parametrize("make, words", [
    (lambda: (lambda x: flow.Model(x, flow.reshape(x, (-1, 2, 2))))(flow.Input((4,))),
     r"op 'reshape' \(reshape\) is applied outside any layer, and a Keras file has no form for it here"),
    (lambda: (lambda x: flow.Model(x, L.Lambda(lambda t: t * 2.0, name="double")(x)))(flow.Input((4,))),
     r"layer 'double' \(Lambda\): its function .* is code, which flowlayers does not save"),
])
def test_what_a_keras_file_cannot_hold_is_refused_and_the_old_file_stays(make, words, tmp_path):
    mlp().save(tmp_path / "m.keras")
    kept = (tmp_path / "m.keras").read_bytes()
    with pytest.raises((flow.LayerError, flow.CheckpointError), match=words):
        make().save(tmp_path / "m.keras")
    assert (tmp_path / "m.keras").read_bytes() == kept
    assert sorted(os.listdir(tmp_path)) == ["m.keras"]


def test_a_write_killed_midway_leaves_the_old_file_whole(tmp_path, monkeypatch):
    model = mlp()
    model.save(tmp_path / "m.keras")
    model.save_weights(tmp_path / "w.weights.h5")
    kept = {p: (tmp_path / p).read_bytes() for p in ("m.keras", "w.weights.h5")}
    written = []

    def fail_on_the_third(group, name, value):
        written.append(name)
        if len(written) == 3:
            raise OSError(28, "No space left on device")
        return original(group, name, value)

    original = flow_hdf5.write_array
    monkeypatch.setattr(flow_hdf5, "write_array", fail_on_the_third)
    with pytest.raises(flow.CheckpointError, match="No space left on device.*is as it was"):
        model.save_weights(tmp_path / "w.weights.h5")
    written.clear()
    with pytest.raises(flow.CheckpointError, match="No space left on device.*is as it was"):
        model.save(tmp_path / "m.keras")
    for p, b in kept.items():
        assert (tmp_path / p).read_bytes() == b
    assert sorted(os.listdir(tmp_path)) == ["m.keras", "w.weights.h5"]    # no temporary file left
    monkeypatch.undo()
    np.testing.assert_array_equal(flow.models.load_model(tmp_path / "m.keras").predict(X4, verbose=0),
                                  model.predict(X4, verbose=0))


def test_paths_and_formats_that_do_not_fit_are_named(tmp_path):
    model = mlp()
    with pytest.raises(flow.CheckpointError, match=r"save_weights\(.*m\.keras'\): expected a path ending in "
                                                   r"\.weights\.h5 .* received a \.keras path"):
        model.save_weights(tmp_path / "m.keras")
    with pytest.raises(flow.ConfigError, match=r"zipped=False does not fit the path; expected zipped=None or True"):
        model.save(tmp_path / "m.keras", zipped=False)
    model.save(tmp_path / "old.keras.d")                    # a checkpoint directory ...
    os.rename(tmp_path / "old.keras.d", tmp_path / "old.keras")    # ... where an earlier flowlayers put .keras ones
    np.testing.assert_array_equal(flow.models.load_model(tmp_path / "old.keras").predict(X4, verbose=0),
                                  model.predict(X4, verbose=0))
    with pytest.raises(flow.CheckpointError, match=r"old\.keras' is a directory, expected a file path"):
        model.save(tmp_path / "old.keras")
    (tmp_path / "notes.keras").write_text("not a zip")
    with pytest.raises(flow.CheckpointError, match="expected a .keras file .* not a zip archive"):
        flow.models.load_model(tmp_path / "notes.keras")
    (tmp_path / "notes.weights.h5").write_text("not HDF5")
    with pytest.raises(flow.CheckpointError, match="expected an HDF5 file, received one h5py cannot read"):
        model.load_weights(tmp_path / "notes.weights.h5")


def test_an_optimizer_keras_has_no_words_for_is_left_out_by_name(tmp_path):
    model = mlp()
    model.compile(flow.optimizers.SGD(lambda step: 0.1), "mse")
    model.fit(X4, np.zeros((8, 3), np.float32), verbose=0)
    with pytest.warns(UserWarning, match=r"compile settings and optimizer state were not saved: optimizer 'sgd' has a "
                                         r"learning_rate callable"):
        model.save(tmp_path / "m.keras")
    assert flow.models.load_model(tmp_path / "m.keras").optimizer is None
    with pytest.warns(UserWarning, match=r"without the optimizer state: optimizer 'sgd' \(a learning_rate callable"):
        model.save_weights(tmp_path / "w.weights.h5")
    assert not any(k.startswith("optimizer") for k in datasets(tmp_path / "w.weights.h5"))


# Legacy HDF5 -------------------------------------------------------------------
def keras2_file(path, with_config=True):
    """A file as Keras 2 (tf.keras) wrote ``model.save("m.h5")`` for Input(4) -> Dense(3, relu) -> Dense(2): nested
    list nodes, ``batch_input_shape``, ``:0`` weight names; with ``with_config=False``, its ``save_weights``."""
    rng = np.random.default_rng(5)
    arrays = {"dense/kernel:0": rng.normal(size=(4, 3)), "dense/bias:0": rng.normal(size=3),
              "dense_1/kernel:0": rng.normal(size=(3, 2)), "dense_1/bias:0": rng.normal(size=2)}
    dense = lambda n, units, act: {  # noqa: E731
        "class_name": "Dense", "name": n, "inbound_nodes": [[["input_1" if n == "dense" else "dense", 0, 0, {}]]],
        "config": {"name": n, "trainable": True, "dtype": "float32", "units": units, "activation": act,
                   "use_bias": True, "kernel_initializer": {"class_name": "GlorotUniform", "config": {"seed": None}},
                   "bias_initializer": {"class_name": "Zeros", "config": {}}, "kernel_regularizer": None,
                   "bias_regularizer": None, "activity_regularizer": None, "kernel_constraint": None,
                   "bias_constraint": None}}
    config = {"class_name": "Functional", "config": {"name": "model", "layers": [
        {"class_name": "InputLayer", "name": "input_1", "inbound_nodes": [], "config": {
            "batch_input_shape": [None, 4], "dtype": "float32", "sparse": False, "ragged": False, "name": "input_1"}},
        dense("dense", 3, "relu"), dense("dense_1", 2, "linear")],
        "input_layers": [["input_1", 0, 0]], "output_layers": [["dense_1", 0, 0]]}}
    with h5py.File(path, "w") as f:
        group = f.create_group("model_weights") if with_config else f
        if with_config:
            f.attrs["model_config"] = json.dumps(config).encode()
            f.attrs["keras_version"], f.attrs["backend"] = b"2.13.1", b"tensorflow"
        group.attrs["layer_names"] = [b"input_1", b"dense", b"dense_1"]
        group.create_group("input_1").attrs["weight_names"] = np.array([], dtype="S1")
        for layer in ("dense", "dense_1"):
            names = [f"{layer}/kernel:0", f"{layer}/bias:0"]
            g = group.create_group(layer)
            g.attrs["weight_names"] = [n.encode() for n in names]
            for n in names:
                g[n] = arrays[n].astype(np.float32)
    return {k: v.astype(np.float32).astype(np.float64) for k, v in arrays.items()}


def test_a_keras2_h5_model_loads_and_predicts_as_numpy(tmp_path):
    a = keras2_file(tmp_path / "m.h5")
    want = np.maximum(X4 @ a["dense/kernel:0"] + a["dense/bias:0"], 0) @ a["dense_1/kernel:0"] + a["dense_1/bias:0"]
    model = flow.models.load_model(tmp_path / "m.h5")
    assert [l.name for l in model.layers] == ["dense", "dense_1"] and model.optimizer is None
    np.testing.assert_allclose(model.predict(X4, verbose=0), want, atol=1e-5)
    keras2_file(tmp_path / "w.h5", with_config=False)
    x = flow.Input((4,))
    again = flow.Model(x, L.Dense(2)(L.Dense(3, activation="relu")(x)))
    again.load_weights(tmp_path / "w.h5")
    np.testing.assert_allclose(again.predict(X4, verbose=0), want, atol=1e-5)
    with pytest.raises(flow.CheckpointError, match="without it \\(weights only\\?\\); build the model in code"):
        flow.models.load_model(tmp_path / "w.h5")


def test_a_legacy_h5_model_written_here_loads_with_its_optimizer(tmp_path):
    with pytest.raises(flow.LayerError, match=r"op 'multiply' \(multiply\) .* a legacy .h5 file has no form for it"):
        mlp().save(tmp_path / "n.h5")                   # h * 2.0: Keras' merging layers take tensors only
    assert not (tmp_path / "n.h5").exists()
    model = mlp(numbers=False)
    model.compile(flow.optimizers.RMSprop(0.01, momentum=0.5), "mse", metrics=["mae"])
    model.fit(X4, np.ones((8, 3), np.float32), batch_size=4, verbose=0)
    model.save(tmp_path / "m.h5")
    with h5py.File(tmp_path / "m.h5") as f:
        config = json.loads(f.attrs["model_config"])
        assert [e["class_name"] for e in config["config"]["layers"]] == ["InputLayer", "Dense", "Add", "Dense"]
        # the names as Keras 3 stores them (a list of UTF-8 bytes: variable-length strings, read back as str)
        assert list(f["model_weights"].attrs["layer_names"]) == ["features", "hidden", "out"]
        assert list(f["model_weights/hidden"].attrs["weight_names"]) == ["hidden/kernel", "hidden/bias"]
        assert len(f["optimizer_weights"].attrs["weight_names"]) == 2 + 2 * 4      # velocity, momentum per weight
    loaded = flow.models.load_model(tmp_path / "m.h5")
    assert loaded.optimizer.iterations == 2 and loaded.metrics_names == ["loss", "mae"]
    np.testing.assert_array_equal(loaded.predict(X4, verbose=0), model.predict(X4, verbose=0))
    theirs = {w.path: w for w in loaded.trainable_weights}
    for w in model.trainable_weights:
        for a, b in zip(loaded.optimizer.slots(theirs[w.path]), model.optimizer.slots(w)):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
