"""One of two processes that save a model to the same path at once, N times each (under the suite's backend).

    python concurrent_saves.py TARGET WRITER N READY_DIR

Writer k's model holds, at its i-th save, weights all equal to 1000 * k + i.
Both writers start together: each marks READY_DIR and waits for the other's
mark.  After each save the writer loads TARGET into a second model; a
checkpoint is whole when all its weights hold one value, that of one save.
Prints one JSON line: each save's outcome ("saved", or the CheckpointError's
message) and each load's (the value loaded, or the error's message).  Any other
error ends the process with its traceback.
"""
import json
import os
import sys
import time

import numpy as np

import flowlayers as flow


def build():
    flow.clear_session()
    x = flow.Input((8,))
    h = flow.layers.Dense(16, activation="relu")(x)
    return flow.Model(x, flow.layers.Dense(3)(h))


def start_together(ready, writer):
    os.makedirs(ready, exist_ok=True)
    open(os.path.join(ready, str(writer)), "w").close()
    while len(os.listdir(ready)) < 2:
        time.sleep(0.01)


def one_value(model):
    values = {float(v) for w in model.get_weights() for v in np.unique(w)}
    return values.pop() if len(values) == 1 else sorted(values)


if __name__ == "__main__":
    target, writer, n, ready = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    flow.config.gpu_device_num(1)
    model, reader = build(), build()
    saves, loads = [], []
    start_together(ready, writer)
    for i in range(n):
        model.set_weights([np.full(w.shape, 1000 * writer + i, w.dtype) for w in model.get_weights()])
        try:
            model.save_weights(target)
            saves.append("saved")
        except flow.CheckpointError as e:
            saves.append(str(e))
        try:
            reader.load_weights(target)
            loads.append(one_value(reader))
        except flow.CheckpointError as e:
            loads.append(str(e))
    print(json.dumps({"saves": saves, "loads": loads}))
