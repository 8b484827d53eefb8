"""OneFlow 0.3+'s model I/O, as its documentation's programs use it (only the imports changed): train a job,
``flow.checkpoint.save``; in a new program with one more layer, ``flow.load_variables(flow.checkpoint.get(...))``
and fine-tune.  Loaded variables start from the saved values, the new layer from its own initial values, and
training goes on.  A directory OneFlow itself wrote (``<name>/out`` + ``<name>/meta``) reads too.
"""
import numpy as np
import pytest

import flowlayers as flow
import flowlayers.typing as tp

BATCH = 32


def digits():
    (x, y), _ = flow.data.load_digits()
    return x[:BATCH * 4], y[:BATCH * 4].astype(np.int32)


def build(extra_layer):
    flow.clear_default_session()
    flow.config.enable_legacy_model_io(False)

    @flow.global_function(type="train")
    def train_job(images: tp.Numpy.Placeholder((BATCH, 1, 8, 8)),
                  labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        initializer = flow.truncated_normal(0.1)
        h = flow.reshape(images, [images.shape[0], -1])
        h = flow.layers.dense(h, 32, activation=flow.nn.relu, kernel_initializer=initializer, name="hidden")
        if extra_layer:
            h = flow.layers.dense(h, 32, activation=flow.nn.relu, kernel_initializer=initializer, name="extra")
        logits = flow.layers.dense(h, 10, kernel_initializer=initializer, name="output")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    return train_job


def train(job, epochs):
    """Mean loss of each epoch over the same four batches."""
    x, y = digits()
    return [np.mean([job(x[i * BATCH:(i + 1) * BATCH], y[i * BATCH:(i + 1) * BATCH]).mean() for i in range(4)])
            for _ in range(epochs)]


@pytest.mark.parametrize("view, n", [("mirrored", 1), ("consistent", 2)])
def test_save_then_fine_tune_a_bigger_model(view, n, tmp_path):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    losses = train(build(extra_layer=False), 3)
    assert losses[-1] < losses[0]
    saved = {name: var.numpy() for name, var in flow.get_all_variables().items()}
    assert sorted(saved) == ["hidden/bias", "hidden/kernel", "output/bias", "output/kernel"]
    flow.checkpoint.save(tmp_path / "pretrained")

    values = flow.checkpoint.get(tmp_path / "pretrained")
    assert sorted(values) == sorted(saved)
    for name, value in values.items():
        assert value.shape == saved[name].shape and value.dtype == flow.float32
        np.testing.assert_array_equal(value.numpy(), saved[name])

    job = build(extra_layer=True)                       # a new program with one more layer
    fresh = {name: var.numpy() for name, var in flow.get_all_variables().items()}
    job = build(extra_layer=True)
    refused = "flow.load_variables: variable 'hidden/kernel': expected a value of shape"
    with pytest.raises(flow.ShapeError, match=refused):          # refused whole
        flow.load_variables({**values, "hidden/kernel": np.zeros((3, 3), np.float32)})
    for name, var in flow.get_all_variables().items():          # nothing was assigned
        np.testing.assert_array_equal(var.numpy(), fresh[name])
    flow.load_variables(values)
    now = {name: var.numpy() for name, var in flow.get_all_variables().items()}
    for name in saved:
        np.testing.assert_array_equal(now[name], saved[name])
    for name in ("extra/kernel", "extra/bias"):         # not in the checkpoint: its own initial value
        np.testing.assert_array_equal(now[name], fresh[name])
    tuned = train(job, 3)
    assert tuned[-1] < tuned[0]
    assert not np.array_equal(flow.get_all_variables()["extra/kernel"].numpy(), fresh["extra/kernel"])


def test_load_variables_refuses_names_it_does_not_have_unless_told_to_ignore_them():
    build(extra_layer=True)
    values = {name: var.numpy() + 1.0 for name, var in flow.get_all_variables().items()}
    build(extra_layer=False)
    before = {name: var.numpy() for name, var in flow.get_all_variables().items()}
    with pytest.raises(flow.CheckpointError, match=r"\['extra/bias', 'extra/kernel'\] expected to name variables of "
                                                   r"this program.*ignore_mismatch=True"):
        flow.load_variables(values, ignore_mismatch=False)
    for name, var in flow.get_all_variables().items():          # nothing assigned
        np.testing.assert_array_equal(var.numpy(), before[name])
    flow.load_variables(values)                                  # ignore_mismatch=True, OneFlow's default
    for name, var in flow.get_all_variables().items():
        np.testing.assert_array_equal(var.numpy(), before[name] + 1.0)


def test_a_checkpoint_oneflow_wrote_reads(tmp_path):
    """OneFlow's layout: a folder per variable, raw bytes in ``out``, shape and type in ``meta`` (text)."""
    kernel = np.arange(12, dtype=np.float32).reshape(3, 4)
    steps = np.array([7, 8], np.int64)
    for name, value, kind in (("w", kernel, "kFloat"), ("steps", steps, "kInt64")):
        (tmp_path / name).mkdir()
        value.tofile(tmp_path / name / "out")
        dims = "".join(f"  dim: {d}\n" for d in value.shape)
        (tmp_path / name / "meta").write_text(f"shape {{\n{dims}}}\ndata_type: {kind}\n")
    (tmp_path / "snapshot_done").write_text("")
    values = flow.checkpoint.get(tmp_path)
    assert sorted(values) == ["steps", "w"]
    np.testing.assert_array_equal(values["w"].numpy(), kernel)
    assert values["steps"].dtype == flow.int64
    np.testing.assert_array_equal(flow.checkpoint.get(tmp_path / "w").numpy(), kernel)     # one variable


@pytest.mark.parametrize("mistake, error, message", [
    (lambda d: flow.checkpoint.save(d), flow.CheckpointError, "expected a new or empty directory"),
    (lambda d: flow.checkpoint.get(d / "absent"), flow.CheckpointError, "does not exist"),
    (lambda d: flow.load_variables({"hidden/kernel": np.zeros((2, 2), np.float32)}), flow.ShapeError,
     r"flow.load_variables: variable 'hidden/kernel': expected a value of shape \(64, 32\), received \(2, 2\)"),
    (lambda d: flow.load_variables({"hidden/kernel": "weights"}), flow.CheckpointError,
     "'hidden/kernel' expected an array of numbers"),
    (lambda d: flow.load_variables([1, 2]), flow.CheckpointError, "value_dict expected a dict"),
    (lambda d: flow.config.enable_legacy_model_io("yes"), flow.ConfigError, "expected True or False"),
])
def test_model_io_mistakes_are_named(mistake, error, message, tmp_path):
    job = build(extra_layer=False)
    (tmp_path / "full").write_text("")          # a non-empty directory: tmp_path itself
    train(job, 1)
    before = {name: var.numpy() for name, var in flow.get_all_variables().items()}
    with pytest.raises(error, match=message):
        mistake(tmp_path)
    for name, var in flow.get_all_variables().items():
        np.testing.assert_array_equal(var.numpy(), before[name])
    train(job, 1)                               # the program goes on
