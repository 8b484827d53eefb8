"""flowlayers dtypes <-> JAX dtypes."""
import jax
import jax.numpy as jnp


def jax_dtype(dtype):
    return jnp.dtype(dtype.name)


def array_dtype(dtype):
    """The dtype JAX makes an array of for ``dtype``: without ``jax_enable_x64``, int64 and float64 arrays are
    int32 and float32 (asking for them warns and truncates anyway)."""
    return jax.dtypes.canonicalize_dtype(jax_dtype(dtype))
