"""Keras 3 names that flowlayers' namespaces (``flow.ops``, ``flow.layers``, ``flow.models``, ``flow.callbacks``,
``flow.losses``, ``flow.activations``, ``flow.initializers``, ``flow.metrics``, ``flow.optimizers``, ``flow.utils``,
``flow.saving``, ``flow.random``, ``flow.datasets``, ``flow.constraints``) lack, and what to use
instead: a namespace's module ``__getattr__`` calls ``refuse``, so ``from flowlayers.layers import GRU`` or
``flow.ops.nonzero`` is a FlowLayersError naming the Keras name and the nearest thing that exists, not a bare
AttributeError.  A name listed here that a namespace later defines is found before ``__getattr__`` runs, so the
tables may list more than is missing today.
"""
import difflib

_SHAPE_FROM_DATA = ("the size of its result is decided by the data, and a graph needs its shapes before it runs; "
                    "keep the shape with flow.ops.where(condition, x, 0), or compute it with numpy on predict's "
                    "output")
_CONTROL_FLOW = ("control flow on tensor values is not part of a flowlayers graph; choose elementwise with "
                 "flow.ops.where(pred, a, b) (both sides are computed), or loop in Python over sizes known when "
                 "the graph is built")
_LINALG = "matrix decompositions and solvers are not in flowlayers' ops; compute them with numpy outside the model"
_FFT = "Fourier transforms are not in flowlayers' ops; compute them with numpy on the data before fit"
_IN_PLACE = ("a graph has no in-place updates; build the result with flow.ops.where, flow.ops.concatenate or "
             "flow.ops.pad")
_PREPROCESSING = "preprocess the data with numpy (or tf.data) before fit; flowlayers models hold no preprocessing"

_OPS = {
    **{n: _SHAPE_FROM_DATA for n in ("nonzero", "unique", "argwhere", "boolean_mask", "bincount", "histogram")},
    **{n: _CONTROL_FLOW for n in ("cond", "switch", "while_loop", "fori_loop", "scan", "map", "associative_scan",
                                  "vectorized_map", "vectorize")},
    **{n: _LINALG for n in ("svd", "qr", "eig", "eigh", "inv", "solve", "solve_triangular", "det", "slogdet",
                            "logdet", "cholesky", "cholesky_inverse", "lstsq", "lu_factor", "pinv", "matrix_rank",
                            "linalg")},
    **{n: _FFT for n in ("fft", "fft2", "ifft2", "rfft", "irfft", "stft", "istft")},
    **{n: _IN_PLACE for n in ("scatter", "scatter_update", "slice_update")},
    **{n: "gradients come from the engine's differentiation of the whole step; use flow.ops.stop_gradient to "
          "cut one" for n in ("custom_gradient", "jvp")},
    **{n: "only segment_sum is in flowlayers (with num_segments given)" for n in ("segment_max", "segment_min",
                                                                                 "segment_prod")},
    **{n: "use flow.layers.LayerNormalization / BatchNormalization, or compose flow.ops.moments"
       for n in ("layer_normalization", "batch_normalization", "rms_normalization")},
    **{n: "use flow.layers.Conv1D / Conv2D / Conv2DTranspose, or flow.ops.conv"
       for n in ("conv_transpose", "depthwise_conv", "separable_conv")},
    "image": "flowlayers has no image ops; use flow.layers.UpSampling2D to resize by whole factors, or preprocess "
             "images with numpy",
    "ctc_loss": "CTC is not in flowlayers", "ctc_decode": "CTC is not in flowlayers",
    "get_item": "slice with flow.ops.slice, flow.ops.take or flow.ops.split",
    "sparse_categorical_crossentropy": "use flow.losses.SparseCategoricalCrossentropy",
    "categorical_crossentropy": "use flow.losses.CategoricalCrossentropy",
    "binary_crossentropy": "use flow.losses.BinaryCrossentropy",
    "multi_hot": "sum flow.ops.one_hot over the ids axis and clip it to 1",
    "identity": "flow.ops.eye(n) makes an identity matrix",
    "ravel": "use flow.ops.reshape(x, (-1,))",
    "hstack": "use flow.ops.concatenate(xs, axis=1)", "vstack": "use flow.ops.concatenate(xs, axis=0)",
    "unstack": "use flow.ops.split then flow.ops.squeeze",
}

