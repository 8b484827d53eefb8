"""fit's progress bar, as Keras draws it: ``4/4 [==============================] - 0s - loss: ...`` (30 wide, a
``>`` at the head while unfinished), also for a dataset whose length is unknown until its end."""
import io
import re

import numpy as np
import tensorflow as tf

import flowlayers as flow
from flowlayers.callbacks import ProgbarLogger

BAR = re.compile(r"(\d+)/(\d+) \[([=>.]*)\] - \d+s - loss: \d+\.\d{4}")


def model():
    x = flow.Input((3,))
    m = flow.Model(x, flow.layers.Dense(1)(x))
    m.compile("sgd", "mse")
    return m


def lines(stream):
    return [l for l in re.split(r"[\r\n]", stream.getvalue()) if l]


def test_the_bar_fills_thirty_wide_with_a_head_while_unfinished():
    out = io.StringIO()
    x, y = np.ones((16, 3), np.float32), np.zeros((16, 1), np.float32)
    model().fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[ProgbarLogger(stream=out)])
    got = lines(out)
    assert got[0] == "Epoch 1/1"
    bars = [BAR.fullmatch(l) for l in got[1:]]
    assert all(bars) and [(b.group(1), b.group(2)) for b in bars] == [("1", "4"), ("2", "4"), ("3", "4"), ("4", "4"),
                                                                        ("4", "4")]
    assert bars[0].group(3) == "=" * 6 + ">" + "." * 23          # 1/4 of 30 is 7 cells: 6, the head, 23 to go
    assert bars[-1].group(3) == "=" * 30                         # done: no head


def test_an_epoch_of_unknown_length_ends_at_the_batches_it_had():
    out = io.StringIO()
    data = tf.data.Dataset.from_tensor_slices((np.ones((12, 3), np.float32), np.zeros((12, 1), np.float32)))
    data = data.filter(lambda x, y: True).batch(4)           # filter: the length is unknown until the end
    assert data.cardinality().numpy() == tf.data.UNKNOWN_CARDINALITY
    model().fit(data, epochs=1, verbose=0, callbacks=[ProgbarLogger(stream=out)])
    last = BAR.fullmatch(lines(out)[-1])
    assert (last.group(1), last.group(2), last.group(3)) == ("3", "3", "=" * 30)
