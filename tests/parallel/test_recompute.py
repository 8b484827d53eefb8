"""``flow.recompute()``: activation recomputation.  A model whose blocks are recomputed trains exactly as the same
model keeping its activations, in every view (dropout masks, BatchNorm statistics and integer inputs inside a
segment included); the backward pass really computes each segment again; a saved model keeps its segments and
placements.  (How much memory it saves, and what it costs: ``bench/bench_recompute.py``.)"""
import contextlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import flowlayers as flow
import places
from flowlayers import layers as L
from flowlayers.framework import graph

SPEC = importlib.util.spec_from_file_location(
    "char_gpt", Path(__file__).resolve().parents[2] / "tutorials" / "07_char_gpt.py")
char_gpt = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(char_gpt)

SEQ, VOCAB, BATCH = 8, 20, 8
RNG = np.random.default_rng(4)
X = RNG.integers(0, VOCAB, (4 * BATCH, SEQ)).astype(np.int32)
POSITIONS = np.broadcast_to(np.arange(SEQ, dtype=np.int32), X.shape)
TP = {**flow.parallel.attention_rules(), **char_gpt.MLP_RULES}
PLACES = {"mirrored x2": ("mirrored", 2, {}, {}), "consistent 2x2, tensor parallel": ("consistent", 4,
                                                                                     {"data": 2, "model": 2}, TP)}


# the tagger's own tensor parallelism: its hidden Dense split by columns over "model"
TAGGER_TP = {r"^dense/kernel$": (None, "model"), r"^dense/bias$": ("model",)}


def place(where, rules=None):
    """``where``'s view, devices and mesh, with its rules (the GPT's) or ``rules`` where it has any (another
    model's: a rule that matches none of a model's variables is refused)."""
    view, devices, mesh, own = PLACES[where]
    places.consistent(devices, mesh, own if rules is None or not own else rules, seed=5)
    flow.config.set_view(view)


def train_gpt(where, recompute):
    place(where)
    model = char_gpt.gpt(VOCAB, SEQ, width=16, heads=4, blocks=2, recompute=recompute)
    model.compile(flow.optimizers.Adam(0.001), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit([X, POSITIONS], np.roll(X, -1, axis=1), batch_size=BATCH, epochs=1, shuffle=False,
                        verbose=0).history
    return model, history


@pytest.mark.parametrize("where", sorted(PLACES))
def test_a_recomputed_gpt_trains_as_one_that_keeps_its_activations(where):
    """Within 2e-6 (1.02e-6 measured on jax, a value bias, with Keras' fans for the attention kernels), but for the
    attention's key biases: their true gradient is exactly zero, so what they get is rounding noise that Adam
    scales up (see test_gpt_parallel.py); recomputation rounds differently: 1e-5."""
    kept, want = train_gpt(where, False)
    again, got = train_gpt(where, True)
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-6)
    for w, a, b in zip(again.weights, again.get_weights(), kept.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-5 if w.path.endswith("key/bias") else 2e-6, err_msg=w.path)


def tagger(recompute):
    """Integer ids in, an embedding, dropout and BatchNorm inside one recomputed segment."""
    ids = flow.Input((SEQ,), dtype="int32")
    with flow.recompute() if recompute else contextlib.nullcontext():
        h = L.Embedding(VOCAB, 8)(ids)
        h = L.Dropout(0.3, seed=1)(L.Dense(12, activation="tanh")(h))
        h = L.BatchNormalization()(h)
    return flow.Model(ids, L.Dense(VOCAB)(h))


@pytest.mark.parametrize("where", sorted(PLACES))
def test_dropout_masks_batch_statistics_and_integer_inputs_survive_recomputation(where):
    results = []
    for recompute in (False, True):
        place(where, TAGGER_TP)
        model = tagger(recompute)
        model.compile(flow.optimizers.SGD(0.5), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(X, np.roll(X, -1, axis=1), batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
        results.append(model)
    kept, again = results
    for w, a, b in zip(again.weights, again.get_weights(), kept.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6, err_msg=w.path)
    assert not np.allclose(kept.get_weights()[-4], 0.0)      # BatchNorm's moving mean was updated


@pytest.mark.tensorflow_backend     # reads its traced graphs (the jax backend's segments are jax.checkpoint's)
@pytest.mark.slow
def test_the_backward_pass_computes_each_segment_again_after_the_gradient_arrives():
    """Each block's attention softmax appears once in the step without recomputation, twice with it; the second
    reads the incoming gradient (a data dependency: without it the engine may merge the two passes and keep every
    activation, as a control dependency let it)."""
    from flowlayers_tensorflow.recompute import AFTER_GRADIENT

    counts, after_gradient = [], []
    for recompute in (False, True):
        model, _ = train_gpt("consistent 2x2, tensor parallel", recompute)
        graphs = model.trainer.step("train").executable._traced_graphs()
        softmaxes = [op for g in graphs for op in g.get_operations() if op.type == "Softmax"]
        counts.append(len(softmaxes))
        after_gradient.append(sum(any(AFTER_GRADIENT in a.name and a.type == "Max" for a in ancestors(op))
                                  for op in softmaxes))
    assert counts == [2, 4] and after_gradient == [0, 2], (counts, after_gradient)


def ancestors(op):
    seen, stack = set(), [op]
    while stack:
        for x in stack.pop().inputs:
            if x.op not in seen:
                seen.add(x.op)
                stack.append(x.op)
    return seen


def test_a_scope_inside_another_joins_it_and_prediction_is_unchanged():
    places.consistent(2)
    x = flow.Input((4,))
    with flow.recompute():
        h = L.Dense(4)(x)
        with flow.recompute():
            h = L.Dense(4)(h)
    with flow.recompute():
        y = L.Dense(2)(h)
    model = flow.Model(x, y)
    segments = [n.recompute for n in graph.topo_sort([y]) if n.op.name not in ("variable", "placeholder")]
    assert len(set(segments)) == 2 and segments[0] == segments[-3] != segments[-1], segments
    plain = flow.Model(x, L.Dense(2)(h))
    for m in (model, plain):
        m.compile("sgd", "mse")
    data = np.ones((4, 4), np.float32)
    np.testing.assert_allclose(model.predict(data, verbose=0), model.predict(data, verbose=0))


def test_a_saved_model_keeps_its_recomputed_segments_and_placements(tmp_path):
    places.consistent(2)
    x = flow.Input((4,))
    with flow.scope.placement("cpu", "0:0"), flow.recompute():
        h = L.Dense(6, activation="tanh", name="first")(x)
        h = L.Dense(6, activation="tanh", name="second")(h)
    with flow.scope.placement("cpu", "0:1"):
        with flow.recompute():
            h = L.Dense(6, activation="tanh", name="third")(h)
        y = L.Dense(1, name="head")(h)
    model = flow.Model(x, y)
    model.compile(flow.optimizers.SGD(0.1), "mse")
    model.save(str(tmp_path / "m"))
    loaded = flow.models.load_model(str(tmp_path / "m"))

    def layout(m):
        nodes = [n for n in graph.topo_sort(m.outputs) if n.layer is not None and n.op.name != "variable"]
        first = {}
        return [(n.layer.name, n.placement, first.setdefault(n.recompute, len(first)) if n.recompute else None)
                for n in nodes]

    assert layout(loaded) == layout(model)
    assert [p for _, p, _ in layout(model)][-1] == (1,) and layout(model)[0][1:] == ((0,), 0)
    data = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    for m in (model, loaded):
        m.fit(data, data[:, :1], batch_size=4, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(loaded.get_weights(), model.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)
