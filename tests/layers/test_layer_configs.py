"""Every layer's ``get_config`` returns each constructor argument as JSON, and ``from_config`` of it makes a layer
that computes the same (what whole-model save relies on).  A new layer without a row here fails the census."""
import inspect
import json

import numpy as np
import pytest

import flowlayers as flow
from flowlayers import layers as L

IMAGE, SEQUENCE, FLAT, VOLUME = (5, 6, 2), (7, 3), (6,), (4, 5, 6, 2)

# class -> (constructor arguments other than the defaults, the per-example input shape (a list: several inputs))
EXAMPLES = {
    L.Dense: (dict(units=3, activation="tanh", use_bias=False, kernel_initializer="he_normal",
                   kernel_regularizer=flow.regularizers.L1L2(0.01, 0.02)), FLAT),
    L.Conv2D: (dict(filters=2, kernel_size=(3, 2), strides=(1, 2), padding="same", dilation_rate=1,
                    activation="relu", bias_initializer="ones", bias_regularizer="l2"), IMAGE),
    L.Conv1D: (dict(filters=2, kernel_size=3, padding="causal", dilation_rate=2), SEQUENCE),
    L.Conv2DTranspose: (dict(filters=2, kernel_size=3, strides=2, padding="same"), IMAGE),
    L.MaxPool2D: (dict(pool_size=2, strides=1, padding="same"), IMAGE),
    L.AveragePooling2D: (dict(pool_size=(2, 3)), IMAGE),
    L.GlobalAveragePooling2D: (dict(keepdims=True), IMAGE),
    L.GlobalMaxPooling2D: (dict(data_format="channels_first"), IMAGE),
    L.Flatten: (dict(), IMAGE),
    L.Reshape: (dict(target_shape=(3, 4)), (12,)),
    L.UpSampling2D: (dict(size=(2, 3)), IMAGE),
    L.ZeroPadding2D: (dict(padding=((1, 0), (2, 1))), IMAGE),
    L.Dropout: (dict(rate=0.3, seed=7), FLAT),
    L.BatchNormalization: (dict(momentum=0.9, epsilon=1e-2, center=False, gamma_initializer="random_normal"),
                           IMAGE),
    L.LayerNormalization: (dict(axis=[-2, -1], epsilon=1e-4, scale=False), IMAGE),
    L.Embedding: (dict(input_dim=10, output_dim=4, embeddings_initializer="glorot_uniform",
                       embeddings_regularizer=flow.regularizers.l1(0.1)), (3,)),
    L.ReversibleEmbedding: (dict(input_dim=10, output_dim=4, tie_weights=False, logit_soft_cap=2.0,
                                 reverse_dtype="float32"), (3,)),
    L.Activation: (dict(activation="gelu"), FLAT),
    L.ReLU: (dict(), FLAT),
    L.Softmax: (dict(axis=-1), FLAT),
    L.Rescaling: (dict(scale=1 / 255, offset=-0.5), FLAT),
    L.Add: (dict(), [FLAT, FLAT]),
    L.Subtract: (dict(), [FLAT, FLAT]),
    L.Multiply: (dict(), [FLAT, FLAT, FLAT]),
    L.Average: (dict(), [FLAT, FLAT]),
    L.Concatenate: (dict(axis=1), [FLAT, (2,)]),
    L.EinsumDense: (dict(equation="abc,cde->abde", output_shape=(None, 2, 3), bias_axes="de", activation="relu"),
                    (4, 6)),
    L.MultiHeadAttention: (dict(num_heads=2, key_dim=3, value_dim=2, output_shape=5, dropout=0.1,
                                kernel_regularizer="l2", seed=4), [(4, 6), (3, 6)]),    # mha([query, value])
    L.MaxPooling1D: (dict(pool_size=3, strides=1, padding="same"), SEQUENCE),
    L.AveragePooling1D: (dict(pool_size=2, data_format="channels_first"), SEQUENCE),
    L.MaxPooling3D: (dict(pool_size=(1, 2, 2)), VOLUME),
    L.AveragePooling3D: (dict(pool_size=2, padding="same"), VOLUME),
    L.GlobalAveragePooling1D: (dict(keepdims=True), SEQUENCE),
    L.GlobalMaxPooling1D: (dict(data_format="channels_first"), SEQUENCE),
    L.GlobalAveragePooling3D: (dict(), VOLUME),
    L.GlobalMaxPooling3D: (dict(keepdims=True), VOLUME),
    L.Conv3D: (dict(filters=2, kernel_size=2, padding="same", activation="relu", kernel_regularizer="l1"), VOLUME),
    L.Conv1DTranspose: (dict(filters=2, kernel_size=3, strides=2, padding="same"), SEQUENCE),
    L.DepthwiseConv2D: (dict(kernel_size=2, depth_multiplier=2, depthwise_regularizer="l2"), IMAGE),
    L.SeparableConv1D: (dict(filters=2, kernel_size=2, pointwise_initializer="he_normal"), SEQUENCE),
    L.SeparableConv2D: (dict(filters=2, kernel_size=(2, 3), padding="same", bias_initializer="ones"), IMAGE),
    L.GroupNormalization: (dict(groups=2, epsilon=1e-2, gamma_initializer="random_normal"), IMAGE),
    L.UnitNormalization: (dict(axis=[1, 2]), SEQUENCE),
    L.SpatialDropout1D: (dict(rate=0.3, seed=2), SEQUENCE),
    L.SpatialDropout2D: (dict(rate=0.3, data_format="channels_first"), IMAGE),
    L.GaussianNoise: (dict(stddev=0.1, seed=1), FLAT),
    L.GaussianDropout: (dict(rate=0.2), FLAT),
    L.ActivityRegularization: (dict(l1=0.1, l2=0.2), FLAT),
    L.Permute: (dict(dims=(2, 1)), SEQUENCE),
    L.RepeatVector: (dict(n=3), FLAT),
    L.Cropping1D: (dict(cropping=(1, 2)), SEQUENCE),
    L.Cropping2D: (dict(cropping=((1, 0), (2, 1))), IMAGE),
    L.ZeroPadding1D: (dict(padding=(2, 1)), SEQUENCE),
    L.UpSampling1D: (dict(size=3), SEQUENCE),
    L.Maximum: (dict(), [FLAT, FLAT]),
    L.Minimum: (dict(), [FLAT, FLAT, FLAT]),
    L.Dot: (dict(axes=1, normalize=True), [FLAT, FLAT]),
    L.Identity: (dict(), FLAT),
    L.Masking: (dict(mask_value=1.0), SEQUENCE),
    L.Attention: (dict(use_scale=True, score_mode="concat", dropout=0.1, seed=3), [(4, 6), (3, 6)]),
    L.AdditiveAttention: (dict(use_scale=False), [(4, 6), (3, 6)]),
    L.Normalization: (dict(mean=[0.5, 1.0], variance=[1.0, 2.0], invert=True), IMAGE),
    L.Discretization: (dict(bin_boundaries=[-1.0, 0.0, 1.0], output_mode="one_hot"), FLAT),
    L.CategoryEncoding: (dict(num_tokens=10, output_mode="count"), (3,)),
    L.Resizing: (dict(height=3, width=4, interpolation="nearest", crop_to_aspect_ratio=True), IMAGE),
    L.CenterCrop: (dict(height=3, width=4), IMAGE),
    L.RandomFlip: (dict(mode="vertical", seed=2), IMAGE),
    L.RandomRotation: (dict(factor=(-0.1, 0.2), fill_mode="constant", fill_value=1.0), IMAGE),
    L.RandomZoom: (dict(height_factor=0.1, width_factor=(0.0, 0.2), interpolation="nearest"), IMAGE),
    L.RandomTranslation: (dict(height_factor=(0.1, 0.2), width_factor=0.1, fill_mode="wrap"), IMAGE),
    L.RandomContrast: (dict(factor=0.3, value_range=(0, 1), data_format="channels_first"), IMAGE),
    L.SimpleRNN: (dict(units=3, activation="relu", return_sequences=True, go_backwards=True), SEQUENCE),
    L.LSTM: (dict(units=3, recurrent_activation="hard_sigmoid", unit_forget_bias=False, dropout=0.2, seed=1),
             SEQUENCE),
    L.GRU: (dict(units=3, reset_after=False, return_sequences=True), [SEQUENCE, (3,)]),     # gru([x, state])
    L.Bidirectional: (dict(layer=L.LSTM(3, return_sequences=True), merge_mode="sum"), SEQUENCE),
    L.TimeDistributed: (dict(layer=L.Dense(2, activation="relu")), SEQUENCE),
}
INTEGER_INPUTS = (L.Embedding, L.CategoryEncoding)
# a layer whose config would hold code: get_config refuses it by name (flowlayers loads no code from files)
REFUSED = {L.Lambda: dict(function=lambda x: x * 2.0)}


