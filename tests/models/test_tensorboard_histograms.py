"""Keras 3's TensorBoard callback with ``histogram_freq=1`` on flowlayers models: each epoch writes a histogram (and,
with ``write_images``, an image) of every weight, of its values at that epoch's end, read back with TensorFlow's
event reader; ``write_graph`` is switched off with a warning naming it (a flowlayers model has no Keras graph);
``embeddings_freq`` is refused by name before training, the model staying usable."""
import glob
import warnings

import keras
import numpy as np
import pytest

import flowlayers as flow

tf = pytest.importorskip("tensorflow")     # used beside the backend under test: without it the file is skipped
pytestmark = pytest.mark.needs_tensorflow

PLACES = [("mirrored", 2), ("consistent", 2)]
RNG = np.random.default_rng(5)
X = RNG.normal(size=(64, 4)).astype("float32")
Y = (X.sum(1) > 0).astype("int32")


def _model(view, n):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    x = flow.Input((4,))
    model = flow.Model(x, flow.layers.Dense(2)(flow.layers.Dense(3, activation="relu")(x)))
    model.compile("sgd", flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _events(folder):
    """``{tag: {step: tensor}}`` of the event files under ``folder``."""
    out = {}
    for path in glob.glob(str(folder / "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                out.setdefault(value.tag, {})[event.step] = tf.make_ndarray(value.tensor)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("view, n", PLACES, ids=[f"{v}{n}" for v, n in PLACES])
def test_histograms_and_images_of_every_weight_each_epoch(view, n, tmp_path):
    model = _model(view, n)
    board = keras.callbacks.TensorBoard(str(tmp_path), histogram_freq=1, write_images=True, write_graph=False)
    model.fit(X, Y, batch_size=16, epochs=2, verbose=0, callbacks=[board])
    events = _events(tmp_path / "train")
    for var in model.weights:
        histograms = events[f"{var.path}/histogram"]
        assert sorted(histograms) == [0, 1]
        buckets, values = histograms[1], var.numpy()        # the last epoch's: the weights fit ends with
        assert buckets[:, 2].sum() == values.size
        assert buckets[:, 0].min() == pytest.approx(values.min()) and buckets[:, 1].max() == pytest.approx(
            values.max())
        assert sorted(events[f"{var.path}/image"]) == [0, 1]


def test_write_graph_is_switched_off_saying_so_and_embeddings_are_refused(tmp_path):
    model = _model("mirrored", 1)
    with pytest.warns(UserWarning, match="write_graph=True\\): a flowlayers model has no Keras graph"):
        model.fit(X, Y, epochs=1, verbose=0, callbacks=[keras.callbacks.TensorBoard(str(tmp_path / "a"))])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.fit(X, Y, epochs=1, verbose=0,
                  callbacks=[keras.callbacks.TensorBoard(str(tmp_path / "b"), write_graph=False)])
    with pytest.raises(flow.ConfigError, match="TensorBoard\\(embeddings_freq=1\\): expected embeddings_freq=0"):
        model.fit(X, Y, epochs=1, verbose=0,
                  callbacks=[keras.callbacks.TensorBoard(str(tmp_path / "c"), embeddings_freq=1)])
    assert np.isfinite(model.evaluate(X, Y, verbose=0))
