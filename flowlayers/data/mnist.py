"""Load MNIST from local files only (never downloads), batched like OneFlow's loader.

Looks in ``data_dir`` (default: the Keras cache ``$KERAS_HOME/datasets`` or
``~/.keras/datasets``) for the four IDX files (plain or ``.gz``) or Keras'
``mnist.npz``::

    >>> from flowlayers.data import load_mnist
    >>> (train_images, train_labels), (test_images, test_labels) = load_mnist(
    ...     100, data_dir="/work/shared/data")                      # doctest: +SKIP
    >>> test_images.shape, test_labels.shape                        # doctest: +SKIP
    ((100, 100, 1, 28, 28), (100, 100))
    >>> for images, labels in zip(train_images, train_labels):      # doctest: +SKIP
    ...     pass  # one (100, 1, 28, 28) float32 batch and its (100,) int32 labels
"""
import os
import warnings

import numpy as np

from ..errors import InputError
from .idx import read_idx

TRAIN_IMAGES = "train-images-idx3-ubyte"
TRAIN_LABELS = "train-labels-idx1-ubyte"
TEST_IMAGES = "t10k-images-idx3-ubyte"
TEST_LABELS = "t10k-labels-idx1-ubyte"
NPZ_NAME = "mnist.npz"


def default_data_dir():
    """The Keras dataset cache: ``$KERAS_HOME/datasets`` if set, else ``~/.keras/datasets``."""
    keras_home = os.environ.get("KERAS_HOME")
    base = keras_home if keras_home else os.path.join(os.path.expanduser("~"), ".keras")
    return os.path.join(base, "datasets")


def _find(data_dir, name):
    """Path of ``name`` or ``name.gz`` in ``data_dir``, or None."""
    for candidate in (name, name + ".gz"):
        path = os.path.join(data_dir, candidate)
        if os.path.isfile(path):
            return path
    return None


def _check_pair(images, labels, images_path, labels_path):
    if images.ndim != 3 or images.shape[1:] != (28, 28):
        raise InputError(
            f"load_mnist: {images_path!r} holds images of shape {images.shape}, "
            f"expected (n, 28, 28)"
        )
    if labels.shape != (images.shape[0],):
        raise InputError(
            f"load_mnist: {labels_path!r} holds labels of shape {labels.shape}, expected "
            f"({images.shape[0]},) to match the {images.shape[0]} images in {images_path!r}"
        )
    return images.astype(np.uint8, copy=False), labels.astype(np.int32)


def _load_idx(data_dir):
    test_images, test_labels = _find(data_dir, TEST_IMAGES), _find(data_dir, TEST_LABELS)
    if test_images is None or test_labels is None:
        return None
    test = _check_pair(read_idx(test_images), read_idx(test_labels), test_images, test_labels)
    train_images, train_labels = _find(data_dir, TRAIN_IMAGES), _find(data_dir, TRAIN_LABELS)
    if train_images is None or train_labels is None:
        return test, test
    train = _check_pair(read_idx(train_images), read_idx(train_labels), train_images, train_labels)
    return train, test


def _warn_if_test_only(found, data_dir, caller):
    """Warn (pointing at the user's call) when the test set doubles as the training set."""
    if found[0] is not found[1]:
        return False
    data_dir = os.fspath(data_dir) if data_dir is not None else default_data_dir()
    warnings.warn(
        f"{caller}: {data_dir!r} has only the MNIST test set ({TEST_IMAGES}, {TEST_LABELS}); "
        f"no {TRAIN_IMAGES}[.gz] / {TRAIN_LABELS}[.gz] found, so the test set doubles as "
        f"the training set",
        stacklevel=3,
    )
    return True


