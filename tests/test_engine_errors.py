"""How an engine error is traced back to the layer and op that made it (``lowering.step_error``), from the node
scopes TensorFlow names in its message."""
import flowlayers as flow
from flowlayers_tensorflow.lowering import step_error


class Failure(Exception):
    def __init__(self, message):
        super().__init__(message)
        self.message = message


def test_the_innermost_node_any_named_scope_belongs_to_is_blamed():
    x = flow.Input((3,), name="x")
    y = flow.layers.Dense(2, name="head")(flow.layers.Dense(4, name="body")(x))
    program = flow.Model(x, y)._program("predict")
    message = ("INVALID_ARGUMENT: Incompatible shapes: [2] vs. [3]\n\t [[{{node unrelated_scope/Add}}]]\n"
               "Detected at node head/matmul/MatMul defined at ...")
    error = step_error(program, Failure(message))
    assert "layer 'head', op 'matmul': Incompatible shapes: [2] vs. [3]" in str(error), error


def test_kernel_files_are_named_after_the_front_ends_op_families():
    """backends/flowlayers_tensorflow/kernels/<family>.py holds the kernels of the ops flowlayers/ops/<family>.py
    declares: a reader finds an op's kernel where its OpDef is."""
    import importlib
    import pkgutil

    from flowlayers import ops
    from flowlayers.framework.op_def import OpDef
    from flowlayers_tensorflow import kernels

    family = {}
    for info in pkgutil.iter_modules(ops.__path__):
        for value in vars(importlib.import_module(f"flowlayers.ops.{info.name}")).values():
            for op in value.values() if isinstance(value, dict) else [value]:
                if isinstance(op, OpDef):
                    family.setdefault(op.name, info.name)
    misplaced = []
    for info in pkgutil.iter_modules(kernels.__path__):
        for name in importlib.import_module(f"flowlayers_tensorflow.kernels.{info.name}").KERNELS:
            if family.get(name) != info.name:
                misplaced.append(f"{name} in kernels/{info.name}.py, declared in ops/{family.get(name)}.py")
    assert not misplaced, misplaced
