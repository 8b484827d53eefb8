"""flowlayers.data: IDX reading, MNIST loading from idx / npz, sklearn digits."""
import gzip
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import flowlayers as flow
from flowlayers.data import load_digits, load_mnist, load_mnist_arrays, read_idx, write_mnist_npz
from flowlayers.errors import InputError

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
IMAGES_GZ = SHARED_DATA / "t10k-images-idx3-ubyte.gz"
LABELS_GZ = SHARED_DATA / "t10k-labels-idx1-ubyte.gz"
ONLY_TEST_SET = "test set doubles as the training set"


@pytest.fixture(scope="module")
def mnist_dir(shared_data):
    """conftest's: skipped on a developer's machine without the files, failed in CI."""
    return shared_data


@pytest.fixture(scope="module")
def gz_arrays(mnist_dir):
    return read_idx(IMAGES_GZ), read_idx(LABELS_GZ)


def _gunzip(src, dst):
    with gzip.open(src, "rb") as f_in, open(dst, "wb") as f_out:
        shutil.copyfileobj(f_in, f_out)
    return dst


def test_read_idx_gz_and_plain_agree(gz_arrays, tmp_path):
    images, labels = gz_arrays
    assert images.shape == (10000, 28, 28) and images.dtype == np.uint8
    assert labels.shape == (10000,) and labels.min() == 0 and labels.max() == 9
    # plain copies, named like the gz files so detection by name would get it wrong
    plain_images = read_idx(_gunzip(IMAGES_GZ, tmp_path / "images.gz"))
    plain_labels = read_idx(_gunzip(LABELS_GZ, tmp_path / "labels"))
    np.testing.assert_array_equal(plain_images, images)
    np.testing.assert_array_equal(plain_labels, labels)


@pytest.mark.parametrize("code, dtype", [(0x09, np.int8), (0x0B, np.int16), (0x0C, np.int32),
                                         (0x0D, np.float32), (0x0E, np.float64)])
def test_read_idx_other_dtypes(tmp_path, code, dtype):
    data = (np.arange(24).reshape(2, 3, 4) - 5).astype(dtype)
    path = tmp_path / "x.idx"
    path.write_bytes(bytes([0, 0, code, 3]) + np.array(data.shape, ">u4").tobytes()
                     + data.astype(data.dtype.newbyteorder(">")).tobytes())
    out = read_idx(path)
    assert out.dtype == dtype and out.dtype.isnative
    np.testing.assert_array_equal(out, data)


def test_read_idx_truncated_plain_names_file_and_sizes(tmp_path):
    path = tmp_path / "short-idx1-ubyte"
    path.write_bytes(bytes([0, 0, 0x08, 1]) + np.array([10], ">u4").tobytes() + bytes(7))
    with pytest.raises(InputError, match="short-idx1-ubyte") as info:
        read_idx(path)
    assert "expected 18 bytes" in str(info.value) and "received 15 bytes" in str(info.value)


def test_read_idx_truncated_gz_names_file(mnist_dir, tmp_path):
    path = tmp_path / "cut-t10k-labels-idx1-ubyte.gz"
    path.write_bytes(LABELS_GZ.read_bytes()[:2000])
    with pytest.raises(InputError, match="cut-t10k-labels-idx1-ubyte.gz.*truncated or corrupt"):
        read_idx(path)


def test_read_idx_bad_magic(tmp_path):
    path = tmp_path / "not-idx"
    path.write_bytes(b"hello world")
    with pytest.raises(InputError, match="not-idx.*not an IDX file.*received 68 65 6c 6c"):
        read_idx(path)


