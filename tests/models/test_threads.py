"""One thread at a time inside a model's fit, evaluate and predict: a call from a second thread while the first is
inside is refused by name (the model, the method running), the first call ends as it would alone, and the model
stays usable.  The thread inside may call in again (a callback evaluating the model inside fit)."""
import re
import threading

import numpy as np
import pytest

import flowlayers as flow

RNG = np.random.default_rng(6)
X = RNG.normal(size=(32, 6)).astype(np.float32)
Y = RNG.integers(0, 3, 32)


def model(name="m"):
    x = flow.Input((6,), name="x")
    m = flow.Model(x, flow.layers.Dense(3, name="out")(x), name=name)
    m.compile(flow.optimizers.Adam(0.01), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


def pausing(inside, release):
    """Two batches; between them (inside the call that draws them) it signals ``inside`` and waits."""
    yield X[:16], Y[:16]
    inside.set()
    assert release.wait(60)
    yield X[16:], Y[16:]


FIRST = {
    "fit": lambda m, data: m.fit(data, epochs=1, verbose=0),
    "evaluate": lambda m, data: m.evaluate(data, verbose=0),
    "predict": lambda m, data: m.predict(data, verbose=0),
}
SECOND = {
    "fit": lambda m: m.fit(X, Y, verbose=0),
    "evaluate": lambda m: m.evaluate(X, Y, verbose=0),
    "predict": lambda m: m.predict(X, verbose=0),
    "train_on_batch": lambda m: m.train_on_batch(X, Y),
    "test_on_batch": lambda m: m.test_on_batch(X, Y),
    "predict_on_batch": lambda m: m.predict_on_batch(X),
}


def alone(method, start):
    """What ``method`` gives on a model from the weights ``start`` with no other thread about."""
    m = model()
    m.set_weights(start)
    return FIRST[method](m, iter([(X[:16], Y[:16]), (X[16:], Y[16:])])), m.get_weights()


@pytest.mark.parametrize("second", list(SECOND))
@pytest.mark.parametrize("first", list(FIRST))
def test_a_second_thread_is_refused_by_name_and_the_first_call_ends_as_alone(first, second):
    m, other = model(), model("other")
    start = m.get_weights()
    inside, release, result = threading.Event(), threading.Event(), {}
    thread = threading.Thread(target=lambda: result.update(out=FIRST[first](m, pausing(inside, release))),
                              name="trainer")
    thread.start()
    try:
        assert inside.wait(60)
        with pytest.raises(flow.InputError, match=re.escape(
                f"Model 'm'.{second.replace('predict_on_batch', 'predict')}: expected no other thread inside this "
                f"model's fit, evaluate or predict, received a call while its {first} runs in thread 'trainer'")):
            SECOND[second](m)
        SECOND[second](other)       # another model meanwhile: free
    finally:
        release.set()
        thread.join(60)
    expected, weights = alone(first, start)
    if first == "predict":
        np.testing.assert_array_equal(result["out"], expected)
    elif first == "fit":
        assert result["out"].history == pytest.approx(expected.history, rel=1e-6)
    else:
        assert result["out"] == pytest.approx(expected, rel=1e-6)
    for a, b in zip(weights, m.get_weights()):
        np.testing.assert_array_equal(a, b)
    SECOND[second](m)       # usable again, from this thread too
    assert m.evaluate(X, Y, verbose=0) > 0


def test_the_thread_inside_may_call_in_again_and_another_is_told_the_outer_call():
    inside, release, seen = threading.Event(), threading.Event(), []

    class Validate(flow.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append((self.model.evaluate(X, Y, verbose=0), self.model.predict(X[:4], verbose=0).shape))
            inside.set()
            assert release.wait(60)

    m = model()
    thread = threading.Thread(target=lambda: m.fit(X, Y, epochs=2, verbose=0, callbacks=[Validate()]),
                              name="trainer")
    thread.start()
    try:
        assert inside.wait(60)
        with pytest.raises(flow.InputError, match="received a call while its fit runs in thread 'trainer'"):
            m.evaluate(X, Y, verbose=0)
    finally:
        release.set()
        thread.join(60)
    assert len(seen) == 2 and all(loss > 0 and shape == (4, 3) for loss, shape in seen)
    m.fit(X, Y, verbose=0)      # the model is free again once fit returned
