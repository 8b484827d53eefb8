"""Weights are tensors: a layer's Variable used directly in ops, operators and layer calls, and ``add_weight`` with
Keras 3's signature and defaults; custom layers written for Keras 3 run unchanged but for their imports, equal to
Keras on the same weights, in both views."""
import os

import numpy as np
import pytest

import flowlayers as flow
from conftest import BACKEND
from flowlayers import initializers, ops
from places import use

os.environ.setdefault("KERAS_BACKEND", "jax" if BACKEND == "jax" else "tensorflow")
import keras  # noqa: E402

VIEWS = [("mirrored", 1), ("consistent", 2)]


# ---------------------------------------------------------------------------------------------- Keras' own layers
def linear(api, o):
    """keras.io's "Making new layers" Linear layer, written against ``api`` (keras or flowlayers) and its ops."""
    class Linear(api.layers.Layer):
        def __init__(self, units=3, **kwargs):
            super().__init__(**kwargs)
            self.units = units

        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="random_normal",
                                     trainable=True)
            self.b = self.add_weight(shape=(self.units,), initializer="zeros", trainable=True)
            self.gain = self.add_weight(shape=(), initializer="ones", name="gain")

        def call(self, inputs):
            y = o.matmul(inputs, self.w) + self.b
            return o.tanh(y * self.gain - 0.5 * self.b) + 1.0 / (2.0 + o.square(y))
    return Linear


def token_and_position(api, o):
    """keras.io's text classification with a transformer: positions from ``ops.arange`` through an Embedding."""
    class TokenAndPositionEmbedding(api.layers.Layer):
        def __init__(self, maxlen, vocab_size, embed_dim, **kwargs):
            super().__init__(**kwargs)
            self.token_emb = api.layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
            self.pos_emb = api.layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

        def call(self, x):
            maxlen = o.shape(x)[-1]
            positions = o.arange(start=0, stop=maxlen, step=1)
            positions = self.pos_emb(positions)
            x = self.token_emb(x)
            return x + positions
    return TokenAndPositionEmbedding


def _pair(make, build_inputs, copy, x, y, view, n, steps=2):
    """The same model built with Keras and flowlayers (a Dense head after a 3-D output), Keras' weights copied
    over; predictions before and after ``steps`` SGD steps compared."""
    use(view, n)
    models = {}
    for api, o in ((keras, keras.ops), (flow, ops)):
        inputs, layer = build_inputs(api), make(api, o)
        outputs = layer(inputs)
        head = api.layers.Dense(2) if len(outputs.shape) > 2 else None
        outputs = head(api.layers.Flatten()(outputs)) if head is not None else outputs
        models[api] = (api.Model(inputs, outputs), layer, head)
    (km, klayer, khead), (fm, flayer, fhead) = models[keras], models[flow]
    copy(klayer, flayer)
    if khead is not None:
        fhead.set_weights(khead.get_weights())
    np.testing.assert_allclose(fm.predict(x, verbose=0), km.predict(x, verbose=0), rtol=1e-5, atol=1e-5)
    for m, api in ((km, keras), (fm, flow)):
        m.compile(optimizer=api.optimizers.SGD(0.1), loss="mse")
        m.fit(x, y, batch_size=len(x), epochs=steps, shuffle=False, verbose=0)
    np.testing.assert_allclose(fm.predict(x, verbose=0), km.predict(x, verbose=0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("view, n", VIEWS)
def test_a_keras_custom_layer_using_its_weights_directly_trains_as_keras(view, n):
    x = np.random.default_rng(0).normal(size=(4, 5)).astype(np.float32)
    y = np.random.default_rng(1).normal(size=(4, 3)).astype(np.float32)

    def copy(k, f):
        f.set_weights([w.numpy() for w in k.weights])
    _pair(lambda api, o: linear(api, o)(), lambda api: api.Input((5,)), copy, x, y, view, n)


@pytest.mark.parametrize("view, n", VIEWS)
def test_positions_from_ops_arange_through_an_embedding_on_a_float_input(view, n):
    """A float Input of ids (Keras' default dtype): Embedding casts them; ``self.pos_emb(positions)`` takes the
    numpy positions inside ``call`` as a constant."""
    x = np.random.default_rng(0).integers(0, 7, size=(4, 6)).astype(np.float32)
    y = np.random.default_rng(1).normal(size=(4, 2)).astype(np.float32)

    def copy(k, f):
        f.token_emb.set_weights(k.token_emb.get_weights())
        f.pos_emb.set_weights(k.pos_emb.get_weights())
    _pair(lambda api, o: token_and_position(api, o)(6, 7, 3), lambda api: api.Input((6,)), copy, x, y, view, n)


# ---------------------------------------------------------------------------------------------- operators
class Ops(flow.layers.Layer):
    """Each operator with a weight on either side."""

    def build(self, input_shape):
        self.w = self.add_weight(shape=(3,), initializer=flow.initializers.Constant(2.0), name="w")
        self.k = self.add_weight(shape=(3, 2), initializer="ones", name="k")

    def call(self, x):
        return [x * self.w, self.w + 1, 1 - self.w, self.w / 4, 8 / self.w, -self.w + x, np.ones(3, np.float32)
                * self.w, x @ self.k, flow.math.reduce_sum(self.w), flow.matmul(x, self.k), ops.multiply(self.w, x),
                flow.layers.Activation("relu")(self.w - 3)]


def test_every_operator_takes_a_weight_on_either_side():
    x = flow.Input((3,))
    model = flow.Model(x, Ops()(x))
    got = model.predict(np.array([[1.0, 2.0, 3.0]], np.float32), verbose=0)
    want = [[[2, 4, 6]], [3, 3, 3], [-1, -1, -1], [0.5, 0.5, 0.5], [4, 4, 4], [[-1, 0, 1]], [2, 2, 2], [[6, 6]], 6,
            [[6, 6]], [[2, 4, 6]], [0, 0, 0]]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g).reshape(np.shape(w)), w)


