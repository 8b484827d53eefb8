"""OneFlow 0.3+'s model I/O: ``flow.checkpoint.save/get``, ``flow.load_variables``, ``flow.get_all_variables``.

    flow.checkpoint.save("pretrained")                 # every job-function variable, by name
    values = flow.checkpoint.get("pretrained")         # name -> value (.numpy(), .shape, .dtype)
    flow.load_variables(values)                        # fine-tuning: the names this program has, loaded;
                                                       # its other variables keep their initial values

The files are flowlayers' checkpoint format (``framework/checkpoint_format.py``: one logical array per
variable, checksummed, written atomically), so a save loads in any view, mesh or device count.  ``get`` also
reads a directory OneFlow itself wrote with ``flow.checkpoint.save`` (one folder per variable holding its raw
bytes ``out`` and its ``meta``).
"""
import errno
import math
import os
import re
import stat

import numpy as np

from . import dtypes, job
from .errors import CheckpointError, DTypeError, ShapeError, describe_shape
from .framework import checkpoint_format
from .framework.variable import Variable, store

ONEFLOW_DATA, ONEFLOW_META = "out", "meta"
ONEFLOW_META_LIMIT = 1 << 20        # bytes: a meta file is a few lines of text
ONEFLOW_DTYPES = {"kFloat": np.float32, "kDouble": np.float64, "kFloat16": np.float16, "kInt8": np.int8,
                  "kInt32": np.int32, "kInt64": np.int64, "kUInt8": np.uint8, "kChar": np.int8}


def get_all_variables():
    """Every job-function variable (``flow.get_variable`` and the layers of job functions), by name.  As in
    OneFlow, every job function defined so far is built first (in the view in force), so its variables exist."""
    for fn in job.registered():
        fn.build()
    return dict(store.variables)


def save(path, var_dict=None):
    """Write ``var_dict`` (name -> variable, array or a value ``get`` returned; default: every variable) to the
    directory ``path``, which must not exist or be empty (as in OneFlow)."""
    path = os.fspath(path)
    if os.path.isfile(path) or (os.path.isdir(path) and os.listdir(path)):
        raise CheckpointError(f"flow.checkpoint.save: expected a new or empty directory, received {path!r}, which "
                              f"already holds files; choose another path or remove it first")
    values = get_all_variables() if var_dict is None else var_dict
    if not isinstance(values, dict):
        raise CheckpointError(f"flow.checkpoint.save: var_dict expected None or a dict name -> value, received "
                              f"{type(values).__name__}")
    if os.path.isdir(path):
        os.rmdir(path)              # empty: the atomic save makes it anew
    checkpoint_format.save(path, {name: _as_value(name, v, "flow.checkpoint.save") for name, v in values.items()})


def get(path):
    """The values saved in ``path``: ``{name: value}``, each with ``.numpy()``, ``.shape`` and ``.dtype``; a
    directory OneFlow wrote for one variable gives that variable's value alone."""
    path = os.fspath(path)
    if not os.path.isdir(path) and not checkpoint_format.exists(path):
        raise CheckpointError(f"flow.checkpoint.get: expected a checkpoint directory, received {path!r}, which "
                              f"does not exist")
    if os.path.isfile(os.path.join(path, ONEFLOW_DATA)):
        return OneFlowValue(path)
    if not os.path.exists(os.path.join(path, checkpoint_format.MANIFEST)) and os.path.isdir(path):
        found = {name: OneFlowValue(os.path.join(path, name)) for name in sorted(os.listdir(path))
                 if os.path.isfile(os.path.join(path, name, ONEFLOW_DATA))}
        if found:
            return found
    reader = checkpoint_format.Reader(path)
    reader.verify(reader.entries)
    return {key: SavedValue(reader, key) for key in reader.entries}


def load_variables(value_dict, ignore_mismatch=True):
    """Assign each value of ``value_dict`` (name -> array, variable or a value ``get`` returned) to the variable
    of that name.  Names that are no variable here are skipped, or refused when ``ignore_mismatch`` is False.
    Every name, shape and dtype is checked before anything is assigned."""
    if not isinstance(value_dict, dict):
        raise CheckpointError(f"flow.load_variables: value_dict expected a dict name -> value, received "
                              f"{type(value_dict).__name__}")
    if not isinstance(ignore_mismatch, bool):
        raise CheckpointError(f"flow.load_variables: ignore_mismatch expected True or False, received "
                              f"{ignore_mismatch!r}")
    variables = get_all_variables()
    unknown = sorted(name for name in value_dict if name not in variables)
    if unknown and not ignore_mismatch:
        mine = sorted(variables)
        raise CheckpointError(f"flow.load_variables: {unknown[:5]}{' ...' if len(unknown) > 5 else ''} expected "
                              f"to name variables of this program, which has {mine[:8]}"
                              f"{' ...' if len(mine) > 8 else ''}; pass ignore_mismatch=True to skip them")
    try:          # every value checked as its variable takes it before any is assigned
        todo = {name: variables[name].checked(_as_value(name, value, "flow.load_variables").numpy())
                for name, value in value_dict.items() if name in variables}
    except (ShapeError, DTypeError) as e:
        raise type(e)(f"flow.load_variables: {e}") from None
    for name, array in todo.items():
        variables[name].assign(array)


