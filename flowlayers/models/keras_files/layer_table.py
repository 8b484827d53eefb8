"""Keras 3's side of flowlayers' layers: which Keras class a layer is, where a Keras weights file keeps its
variables, and how a layer's config reads in Keras (and back).

flowlayers' layers take Keras' argument names, so a config mostly crosses as it is; what differs:

- values: a dtype is a ``DTypePolicy`` object in Keras, initializers and regularizers are objects with a module,
  a data format is ``channels_last`` (flowlayers' configs may say ``NHWC``);
- arguments Keras has and flowlayers does not (constraints, LoRA, quantization, ...): read only at the value that
  leaves them off (``NEUTRAL``), any other value is refused by name;
- weights of Keras' sublayers (MultiHeadAttention's ``query_dense``, a recurrent layer's ``cell``): ``SUBLAYERS``
  maps the start of a flowlayers weight name to the sublayer Keras keeps it in.
"""
import re

from ... import layers as layers_mod

#: Keras 3 layer classes (``keras.layers.<name>``) that flowlayers has under the same name.  Recurrent layers are
#: listed too: they count where flowlayers has them.
KERAS_LAYERS = (
    "Activation", "ActivityRegularization", "Add", "AdditiveAttention", "Attention", "Average",
    "AveragePooling1D", "AveragePooling2D", "AveragePooling3D", "BatchNormalization", "Bidirectional",
    "CategoryEncoding", "CenterCrop", "Concatenate", "Conv1D", "Conv1DTranspose", "Conv2D", "Conv2DTranspose",
    "Conv3D", "Cropping1D", "Cropping2D", "Dense", "DepthwiseConv2D", "Discretization", "Dot", "Dropout",
    "EinsumDense", "Embedding", "Flatten", "GaussianDropout", "GaussianNoise", "GlobalAveragePooling1D",
    "GlobalAveragePooling2D", "GlobalAveragePooling3D", "GlobalMaxPooling1D", "GlobalMaxPooling2D",
    "GlobalMaxPooling3D", "GroupNormalization", "GRU", "Identity", "LayerNormalization", "LSTM", "Masking",
    "MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "Maximum", "Minimum", "MultiHeadAttention", "Multiply",
    "Normalization", "Permute", "RandomContrast", "RandomFlip", "RandomRotation", "RandomTranslation", "RandomZoom",
    "ReLU", "RepeatVector", "Rescaling", "Reshape", "Resizing", "SeparableConv1D", "SeparableConv2D", "SimpleRNN",
    "Softmax", "SpatialDropout1D", "SpatialDropout2D", "Subtract", "TimeDistributed", "UnitNormalization",
    "UpSampling1D", "UpSampling2D", "ZeroPadding1D", "ZeroPadding2D",
)

#: Keras class -> {start of a flowlayers weight name (after ``<layer>/``): the Keras sublayer that keeps it};
#: a layer not listed keeps its variables itself, in flowlayers' order (which is Keras').  One line per layer.
SUBLAYERS = {
    "MultiHeadAttention": {"query/": "query_dense", "key/": "key_dense", "value/": "value_dense",
                           "attention_output/": "output_dense"},
    "LSTM": {"": "cell"},
    "GRU": {"": "cell"},
    "SimpleRNN": {"": "cell"},
    "TimeDistributed": {"": "layer"},
}

ANY = object()      # any value: an argument that only matters when another one (named with it) is on

#: Keras arguments flowlayers' layers do not take, and the values at which Keras leaves them off: read at these,
#: refused by name at any other.
NEUTRAL = {
    "activity_regularizer": (None,), "kernel_constraint": (None,), "bias_constraint": (None,),
    "recurrent_constraint": (None,), "embeddings_constraint": (None,), "depthwise_constraint": (None,),
    "pointwise_constraint": (None,), "beta_constraint": (None,), "gamma_constraint": (None,),
    "beta_regularizer": (None,), "gamma_regularizer": (None,), "lora_rank": (None,), "lora_alpha": (None,),
    "quantization_config": (None,), "gptq_unpacked_column_size": (None,), "groups": (1,), "renorm": (False,),
    "renorm_clipping": (None,), "renorm_momentum": ANY, "synchronized": (False,), "noise_shape": (None,),
    "mask_zero": (False,), "weights": (None,), "sliding_window": (None,), "flash_attention": (None, False),
    "use_gate": (False,), "bounding_box_format": (None,), "sparse": (False,), "ragged": (False,),
    "rms_scaling": (False,), "autocast": (True,), "max_value": (None,), "negative_slope": (0.0, 0),
    "threshold": (0.0, 0), "data_format": ("channels_last", None), "factor": (None,), "optional": (False,),
}

#: (Keras class, argument) -> {value Keras writes: flowlayers' value of the same meaning}
EQUIVALENT = {("MultiHeadAttention", "attention_axes"): {(1,): None, 1: None}}    # the sequence axis of 3-D inputs

#: Keras' names for the ops a functional model applies outside layers (``x + y``), and flowlayers' op of each
OPS = {"Add": "add", "Subtract": "subtract", "Multiply": "multiply", "TrueDivide": "divide", "Divide": "divide"}
OP_MODULE = "keras.src.ops.numpy"


def flow_class(keras_name):
    """flowlayers' class for Keras layer class ``keras_name``, or None where flowlayers has none."""
    if keras_name not in KERAS_LAYERS:
        return None
    cls = getattr(layers_mod, keras_name, None)
    return cls if isinstance(cls, type) else None


def keras_name(layer):
    """The Keras class name of ``layer``: a flowlayers built-in Keras has (``MaxPool2D`` -> ``MaxPooling2D``), else
    None."""
    for name in KERAS_LAYERS:
        if getattr(layers_mod, name, None) is type(layer):
            return name
    return None


def model_kind(model):
    """``"Functional"`` (a flow.Model of Inputs and outputs) or ``"Sequential"``: the Keras class of a model whose
    layers Keras lists; None for a subclass (Keras walks its attributes instead)."""
    return MODEL_KINDS.get(f"{type(model).__module__}.{type(model).__qualname__}")


MODEL_KINDS = {"flowlayers.models.model.Model": "Functional", "flowlayers.models.sequential.Sequential": "Sequential"}


def snake_case(name):
    """Keras' ``to_snake_case``: ``Conv2D`` -> ``conv2d``, ``MultiHeadAttention`` -> ``multi_head_attention``,
    ``LSTM`` -> ``lstm`` (how Keras names a layer's group in a weights file)."""
    name = re.sub(r"\W+", "", name)
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


def sublayer_of(keras_class, weight_name):
    """The Keras sublayer path (relative to the layer's group, "" for the layer itself) that keeps the weight
    named ``weight_name`` (its path after ``<layer>/``)."""
    for start, sub in SUBLAYERS.get(keras_class, {}).items():
        if weight_name.startswith(start):
            return sub
    return ""
