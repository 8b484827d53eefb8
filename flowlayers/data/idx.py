"""Read arrays stored in the IDX format used by MNIST.

An IDX file is ``00 00 <dtype code> <ndim>`` followed by ``ndim`` big-endian
uint32 dims and the raw big-endian data.  Gzip-compressed files are detected
by their magic bytes (``1f 8b``), not by their name::

    >>> from flowlayers.data import read_idx
    >>> images = read_idx("t10k-images-idx3-ubyte.gz")  # doctest: +SKIP
    >>> images.shape, images.dtype                       # doctest: +SKIP
    ((10000, 28, 28), dtype('uint8'))
"""
import gzip
import os
import zlib

import numpy as np

from ..errors import InputError

#: IDX dtype code -> big-endian numpy dtype.
IDX_DTYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

_GZIP_MAGIC = b"\x1f\x8b"


def _read_bytes(path):
    with open(path, "rb") as f:
        raw = f.read()
    if not raw.startswith(_GZIP_MAGIC):
        return raw
    try:
        return gzip.decompress(raw)
    except (EOFError, OSError, zlib.error) as e:
        raise InputError(
            f"read_idx: {path!r} starts with the gzip magic bytes but is not a complete gzip "
            f"stream ({len(raw)} compressed bytes received: {e}); the file is truncated or corrupt, "
            f"download or copy it again"
        ) from None


def read_idx(path):
    """Return the array stored in the IDX file ``path`` (gzip-compressed or plain).

    The array has the declared shape and the native-endian form of the declared
    dtype.  A truncated or corrupt file raises ``InputError`` naming the file.
    """
    path = os.fspath(path)
    raw = _read_bytes(path)
    if len(raw) < 4:
        raise InputError(
            f"read_idx: {path!r} is not an IDX file: expected at least a 4-byte header, "
            f"received {len(raw)} bytes"
        )
    if raw[0] != 0 or raw[1] != 0 or raw[2] not in IDX_DTYPES:
        codes = ", ".join(f"0x{c:02X}" for c in IDX_DTYPES)
        raise InputError(
            f"read_idx: {path!r} is not an IDX file: expected magic bytes 00 00 <dtype code in {codes}> "
            f"<ndim>, received {raw[:4].hex(' ')}"
        )
    dtype, ndim = IDX_DTYPES[raw[2]], raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise InputError(
            f"read_idx: {path!r} is truncated: expected a {header}-byte header for {ndim} dims, "
            f"received {len(raw)} bytes"
        )
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) != expected:
        problem = "truncated" if len(raw) < expected else "corrupt (trailing bytes)"
        raise InputError(
            f"read_idx: {path!r} is {problem}: header declares shape {shape} of {dtype.name}, so "
            f"expected {expected} bytes (decompressed), received {len(raw)} bytes"
        )
    data = np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape)
    return data.astype(dtype.newbyteorder("="), copy=True)
