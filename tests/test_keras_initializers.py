"""Keras 3's initializer names: the lowercase names are the classes themselves (as in Keras), LecunUniform draws
Keras' distribution, Identity gives Keras' exact matrix, deserialize takes Keras' saved form, and a Keras name
flowlayers lacks is refused by name."""
import os

import numpy as np
import pytest

import flowlayers as flow
from conftest import BACKEND

os.environ.setdefault("KERAS_BACKEND", "jax" if BACKEND == "jax" else "tensorflow")
import keras  # noqa: E402

ALIASES = ["constant", "glorot_normal", "glorot_uniform", "he_normal", "he_uniform", "lecun_normal", "lecun_uniform",
           "ones", "zeros", "orthogonal", "random_normal", "random_uniform", "variance_scaling", "identity",
           "IdentityInitializer", "OrthogonalInitializer"]


@pytest.mark.parametrize("name", ALIASES)
def test_each_keras_alias_is_the_class_keras_makes_it(name):
    ours, theirs = getattr(flow.initializers, name), getattr(keras.initializers, name)
    assert isinstance(ours, type) and ours.__name__ == theirs.__name__
    assert getattr(flow.initializers, theirs.__name__) is ours


def _dense_kernel(initializer, units=3, inputs=4, view="mirrored", n=1):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    flow.clear_session()
    x = flow.Input((inputs,))
    layer = flow.layers.Dense(units, kernel_initializer=initializer)
    layer(x)
    return layer.get_weights()[0]


@pytest.mark.parametrize("units, inputs", [(3, 4), (5, 2), (4, 4)])
def test_identity_is_keras_exact_matrix(units, inputs):
    for gain in (1.0, 2.5):
        np.testing.assert_array_equal(_dense_kernel(flow.initializers.Identity(gain), units, inputs),
                                      keras.initializers.Identity(gain)((inputs, units)))
    np.testing.assert_array_equal(_dense_kernel("identity", units, inputs, "consistent", 2), np.eye(inputs, units))


def test_identity_refuses_a_shape_that_is_not_a_matrix():
    flow.clear_session()
    x = flow.Input((6, 6, 2))
    layer = flow.layers.Conv2D(4, 3, kernel_initializer="identity")
    layer(x)
    with pytest.raises(flow.LayerError, match=r"Identity initializer: expected a 2-D shape .* \(3, 3, 2, 4\)"):
        layer.get_weights()


def test_lecun_uniform_draws_keras_distribution():
    ours = _dense_kernel(flow.initializers.lecun_uniform(), units=300, inputs=200)
    theirs = np.asarray(keras.initializers.LecunUniform(seed=1)((200, 300)))
    limit = np.sqrt(3.0 / 200)
    assert np.abs(ours).max() <= limit and np.abs(ours).max() > 0.99 * limit
    assert abs(ours.std() - theirs.std()) < 0.02 * theirs.std() and abs(ours.mean()) < 0.01 * limit * 10


def test_deserialize_takes_keras_saved_form():
    saved = keras.initializers.serialize(keras.initializers.VarianceScaling(2.0, "fan_out", "uniform"))
    made = flow.initializers.deserialize(saved)
    assert isinstance(made, flow.initializers.VarianceScaling) and (made.scale, made.mode) == (2.0, "fan_out")
    assert isinstance(flow.initializers.deserialize("lecun_uniform"), flow.initializers.LecunUniform)
    again = flow.initializers.deserialize(flow.initializers.serialize(flow.initializers.Identity(3.0)))
    assert isinstance(again, flow.initializers.Identity) and again.gain == 3.0
    with pytest.raises(flow.LayerError, match=r"initializers.deserialize: expected an initializer .* 'nope'"):
        flow.initializers.deserialize("nope")


def test_a_keras_initializer_flowlayers_lacks_is_refused_by_name():
    with pytest.raises(flow.LayerError, match=r"flow\.initializers\.STFT: Keras 3's keras\.initializers\.STFT is "
                                              r"not in flowlayers"):
        flow.initializers.STFT


