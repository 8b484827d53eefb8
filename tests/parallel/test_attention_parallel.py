"""Megatron-style tensor parallelism of MultiHeadAttention by layout rules on Keras' variable names
(``flow.parallel.attention_rules()``): on a 2x2 data x model mesh the heads are split over ``model`` (shard shapes
read back from the engine), one block's forward pass needs exactly one all-reduce over ``model``, and training
equals one device."""
import numpy as np
import pytest

import flowlayers as flow
import places

RNG = np.random.default_rng(0)
X = RNG.normal(size=(8, 5, 8)).astype(np.float32)
T = RNG.normal(size=(8, 5, 8)).astype(np.float32)


def train(devices, mesh, rules):
    places.consistent(devices, mesh, rules, seed=1)
    x = flow.Input((5, 8))
    h = flow.layers.MultiHeadAttention(4, 2, name="b0_attn")(x, x, use_causal_mask=True)
    h = flow.layers.LayerNormalization(name="b0_norm")(x + h)
    model = flow.Model(x, flow.layers.MultiHeadAttention(4, 2, name="b1_attn")(h, h, use_causal_mask=True))
    model.compile(flow.optimizers.Adam(0.01), "mse")
    history = model.fit(X, T, batch_size=4, epochs=2, shuffle=False, verbose=0).history
    return model, history


def test_heads_split_over_model_train_to_one_device_weights():
    one_device, want = train(1, {}, {})
    reference = one_device.get_weights()
    model, got = train(4, {"data": 2, "model": 2}, flow.parallel.attention_rules())
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-5)
    for w, a, b in zip(model.weights, model.get_weights(), reference):
        # a key bias adds q.b to every score of a query, which the softmax ignores: its gradient is zero but for
        # rounding, which Adam scales up to steps of about lr in either direction, in every view alike
        if not w.path.endswith("key/bias"):
            np.testing.assert_allclose(a, b, atol=1e-5)
    plan = model.parallel_plan(batch_size=4)
    for block in ("b0_attn", "b1_attn"):
        assert plan.variables[f"{block}/query/kernel"].shard_shape == (8, 2, 2)
        assert plan.variables[f"{block}/attention_output/kernel"].shard_shape == (2, 2, 8)
    forward_model = [b for b in plan.boxing if b.phase == "forward" and any(a == "model" for a, _ in b.collectives)]
    assert len(forward_model) == 2, forward_model                  # one per attention block
    assert all(kind == "all-reduce" for b in forward_model for _, kind in b.collectives)


def test_attention_rules_are_checked():
    with pytest.raises(flow.SBPError, match=r"attention_rules: layers expected a regular expression, received '\('"):
        flow.parallel.attention_rules("(")
    assert flow.parallel.attention_rules("b0_attn", axis="m")["(^|/)(b0_attn)/attention_output/kernel$"] == \
        ("m", None, None)


def test_zero_rules_are_checked():
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(2)
    x = flow.Input((3,))
    model = flow.Model(x, flow.layers.Dense(4, name="d")(x))
    assert flow.parallel.zero_rules(model) == {"^d/kernel$": (None, "data"), "^d/bias$": ("data",)}
    with pytest.raises(flow.SBPError, match=r"zero_rules: axis expected one of the mesh axes \['data'\], received "
                                            r"'model'"):
        flow.parallel.zero_rules(model, axis="model")
    with pytest.raises(flow.SBPError, match=r"zero_rules: expected a built model \(its weights\), received 3"):
        flow.parallel.zero_rules(3)
