"""How an engine error is traced back to the layer and op that made it (``lowering.step_error``), from the node
scopes TensorFlow names in its message."""
import pytest

import flowlayers as flow

pytest.importorskip("tensorflow")     # the import below needs it: without it the file is skipped
from flowlayers_tensorflow.lowering import step_error  # noqa: E402

pytestmark = pytest.mark.tensorflow_backend


class Failure(Exception):
    def __init__(self, message):
        super().__init__(message)
        self.message = message


def test_the_innermost_node_any_named_scope_belongs_to_is_blamed():
    x = flow.Input((3,), name="x")
    y = flow.layers.Dense(2, name="head")(flow.layers.Dense(4, name="body")(x))
    program = flow.Model(x, y).trainer.program("predict")
    message = ("INVALID_ARGUMENT: Incompatible shapes: [2] vs. [3]\n\t [[{{node unrelated_scope/Add}}]]\n"
               "Detected at node head/matmul/MatMul defined at ...")
    error = step_error(program, Failure(message))
    assert "layer 'head', op 'matmul': Incompatible shapes: [2] vs. [3]" in str(error), error
