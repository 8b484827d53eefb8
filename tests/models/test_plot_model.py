"""``flow.utils.plot_model`` / ``model_to_dot``: the DOT text of a model's layer graph (pure Python, checked here
without pydot), Keras 3's arguments and labels, and named errors where pydot or an argument is wrong."""
import importlib.util
import re
import shutil
import sys

import numpy as np
import pytest

import flowlayers as flow


def _boxes(text):
    """{node id: label} of the DOT text's boxes."""
    return dict(re.findall(r"^\s*(n\d+) \[label=<(.*)>, fontname", text, flags=re.M))


def _edges(text, boxes):
    """{(source title, destination title)} with each box named by its bold title."""
    title = {k: re.search(r"<b>([^<]*)</b>", v).group(1) for k, v in boxes.items()}
    return {(title[a], title[b]) for a, b in re.findall(r"^\s*(n\d+) -> (n\d+)", text, flags=re.M)}


def _two_inputs():
    a, b = flow.Input((3,), name="a"), flow.Input((4,), name="b")
    h = flow.layers.Concatenate(name="cat")([a, b])
    out = flow.layers.Dense(2, activation="relu", name="fc")(h)
    return flow.Model([a, b], out, name="two")


def test_two_input_functional_model_boxes_and_edges(fresh):
    text = flow.utils.model_to_dot_source(_two_inputs())
    assert text.startswith("digraph G {") and 'rankdir="TB"' in text and 'dpi="200"' in text
    boxes = _boxes(text)
    assert sorted(re.search(r"<b>([^<]*)</b> \(([^)]*)\)", v).groups() for v in boxes.values()) == [
        ("a", "InputLayer"), ("b", "InputLayer"), ("cat", "Concatenate"), ("fc", "Dense")]
    assert _edges(text, boxes) == {("a", "cat"), ("b", "cat"), ("cat", "fc")}


def test_layer_names_shown_only_when_asked(fresh):
    model = _two_inputs()
    hidden = _boxes(flow.utils.model_to_dot_source(model, show_layer_names=False))
    assert sorted(re.search(r"<b>([^<]*)</b>", v).group(1) for v in hidden.values()) == [
        "Concatenate", "Dense", "InputLayer", "InputLayer"]
    assert not any("<b>cat</b>" in v or "<b>fc</b>" in v for v in hidden.values())


def test_show_shapes_dtype_activations_trainable(fresh):
    model = _two_inputs()
    model.get_layer("fc").trainable = False
    plain = flow.utils.model_to_dot_source(model)
    for word in ("Input shape", "Output shape", "Output dtype", "Activation", "Trainable"):
        assert word not in plain
    fc = [v for v in _boxes(flow.utils.model_to_dot_source(model, show_shapes=True)).values() if "<b>fc</b>" in v][0]
    assert "Input shape: <b>(None, 7)</b>" in fc and "Output shape: <b>(None, 2)</b>" in fc
    cat = [v for v in _boxes(flow.utils.model_to_dot_source(model, show_shapes=True)).values() if "<b>cat</b>" in v][0]
    assert "Input shape: <b>[(None, 3), (None, 4)]</b>" in cat
    boxes = _boxes(flow.utils.model_to_dot_source(model, show_dtype=True))
    assert all("Output dtype: <b>float32</b>" in v for v in boxes.values())
    boxes = _boxes(flow.utils.model_to_dot_source(model, show_layer_activations=True))
    assert sum("Activation: <b>relu</b>" in v for v in boxes.values()) == 1
    assert sum("Activation" in v for v in boxes.values()) == 1          # Concatenate and inputs have none
    boxes = _boxes(flow.utils.model_to_dot_source(model, show_trainable=True))
    assert [v for v in boxes.values() if "Non-trainable" in v] == [v for v in boxes.values() if "<b>fc</b>" in v]
    assert not any("Trainable" in v for v in boxes.values() if "<b>cat</b>" in v)     # no weights: no cell


def test_sequential_is_a_chain_without_input_box(fresh):
    model = flow.Sequential([flow.Input((5,)), flow.layers.Dense(4, name="d1"), flow.layers.Dropout(0.1, name="do"),
                             flow.layers.Dense(1, name="d2")])
    text = flow.utils.model_to_dot_source(model, rankdir="LR")
    boxes = _boxes(text)
    assert 'rankdir="LR"' in text and "InputLayer" not in text and len(boxes) == 3
    assert _edges(text, boxes) == {("d1", "do"), ("do", "d2")}