_LAYERS = {
    **{n: "use flow.layers.Conv3D, MaxPooling3D / AveragePooling3D or the 1-D and 2-D layers; this 3-D layer is not "
          "in flowlayers" for n in ("Conv3DTranspose", "Convolution3DTranspose", "UpSampling3D", "ZeroPadding3D",
                                    "Cropping3D", "SpatialDropout3D")},
    **{n: "use flow.layers.SimpleRNN, LSTM or GRU (with Bidirectional and TimeDistributed); an RNN of your own "
          "cell, cells on their own and convolutional LSTMs are not in flowlayers"
       for n in ("RNN", "GRUCell", "LSTMCell", "SimpleRNNCell", "StackedRNNCells", "ConvLSTM1D", "ConvLSTM2D",
                 "ConvLSTM3D")},
    **{n: _PREPROCESSING for n in (
        "TextVectorization", "StringLookup", "IntegerLookup", "Hashing", "HashedCrossing", "RandomCrop",
        "RandomBrightness", "Pipeline", "MelSpectrogram", "STFTSpectrogram")},
    **{n: "write a flow.layers.Layer whose call uses flow.ops (a wrapped model of another framework is not a layer "
          "here)" for n in ("TFSMLayer", "JaxLayer", "FlaxLayer", "TorchModuleWrapper", "Wrapper")},
    **{n: "use flow.layers.Activation with the activation's name, or flow.ops in a Layer"
       for n in ("LeakyReLU", "ELU", "PReLU")},
    "AlphaDropout": "use flow.layers.Dropout, GaussianDropout or GaussianNoise",
    **{n: "use flow.layers.LayerNormalization, GroupNormalization or UnitNormalization"
       for n in ("RMSNormalization", "SpectralNormalization")},
    "GroupQueryAttention": "use flow.layers.MultiHeadAttention, or flow.ops.dot_product_attention (whose key may "
                           "have fewer heads) in a Layer",
    "InputSpec": "flowlayers layers check their inputs' rank with input_ndim / min_ndim",
}

_MODELS = {
    "clone_model": "build the model again with the same code and copy weights with set_weights(get_weights())",
    "model_from_json": "use flow.models.load_model on a saved model",
}

_KERAS_CALLBACK = ("pass Keras' own keras.callbacks.{name} to fit: flowlayers drives any object with Keras' hook "
                   "methods; or write a flow.callbacks.Callback")
_CALLBACKS = {n: _KERAS_CALLBACK.format(name=n) for n in (
    "RemoteMonitor", "SwapEMAWeights", "TensorBoard")}
_CALLBACKS["OrbaxCheckpoint"] = "use flow.callbacks.BackupAndRestore, or model.save_weights in a Callback"

_OPTIMIZERS = {
    **{n: "its update reduces over a variable's axes (a norm or factored moments), which a rule written per block of "
          "a split variable cannot do yet; use flow.optimizers.AdamW, Adam or Lion" for n in ("Lamb", "Adafactor",
                                                                                              "Muon")},
    "ScheduleFreeAdamW": "use flow.optimizers.AdamW with a flow.optimizers.schedules schedule",
    **{n: "one optimizer trains every variable of a model in flowlayers; give variables a different rate with "
          "separate models, or freeze them (trainable=False)" for n in ("MultiOptimizer", "OptimizerMap")},
    "legacy": "Keras 2's optimizers are not in flowlayers; use flow.optimizers' Keras 3 classes",
}

_TF_DATA = ("call Keras' own keras.utils.{name}: the tf.data.Dataset it makes goes to fit as it is")
_UTILS = {
    **{n: _TF_DATA.format(name=n) for n in (
        "image_dataset_from_directory", "text_dataset_from_directory", "audio_dataset_from_directory",
        "timeseries_dataset_from_array", "split_dataset")},
    "clear_session": "call flow.clear_session()",
    "get_file": "flowlayers downloads nothing; fetch the file yourself (flow.data.load_mnist reads local copies)",
    "Progbar": "use flow.callbacks.ProgbarLogger, which fit, evaluate and predict draw",
    "is_keras_tensor": "a symbolic value of a flowlayers model is a flow.Blob: test isinstance(x, flow.Blob)",
    "get_source_inputs": "a model's inputs are model.inputs",
    "serialize_keras_object": "use the object's get_config(), or model.save for a whole model",
    "deserialize_keras_object": "use the class's from_config(config), or flow.models.load_model",
}
_RANDOM = ("random numbers inside a model step are not in flowlayers yet; draw them with numpy and pass them in the "
           "data (as the GAN test does), or use flow.layers.Dropout / GaussianNoise for noise in a layer")
_DATASETS = ("flowlayers downloads no datasets; load them with keras.datasets.{name}.load_data() (numpy arrays, "
             "which fit takes as they are) or flow.data.load_mnist / load_digits for the copies it ships")
