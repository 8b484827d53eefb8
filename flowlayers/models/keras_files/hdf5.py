"""HDF5 through h5py, read with care: only groups and datasets stored in the file itself (a soft or external link,
an external or virtual dataset is refused), numbers only (never an object or string dataset), and a dataset
declaring far more bytes than the file stores is refused before it is read.

    with hdf5.reading(path, where) as f:
        group = hdf5.group(f, "layers/dense/vars", where)
        kernel = hdf5.array(group, "0", where)
"""
import contextlib
import io
import json
import math

import numpy as np

from ... import dtypes
from ...errors import CheckpointError

try:
    import h5py
except ImportError:         # an optional dependency: the error names it where a file needs it
    h5py = None

BOMB_FLOOR = 1 << 28        # bytes a dataset may declare before its stored size must account for them
MAX_EXPANSION = 1000        # declared bytes per byte stored, at most (compressed weights stay far below)
ATTR_LIMIT = 64 << 20       # bytes of a JSON attribute (a model's config)


def require(where):
    if h5py is None:
        raise CheckpointError(f"{where}: this file format is HDF5, which needs the h5py package; expected it "
                              f"installed (pip install h5py), or save to a path without .keras/.h5 (flowlayers' "
                              f"checkpoint directory needs no h5py)")


@contextlib.contextmanager
def reading(source, where):
    """An h5py File open for reading ``source`` (a path or bytes); a file h5py cannot read is a CheckpointError."""
    require(where)
    try:
        f = h5py.File(io.BytesIO(source) if isinstance(source, bytes) else source, "r")
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{where}: expected an HDF5 file, received one h5py cannot read ({e})") from None
    try:
        yield f
    finally:
        f.close()


def has(parent, path, where):
    """Whether the group ``path`` (``a/b/c``) is under ``parent``: False where a part of it is absent; a link on
    the way, or a dataset where a group belongs, is refused by name (a file is not read through either)."""
    current = parent
    for part in _parts(path):
        if _link_type(current, part) is None:
            return False
        current = _as_group(_member(current, part, where), where)
    return True


def group(parent, path, where):
    """The group at ``path`` under ``parent``, reached through hard links only."""
    current = parent
    for part in _parts(path):
        current = _as_group(_member(current, part, where), where)
    return current


def _parts(path):
    return [p for p in path.split("/") if p]


def _as_group(obj, where):
    if not isinstance(obj, h5py.Group):
        raise CheckpointError(f"{where}: expected {obj.name!r} to be an HDF5 group, received {type(obj).__name__}")
    return obj


def _link_type(parent, name):
    """The kind of link ``name`` is in ``parent`` (h5py.h5l.TYPE_HARD, _SOFT, _EXTERNAL ...), or None where there
    is none; asked of the link itself, so a soft link whose target is missing is found too."""
    key = name.encode("utf-8")
    if not parent.id.links.exists(key):
        return None
    return parent.id.links.get_info(key).type


def _member(parent, name, where):
    kind = _link_type(parent, name)
    where_in = f"{parent.name.rstrip('/')}/{name}"
    if kind is None:
        raise CheckpointError(f"{where}: expected {where_in} in the file, received a file without it")
    if kind != h5py.h5l.TYPE_HARD:
        link = {h5py.h5l.TYPE_SOFT: "SoftLink", h5py.h5l.TYPE_EXTERNAL: "ExternalLink"}.get(kind, "user-defined link")
        raise CheckpointError(f"{where}: {where_in} is an HDF5 {link}; expected members stored in the file itself "
                              f"(links are not followed)")
    return parent[name]


def array(parent, name, where):
    """The numbers of dataset ``name`` (it may be a path) under ``parent``, checked before they are read."""
    head, _, tail = name.rpartition("/")
    ds = _member(group(parent, head, where) if head else parent, tail, where)
    what = f"dataset {ds.name!r}"
    if not isinstance(ds, h5py.Dataset):
        raise CheckpointError(f"{where}: expected {what} to hold an array, received an HDF5 {type(ds).__name__}")
    if ds.external or ds.is_virtual:
        raise CheckpointError(f"{where}: {what} keeps its data outside the file (external or virtual); expected "
                              f"data stored in the file")
    dtype = ds.dtype
    bfloat16 = ds.attrs.get("dtype") in ("bfloat16", b"bfloat16")
    if not bfloat16 and dtype.kind not in "biuf":
        raise CheckpointError(f"{where}: {what} holds dtype {dtype}; expected numbers (ints, floats, bools)")
    declared = math.prod(ds.shape or ()) * dtype.itemsize
    if declared > BOMB_FLOOR and declared > MAX_EXPANSION * max(ds.id.get_storage_size(), 1):
        raise CheckpointError(f"{where}: {what} declares shape {ds.shape} ({declared:,} bytes) but the file stores "
                              f"{ds.id.get_storage_size():,} bytes of it; refused before reading")
    value = ds[()]
    value = np.asarray(value)
    if bfloat16:
        if value.dtype.itemsize != 2:
            raise CheckpointError(f"{where}: {what} says bfloat16 but holds {value.dtype.itemsize}-byte items")
        value = value.view(dtypes.bfloat16.numpy)
    return value


def names(parent):
    """The member names of a group (datasets and groups), sorted as Keras numbers them (``"0"``, ``"1"``...)."""
    return sorted(parent.keys(), key=lambda k: (not k.isdigit(), int(k) if k.isdigit() else 0, k))


def text_attribute(obj, name, where):
    """A string attribute (Keras writes JSON configs as UTF-8 bytes or strings), or None where absent."""
    value = obj.attrs.get(name)
    if value is None:
        return None
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if not isinstance(value, str):
        raise CheckpointError(f"{where}: attribute {name!r} expected text, received {type(value).__name__}")
    if len(value) > ATTR_LIMIT:
        raise CheckpointError(f"{where}: attribute {name!r} holds {len(value):,} characters; expected a config of "
                              f"at most {ATTR_LIMIT:,}")
    return value


def json_attribute(obj, name, where):
    text = text_attribute(obj, name, where)
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise CheckpointError(f"{where}: attribute {name!r} expected JSON, received text JSON cannot read "
                              f"({e})") from None


def list_attribute(obj, name):
    """A list of strings Keras keeps in an attribute (possibly split over ``name0``, ``name1``... when long)."""
    if name in obj.attrs:
        chunks = [obj.attrs[name]]
    else:
        chunks, i = [], 0
        while f"{name}{i}" in obj.attrs:
            chunks.append(obj.attrs[f"{name}{i}"])
            i += 1
    out = []
    for chunk in chunks:
        for item in np.atleast_1d(np.asarray(chunk)).tolist():
            out.append(item.decode("utf-8") if isinstance(item, bytes) else str(item))
    return out


def write_array(parent, name, value):
    """Dataset ``name`` (a path makes its groups) holding ``value``; a bfloat16 array is marked as Keras marks it."""
    value = np.asarray(value)
    ds = parent.create_dataset(name, data=value)
    if value.dtype == dtypes.bfloat16.numpy:
        ds.attrs["dtype"] = "bfloat16"
    return ds