def _nested():
    inner = _two_inputs()
    c, d = flow.Input((3,), name="c"), flow.Input((4,), name="d")
    return flow.Model([c, d], flow.layers.Dense(1, name="head")(inner([c, d])), name="outer")


def test_nested_model_one_box_or_a_cluster(fresh):
    model = _nested()
    text = flow.utils.model_to_dot_source(model, show_shapes=True)
    boxes = _boxes(text)
    assert "subgraph" not in text and len(boxes) == 4
    assert _edges(text, boxes) == {("c", "two"), ("d", "two"), ("two", "head")}
    text = flow.utils.model_to_dot_source(model, expand_nested=True)
    boxes = _boxes(text)
    assert re.search(r'subgraph "cluster_n\d+" \{\n\s+style=dashed; label="two";', text)
    assert len(boxes) == 7 and text.count("{") == text.count("}")
    assert _edges(text, boxes) == {("c", "a"), ("d", "b"), ("a", "cat"), ("b", "cat"), ("cat", "fc"),
                                   ("fc", "head")}


def test_nested_sequential_expanded_enters_its_first_layer(fresh):
    inner = flow.Sequential([flow.Input((3,)), flow.layers.Dense(4, name="s1"), flow.layers.Dense(2, name="s2")],
                            name="stack")
    x = flow.Input((3,), name="x")
    model = flow.Model(x, flow.layers.Dense(1, name="head")(inner(x)))
    text = flow.utils.model_to_dot_source(model, expand_nested=True)
    assert _edges(text, _boxes(text)) == {("x", "s1"), ("s1", "s2"), ("s2", "head")}


def test_missing_pydot_is_a_named_error(fresh, monkeypatch):
    monkeypatch.setitem(sys.modules, "pydot", None)        # import pydot now raises ImportError
    model = _two_inputs()
    with pytest.raises(flow.ConfigError, match=r"plot_model.*pydot.*pip install pydot"):
        flow.utils.plot_model(model, to_file="never.png", show_shapes=True)
    with pytest.raises(flow.ConfigError, match=r"model_to_dot.*pip install pydot"):
        flow.utils.model_to_dot(model)
    assert "Dense" in flow.utils.model_to_dot_source(model)       # the model and the process stay usable


@pytest.mark.skipif(importlib.util.find_spec("pydot") is None or shutil.which("dot") is None,
                    reason="pydot and Graphviz's dot render the image; the DOT text is tested above without them")
def test_plot_model_writes_the_image(fresh, tmp_path):
    model = _nested()
    flow.utils.plot_model(model, to_file=tmp_path / "model.png", show_shapes=True, expand_nested=True)
    assert (tmp_path / "model.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    dot = flow.utils.model_to_dot(model, rankdir="LR")
    assert dot.get("rankdir") == '"LR"' and len(dot.get_edges()) == 3


def test_unknown_arguments_refused_by_name(fresh):
    model = _two_inputs()
    with pytest.raises(flow.ConfigError, match=r"plot_model: unexpected keyword argument\(s\) \['show_names'\]"):
        flow.utils.plot_model(model, show_names=True)
    with pytest.raises(flow.ConfigError, match="layer_range"):
        flow.utils.plot_model(model, layer_range=["a", "fc"])
    with pytest.raises(flow.ConfigError, match="subgraph=True"):
        flow.utils.model_to_dot(model, subgraph=True)
    with pytest.raises(flow.ConfigError, match="expected a flow.Model"):
        flow.utils.model_to_dot_source("model")


class _Subclassed(flow.Model):
    def __init__(self):
        super().__init__(name="mine")
        self.d = flow.layers.Dense(2, name="inside")

    def call(self, x):
        return self.d(x)


def test_subclassed_model_is_one_box_and_ops_outside_layers_are_boxes(fresh):
    mine = _Subclassed()
    mine.predict(np.zeros((2, 3), np.float32), verbose=0)
    text = flow.utils.model_to_dot_source(mine, show_layer_names=True)
    assert list(_boxes(text).values()) and len(_boxes(text)) == 1 and "<b>mine</b> (_Subclassed)" in text
    assert "inside" not in text and "->" not in text
    x = flow.Input((3,), name="x")
    model = flow.Model(x, flow.layers.Dense(2, name="fc")(x * 2.0 + 1.0))
    text = flow.utils.model_to_dot_source(model, show_layer_names=True, show_shapes=True)
    boxes = _boxes(text)
    titles = sorted(re.search(r"\((\w+)\)</font>", v).group(1) for v in boxes.values())
    assert titles == ["Dense", "InputLayer", "add", "multiply"], titles          # constants get no box
    assert len(_edges(text, boxes)) == 3
