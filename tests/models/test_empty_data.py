"""Data with no sample is refused by name (the argument, at least one sample or batch expected, what came): an
empty array, a generator or sequence that gives no batch, for ``fit`` (and its ``validation_data``), ``evaluate``
and ``predict``; ``fit`` used to train nothing and return an empty ``History``."""
import re

import numpy as np
import pytest

import flowlayers as flow

RNG = np.random.default_rng(8)
X = RNG.normal(size=(20, 6)).astype(np.float32)
Y = RNG.integers(0, 3, 20)
NONE = np.zeros((0, 6), np.float32), np.zeros((0,), np.int64)


def model():
    x = flow.Input((6,), name="x")
    m = flow.Model(x, flow.layers.Dense(3, name="out")(x), name="m")
    m.compile(flow.optimizers.SGD(0.1), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


class NoBatches:
    """A sequence of batches (``len`` and ``[i]``, as a PyDataset) holding none."""

    def __len__(self):
        return 0

    def __getitem__(self, i):
        raise IndexError(i)


def nothing():
    yield from ()


ARRAYS = {
    "fit": lambda m: m.fit(*NONE, verbose=0),
    "evaluate": lambda m: m.evaluate(*NONE, verbose=0),
    "predict": lambda m: m.predict(NONE[0], verbose=0),
    "train_on_batch": lambda m: m.train_on_batch(*NONE),
    "test_on_batch": lambda m: m.test_on_batch(*NONE),
    "predict_on_batch": lambda m: m.predict_on_batch(NONE[0]),
}


@pytest.mark.parametrize("method", list(ARRAYS))
def test_empty_arrays_are_refused_by_name(method):
    m = model()
    name = method.replace("predict_on_batch", "predict")
    with pytest.raises(flow.InputError, match=re.escape(f"Model 'm'.{name}: x expected at least one sample, received "
                                                        f"arrays of 0 samples (input 'x' of shape (0, 6))")):
        ARRAYS[method](m)
    assert m.optimizer.iterations == 0
    m.fit(X, Y, verbose=0)      # the model stays usable
    assert m.optimizer.iterations == 1


STREAMS = {
    "fit": lambda m, data: m.fit(data, epochs=3, verbose=0),
    "evaluate": lambda m, data: m.evaluate(data, verbose=0),
    "predict": lambda m, data: m.predict(data, verbose=0),
}


@pytest.mark.parametrize("method", list(STREAMS))
@pytest.mark.parametrize("source", [nothing, NoBatches])
def test_a_source_that_gives_no_batch_is_refused_by_name(method, source):
    m = model()
    data = source()
    with pytest.raises(flow.InputError, match=re.escape(f"Model 'm'.{method}: x expected at least one batch, "
                                                        f"received a {type(data).__name__} that gave none")):
        STREAMS[method](m, data)
    assert m.optimizer.iterations == 0
    m.fit(X, Y, verbose=0)
    assert m.optimizer.iterations == 1


def test_a_used_up_generator_is_refused_in_the_next_call():
    batches = iter([(X, Y)])
    m = model()
    m.fit(batches, verbose=0)
    with pytest.raises(flow.InputError, match="x expected at least one batch.*make a new one for each call"):
        m.fit(batches, verbose=0)


def test_empty_validation_data_is_refused_by_name_before_the_first_step():
    m = model()
    with pytest.raises(flow.InputError, match=re.escape("Model 'm'.fit: validation_data expected at least one "
                                                        "sample, received arrays of 0 samples")):
        m.fit(X, Y, validation_data=NONE, epochs=2, verbose=0)
    assert m.optimizer.iterations == 0
    with pytest.raises(flow.InputError, match=re.escape("Model 'm'.fit: validation_data expected at least one "
                                                        "batch, received a generator that gave none")):
        m.fit(X, Y, validation_data=nothing(), batch_size=20, epochs=2, verbose=0)
    assert m.optimizer.iterations == 1      # a generator is known empty only once drawn: after the first epoch


def test_a_validation_split_that_leaves_nothing_to_train_on_is_refused():
    m = model()
    with pytest.raises(flow.InputError, match=re.escape("Model 'm'.fit: validation_split 0.5 of 1 sample(s) "
                                                        "expected at least one sample left to train on, received "
                                                        "none")):
        m.fit(X[:1], Y[:1], validation_split=0.5, verbose=0)
    assert m.optimizer.iterations == 0
