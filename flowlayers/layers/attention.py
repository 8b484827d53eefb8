"""MultiHeadAttention, as Keras 3 computes it and names its weights.

    mha = flow.layers.MultiHeadAttention(num_heads=4, key_dim=16)
    y = mha(x, x, use_causal_mask=True)                 # self-attention, (batch, seq, model_dim)

Weights ``<name>/query/kernel`` ``(model_dim, heads, key_dim)`` and ``query/bias`` ``(heads, key_dim)``, likewise
``key`` and ``value``, then ``attention_output/kernel`` ``(heads, value_dim, out)`` and its bias: Keras' paths
and shapes, so its layout rules (heads split over ``model``) carry over.  Every projection is a ``flow.einsum``,
whose signatures come from its equation.  The attention itself is one fused op (``flow.ops.dot_product_attention``:
the engine's fused kernel, which the engine picks as for ``flash_attention=None``) wherever Keras 3 takes it: with no
dropout and no attention scores returned; otherwise it is composed of einsums and a softmax, as Keras composes it.
"""
import math

import numpy as np

from .. import dtypes
from ..errors import LayerError, ShapeError, describe_shape
from ..ops import attention, elementwise as ew, nn
from ..ops.einsum import einsum
from ..ops.shape import reshape
from .base import Layer
from .einsum_dense import kernel_fans

PROJECT, MERGE = "abc,cde->abde", "abcd,cde->abe"     # Keras' projections into and out of the heads

LARGE_NEGATIVE = -1e9       # what Keras' masked softmax adds where the mask is off (float32)