def _check_batches(batches, n, batch_size):
    (train_images, train_labels), (test_images, test_labels) = batches
    for images, labels in ((train_images, train_labels), (test_images, test_labels)):
        assert images.shape == (n // batch_size, batch_size, 1, 28, 28) and images.dtype == np.float32
        assert labels.shape == (n // batch_size, batch_size) and labels.dtype == np.int32
        assert images.min() == 0.0 and images.max() == 1.0
        assert labels.min() >= 0 and labels.max() <= 9
    first_images, first_labels = next(zip(train_images, train_labels))
    assert first_images.shape == (batch_size, 1, 28, 28) and first_labels.shape == (batch_size,)


def test_load_mnist_from_idx_and_npz_agree(mnist_dir, gz_arrays, tmp_path):
    with pytest.warns(UserWarning, match=ONLY_TEST_SET):
        from_idx = load_mnist(300, 300, data_dir=mnist_dir)  # 10000 // 300 = 33 batches, remainder dropped
    _check_batches(from_idx, 10000, 300)
    images, labels = gz_arrays
    np.testing.assert_array_equal(from_idx[1][0][0, 0, 0], images[0] / np.float32(255))
    np.testing.assert_array_equal(from_idx[1][1].ravel(), labels[:9900])

    npz_dir = tmp_path / "keras"
    npz_dir.mkdir()
    with pytest.warns(UserWarning, match=ONLY_TEST_SET):
        write_mnist_npz(npz_dir / "mnist.npz", mnist_dir)
    with np.load(npz_dir / "mnist.npz") as f:
        assert sorted(f.files) == ["x_test", "x_train", "y_test", "y_train"]
        assert f["x_train"].shape == (10000, 28, 28) and f["x_train"].dtype == np.uint8
    from_npz = load_mnist(300, 300, data_dir=npz_dir)
    # a full mnist.npz next to a test-only idx pair wins, so no warning
    for src in (IMAGES_GZ, LABELS_GZ):
        os.symlink(src, npz_dir / src.name)
    assert load_mnist(300, 300, data_dir=npz_dir)[0][0].shape == (33, 300, 1, 28, 28)
    for idx_set, npz_set in zip(from_idx, from_npz):
        for a, b in zip(idx_set, npz_set):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


def test_load_mnist_sizes_and_keras_home(mnist_dir, tmp_path, monkeypatch):
    cache = tmp_path / "khome" / "datasets"
    cache.mkdir(parents=True)
    for src in (IMAGES_GZ, LABELS_GZ):
        os.symlink(src, cache / src.name)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "khome"))
    with pytest.warns(UserWarning, match=ONLY_TEST_SET):
        (train_images, train_labels), (test_images, _) = load_mnist(64, train_size=1000, test_size=200)
    assert train_images.shape == (15, 64, 1, 28, 28) and train_labels.shape == (15, 64)
    assert test_images.shape == (2, 100, 1, 28, 28)         # OneFlow's test_batch_size default: 100
    with pytest.raises(InputError, match="train_size must be an int in 1..10000, received 0"), \
            pytest.warns(UserWarning, match=ONLY_TEST_SET):
        load_mnist(64, data_dir=mnist_dir, train_size=0)


def test_load_mnist_arrays_test_only_copies(mnist_dir):
    with pytest.warns(UserWarning, match=ONLY_TEST_SET):
        (x_train, y_train), (x_test, y_test) = load_mnist_arrays(mnist_dir)
    assert x_train.shape == x_test.shape == (10000, 28, 28) and y_train.dtype == np.int32
    np.testing.assert_array_equal(x_train, x_test)
    assert not np.shares_memory(x_train, x_test)


def test_load_mnist_missing_names_directory(tmp_path):
    empty = tmp_path / "nothing-here"
    empty.mkdir()
    with pytest.raises(InputError) as info:
        load_mnist(100, data_dir=empty)
    message = str(info.value)
    for part in (str(empty), "t10k-images-idx3-ubyte", "mnist.npz", "data_dir"):
        assert part in message
    with pytest.raises(InputError, match="does not exist"):
        load_mnist(100, data_dir=tmp_path / "absent")


def test_load_mnist_truncated_idx_names_file(mnist_dir, tmp_path):
    shutil.copy(IMAGES_GZ, tmp_path / IMAGES_GZ.name)
    (tmp_path / LABELS_GZ.name).write_bytes(LABELS_GZ.read_bytes()[:100])
    with pytest.raises(InputError, match=LABELS_GZ.name):
        load_mnist(100, data_dir=tmp_path)


@pytest.mark.parametrize("image_format, image_shape", [("NCHW", (1, 8, 8)), ("NHWC", (8, 8, 1))])
def test_load_digits(image_format, image_shape):
    (x_train, y_train), (x_test, y_test) = load_digits(image_format=image_format)
    assert x_train.shape == (1438,) + image_shape and x_test.shape == (359,) + image_shape
    assert x_train.dtype == x_test.dtype == np.float32 and y_train.dtype == y_test.dtype == np.int32
    assert 0.0 <= x_train.min() and x_train.max() == 1.0
    assert set(np.unique(y_train)) == set(range(10))

    (x_again, y_again), _ = load_digits(image_format=image_format)
    np.testing.assert_array_equal(x_again, x_train)
    np.testing.assert_array_equal(y_again, y_train)
    (_, y_other), _ = load_digits(image_format=image_format, seed=1)
    assert not np.array_equal(y_other, y_train)

    (xb, yb), (xtb, ytb) = load_digits(batch_size=32, image_format=image_format)
    assert xb.shape == (44, 32) + image_shape and yb.shape == (44, 32)
    assert xtb.shape == (11, 32) + image_shape and ytb.shape == (11, 32)
    np.testing.assert_array_equal(xb.reshape((-1,) + image_shape), x_train[:44 * 32])


def test_load_digits_formats_agree():
    (nchw, _), _ = load_digits(image_format="NCHW")
    (nhwc, _), _ = load_digits(image_format="NHWC")
    np.testing.assert_array_equal(nchw.transpose(0, 2, 3, 1), nhwc)


def test_load_digits_bad_arguments():
    with pytest.raises(InputError, match="image_format must be one of .*received 'NWHC'"):
        load_digits(image_format="NWHC")
    with pytest.raises(InputError, match="test_fraction must be a number in \\(0, 1\\), received 1.5"):
        load_digits(test_fraction=1.5)
    with pytest.raises(InputError, match="batch_size=5000 is larger than the 1438 samples"):
        load_digits(batch_size=5000)


