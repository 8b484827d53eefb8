"""Which moves of a tensor between DTensor meshes finish (TF 2.21, two logical CPU devices), without flowlayers: the
evidence behind the tensorflow backend's two routes for placements on some devices (``placements.py``,
``staged.py``).

    python bench/probe_dtensor_placements.py            # every case, each in its own process (TIMEOUT s each)

Cases (a tensor of (4, 8) float32, a mesh ``all`` of both devices, a mesh ``one`` of device 1 alone):

- ``function_forward``: one ``tf.function``: all -> one (``copy_to_mesh``), a matmul there;
- ``function_back``: one ``tf.function``: all -> one, a matmul there, and back to all (a loss on all devices after
  a layer on one device, as OneFlow's hybrid-parallel LeNet has);
- ``function_back_grad``: the same with its gradient (a train step);
- ``eager_up``: eagerly, ``copy_to_mesh`` from ``one`` to ``all`` (a smaller mesh to a larger one);
- ``eager_down``: eagerly, ``copy_to_mesh`` from ``all`` to ``one``;
- ``eager_packed``: eagerly, ``one`` to ``all`` as ``staged.py`` copies: the component unpacked, copied to each
  device of ``all`` and packed there.

Prints one JSON line per case: ``finished`` (true, or false where it ran past TIMEOUT and was killed) and seconds.
"""
import json
import os
import subprocess
import sys
import time

TIMEOUT = float(os.environ.get("PROBE_TIMEOUT", 60))
CASES = ["function_forward", "function_back", "function_back_grad", "eager_up", "eager_down", "eager_packed"]


def run_case(case):
    import tensorflow as tf
    from tensorflow.experimental import dtensor

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    names = [d.name.replace("/device:", "") for d in tf.config.list_logical_devices("CPU")]
    every = dtensor.create_mesh([("x", 2)], devices=names, device_type="CPU")
    one = dtensor.create_mesh([("x", 1)], devices=names[1:], device_type="CPU")
    on_all = dtensor.copy_to_mesh(tf.ones((4, 8)), dtensor.Layout.replicated(every, 2))
    on_one = dtensor.copy_to_mesh(tf.ones((4, 8)), dtensor.Layout.replicated(one, 2))
    w = dtensor.copy_to_mesh(tf.ones((8, 8)), dtensor.Layout.replicated(one, 2))

    def there_and_back(x):
        y = tf.matmul(dtensor.copy_to_mesh(x, dtensor.Layout.replicated(one, 2)), w)
        if case == "function_forward":
            return y
        return tf.reduce_sum(dtensor.copy_to_mesh(y, dtensor.Layout.replicated(every, 2)))

    if case.startswith("function"):
        with dtensor.default_mesh(every):
            if case == "function_back_grad":
                def step(x):
                    with tf.GradientTape() as tape:
                        tape.watch(x)
                        loss = there_and_back(x)
                    return tape.gradient(loss, x)
                out = tf.function(step)(on_all)
            else:
                out = tf.function(there_and_back)(on_all)
    elif case == "eager_up":
        out = dtensor.copy_to_mesh(on_one, dtensor.Layout.replicated(every, 2))
    elif case == "eager_down":
        out = dtensor.copy_to_mesh(on_all, dtensor.Layout.replicated(one, 2))
    else:
        part = dtensor.unpack(on_one)[0]
        copies = []
        for device in every.local_devices():
            with tf.device(device):
                copies.append(tf.identity(part))
        out = dtensor.pack(copies, dtensor.Layout.replicated(every, 2))
    print([p.numpy().sum() for p in dtensor.unpack(out)])


def main():
    for case in CASES:
        start = time.time()
        try:
            subprocess.run([sys.executable, __file__, case], timeout=TIMEOUT, check=True, capture_output=True)
            finished = True
        except subprocess.TimeoutExpired:
            finished = False
        print(json.dumps({"case": case, "finished": finished, "seconds": round(time.time() - start, 1)}),
              flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        run_case(sys.argv[1])
    else:
        main()
