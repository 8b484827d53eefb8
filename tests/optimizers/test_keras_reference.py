"""Every optimizer rule against Keras 3's own optimizer, outside flowlayers: the same two-layer model and start,
the same batches, one step and then four more; weights within 1e-6 of Keras' after each, in every place.

The places: one device, the mirrored view on 2 devices, the consistent view on 2 devices (data parallel) and
on a 2x2 data x model mesh with both kernels split over ``model`` (each device updates blocks of them).

Learning rates stay at or under 0.02: flowlayers runs Adam as TF's ``ResourceApplyAdam`` kernel, which lands
closer to float64 than Keras' float32 arithmetic (``1 - 0.999`` in float32 is 1.3e-5 off, and Keras' step size
carries its square root): at a rate of 0.05 the two part by 3.6e-7 a step, at 0.01 by under 1e-7.
"""
import keras
import numpy as np
import pytest

import flowlayers as flow

BATCH, IN, HIDDEN, OUT = 8, 6, 8, 4
STEPS = (1, 4)         # steps taken before each comparison (one step, then four more)
TOLERANCE = 1e-6

# (flowlayers rule, Keras 3 optimizer), the same hyper-parameters
RULES = {
    "sgd": (lambda: flow.optimizers.SGD(0.1), lambda: keras.optimizers.SGD(0.1)),
    "momentum": (lambda: flow.optimizers.SGD(0.1, momentum=0.9), lambda: keras.optimizers.SGD(0.1, momentum=0.9)),
    "nesterov": (lambda: flow.optimizers.SGD(0.1, momentum=0.9, nesterov=True),
                 lambda: keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True)),
    "sgd-weight-decay": (lambda: flow.optimizers.SGD(0.1, momentum=0.5, weight_decay=0.2),
                         lambda: keras.optimizers.SGD(0.1, momentum=0.5, weight_decay=0.2)),
    "adam": (lambda: flow.optimizers.Adam(0.01), lambda: keras.optimizers.Adam(0.01)),
    "adam-betas": (lambda: flow.optimizers.Adam(0.02, beta_1=0.5, beta_2=0.9, epsilon=1e-3),
                   lambda: keras.optimizers.Adam(0.02, beta_1=0.5, beta_2=0.9, epsilon=1e-3)),
    "adamw": (lambda: flow.optimizers.AdamW(0.01, weight_decay=0.5),
              lambda: keras.optimizers.AdamW(0.01, weight_decay=0.5)),
    "adamw-default-decay": (lambda: flow.optimizers.AdamW(0.01), lambda: keras.optimizers.AdamW(0.01)),
    "rmsprop": (lambda: flow.optimizers.RMSprop(0.01), lambda: keras.optimizers.RMSprop(0.01)),
    "rmsprop-epsilon": (lambda: flow.optimizers.RMSprop(0.01, rho=0.5, epsilon=0.05),
                        lambda: keras.optimizers.RMSprop(0.01, rho=0.5, epsilon=0.05)),
    "rmsprop-momentum-centered": (lambda: flow.optimizers.RMSprop(0.01, momentum=0.8, centered=True),
                                  lambda: keras.optimizers.RMSprop(0.01, momentum=0.8, centered=True)),
    # what Keras 3 does to every gradient first: clipping (each bound below what these gradients reach), decay
    "momentum-clipnorm": (lambda: flow.optimizers.SGD(0.1, momentum=0.9, clipnorm=0.1),
                          lambda: keras.optimizers.SGD(0.1, momentum=0.9, clipnorm=0.1)),
    "momentum-global-clipnorm": (lambda: flow.optimizers.SGD(0.1, momentum=0.9, global_clipnorm=0.2),
                                 lambda: keras.optimizers.SGD(0.1, momentum=0.9, global_clipnorm=0.2)),
    "momentum-clipvalue-decay": (lambda: flow.optimizers.SGD(0.1, momentum=0.9, clipvalue=0.02, weight_decay=0.3),
                                 lambda: keras.optimizers.SGD(0.1, momentum=0.9, clipvalue=0.02, weight_decay=0.3)),
    "adam-clipnorm-decay": (lambda: flow.optimizers.Adam(0.01, clipnorm=0.1, weight_decay=0.3),
                            lambda: keras.optimizers.Adam(0.01, clipnorm=0.1, weight_decay=0.3)),
    "adam-global-clipnorm": (lambda: flow.optimizers.Adam(0.01, global_clipnorm=0.2),
                             lambda: keras.optimizers.Adam(0.01, global_clipnorm=0.2)),
    "adam-clipvalue": (lambda: flow.optimizers.Adam(0.01, clipvalue=0.02),
                       lambda: keras.optimizers.Adam(0.01, clipvalue=0.02)),
    "adamw-excluding-biases": (lambda: excluding_biases(flow.optimizers.AdamW(0.01, weight_decay=0.5)),
                               lambda: excluding_biases(keras.optimizers.AdamW(0.01, weight_decay=0.5))),
}


