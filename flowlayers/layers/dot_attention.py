"""Keras' Attention (Luong-style: dot-product or ``concat`` scores) and AdditiveAttention (Bahdanau-style), called
on ``[query, value]`` or ``[query, value, key]`` of shapes ``(N, Tq, D)``, ``(N, Tv, D)``: the softmax of the
scores over the value steps weighs the values.

Masks are Keras': ``mask=[query_mask, value_mask]`` (``(N, Tq)``, ``(N, Tv)``; 1 or True where a step counts),
or the masks the inputs carry (from ``Masking``); a masked value step's score is lowered by 1e9 before the
softmax, a masked query step's output is zero and the output carries the query mask on, as in Keras;
``use_causal_mask`` lets query step i see value steps <= i.
"""
import numpy as np

from .. import dtypes
from ..errors import LayerError, ShapeError
from ..ops import elementwise as ew, nn, reduce
from ..ops.einsum import einsum
from ..ops.shape import reshape
from .base import Layer

MASKED = 1e9        # what Keras subtracts from a masked score (float32; float16's largest number in float16)


class Attention(Layer):
    def __init__(self, use_scale=False, score_mode="dot", dropout=0.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.what = what = f"layer {self.name!r} ({type(self).__name__})"
        if not isinstance(use_scale, bool):
            raise LayerError(f"{what}: use_scale expected True or False, received {use_scale!r}")
        if score_mode not in ("dot", "concat"):
            raise LayerError(f"{what}: score_mode expected 'dot' or 'concat', received {score_mode!r}")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
            raise LayerError(f"{what}: dropout expected a number in [0, 1), received {dropout!r}")
        self.use_scale, self.score_mode, self.dropout, self.seed = use_scale, score_mode, float(dropout), seed
        self._query_masks = {}      # id(output Blob) -> (that Blob, the query mask it carries)

    def build(self, input_shape):
        self._check_shapes(input_shape)
        self.scale = self.add_weight("scale", (), "ones") if self.use_scale else None
        self.concat_score_weight = (self.add_weight("concat_score_weight", (), "ones")
                                    if self.score_mode == "concat" else None)

    def _check_shapes(self, shapes):
        if not isinstance(shapes, list) or len(shapes) not in (2, 3):
            raise LayerError(f"{self.what}: expected a list [query, value] or [query, value, key], received "
                             f"{shapes!r}")
        q, v, k = shapes[0], shapes[1], shapes[-1]
        if any(len(s) != 3 for s in shapes) or q[2] != k[2] or v[1] != k[1]:
            raise ShapeError(f"{self.what}: expected query (N, Tq, D), value (N, Tv, Dv) and key (N, Tv, D), "
                             f"received shapes {shapes}")

    def scores(self, q, k):
        """(N, Tq, Tv) scores of each query step for each key step."""
        if self.score_mode == "dot":
            s = einsum("nqd,nvd->nqv", q, k)
            return ew.multiply(s, self.read(self.scale)) if self.use_scale else s
        pairs = self._pairs(q, k)
        if self.use_scale:
            pairs = ew.multiply(pairs, self.read(self.scale))
        return ew.multiply(reduce.reduce_sum(ew.tanh(pairs), axis=-1), self.read(self.concat_score_weight))

    @staticmethod
    def _pairs(q, k):
        """(N, Tq, Tv, D): each query step plus each key step."""
        (n, tq, d), tv = q.shape, k.shape[1]
        return ew.add(reshape(q, (n, tq, 1, d)), reshape(k, (n, 1, tv, d)))

    def call(self, inputs, mask=None, training=None, return_attention_scores=False, use_causal_mask=False):
        self._check_shapes([x.shape for x in inputs] if isinstance(inputs, (list, tuple)) else inputs)
        q, v = inputs[0], inputs[1]
        k = inputs[2] if len(inputs) > 2 else v
        q_mask, v_mask = self._masks(mask)
        scores = self.scores(q, k)
        keep = None if v_mask is None else reshape(ew.cast(v_mask, q.dtype), (v.shape[0], 1, v.shape[1]))
        if use_causal_mask:
            causal = ew.constant(np.tril(np.ones((q.shape[1], v.shape[1]), np.float32)), q.dtype)
            keep = causal if keep is None else ew.multiply(keep, causal)
        if keep is not None:
            masked = 65504.0 if scores.dtype == dtypes.float16 else MASKED
            scores = ew.subtract(scores, ew.multiply(ew.subtract(1.0, keep), masked))
        weights = nn.softmax(scores, axis=-1)
        if self.dropout:
            weights = nn.dropout(weights, self.dropout, training=training, seed=self.seed)
        out = einsum("nqv,nvd->nqd", weights, v)
        if q_mask is not None:
            out = ew.multiply(out, reshape(ew.cast(q_mask, out.dtype), (q.shape[0], q.shape[1], 1)))
            self._query_masks[id(out)] = (out, q_mask)
        return (out, weights) if return_attention_scores else out

    def output_mask(self, blob):
        """Keras': the query mask carries over to the output (to a layer that takes a mask, see ``Masking``)."""
        made, mask = self._query_masks.get(id(blob), (None, None))
        return mask if made is blob else None

    def _masks(self, mask):
        if mask is None:
            return None, None
        if not isinstance(mask, (list, tuple)) or len(mask) not in (2, 3):
            raise LayerError(f"{self.what}: mask expected a list [query_mask, value_mask], received {mask!r}")
        return mask[0], mask[1]

    def get_config(self):
        return {**super().get_config(), "use_scale": self.use_scale, "score_mode": self.score_mode,
                "dropout": self.dropout, "seed": self.seed}


class AdditiveAttention(Attention):
    """Scores ``sum(scale * tanh(query_i + key_j))`` over the features, ``scale`` a weight of shape (D,)."""

    def __init__(self, use_scale=True, dropout=0.0, seed=None, **kwargs):
        super().__init__(use_scale=use_scale, dropout=dropout, seed=seed, **kwargs)

    def build(self, input_shape):
        self._check_shapes(input_shape)
        self.scale = self.add_weight("scale", (input_shape[0][-1],), "glorot_uniform") if self.use_scale else None

    def scores(self, q, k):
        terms = ew.tanh(self._pairs(q, k))
        if self.use_scale:
            terms = ew.multiply(terms, self.read(self.scale))
        return reduce.reduce_sum(terms, axis=-1)

    def get_config(self):
        config = super().get_config()
        del config["score_mode"]
        return config
