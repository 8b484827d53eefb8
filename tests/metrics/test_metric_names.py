"""``flow.metrics`` answers every Keras 3 metric name: with the metric, or with a ConfigError naming it and what to
use instead (never a bare AttributeError); ``compile`` takes Keras' names, functions and configs."""
import keras
import pytest

import flowlayers as flow

KERAS_NAMES = sorted(n for n in dir(keras.metrics) if not n.startswith("_"))


def test_every_keras_metric_name_is_there_or_refused_by_name():
    wrong = []
    for name in KERAS_NAMES:
        try:
            found = getattr(flow.metrics, name)
        except flow.ConfigError as e:
            said = str(e)
            if not (said.startswith(f"flow.metrics.{name}: ") and "not in flowlayers; " in said):
                wrong.append(f"{name}: {said}")     # it must name the metric, then say what to use instead
            continue
        except AttributeError as e:
            wrong.append(f"{name}: bare AttributeError {e}")
            continue
        if not callable(found):
            wrong.append(f"{name}: {found!r}")
    assert not wrong, "\n".join(wrong)


def test_a_missing_name_is_refused_on_import_too_and_what_to_use_is_named():
    with pytest.raises(flow.ConfigError, match="flow.metrics.MeanIoU: .*TruePositives"):
        from flowlayers.metrics import MeanIoU  # noqa: F401
    with pytest.raises(flow.ConfigError, match="PearsonCorrelation.*model.predict"):
        flow.metrics.PearsonCorrelation()
    with pytest.raises(AttributeError):     # not a Keras name: Python's own answer
        flow.metrics.NoSuchMetric
    assert not hasattr(flow.metrics, "__wrapped__")


def test_compile_takes_keras_names_functions_and_configs():
    x = flow.Input((3,))
    model = flow.Model(x, flow.layers.Dense(1, activation="sigmoid")(x))
    model.compile("sgd", "binary_crossentropy",
                  metrics=["AUC", "precision", "mse", flow.metrics.binary_accuracy,
                           {"class_name": "Recall", "config": {"thresholds": 0.3, "name": "recall_at_0.3"}}])
    assert model.metrics_names == ["loss", "AUC", "precision", "mse", "binary_accuracy", "recall_at_0.3"]
    kinds = [type(m).__name__ for m in model.compiled_metrics]
    assert kinds == ["AUC", "Precision", "MeanSquaredError", "BinaryAccuracy", "Recall"]
    model.compile("sgd", "binary_crossentropy", metrics=[lambda y, p: abs(y - p), "log_cosh"])
    assert [type(m).__name__ for m in model.compiled_metrics] == ["MeanMetricWrapper", "LogCoshError"]
    assert model.metrics_names == ["loss", "<lambda>", "log_cosh"]
    with pytest.raises(flow.ConfigError, match="IoU.*not in flowlayers"):
        model.compile("sgd", "binary_crossentropy", metrics=["IoU"])
    with pytest.raises(flow.ConfigError, match="expected a flow.metrics.\\* instance.*received 'auroc'"):
        model.compile("sgd", "binary_crossentropy", metrics=["auroc"])
    with pytest.raises(flow.ConfigError, match="takes values.*MeanMetricWrapper"):
        model.compile("sgd", "binary_crossentropy", metrics=[flow.metrics.Mean()])


def test_serialize_and_deserialize_as_keras():
    metric = flow.metrics.AUC(curve="PR", num_thresholds=7, name="pr")
    spec = flow.metrics.serialize(metric)
    assert spec["class_name"] == "AUC" and spec["config"]["num_thresholds"] == 7
    copy = flow.metrics.deserialize(spec)
    assert type(copy) is flow.metrics.AUC and copy.get_config() == metric.get_config()
    with pytest.raises(flow.ConfigError, match="metrics.deserialize: expected"):
        flow.metrics.deserialize({"class_name": "Nope", "config": {}})


def test_a_saved_model_brings_its_metrics_back(tmp_path):
    x = flow.Input((3,))
    model = flow.Model(x, flow.layers.Dense(2, activation="sigmoid")(x))
    model.compile("sgd", "binary_crossentropy", metrics=[
        flow.metrics.AUC(num_thresholds=5, multi_label=True, label_weights=[1.0, 2.0]),
        flow.metrics.F1Score(average="macro"), flow.metrics.Precision(thresholds=[0.2, 0.7]), "log_cosh",
        flow.metrics.R2Score(class_aggregation=None)])
    model.save(str(tmp_path / "m.keras"))
    loaded = flow.models.load_model(str(tmp_path / "m.keras"))
    assert [(type(m).__name__, m.get_config()) for m in loaded.compiled_metrics] == \
        [(type(m).__name__, m.get_config()) for m in model.compiled_metrics]
