"""Your own classes by name, for loading saved models: Keras 3's registry (``register_keras_serializable``,
``get_custom_objects``, ``custom_object_scope``).  A loader looks a name up in the ``custom_objects`` it is given,
then in the scopes open, then in the registry."""
import contextlib

from .errors import ConfigError

_REGISTERED = {}          # "package>name" -> class or function, and the plain names added by hand
_NAMES = {}               # class or function -> "package>name"
_SCOPES = []              # the dicts of the custom_object_scope blocks open, innermost last


def register_keras_serializable(package="Custom", name=None):
    """A decorator: keep the class (or function) under ``"package>name"`` (``name``: its own name), the name
    ``get_registered_name`` gives and a saved model's ``registered_name`` carries."""
    if not isinstance(package, str) or ">" in package:
        raise ConfigError(f"register_keras_serializable: package expected a string without '>', received "
                          f"{package!r}")

    def register(obj):
        key = f"{package}>{name or obj.__name__}"
        if isinstance(obj, type) and not callable(getattr(obj, "get_config", None)):
            raise ConfigError(f"register_keras_serializable: the class {obj.__name__!r} has no get_config(); "
                              f"expected a class whose config makes it again")
        _REGISTERED[key] = obj
        _NAMES[obj] = key
        return obj
    return register


def get_custom_objects():
    """The registry itself: a dict you may add to (``get_custom_objects()["MyLayer"] = MyLayer``)."""
    return _REGISTERED


def get_registered_name(obj):
    """``"package>name"`` for a registered class or function, else its own name."""
    return _NAMES.get(obj, getattr(obj, "__name__", type(obj).__name__))


def is_registered(obj):
    return obj in _NAMES


def get_registered_object(name, custom_objects=None, module_objects=None):
    """What ``name`` stands for: in ``custom_objects``, the open scopes, the registry, then ``module_objects``;
    None if nowhere."""
    return all_custom_objects(custom_objects).get(name, (module_objects or {}).get(name))


def all_custom_objects(custom_objects=None):
    """One table for a loader: the registry, the open scopes over it, and ``custom_objects`` over them."""
    table = dict(_REGISTERED)
    for scope in _SCOPES:
        table.update(scope)
    table.update(custom_objects or {})
    return table


class CustomObjectScope(contextlib.ContextDecorator):
    """``with custom_object_scope({"MyLayer": MyLayer}):`` the names are known to loaders inside the block."""

    def __init__(self, *custom_objects):
        for table in custom_objects:
            if not isinstance(table, dict):
                raise ConfigError(f"custom_object_scope: expected dicts of name -> class, received {table!r}")
        self.custom_objects = {k: v for table in custom_objects for k, v in table.items()}

    def __enter__(self):
        _SCOPES.append(self.custom_objects)
        return self

    def __exit__(self, *exc):
        _SCOPES.remove(self.custom_objects)
        return False


custom_object_scope = CustomObjectScope
