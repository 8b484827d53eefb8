"""EinsumDense against Keras 3's: the same kernel and bias shapes for its documented equations (with ``...``,
``None`` in output_shape, bias_axes), the same outputs and the same training step, in every view."""
import keras
import numpy as np
import pytest

import flowlayers as flow

CASES = [  # (equation, output_shape, bias_axes, per-example input shape)
    ("ab,bc->ac", 5, "c", (6,)),
    ("abc,cd->abd", (None, 5), "d", (3, 6)),
    ("...b,bc->...c", 4, None, (3, 6)),
    ("abc,cde->abde", (None, 2, 3), "de", (4, 6)),
    ("abcd,cde->abe", (None, 5), "e", (4, 2, 3)),
]


@pytest.mark.parametrize("view, n", [("mirrored", 1), ("mirrored", 2), ("consistent", 2)])
@pytest.mark.parametrize("equation, output_shape, bias_axes, shape", CASES)
def test_shapes_outputs_and_a_step_are_keras(view, n, equation, output_shape, bias_axes, shape):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8,) + shape).astype(np.float32)

    def model(api):
        inputs = api.Input(shape)
        layer = api.layers.EinsumDense(equation, output_shape, activation="tanh", bias_axes=bias_axes, name="ed",
                                       bias_initializer="random_normal")
        return api.Model(inputs, layer(inputs)), layer

    (ours, our_layer), (theirs, their_layer) = model(flow), model(keras)
    assert [(w.path, w.shape) for w in our_layer.weights] == [(w.path, tuple(w.shape)) for w in their_layer.weights]
    theirs.set_weights(ours.get_weights())
    np.testing.assert_allclose(ours.predict(x, verbose=0), theirs.predict(x, verbose=0), atol=1e-6)
    target = rng.normal(size=ours.predict(x, verbose=0).shape).astype(np.float32)
    for m, api in ((ours, flow), (theirs, keras)):
        m.compile(api.optimizers.SGD(0.1), "mse")
        m.train_on_batch(x, target)
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)


@pytest.mark.parametrize("make, message", [
    (lambda x: flow.layers.EinsumDense("ab->b", 3)(x), r"equation expected 'input,kernel->output'"),
    (lambda x: flow.layers.EinsumDense("abc,cd->abd", 3)(x), r"expected an input of rank 3, received shape"),
    (lambda x: flow.layers.EinsumDense("ab,bc->ac", 3, bias_axes="z")(x), r"bias_axes expected letters of the "
                                                                          r"output 'ac', received 'z'"),
    (lambda x: flow.layers.EinsumDense("ab,bc->ac", "3")(x), r"output_shape expected an int or a tuple"),
])
def test_mistakes_are_named(make, message):
    with pytest.raises(flow.LayerError, match=message):
        make(flow.Input((6,)))
