"""``flow.utils`` and ``flow.saving``: Keras 3's helpers give what Keras' give on the same inputs (Keras is the
reference), the registry finds your classes when a model loads, and a PyDataset trains as the same arrays do."""
import random

import keras
import numpy as np
import pytest

import flowlayers as flow


@pytest.mark.parametrize("ids, num_classes", [
    ([0, 2, 1], None), ([1], None), (np.array([[1], [3]]), None), (np.array([[0, 1], [2, 0]]), 4), ([2.0, 0.0], 3), ([], 2),
])
def test_to_categorical_as_keras(ids, num_classes):
    ours, theirs = flow.utils.to_categorical(ids, num_classes), keras.utils.to_categorical(ids, num_classes)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("ids, num_classes, message", [
    ([0, 3], 3, r"to_categorical: expected class ids in \[0, 3\), received values from 0 to 3"),
    ([-1, 1], None, r"expected class ids in \[0, 2\), received values from -1 to 1"),
    ([0.5], None, r"expected integer class ids, received non-integral values such as 0\.5"),
])
def test_to_categorical_refuses_what_is_not_a_class_id(ids, num_classes, message):
    with pytest.raises(flow.InputError, match=message):
        flow.utils.to_categorical(ids, num_classes)


@pytest.mark.parametrize("axis, order", [(-1, 2), (1, np.inf), (-1, 3), (0, 1)])
def test_normalize_as_keras(axis, order):
    x = np.random.default_rng(0).normal(size=(4, 5))
    x[1] = 0.0          # a zero norm leaves the row as it is
    np.testing.assert_allclose(flow.utils.normalize(x), keras.utils.normalize(x), rtol=1e-15)     # the defaults
    ours = flow.utils.normalize(x, axis, order)
    if axis != 0:       # Keras' own fails on axis 0 (it reads `axis or -1`): numpy is the reference there
        np.testing.assert_allclose(ours, keras.utils.normalize(x, axis, order), rtol=1e-15)
    norms = np.linalg.norm(ours, order, axis)
    np.testing.assert_allclose(norms[norms > 0], 1.0, rtol=1e-12)


SEQUENCES = [[1, 2, 3, 4], [5], [], [6, 7]]


@pytest.mark.parametrize("kwargs", [
    {}, {"maxlen": 2}, {"maxlen": 6, "padding": "post"}, {"maxlen": 3, "truncating": "post", "value": -1},
    {"dtype": "float32", "value": 0.5}, {"maxlen": 1, "padding": "post", "truncating": "post"},
])
def test_pad_sequences_as_keras(kwargs):
    ours, theirs = flow.utils.pad_sequences(SEQUENCES, **kwargs), keras.utils.pad_sequences(SEQUENCES, **kwargs)
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


def test_pad_sequences_of_vectors_and_of_strings_as_keras():
    vectors = [np.ones((2, 3)), np.zeros((1, 3))]
    np.testing.assert_array_equal(flow.utils.pad_sequences(vectors, dtype="float32"),
                                  keras.utils.pad_sequences(vectors, dtype="float32"))
    words = [["a", "b"], ["c"]]
    np.testing.assert_array_equal(flow.utils.pad_sequences(words, dtype=object, value="<pad>"),
                                  keras.utils.pad_sequences(words, dtype=object, value="<pad>"))


@pytest.mark.parametrize("call, error, message", [
    (lambda: flow.utils.pad_sequences(SEQUENCES, padding="both"), flow.ConfigError,
     r"pad_sequences: padding expected one of \['pre', 'post'\], received 'both'"),
    (lambda: flow.utils.pad_sequences([[1], 2]), flow.InputError, r"received 2 at position 1"),
    (lambda: flow.utils.pad_sequences([[[1, 2]], [[1, 2, 3]]]), flow.InputError,
     r"the sequence at position 1 has elements of shape \(3,\), expected \(2,\)"),
    (lambda: flow.utils.pad_sequences([["a"]], value="x"), flow.ConfigError, r"expected dtype=object"),
])
def test_pad_sequences_refuses_by_name(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("data", [1, (1,), [1, 2], (1, 2, 3)])
def test_packing_as_keras(data):
    assert flow.utils.unpack_x_y_sample_weight(data) == keras.utils.unpack_x_y_sample_weight(data)
    assert flow.utils.pack_x_y_sample_weight(*flow.utils.unpack_x_y_sample_weight(data)) == \
        keras.utils.pack_x_y_sample_weight(*keras.utils.unpack_x_y_sample_weight(data))


def small_model():
    flow.clear_session()
    x = flow.Input((3,))
    m = flow.Model(x, flow.layers.Dense(2)(x))
    m.compile(flow.optimizers.SGD(0.1), "mse")
    return m


def test_set_random_seed_repeats_python_numpy_and_initial_weights():
    draws = []
    for _ in range(2):
        flow.utils.set_random_seed(7)
        draws.append((random.random(), np.random.rand(), small_model().get_weights()[0]))
    assert draws[0][:2] == draws[1][:2]
    np.testing.assert_array_equal(draws[0][2], draws[1][2])
    with pytest.raises(flow.ConfigError, match=r"set_random_seed: expected an int seed, received 1\.5"):
        flow.utils.set_random_seed(1.5)


@flow.utils.register_keras_serializable(package="Tests")
class Scale(flow.layers.Layer):
    def __init__(self, factor=2.0, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def call(self, x):
        return x * self.factor

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}


class Shift(Scale):
    def call(self, x):
        return x + self.factor


def scaled_model(layer):
    flow.clear_session()
    x = flow.Input((3,))
    return flow.Model(x, flow.layers.Dense(2)(layer(x)))


@pytest.mark.parametrize("name", ["m.keras", "m_dir"])
def test_a_registered_class_loads_without_custom_objects(name, tmp_path):
    assert flow.utils.get_registered_name(Scale) == "Tests>Scale"
    assert flow.saving.get_registered_object("Tests>Scale") is Scale
    m = scaled_model(Scale(3.0))
    m.save(str(tmp_path / name))
    loaded = flow.saving.load_model(str(tmp_path / name))
    x = np.ones((2, 3), "float32")
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), m.predict(x, verbose=0))


