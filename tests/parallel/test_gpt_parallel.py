"""A GPT-style model (token and position embeddings, causal multi-head attention and a GELU MLP with pre-LayerNorm
and residuals) with tensor parallelism on a 2x2 data x model mesh: after 10 Adam steps its weights are within
1e-5 of one device's, with the heads and MLP really split.

The rate is 0.001: an attention layer's key bias has a true gradient of exactly zero (it shifts every score of a
query by the same amount, which softmax ignores), so its computed gradient is float32 rounding noise (~1e-11)
that Adam divides by its own square root.  Split reductions round differently from one device's, and those
elements part by 8.3e-6 after 10 steps at 0.001 (2.2e-5 at 0.01, measured), by 1.4e-5 since the attention's
kernels draw with Keras' fans (larger scores); every other weight by at most 2.8e-6.  ``assert_like_one_device``
holds the key biases to 3e-5, every other weight to 1e-5."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import flowlayers as flow
import places

SPEC = importlib.util.spec_from_file_location(
    "char_gpt", Path(__file__).resolve().parents[2] / "tutorials" / "07_char_gpt.py")
char_gpt = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(char_gpt)

SEQ, VOCAB, STEPS, BATCH = 8, 20, 10, 8
RNG = np.random.default_rng(1)
X = RNG.integers(0, VOCAB, (STEPS * BATCH, SEQ)).astype(np.int32)
Y = np.roll(X, -1, axis=1)
POSITIONS = np.broadcast_to(np.arange(SEQ, dtype=np.int32), X.shape)


def train(devices, mesh, rules, accumulate=None, micro_batches=1, stages=1, view="consistent"):
    """10 Adam steps in a place (``accumulate``: an update per that many steps of a micro-batch each;
    ``micro_batches``: each step's batch run as that many; ``stages``: a pipeline of that many placements)."""
    places.consistent(devices, mesh, rules, seed=3)
    flow.config.set_view(view)
    model = char_gpt.gpt(VOCAB, SEQ, width=16, heads=4, blocks=2, stages=stages)
    model.compile(flow.optimizers.Adam(0.001, gradient_accumulation_steps=accumulate),
                  flow.losses.SparseCategoricalCrossentropy(from_logits=True), micro_batches=micro_batches)
    history = model.fit([X, POSITIONS], Y, batch_size=BATCH // (accumulate or 1), epochs=1, shuffle=False,
                        verbose=0).history
    return model, history


@pytest.mark.slow
def test_tensor_parallel_gpt_equals_one_device_after_10_adam_steps():
    one, want = train(1, {}, {})
    model, got = train(4, {"data": 2, "model": 2}, {**flow.parallel.attention_rules(), **char_gpt.MLP_RULES})
    assert model.optimizer.iterations == STEPS
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-5)
    assert_like_one_device(model, one)
    plan = model.parallel_plan(batch_size=BATCH)
    assert plan.variables["b1_attn/key/kernel"].shard_shape == (16, 2, 4)
    assert plan.variables["b1_mlp_out/kernel"].shard_shape == (32, 16)


def test_zero_sharding_equals_one_device_and_holds_a_quarter_per_device():
    """The same GPT with its weights and Adam's state sharded over a 4-device ``data`` axis (ZeRO): the forward
    pass all-gathers each weight where it is used, the backward pass reduce-scatters its gradient; each device
    holds about a quarter and training equals one device."""
    one, want = train(1, {}, {})
    flow.config.gpu_device_num(4)
    flow.config.set_mesh(data=4)
    model, got = train(4, {"data": 4}, flow.parallel.zero_rules(one))
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-5)
    assert_like_one_device(model, one)
    plan = model.parallel_plan(batch_size=BATCH)
    assert plan.bytes_per_device < 0.3 * plan.logical_bytes, (plan.bytes_per_device, plan.logical_bytes)
    assert plan.variables["token_embedding/embeddings"].shard_shape == (5, 16)
    assert plan.variables["adam/token_embedding/embeddings/m"].shard_shape == (5, 16)
    kinds = {kind for b in plan.boxing for _, kind in b.collectives}
    assert {"all-gather", "reduce-scatter"} <= kinds, kinds


