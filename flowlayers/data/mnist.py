"""Load MNIST from local files (downloading only when given a URL), batched like OneFlow's loader.

Looks in ``data_dir``, or ``out_dir`` and the Keras cache (``$KERAS_HOME/datasets`` or
``~/.keras/datasets``), for the four IDX files (plain or ``.gz``) or Keras' ``mnist.npz``::

    >>> from flowlayers.data import load_mnist
    >>> (train_images, train_labels), (test_images, test_labels) = load_mnist(
    ...     100, 100, data_dir="/work/shared/data")                 # doctest: +SKIP
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


def _find_arrays(data_dir, places=None):
    """The arrays from ``data_dir`` (default: the Keras cache), or from the first of ``places`` that has them."""
    places = [os.fspath(p) for p in places] if places else \
        [os.fspath(data_dir) if data_dir is not None else default_data_dir()]
    for place in places:
        found = _load_idx(place) if os.path.isdir(place) else None
        if (found is None or found[0] is found[1]) and os.path.isdir(place):
            found = _load_npz(place) or found  # a full mnist.npz beats a test-only idx pair
        if found is not None:
            return found
    looked_for = ", ".join(f"{n}[.gz]" for n in (TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS))
    where = "; ".join(f"{p!r} ({'contains none of them' if os.path.isdir(p) else 'does not exist'})"
                      for p in places)
    raise InputError(
        f"load_mnist: no MNIST data in {where}: expected the IDX files {looked_for} (at least the two t10k ones) "
        f"or {NPZ_NAME}. Pass data_dir= (or out_dir=) pointing at a directory with these files, or put "
        f"{NPZ_NAME} in the Keras cache {default_data_dir()!r}; flowlayers downloads only when given url="
    )


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


def load_mnist(train_batch_size=100, test_batch_size=100, data_format="NCHW", url=None, hash_check=False,
               out_dir=".", *args, data_dir=None, train_size=None, test_size=None, **kwargs):
    """OneFlow 0.x's loader: ``((train_images, train_labels), (test_images, test_labels))`` as batches.

    Images are float32 in [0, 1] shaped ``(num_batches, batch_size, 1, 28, 28)`` (``data_format="NHWC"``:
    ``(..., 28, 28, 1)``), labels int32 ``(num_batches, batch_size)``; a last partial batch is dropped.

    Where: ``data_dir`` alone when given; else ``out_dir`` (default: the current directory), then the Keras
    cache.  The four IDX files (plain or ``.gz``) or Keras' ``mnist.npz`` are read; with only the t10k IDX files
    the test set doubles as the training set and a warning says so.  Nothing is downloaded unless ``url`` is
    given and no data was found: then ``url`` is fetched to ``out_dir/mnist.npz``.  ``hash_check``: False, or
    the sha256 (hex) that ``mnist.npz`` must have.  ``train_size`` / ``test_size`` keep the first samples only.

        >>> (ti, tl), (vi, vl) = load_mnist(100, 100, out_dir="/work/shared/data")    # doctest: +SKIP
        >>> ti.shape, ti.dtype, tl.shape, tl.dtype                                      # doctest: +SKIP
        ((100, 100, 1, 28, 28), dtype('float32'), (100, 100), dtype('int32'))
    """
    if args or kwargs:
        raise InputError(f"load_mnist: expected at most 6 positional arguments (train_batch_size, test_batch_size, "
                         f"data_format, url, hash_check, out_dir) and the keywords data_dir, train_size, test_size, "
                         f"received {len(args)} more positional and the keywords {sorted(kwargs)}")
    sizes = [_positive("train_batch_size", train_batch_size), _positive("test_batch_size", test_batch_size)]
    if data_format not in ("NCHW", "NHWC"):
        raise InputError(f"load_mnist: data_format expected 'NCHW' or 'NHWC', received {data_format!r}")
    if hash_check not in (False, None) and not (isinstance(hash_check, str) and len(hash_check) == 64
                                                and all(c in "0123456789abcdefABCDEF" for c in hash_check)):
        raise InputError(f"load_mnist: hash_check expected False or the sha256 of mnist.npz (64 hex digits), "
                         f"received {hash_check!r}")
    if url is not None and not isinstance(url, str):
        raise InputError(f"load_mnist: url expected None or a URL string, received {url!r}")
    places = [data_dir] if data_dir is not None else [out_dir, default_data_dir()]
    try:
        found = _find_arrays(data_dir, places)
    except InputError:
        if url is None or data_dir is not None:
            raise
        _download(url, os.path.join(os.fspath(out_dir), NPZ_NAME))
        found = _find_arrays(out_dir, [out_dir])
    if hash_check:
        _check_hash(places, hash_check)
    _warn_if_test_only(found, data_dir if data_dir is not None else out_dir, "load_mnist")
    (x_train, y_train), (x_test, y_test) = found
    out = []
    for name, size, batch_size, x, y in (("train_size", train_size, sizes[0], x_train, y_train),
                                         ("test_size", test_size, sizes[1], x_test, y_test)):
        n = _check_size(name, size, len(x))
        images = x[:n].astype(np.float32) / np.float32(255.0)
        images = images[:, None, :, :] if data_format == "NCHW" else images[:, :, :, None]
        out.append(batch(images, y[:n].astype(np.int32), batch_size))
    return tuple(out)


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InputError(f"load_mnist: {name} must be a positive int, received {value!r}")
    return int(value)


def _download(url, path):
    """``url`` to ``path``, written whole or not at all (asked for by ``url=``)."""
    import urllib.request

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    partial = path + ".partial"
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(partial, "wb") as f:
            while chunk := response.read(1 << 20):
                f.write(chunk)
        os.replace(partial, path)
    except (OSError, ValueError) as e:
        if os.path.exists(partial):
            os.remove(partial)
        raise InputError(f"load_mnist: could not download url={url!r} to {path!r} ({type(e).__name__}: {e}); "
                         f"check the URL, or put {NPZ_NAME} there yourself") from None


def _check_hash(places, expected):
    import hashlib

    path = next((os.path.join(p, NPZ_NAME) for p in places if os.path.isfile(os.path.join(os.fspath(p), NPZ_NAME))),
                None)
    if path is None:
        raise InputError(f"load_mnist: hash_check applies to {NPZ_NAME}, which is not in {places}; the data found "
                         f"are IDX files: pass hash_check=False for them")
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if digest != expected.lower():
        raise InputError(f"load_mnist: {path!r} expected sha256 {expected.lower()}, received {digest}; remove the "
                         f"file and download it again")


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
