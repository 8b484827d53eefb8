"""Weight regularizers: a penalty on a variable, added to the loss that training minimises.

Keras' classes, with Keras' meaning (the penalty is added to the loss, and the reported loss includes it)::

    flow.layers.Dense(64, kernel_regularizer=flow.regularizers.L2(1e-4))     # 1e-4 * sum(w ** 2)
    flow.layers.Dense(64, kernel_regularizer="l2")                           # L2(0.01)

OneFlow 0.x's functions, with OneFlow's meaning (the optimizer adds ``l1 * sign(w) + l2 * w`` to the
gradient: the penalty ``l1 * sum|w| + l2 / 2 * sum(w ** 2)``; a job's returned loss does not include it)::

    flow.layers.dense(x, 64, kernel_regularizer=flow.regularizers.l2(1e-4))
    flow.get_variable("w", (4, 4), regularizer=flow.regularizers.l1_l2(l1=0.01, l2=0.01))

``l1``, ``l2`` and ``l1_l2`` are also Keras' lower-case aliases (``keras.regularizers.l2(0.01)``), whose
meaning differs by that factor 2 and whose defaults differ too; so they name a regularizer whose convention is
that of where it is used: OneFlow's in ``flow.get_variable`` and the functional ``flow.layers.dense`` /
``conv2d``, Keras' in a layer class (``Dense(kernel_regularizer=...)``).
"""
from .errors import LayerError
from .framework.graph import topo_sort
from .ops import elementwise as ew, reduce, source


class Regularizer:
    def __call__(self, weight):
        """The penalty (a scalar Blob) for the Blob reading a weight."""
        raise NotImplementedError

    def get_config(self):
        return {}


class L1L2(Regularizer):
    """Keras': ``l1 * sum(|w|) + l2 * sum(w ** 2)``."""

    def __init__(self, l1=0.0, l2=0.0):
        who = f"regularizer {type(self).__name__}"
        self.l1, self.l2 = float(_number(l1, "l1", who)), float(_number(l2, "l2", who))

    def __call__(self, weight):
        terms = []
        if self.l1:
            terms.append(reduce.reduce_sum(ew.abs(weight)) * self.l1)
        if self.l2:
            terms.append(reduce.reduce_sum(ew.square(weight)) * self.l2)
        if not terms:
            return reduce.reduce_sum(weight) * 0.0
        return terms[0] + terms[1] if len(terms) == 2 else terms[0]

    def get_config(self):
        return {"l1": self.l1, "l2": self.l2}

    def __repr__(self):
        return f"{type(self).__name__}(l1={self.l1}, l2={self.l2})"


class L1(L1L2):
    def __init__(self, l1=0.01):
        super().__init__(l1=l1)

    def get_config(self):
        return {"l1": self.l1}


class L2(L1L2):
    def __init__(self, l2=0.01):
        super().__init__(l2=l2)

    def get_config(self):
        return {"l2": self.l2}


class ByUse(Regularizer):
    """What ``l1``/``l2``/``l1_l2`` return: strengths given (None where left out), resolved by ``get`` where used."""

    def __init__(self, factory, l1=None, l2=None):
        self.factory, self.l1, self.l2 = factory, l1, l2

    def resolve(self, convention):
        if convention == "oneflow":     # OneFlow's defaults are 0.01 for the strengths its function takes
            l1 = (0.01 if self.factory in ("l1", "l1_l2") else 0.0) if self.l1 is None else self.l1
            l2 = (0.01 if self.factory in ("l2", "l1_l2") else 0.0) if self.l2 is None else self.l2
            return L1L2(l1, l2 / 2)
        if self.factory == "l1":
            return L1(0.01 if self.l1 is None else self.l1)
        if self.factory == "l2":
            return L2(0.01 if self.l2 is None else self.l2)
        return L1L2(self.l1 or 0.0, self.l2 or 0.0)

    def __call__(self, weight):
        raise LayerError(f"regularizer {self!r}: expected to be given to a layer or flow.get_variable, which decides "
                         f"its convention, before it is applied")

    def __repr__(self):
        return f"flow.regularizers.{self.factory}(l1={self.l1}, l2={self.l2})"


