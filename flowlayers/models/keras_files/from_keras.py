"""A Keras config made into a flowlayers model: a ``.keras`` file's ``config.json``, a legacy ``.h5`` file's
``model_config`` (Keras 3's, or Keras 2's with its nested-list nodes and ``batch_input_shape``).

Nothing in the file runs: layers are flowlayers' classes of Keras' names (``configs.py``) or ``custom_objects``;
an op applied outside layers is one of Keras' ``Add``, ``Subtract``, ``Multiply``, ``TrueDivide``; a model is a
functional one or a Sequential (a subclassed Keras model keeps its code outside the file, and is refused).
"""
from ...errors import CheckpointError, FlowLayersError
from ...framework.blob import Blob
from ...inputs import Input
from ...ops import elementwise
from ..model import Model
from ..sequential import Sequential
from . import configs, layer_table


def build(config, custom_objects, where):
    """The flowlayers model of Keras' model config ``{"class_name", "config"}``."""
    if not isinstance(config, dict) or not isinstance(config.get("config"), dict):
        raise CheckpointError(f"{where}: expected a model config {{'class_name', 'config'}}, received "
                              f"{configs._brief(config)}")
    class_name, inner = config.get("class_name"), config["config"]
    try:
        if class_name in ("Functional", "Model"):
            model = _Functional(inner, custom_objects, where).model()
        elif class_name == "Sequential":
            model = _sequential(inner, custom_objects, where)
        else:
            raise CheckpointError(f"{where}: the file holds a model of class {class_name!r}; expected a functional "
                                  f"model or a Sequential (a subclassed model's code is not in the file: build it "
                                  f"in code and call load_weights)")
    except FlowLayersError as e:
        raise e if isinstance(e, CheckpointError) else CheckpointError(f"{where}: {e}") from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, RecursionError) as e:
        raise CheckpointError(f"{where}: the model config is damaged or not Keras' ({type(e).__name__}: {e}); "
                              f"expected what Keras' model.save writes") from None
    if inner.get("trainable") is False:
        model.trainable = False
    return model


def _sequential(inner, custom_objects, where):
    entries = list(inner["layers"])
    first = None
    if entries and entries[0]["class_name"] == "InputLayer":
        first = _input(entries.pop(0)["config"], where)
    layers = []
    for entry in entries:
        config = dict(entry["config"])
        shape = config.pop("batch_input_shape", None) or config.pop("batch_shape", None)   # Keras 2's first layer
        if first is None and not layers and shape is not None:
            first = Input(tuple(shape[1:]), batch_size=shape[0], dtype=_dtype_name(config.get("dtype")))
        layers.append(configs.make_layer({**entry, "config": config}, custom_objects, where))
    if first is None and inner.get("build_input_shape"):
        shape = inner["build_input_shape"]
        first = Input(tuple(shape[1:]), batch_size=shape[0])
    return Sequential(([first] if first is not None else []) + layers, name=inner.get("name"))


def _input(config, where):
    shape = config.get("batch_shape") or config.get("batch_input_shape")
    if config.get("sparse") or config.get("ragged"):
        raise CheckpointError(f"{where}: input {config.get('name')!r} is sparse or ragged; expected a dense input")
    return Input(tuple(shape[1:]), batch_size=shape[0], dtype=_dtype_name(config.get("dtype")) or "float32",
                 name=config.get("name"))


def _dtype_name(dtype):
    return configs.flow_value("dtype", dtype, "input") if isinstance(dtype, dict) else dtype