def excluding_biases(optimizer):
    optimizer.exclude_from_weight_decay(var_names=["bias"])
    return optimizer
PLACES = {"one-device": ("mirrored", 1, {}), "mirrored2": ("mirrored", 2, {}), "consistent2": ("consistent", 2, {}),
          "consistent2x2-model-split": ("consistent", (2, 2), {"hidden/kernel$": (None, "model"),
                                                                "out/kernel$": ("model", None)})}


def data():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((BATCH * sum(STEPS), IN)).astype(np.float32)
    return x, rng.standard_normal((BATCH * sum(STEPS), OUT)).astype(np.float32)


def flow_model(optimizer):
    flow.clear_session()
    flow.config.set_seed(5)
    x = flow.Input((IN,))
    h = flow.layers.Dense(HIDDEN, activation="tanh", name="hidden")(x)
    model = flow.Model(x, flow.layers.Dense(OUT, name="out")(h))
    model.compile(optimizer=optimizer, loss=flow.losses.MeanSquaredError())
    return model


def keras_model(weights, optimizer):
    model = keras.Sequential([keras.Input((IN,)), keras.layers.Dense(HIDDEN, activation="tanh"),
                              keras.layers.Dense(OUT)])
    model.set_weights(weights)
    model.compile(optimizer=optimizer, loss="mse")
    return model


def batches(x, y):
    """The data of each comparison: the first step's batch, then the next four."""
    first = BATCH * STEPS[0]
    return [(x[:first], y[:first]), (x[first:], y[first:])]


_keras_weights = {}


def keras_reference(rule, start):
    """Keras 3's weights after each part of the data, computed once per rule."""
    if rule not in _keras_weights:
        model = keras_model(start, RULES[rule][1]())
        _keras_weights[rule] = []
        for xs, ys in batches(*data()):
            model.fit(xs, ys, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
            _keras_weights[rule].append([w.copy() for w in model.get_weights()])
    return _keras_weights[rule]


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("rule", sorted(RULES))
def test_rule_trains_to_keras_weights(rule, place):
    view, devices, rules = PLACES[place]
    flow.config.set_view(view)
    if isinstance(devices, tuple):
        flow.config.gpu_device_num(devices[0] * devices[1])
        flow.config.set_mesh(data=devices[0], model=devices[1])
    else:
        flow.config.gpu_device_num(devices)
    flow.config.set_layout_rules(rules)
    model = flow_model(RULES[rule][0]())
    start = [w.copy() for w in model.get_weights()]
    expected = keras_reference(rule, start)
    for part, ((xs, ys), want) in enumerate(zip(batches(*data()), expected)):
        model.fit(xs, ys, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
        got = model.get_weights()
        moved = max(float(np.abs(w - s).max()) for w, s in zip(want, start))
        assert moved > 1e-3, f"{rule}: Keras' weights hardly moved ({moved}); the comparison would prove nothing"
        diff = max(float(np.abs(g - w).max()) for g, w in zip(got, want))
        assert diff < TOLERANCE, f"{rule} in {place}: weights {diff:.2e} from Keras 3's after {sum(STEPS[:part + 1])} " \
                                 f"step(s)"


def test_exclusion_from_weight_decay_comes_before_the_optimizer_is_built():
    """As in Keras: once the optimizer has its slots (here made by planning the step, before any step ran), the
    exclusion is refused, and the optimizer is left as it was."""
    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(1)
    optimizer = flow.optimizers.AdamW(0.01)
    model = flow_model(optimizer)
    model.parallel_plan(batch_size=BATCH)
    assert optimizer.iterations == 0
    with pytest.raises(flow.ConfigError, match=r"AdamW.exclude_from_weight_decay: expected before the optimizer's "
                                               r"first step \(Keras: before it is built\)"):
        optimizer.exclude_from_weight_decay(var_names=["bias"])
    assert all(optimizer.decays(w) for w in model.trainable_weights)
