"""Objects as JSON and back, for saved models: a layer, loss, metric or optimizer by its class and ``get_config``,
op attributes as tagged JSON.  Nothing read back is code: classes are found by name by the loader.
"""
import inspect
import json

import numpy as np

from . import dtypes, registry, sbp as sbp_mod
from .errors import LayerError
from .framework import naming


def object_spec(obj, what):
    cls = type(obj)
    spec = {"class_name": cls.__name__, "module": cls.__module__, "config": json_config(obj.get_config(), what)}
    if registry.is_registered(cls):
        spec["registered_name"] = registry.get_registered_name(cls)     # a loader finds it by that name
    return spec


def json_config(config, what):
    """``config`` as JSON would give it back, or a LayerError naming what cannot be written."""
    try:
        return json.loads(json.dumps(config))
    except (TypeError, ValueError) as e:
        raise LayerError(f"{what}: get_config() expected to return JSON values (numbers, strings, lists, dicts), "
                         f"received {config!r} ({e})") from None


def check_remakes(layer, config):
    """Every constructor argument is in the config, and the config makes the layer again (automatic names
    untouched): what is saved must load as it was."""
    named = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY
    left_out = [p.name for p in inspect.signature(type(layer)).parameters.values()
                if p.kind in named and p.name not in config and p.name not in ("input_shape", "batch_size")]
    if left_out:
        raise LayerError(f"layer {layer.name!r} ({type(layer).__name__}): its constructor takes {left_out} but "
                         f"get_config() does not return {'it' if len(left_out) == 1 else 'them'}, so the saved model "
                         f"would load with defaults instead; expected get_config to return every constructor "
                         f"argument")
    taken = naming.snapshot()
    try:
        type(layer).from_config(dict(config))
    except Exception as e:  # noqa: BLE001 - any failure means the saved model could not be loaded
        raise LayerError(f"layer {layer.name!r} ({type(layer).__name__}): from_config(get_config()) failed, so the "
                         f"saved model could not be loaded: {type(e).__name__}: {e}; expected get_config to return "
                         f"every constructor argument as JSON (activations by name)") from None
    finally:
        naming.restore(taken)


# Attributes of ops applied outside layers: JSON with tagged tuples, arrays, dtypes and SBPs
def encode(value, what):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [encode(v, what) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [encode(v, what) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": {k: encode(v, what) for k, v in value.items()}}
    if isinstance(value, (np.ndarray, np.generic)) and value.dtype.kind in "biuf":
        return {"array": value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, dtypes.DType):
        return {"dtype": value.name}
    if sbp_mod.is_sbp(value):
        return {"sbp": repr(value)}
    raise LayerError(f"{what}: expected attributes that can be saved (numbers, strings, tuples, arrays, dtypes, "
                     f"SBPs), received {type(value).__name__} {value!r}")


def decode(value):
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "tuple" in value:
        return tuple(decode(v) for v in value["tuple"])
    if "dict" in value:
        return {k: decode(v) for k, v in value["dict"].items()}
    if "array" in value:
        return np.asarray(value["array"], dtype=np.dtype(value["dtype"]))
    if "dtype" in value:
        return dtypes.as_dtype(value["dtype"])
    text = value["sbp"]
    return sbp_mod.broadcast if text == "B" else sbp_mod.partial_sum if text == "P" else sbp_mod.split(
        int(text[2:-1]))