@pytest.mark.parametrize("make, low, high", [
    (lambda s: flow.initializers.GlorotUniform(seed=s), -np.sqrt(6 / 700), np.sqrt(6 / 700)),
    (lambda s: flow.initializers.RandomUniform(-0.2, 0.1, seed=s), -0.2, 0.1),
    (lambda s: flow.initializers.HeNormal(seed=s), None, None),
    (lambda s: flow.initializers.RandomNormal(1.0, 0.5, seed=s), None, None),
])
def test_a_seeded_initializer_repeats_its_values_in_every_view(make, low, high):
    """Keras' ``seed=``: the values depend on the seed alone (not on flow.config.set_seed, the layer or the view),
    and follow the initializer's distribution."""
    one = _dense_kernel(make(3), units=300, inputs=400)
    flow.config.set_seed(99)
    np.testing.assert_array_equal(_dense_kernel(make(3), 300, 400, "consistent", 2), one)
    assert not np.array_equal(_dense_kernel(make(4), 300, 400), one)
    if low is not None:
        assert one.min() >= low and one.max() <= high and one.max() > high - 0.01 * (high - low)
    theirs = np.asarray(keras.initializers.get(flow.initializers.serialize(make(1)))((400, 300)))     # Keras' draw
    assert abs(one.std() - theirs.std()) < 0.03 * theirs.std() and abs(one.mean() - theirs.mean()) < 0.05


def test_a_seed_is_in_the_config_and_refused_when_not_an_int():
    saved = flow.initializers.serialize(flow.initializers.GlorotNormal(seed=5))
    assert saved == {"class_name": "GlorotNormal", "config": {"seed": 5}}
    assert flow.initializers.deserialize(saved).seed == 5
    assert flow.initializers.deserialize(keras.initializers.serialize(keras.initializers.HeUniform(seed=7))).seed == 7
    assert flow.initializers.serialize(flow.initializers.GlorotNormal()) == {"class_name": "GlorotNormal",
                                                                             "config": {}}
    with pytest.raises(flow.LayerError, match=r"RandomNormal: seed expected None or an int, received 'a'"):
        flow.initializers.RandomNormal(seed="a")


# Keras 3.15's EinsumDense reads a VarianceScaling kernel's fans from its equation: the kernel letters of the output
# make the fan out, the others the fan in (MultiHeadAttention's projections are EinsumDense layers in Keras)
EINSUMS = [("abc,cde->abde", "de", (16, 96), (16, 6, 32)), ("abcd,cde->abe", "e", (16, 6, 32), (16, 80)),
           ("ab,bc->ac", "c", (96,), (64,)), ("abc,cd->abd", "d", (16, 96), (16, 40))]


@pytest.mark.parametrize("equation, bias, inputs, outputs", EINSUMS, ids=[e[0] for e in EINSUMS])
@pytest.mark.parametrize("initializer", ["glorot_uniform", "he_normal", "lecun_uniform"])
def test_an_einsum_kernel_draws_with_the_fans_keras_gives_it(equation, bias, inputs, outputs, initializer):
    flow.clear_session()
    ours = flow.layers.EinsumDense(equation, outputs, bias_axes=bias, kernel_initializer=initializer)
    ours(flow.Input(inputs))
    theirs = keras.layers.EinsumDense(equation, outputs, bias_axes=bias, kernel_initializer=initializer)
    theirs.build((None,) + inputs)
    ours, theirs = ours.get_weights()[0], np.asarray(theirs.kernel)
    assert ours.shape == theirs.shape
    assert abs(ours.std() - theirs.std()) < 0.06 * theirs.std(), (ours.std(), theirs.std())
    assert flow.layers.EinsumDense(equation, outputs, kernel_initializer=initializer).get_config()[
        "kernel_initializer"] == flow.initializers.serialize(flow.initializers.get(initializer))     # config as given


def test_attention_kernels_draw_with_keras_fans():
    flow.clear_session()
    x = flow.Input((8, 96))
    ours = flow.layers.MultiHeadAttention(6, 32, name="att")
    ours(x, x)
    theirs = keras.layers.MultiHeadAttention(6, 32, name="att")
    theirs(keras.Input((8, 96)), keras.Input((8, 96)))
    for mine, keras_weight in zip(ours.get_weights(), theirs.get_weights()):
        assert mine.shape == keras_weight.shape
        assert abs(mine.std() - keras_weight.std()) <= 0.06 * keras_weight.std(), (mine.shape, mine.std(),
                                                                                   keras_weight.std())


