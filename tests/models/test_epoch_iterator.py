"""The EpochIterator on its own: what fit, evaluate and predict are handed, epoch by epoch, with no step run.

The epoch order is numpy's ``default_rng([seed, epoch]).permutation`` (what a resumed run replays), the weights
come from ``sample_weight`` or ``class_weight``, a resumed epoch continues where its backup was, and grouping
batches for one engine call changes nothing of what the steps receive."""
import numpy as np
import pytest

import flowlayers as flow
from flowlayers.models.epoch_iterator import EpochIterator
from places import consistent

RNG = np.random.default_rng(4)
X = RNG.normal(size=(22, 3)).astype(np.float32)
Y = RNG.integers(0, 2, size=22).astype(np.int32)


def model():
    consistent(1)
    x = flow.Input((3,))
    m = flow.Model(x, flow.layers.Dense(2)(x))
    m.compile("sgd", flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


def fit_epochs(m, x=X, y=Y, **options):
    return EpochIterator.for_model(m, x, y, "fit", "fit", options.pop("batch_size", 4), **options)


def joined(batches, i):
    return np.concatenate([list(b)[i] for b in batches])


def test_a_shuffled_epoch_takes_the_rows_in_the_order_of_its_seed_and_epoch():
    data = fit_epochs(model(), shuffle=True, seed=7)
    for epoch in range(3):
        order = np.random.default_rng([7, epoch]).permutation(len(X))
        batches = list(data.batches(epoch))
        assert [len(list(b)[0]) for b in batches] == [4, 4, 4, 4, 4, 2]
        np.testing.assert_array_equal(joined(batches, 0), X[order])
        np.testing.assert_array_equal(joined(batches, 1), Y[order])
    np.testing.assert_array_equal(joined(fit_epochs(model()).batches(1), 0), X)    # unshuffled: as given


def test_steps_per_epoch_caps_arrays_and_draws_that_many_from_a_generator():
    data = fit_epochs(model(), steps_per_epoch=2)
    assert data.steps == 2 and data.batches_per_pass == 6
    np.testing.assert_array_equal(joined(data.batches(0), 0), X[:8])
    source = ((X[i:i + 4], Y[i:i + 4]) for i in range(0, 20, 4))
    drawn = EpochIterator.for_model(model(), source, None, "fit", "fit", steps_per_epoch=2)
    assert drawn.steps == 2
    np.testing.assert_array_equal(joined(drawn.batches(0), 0), X[:8])
    np.testing.assert_array_equal(joined(drawn.batches(1), 0), X[8:16])     # the next epoch goes on drawing


def test_class_weights_and_sample_weights_come_last_in_each_batch():
    weighted = fit_epochs(model(), class_weight={1: 3.0})
    np.testing.assert_array_equal(joined(weighted.batches(0), 2), np.where(Y == 1, 3.0, 1.0).astype(np.float32))
    w = RNG.uniform(size=(22, 1))
    by_sample = fit_epochs(model(), sample_weight=w, shuffle=True, seed=2)
    order = np.random.default_rng([2, 0]).permutation(len(X))
    np.testing.assert_array_equal(joined(by_sample.batches(0), 2), w[order, 0].astype(np.float32))
    with pytest.raises(flow.InputError, match=r"sample_weight expected with arrays; with a list_iterator"):
        EpochIterator.for_model(model(), iter([(X, Y)]), None, "fit", "fit", sample_weight=1.0)


def test_a_resumed_epoch_takes_the_batches_after_those_done_and_refuses_data_with_fewer():
    data = fit_epochs(model(), shuffle=True, seed=3)
    whole = list(data.batches(1))
    resumed = list(data.batches(1, skip=4, where="backup"))
    assert len(resumed) == 2
    for a, b in zip(whole[4:], resumed):
        np.testing.assert_array_equal(list(a)[0], list(b)[0])
    with pytest.raises(flow.CheckpointError, match=r"backup: expected data with at least 7 batches in epoch 2, "
                                                   r"where the backup was saved, received 6"):
        data.batches(1, skip=7, where="backup")
    capped = fit_epochs(model(), steps_per_epoch=5)
    assert len(list(capped.batches(0, skip=3, where="backup"))) == 2      # 5 an epoch, 3 of them done


def test_a_grouped_epoch_is_the_plain_epoch_in_groups_of_one_batch_size():
    data = fit_epochs(model(), shuffle=True, seed=5)
    plain = list(data.batches(2))
    groups = list(data.groups(2, 4))
    assert [len(g) for g in groups] == [4, 1, 1]        # 5 batches of 4 rows, then 2 rows: closed early
    assert [g.samples for g in groups] == [16, 4, 2]
    np.testing.assert_array_equal(np.concatenate([joined(g.batches, 0) for g in groups]), joined(plain, 0))
    x_rows, y_rows = groups[0].feeds()
    assert x_rows.start == 0 and x_rows.source is groups[0].sources[0]
    np.testing.assert_array_equal(x_rows.gather(), np.stack([list(b)[0] for b in plain[:4]]))
    np.testing.assert_array_equal(y_rows.gather(), np.stack([list(b)[1] for b in plain[:4]]))


def test_batches_of_a_stream_are_stacked_for_a_group():
    source = [(X[i:i + 4], Y[i:i + 4]) for i in range(0, 16, 4)]
    data = EpochIterator.for_model(model(), iter(source), None, "fit", "fit")
    group, = list(data.groups(0, 4))
    assert group.sources is None
    x, y = group.feeds()
    np.testing.assert_array_equal(x, X[:16].reshape(4, 4, 3))
    np.testing.assert_array_equal(y, Y[:16].reshape(4, 4))


def test_validation_split_holds_out_the_last_samples():
    data = fit_epochs(model(), validation_split=0.25)
    np.testing.assert_array_equal(joined(data.batches(0), 0), X[:16])
    val_x, val_y = data.validation_data
    np.testing.assert_array_equal(val_x[0], X[16:])
    np.testing.assert_array_equal(val_y, Y[16:])
    validation = data.validation(model(), "fit", 4, True)
    np.testing.assert_array_equal(joined(validation.batches(0), 1), Y[16:])


def test_elements_of_a_stream_are_checked_by_name_as_they_come():
    bad = X[:4].copy()
    bad[1, 2] = np.nan
    data = EpochIterator.for_model(model(), iter([(X[:4], Y[:4]), (bad, Y[:4])]), None, "Model 'm'.fit", "fit")
    batches = data.batches(0)
    next(batches)
    with pytest.raises(flow.InputError, match=r"Model 'm'.fit: batch of generator: input .* expected finite "
                                              r"numbers, received 1 NaN value\(s\) among 12, the first at index "
                                              r"\(1, 2\)"):
        next(batches)


def test_one_batch_takes_all_the_rows_as_they_are():
    data = EpochIterator.for_model(model(), X, Y, "train_on_batch", "on_batch", class_weight={0: 0.5})
    group, = list(data.groups(0, 1))
    x, y, w = group.arrays()
    assert x is X and y is Y and group.sources is None
    np.testing.assert_array_equal(w, np.where(Y == 0, 0.5, 1.0))
