"""A layer's entry in a Keras config (``{"module", "class_name", "config", "registered_name"}``), written from a
flowlayers layer and read back into one.  ``layer_table.py`` says where Keras and flowlayers differ.

Reading runs no code from the file: a class is one of flowlayers' (for a Keras class of the same name, or a
``flowlayers.*`` module) or one given in ``custom_objects``; a Lambda layer is refused by name.
"""
import inspect

from ... import layers as layers_mod, registry
from ...errors import CheckpointError, FlowLayersError
from ...serialization import check_remakes, json_config
from . import layer_table

POLICY = {"module": "keras", "class_name": "DTypePolicy", "registered_name": None}
OBJECT_MODULES = {"_initializer": "keras.initializers", "_regularizer": "keras.regularizers"}
INITIALIZER_ONLY_KERAS = ("seed",)   # the weights come from the file


# Writing -----------------------------------------------------------------
def layer_entry(layer):
    """``layer`` as Keras' config names it: a Keras class in Keras' terms; a class of flowlayers' own that Keras
    lacks, or the user's, under its own module (Keras opens those only given the class)."""
    config = json_config(layer.get_config(), f"layer {layer.name!r}")
    check_remakes(layer, config)
    name = layer_table.keras_name(layer)
    if name is None:
        cls = type(layer)
        return {"module": cls.__module__, "class_name": cls.__name__, "config": config,
                "registered_name": registry.get_registered_name(cls)}
    return {"module": "keras.layers", "class_name": name, "config": keras_values(config), "registered_name": None}


def keras_values(config):
    """flowlayers' config values as Keras writes them (a dtype policy, initializer and regularizer objects, data
    formats in Keras' words)."""
    return {key: keras_value(key, value) for key, value in config.items()}


def keras_value(key, value):
    if key == "dtype" and isinstance(value, str):
        return {**POLICY, "config": {"name": value}}
    for end, module in OBJECT_MODULES.items():
        if key.endswith(end) and isinstance(value, dict):
            return {"module": module, "class_name": value["class_name"], "config": dict(value.get("config", {})),
                    "registered_name": None}
    if key == "data_format" and value in ("NHWC", "NCHW"):
        return "channels_last" if value == "NHWC" else "channels_first"
    return value


# Reading -----------------------------------------------------------------
def make_layer(entry, custom_objects, where):
    """The flowlayers layer of a Keras config entry (made by its class's ``from_config``)."""
    class_name, module = entry.get("class_name"), entry.get("module") or ""
    config = entry.get("config")
    if not isinstance(class_name, str) or not isinstance(config, dict):
        raise CheckpointError(f"{where}: a layer entry expected a class_name and a config, received "
                              f"{_brief(entry)}")
    name = config.get("name", class_name)
    cls, config = layer_class(class_name, module, entry.get("registered_name"), config, custom_objects, where)
    try:
        return cls.from_config(dict(config))
    except FlowLayersError as e:
        raise CheckpointError(f"{where}: layer {name!r} ({class_name}): {e}") from None
    except Exception as e:  # noqa: BLE001 - a custom class's own failure, named
        raise CheckpointError(f"{where}: layer {name!r} ({class_name}): from_config failed: {type(e).__name__}: "
                              f"{e}") from None


def layer_class(class_name, module, registered, config, custom_objects, where):
    """(class, config it takes): from ``custom_objects`` first (as Keras looks), else flowlayers' class for a
    Keras or flowlayers module, with a Keras config read into flowlayers' terms."""
    name = config.get("name", class_name)
    for key in (registered, class_name):
        if key in custom_objects:
            return custom_objects[key], config
    if class_name == "Lambda":
        raise CheckpointError(f"{where}: layer {name!r} is a Lambda: its function is code, which flowlayers does "
                              f"not load from a file; expected a Layer subclass given in custom_objects, e.g. "
                              f"custom_objects={{'Lambda': MyLayer}} (a class whose config is this layer's)")
    if is_keras_module(module):
        cls = layer_table.flow_class(class_name)
        if cls is not None:
            return cls, flow_config(cls, class_name, config, f"{where}: layer {name!r} ({class_name})")
    elif module.startswith("flowlayers."):
        cls = getattr(layers_mod, class_name, None)
        if isinstance(cls, type) and issubclass(cls, layers_mod.Layer):
            return cls, config
    raise CheckpointError(f"{where}: layer {name!r} is of class {class_name!r} (module {module!r}), which "
                          f"flowlayers does not have; expected it in custom_objects, e.g. custom_objects="
                          f"{{{class_name!r}: {class_name}}}")


def is_keras_module(module):
    return module in ("", "keras") or module.startswith("keras.")


def flow_config(cls, class_name, config, who):
    """A Keras layer config in flowlayers' terms: each argument ``cls`` takes, its value read; each it does not
    take left out where Keras' value leaves it off (``layer_table.NEUTRAL``), else refused by name."""
    config = {key: layer_table.EQUIVALENT.get((class_name, key), {}).get(_hashable(value), value)
              for key, value in config.items()}
    return read_arguments(cls, config, layer_table.NEUTRAL, who)


def read_arguments(cls, config, neutral, who):
    """``config``'s arguments that ``cls`` takes (values read by ``flow_value``); one it does not take is left
    out at a value of ``neutral`` (``{argument: values}``, or ``layer_table.ANY``), else refused by name."""
    takes, out = constructor_arguments(cls), {}
    for key, value in config.items():
        if key in takes:
            out[key] = flow_value(key, value, who)
            continue
        allowed = neutral.get(key)
        if allowed is layer_table.ANY or (allowed is not None and value in allowed):
            continue
        expected = f"{key}={allowed[0]!r}" if allowed is not None else f"no {key}"
        raise CheckpointError(f"{who}: Keras argument {key}={_brief(value)} is not supported by flowlayers' "
                              f"{cls.__name__}; expected {expected} (load the model in Keras, or change it there)")
    return out


def flow_value(key, value, who):
    """A Keras config value in flowlayers' terms (policies by name, initializers and regularizers as flowlayers
    writes them)."""
    if key == "dtype" and isinstance(value, dict):
        if value.get("class_name") != "DTypePolicy" or not isinstance(value.get("config"), dict):
            raise CheckpointError(f"{who}: dtype expected a DTypePolicy, received {_brief(value)}")
        return value["config"].get("name")
    for end in OBJECT_MODULES:
        if key.endswith(end) and isinstance(value, dict):
            if not is_keras_module(value.get("module") or ""):
                raise CheckpointError(f"{who}: {key} is of class {value.get('class_name')!r} (module "
                                      f"{value.get('module')!r}); expected one of Keras' (flowlayers loads no code "
                                      f"from a file)")
            config = {k: v for k, v in (value.get("config") or {}).items()
                      if not (end == "_initializer" and k in INITIALIZER_ONLY_KERAS)}
            return {"class_name": value.get("class_name"), "config": config}
    return value


def constructor_arguments(cls):
    """The keyword arguments ``cls`` takes, through its bases' constructors (a subclass passes ``**kwargs`` on)."""
    names = set()
    for klass in cls.__mro__:
        if "__init__" in vars(klass) and klass is not object:
            names.update(p.name for p in inspect.signature(klass.__init__).parameters.values()
                         if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self")
    return names


def _hashable(value):
    return tuple(value) if isinstance(value, list) else value if not isinstance(value, dict) else None


def _brief(value):
    text = repr(value)
    return text if len(text) <= 120 else text[:120] + "..."
