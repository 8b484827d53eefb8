"""Activation recomputation: a segment of the step whose activations the backward pass computes again.

``recomputed(fn)(*inputs)`` runs ``fn`` (tensors in, a list of tensors out) without the gradient tape recording
its ops, so nothing inside is kept for the backward pass; the gradient runs ``fn`` again on the same inputs and
differentiates that.  The recomputation reads the incoming gradient through a data dependency (a control
dependency would not hold: DTensor's passes and grappler's common-subexpression elimination would then merge
the two forward passes and keep every activation again, measured).  The dependency is one element-wise maximum
of a scalar, not TF's ``recompute_grad``'s slice of the flattened gradient, which DTensor gathers whole on every
device when the batch is split.
"""
import tensorflow as tf
from tensorflow.python.eager import record


AFTER_GRADIENT = "recompute_after_gradient"     # the name scope of the dependency (tests find it)


def recomputed(fn):
    @tf.custom_gradient
    def segment(*inputs):
        with record.stop_recording():
            outputs = fn(*inputs)

        def gradient(*upstream):
            floats = [i for i, x in enumerate(outputs) if x.dtype.is_floating]
            if not floats:
                return [tf.zeros_like(x) if x.dtype.is_floating else None for x in inputs]
            upstream = [tf.zeros_like(outputs[i]) if upstream[i] is None else upstream[i] for i in floats]
            with tf.name_scope(AFTER_GRADIENT):
                top = tf.reduce_max(upstream[0])
                # zero once the gradient exists (NaN if it is: no constant, which DTensor would put on the default
                # mesh)
                after = tf.where(tf.equal(top, top), tf.zeros_like(top), top)
                again = [x + tf.cast(after, x.dtype) if x.dtype.is_floating else tf.identity(x) for x in inputs]
            with tf.GradientTape() as tape:
                tape.watch([x for x in again if x.dtype.is_floating])
                recomputed_outputs = fn(*again)
            grads = tape.gradient([recomputed_outputs[i] for i in floats], again, output_gradients=upstream,
                                  unconnected_gradients=tf.UnconnectedGradients.ZERO)
            return [g if x.dtype.is_floating else None for g, x in zip(grads, inputs)]

        return outputs, gradient
    return segment
