"""Identity, Lambda and Masking against Keras 3: the same outputs; a Lambda is not saved (its function is code),
refused by name; Masking's mask reaches the layer called on its output where that layer takes one
(GlobalAveragePooling1D, Attention), with Keras' values, and is refused by name by any other."""
import keras
import numpy as np
import pytest

import flowlayers as flow
from keras_reference import compare, use

SEQ = (6, 3)


def _square_plus(x, offset=0.0):
    return flow.math.square(x) + offset if isinstance(x, flow.Blob) else keras.ops.square(x) + offset


def _masked_steps(seed=0):
    """Sequences whose last steps (a number per example) are all zeros: what Masking masks."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (8,) + SEQ).astype(np.float32)
    for i, kept in enumerate([6, 5, 4, 3, 2, 6, 1, 4]):
        x[i, kept:] = 0.0
    return x


def test_identity_is_keras():
    compare(lambda api: api.layers.Identity(), SEQ, head=lambda api: api.layers.Dense(2, name="head"))


def test_lambda_is_keras():
    compare(lambda api: api.layers.Lambda(_square_plus, arguments={"offset": 0.5}), SEQ,
            head=lambda api: api.layers.Dense(2, name="head"))


def test_lambda_checks_its_output_shape():
    flow.layers.Lambda(_square_plus, output_shape=SEQ)(flow.Input(SEQ))
    with pytest.raises(flow.ShapeError, match=r"output_shape \(3, 6\) expected, its function returned shape "
                                              r"\(None, 6, 3\)"):
        flow.layers.Lambda(_square_plus, output_shape=(3, 6))(flow.Input(SEQ))


def test_a_model_with_a_lambda_is_not_saved(tmp_path):
    x = flow.Input(SEQ)
    model = flow.Model(x, flow.layers.Lambda(lambda t: t * 2.0, name="double")(x))
    with pytest.raises(flow.LayerError, match=r"layer 'double' \(Lambda\): its function '.*<lambda>' is code, which "
                                              r"flowlayers does not save"):
        model.save(tmp_path / "m.keras")
    assert not (tmp_path / "m.keras").exists()
    np.testing.assert_array_equal(model.predict(np.ones((2,) + SEQ, np.float32), verbose=0), 2.0)


def test_masking_is_keras():
    compare(lambda api: api.layers.Masking(), SEQ, x=_masked_steps())


def test_masking_into_global_average_pooling_is_keras():
    x = _masked_steps()

    class Pool:
        def __init__(self, api):
            self.mask, self.pool = api.layers.Masking(), api.layers.GlobalAveragePooling1D()

        def __call__(self, t):
            return self.pool(self.mask(t))

    want = compare(lambda api: Pool(api), SEQ, x=x, call=lambda layer, t: layer(t))
    kept = (x != 0).any(axis=-1, keepdims=True)
    np.testing.assert_allclose(want[0], (x * kept).sum(1) / kept.sum(1), rtol=1e-5)


def test_masking_into_attention_is_keras():
    def build(api):
        q, v = api.Input((4, 3)), api.Input(SEQ)
        return api.Model([q, v], api.layers.Attention(use_scale=True)([q, api.layers.Masking()(v)]))

    rng = np.random.default_rng(2)
    q, v = rng.normal(size=(8, 4, 3)).astype(np.float32), _masked_steps()
    theirs = build(keras)
    use("one")
    ours = build(flow)
    theirs.set_weights(ours.get_weights())
    np.testing.assert_allclose(ours.predict([q, v], verbose=0), theirs.predict([q, v], verbose=0), atol=1e-5)


def test_a_layer_that_cannot_take_the_mask_refuses_it_and_the_model_stays_usable():
    x = flow.Input(SEQ)
    masked = flow.layers.Masking(name="mask")(x)
    with pytest.raises(flow.LayerError, match=r"layer 'dense' \(Dense\): its input carries the mask of layer 'mask' "
                                              r"\(Masking\), which this layer cannot take"):
        flow.layers.Dense(2)(masked)
    pooled = flow.layers.GlobalAveragePooling1D()(masked)
    model = flow.Model(x, flow.layers.Dense(2, kernel_initializer="ones")(pooled))
    np.testing.assert_allclose(model.predict(np.ones((2,) + SEQ, np.float32), verbose=0), 3.0)


def test_a_saved_model_finds_the_mask_again(tmp_path):
    x = flow.Input(SEQ)
    model = flow.Model(x, flow.layers.GlobalAveragePooling1D()(flow.layers.Masking()(x)))
    model.save(tmp_path / "m.keras")
    loaded = flow.models.load_model(tmp_path / "m.keras")
    data = _masked_steps()
    np.testing.assert_allclose(loaded.predict(data, verbose=0), model.predict(data, verbose=0), rtol=1e-6)
    kept = (data != 0).any(axis=-1, keepdims=True)
    np.testing.assert_allclose(loaded.predict(data, verbose=0), (data * kept).sum(1) / kept.sum(1), rtol=1e-5)
