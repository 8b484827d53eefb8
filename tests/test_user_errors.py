"""User mistakes raise a FlowLayersError naming the thing, the expected and the received value,
and leave the model training exactly as if they never happened."""
import numpy as np
import pytest

import flowlayers as flow
import flowlayers.typing as tp


def digits(n=64):
    (x, y), _ = flow.data.load_digits()
    return x[:n], y[:n]


def test_conv2d_on_2d_input_names_layer_rank_and_shape():
    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(1)
    x = flow.Input((64,))
    with pytest.raises(flow.ShapeError) as e:
        flow.layers.Conv2D(4, 3, name="conv_a")(x)
    assert "conv_a" in str(e.value) and "rank 4" in str(e.value) and "(None, 64)" in str(e.value)


def test_dense_feature_size_mismatch_names_layer():
    x = flow.Input((64,))
    layer = flow.layers.Dense(3, name="head")
    layer(x)
    with pytest.raises(flow.ShapeError) as e:
        layer(flow.Input((32,)))
    assert "head" in str(e.value) and "64" in str(e.value) and "(None, 32)" in str(e.value)


def make_job(view, n):
    flow.clear_session()
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    cfg = flow.function_config()
    cfg.default_logical_view(flow.scope.mirrored_view() if view == "mirrored" else flow.scope.consistent_view())
    Ph = tp.ListNumpy.Placeholder if view == "mirrored" else tp.Numpy.Placeholder
    per = 16 // n if view == "mirrored" else 16

    @flow.global_function(type="train", function_config=cfg)
    def train_job(images: Ph((per, 1, 8, 8)), labels: Ph((per,), dtype=flow.int32)) -> tp.Numpy:
        logits = flow.layers.dense(flow.reshape(images, [images.shape[0], -1]), 10, name="fc")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss
    return train_job


def run_job(job, view, n, x, y, mistakes):
    from flowlayers.framework.variable import store

    split = (lambda a: np.split(a, n)) if view == "mirrored" else (lambda a: a)
    for i in range(0, len(x), 16):
        for bad in mistakes if i == 16 else []:
            with pytest.raises(flow.FlowLayersError) as e:
                job(*bad)
            yield str(e.value)
        job(split(x[i:i + 16]), split(y[i:i + 16]))
    yield store.variables["fc/kernel"].numpy()


@pytest.mark.parametrize("view,n", [("consistent", 2), ("mirrored", 2)])
def test_job_argument_mistakes_are_named_and_harmless(view, n):
    x, y = digits()
    clean = list(run_job(make_job(view, n), view, n, x, y, []))[-1]
    if view == "mirrored":
        bad = [([x[:8]] * 3, [y[:8]] * 2),                    # list of the wrong length
               (x[:16], [y[:8]] * 2),                         # a bare array
               ([x[:8].astype(np.float64)] * 2, [y[:8]] * 2),  # wrong dtype
               ([x[:7]] * 2, [y[:8]] * 2)]                    # wrong shape
        expect = [("images", "2", "3"), ("images", "list", "ndarray"), ("images[0]", "float32", "float64"),
                  ("images[0]", "(8, 1, 8, 8)", "(7, 1, 8, 8)")]
    else:
        bad = [(x[:15], y[:16]), (x[:16].astype(np.float64), y[:16]), (x[:16], y[:16].astype(np.float32))]
        expect = [("images", "(16, 1, 8, 8)", "(15, 1, 8, 8)"), ("images", "float32", "float64"),
                  ("labels", "int32", "float32")]
    *messages, weights = run_job(make_job(view, n), view, n, x, y, bad)
    for msg, names in zip(messages, expect):
        assert all(s in msg for s in names), (msg, names)
    np.testing.assert_array_equal(weights, clean)


def model():
    flow.clear_session()
    x = flow.Input((1, 8, 8))
    m = flow.Model(x, flow.layers.Dense(10)(flow.layers.Flatten()(x)))
    m.compile(optimizer=flow.optimizers.SGD(0.1, momentum=0.9), loss="sparse_categorical_crossentropy")
    return m


@pytest.mark.parametrize("view,n", [("consistent", 2), ("mirrored", 2)])
def test_fit_mistakes_are_named_and_harmless(view, n):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    x, y = digits()
    clean = model()
    for _ in range(2):
        clean.fit(x, y, batch_size=16, epochs=1, verbose=0)
    m = model()
    m.fit(x, y, batch_size=16, epochs=1, verbose=0)
    cases = [((x, y[:-1]), ("x with 64", "y with 63")),
             ((x, y + 10), ("[0, 10)", "[10, 19]")),
             ((x[:, :, :4], y), ("(None, 1, 8, 8)", "(64, 1, 4, 8)"))]
    for (xb, yb), words in cases:
        with pytest.raises(flow.InputError) as e:
            m.fit(xb, yb, batch_size=16, epochs=1, verbose=0)
        assert all(w in str(e.value) for w in words), str(e.value)
    m.fit(x, y, batch_size=16, epochs=1, verbose=0)
    for a, b in zip(m.get_weights(), clean.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)