class MultiHeadAttention(Layer):
    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True, output_shape=None,
                 attention_axes=None, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        what = f"layer {self.name!r} (MultiHeadAttention)"
        for arg, v in (("num_heads", num_heads), ("key_dim", key_dim), ("value_dim", value_dim or key_dim)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise LayerError(f"{what}: {arg} expected a positive int, received {v!r}")
        if not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
            raise LayerError(f"{what}: dropout expected a number in [0, 1), received {dropout!r}")
        if attention_axes is not None:
            raise LayerError(f"{what}: attention_axes={attention_axes!r} is not supported; expected None (attention "
                             f"over the sequence axis)")
        if isinstance(output_shape, (tuple, list)) and len(output_shape) == 1:
            output_shape = output_shape[0]
        if output_shape is not None and (isinstance(output_shape, bool) or not isinstance(output_shape, int)
                                         or output_shape <= 0):
            raise LayerError(f"{what}: output_shape expected None or a positive int, received {output_shape!r}")
        self.num_heads, self.key_dim, self.value_dim = num_heads, key_dim, value_dim or key_dim
        self.dropout, self.use_bias, self.output_shape, self.seed = float(dropout), use_bias, output_shape, seed
        self.keep_kernel_and_bias(kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer)

    def __call__(self, query, value=None, key=None, attention_mask=None, use_causal_mask=False, training=None,
                 return_attention_scores=False, **kwargs):
        """Keras' call: ``mha(query, value, key=None, attention_mask=None, use_causal_mask=False)``; Keras' masks
        carried by the inputs (``query_mask``, ``value_mask``, ``key_mask``) are refused by name."""
        if kwargs:
            raise LayerError(f"layer {self.name!r} (MultiHeadAttention): {sorted(kwargs)} not supported; expected "
                             f"query, value, key, attention_mask, use_causal_mask, training or "
                             f"return_attention_scores (give masks as attention_mask)")
        if isinstance(query, (list, tuple)):        # as a saved model calls it again: the Blobs in one list
            query, value, key, *mask = list(query) + [None] * (4 - len(query))
            attention_mask = mask[0] if mask and mask[0] is not None else attention_mask
        if value is None:
            raise LayerError(f"layer {self.name!r} (MultiHeadAttention): expected mha(query, value), received no "
                             f"value")
        inputs = [query, value, value if key is None else key] + ([attention_mask] if attention_mask is not None
                                                                 else [])
        for blob, what in zip(inputs, ("query", "value", "key")):
            if getattr(blob, "ndim", 3) != 3:
                raise ShapeError(f"layer {self.name!r} (MultiHeadAttention): {what} expected shape (batch, seq, "
                                 f"features), received {describe_shape(blob.shape)}")
        return super().__call__(inputs, training=training, use_causal_mask=bool(use_causal_mask),
                                return_attention_scores=bool(return_attention_scores))

    def build(self, shapes):
        (_, _, d_query), (_, _, d_value), (_, _, d_key) = shapes[:3]
        heads, k, v = self.num_heads, self.key_dim, self.value_dim
        self.query_kernel, self.query_bias = self._dense("query", (d_query, heads, k), (heads, k), PROJECT)
        self.key_kernel, self.key_bias = self._dense("key", (d_key, heads, k), (heads, k), PROJECT)
        self.value_kernel, self.value_bias = self._dense("value", (d_value, heads, v), (heads, v), PROJECT)
        out = self.output_shape or d_query
        self.output_kernel, self.output_bias = self._dense("attention_output", (heads, v, out), (out,), MERGE)

    def _dense(self, name, kernel_shape, bias_shape, equation):
        kernel = self.add_weight(f"{name}/kernel", kernel_shape, kernel_fans(self.kernel_initializer, equation),
                                 regularizer=self.kernel_regularizer)
        bias = self.add_weight(f"{name}/bias", bias_shape, self.bias_initializer,
                               regularizer=self.bias_regularizer) if self.use_bias else None
        return kernel, bias

    def _project(self, x, equation, kernel, bias):
        y = einsum(equation, x, self.read(kernel))
        return y + self.read(bias) if bias is not None else y

    def call(self, inputs, training=None, use_causal_mask=False, return_attention_scores=False):
        query, value, key, *mask = inputs
        q = self._project(query, PROJECT, self.query_kernel, self.query_bias)
        k = self._project(key, PROJECT, self.key_kernel, self.key_bias)
        v = self._project(value, PROJECT, self.value_kernel, self.value_bias)
        mask = mask[0] if mask else None
        if self.dropout or return_attention_scores:            # Keras' choice of its composed form
            attended, probs = self._composed(q, k, v, query, value, mask, use_causal_mask, training)
        else:
            attended, probs = self._fused(q, k, v, mask, use_causal_mask), None
        out = self._project(attended, MERGE, self.output_kernel, self.output_bias)
        return (out, probs) if return_attention_scores else out

    def _fused(self, q, k, v, mask, causal):
        """One dot_product_attention op; the mask ``(batch, q_seq, v_seq)`` shared by the heads."""
        if mask is not None:
            mask = reshape(ew.cast(mask, dtypes.bool_), (mask.shape[0], 1) + mask.shape[1:])
        return attention.dot_product_attention(q, k, v, mask=mask, scale=1.0 / math.sqrt(self.key_dim),
                                               is_causal=causal)

    def _composed(self, q, k, v, query, value, mask, causal, training):
        """Keras' einsums and masked softmax: the attention probabilities are kept (returned, or dropped out)."""
        scores = einsum("aecd,abcd->acbe", k, q * (1.0 / math.sqrt(self.key_dim)))    # (batch, heads, q_seq, v_seq)
        allowed = self._allowed(query, value, mask, causal)
        if allowed is not None:
            large = -3e4 if scores.dtype == dtypes.float16 else LARGE_NEGATIVE    # Keras': -1e9 is -inf in float16
            allowed = allowed if allowed.dtype == scores.dtype else ew.cast(allowed, scores.dtype)
            scores = scores + (1.0 - allowed) * large
        probs = nn.softmax(scores, axis=-1)
        dropped = nn.dropout(probs, self.dropout, training=training, seed=self.seed) if self.dropout else probs
        return einsum("acbe,aecd->abcd", dropped, v), probs          # (batch, q_seq, heads, value_dim)

    def _allowed(self, query, value, mask, causal):
        """1.0 where a query may attend to a value, else 0.0, shaped to broadcast over the heads; None: all."""
        allowed = None
        if mask is not None:
            allowed = reshape(ew.cast(mask, dtypes.float32), (mask.shape[0], 1) + mask.shape[1:])
        if causal:
            tq, tv = query.shape[1], value.shape[1]
            if tq is None or tv is None:
                raise ShapeError(f"layer {self.name!r} (MultiHeadAttention): use_causal_mask expected known "
                                 f"sequence lengths, received query {describe_shape(query.shape)} and value "
                                 f"{describe_shape(value.shape)}")
            lower = ew.constant(np.tril(np.ones((1, 1, tq, tv), np.float32)), dtypes.float32)
            allowed = lower if allowed is None else allowed * lower
        return allowed

    def get_config(self):
        return {**super().get_config(), "num_heads": self.num_heads, "key_dim": self.key_dim,
                "value_dim": self.value_dim, "dropout": self.dropout, "use_bias": self.use_bias,
                "output_shape": self.output_shape, "attention_axes": None, "seed": self.seed,
                **self.kernel_and_bias_config()}