def test_a_class_in_a_scope_loads_only_inside_it(tmp_path):
    m = scaled_model(Shift(1.0))
    m.save(str(tmp_path / "m.keras"))
    with pytest.raises(flow.CheckpointError, match=r"'Shift'.*expected it in custom_objects"):
        flow.models.load_model(str(tmp_path / "m.keras"))
    with flow.utils.custom_object_scope({"Shift": Shift}):
        loaded = flow.models.load_model(str(tmp_path / "m.keras"))
    x = np.ones((2, 3), "float32")
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), m.predict(x, verbose=0))
    assert "Shift" not in flow.utils.get_custom_objects()


def test_saving_weights_by_function(tmp_path):
    m = small_model()
    flow.saving.save_weights(m, str(tmp_path / "w.weights.h5"))
    other = small_model()
    flow.saving.load_weights(other, str(tmp_path / "w.weights.h5"))
    for a, b in zip(m.get_weights(), other.get_weights()):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(flow.ConfigError, match=r"skip_mismatch=True is not supported"):
        flow.saving.load_weights(other, str(tmp_path / "w.weights.h5"), skip_mismatch=True)


def test_a_py_dataset_refuses_processes_by_name():
    with pytest.raises(flow.ConfigError, match=r"PyDataset: use_multiprocessing=True is not supported"):
        flow.utils.PyDataset(workers=2, use_multiprocessing=True)
    with pytest.raises(flow.ConfigError, match=r"PyDataset: workers expected an int >= 1, received 0"):
        flow.utils.PyDataset(workers=0)


class Rows(flow.utils.PyDataset):
    """Batches of 8 rows of fixed arrays, counting the epochs it is told of."""

    def __init__(self, x, y, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y, self.begun, self.ended = x, y, 0, 0

    def __len__(self):
        return len(self.x) // 8

    def __getitem__(self, i):
        return self.x[8 * i: 8 * i + 8], self.y[8 * i: 8 * i + 8]

    def on_epoch_begin(self):
        self.begun += 1

    def on_epoch_end(self):
        self.ended += 1


@pytest.mark.parametrize("workers", [1, 3])
def test_a_py_dataset_trains_as_its_arrays(workers):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(64, 3)).astype("float32"), rng.normal(size=(64, 2)).astype("float32")
    flow.config.set_seed(0)
    by_arrays = small_model()
    by_arrays.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    flow.config.set_seed(0)
    by_dataset, rows = small_model(), Rows(x, y, workers=workers, max_queue_size=2)
    by_dataset.fit(rows, epochs=3, shuffle=False, verbose=0)
    for a, b in zip(by_arrays.get_weights(), by_dataset.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert rows.begun == rows.ended == 3


class KerasRows(keras.utils.PyDataset):
    """Keras' own PyDataset, as a Keras program writes one."""

    def __init__(self, x, y, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y = x, y

    def __len__(self):
        return len(self.x) // 8

    def __getitem__(self, i):
        return self.x[8 * i: 8 * i + 8], self.y[8 * i: 8 * i + 8]


def test_keras_py_dataset_workers_are_threads_and_processes_are_refused():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(64, 3)).astype("float32"), rng.normal(size=(64, 2)).astype("float32")
    flow.config.set_seed(0)
    by_arrays = small_model()
    by_arrays.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    flow.config.set_seed(0)
    by_dataset = small_model()
    by_dataset.fit(KerasRows(x, y, workers=3, max_queue_size=2), epochs=2, shuffle=False, verbose=0)
    for a, b in zip(by_arrays.get_weights(), by_dataset.get_weights()):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(flow.ConfigError, match=r"KerasRows: use_multiprocessing=True is not supported"):
        by_dataset.fit(KerasRows(x, y, workers=2, use_multiprocessing=True), epochs=1, verbose=0)
    assert len(by_dataset.fit(KerasRows(x, y), epochs=1, verbose=0).history["loss"]) == 1
