"""What the recurrent layers' tests share: the places they run in, Keras' weights, the comparison of one step."""
import keras
import numpy as np
import pytest

import flowlayers as flow
import places

PLACES = {"1": ("mirrored", 1, None), "mirrored2": ("mirrored", 2, None), "consistent2": ("consistent", 2, None),
          "2x2": ("consistent", 4, {"data": 2, "model": 2})}
SPLIT_KERNELS = {r"_cell/kernel$": (None, "model"), r"_cell/recurrent_kernel$": (None, "model")}
TIME, FEATURES, UNITS, BATCH = 5, 3, 4, 8

# the quick loop runs one device and two replicas; the consistent view and the 2x2 mesh take seconds per model
QUICK = ["1", "mirrored2"]
EVERY_PLACE = QUICK + [pytest.param(p, marks=pytest.mark.slow) for p in ("consistent2", "2x2")]


def use(place):
    """``place``, with the cells' kernels split over ``model`` where it has a mesh."""
    view, n, mesh = PLACES[place]
    places.use(view, n, mesh, SPLIT_KERNELS if mesh else None)


def keras_weights(model, rng):
    """Keras' model given random weights of its own shapes (biases too, so that their gradients count)."""
    model.set_weights([rng.normal(scale=0.5, size=w.shape).astype(np.float32) for w in model.get_weights()])
    return model.get_weights()


def same_step(ours, theirs, inputs, target, atol=1e-5):
    """Our model and Keras' predict alike, and one SGD step on mean squared error moves their weights alike."""
    np.testing.assert_allclose(ours.predict(inputs, verbose=0), theirs.predict(inputs, verbose=0), atol=atol)
    for model, api in ((ours, flow), (theirs, keras)):
        model.compile(api.optimizers.SGD(0.5), "mse")
        model.train_on_batch(inputs, target)
    for a, b, w in zip(ours.get_weights(), theirs.get_weights(), theirs.weights):
        np.testing.assert_allclose(a, b, atol=atol, err_msg=w.path)


def padded_ids(rng, vocabulary=12):
    """Ids with 0 as padding: at the end of most rows, in the middle of one, a row all padding."""
    ids = rng.integers(1, vocabulary, (BATCH, TIME)).astype(np.int32)
    for row, length in enumerate([5, 3, 1, 4, 2, 0, 5, 3]):
        ids[row, length:] = 0
    ids[0, 2] = 0
    return ids
