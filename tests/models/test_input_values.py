"""NaN and infinity in float inputs and labels are refused by name before a step takes them (one NaN in a batch
turns every weight into NaN at that step, silently), unless ``flow.config.allow_nonfinite_inputs(True)``; the
setting is taken once per call.  Arrays are checked once per call, a dataset's or generator's batches as they
come."""
import re

import numpy as np
import pytest

import flowlayers as flow
from flowlayers.models import data_adapter as da

RNG = np.random.default_rng(4)
X = RNG.normal(size=(40, 6)).astype(np.float32)
Y = RNG.integers(0, 3, 40)
REFUSED = r"input 'x' expected finite numbers, received "
HINT = "flow.config.allow_nonfinite_inputs(True)"


@pytest.fixture(autouse=True)
def refused_by_default():
    flow.config.allow_nonfinite_inputs(False)
    yield
    flow.config.allow_nonfinite_inputs(False)


def model(loss=None):
    x = flow.Input((6,), name="x")
    m = flow.Model(x, flow.layers.Dense(3, name="out")(x), name="m")
    m.compile(flow.optimizers.SGD(0.1), loss or flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


def spoiled(x=X):
    x = x.copy()
    x[3, 5], x[17, 0], x[30, 2] = np.nan, np.inf, np.nan
    return x


CALLS = {
    "fit": lambda m, x: m.fit(x, Y, batch_size=8, verbose=0),
    "evaluate": lambda m, x: m.evaluate(x, Y, verbose=0),
    "predict": lambda m, x: m.predict(x, verbose=0),
    "train_on_batch": lambda m, x: m.train_on_batch(x, Y),
    "test_on_batch": lambda m, x: m.test_on_batch(x, Y),
    "predict_on_batch": lambda m, x: m.predict_on_batch(x),
}


@pytest.mark.parametrize("method", list(CALLS))
def test_every_entry_refuses_non_finite_inputs_by_name_before_a_step(method):
    m = model()
    before = m.get_weights()
    with pytest.raises(flow.InputError) as refused:
        CALLS[method](m, spoiled())
    message = str(refused.value)
    assert message.startswith(f"Model 'm'.{method.replace('predict_on_batch', 'predict')}: input 'x' expected "
                              f"finite numbers, received ")
    assert "2 NaN and 1 infinite value(s) among 240, the first at index (3, 5)" in message and HINT in message
    assert m.optimizer.iterations == 0
    for a, b in zip(before, m.get_weights()):
        np.testing.assert_array_equal(a, b)
    CALLS[method](m, X)      # the model stays usable
    assert all(np.isfinite(w).all() for w in m.get_weights())


def test_float_labels_and_validation_data_are_checked_before_the_first_step():
    m = model(flow.losses.MeanSquaredError())
    y = np.zeros((40, 3), np.float32)
    y[9, 1] = -np.inf
    with pytest.raises(flow.InputError, match=re.escape("Model 'm'.fit: y expected finite numbers, received 1 "
                                                        "infinite value(s) among 120, the first at index (9, 1)")):
        m.fit(X, y, verbose=0)
    with pytest.raises(flow.InputError, match=re.escape("Model 'm'.fit: validation_data: input 'x' expected finite "
                                                        "numbers, received 2 NaN and 1 infinite")):
        m.fit(X, np.zeros((40, 3), np.float32), validation_data=(spoiled(), np.zeros((40, 3), np.float32)),
              epochs=2, verbose=0)
    assert m.optimizer.iterations == 0


def test_a_generators_batches_are_checked_as_they_come():
    def batches():
        for k in range(5):
            yield (spoiled() if k == 3 else X)[:8], Y[:8]

    m = model()
    with pytest.raises(flow.InputError, match=re.escape("Model 'm'.fit: batch of generator: input 'x' expected "
                                                        "finite numbers, received 1 NaN value(s) among 48, the first "
                                                        "at index (3, 5)")):
        m.fit(batches(), epochs=1, verbose=0)
    assert m.optimizer.iterations == 3      # the batches before it ran; the one with NaN did not
    assert all(np.isfinite(w).all() for w in m.get_weights())


def test_allowed_they_reach_the_model():
    flow.config.allow_nonfinite_inputs(True)
    m = model()
    out = m.predict(spoiled(), verbose=0)
    assert np.isnan(out[3]).all() and np.isfinite(out[:3]).all()
    m.fit(spoiled(), Y, batch_size=40, verbose=0)      # what the check prevents: every weight NaN
    assert all(np.isnan(w).all() for w in m.get_weights())


def test_the_setting_is_taken_once_per_call():
    class AllowAfterFirstBatch(flow.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            flow.config.allow_nonfinite_inputs(True)

    def batches():
        yield X[:8], Y[:8]
        yield spoiled()[:8], Y[:8]

    m = model()
    with pytest.raises(flow.InputError, match=REFUSED):
        m.fit(batches(), epochs=1, verbose=0, callbacks=[AllowAfterFirstBatch()])
    assert flow.config.nonfinite_inputs_allowed()
    m.predict(spoiled(), verbose=0)        # the next call takes the new setting


@pytest.mark.parametrize("bad", [1, "no", None])
def test_the_setting_takes_a_bool(bad):
    with pytest.raises(flow.ConfigError, match=r"allow_nonfinite_inputs\(val\): expected True or False, received"):
        flow.config.allow_nonfinite_inputs(bad)
    assert not flow.config.nonfinite_inputs_allowed()


def test_large_arrays_are_checked_in_blocks_and_found_anywhere():
    a = np.ones((3 * da.CHUNK // 100 + 7, 100), np.float32)
    da.check_finite(a, "a")
    a[-1, 99] = np.nan
    a[-3, 0] = np.inf
    with pytest.raises(flow.InputError, match=re.escape(f"a expected finite numbers, received 1 NaN and 1 infinite "
                                                        f"value(s) among {a.size}, the first at index "
                                                        f"({len(a) - 3}, 0)")):
        da.check_finite(a, "a")
    strided = np.ones((64, 8), np.float32)[:, ::2]
    strided[5, 3] = np.nan
    with pytest.raises(flow.InputError, match=re.escape("the first at index (5, 3)")):
        da.check_finite(strided, "a")


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_finite_values_whose_sum_overflows_are_accepted(dtype):
    big = np.full((4096, 64), np.finfo(dtype).max / 2, dtype)
    da.check_finite(big, "a")
    big[4000, 63] = np.nan
    with pytest.raises(flow.InputError, match=re.escape("1 NaN value(s) among 262144, the first at index (4000, 63)")):
        da.check_finite(big, "a")