class _Functional:
    """The graph of a Keras functional config, rebuilt call by call as its inputs become known (Keras lists a
    layer once, with all its calls)."""

    def __init__(self, inner, custom_objects, where):
        self.inner, self.custom, self.where = inner, custom_objects, where
        self.outputs = {}           # (entry name, call index) -> [Blob, ...]

    def model(self):
        pending = []
        for entry in self.inner["layers"]:
            name = entry.get("name") or entry["config"]["name"]
            if entry["class_name"] == "InputLayer":
                self.outputs[name, 0] = [_input(entry["config"], self.where)]
                continue
            target = self._target(entry, name)
            pending += [(target, name, i, _node(node)) for i, node in enumerate(entry.get("inbound_nodes", []))]
        while pending:
            left = [p for p in pending if not self._run(*p)]
            if len(left) == len(pending):
                names = sorted({p[1] for p in left})
                raise CheckpointError(f"{self.where}: the calls of {names} read tensors no entry of the config "
                                      f"makes; expected what Keras' model.save writes")
            pending = left
        inputs, outputs = self._ends(self.inner["input_layers"]), self._ends(self.inner["output_layers"])
        return Model(inputs=_single(inputs), outputs=_single(outputs), name=self.inner.get("name"))

    def _target(self, entry, name):
        """The layer an entry makes, or the name of the op it applies (``"add"``)."""
        op = layer_table.OPS.get(entry["class_name"])
        if op is not None and (entry.get("module") == layer_table.OP_MODULE or _positional_pair(entry) or
                               layer_table.flow_class(entry["class_name"]) is None):
            return op
        return configs.make_layer(entry, self.custom, self.where)

    def _run(self, target, name, index, node):
        """Make call ``index`` of entry ``name`` if the tensors it reads are made; whether it was."""
        try:
            args, kwargs = self._value(node[0]), self._value(node[1])
        except _NotYet:
            return False
        if isinstance(target, str):
            out = getattr(elementwise, target)(*args)
        else:
            kwargs.pop("training", None)        # Keras passes the model's own mode at each call
            if kwargs.pop("mask", None) is not None:
                raise CheckpointError(f"{self.where}: layer {name!r} is called with an explicit mask; expected "
                                      f"masks carried by the tensors (Masking, mask_zero)")
            out = target(*args, **kwargs)
        self.outputs[name, index] = [out] if isinstance(out, Blob) else list(out)
        return True

    def _value(self, value):
        """A call argument with each Keras tensor replaced by the Blob made for it."""
        if isinstance(value, dict) and value.get("class_name") == "__keras_tensor__":
            return self._tensor(value["config"]["keras_history"])
        if isinstance(value, dict):
            return {k: self._value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._value(v) for v in value]
        return value

    def _tensor(self, history):
        name, index, output = history[:3]
        if (name, index) not in self.outputs:
            raise _NotYet()
        return self.outputs[name, index][output]

    def _ends(self, spec):
        """The model's inputs or outputs: one ``[name, call, output]``, a list of them, or a dict by key."""
        if isinstance(spec, dict):
            return {k: self._tensor(v) for k, v in spec.items()}
        if spec and not isinstance(spec[0], list):
            return self._tensor(spec)
        return [self._tensor(s) for s in spec]


def _single(ends):
    """A list of one tensor as that tensor: Keras 2 wrote a single output as ``[[name, 0, 0]]``, and Keras 3 loads
    such a file as a model that predicts one array, not a list of one."""
    return ends[0] if isinstance(ends, list) and len(ends) == 1 else ends


class _NotYet(Exception):
    """A call reads a tensor whose call is not made yet."""


def _node(node):
    """(args, kwargs) of a call: Keras 3 writes ``{"args", "kwargs"}``; Keras 2 a list of ``[name, call, output,
    kwargs]``, one per input (several: the layer takes them as one list)."""
    if isinstance(node, dict):
        return node.get("args", []), node.get("kwargs", {})
    refs = [{"class_name": "__keras_tensor__", "config": {"keras_history": ref[:3]}} for ref in node]
    kwargs = dict(node[0][3]) if node and len(node[0]) > 3 and isinstance(node[0][3], dict) else {}
    return ([refs[0]] if len(refs) == 1 else [refs]), kwargs


def _positional_pair(entry):
    """A Keras 3 op entry written without its module (a legacy file): called on two arguments, not one list."""
    nodes = entry.get("inbound_nodes") or []
    return bool(nodes) and isinstance(nodes[0], dict) and len(nodes[0].get("args", [])) == 2
