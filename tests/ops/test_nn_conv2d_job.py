"""``flow.nn.conv2d`` as OneFlow programs call it: a job function, filters from ``flow.get_variable`` in
OneFlow's layout, and named errors for what it does not take."""
import re

import numpy as np
import pytest

import flowlayers as flow
import flowlayers.typing as tp
from flowlayers.framework.variable import store
from reference import F64, r_conv2d


@pytest.mark.parametrize("devices", [1, 2])
def test_predict_job_with_oneflow_filters(fresh, devices):
    flow.config.gpu_device_num(devices)
    cfg = flow.function_config()
    cfg.default_logical_view(flow.scope.consistent_view())

    @flow.global_function(type="predict", function_config=cfg)
    def conv_job(images: tp.Numpy.Placeholder((4, 2, 6, 6))) -> tp.Numpy:
        weight = flow.get_variable("conv1-weight", (3, 2, 3, 3), initializer=flow.random_normal_initializer())
        return flow.nn.conv2d(images, weight, strides=2, padding="SAME", name="conv1")

    x = np.random.default_rng(0).uniform(-1, 1, (4, 2, 6, 6)).astype(np.float32)
    got = conv_job(x)
    w = store.variables["conv1-weight"].numpy()          # (out, in, kh, kw)
    want = r_conv2d(x.astype(F64), np.transpose(w.astype(F64), (2, 3, 1, 0)), (2, 2), "SAME", "NCHW")
    assert got.shape == (4, 3, 3, 3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("filters_shape, kwargs, message", [
    ((3, 2, 3), {}, "filters expected a rank-4 Blob (out, in, kh, kw) for NCHW, received (3, 2, 3)"),
    ((3, 3, 3, 2), {"data_format": "NHWC", "groups": 2}, "groups expected 1"),
    ((3, 2, 3, 3), {"data_format": "NWHC"}, "data_format expected one of"),
])
def test_named_errors(fresh, filters_shape, kwargs, message):
    x = flow.Input((2, 6, 6))
    w = flow.constant(np.zeros(filters_shape, np.float32))
    with pytest.raises(flow.LayerError, match=re.escape("flow.nn.conv2d: " + message)):
        flow.nn.conv2d(x, w, 1, "VALID", **kwargs)
    assert flow.nn.conv2d(x, flow.constant(np.zeros((3, 2, 3, 3), np.float32)), 1, "VALID").shape == (None, 3, 4, 4)
