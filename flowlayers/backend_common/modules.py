"""A Backend class whose engine loads with the first call that needs it: importing the backend's package imports no
engine, so the front end reads its capabilities (and plans) without one.

Backends share one module map (``runtime``, ``executable``, ``lowering``, ``devices``, ``export``,
``kernels``...), so the members that only hand a call to the module of their name are written once, here."""
import importlib
import sys


class EngineModules:
    """Mixin for a backend's ``Backend`` class: ``export``, ``load_export``, ``kernels`` and ``check_device_count``
    from its package's modules ``export``, ``kernels`` and ``devices``, imported at their first use."""

    def module(self, name):
        """The backend package's module ``name`` (the engine starts with the first module that imports it)."""
        return importlib.import_module(f".{name}", sys.modules[type(self).__module__].__package__)

    def export(self, program, weights, spec, filepath):
        """The predict ``program`` with ``weights`` as an artifact of ``spec.format`` (see the backend's
        export.py)."""
        return self.module("export").export(program, weights, spec, filepath)

    def load_export(self, filepath, format):
        """An artifact of ``format`` this backend exported, as a callable of host arrays."""
        return self.module("export").load(filepath, format)

    @property
    def kernels(self):
        """The op kernels by op name (``KERNELS[op](node, *inputs, ctx)``), custom ones included."""
        return self.module("kernels").KERNELS

    def check_device_count(self, n, what):
        """Raise ConfigError naming ``what`` if ``n`` devices cannot be had in this process (see the backend's
        devices.py)."""
        self.module("devices").check(n, what)