def _number(v, what, who="regularizer"):
    """``v``, a strength: a number >= 0, else a LayerError naming ``who`` and ``what``."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
        raise LayerError(f"{who}: {what} expected a number >= 0, received {v!r}")
    return v


def l1(l=None, *, l1=None):  # noqa: E741 - OneFlow's argument name
    """OneFlow's ``l1(l=0.01)``; Keras' alias ``l1(l1=0.01)``."""
    return ByUse("l1", l1=_number(l if l1 is None else l1, "l1") if (l, l1) != (None, None) else None)


def l2(l=None, *, l2=None):  # noqa: E741
    """OneFlow's ``l2(l=0.01)``; Keras' alias ``l2(l2=0.01)``."""
    return ByUse("l2", l2=_number(l if l2 is None else l2, "l2") if (l, l2) != (None, None) else None)


def l1_l2(l1=None, l2=None):
    """OneFlow's ``l1_l2(l1=0.01, l2=0.01)``; Keras' alias of ``L1L2(l1=0.0, l2=0.0)``."""
    return ByUse("l1_l2", None if l1 is None else _number(l1, "l1"), None if l2 is None else _number(l2, "l2"))


_CLASSES = {"L1": L1, "L2": L2, "L1L2": L1L2}
_NAMES = {"l1": "l1", "l2": "l2", "l1l2": "l1_l2", "L1": "l1", "L2": "l2", "L1L2": "l1_l2"}    # Keras' strings


def get(identifier, what, convention="keras"):
    """A Regularizer (or None) from an instance, a Keras name ('l1', 'l2', 'l1l2') or what ``serialize``
    wrote; ``l1``/``l2``/``l1_l2`` results take ``convention``."""
    if identifier is None:
        return None
    if isinstance(identifier, ByUse):
        return identifier.resolve(convention)
    if isinstance(identifier, Regularizer):
        return identifier
    if isinstance(identifier, str) and identifier in _NAMES:
        return ByUse(_NAMES[identifier]).resolve(convention)
    if isinstance(identifier, dict) and identifier.get("class_name") in _CLASSES:
        return _CLASSES[identifier["class_name"]](**identifier.get("config", {}))
    raise LayerError(f"{what}: expected a flow.regularizers.* regularizer, one of {sorted(_NAMES)} or None, "
                     f"received {identifier!r}")


def serialize(regularizer):
    if regularizer is None:
        return None
    if type(regularizer) not in _CLASSES.values():
        raise LayerError(f"regularizer {regularizer!r}: only flow.regularizers.L1, L2 and L1L2 can be saved, "
                         f"received {type(regularizer).__name__}")
    return {"class_name": type(regularizer).__name__, "config": regularizer.get_config()}


def penalized(loss):
    """``loss`` plus the penalties of the regularized trainable variables it reads, added to every element (so
    its mean over the batch, what training minimises, gains each penalty once); and the per-example penalties of
    the activity regularizers it reads (a layer's ``activity_penalty(node)``, Keras' ``activity_regularizer``
    divided by the batch size), added example by example (their mean, to a scalar loss)."""
    nodes = topo_sort([loss])
    variables = [n.variable for n in nodes if n.op.kind == "variable"]
    seen, total = set(), None
    for var in variables:
        if id(var) in seen or getattr(var, "regularizer", None) is None or not var.trainable:
            continue
        seen.add(id(var))
        term = var.regularizer(source.variable(var))
        total = term if total is None else total + term
    for node in nodes:
        hook = getattr(node.layer, "activity_penalty", None)
        term = hook(node) if hook is not None else None
        if term is not None:
            term = reduce.reduce_mean(term) if loss.ndim == 0 else term
            total = term if total is None else total + term
    return loss if total is None else loss + total