_CONSTRAINTS = ("weight constraints are not in flowlayers; layers refuse *_constraint arguments by name (clip the "
                "weights in a callback with get_weights / set_weights)")
_SAVING = {"KerasFileEditor": "open the .keras file with zipfile and h5py, or load it with flow.models.load_model",
           **{n: _UTILS[n] for n in ("serialize_keras_object", "deserialize_keras_object")}}

_LOSSES = {
    "CTC": "CTC is not in flowlayers", "ctc": "CTC is not in flowlayers",
    **{n: "write a flow.losses.Loss whose call uses flow.ops (or pass compile a function of (y_true, y_pred))"
       for n in ("Circle", "circle", "Dice", "dice", "Tversky", "tversky", "CategoricalGeneralizedCrossEntropy",
                 "categorical_generalized_cross_entropy")},
}

_INITIALIZERS = {n: "STFT kernels are not in flowlayers; compute them with numpy and pass flow.initializers.Constant "
                    "of each value, or set_weights" for n in ("STFT", "STFTInitializer", "stft")}

TABLES = {"ops": _OPS, "layers": _LAYERS, "models": _MODELS, "callbacks": _CALLBACKS, "utils": _UTILS,
          "random": {n: _RANDOM for n in ("SeedGenerator beta binomial categorical dropout gamma normal randint "
                                         "shuffle truncated_normal uniform").split()},
          "datasets": {n: _DATASETS.format(name=n) for n in ("boston_housing california_housing cifar10 cifar100 "
                                                             "fashion_mnist imdb mnist reuters").split()},
          "constraints": {n: _CONSTRAINTS for n in ("Constraint MaxNorm MinMaxNorm NonNeg UnitNorm deserialize get "
                                                   "max_norm min_max_norm non_neg serialize unit_norm").split()},
          "saving": _SAVING, "optimizers": _OPTIMIZERS,
          "losses": _LOSSES, "activations": {}, "initializers": _INITIALIZERS}


