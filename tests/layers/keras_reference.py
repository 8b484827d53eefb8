"""One layer against Keras 3's layer of the same name: the same weights (set from flowlayers' into Keras'), the same
inputs, the outputs within ``atol``; where the model has trainable weights (the layer's, or a Dense head's after
it), one SGD step (mean squared error to a fixed target) moves every weight as Keras' step does.  Run on one
device, two mirrored replicas and a 2x2 ``data x model`` mesh in the consistent view (with layout rules splitting
weights over ``model`` where given), in each case from the same initial weights."""
import keras
import numpy as np

import flowlayers as flow
import places

PLACES = {"one": ("mirrored", 1, None), "mirrored2": ("mirrored", 2, None),
          "2x2": ("consistent", 4, {"data": 2, "model": 2})}
BATCH = 8


def use(place, rules=None):
    """A fresh session in ``place``; ``rules`` apply only where it has a mesh."""
    view, n, mesh = PLACES[place]
    places.use(view, n, mesh, rules if mesh else None, fresh=True)


def model(api, make, shapes, dtypes=None, call=None, head=None):
    """``make(api)``'s layer in a model of inputs of ``shapes`` (a tuple: one input; a list: several), followed by
    ``head(api)``'s layer where given (a Dense, so that a step sends gradients back through a layer of no weights)."""
    several = isinstance(shapes, list)
    dtypes = dtypes or ["float32"] * (len(shapes) if several else 1)
    inputs = [api.Input(s, dtype=d) for s, d in zip(shapes if several else [shapes], dtypes)]
    layer = make(api)
    given = inputs if several else inputs[0]
    out = call(layer, given) if call else layer(given)
    if head is not None:
        out = head(api)(out)
    return api.Model(inputs if several else inputs[0], out)


def data(shapes, seed=0, dtypes=None, low=-2.0, high=2.0):
    rng = np.random.default_rng(seed)
    several = isinstance(shapes, list)
    dtypes = dtypes or ["float32"] * (len(shapes) if several else 1)
    arrays = [rng.uniform(low, high, (BATCH,) + s).astype(d) for s, d in zip(shapes if several else [shapes], dtypes)]
    return arrays if several else arrays[0]


def compare(make, shapes, x=None, places=("one", "mirrored2", "2x2"), rules=None, dtypes=None, call=None, head=None,
            atol=1e-5, lr=0.1):
    """Outputs (and, for a model with trainable weights, one SGD step) equal to Keras'."""
    x = data(shapes, dtypes=dtypes) if x is None else x
    theirs = model(keras, make, shapes, dtypes, call, head)
    use("one")
    ours = model(flow, make, shapes, dtypes, call, head)
    assert [tuple(w.shape) for w in theirs.weights] == [w.shape for w in ours.weights], (
        [w.path for w in ours.weights], [w.path for w in theirs.weights])
    initial = ours.get_weights()
    theirs.set_weights(initial)
    want = _outputs(theirs.predict(x, verbose=0))
    steps = bool(ours.trainable_weights)
    if steps:
        target = [np.random.default_rng(1).normal(size=w.shape).astype(np.float32) for w in want]
        theirs.compile(keras.optimizers.SGD(lr), ["mse"] * len(want))
        theirs.train_on_batch(x, target if len(target) > 1 else target[0])
        want_weights = theirs.get_weights()
    for place in places:
        use(place, rules)
        ours = model(flow, make, shapes, dtypes, call, head)
        ours.set_weights(initial)
        for got, w in zip(_outputs(ours.predict(x, verbose=0)), want):
            np.testing.assert_allclose(got, w, atol=atol, rtol=atol, err_msg=f"forward, {place}")
        if steps:
            ours.compile(flow.optimizers.SGD(lr), "mse")
            ours.train_on_batch(x, target if len(target) > 1 else target[0])
            for got, w, variable in zip(ours.get_weights(), want_weights, ours.weights):
                np.testing.assert_allclose(got, w, atol=atol, rtol=atol,
                                           err_msg=f"{variable.path} after a step, {place}")
    return want


def _outputs(y):
    return [np.asarray(v) for v in y] if isinstance(y, (list, tuple)) else [np.asarray(y)]
