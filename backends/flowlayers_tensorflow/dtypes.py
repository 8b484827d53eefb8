"""flowlayers dtypes <-> TF dtypes."""
import tensorflow as tf


def tf_dtype(dtype):
    return tf.as_dtype(dtype.name if dtype.name != "bool" else "bool")