# every public name of Keras 3.15's namespaces: one missing here without a hint above is named generically
KERAS_NAMES = {
    "ops": frozenset((
        "abs absolute adaptive_average_pool adaptive_max_pool add all allclose amax amin angle any append arange "
        "arccos arccosh arcsin arcsinh arctan arctan2 arctanh argmax argmin argpartition argsort array "
        "array_split associative_scan average average_pool bartlett batch_normalization binary_crossentropy "
        "bincount bitwise_and bitwise_invert bitwise_left_shift bitwise_not bitwise_or bitwise_right_shift "
        "bitwise_xor blackman broadcast_to cast categorical_crossentropy cbrt cdist ceil celu cholesky "
        "cholesky_inverse clip concatenate cond conj conjugate conv conv_transpose convert_to_numpy "
        "convert_to_tensor copy corrcoef correlate cos cosh count_nonzero cross ctc_decode ctc_loss cumprod "
        "cumsum custom_gradient deg2rad depth_to_space depthwise_conv det diag diagflat diagonal diff digitize "
        "divide divide_no_nan dot dot_product_attention dsplit dstack dtype eig eigh einsum elu empty empty_like "
        "equal erf erfc erfinv exp exp2 expand_dims expm1 extract_sequences eye fabs fft fft2 flip fliplr flipud "
        "floor floor_divide fmax fmin fmod fold fori_loop full full_like gcd gelu geomspace get_item glu greater "
        "greater_equal hamming hanning hard_shrink hard_sigmoid hard_silu hard_swish hard_tanh heaviside "
        "histogram hsplit hstack hypot i0 identity ifft2 imag image in_top_k inner inv irfft is_tensor isclose "
        "isfinite isin isinf isnan isneginf isposinf isreal istft jvp kaiser kron layer_normalization lcm ldexp "
        "leaky_relu left_shift less less_equal linalg linspace log log10 log1p log2 log_sigmoid log_softmax "
        "logaddexp logaddexp2 logdet logical_and logical_not logical_or logical_xor logspace logsumexp lstsq "
        "lu_factor map matmul matrix_rank max max_pool maximum mean median meshgrid min minimum mod moments "
        "moveaxis multi_hot multiply nan_to_num nanargmax nanargmin nancumprod nancumsum nanmax nanmean nanmedian "
        "nanmin nanpercentile nanprod nanquantile nanstd nansum nanvar ndim negative nextafter nn nonzero norm "
        "normalize not_equal numpy one_hot ones ones_like outer pad percentile pinv polar power prod psnr ptp qr "
        "quantile rad2deg ravel real rearrange reciprocal relu relu6 repeat reshape rfft right_shift "
        "rms_normalization roll rot90 round rsqrt saturate_cast scan scatter scatter_update searchsorted "
        "segment_max segment_min segment_prod segment_sum select selu separable_conv shape sigmoid sign signbit "
        "silu sin sinc sinh size slice slice_update slogdet soft_shrink softmax softplus softsign solve "
        "solve_triangular sort space_to_depth sparse_categorical_crossentropy sparse_plus sparse_sigmoid "
        "sparsemax split sqrt square squareplus squeeze stack std stft stop_gradient subtract sum svd swapaxes "
        "swish switch take take_along_axis tan tanh tanh_shrink tensordot threshold tile top_k trace transpose "
        "trapezoid tri tril triu true_divide trunc unfold unique unravel_index unstack vander var vdot vectorize "
        "vectorized_map view view_as_complex view_as_real vsplit vstack where while_loop zeros zeros_like"
    ).split()),
    "layers": frozenset((
        "Activation ActivityRegularization AdaptiveAveragePooling1D AdaptiveAveragePooling2D "
        "AdaptiveAveragePooling3D AdaptiveMaxPooling1D AdaptiveMaxPooling2D AdaptiveMaxPooling3D Add "
        "AdditiveAttention AlphaDropout Attention AugMix AutoContrast Average AveragePooling1D AveragePooling2D "
        "AveragePooling3D AvgPool1D AvgPool2D AvgPool3D BatchNormalization Bidirectional CategoryEncoding "
        "CenterCrop Concatenate ContrastLimitedAdaptiveHistogramEqualization Conv1D Conv1DTranspose Conv2D "
        "Conv2DTranspose Conv3D Conv3DTranspose ConvLSTM1D ConvLSTM2D ConvLSTM3D Convolution1D "
        "Convolution1DTranspose Convolution2D Convolution2DTranspose Convolution3D Convolution3DTranspose "
        "Cropping1D Cropping2D Cropping3D CutMix Dense DepthwiseConv1D DepthwiseConv2D Discretization Dot Dropout "
        "ELU EinsumDense Embedding Equalization Flatten FlaxLayer GRU GRUCell GaussianDropout GaussianNoise "
        "GlobalAveragePooling1D GlobalAveragePooling2D GlobalAveragePooling3D GlobalAvgPool1D GlobalAvgPool2D "
        "GlobalAvgPool3D GlobalMaxPool1D GlobalMaxPool2D GlobalMaxPool3D GlobalMaxPooling1D GlobalMaxPooling2D "
        "GlobalMaxPooling3D GroupNormalization GroupQueryAttention HashedCrossing Hashing Identity Input "
        "InputLayer InputSpec IntegerLookup JaxLayer LSTM LSTMCell Lambda Layer LayerNormalization LeakyReLU "
        "Masking MaxNumBoundingBoxes MaxPool1D MaxPool2D MaxPool3D MaxPooling1D MaxPooling2D MaxPooling3D Maximum "
        "MelSpectrogram Minimum MixUp MultiHeadAttention Multiply Normalization PReLU Permute Pipeline "
        "RMSNormalization RNN RandAugment RandomBrightness RandomColorDegeneration RandomColorJitter "
        "RandomContrast RandomCrop RandomElasticTransform RandomErasing RandomFlip RandomGaussianBlur "
        "RandomGrayscale RandomHue RandomInvert RandomPerspective RandomPosterization RandomRotation "
        "RandomSaturation RandomSharpness RandomShear RandomTranslation RandomZoom ReLU RepeatVector Rescaling "
        "Reshape Resizing ReversibleEmbedding STFTSpectrogram SeparableConv1D SeparableConv2D "
        "SeparableConvolution1D SeparableConvolution2D SimpleRNN SimpleRNNCell Softmax Solarization "
        "SpatialDropout1D SpatialDropout2D SpatialDropout3D SpectralNormalization StackedRNNCells StringLookup "
        "Subtract TFSMLayer TextVectorization TimeDistributed TorchModuleWrapper UnitNormalization UpSampling1D "
        "UpSampling2D UpSampling3D Wrapper ZeroPadding1D ZeroPadding2D ZeroPadding3D add average concatenate "
        "deserialize dot maximum minimum multiply serialize subtract"
    ).split()),
    "models": frozenset((
        "Model Sequential clone_model load_model model_from_json save_model"
    ).split()),
    "callbacks": frozenset((
        "BackupAndRestore CSVLogger Callback CallbackList EarlyStopping History LambdaCallback "
        "LearningRateScheduler ModelCheckpoint OrbaxCheckpoint ProgbarLogger ReduceLROnPlateau RemoteMonitor "
        "SwapEMAWeights TensorBoard TerminateOnNaN"
    ).split()),
    "utils": frozenset((
        "Config CustomObjectScope FeatureSpace Progbar PyDataset Sequence array_to_img audio_dataset_from_directory "
        "bounding_boxes clear_session custom_object_scope deserialize_keras_object disable_interactive_logging "
        "enable_interactive_logging get_custom_objects get_file get_registered_name get_registered_object "
        "get_source_inputs image_dataset_from_directory img_to_array is_interactive_logging_enabled "
        "is_keras_tensor legacy load_img model_to_dot normalize pack_x_y_sample_weight pad_sequences plot_model "
        "register_keras_serializable save_img serialize_keras_object set_random_seed split_dataset "
        "standardize_dtype text_dataset_from_directory timeseries_dataset_from_array to_categorical "
        "unpack_x_y_sample_weight"
    ).split()),
    "random": frozenset(TABLES["random"]),
    "datasets": frozenset(TABLES["datasets"]),
    "constraints": frozenset(TABLES["constraints"]),
    "saving": frozenset((
        "CustomObjectScope KerasFileEditor custom_object_scope deserialize_keras_object get_custom_objects "
        "get_registered_name get_registered_object load_model load_weights register_keras_serializable save_model "
        "save_weights serialize_keras_object"
    ).split()),
    "optimizers": frozenset((
        "Adadelta Adafactor Adagrad Adam AdamW Adamax Ftrl Lamb Lion LossScaleOptimizer MultiOptimizer Muon Nadam "
        "Optimizer OptimizerMap RMSprop SGD ScheduleFreeAdamW deserialize get legacy schedules serialize"
    ).split()),
    "losses": frozenset((
        "BinaryCrossentropy BinaryFocalCrossentropy CTC CategoricalCrossentropy CategoricalFocalCrossentropy "
        "CategoricalGeneralizedCrossEntropy CategoricalHinge Circle CosineSimilarity Dice Hinge Huber KLDivergence "
        "LogCosh Loss MeanAbsoluteError MeanAbsolutePercentageError MeanSquaredError MeanSquaredLogarithmicError "
        "Poisson SparseCategoricalCrossentropy SquaredHinge Tversky binary_crossentropy binary_focal_crossentropy "
        "categorical_crossentropy categorical_focal_crossentropy categorical_generalized_cross_entropy "
        "categorical_hinge circle cosine_similarity ctc deserialize dice get hinge huber kl_divergence log_cosh "
        "mean_absolute_error mean_absolute_percentage_error mean_squared_error mean_squared_logarithmic_error "
        "poisson serialize sparse_categorical_crossentropy squared_hinge tversky"
    ).split()),
    "activations": frozenset((
        "celu deserialize elu exponential gelu get glu hard_shrink hard_sigmoid hard_silu hard_swish hard_tanh "
        "leaky_relu linear log_sigmoid log_softmax mish relu relu6 selu serialize sigmoid silu soft_shrink softmax "
        "softplus softsign sparse_plus sparse_sigmoid sparsemax squareplus swish tanh tanh_shrink threshold"
    ).split()),
    "initializers": frozenset((
        "Constant GlorotNormal GlorotUniform HeNormal HeUniform Identity IdentityInitializer Initializer LecunNormal "
        "LecunUniform Ones Orthogonal OrthogonalInitializer RandomNormal RandomUniform STFT STFTInitializer "
        "TruncatedNormal VarianceScaling Zeros constant deserialize get glorot_normal glorot_uniform he_normal "
        "he_uniform identity lecun_normal lecun_uniform ones orthogonal random_normal random_uniform serialize stft "
        "truncated_normal variance_scaling zeros"
    ).split()),
}


def refuse(namespace, name, error, present=()):
    """``error`` naming Keras' ``name`` that ``flow.<namespace>`` lacks and what to use instead; an AttributeError
    for a name that is not Keras' (and for dunders, which Python's machinery probes).  ``present``: the
    namespace's own names, the nearest of which are offered where no hint is written down."""
    hint = TABLES[namespace].get(name)
    if hint is None and name in KERAS_NAMES[namespace]:
        near = difflib.get_close_matches(name, [n for n in present if not n.startswith("_")], n=3)
        hint = (f"the nearest names here are {', '.join(near)}" if near else "nothing here does the same") + \
            "; docs/from-keras.md lists what flowlayers has"
    if hint is None:
        raise AttributeError(f"module 'flowlayers.{namespace}' has no attribute {name!r}")
    raise error(f"flow.{namespace}.{name}: Keras 3's keras.{namespace}.{name} is not in flowlayers; {hint}")
