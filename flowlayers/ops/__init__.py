"""Ops, each declared once as data (an ``OpDef``: shape and dtype inference, SBP signatures); one file per family."""


import importlib
import pkgutil

from ..framework.op_def import OpDef


def by_name():
    """Every OpDef of the front end by its name (what a saved model names its ops by)."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        for value in vars(importlib.import_module(f"{__name__}.{info.name}")).values():
            for op in value.values() if isinstance(value, dict) else [value]:
                if isinstance(op, OpDef):
                    found.setdefault(op.name, op)
    return found
