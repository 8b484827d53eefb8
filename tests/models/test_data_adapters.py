"""fit, evaluate and predict take what Keras takes: arrays, a tf.data.Dataset, an indexable of batches
(keras.utils.PyDataset) and a Python generator, each with steps, epochs and replay for exact resume; elements
``(x, y, sample_weight)`` are weighted from every source.  Each source trains to the weights arrays give (the
same batches in the same order), in both views."""
import warnings

import keras
import numpy as np
import pytest

import flowlayers as flow

tf = pytest.importorskip("tensorflow")     # used beside the backend under test: without it the file is skipped
pytestmark = pytest.mark.needs_tensorflow

BATCH = 8
RNG = np.random.default_rng(3)
X = RNG.normal(size=(48, 5)).astype(np.float32)
Y = RNG.integers(0, 3, size=48).astype(np.int32)
W = RNG.uniform(0.5, 2.0, size=48).astype(np.float32)
PLACES = [("mirrored", 2), ("consistent", 2)]


def model(view, n):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    flow.clear_session()
    x = flow.Input((5,))
    m = flow.Model(x, flow.layers.Dense(3)(flow.layers.Dense(6, activation="relu")(x)))
    m.compile(flow.optimizers.SGD(0.1, momentum=0.5), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


def generator(weighted=False, repeat=1, reorder=False):
    """The batches of X, Y (and W) in order, ``repeat`` times; with ``reorder`` each pass in its own order."""
    for r in range(repeat):
        order = np.random.default_rng(r).permutation(len(X)) if reorder else np.arange(len(X))
        for i in range(0, len(X), BATCH):
            rows = order[i:i + BATCH]
            yield (X[rows], Y[rows], W[rows]) if weighted else (X[rows], Y[rows])


class Batches(keras.utils.PyDataset):
    def __init__(self):
        super().__init__()
        self.ends = 0

    def __len__(self):
        return len(X) // BATCH

    def __getitem__(self, i):
        return X[i * BATCH:(i + 1) * BATCH], Y[i * BATCH:(i + 1) * BATCH]

    def on_epoch_end(self):
        self.ends += 1


def close(a, b):
    return max(float(np.abs(p - q).max()) for p, q in zip(a, b)) < 1e-6


@pytest.mark.parametrize("view,n", PLACES)
def test_every_source_trains_to_the_weights_of_arrays(view, n):
    reference = model(view, n)
    reference.fit(X, Y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0)
    want = reference.get_weights()

    m = model(view, n)
    history = m.fit(generator(repeat=2), steps_per_epoch=len(X) // BATCH, epochs=2, verbose=0)
    assert close(m.get_weights(), want) and len(history.history["loss"]) == 2

    m, batches = model(view, n), Batches()
    m.fit(batches, epochs=2, shuffle=False, verbose=0)
    assert close(m.get_weights(), want) and batches.ends == 2

    m = model(view, n)
    m.fit(tf.data.Dataset.from_tensor_slices((X, Y)).batch(BATCH), epochs=2, verbose=0)
    assert close(m.get_weights(), want)


@pytest.mark.parametrize("view,n", PLACES)
def test_sample_weights_from_generators_and_datasets_weigh_as_arrays_do(view, n):
    reference = model(view, n)
    reference.fit(X, Y, sample_weight=W, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    m = model(view, n)
    m.fit(generator(weighted=True), epochs=1, verbose=0)
    assert close(m.get_weights(), reference.get_weights())
    m = model(view, n)
    m.fit(tf.data.Dataset.from_tensor_slices((X, Y, W)).batch(BATCH), epochs=1, verbose=0)
    assert close(m.get_weights(), reference.get_weights())
    unweighted = model(view, n)
    unweighted.fit(X, Y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    assert not close(m.get_weights(), unweighted.get_weights())     # the weights were not dropped


def test_a_shuffled_pydataset_reorders_its_batches_by_seed_and_epoch():
    orders = []
    for seed in (1, 1, 2):
        flow.config.set_seed(seed)
        m = model("mirrored", 1)
        m.fit(Batches(), epochs=1, shuffle=True, verbose=0)
        orders.append(m.get_weights())
    assert close(orders[0], orders[1]) and not close(orders[0], orders[2])


def test_a_generator_that_ends_stops_training_with_a_warning():
    m = model("mirrored", 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = m.fit(generator(), epochs=3, verbose=0)
    assert len(history.history["loss"]) == 1
    assert any("epoch 2 received no batches" in str(w.message) and "steps_per_epoch" in str(w.message)
               for w in caught)


def test_evaluate_and_predict_take_generators_and_steps():
    m = model("consistent", 2)
    m.fit(X, Y, batch_size=BATCH, epochs=1, verbose=0)
    first_two = m.evaluate(X[:16], Y[:16], batch_size=BATCH, verbose=0)
    assert m.evaluate(generator(), steps=2, verbose=0) == pytest.approx(first_two, rel=1e-6)
    assert m.evaluate(X, Y, batch_size=BATCH, steps=2, verbose=0) == pytest.approx(first_two, rel=1e-6)
    predicted = m.predict((x for x, _ in generator()), verbose=0)
    np.testing.assert_allclose(predicted, m.predict(X, batch_size=BATCH, verbose=0), rtol=1e-6)
    assert m.predict(generator(), steps=3, verbose=0).shape == (24, 3)


def test_resume_on_a_fresh_generator_takes_the_same_batches(tmp_path):
    """Interrupted in the second epoch, rerun with a new generator of the same data: the epochs before are drawn
    and dropped, the batches done are skipped, and training ends where an uninterrupted run does."""
    steps = len(X) // BATCH
    reference = model("consistent", 2)
    reference.fit(generator(repeat=3, reorder=True), steps_per_epoch=steps, epochs=3, verbose=0)

    class Crash(flow.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if self.model.optimizer.iterations == steps + 2:
                raise KeyboardInterrupt

    backup = str(tmp_path / "backup")
    m = model("consistent", 2)
    with pytest.raises(KeyboardInterrupt):
        m.fit(generator(repeat=3, reorder=True), steps_per_epoch=steps, epochs=3, verbose=0,
              callbacks=[flow.callbacks.BackupAndRestore(backup, save_freq=1), Crash()])
    m = model("consistent", 2)
    m.fit(generator(repeat=3, reorder=True), steps_per_epoch=steps, epochs=3, verbose=0,
          callbacks=[flow.callbacks.BackupAndRestore(backup, save_freq=1)])
    assert m.optimizer.iterations == 3 * steps
    assert close(m.get_weights(), reference.get_weights())


def test_sources_are_checked_by_name():
    m = model("mirrored", 1)
    with pytest.raises(flow.InputError, match=r"fit: y expected None with x a generator .* received ndarray"):
        m.fit(generator(), Y)
    with pytest.raises(flow.InputError, match=r"fit: sample_weight expected with arrays; with a generator"):
        m.fit(generator(), sample_weight=W)
    with pytest.raises(flow.InputError, match=r"fit: validation_split expected with arrays"):
        m.fit(generator(), validation_split=0.5)
    with pytest.raises(flow.InputError, match=r"fit: batch of generator: expected elements \(x, y\) or "
                                              r"\(x, y, sample_weight\), with labels for the loss, received ndarray"):
        m.fit((x for x, _ in generator()), verbose=0)
    with pytest.raises(flow.InputError, match=r"fit: batch of generator: input .* expected arrays of shape "
                                              r"\(None, 5\), received \(8, 4\)"):
        m.fit(((x[:, :4], y) for x, y in generator()), verbose=0)
    with pytest.raises(flow.InputError, match=r"fit: steps_per_epoch expected None or a positive int, received 0"):
        m.fit(generator(), steps_per_epoch=0)
    m.fit(generator(), verbose=0)     # still usable
