"""OneFlow 0.x names with their documented signatures and defaults (0.3-0.5, the versions whose model I/O
flowlayers follows), checked against numpy float64."""
import numpy as np
import pytest

import flowlayers as flow
import flowlayers.typing as tp


def pool_job(op, **kwargs):
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2, 3, 4, 6))) -> tp.Numpy:
        return op(x, 2, 2, "VALID", **kwargs)
    return job


@pytest.mark.parametrize("op, reduce", [(flow.nn.max_pool2d, np.max), (flow.nn.avg_pool2d, np.mean)])
def test_pooling_defaults_to_nchw(op, reduce):
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 6))
    expected = reduce(x.reshape(2, 3, 2, 2, 3, 2), axis=(3, 5))        # NCHW windows of 2x2
    np.testing.assert_allclose(pool_job(op)(x.astype(np.float32)), expected, rtol=1e-6, atol=1e-6)
    nhwc = pool_job(op, data_format="NHWC")(x.astype(np.float32))      # the same array read as NHWC: H 3, W 4
    expected = reduce(x[:, :2].reshape(2, 1, 2, 2, 2, 6), axis=(2, 4))  # VALID drops the third row
    np.testing.assert_allclose(nhwc, expected, rtol=1e-6, atol=1e-6)


def test_ceil_mode_is_refused_by_name():
    with pytest.raises(flow.LayerError, match=r"pool1: ceil_mode=True is not supported .* expected False"):
        pool_job(lambda x, *a: flow.nn.max_pool2d(x, *a, ceil_mode=True, name="pool1")).build()
    np.testing.assert_array_equal(pool_job(flow.nn.max_pool2d, ceil_mode=False)(np.ones((2, 3, 4, 6), np.float32)),
                                  np.ones((2, 3, 2, 3), np.float32))


def test_session_calls():
    job = pool_job(flow.nn.max_pool2d)
    job(np.zeros((2, 3, 4, 6), np.float32))
    assert flow.sync_default_session() is None          # every call has finished when it returns
    flow.clear_default_session()
    assert flow.get_all_variables() == {} and not flow.job.registered()
    flow.config.enable_legacy_model_io(True)
    assert flow.config.legacy_model_io_enabled()
    flow.config.enable_legacy_model_io()
    flow.config.enable_legacy_model_io(False)
    assert not flow.config.legacy_model_io_enabled()