def exported_layer_classes():
    return {v for v in vars(L).values() if isinstance(v, type) and issubclass(v, L.Layer) and v is not L.Layer}


def test_every_exported_layer_has_an_example():
    assert exported_layer_classes() == set(EXAMPLES) | set(REFUSED)


@pytest.mark.parametrize("cls", list(REFUSED), ids=lambda c: c.__name__)
def test_a_layer_holding_code_refuses_get_config_by_name(cls):
    layer = cls(**REFUSED[cls], name="code")
    with pytest.raises(flow.LayerError, match=rf"layer 'code' \({cls.__name__}\): its function .* is code"):
        layer.get_config()


def arrays(shapes, rng):
    if isinstance(shapes, list):
        return [rng.normal(size=(4,) + s).astype(np.float32) for s in shapes]
    return rng.normal(size=(4,) + shapes).astype(np.float32)


@pytest.mark.parametrize("cls", list(EXAMPLES), ids=lambda c: c.__name__)
def test_from_config_makes_a_layer_that_computes_the_same(cls):
    kwargs, shapes = EXAMPLES[cls]
    layer = cls(**kwargs, name="original")
    config = json.loads(json.dumps(layer.get_config()))         # what a saved model holds
    taken = [p.name for p in inspect.signature(cls).parameters.values()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    assert set(taken) - {"input_shape", "batch_size"} <= set(config), "constructor arguments left out"
    config["name"] = "copy"
    copy = cls.from_config(config)
    assert json.loads(json.dumps(copy.get_config())) == config

    def model(of):
        if isinstance(shapes, list):
            inputs = [flow.Input(s) for s in shapes]
            return flow.Model(inputs, of(inputs))
        x = flow.Input(shapes, dtype="int32" if issubclass(cls, INTEGER_INPUTS) else "float32")
        return flow.Model(x, of(x))

    a, b = model(layer), model(copy)
    b.set_weights(a.get_weights())
    rng = np.random.default_rng(0)
    x = rng.integers(0, 10, (4,) + shapes) if issubclass(cls, INTEGER_INPUTS) else arrays(shapes, rng)
    np.testing.assert_array_equal(a.predict(x, verbose=0), b.predict(x, verbose=0))
