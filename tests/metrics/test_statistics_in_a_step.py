"""Every metric's statistics built as Blobs and summed by a step (one step per kind of data, all its metrics at
once) give the result its host form gives on the same arrays: the one formula means the same on both sides, in
both views, with an odd batch split over two devices."""
import numpy as np
import pytest

import flowlayers as flow
from flowlayers import dtypes, engine
from flowlayers.framework.compiled import Compiled
from flowlayers.framework.program import build as build_program
from flowlayers.ops import source

from test_metrics_standalone import CASES, _data

KINDS = sorted({kind for _, _, kind in CASES})
# each kind of data in one view, the views taken in turn (both views are covered; one kind's step compiles every
# metric of that kind at once, which takes a minute for the thresholded ones)
PLACES = {kind: ("consistent" if k % 2 else "mirrored", 2) for k, kind in enumerate(KINDS)}
# the heaviest step (every thresholded metric): in the view its engine compiles fastest (DTensor takes minutes)
PLACES["multi"] = ("mirrored" if flow.config.backend_name() == "tensorflow" else "consistent", 2)


def _placeholder(array, name):
    dtype = dtypes.int32 if array.dtype.kind in "iu" else dtypes.float32
    return source.placeholder((None,) + array.shape[1:], dtype, name)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_the_sums_of_a_step_give_the_host_result(kind):
    view, n = PLACES[kind]
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    y, p, _ = _data(kind)[0]
    y, p = y[:15], p[:15]        # 15 rows: 8 and 7 on two devices
    if kind in ("sparse", "sorted"):
        y = y.astype("int32")
    cases = [(name, kwargs) for name, kwargs, k in CASES if k == kind]
    in_step = [getattr(flow.metrics, name)(**kwargs) for name, kwargs in cases]
    labels, predictions = _placeholder(y, "y"), _placeholder(p, "p")
    blobs = [b for m in in_step for b in m.statistics(labels, predictions)]
    step = Compiled(build_program([labels, predictions], blobs, ["sum"] * len(blobs), "eval"), engine.placement())
    sums = iter(step.run([y, p]))
    for (name, kwargs), metric in zip(cases, in_step):
        metric.add_sums([next(sums) for _ in range(metric.step_outputs)], len(y))
        host = getattr(flow.metrics, name)(**kwargs)
        host.update_state(y, p)
        np.testing.assert_allclose(metric.result(), host.result(), rtol=1e-6, atol=1e-6,
                                   err_msg=f"{name}({kwargs}) on {view}{n}")
