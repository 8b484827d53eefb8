"""Each backend's ``kernels/<family>.py`` holds the kernels of the ops ``flowlayers/ops/<family>.py`` declares: a
reader finds an op's kernel where its OpDef is, in either engine."""
import importlib
import pkgutil

import pytest

from flowlayers import ops
from flowlayers.framework.op_def import OpDef


def _families():
    """op name -> the ``flowlayers/ops`` module that declares it."""
    family = {}
    for info in pkgutil.iter_modules(ops.__path__):
        for value in vars(importlib.import_module(f"flowlayers.ops.{info.name}")).values():
            for op in value.values() if isinstance(value, dict) else [value]:
                if isinstance(op, OpDef):
                    family.setdefault(op.name, info.name)
    return family


@pytest.mark.parametrize("backend", ["flowlayers_tensorflow", "flowlayers_jax"])
def test_kernel_files_are_named_after_the_front_ends_op_families(backend):
    kernels = pytest.importorskip(f"{backend}.kernels")
    family, misplaced, found = _families(), [], set()
    for info in pkgutil.iter_modules(kernels.__path__):
        module = importlib.import_module(f"{backend}.kernels.{info.name}")
        for name in getattr(module, "KERNELS", ()):      # a module without KERNELS is a helper (jax: varying.py)
            found.add(name)
            if family.get(name) != info.name:
                misplaced.append(f"{name} in kernels/{info.name}.py, declared in ops/{family.get(name)}.py")
    assert not misplaced, misplaced
    assert found == set(kernels.KERNELS), set(kernels.KERNELS) ^ found      # every kernel lives in a family file
