"""resume_fit.py's MLP under ``mixed_float16`` with a LossScaleOptimizer whose scale moves during the run (it starts
too high for float16, halves at each overflow, doubles every 2 finite steps), trained by ``fit`` with
``BackupAndRestore(save_freq=2)``, run as a user runs it.

    python resume_loss_scale.py VIEW BACKUP_DIR OUT.npz [--kill-once-at STEP]

OUT.npz receives the final weights, the loss scale's state (scale, counter, skipped steps) and where this run's
first step began.
"""
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "checkpoint_programs"))
import resume_fit  # noqa: E402

import flowlayers as flow  # noqa: E402


def train(view, callbacks=()):
    flow.config.set_view(view)
    flow.config.gpu_device_num(2)
    flow.clear_session()
    flow.mixed_precision.set_global_policy("mixed_float16")
    x = flow.Input((8,))
    h = flow.layers.Dense(16, activation="relu")(x)
    model = flow.Model(x, flow.layers.Dense(3, dtype="float32")(h))
    flow.mixed_precision.set_global_policy(None)
    model.compile(flow.optimizers.LossScaleOptimizer(flow.optimizers.Adam(0.01), initial_scale=2.0 ** 24,
                                                     dynamic_growth_steps=2),
                  flow.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    history = model.fit(*resume_fit.data(), batch_size=resume_fit.BATCH, epochs=resume_fit.EPOCHS, verbose=0,
                        callbacks=list(callbacks))
    return model, history


def loss_scale_state(model):
    return [float(v.numpy()) for v in model.optimizer.state_variables().values()]


def main():
    view, backup, out = sys.argv[1:4]
    first = resume_fit.FirstStep()
    callbacks = [flow.callbacks.BackupAndRestore(backup, save_freq=2), first]
    if "--kill-once-at" in sys.argv:
        callbacks.append(resume_fit.KillOnce(int(sys.argv[sys.argv.index("--kill-once-at") + 1]), backup + ".killed"))
    model, _ = train(view, callbacks)
    np.savez(out, *model.get_weights(), meta=json.dumps({"first_step": first.where,
                                                         "loss_scale": loss_scale_state(model)}))


if __name__ == "__main__":
    main()
