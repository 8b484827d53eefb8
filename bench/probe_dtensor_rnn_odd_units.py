"""Probe, plain TF DTensor (no flowlayers): DTensor (TF 2.21) lays out the result of an index that drops a dim
(``t[i]``, a StridedSlice with ``shrink_axis_mask``) with the input's first specs, not with the dropped dim's spec
removed: ``t[0]`` of a (time, batch, units) tensor laid out (-, data, -) comes out (-, data), the units split
over ``data`` (the batch's axis).  Where ``units`` is odd that layout is invalid and the step fails to compile:
"'tf.DTensorLayout' op requires dimension 1 to be divisible by sharding specified in DTensorLayout, but got
dimension size=3 is not divisible by number of shards in layout for this dimension=2".  Where it is even the
values are right but laid out (-, data): a relayout more per step.  ``tf.unstack(t)[0]``, ``tf.gather(t, 0)`` and
``tf.squeeze(t[0:1], 0)`` come out (data, -), as they should.

The bug behind tests/layers/test_recurrent.py's odd-units cases: the tensorflow backend's rnn kernel
(``backends/flowlayers_tensorflow/kernels/recurrent.py``), in the consistent view, writes the time loop out and
took each step's projected input as ``xw[t]`` of the time-major (time, batch, gates * units) projection, and the
dropout masks as ``masks[g]``, and a return_sequences=False output as ``sequence[-1]``: SimpleRNN(3) and GRU(3)
(9 columns) failed on 2 devices, as did LSTM(3) returning its last output; LSTM(3) with return_sequences (12
columns) and 4, 6, 12 units ran.  It is not the recurrent matmul nor the gates' slices: part 2's loop fails the
same with each step's state pinned to (data, -) (the earlier tries pinned the states and the projection, which are
right; the slice's output is what is wrong), and runs once the steps come from ``tf.unstack``.  The backend now
takes steps and masks with ``tf.unstack`` (and the zero initial state from ``tf.gather``).

Run: python bench/probe_dtensor_rnn_odd_units.py   (tensorflow-cpu 2.21.0, 2 logical CPU devices)

Output seen (2026-11-28):

    1. one step of a (7, 8, units) tensor laid out (-, data, -), mesh data=2: the result's layout, or the error
       units 3: t[0]                  FAIL (DTensorLayout: size=3 is not divisible by 2 shards)
       units 3: t[:, 0]               FAIL (DTensorLayout: size=3 is not divisible by 2 shards)
       units 3: tf.unstack(t)[0]      ['data', 'unsharded'], exact
       units 3: tf.gather(t, 0)       ['data', 'unsharded'], exact
       units 3: tf.squeeze(t[0:1], 0) ['data', 'unsharded'], exact
       units 4: t[0]                  ['unsharded', 'data'], exact
       units 4: t[:, 0]               ['unsharded', 'data'], exact
       units 4: tf.unstack(t)[0]      ['data', 'unsharded'], exact
       units 4: tf.gather(t, 0)       ['data', 'unsharded'], exact
       units 4: tf.squeeze(t[0:1], 0) ['data', 'unsharded'], exact
    2. a SimpleRNN(3) loop written out as the backend did (x (8, 7, 4) laid out (data, -, -)), with its gradient:
       xw[t]                          FAIL (DTensorLayout: size=3 is not divisible by 2 shards)
       xw[t], states pinned (data, -) FAIL (DTensorLayout: size=3 is not divisible by 2 shards)
       tf.unstack(xw)[t]              ['data', 'unsharded', 'unsharded'], max abs error 0 (gradients: 1e-07 rel.)

(The error is, whole: "'tf.DTensorLayout' op requires dimension 1 to be divisible by sharding specified in
DTensorLayout, but got dimension size=3 is not divisible by number of shards in layout for this dimension=2".
``t[:, 0]`` of (-, data, -) is (-, -) by right; DTensor gives (-, data): the first specs kept, whichever dim
goes.  Part 2 compares with the same loop computed without DTensor; its gradients sum over the batch's halves, in
another order.)
"""
import re

import numpy as np
import tensorflow as tf
from tensorflow.experimental import dtensor

dtensor.initialize_accelerator_system("CPU", num_logical_cpu_devices=2)
U = dtensor.UNSHARDED
MESH = dtensor.create_mesh([("data", 2)], device_type="CPU")


def placed(a, spec):
    """The numpy array ``a`` as a DTensor laid out as ``spec``."""
    with dtensor.default_mesh(MESH):
        whole = dtensor.copy_to_mesh(tf.constant(a), dtensor.Layout([U] * a.ndim, MESH))
        return dtensor.relayout(whole, dtensor.Layout(spec, MESH))