@pytest.mark.slow
def test_zero_with_tensor_parallelism_on_2x2_equals_one_device():
    """ZeRO over ``data`` on top of the heads and MLPs split over ``model``: each device holds about a quarter of
    the weights and Adam's state, and training equals one device.  The batch stays split over ``data`` (the
    planner's last resort is gathering it there: an earlier plan looked the ids up whole in the data-split table,
    which cost few bytes but made every later op compute the whole batch, and DTensor failed to lay that out)."""
    one, want = train(1, {}, {})
    places.consistent(4, {"data": 2, "model": 2})
    tp = {**flow.parallel.attention_rules(), **char_gpt.MLP_RULES}
    model, got = train(4, {"data": 2, "model": 2}, flow.parallel.zero_rules(one, rules=tp))
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-5)
    assert_like_one_device(model, one)
    plan = model.parallel_plan(batch_size=BATCH)
    assert plan.bytes_per_device < 0.3 * plan.logical_bytes, (plan.bytes_per_device, plan.logical_bytes)
    assert plan.variables["b0_attn/query/kernel"].shard_shape == (8, 2, 4)         # heads over model, rows over data
    assert not [b for b in plan.boxing if b.producer in ("ids", "positions")], "the batch was gathered"


@pytest.mark.slow
def test_gradient_accumulation_over_two_micro_batches_equals_one_device():
    one, _ = train(1, {}, {}, accumulate=2)
    model, _ = train(4, {"data": 2, "model": 2}, {**flow.parallel.attention_rules(), **char_gpt.MLP_RULES},
                     accumulate=2)
    assert model.optimizer.iterations == 2 * STEPS
    assert_like_one_device(model, one)


