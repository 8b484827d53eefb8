"""A metric's state in a model: the Blobs a step sums (several per metric, each keeping the batch first), the sums
it adds on the host (stacked over grouped steps, read when the result is), and fit's saved position, which holds
every sum of every metric so that a resumed epoch goes on from them."""
import numpy as np

import flowlayers as flow
from flowlayers.models.training import FitState


def test_a_metric_of_counts_gives_the_step_one_blob_per_count():
    y, p = flow.Input((3,), name="y"), flow.Input((3,), name="p")
    auc = flow.metrics.AUC(num_thresholds=5)
    blobs = auc.statistics(y, p)
    assert len(blobs) == auc.step_outputs == 2 * 5 + 2       # tp and fp per threshold, positives, negatives
    assert all(b.shape[0] is None for b in blobs)
    per_label = flow.metrics.AUC(num_thresholds=5, multi_label=True)
    assert len(per_label.statistics(y, p)) == 2 * 5 * 3 + 2 * 3
    mean = flow.metrics.MeanSquaredError()
    assert len(mean.statistics(y, p)) == mean.step_outputs == 1


def test_sums_of_grouped_steps_add_up_and_are_read_when_the_result_is():
    auc = flow.metrics.AUC(num_thresholds=3)
    host = flow.metrics.AUC(num_thresholds=3)
    y, p = np.array([[1.0], [0.0], [1.0], [0.0]]), np.array([[0.9], [0.2], [0.4], [0.6]])
    host.update_state(y, p)
    sums = host.sums
    # two steps stacked, each with half of every sum (as steps_per_execution hands them back)
    auc.add_sums([np.array([s / 2, s / 2]) for s in sums], rows=4)
    deferred = auc.deferred_result()
    assert isinstance(deferred, flow.metrics.Deferred)
    assert float(deferred) == host.result() and auc.result() == host.result()
    loss = flow.metrics.Mean(name="loss")
    loss.add_sums([np.array([1.5, 2.5])], rows=8)
    assert loss.result() == 0.5 and list(loss.sums) == [4.0, 8.0]


def test_a_saved_position_holds_every_sum_and_a_resumed_epoch_goes_on_from_them():
    def metrics():
        return [flow.metrics.Mean(name="loss"), flow.metrics.AUC(num_thresholds=4, name="auc"),
                flow.metrics.Precision(thresholds=[0.2, 0.8], name="precision")]

    y, p = np.array([[1.0], [0.0], [1.0]]), np.array([[0.7], [0.3], [0.1]])
    state = FitState(metrics(), steps=5, batch_size=3)
    state.metrics[0].update_state([0.5, 0.25])
    for m in state.metrics[1:]:
        m.update_state(y, p)
    state.batch = 2
    position = state.position()
    assert all(isinstance(entry[1], int) and isinstance(entry[2], float) for entry in position["metrics"])
    assert len(position["metrics"]) == 2 + (2 * 4 + 2) + (2 * 2 + 2)
    resumed = FitState(metrics(), steps=5, batch_size=3)
    resumed.begin_epoch(0, position["batch"], position["metrics"])
    for before, after in zip(state.metrics, resumed.metrics):
        np.testing.assert_array_equal(after.sums, before.sums)
        np.testing.assert_array_equal(after.result(), before.result())
