"""Operands of a custom gradient rule inside ``shard_map`` (the mirrored view)."""
import jax
from jax import lax


def varying_alike(a, b):
    """``a`` and ``b``, each made varying over the axes the other varies over: a custom gradient must come out as
    its operand went in, and a replica's gradient of its copy of a kernel varies (the ``pcast``'s own transpose sums
    it over the replicas, as JAX's rules do where they cast implicitly).  Outside ``shard_map``: as they are."""
    va, vb = jax.typeof(a).manual_axis_type.varying, jax.typeof(b).manual_axis_type.varying
    if vb - va:
        a = lax.pcast(a, tuple(sorted(vb - va)), to="varying")
    if va - vb:
        b = lax.pcast(b, tuple(sorted(va - vb)), to="varying")
    return a, b