def test_variance_scaling_axes_give_keras_fans_and_are_checked():
    vs = flow.initializers.VarianceScaling(2.0, "fan_out", "uniform", input_axes=[0, 1], output_axes=[2])
    limit = np.sqrt(3.0 * 2.0 / 7)
    assert vs.sampler((3, 5, 7)) == ("uniform", {"minval": -limit, "maxval": limit})
    assert flow.initializers.deserialize(keras.initializers.serialize(keras.initializers.VarianceScaling(
        2.0, "fan_out", "uniform", input_axes=[0, 1], output_axes=[2]))).sampler((3, 5, 7)) == vs.sampler((3, 5, 7))
    assert flow.initializers.deserialize(flow.initializers.serialize(vs)).get_config() == vs.get_config()
    assert flow.initializers.VarianceScaling(distribution="normal").distribution == "truncated_normal"   # Keras' alias
    with pytest.raises(flow.LayerError, match=r"VarianceScaling: input_axes and output_axes expected both or neither"):
        flow.initializers.VarianceScaling(input_axes=[0])
    with pytest.raises(flow.LayerError, match=r"GlorotUniform: output_axes expected a list of ints .* received 'x'"):
        flow.initializers.GlorotUniform(input_axes=[0], output_axes="x")
    with pytest.raises(flow.LayerError, match=r"expected axes of the variable's shape \(3, 5\), received axis 2"):
        flow.initializers.GlorotUniform(input_axes=[0], output_axes=[2]).sampler((3, 5))
    with pytest.raises(flow.LayerError, match=r"VarianceScaling: scale expected a positive float, received 0"):
        flow.initializers.VarianceScaling(0)
    with pytest.raises(flow.LayerError, match=r"VarianceScaling: input_axes expected a list of ints .* \[0, '1'\]"):
        flow.initializers.VarianceScaling(input_axes=[0, "1"], output_axes=[2])


VARIANCE_SCALINGS = [(mode, distribution) for mode in ("fan_in", "fan_out", "fan_avg")
                     for distribution in ("truncated_normal", "untruncated_normal", "uniform")]


@pytest.mark.parametrize("mode, distribution", VARIANCE_SCALINGS)
def test_variance_scaling_of_a_conv_kernel_draws_keras_distribution(mode, distribution):
    """A 3x3 conv kernel's fans count its receptive field, as Keras counts them: the values drawn have Keras'
    spread (std within 3%), mean (0) and bounds (truncated at 2 standard deviations before the correction)."""
    shape = (3, 3, 40, 50)
    flow.clear_session()
    layer = flow.layers.Conv2D(50, 3, kernel_initializer=flow.initializers.VarianceScaling(2.0, mode, distribution))
    layer(flow.Input((8, 8, 40)))
    ours = layer.get_weights()[0]
    theirs = np.asarray(keras.initializers.VarianceScaling(2.0, mode, distribution, seed=2)(shape))
    assert ours.shape == shape
    assert abs(ours.std() / theirs.std() - 1) < 0.03, (ours.std(), theirs.std())
    assert abs(ours.mean()) < 0.05 * theirs.std()
    if distribution == "untruncated_normal":      # beyond 2 of its standard deviations: about 5% of the values
        assert np.abs(ours).max() > 2.5 * theirs.std()
    else:
        assert np.abs(ours).max() <= np.abs(theirs).max() * 1.01 + 1e-6


@pytest.mark.parametrize("units, inputs", [(3, 5), (5, 3), (4, 4)])
def test_orthogonal_kernel_has_orthonormal_columns_or_rows_as_keras(units, inputs):
    ours = _dense_kernel(flow.initializers.Orthogonal(gain=1.5), units, inputs)
    theirs = np.asarray(keras.initializers.Orthogonal(gain=1.5, seed=1)((inputs, units)))
    small = min(units, inputs)
    gram = ours.T @ ours if inputs >= units else ours @ ours.T
    np.testing.assert_allclose(gram, 1.5 ** 2 * np.eye(small), atol=1e-5)
    np.testing.assert_allclose(np.linalg.svd(ours, compute_uv=False), np.linalg.svd(theirs, compute_uv=False),
                               atol=1e-5)


def test_oneflow_truncated_normal_factory_keeps_oneflow_defaults():
    assert flow.initializers.truncated_normal().get_config() == flow.initializers.TruncatedNormal(0.0, 1.0).get_config()
    assert flow.initializers.truncated_normal(0.5).get_config()["stddev"] == 0.5