def test_read_still_gives_the_weight():
    class Old(flow.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight("w", (input_shape[-1],), initializer="ones")

        def call(self, x):
            return x * self.read(self.w)

    x = flow.Input((2,))
    layer = Old()
    model = flow.Model(x, layer(x))
    assert [w.path for w in layer.weights] == [f"{layer.name}/w"]
    np.testing.assert_allclose(model.predict(np.array([[3.0, 4.0]], np.float32), verbose=0), [[3.0, 4.0]])


# ---------------------------------------------------------------------------------------------- add_weight
class Weights(flow.layers.Layer):
    def __init__(self, make, **kwargs):
        super().__init__(**kwargs)
        self.make = make

    def build(self, input_shape):
        self.made = self.make(self)

    def call(self, x):
        return x


def _made(make):
    layer = Weights(make)
    layer(flow.Input((2,)))
    return layer


def test_add_weight_takes_keras_3s_signature_and_defaults():
    import inspect

    assert list(inspect.signature(flow.layers.Layer.add_weight).parameters)[1:] == list(
        inspect.signature(keras.layers.Layer.add_weight).parameters)[1:]
    layer = _made(lambda self: [self.add_weight(), self.add_weight(shape=(2, 3)), self.add_weight((4,), "ones"),
                                self.add_weight(shape=(2,), dtype="int32"), self.add_weight(name="named")])
    scalar, matrix, ones, ints, named = layer.made
    assert [w.path for w in layer.made] == [f"{layer.name}/{n}" for n in ("variable", "variable_1", "variable_2",
                                                                        "variable_3", "named")]
    assert scalar.shape == () and matrix.shape == (2, 3) and ints.dtype == flow.int32
    assert isinstance(matrix.initializer, initializers.GlorotUniform)
    assert isinstance(ints.initializer, initializers.Zeros) and isinstance(ones.initializer, initializers.Ones)
    np.testing.assert_array_equal(ints.numpy(), [0, 0])
    assert all(w.trainable for w in layer.made)


def test_add_weight_takes_flowlayers_older_positional_form():
    layer = _made(lambda self: [self.add_weight("w", (3,), "ones", None, False)])
    (w,) = layer.made
    assert w.path == f"{layer.name}/w" and w.shape == (3,) and not w.trainable
    np.testing.assert_array_equal(w.numpy(), [1, 1, 1])


@pytest.mark.parametrize("kwargs, match", [
    ({"constraint": "non_neg"}, r"constraint is not supported .* received 'non_neg'"),
    ({"aggregation": "sum"}, r"aggregation 'sum' is not supported"),
    ({"overwrite_with_gradient": True}, r"overwrite_with_gradient=True is not supported"),
    ({"name": "w", "shape": (2,)}, r"expected a new name within the layer, received 'w'"),
])
def test_add_weight_refuses_what_it_cannot_honour_by_name(kwargs, match):
    with pytest.raises(flow.LayerError, match=match):
        _made(lambda self: [self.add_weight(shape=(2,), name="w"), self.add_weight(**kwargs)])


def test_add_weight_accepts_keras_aggregations_a_logical_variable_honours():
    layer = _made(lambda self: [self.add_weight(shape=(2,), aggregation=a) for a in ("none", "mean", None)])
    assert len(layer.made) == 3
