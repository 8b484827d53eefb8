"""``plot_model`` and ``model_to_dot`` (Keras 3's): a model's layer graph as Graphviz DOT text, written in pure
Python by ``model_to_dot_source``; pydot and Graphviz's ``dot`` are needed only to render it to an image.

    flow.utils.plot_model(model, "model.png", show_shapes=True)
    text = flow.utils.model_to_dot_source(model, show_shapes=True)     # no pydot needed
"""
import html
import importlib
import os
import shutil

from .. import activations
from ..errors import ConfigError, GraphError
from ..framework.graph import Call, unit_inputs, unit_of, units
from ..models import Model, Sequential


def model_to_dot_source(model, show_shapes=False, show_dtype=False, show_layer_names=True, rankdir="TB",
                        expand_nested=False, dpi=200, show_layer_activations=False, show_trainable=False,
                        splines="ortho"):
    """The DOT text ``model_to_dot`` hands pydot: one node per layer (a functional model's inputs as
    ``InputLayer`` nodes, an op outside any layer as its op), labelled as Keras labels them, and an edge from each
    layer to the layers that read its outputs; with ``expand_nested`` a nested model is a dashed cluster of its
    own layers, wired to the layers around it."""
    _check_model(model, "model_to_dot_source")
    show = {"show_shapes": show_shapes, "show_dtype": show_dtype, "show_layer_names": show_layer_names,
            "show_layer_activations": show_layer_activations, "show_trainable": show_trainable}
    ids, lines, edges = {}, [], []
    _model_lines(model, show, expand_nested, ids, lines, edges, "  ")
    head = [f"  rankdir={_quote(rankdir)};", "  concentrate=true;", f"  dpi={_quote(dpi)};",
            f"  splines={_quote(splines)};", "  node [shape=record];"]
    wires = [f"  {a} -> {b} [penwidth=2];" for a, b in dict.fromkeys(edges)]
    return "\n".join(["digraph G {", *head, *lines, *wires, "}"]) + "\n"


def model_to_dot(model, show_shapes=False, show_dtype=False, show_layer_names=True, rankdir="TB",
                 expand_nested=False, dpi=200, subgraph=False, show_layer_activations=False, show_trainable=False,
                 splines="ortho", **kwargs):
    """Keras 3's ``model_to_dot``: the model as a ``pydot.Dot`` (pydot must be installed, else
    ``flow.ConfigError``).  ``subgraph=True`` (Keras' cluster for a nested model) is refused by name: pass
    ``expand_nested=True`` on the outer model instead."""
    _refuse_kwargs("model_to_dot", kwargs)
    if subgraph:
        raise ConfigError("flow.utils.model_to_dot: subgraph=True (a pydot.Cluster of one nested model) is not "
                          "supported; expected subgraph=False, and expand_nested=True on the outer model to draw "
                          "nested models as clusters")
    text = model_to_dot_source(model, show_shapes, show_dtype, show_layer_names, rankdir, expand_nested, dpi,
                               show_layer_activations, show_trainable, splines)
    return _pydot("model_to_dot").graph_from_dot_data(text)[0]


def plot_model(model, to_file="model.png", show_shapes=False, show_dtype=False, show_layer_names=False,
               rankdir="TB", expand_nested=False, dpi=200, show_layer_activations=False, show_trainable=False,
               splines="ortho", **kwargs):
    """Keras 3's ``plot_model``: draw the model's layer graph into ``to_file`` (its extension is the image
    format; none: png), with Graphviz through pydot.  Without pydot or Graphviz's ``dot`` program, a
    ``flow.ConfigError`` says what to install.  Returns ``None`` (Keras returns an IPython image in notebooks)."""
    _refuse_kwargs("plot_model", kwargs)
    _check_model(model, "plot_model")
    pydot = _pydot("plot_model")
    if shutil.which("dot") is None:
        raise ConfigError("flow.utils.plot_model: expected Graphviz's `dot` program on PATH to render the image, "
                          "found none; install Graphviz (e.g. `apt-get install graphviz`, see "
                          "https://graphviz.org/download/), or write the DOT text from "
                          "flow.utils.model_to_dot_source(model) yourself")
    text = model_to_dot_source(model, show_shapes, show_dtype, show_layer_names, rankdir, expand_nested, dpi,
                               show_layer_activations, show_trainable, splines)
    to_file = str(to_file)
    extension = os.path.splitext(to_file)[1][1:] or "png"
    pydot.graph_from_dot_data(text)[0].write(to_file, format=extension)


