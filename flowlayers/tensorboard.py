"""Keras 3's ``keras.callbacks.TensorBoard`` on a flowlayers model.

Keras' callback hands each weight to ``tf.summary.histogram`` (and, with ``write_images``, to Keras ops); a
flowlayers Variable is not a TensorFlow tensor, so its host value (``var.numpy()``) is handed instead: histograms
and images of the weights work as in Keras.  ``write_graph`` (Keras' default True) has nothing to write, as a
flowlayers model has no Keras graph: it is switched off with a warning saying so.  ``embeddings_freq`` is refused:
TensorBoard's projector reads Keras' Embedding layers and checkpoints, which a flowlayers model does not have.
"""
import warnings

from .errors import ConfigError
from .framework.variable import Variable


def is_keras_tensorboard(callback):
    cls = type(callback)
    return cls.__name__ == "TensorBoard" and cls.__module__.split(".")[0] == "keras"


def adapt(callback):
    """Make Keras' TensorBoard ``callback`` (anything else is left alone) write what it can of a flowlayers model,
    before the model is set on it."""
    if not is_keras_tensorboard(callback) or getattr(callback, "_flowlayers_adapted", False):
        return
    if callback.embeddings_freq:
        raise ConfigError(f"keras.callbacks.TensorBoard(embeddings_freq={callback.embeddings_freq!r}): expected "
                          f"embeddings_freq=0 with a flowlayers model; TensorBoard's projector reads Keras Embedding "
                          f"layers and Keras checkpoints, which it does not have (histogram_freq writes the weights)")
    if callback.write_graph:
        warnings.warn("keras.callbacks.TensorBoard(write_graph=True): a flowlayers model has no Keras graph to write, "
                      "so none is written; pass write_graph=False to say so (model.summary() and "
                      "model.parallel_plan() show the model)", UserWarning, stacklevel=7)
        callback.write_graph = False
    if callback.histogram_freq:
        callback._summary_module = _HostSummaries(callback.summary)
        image = callback._log_weight_as_image
        callback._log_weight_as_image = lambda weight, name, epoch: image(_host(weight), name, epoch)
    callback._flowlayers_adapted = True


def _host(value):
    return value.numpy() if isinstance(value, Variable) else value


class _HostSummaries:
    """``tf.summary`` as Keras' TensorBoard uses it, with a flowlayers Variable's histogram taken of its host
    value."""

    def __init__(self, summary):
        self._summary = summary

    def histogram(self, name, data, *args, **kwargs):
        return self._summary.histogram(name, _host(data), *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._summary, name)
