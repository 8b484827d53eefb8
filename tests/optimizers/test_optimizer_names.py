"""Optimizers by Keras name (any case), named errors for others, and slot variables that are never trained."""
import pytest

import flowlayers as flow
from flowlayers.framework.variable import Variable
from flowlayers.initializers import Zeros
from flowlayers.optimizers import base


@pytest.mark.parametrize("name, cls", [("sgd", flow.optimizers.SGD), ("Adam", flow.optimizers.Adam),
                                       ("ADAMW", flow.optimizers.AdamW), ("rmsprop", flow.optimizers.RMSprop),
                                       ("Nadam", flow.optimizers.Nadam), ("lion", flow.optimizers.Lion)])
def test_optimizers_by_name(name, cls):
    rule = flow.optimizers.get(name)
    assert type(rule) is cls and rule.iterations == 0
    same = cls(0.5)
    assert flow.optimizers.get(same) is same


@pytest.mark.parametrize("identifier", ["lamb", "", 3, None])
def test_other_optimizer_names_are_named(identifier):
    with pytest.raises(flow.ConfigError, match=rf"optimizer: expected a flow.optimizers.\* instance or one of "
                                               rf"\['adadelta', 'adagrad', 'adam', 'adamax', 'adamw', 'ftrl', 'lion', 'nadam', 'rmsprop', 'sgd'\], "
                                               rf"received {identifier!r}"):
        flow.optimizers.get(identifier)


def test_slots_are_zero_non_trainable_variables_laid_out_like_theirs():
    var = Variable("dense/kernel", (3, 2), flow.float32, Zeros())
    rule = flow.optimizers.Adam()
    m, v = rule.slots(var)
    assert [s.path for s in (m, v)] == ["adam/dense/kernel/m", "adam/dense/kernel/v"]
    assert not m.trainable and not v.trainable and m.layout_of is var and m.shape == var.shape
    assert rule.slots(var)[0] is m                     # made once