def _pydot(what):
    try:
        return importlib.import_module("pydot")
    except ImportError:
        raise ConfigError(f"flow.utils.{what}: expected the pydot package to render a model's graph, found none "
                          f"installed; install it with `pip install pydot` (and Graphviz's `dot` program), or use "
                          f"flow.utils.model_to_dot_source(model) for the DOT text, which needs neither") from None


def _refuse_kwargs(what, kwargs):
    if "layer_range" in kwargs and kwargs["layer_range"] is not None:
        raise ConfigError(f"flow.utils.{what}: layer_range={kwargs['layer_range']!r} is not supported (Keras 3 "
                          f"dropped it too); expected it left out")
    unknown = sorted(k for k in kwargs if k != "layer_range")
    if unknown:
        raise ConfigError(f"flow.utils.{what}: unexpected keyword argument(s) {unknown}; expected Keras 3's "
                          f"arguments (show_shapes, show_dtype, show_layer_names, rankdir, expand_nested, dpi, "
                          f"show_layer_activations, show_trainable, splines)")


def _check_model(model, what):
    if not isinstance(model, Model):
        raise ConfigError(f"flow.utils.{what}: expected a flow.Model or flow.Sequential, received "
                          f"{type(model).__name__}")
    if not model.built:
        raise GraphError(f"flow.utils.{what}: model {model.name!r} is not built yet; expected a model built from "
                         f"flow.Input, or called on data once")


def _is_graph(model):
    """Whether ``model`` is drawn layer by layer (functional or Sequential); a subclassed model with its own
    ``call`` is one box, as Keras draws it."""
    own_call = any("call" in vars(c) for c in type(model).__mro__[:type(model).__mro__.index(Model)])
    return model.outputs is not None and not own_call


def _drawn(model, unit):
    """Whether ``unit`` gets a box: every call; a functional model's inputs (a Sequential's input is not drawn:
    Keras lists no InputLayer there); an op outside layers unless it is a constant or other source."""
    if isinstance(unit, Call):
        return True
    if unit.op.kind == "placeholder":
        return not isinstance(model, Sequential)
    return not unit.op.is_source


def _key(unit):
    """What one box stands for: the layer a call belongs to (a shared layer is one box), or the op node."""
    return unit.owner if isinstance(unit, Call) else unit


def _model_lines(model, show, expand_nested, ids, lines, edges, indent):
    """Add ``model``'s boxes to ``lines`` and its edges to ``edges``."""
    if not _is_graph(model):
        lines.append(_node_line(model, None, show, ids, indent))
        return
    found = [u for u in units(model.outputs) if _drawn(model, u)]
    seen = {}
    for unit in found:
        seen.setdefault(id(_key(unit)), unit)
    for unit in seen.values():
        owner = _key(unit)
        if expand_nested and isinstance(owner, Model) and _is_graph(owner):
            lines.append(f"{indent}subgraph {_quote('cluster_' + _node_id(owner, ids))} {{")
            lines.append(f"{indent}  style=dashed; label={_quote(owner.name)}; labeljust=l;")
            _model_lines(owner, show, expand_nested, ids, lines, edges, indent + "  ")
            lines.append(f"{indent}}}")
        else:
            lines.append(_node_line(owner, unit, show, ids, indent))
    for unit in found:
        for position, x in enumerate(unit_inputs(unit)):
            source, index = unit_of(x)
            if not _drawn(model, source):
                continue
            edges.append((_node_id(_source(source, index, expand_nested), ids),
                          _node_id(_destination(_key(unit), position, expand_nested), ids)))