def whole(t):
    with dtensor.default_mesh(MESH):
        return dtensor.unpack(dtensor.relayout(t, dtensor.Layout([U] * t.shape.rank, MESH)))[0].numpy()


def error(e):
    """DTensor's message, from the divisibility it checks where it is that one (the docstring quotes it whole)."""
    line = str(e).splitlines()[0]
    line = line[line.index("error: ") + 7:] if "error: " in line else line
    m = re.search(r"dimension size=(\d+) is not divisible by number of shards in layout for this dimension=(\d+)", line)
    return f"FAIL (DTensorLayout: size={m.group(1)} is not divisible by {m.group(2)} shards)" if m else "FAIL " + line


def one_step():
    print("1. one step of a (7, 8, units) tensor laid out (-, data, -), mesh data=2: the result's layout, or the "
          "error")
    ways = {"t[0]": lambda t: t[0], "t[:, 0]": lambda t: t[:, 0], "tf.unstack(t)[0]": lambda t: tf.unstack(t)[0],
            "tf.gather(t, 0)": lambda t: tf.gather(t, 0), "tf.squeeze(t[0:1], 0)": lambda t: tf.squeeze(t[0:1], 0)}
    for units in (3, 4):
        a = np.arange(7 * 8 * units, dtype=np.float32).reshape(7, 8, units)
        for name, f in ways.items():
            try:
                with dtensor.default_mesh(MESH):
                    out = tf.function(f, autograph=False)(placed(a, [U, "data", U]))
                exact = np.array_equal(whole(out), f(tf.constant(a)).numpy())
                said = f"{dtensor.fetch_layout(out).sharding_specs}, {'exact' if exact else 'WRONG VALUES'}"
            except Exception as e:      # noqa: BLE001 (the probe reports what DTensor says)
                said = error(e)
            print(f"   units {units}: {name:<21} {said}")


def simple_rnn(x, kernel, recurrent, take, pin):
    """SimpleRNN(relu) over x (batch, time, features), the steps written out and taken from the time-major
    projection by ``take``: (outputs (batch, time, units), loss)."""
    xw = tf.einsum("tbf,fu->tbu", tf.transpose(x, [1, 0, 2]), kernel)
    steps = take(xw)
    h = tf.zeros_like(tf.gather(xw, 0))
    outputs = []
    for t in range(xw.shape[0]):
        h = tf.nn.relu(steps[t] + tf.matmul(h, recurrent))
        if pin:
            h = dtensor.relayout(h, dtensor.Layout(["data", U], MESH))
        outputs.append(h)
    sequence = tf.transpose(tf.stack(outputs), [1, 0, 2])
    return sequence, tf.reduce_sum(sequence * sequence)


def loop():
    print("2. a SimpleRNN(3) loop written out as the backend did (x (8, 7, 4) laid out (data, -, -)), with its "
          "gradient:")
    rng = np.random.default_rng(0)
    x, k, r = (rng.normal(size=s).astype(np.float32) for s in ((8, 7, 4), (4, 3), (3, 3)))

    def step(take, pin):
        def f(x, k, r):
            with tf.GradientTape() as tape:
                tape.watch([k, r])
                out, loss = simple_rnn(x, k, r, take, pin)
            return (out,) + tuple(tape.gradient(loss, [k, r]))
        return f

    want = step(lambda xw: xw, False)(*(tf.constant(v) for v in (x, k, r)))
    for name, take, pin in (("xw[t]", lambda xw: xw, False), ("xw[t], states pinned (data, -)", lambda xw: xw, True),
                            ("tf.unstack(xw)[t]", tf.unstack, False)):
        try:
            with dtensor.default_mesh(MESH):
                got = tf.function(step(take, pin), autograph=False)(
                    placed(x, ["data", U, U]), placed(k, [U, U]), placed(r, [U, U]))
            out_error = np.abs(whole(got[0]) - want[0].numpy()).max()
            grad_error = max(np.abs(whole(g) - w.numpy()).max() / np.abs(w.numpy()).max()
                             for g, w in zip(got[1:], want[1:]))
            said = (f"{dtensor.fetch_layout(got[0]).sharding_specs}, max abs error {out_error:.2g} (gradients: "
                    f"{grad_error:.1g} rel.)")
        except Exception as e:      # noqa: BLE001
            said = error(e)
        print(f"   {name:<30} {said}")


if __name__ == "__main__":
    one_step()
    loop()