@pytest.mark.parametrize("tied", [False, True], ids=["dense head", "tied head"])
def test_vocabulary_parallel_gpt_equals_one_device_without_gathering_logits(tied):
    """The vocabulary split over ``model`` as well (``flow.parallel.vocab_rules``): the token table by rows, the head
    by columns (or the tied table serving both ways).  The lookup is a partial sum, the logits stay split and the
    loss reduces per-token max, sum and label logit over the devices; after 10 Adam steps the weights equal one
    device's.  A vocabulary of 256 and width 128: at 20 the planner rightly prefers moving the small logits (an
    all-to-all) to three reductions, and at width 32 (the tokens a device looks up) or less moving the table to
    a one-hot product (DTensor's only form of a lookup in split rows).

    Adam's epsilon is 1e-5, not the default 1e-7: a token row looked up once in a step can get a gradient element
    that nearly cancels, which split sums round otherwise than one device's (jax's initial values:
    ``token_embedding/embeddings[236, 74]`` gets 4.0e-8 on one device, 1.3e-8 on the 2x2 mesh, in the first step);
    Adam divides by the gradient's own size, and at 1e-7 that element parts by 8e-6 after one step, 2.9e-5 after
    10 (5.2e-6 at most on tensorflow, measured).  At 1e-5 every weight is within 3.3e-7 of one device's on either
    backend (measured)."""
    vocab = 256
    x = np.random.default_rng(2).integers(0, vocab, (STEPS * BATCH, SEQ)).astype(np.int32)

    def run(devices, mesh, rules):
        places.consistent(devices, mesh, rules, seed=3)
        model = char_gpt.gpt(vocab, SEQ, width=128, heads=4, blocks=1, tied=tied)
        model.compile(flow.optimizers.Adam(0.001, epsilon=1e-5),
                      flow.losses.SparseCategoricalCrossentropy(from_logits=True))
        return model, model.fit([x, POSITIONS], np.roll(x, -1, axis=1), batch_size=BATCH, epochs=1, shuffle=False,
                                verbose=0).history

    one, want = run(1, {}, {})
    rules = {**flow.parallel.attention_rules(), **char_gpt.MLP_RULES,
             **flow.parallel.vocab_rules(head=None if tied else "lm_head")}
    model, got = run(4, {"data": 2, "model": 2}, rules)
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-5)
    for w, a, b in zip(model.weights, model.get_weights(), one.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-5, err_msg=w.path)
    plan = model.parallel_plan(batch_size=BATCH)
    assert plan.variables["token_embedding/embeddings"].shard_shape == (vocab // 2, 128)
    if not tied:
        assert plan.variables["lm_head/kernel"].shard_shape == (128, vocab // 2)
    table = [b for b in plan.boxing if b.producer == "token_embedding/embeddings"]
    assert all(kind != "all-gather" for b in table for _, kind in b.collectives), table   # looked up where it is
    loss = [b for b in plan.boxing if b.producer == b.consumer == "sparse_softmax_cross_entropy"]
    assert [kinds for b in loss for kinds in b.collectives] == [
        ("model", "all-reduce (max)"), ("model", "all-reduce"), ("model", "all-reduce")]
    logits = "token_embedding/einsum" if tied else "lm_head/bias_add"
    assert not [b for b in plan.boxing if b.producer == logits and b.phase == "forward"], plan.boxing


def assert_like_one_device(model, reference):
    """Every weight within 1e-5, but the attention's key biases: a true gradient of exactly zero makes what they get
    rounding noise that Adam scales up (module docstring); a pipeline's sums round otherwise, 1.1e-5 measured."""
    for w, a, b in zip(model.weights, model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(a, b, atol=3e-5 if w.path.endswith("key/bias") else 1e-5, err_msg=w.path)


@pytest.mark.slow
def test_a_two_stage_pipeline_over_micro_batches_equals_one_device():
    """Blocks placed on two devices (``flow.scope.placement``, the embeddings with the first, the head with the
    last) and each batch run as 4 micro-batches, so that the stages can work on different ones at once: the
    weights after 10 Adam steps equal one device's; each variable lives on its stage's device only, and the
    activation crossing between the stages is copied once per micro-batch, forward and back."""
    one, want = train(1, {}, {})
    model, got = train(2, {}, {}, micro_batches=4, stages=2)
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-5)
    assert_like_one_device(model, one)
    plan = model.parallel_plan(batch_size=BATCH // 4)
    assert plan.variables["b0_attn/query/kernel"].devices == (0,)
    assert plan.variables["lm_head/kernel"].devices == plan.variables["adam/lm_head/kernel/m"].devices == (1,)
    crossing = [(b.phase, b.producer) for b in plan.boxing if any(a == "0:0 -> 0:1" for a, _ in b.collectives)]
    assert crossing == [("forward", "add_2")], crossing
    assert len([b for b in plan.boxing if any(a == "0:1 -> 0:0" for a, _ in b.collectives)]) == 1


@pytest.mark.parametrize("view, devices, mesh, rules", [
    ("mirrored", 2, {}, {}),
    ("consistent", 4, {"data": 2, "model": 2}, {**flow.parallel.attention_rules(), **char_gpt.MLP_RULES})],
    ids=["mirrored x2", "consistent 2x2 tensor parallel"])
def test_micro_batches_train_as_whole_batches(view, devices, mesh, rules):
    """3 micro-batches of each batch of 8 (3, 3 and 2 rows; of a mirrored replica's 4: 1, 1 and 2), one update: as
    one device training on whole batches."""
    one, want = train(1, {}, {})
    model, got = train(devices, mesh, rules, micro_batches=3, view=view)
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-5)
    assert_like_one_device(model, one)
    assert model.optimizer.iterations == STEPS


def test_micro_batches_mistakes_are_named():
    places.consistent(1)
    model = char_gpt.gpt(VOCAB, SEQ, width=16, heads=4, blocks=1)
    with pytest.raises(flow.InputError, match=r"compile: micro_batches expected a positive int, received 0"):
        model.compile("adam", "mse", micro_batches=0)
    x = flow.Input((4,))
    normed = flow.Model(x, flow.layers.BatchNormalization(name="bn")(flow.layers.Dense(4)(x)))
    normed.compile("sgd", "mse", micro_batches=2)
    with pytest.raises(flow.GraphError, match=r"micro_batches=2 expected a model without state updated by each "
                                              r"batch, received layer 'bn', which updates 'bn/moving_mean'"):
        normed.fit(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32), verbose=0)
    normed.compile("sgd", "mse")           # and the model still trains
    normed.fit(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32), verbose=0)