def _source(unit, index, expand_nested):
    """The box an edge leaves: with nested models expanded, the box inside that makes the output used."""
    owner = _key(unit)
    while expand_nested and isinstance(owner, Model) and _is_graph(owner):
        unit, index = unit_of(owner.outputs[index])
        owner = _key(unit)
    return owner


def _destination(owner, position, expand_nested):
    """The box an edge enters: with nested models expanded, a functional model's input (the ``position``-th),
    or a Sequential's first layer."""
    while expand_nested and isinstance(owner, Model) and _is_graph(owner):
        owner = owner.layers[0] if isinstance(owner, Sequential) else owner.inputs[position].node
    return owner


def _node_id(thing, ids):
    return ids.setdefault(id(thing), f"n{len(ids)}")


def _node_line(owner, unit, show, ids, indent):
    return (f"{indent}{_node_id(owner, ids)} [label={_label(owner, unit, **show)}, fontname=Helvetica, border=0, "
            f"margin=0];")


def _label(owner, unit, show_shapes, show_dtype, show_layer_names, show_layer_activations, show_trainable):
    """Keras' box: a black title row (the name and class, or the class alone), then an activation row, then a
    row of input/output shapes, output dtype and trainable state, each where asked."""
    is_input = not isinstance(owner, (Model, Call)) and getattr(owner, "op", None) is not None and \
        owner.op.kind == "placeholder"
    class_name = type(owner).__name__ if unit is None or isinstance(unit, Call) else \
        "InputLayer" if is_input else owner.op.name
    name = owner.name
    cols = []
    if show_shapes:
        if not is_input:
            cols.append(_cell(f"Input shape: <b>{_esc(_shapes(_inputs(owner, unit), 'shape'))}</b>"))
        cols.append(_cell(f"Output shape: <b>{_esc(_shapes(_outputs(owner, unit), 'shape'))}</b>"))
    if show_dtype:
        cols.append(_cell(f"Output dtype: <b>{_esc(_shapes(_outputs(owner, unit), 'dtype'))}</b>"))
    weights = getattr(owner, "weights", None) if isinstance(owner, Model) or unit is None or \
        isinstance(unit, Call) else None
    if show_trainable and weights:
        cols.append('<td bgcolor="forestgreen"><font point-size="14" color="white"><b>Trainable</b></font></td>'
                    if owner.trainable else
                    '<td bgcolor="firebrick"><font point-size="14" color="white"><b>Non-trainable</b></font></td>')
    span = max(1, int(show_dtype) + int(show_trainable) + 2 * int(show_shapes))
    title = f"<b>{_esc(name)}</b> ({_esc(class_name)})" if show_layer_names else f"<b>{_esc(class_name)}</b>"
    rows = [f'<tr><td colspan="{span}" bgcolor="black"><font point-size="16" color="white">{title}</font></td></tr>']
    activation = getattr(owner, "activation", None) if isinstance(unit, Call) or unit is None else None
    if show_layer_activations and activation is not None:
        rows.append(f'<tr><td bgcolor="white" colspan="{span}"><font point-size="14">Activation: '
                    f'<b>{_esc(activations.name_of(activation))}</b></font></td></tr>')
    if cols:
        rows.append(f"<tr>{''.join(cols)}</tr>")
    return f'<<table border="0" cellborder="1" bgcolor="black" cellpadding="10">{"".join(rows)}</table>>'


def _inputs(owner, unit):
    if unit is None:
        return owner.inputs if isinstance(owner, Model) and owner.inputs is not None else None
    return unit_inputs(unit)


def _outputs(owner, unit):
    if unit is None:
        return owner.outputs if isinstance(owner, Model) and owner.outputs is not None else None
    return list(unit.outputs)


def _shapes(blobs, what):
    """Keras' text for a structure of shapes or dtypes: one as itself, several as a list; unknown: ``?``."""
    if not blobs:
        return "?"
    values = [tuple(b.shape) if what == "shape" else b.dtype.name for b in blobs]
    return str(values[0]) if len(values) == 1 else str(values)


def _cell(text):
    return f'<td bgcolor="white"><font point-size="14">{text}</font></td>'


def _esc(text):
    return html.escape(str(text), quote=False)


def _quote(value):
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