# OneFlow 0.x's signature: load_mnist(train_batch_size=100, test_batch_size=100, data_format="NCHW", url=None,
# hash_check=False, out_dir=".")
def _npz_dir(tmp_path, mnist_dir):
    folder = tmp_path / "npz"
    folder.mkdir()
    with pytest.warns(UserWarning, match=ONLY_TEST_SET):
        write_mnist_npz(folder / "mnist.npz", mnist_dir)
    return folder


def test_load_mnist_oneflow_signature_and_formats(mnist_dir, tmp_path, monkeypatch, gz_arrays):
    folder = _npz_dir(tmp_path, mnist_dir)
    monkeypatch.chdir(folder)                   # out_dir="." by default: the current directory
    (train_images, train_labels), (test_images, test_labels) = load_mnist(200, 500)
    assert train_images.shape == (50, 200, 1, 28, 28) and test_images.shape == (20, 500, 1, 28, 28)
    assert train_labels.shape == (50, 200) and test_labels.dtype == np.int32
    (nhwc, _), _ = load_mnist(100, 100, "NHWC")
    assert nhwc.shape == (100, 100, 28, 28, 1)
    images, labels = gz_arrays
    np.testing.assert_array_equal(nhwc[3, 7, :, :, 0], images[307] / np.float32(255))
    np.testing.assert_array_equal(train_images[1, 7, 0], images[207] / np.float32(255))
    assert load_mnist(out_dir=folder)[1][1].shape == (100, 100)


def test_load_mnist_hash_check_and_url(mnist_dir, tmp_path):
    import hashlib

    folder = _npz_dir(tmp_path, mnist_dir)
    digest = hashlib.sha256((folder / "mnist.npz").read_bytes()).hexdigest()
    assert load_mnist(out_dir=folder, hash_check=digest)[0][0].shape == (100, 100, 1, 28, 28)
    with pytest.raises(InputError, match=f"expected sha256 {'0' * 64}, received {digest}; remove the file"):
        load_mnist(out_dir=folder, hash_check="0" * 64)
    # nothing here: url= is fetched to out_dir/mnist.npz (a file: URL stands in for the network)
    target = tmp_path / "downloads"
    got = load_mnist(100, 100, url=(folder / "mnist.npz").as_uri(), hash_check=digest, out_dir=target)
    assert (target / "mnist.npz").read_bytes() == (folder / "mnist.npz").read_bytes()
    assert got[0][0].shape == (100, 100, 1, 28, 28)
    with pytest.raises(InputError, match="could not download url='file:///nowhere/mnist.npz'"):
        load_mnist(url="file:///nowhere/mnist.npz", out_dir=tmp_path / "empty")
    assert not (tmp_path / "empty" / "mnist.npz").exists() and not (tmp_path / "empty" / "mnist.npz.partial").exists()


def test_load_mnist_says_where_it_looked_without_url(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "khome"))
    with pytest.raises(InputError) as info:
        load_mnist(out_dir=tmp_path)
    for part in (str(tmp_path), str(tmp_path / "khome" / "datasets"), "does not exist", "contains none of them",
                 "url="):
        assert part in str(info.value)


@pytest.mark.parametrize("kwargs, message", [
    ({"train_batch_size": 0}, "train_batch_size must be a positive int, received 0"),
    ({"test_batch_size": "100"}, "test_batch_size must be a positive int, received '100'"),
    ({"data_format": "NWHC"}, "data_format expected 'NCHW' or 'NHWC', received 'NWHC'"),
    ({"hash_check": True}, r"hash_check expected False or the sha256 of mnist.npz \(64 hex digits\), received True"),
    ({"url": 5}, "url expected None or a URL string, received 5"),
    ({"batch_size": 100}, r"the keywords \['batch_size'\]"),
])
def test_load_mnist_wrong_arguments_are_named(kwargs, message):
    with pytest.raises(InputError, match=message):
        load_mnist(**kwargs)


def test_python_text_tokenizer_and_next_token_windows():
    text = flow.data.load_python_text(["textwrap"], max_chars=5000)
    assert len(text) == 5000 and "def " in text
    tokenizer = flow.data.CharTokenizer(text)
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text and ids.max() == tokenizer.vocab_size - 1
    x, y = flow.data.next_token_windows(ids, 16, stride=8)
    assert x.shape == y.shape == (623, 16) and x.dtype == np.int32
    np.testing.assert_array_equal(x[1, :8], x[0, 8:])               # windows every 8 ids
    np.testing.assert_array_equal(y[:, :-1], x[:, 1:])              # targets: the next id
    with pytest.raises(flow.InputError, match=r"module 'no_such_module' expected as a source file"):
        flow.data.load_python_text(["no_such_module"])
    with pytest.raises(flow.InputError, match="expected characters of its vocabulary, received \\['\u00e9'\\]"):
        tokenizer.encode("\u00e9")
    with pytest.raises(flow.InputError, match=r"expected more than seq_len=16 ids, received 3"):
        flow.data.next_token_windows(ids[:3], 16)
