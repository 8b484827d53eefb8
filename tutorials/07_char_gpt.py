"""A character-level GPT on Python's own sources, with tensor parallelism.

    python tutorials/07_char_gpt.py                 # 4 devices: a 2 x 2 data x model mesh
    python tutorials/07_char_gpt.py --smoke         # a few steps

The model is a small GPT: token and position embeddings (positions fed as a second int32 Input, as many Keras
examples do), blocks of pre-LayerNorm causal multi-head attention and a GELU MLP with residuals, and a head over
the characters.  It is written once, with Keras' layers and names.  The parallel strategy is a few layout rules
on those names: each attention layer's heads split over the ``model`` axis (``flow.parallel.attention_rules()``)
and each MLP split Megatron's way (the first kernel by columns, the second by rows), while the batch is split
over ``data``.  The plan shows what that costs: per block one all-reduce over ``model`` in the attention and one
in the MLP, forward.  Then the model writes some Python.
"""
import argparse
import contextlib

import numpy as np

import flowlayers as flow

MLP_RULES = {r"_mlp_in/kernel$": (None, "model"), r"_mlp_in/bias$": ("model",), r"_mlp_out/kernel$": ("model", None)}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=4, help="4: data=2 x model=2; 2: model=2; 1: one device")
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--smoke", action="store_true", help="a few steps (what CI runs)")
    return parser.parse_args(argv)


def gpt(vocab_size, seq_len, width=64, heads=4, blocks=2, tied=False, recompute=False, stages=1):
    """``tied``: the head is the token embedding's transpose (Keras' ReversibleEmbedding), not a Dense layer;
    ``recompute``: each block's activations are computed again in the backward pass instead of kept;
    ``stages``: a pipeline, the blocks split evenly over that many devices (the embeddings with the first, the
    head with the last), each stage placed on its own device with ``flow.scope.placement``."""

    def stage(i):       # the placement of pipeline stage i, or none
        return flow.scope.placement("gpu", f"0:{i}") if stages > 1 else contextlib.nullcontext()

    ids, positions = flow.Input((seq_len,), dtype="int32", name="ids"), flow.Input((seq_len,), dtype="int32",
                                                                                    name="positions")
    L = flow.layers
    with stage(0):
        tokens = L.ReversibleEmbedding(vocab_size, width, name="token_embedding") if tied else \
            L.Embedding(vocab_size, width, name="token_embedding")
        h = tokens(ids) + L.Embedding(seq_len, width, name="position_embedding")(positions)
    for b in range(blocks):
        with stage(b * stages // blocks), flow.recompute() if recompute else contextlib.nullcontext():
            a = L.LayerNormalization(name=f"b{b}_norm1")(h)
            h = h + L.MultiHeadAttention(heads, width // heads, name=f"b{b}_attn")(a, a, use_causal_mask=True)
            m = L.Dense(4 * width, activation="gelu", name=f"b{b}_mlp_in")(L.LayerNormalization(name=f"b{b}_norm2")(h))
            h = h + L.Dense(width, name=f"b{b}_mlp_out")(m)
    with stage(stages - 1):
        h = L.LayerNormalization(name="final_norm")(h)
        logits = tokens(h, reverse=True) if tied else L.Dense(vocab_size, name="lm_head")(h)
    return flow.Model([ids, positions], logits, name="char_gpt")


def sample(model, tokenizer, prompt, length, seq_len, rng, temperature=0.8):
    """``length`` characters after ``prompt`` (at least ``seq_len`` of them), one at a time."""
    ids = list(tokenizer.encode(prompt))
    positions = np.arange(seq_len, dtype=np.int32)[None]
    for _ in range(length):
        window = np.asarray(ids[-seq_len:], np.int32)[None]
        logits = model.predict_on_batch([window, positions])[0, -1].astype(np.float64) / temperature
        p = np.exp(logits - logits.max())
        ids.append(int(rng.choice(len(p), p=p / p.sum())))
    return tokenizer.decode(ids[len(prompt):])


def main(argv=None):
    args = parse_args(argv)
    steps, seq_len, batch = (12, 32, 16) if args.smoke else (args.steps, 64, 32)
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(args.devices)
    mesh = {4: {"data": 2, "model": 2}, 2: {"data": 1, "model": 2}}.get(args.devices, {})
    flow.config.set_mesh(**mesh)
    if "model" in mesh:
        flow.config.set_layout_rules({**flow.parallel.attention_rules(), **MLP_RULES})
    flow.config.set_seed(0)

    text = flow.data.load_python_text()
    tokenizer = flow.data.CharTokenizer(text)
    x, y = flow.data.next_token_windows(tokenizer.encode(text), seq_len, stride=seq_len // 2)
    positions = np.broadcast_to(np.arange(seq_len, dtype=np.int32), x.shape)
    print(f"text: {len(text):,} characters of Python's own sources, {tokenizer.vocab_size} distinct; "
          f"{len(x):,} windows of {seq_len}")

    model = gpt(tokenizer.vocab_size, seq_len)
    model.compile(flow.optimizers.Adam(3e-3), flow.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    print(f"mesh {dict(flow.config.mesh_shape())}, {model.count_params():,} parameters")
    plan = model.parallel_plan(batch_size=batch)
    for path in ("b0_attn/query/kernel", "b0_attn/attention_output/kernel", "b0_mlp_in/kernel", "lm_head/kernel"):
        v = plan.variables[path]
        print(f"  {path:34s} {str(v.logical_shape):14s} -> {str(v.shard_shape):14s} per device")
    forward = [b for b in plan.boxing if b.phase == "forward" and any(a == "model" for a, _ in b.collectives)]
    print(f"forward all-reduces over 'model' per step: {len(forward)} (two per block)")
    print(f"held per device: {plan.bytes_per_device:,} of {plan.logical_bytes:,} bytes")

    rng = np.random.default_rng(0)
    before = model.evaluate([x[:256], positions[:256]], y[:256], verbose=0)[0]
    chosen = rng.choice(len(x), size=steps * batch)
    history = model.fit([x[chosen], positions[chosen]], y[chosen], batch_size=batch, epochs=1, shuffle=False,
                        verbose=0).history
    after = model.evaluate([x[:256], positions[:256]], y[:256], verbose=0)[0]
    print(f"loss per character: {before:.3f} before, {after:.3f} after {steps} steps "
          f"(uniform guess: {np.log(tokenizer.vocab_size):.3f}); training accuracy {history['accuracy'][0]:.3f}")
    prompt = text[:seq_len]
    print(f"sample after {prompt[-20:]!r}:\n{sample(model, tokenizer, prompt, 80 if not args.smoke else 20, seq_len, rng)}")


if __name__ == "__main__":
    main()