def _load_npz(data_dir):
    path = os.path.join(data_dir, NPZ_NAME)
    if not os.path.isfile(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            missing = [k for k in ("x_train", "y_train", "x_test", "y_test") if k not in f.files]
            if missing:
                raise InputError(
                    f"load_mnist: {path!r} lacks keys {missing}: expected x_train, y_train, x_test, "
                    f"y_test (Keras format), received {sorted(f.files)}"
                )
            arrays = {k: f[k] for k in ("x_train", "y_train", "x_test", "y_test")}
    except InputError:
        raise
    except Exception as e:  # zipfile.BadZipFile, ValueError, EOFError...
        raise InputError(
            f"load_mnist: {path!r} is not a readable .npz file ({type(e).__name__}: {e}); "
            f"expected Keras' mnist.npz"
        ) from None
    train = _check_pair(arrays["x_train"], arrays["y_train"], path, path)
    test = _check_pair(arrays["x_test"], arrays["y_test"], path, path)
    return train, test


def load_mnist_arrays(data_dir=None):
    """Return unbatched ``((x_train, y_train), (x_test, y_test))``.

    Images are uint8 ``(n, 28, 28)``, labels int32 ``(n,)``.  All four IDX files
    are preferred, then ``mnist.npz``.  If ``data_dir`` holds only the t10k IDX files
    the test set doubles as the training set and a warning says so.  Nothing is
    ever downloaded; when no data is found an ``InputError`` says where it looked.

        >>> (x_train, y_train), (x_test, y_test) = load_mnist_arrays("/work/shared/data")  # doctest: +SKIP
    """
    found = _find_arrays(data_dir)
    if _warn_if_test_only(found, data_dir, "load_mnist_arrays"):
        (x, y), test = found
        found = ((x.copy(), y.copy()), test)  # so that editing one set leaves the other alone
    return found


def _find_arrays(data_dir):
    data_dir = os.fspath(data_dir) if data_dir is not None else default_data_dir()
    found = _load_idx(data_dir) if os.path.isdir(data_dir) else None
    if (found is None or found[0] is found[1]) and os.path.isdir(data_dir):
        found = _load_npz(data_dir) or found  # a full mnist.npz beats a test-only idx pair
    if found is None:
        looked_for = ", ".join(
            f"{n}[.gz]" for n in (TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS)
        )
        state = "contains none of them" if os.path.isdir(data_dir) else "does not exist"
        raise InputError(
            f"load_mnist: no MNIST data in {data_dir!r}: expected the IDX files {looked_for} "
            f"(at least the two t10k ones) or {NPZ_NAME}, but the directory {state}. "
            f"Pass data_dir= pointing at a directory with these files, or put {NPZ_NAME} in the "
            f"Keras cache {default_data_dir()!r}; flowlayers never downloads data"
        )
    return found


def _check_size(name, size, available):
    if size is None:
        return available
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or not 0 < size <= available:
        raise InputError(f"load_mnist: {name} must be an int in 1..{available}, received {size!r}")
    return int(size)


def batch(images, labels, batch_size, caller="load_mnist"):
    """Split ``(n, ...)`` arrays into ``(n // batch_size, batch_size, ...)``, dropping the remainder."""
    num_batches = len(images) // batch_size
    if num_batches == 0:
        raise InputError(
            f"{caller}: batch_size={batch_size} is larger than the {len(images)} samples available; "
            f"expected batch_size <= {len(images)}"
        )
    n = num_batches * batch_size
    return (images[:n].reshape((num_batches, batch_size) + images.shape[1:]),
            labels[:n].reshape(num_batches, batch_size))


def load_mnist(batch_size, data_dir=None, train_size=None, test_size=None):
    """Return ``((train_images, train_labels), (test_images, test_labels))`` as batches.

    Images are float32 in [0, 1] shaped ``(num_batches, batch_size, 1, 28, 28)``,
    labels int32 ``(num_batches, batch_size)``; a last partial batch is dropped.
    ``train_size`` / ``test_size`` keep only the first samples of each set.  If
    ``data_dir`` holds only the t10k IDX files (as our shared data dir does), the
    test set doubles as the training set and ``warnings.warn`` says so.

        >>> (ti, tl), (vi, vl) = load_mnist(100, data_dir="/work/shared/data")  # doctest: +SKIP
        >>> ti.shape, ti.dtype, tl.shape, tl.dtype                              # doctest: +SKIP
        ((100, 100, 1, 28, 28), dtype('float32'), (100, 100), dtype('int32'))
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise InputError(f"load_mnist: batch_size must be a positive int, received {batch_size!r}")
    batch_size = int(batch_size)
    found = _find_arrays(data_dir)
    _warn_if_test_only(found, data_dir, "load_mnist")
    (x_train, y_train), (x_test, y_test) = found
    out = []
    for name, size, x, y in (("train_size", train_size, x_train, y_train),
                             ("test_size", test_size, x_test, y_test)):
        n = _check_size(name, size, len(x))
        images = (x[:n].astype(np.float32) / np.float32(255.0))[:, None, :, :]
        out.append(batch(images, y[:n].astype(np.int32), batch_size))
    return tuple(out)


def write_mnist_npz(path, data_dir):
    """Convert the IDX files in ``data_dir`` into a Keras-format ``mnist.npz`` at ``path``.

    Keys ``x_train, y_train, x_test, y_test``; images uint8 ``(n, 28, 28)``, labels
    uint8.  Returns ``path``.

        >>> write_mnist_npz("/tmp/mnist.npz", "/work/shared/data")  # doctest: +SKIP
        '/tmp/mnist.npz'
    """
    data_dir = os.fspath(data_dir)
    found = _load_idx(data_dir) if os.path.isdir(data_dir) else None
    if found is None:
        raise InputError(
            f"write_mnist_npz: no MNIST IDX files in {data_dir!r}: expected at least "
            f"{TEST_IMAGES}[.gz] and {TEST_LABELS}[.gz]"
        )
    _warn_if_test_only(found, data_dir, "write_mnist_npz")
    (x_train, y_train), (x_test, y_test) = found
    path = os.fspath(path)
    with open(path, "wb") as f:  # a file object keeps np.savez from appending ".npz"
        np.savez_compressed(f, x_train=x_train, y_train=y_train.astype(np.uint8),
                            x_test=x_test, y_test=y_test.astype(np.uint8))
    return path
