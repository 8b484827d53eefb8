"""OneFlow's ``func_config.enable_auto_mixed_precision(True)``: a job's layers compute in float16 with float32
variables, its loss is float32 and its optimizer scales the loss as Keras' ``mixed_float16`` does."""
import numpy as np
import pytest

import flowlayers as flow
import flowlayers.typing as tp
from flowlayers.framework.variable import store


def job(amp=True):
    cfg = flow.function_config()
    cfg.enable_auto_mixed_precision(amp)
    seen = {}

    @flow.global_function(type="train", function_config=cfg)
    def train_job(x: tp.Numpy.Placeholder((16, 8)), y: tp.Numpy.Placeholder((16,), dtype=flow.int32)) -> tp.Numpy:
        h = flow.layers.dense(x, 16, activation=flow.nn.relu, name="hidden")
        logits = flow.layers.dense(h, 3, name="out")
        seen["hidden"], seen["logits"] = h.dtype, logits.dtype
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss
    return train_job, seen


def test_an_amp_job_computes_in_float16_and_scales_its_loss():
    flow.config.gpu_device_num(2)
    train_job, seen = job()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 8)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32)
    first = train_job(x, y)
    assert seen == {"hidden": flow.float16, "logits": flow.float16}
    assert all(v.dtype == flow.float32 for v in store.variables.values())
    program = train_job.build()[1]
    rule = program.optimizer
    assert isinstance(rule, flow.optimizers.LossScaleOptimizer) and rule.initial_scale == 2.0 ** 15
    assert program.loss.dtype == flow.float32           # what is minimised (the job returns its own Blob)
    for _ in range(20):
        last = train_job(x, y)
    assert last.mean() < first.mean()
    before = {p: v.numpy() for p, v in store.variables.items()}
    scale = rule.dynamic_scale
    train_job(x * 3e4, y)                       # float16 overflows: no variable changes, the scale halves
    assert all(np.array_equal(before[p], v.numpy()) for p, v in store.variables.items())
    assert rule.dynamic_scale == scale / 2


def test_without_amp_a_job_is_float32_and_its_rule_plain():
    train_job, seen = job(amp=False)
    train_job(np.zeros((16, 8), np.float32), np.zeros(16, np.int32))
    assert seen == {"hidden": flow.float32, "logits": flow.float32}
    assert isinstance(train_job.build()[1].optimizer, flow.optimizers.SGD)


def test_enable_auto_mixed_precision_takes_a_bool():
    with pytest.raises(flow.ConfigError) as e:
        flow.function_config().enable_auto_mixed_precision("yes")
    assert "expected True or False, received 'yes'" in str(e.value)