class SavedValue:
    """One array of a flowlayers checkpoint, read (and checked against its checksum) when asked for."""

    def __init__(self, reader, key):
        self._reader, self._key = reader, key
        entry = reader.entries[key]
        self.shape, self.dtype = tuple(entry["shape"]), dtypes.as_dtype(entry["dtype"])

    def numpy(self):
        return self._reader.read(self._key)

    def __repr__(self):
        return f"SavedValue({self._key!r}, shape={describe_shape(self.shape)}, dtype={self.dtype.name})"


class OneFlowValue:
    """One variable of a checkpoint OneFlow wrote: ``<dir>/out`` (raw bytes) described by ``<dir>/meta``."""

    def __init__(self, directory):
        self.directory = directory
        meta = os.path.join(directory, ONEFLOW_META)
        if not os.path.isfile(meta):
            raise CheckpointError(f"flow.checkpoint.get: {directory!r} expected a {ONEFLOW_META!r} file with the "
                                  f"variable's shape and data type, received none (a legacy snapshot): load it "
                                  f"with flow.train.CheckPoint().load in OneFlow and save it again")
        with _regular(meta) as f:
            text = f.read(ONEFLOW_META_LIMIT + 1).decode(errors="replace")
        if len(text) > ONEFLOW_META_LIMIT:
            raise CheckpointError(f"flow.checkpoint.get: {meta!r} expected a meta file of at most {ONEFLOW_META_LIMIT} "
                                  f"bytes, received more")
        dims = re.findall(r"dim:\s*(\d+)", text)
        kind = re.search(r"data_type:\s*(\w+)", text)
        if kind is None or kind.group(1) not in ONEFLOW_DTYPES:
            raise CheckpointError(f"flow.checkpoint.get: {meta!r} expected a data_type among "
                                  f"{sorted(ONEFLOW_DTYPES)}, received {kind.group(1) if kind else 'none'}")
        self.shape, self._numpy_dtype = tuple(int(d) for d in dims), np.dtype(ONEFLOW_DTYPES[kind.group(1)])
        self.dtype = dtypes.as_dtype(self._numpy_dtype.name)
        self._bytes = math.prod(self.shape) * self._numpy_dtype.itemsize
        with _regular(os.path.join(directory, ONEFLOW_DATA)) as f:
            size = os.fstat(f.fileno()).st_size
        if size != self._bytes:
            raise CheckpointError(f"flow.checkpoint.get: {os.path.join(directory, ONEFLOW_DATA)!r} expected "
                                  f"{self._bytes} bytes for shape {describe_shape(self.shape)} {self._numpy_dtype}, "
                                  f"received {size}")

    def numpy(self):
        path = os.path.join(self.directory, ONEFLOW_DATA)
        with _regular(path) as f:
            data = f.read(self._bytes + 1)
        if len(data) != self._bytes:
            raise CheckpointError(f"flow.checkpoint.get: {path!r} expected {self._bytes} bytes for shape "
                                  f"{describe_shape(self.shape)} {self._numpy_dtype}, received {len(data)}")
        return np.frombuffer(data, self._numpy_dtype).reshape(self.shape).copy()

    def __repr__(self):
        return f"OneFlowValue({self.directory!r}, shape={describe_shape(self.shape)}, dtype={self.dtype.name})"


def _regular(path):
    """``path`` open for reading, if it is a regular file: a link is not followed, a FIFO or device not read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise CheckpointError(f"flow.checkpoint.get: {path!r} expected a regular file, received "
                              f"{'a symbolic link' if e.errno == errno.ELOOP else e.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise CheckpointError(f"flow.checkpoint.get: {path!r} expected a regular file, received a FIFO, device or "
                              f"directory")
    return os.fdopen(fd, "rb")


class _Array:
    def __init__(self, array):
        self.array = array

    def numpy(self):
        return self.array


def _as_value(name, value, what):
    """Anything with ``.numpy()`` (a variable, a saved value), or an array."""
    if isinstance(value, (Variable, SavedValue, OneFlowValue)):
        return value
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise CheckpointError(f"{what}: {name!r} expected an array of numbers, a variable or a value "
                              f"flow.checkpoint.get returned, received {type(value).__name__}")
    return _Array(array)
