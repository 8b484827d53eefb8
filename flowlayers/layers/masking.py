"""Masking: steps whose features all equal ``mask_value`` are zeroed and masked.  The mask (``(N, steps)``, 1 where
a step is kept) goes to the layer called on the output, when that layer takes a mask (GlobalAveragePooling1D,
Attention, AdditiveAttention); any other layer refuses such an input by name (``Layer._input_mask``)."""
from ..errors import LayerError
from ..ops import elementwise as ew, reduce
from .base import Layer


class Masking(Layer):
    min_ndim = 2

    def __init__(self, mask_value=0.0, **kwargs):
        super().__init__(**kwargs)
        if isinstance(mask_value, bool) or not isinstance(mask_value, (int, float)):
            raise LayerError(f"layer {self.name!r} (Masking): mask_value expected a number, received {mask_value!r}")
        self.mask_value = float(mask_value)

    def _kept(self, x, keepdims):
        """1 where some feature of a step differs from ``mask_value``, else 0 (x's dtype)."""
        differs = ew.subtract(1.0, ew.cast(ew.equal(x, self.mask_value), x.dtype))
        return reduce.reduce_max(differs, axis=-1, keepdims=keepdims)

    def call(self, x):
        return ew.multiply(x, self._kept(x, keepdims=True))

    def output_mask(self, blob):
        """The mask of an output of this layer: from the input of the call that made it."""
        return self._kept(blob.node.inputs[0], keepdims=False)

    def get_config(self):
        return {**super().get_config(), "mask_value": self.mask_value}
