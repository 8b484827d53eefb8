"""scikit-learn's bundled 8x8 handwritten digits: real data, tiny, no download.

1797 images shipped inside the installed scikit-learn package, split into a
train and a test set by a deterministic shuffle::

    >>> from flowlayers.data import load_digits
    >>> (x_train, y_train), (x_test, y_test) = load_digits()
    >>> x_train.shape, x_train.dtype, y_train.dtype
    ((1438, 1, 8, 8), dtype('float32'), dtype('int32'))
"""
import numpy as np

from ..errors import InputError
from .mnist import batch

_FORMATS = ("NCHW", "NHWC")


def load_digits(batch_size=None, test_fraction=0.2, seed=0, image_format="NCHW"):
    """Return ``((x_train, y_train), (x_test, y_test))`` from ``sklearn.datasets.load_digits``.

    Images are float32 in [0, 1] (pixel / 16) shaped ``(n, 1, 8, 8)`` for
    ``"NCHW"`` or ``(n, 8, 8, 1)`` for ``"NHWC"``; labels int32.  The last
    ``round(1797 * test_fraction)`` samples of a ``seed``-ed shuffle form the
    test set.  With ``batch_size``, arrays are batched as by ``load_mnist``
    (``(num_batches, batch_size, ...)``, remainder dropped).

        >>> (xb, yb), _ = load_digits(batch_size=32, image_format="NHWC")
        >>> xb.shape, yb.shape
        ((44, 32, 8, 8, 1), (44, 32))
    """
    if image_format not in _FORMATS:
        raise InputError(f"load_digits: image_format must be one of {_FORMATS}, received {image_format!r}")
    if isinstance(test_fraction, bool) or not isinstance(test_fraction, (int, float)) \
            or not 0 < test_fraction < 1:
        raise InputError(f"load_digits: test_fraction must be a number in (0, 1), received {test_fraction!r}")
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer))
                                   or batch_size < 1):
        raise InputError(f"load_digits: batch_size must be a positive int or None, received {batch_size!r}")
    try:
        from sklearn.datasets import load_digits as sk_load_digits
    except ImportError:
        raise InputError(
            "load_digits: scikit-learn is required (its bundled digits data set is the source), "
            "but it is not installed; run `pip install scikit-learn`"
        ) from None

    bunch = sk_load_digits()
    images = (bunch.images.astype(np.float32) / np.float32(16.0))[:, None, :, :]
    if image_format == "NHWC":
        images = np.ascontiguousarray(images.transpose(0, 2, 3, 1))
    labels = bunch.target.astype(np.int32)

    order = np.random.default_rng(seed).permutation(len(images))
    num_test = int(round(len(images) * test_fraction))
    if not 0 < num_test < len(images):
        raise InputError(
            f"load_digits: test_fraction={test_fraction} leaves {num_test} of {len(images)} samples "
            f"for the test set; expected at least one sample in each set"
        )
    train_idx, test_idx = order[:-num_test], order[-num_test:]
    train = (images[train_idx], labels[train_idx])
    test = (images[test_idx], labels[test_idx])
    if batch_size is None:
        return train, test
    return (batch(*train, int(batch_size), caller="load_digits"),
            batch(*test, int(batch_size), caller="load_digits"))
