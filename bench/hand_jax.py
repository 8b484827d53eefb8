"""The peers' hand-written forward pass in ``jax``, the one of ``gpu_peers.py``: LeNet (NHWC, HWIO kernels, SAME
padding, 2x2 max pooling) and the 4x1024 MLP, on a flat list of weights and biases, layer by layer."""
import jax
import jax.numpy as jnp
from jax import lax


def forward(model, w, x):
    """The logits of ``model`` ("lenet" or "mlp") with weights ``w`` (kernel, bias per layer) for the batch ``x``."""
    if model == "lenet":
        dn = ("NHWC", "HWIO", "NHWC")
        h = jax.nn.relu(lax.conv_general_dilated(x, w[0], (1, 1), "SAME", dimension_numbers=dn) + w[1])
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "SAME")
        h = jax.nn.relu(lax.conv_general_dilated(h, w[2], (1, 1), "SAME", dimension_numbers=dn) + w[3])
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "SAME")
        h = jax.nn.relu(h.reshape(h.shape[0], -1) @ w[4] + w[5])
        return h @ w[6] + w[7]
    h = x.reshape(x.shape[0], -1)
    for i in range(0, len(w) - 2, 2):
        h = jax.nn.relu(h @ w[i] + w[i + 1])
    return h @ w[-2] + w[-1]
