"""A functional model with a Conv2D, attention and Dense layers on a data=2 x model=2 mesh with layout rules: built,
printed, summarised and planned; what the plan says is written as JSON to the path given (stdout: the printouts).

``--hide-engines``: run as where only numpy and flowlayers are installed (TensorFlow, JAX and Keras made
unimportable before flowlayers starts); the plan's shards are then computed from the layouts, not read back.
"""
import json
import sys

if "--hide-engines" in sys.argv:
    for name in ("tensorflow", "jax", "jaxlib", "keras", "tf_keras", "tensorboard"):
        sys.modules[name] = None     # import raises ImportError; importlib.util.find_spec answers None

import flowlayers as flow  # noqa: E402


def build():
    flow.config.gpu_device_num(4)
    flow.config.set_mesh(data=2, model=2)
    flow.config.set_layout_rules({**flow.parallel.attention_rules(),
                                  r"^hidden/kernel$": (None, "model"), r"^hidden/bias$": ("model",)})
    images = flow.Input((8, 8, 3), batch_size=8, name="images")
    h = flow.layers.Conv2D(16, 3, padding="same", activation="relu", name="conv")(images)
    seq = flow.layers.Reshape((64, 16), name="tokens")(h)
    att = flow.layers.MultiHeadAttention(num_heads=2, key_dim=8, name="attention")(seq, seq)
    hidden = flow.layers.Dense(32, activation="relu", name="hidden")(att)
    logits = flow.layers.Dense(10, name="logits")(flow.layers.Flatten(name="flat")(hidden))
    model = flow.Model(images, logits, name="planned")
    model.compile("adam", flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model, [h, att, hidden, logits]


def described(model, blobs, printed):
    plan = model.parallel_plan(batch_size=8)
    return {"reprs": [repr(b) for b in blobs], "sbp": [repr(b.sbp) for b in blobs],
            "summary": printed, "plan_text": str(plan),
            "bytes_per_device": plan.bytes_per_device, "comm_bytes_per_step": plan.comm_bytes_per_step,
            "variables": {p: [list(v.shard_shape), [list(s) for s in v.shard_shapes], v.bytes_per_device,
                              list(v.devices)] for p, v in plan.variables.items()},
            "boxing": [repr(b) for b in plan.boxing],
            "engines_loaded": sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "jax")
                                     and sys.modules[m] is not None)}


if __name__ == "__main__":
    model, blobs = build()
    lines = []
    model.summary(print_fn=lines.append)
    print("\n".join(lines))
    for b in blobs:
        print(b)
    out = described(model, blobs, "\n".join(lines))
    print(out["plan_text"])
    with open(sys.argv[1], "w") as f:
        json.dump(out, f)
